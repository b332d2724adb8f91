/* SPDX-License-Identifier: MIT */
/*
 * loop_internal.h - the loop's state, shared by loop.c (the loop itself and
 * its io_uring backends) and loop_epoll.c (the fallback without io_uring).
 */
#ifndef LULL_LOOP_INTERNAL_H
#define LULL_LOOP_INTERNAL_H

#include <signal.h>
#include <sys/signalfd.h>

#include "internal.h"
#include "uring_compat.h"

/*
 * Every CQE's user_data is a pointer to one of the objects below with its
 * kind in the low bits (all are 8-byte aligned).
 */
enum loop_tag {
	TAG_OP = 0,     /* struct loop_op: a user SQE */
	TAG_RING = 1,   /* struct loop_ring: its futex wait */
	TAG_KICK = 2,   /* the loop's eventfd read */
	TAG_TIMER = 3,  /* struct lull_loop_timer */
	TAG_SIGNAL = 4, /* the signalfd read */
	TAG_IGNORE = 5, /* internal cancels and removes */
};
#define TAG_MASK 7u

static inline uint64_t loop_tag(const void *ptr, enum loop_tag tag)
{
	return (uint64_t)(uintptr_t)ptr | tag;
}

struct loop_ring {
	struct lull_ring *ring;
	lull_record_fn fn;
	void *ctx;
	unsigned batch;
	bool futex_armed; /* URING_FUTEX: a wait on its park word in flight */
	bool detached;    /* freed when the armed wait completes */
	struct loop_ring *next_detached; /* loop->detached list */
};

/* A user SQE in flight.  In epoll mode it also holds the emulated SQE. */
struct loop_op {
	lull_cqe_fn fn;       /* NULL: the loop's own (an emulated cancel) */
	void *ctx;
	bool in_flight;       /* handed out, final completion still to come */
	bool cancel_asked;    /* lull_loop_cancel() or a stop asked already */
	struct loop_op *next; /* free list; epoll: pending/waiting lists */
	struct loop_op *all_next; /* every op the loop allocated */
	struct io_uring_sqe sqe;
	/* epoll emulation state */
	uint64_t deadline_ns; /* TIMEOUT */
	bool cancelled;
};

struct lull_loop_timer {
	struct lull_loop *loop;
	lull_timer_fn fn;
	void *ctx;
	uint64_t interval_ns;
	uint64_t deadline_ns;      /* epoll mode */
	struct __kernel_timespec ts; /* io_uring mode: read at submission */
	bool cancelled;
	bool armed;                /* io_uring: a TIMEOUT in flight */
	bool firing;               /* its callback is running */
	struct lull_loop_timer *next;
};

struct lull_loop {
	int backend;
	bool running;
	bool has_uring;
	bool uring_enabled; /* IORING_SETUP_R_DISABLED was lifted */
	bool no_iowait;
	bool any_asym; /* an attached ring uses the asymmetric barrier */
	_Atomic unsigned stop_requests; /* lull_loop_stop() calls */
	unsigned stops_seen;            /* of them, acted upon */
	unsigned stops_at_run;          /* stops_seen when the run began */
	bool stopping;                  /* rings shut down, draining */

	struct io_uring uring;
	int epfd;

	int kick_fd;        /* eventfd: lull_loop_stop() and eventfd wakes */
	uint64_t kick_buf;
	bool kick_armed;

	uint64_t spin_ns;
	uint64_t safety_ns;
	uint64_t coalesce_ns;
	uint64_t records_at_rest; /* stats.records at the last park/window */

	struct loop_ring **rings;
	unsigned nrings;
	unsigned rings_cap;

	struct loop_op *all_ops;
	struct loop_ring *detached; /* detached, futex wait still in flight */
	struct loop_op *free_ops;
	struct loop_op *pending_ops; /* epoll: queued, not yet started */
	struct loop_op *waiting_ops; /* epoll: waiting for readiness or time */
	unsigned ops_in_flight;

	struct lull_loop_timer *timers; /* every live timer */

	int sigfd;
	struct signalfd_siginfo sigbuf;
	bool sig_armed;
	lull_signal_fn sigfn;
	void *sigctx;

	struct lull_loop_stats stats;
};

/* Run a user op's callback and recycle it unless more CQEs follow. */
void lull__loop_op_complete(struct lull_loop *loop, struct loop_op *op,
			    int res, uint32_t flags);

/* A timer fired: run it, re-arm or free it. */
void lull__loop_timer_fired(struct lull_loop *loop,
			    struct lull_loop_timer *timer);

/* The epoll backend (loop_epoll.c). */
int lull__epoll_init(struct lull_loop *loop);
void lull__epoll_fini(struct lull_loop *loop);
/* Start what lull_loop_sqe() queued; complete what is ready. */
void lull__epoll_submit(struct lull_loop *loop);
/* Wait at most @timeout_ns (0: poll) for events and handle them. */
int lull__epoll_wait(struct lull_loop *loop, uint64_t timeout_ns);
/* Earliest deadline among emulated timeouts and timers, or UINT64_MAX. */
uint64_t lull__epoll_next_deadline(struct lull_loop *loop);

#endif /* LULL_LOOP_INTERNAL_H */
