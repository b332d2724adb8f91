/* SPDX-License-Identifier: MIT */
/*
 * test/lib/fail.h - how test/lib reports a failure it cannot return.
 *
 * test/lib is shared by the Criterion suites (test/test_*.c) and the stress
 * programs (test/stress/, which also run under ThreadSanitizer, where
 * Criterion cannot), so it never calls Criterion.  Most helpers return a
 * result for the caller to assert on.  The few that fail on their own (a
 * timed join that gives up, a watchdog) call tl_fail(), which formats the
 * message, hands it to the hook, and aborts if the hook returns.
 *
 * Usage: a stress program needs nothing (the default hook prints the
 * message to stderr, then the program aborts).  A Criterion suite includes
 * test/criterion_hook.h (outside test/lib), whose constructor installs a
 * hook that turns the message into the running test's failed assertion.
 */
#ifndef LULL_TEST_LIB_FAIL_H
#define LULL_TEST_LIB_FAIL_H

typedef void (*tl_fail_hook)(const char *msg);

/* Set the hook tl_fail() calls; NULL restores the default (stderr). */
void tl_set_fail_hook(tl_fail_hook hook);

/* Report @fmt through the hook; aborts when the hook returns. */
__attribute__((format(printf, 1, 2), noreturn)) void tl_fail(const char *fmt,
							     ...);

#endif
