/* SPDX-License-Identifier: MIT */
/* version.c - the library version and error strings. */
#include <string.h>

#include "lull.h"
#include "sys.h"

LULL_EXPORT const char *lull_version(void)
{
	return LULL_VERSION_STRING;
}

LULL_EXPORT const char *lull_strerror(int err)
{
	/* Through unsigned: -INT_MIN does not fit in an int. */
	unsigned code = err < 0 ? 0u - (unsigned)err : (unsigned)err;

	/* Word for word the table in lull/ring.h ("Errors are ..."). */
	switch (code) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case EAGAIN:
		return "ring full or empty, try again";
	case EMSGSIZE:
		return "record larger than the ring's maximum payload";
	case EBUSY:
		return "busy: a role or claim is taken, the submission queue is "
		       "full, or the park, loop or handler is already set up or "
		       "running";
	case EPERM:
		return "not permitted: not the consumer handle, not the "
		       "producer's own thread, or io_uring disabled in this "
		       "process";
	case ENOMEM:
		return "out of memory";
	case EPROTO:
		return "not a lull region of this layout version, or corrupt";
	case EPIPE:
		return "ring shut down";
	case EALREADY:
		return "already done: a park is armed, or a fatal was reported";
	case ENOENT:
		return "not found: nothing armed, attached or pending";
	default:
		/* Any other errno value, e.g. one a callback passed on. */
		return strerrordesc_np((int)code) ? strerrordesc_np((int)code)
						  : "unknown error";
	}
}
