/* SPDX-License-Identifier: MIT */
/*
 * lull.h - umbrella header: the version, error strings, and every public
 * part of lull.  See lull/ring.h for the rings.
 *
 * Every call returns 0 or a count on success and a negative errno value on
 * failure; lull never sets errno, never prints and never aborts.
 */
#ifndef LULL_H
#define LULL_H

#include <lull/ring.h>
#include <lull/park.h>
#include <lull/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LULL_VERSION_MAJOR 0
#define LULL_VERSION_MINOR 1
#define LULL_VERSION_PATCH 0
#define LULL_VERSION_STRING "0.1.0"

/* The library's version string ("MAJOR.MINOR.PATCH").  Any thread. */
const char *lull_version(void);

/*
 * A static, human-readable description of a lull return value: @err is a
 * negative errno value as returned by lull calls (a positive one is accepted
 * too).  Never NULL; thread-safe and async-signal-safe.
 */
const char *lull_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* LULL_H */
