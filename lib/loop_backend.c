/* SPDX-License-Identifier: MIT */
/*
 * loop_backend.c - which backend a loop runs on.  The one file of the loop
 * that names its backends, so that the core links to them only through
 * here, and they link back to nothing of the core but loop_complete.c.
 */
#include "loop_internal.h"

const struct loop_backend *lull__loop_backend(int backend)
{
	switch (backend) {
	case LULL_BACKEND_URING_FUTEX:
		return &lull__loop_uring_futex;
	case LULL_BACKEND_URING_EVENTFD:
		return &lull__loop_uring_eventfd;
	case LULL_BACKEND_EPOLL:
		return &lull__loop_epoll;
	default:
		return NULL; /* BLOCKING is no loop backend */
	}
}
