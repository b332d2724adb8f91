/* SPDX-License-Identifier: MIT */
/*
 * backend.c - which park backends this process can use: probed once, at
 * run time, because io_uring may be compiled in but disabled by sysctl
 * (kernel.io_uring_disabled) or blocked by a seccomp profile, and the
 * futex-wait opcode needs Linux 6.7.
 */
#include <stdlib.h>
#include <string.h>

#include "lull.h"
#include "sys.h"
#include "uring_compat.h"

static const char *const backend_names[] = {
	[LULL_BACKEND_AUTO] = "auto",
	[LULL_BACKEND_URING_FUTEX] = "uring-futex",
	[LULL_BACKEND_URING_EVENTFD] = "uring-eventfd",
	[LULL_BACKEND_BLOCKING] = "blocking",
	[LULL_BACKEND_EPOLL] = "epoll",
};

#define BACKEND_COUNT (sizeof(backend_names) / sizeof(backend_names[0]))

LULL_EXPORT const char *lull_backend_name(enum lull_backend backend)
{
	if ((unsigned)backend >= BACKEND_COUNT)
		return NULL;
	return backend_names[backend];
}

LULL_EXPORT int lull_backend_parse(const char *name)
{
	if (!name)
		return -EINVAL;
	for (unsigned i = 0; i < BACKEND_COUNT; i++)
		if (strcmp(name, backend_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

/*
 * The probe result: 0 not probed yet, else 1 + (0 or -errno) for io_uring
 * and for the futex opcode.  Racing probes compute the same answer;
 * uring_state is stored last, with release, so whoever reads it set also
 * sees futex_op_state.  Only lasting answers are kept: a
 * process out of descriptors or memory for a moment (-EMFILE, -ENOMEM)
 * must not lose io_uring for good, so such a probe is tried again.
 */
static _Atomic int uring_state;
static _Atomic int futex_op_state;

static bool probe_answer_lasts(int ret)
{
	return ret == 0 || ret == -ENOSYS || ret == -EPERM ||
	       ret == -EINVAL || ret == -EOPNOTSUPP;
}

/* Returns io_uring's answer; stored unless it is a passing one. */
static int probe(void)
{
	struct io_uring_params params;
	struct io_uring_probe *ops;
	struct io_uring ring;
	int ret, futex_ret;

	memset(&params, 0, sizeof(params));
	ret = io_uring_queue_init_params(2, &ring, &params);
	if (ret < 0) {
		/* ENOSYS: not built in; EPERM: sysctl or seccomp said no. */
		futex_ret = ret;
	} else {
		if (!(params.features & IORING_FEAT_EXT_ARG))
			ret = -EOPNOTSUPP; /* pre-5.11: no waits with timeout */
		ops = io_uring_get_probe_ring(&ring);
		futex_ret = ops && io_uring_opcode_supported(
					   ops, LULL_IORING_OP_FUTEX_WAIT)
				    ? 0
				    : -EOPNOTSUPP;
		if (ops)
			io_uring_free_probe(ops);
		io_uring_queue_exit(&ring);
		if (ret < 0)
			futex_ret = ret;
	}
	if (!probe_answer_lasts(ret))
		return ret;
	atomic_store_explicit(&futex_op_state, 1 + futex_ret,
			      memory_order_relaxed);
	/* Release, last: pairs with the acquire load in
	 * lull_backend_supported(), which then sees futex_op_state too. */
	atomic_store_explicit(&uring_state, 1 + ret, memory_order_release);
	return ret;
}

LULL_EXPORT int lull_backend_supported(enum lull_backend backend)
{
	int state, ret;

	switch (backend) {
	case LULL_BACKEND_BLOCKING:
	case LULL_BACKEND_EPOLL:
		return 0;
	case LULL_BACKEND_URING_FUTEX:
	case LULL_BACKEND_URING_EVENTFD:
		break;
	default:
		return -EINVAL;
	}
	/* Acquire: pairs with the release store at the end of probe(). */
	state = atomic_load_explicit(&uring_state, memory_order_acquire);
	if (state == 0) {
		ret = probe();
		if (!probe_answer_lasts(ret))
			return ret; /* not kept: asked again next time */
		state = atomic_load_explicit(&uring_state,
					     memory_order_acquire);
	}
	if (backend == LULL_BACKEND_URING_FUTEX)
		state = atomic_load_explicit(&futex_op_state,
					     memory_order_relaxed);
	return state - 1;
}

LULL_EXPORT int lull_backend_probe(void)
{
	static const enum lull_backend order[] = {
		LULL_BACKEND_URING_FUTEX,
		LULL_BACKEND_URING_EVENTFD,
		LULL_BACKEND_EPOLL,
	};
	const char *forced = getenv("LULL_BACKEND");
	int backend, ret;

	if (forced && *forced && strcmp(forced, "auto") != 0) {
		backend = lull_backend_parse(forced);
		if (backend < 0)
			return backend;
		ret = lull_backend_supported((enum lull_backend)backend);
		return ret < 0 ? ret : backend;
	}
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (lull_backend_supported(order[i]) == 0)
			return (int)order[i];
	return LULL_BACKEND_EPOLL;
}
