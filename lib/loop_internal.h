/* SPDX-License-Identifier: MIT */
/*
 * loop_internal.h - the loop's state, and the one interface between the
 * loop's core and its backends.  Never installed.
 *
 * The files, in the order to read them, and who links to whom (an arrow is
 * a call or a reference the linker resolves; there is no circle, which
 * ../shared/tools/objcycles.py checks over build/lib/liblull.a):
 *
 *   loop.c            the core: lifecycle, run and stop, the park over
 *    |                every attached ring (composing park.c's steps)
 *    |-> loop_rings.c   attach, detach, drain, and shut the rings down
 *    |-> loop_ops.c     user SQEs, cancels, timers, signals: the core side
 *    |-> loop_bridge.c  a shared ring's futex, bridged to the loop's
 *    |                  eventfd on the backends that sleep on it
 *    |-> loop_backend.c which backend a loop runs on: the only file that
 *    |    |             names them
 *    |    |-> loop_uring.c  uring-futex and uring-eventfd
 *    |    '-> loop_epoll.c  epoll: sleep, wake, timers and signals
 *    |         '-> loop_epoll_sqe.c  the SQEs it emulates
 *    '-> loop_complete.c  the completion entry points, and the op pool
 *
 * loop_rings.c and loop_ops.c use loop_complete.c too; the backends use
 * nothing of the core but loop_complete.c.  The core calls a backend only
 * through loop->be, a struct loop_backend, whose functions it reaches
 * through pointers: no core file names a backend or tests which one it
 * runs on.  A backend reports back only through the entry points of
 * loop_complete.c (an op completed, a timer fired or went, a signal
 * arrived), which never call into the core's other files: when a timer
 * re-arms, it does so through loop->be as well.  A woken ring needs no
 * entry point: every pass drains every ring, whatever woke the loop.
 *
 * One pass of lull_loop_run() makes two calls through loop->be (reap,
 * poll), and a park or a coalescing window one more (wait); none is made
 * per record.
 */
#ifndef LULL_LOOP_INTERNAL_H
#define LULL_LOOP_INTERNAL_H

#include <signal.h>
#include <sys/signalfd.h>

#include "handles.h"
#include "park.h"
#include "sys.h"
#include "uring_compat.h"

/*
 * Every user_data (io_uring) or epoll key the loop makes is a pointer to
 * one of the objects below with its kind in the low bits (all are 8-byte
 * aligned).  The core sets a user op's; the backends, the others.
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

/* A ring attached to the loop. */
struct loop_ring {
	struct lull_ring *ring;
	lull_record_fn fn;       /* one of the two is set: records, */
	lull_items_fn items_fn;  /* or runs (lull_loop_attach_items()) */
	void *ctx;
	unsigned batch;
	/* The uring backends': */
	bool futex_armed; /* uring-futex: a wait on its park word in flight */
	/* uring-futex: that wait's kind, LULL_PARK_FUTEX or _FUTEX_PRIVATE */
	uint32_t futex_how;
	bool detached;    /* freed when that wait completes */
	struct loop_ring *next_detached; /* the backend's detached list */
	/* A shared ring's producer processes (loop_rings.c), or NULL. */
	struct loop_watch *watch;
	/*
	 * A shared ring on a backend that parks on its eventfd: the bridge
	 * from its futex to the loop's eventfd (loop_bridge.c), or NULL.
	 * The ring then parks as LULL_PARK_FUTEX.
	 */
	struct loop_bridge *bridge;
};

/*
 * The bridge of a shared ring (loop_bridge.c): start its thread, which
 * writes @kick_fd when a producer wakes the ring's futex; arm it each
 * time the loop sleeps with the ring parked; stop it once the ring's
 * park is over for good (park word AWAKE), which joins the thread.
 */
struct loop_bridge;
int lull__bridge_start(struct loop_bridge **bp, struct lull_region *region,
		       int kick_fd);
void lull__bridge_arm(struct loop_bridge *b);
void lull__bridge_stop(struct loop_bridge *b);

/* A user SQE in flight, or one the epoll backend emulates. */
struct loop_op {
	lull_cqe_fn fn;       /* NULL: the loop's own (an emulated cancel) */
	void *ctx;
	bool in_flight;       /* handed out, final completion still to come */
	bool cancel_asked;    /* lull_loop_cancel() or a stop asked already */
	struct loop_op *next; /* free list; epoll: pending/waiting lists */
	struct loop_op *all_next; /* every op the loop allocated */
	/* The epoll backend's: the SQE it emulates, and a TIMEOUT's end. */
	struct io_uring_sqe sqe;
	uint64_t deadline_ns;
};

struct lull_loop_timer {
	lull_timer_fn fn;
	void *ctx;
	uint64_t interval_ns;
	bool cancelled;
	bool firing;               /* its callback is running */
	struct lull_loop_timer *next;
	/* The backends': */
	bool armed;                  /* uring: a TIMEOUT in flight */
	struct __kernel_timespec ts; /* uring: read at submission */
	uint64_t deadline_ns;        /* epoll: UINT64_MAX never comes */
};

struct lull_loop {
	const struct loop_backend *be;
	void *be_data; /* the backend's own state */
	int backend;   /* enum lull_backend, for lull_loop_backend() */
	bool running;
	_Atomic unsigned stop_requests; /* lull_loop_stop() calls */
	unsigned stops_seen;            /* of them, acted upon */
	unsigned stops_at_run;          /* stops_seen when the run began */
	bool stopping;                  /* rings shut down, draining */

	int kick_fd; /* eventfd: lull_loop_stop() and eventfd wakes */

	uint64_t spin_ns;
	uint64_t safety_ns; /* 0: no safety net (the default) */
	uint64_t coalesce_ns;
	uint64_t records_at_rest; /* stats.records at the last park/window */
	uint64_t records_at_park; /* stats.records at the last park */

	struct loop_ring **rings;
	unsigned nrings;
	unsigned rings_cap;

	struct loop_op *all_ops;
	struct loop_op *free_ops;
	unsigned ops_in_flight;

	struct lull_loop_timer *timers; /* every live timer */

	int sigfd; /* -1 until lull_loop_signals() */
	lull_signal_fn sigfn;
	void *sigctx;

	struct lull_loop_stats stats;
};

/*
 * A backend: what the core asks of the mechanism that sleeps, submits and
 * completes.  Every function runs on the loop's thread (or, before the
 * first run, the single thread that sets the loop up).
 */
struct loop_backend {
	/*
	 * What a park announces on every ring: LULL_PARK_FUTEX or _EVENTFD;
	 * with ring_park_how, what that says for each ring.
	 */
	uint32_t park_how;
	/*
	 * Optional: what a park announces on @lr, the futex kind of the wait
	 * that the sleep after it arms (or that is in flight already).
	 */
	uint32_t (*ring_park_how)(struct lull_loop *loop, struct loop_ring *lr);
	/*
	 * Set up loop->be_data for a loop of @entries SQ entries (0: the
	 * default); loop->kick_fd exists already.  Returns 0, or a negative
	 * errno with nothing left to undo.
	 */
	int (*init)(struct lull_loop *loop, unsigned entries);
	/* Release it all; what is in flight is dropped, no callback runs. */
	void (*fini)(struct lull_loop *loop);
	/* lull_loop_run() starts on this thread.  Returns 0 or an error. */
	int (*start)(struct lull_loop *loop);
	/*
	 * The SQE for user op @op, to be submitted by a later reap, poll or
	 * wait; NULL when there is none (the SQ is full even after a flush).
	 */
	struct io_uring_sqe *(*sqe)(struct lull_loop *loop, struct loop_op *op);
	/*
	 * Ask for @op to be cancelled; it completes later, through
	 * lull__loop_op_complete().  Returns 0, -EBUSY (no SQE) or -ENOMEM.
	 */
	int (*cancel)(struct lull_loop *loop, struct loop_op *op);
	/*
	 * Arm @timer to fire (lull__loop_timer_fired()) after @delay_ns;
	 * UINT64_MAX never comes.  Returns 0 or -EBUSY (no SQE).
	 */
	int (*timer_arm)(struct lull_loop *loop, struct lull_loop_timer *timer,
			 uint64_t delay_ns);
	/*
	 * @timer was cancelled (timer->cancelled is set): disarm it, and hand
	 * it to lull__loop_timer_gone() now or once it is no longer in use.
	 */
	void (*timer_cancel)(struct lull_loop *loop,
			     struct lull_loop_timer *timer);
	/* loop->sigfd was opened: watch it.  Returns 0 or an error. */
	int (*signals)(struct lull_loop *loop);
	/* @lr was attached: make its producers' wake-ups reach the loop. */
	int (*ring_attached)(struct lull_loop *loop, struct loop_ring *lr);
	/*
	 * @lr was detached.  Returns true when the backend still refers to
	 * it and frees it itself later, false when the core frees it now.
	 */
	bool (*ring_detached)(struct lull_loop *loop, struct loop_ring *lr);
	/*
	 * First in a pass: start what is queued, and complete what is done,
	 * without sleeping.  Returns true when a completion ran the user's
	 * code (a callback, a timer, a signal), which may have queued more;
	 * a ring's wake-up alone is not that, since the pass drains every
	 * ring next.
	 */
	bool (*reap)(struct lull_loop *loop);
	/*
	 * Last in a pass that has more to do (@busy), or whose park was
	 * cancelled: let I/O, timers and signals in without sleeping, so
	 * that rings that keep the loop busy starve none of them.  Returns 1
	 * when the loop must take another pass (@busy, or SQEs are queued
	 * that only a pass starts), 0 when it may park, or an error.
	 */
	int (*poll)(struct lull_loop *loop, bool busy);
	/*
	 * Submit what is queued and sleep until an event, at most
	 * @timeout_ns (LULL_NS_FOREVER or more: no limit), also for timers
	 * that come sooner.  @parked: every ring has announced its park,
	 * so its producers' wake-ups must reach this sleep.  Returns 1 when
	 * @timeout_ns ran out with nothing else happening, 0 when something
	 * happened (or the sleep could not be taken), or an error.
	 */
	int (*wait)(struct lull_loop *loop, uint64_t timeout_ns, bool parked);
};

/* Arm the watch of every shared ring that has none in flight: at each
 * run's start, since a stop cancels them (loop_rings.c). */
void lull__loop_watch_arm(struct lull_loop *loop);

/* The backend for @backend (enum lull_backend), or NULL (loop_backend.c). */
const struct loop_backend *lull__loop_backend(int backend);

/* The backends (loop_uring.c, loop_epoll.c), for loop_backend.c only. */
extern const struct loop_backend lull__loop_uring_futex;
extern const struct loop_backend lull__loop_uring_eventfd;
extern const struct loop_backend lull__loop_epoll;

/* --- the epoll backend's state, shared by its two files --------------- */

struct loop_epoll {
	int epfd;
	unsigned kicks_unread; /* edges of the eventfd since it was read */
	struct loop_op *pending; /* queued, not yet started (newest first) */
	struct loop_op *waiting; /* waiting for readiness or time */
};

static inline struct loop_epoll *loop_epoll_of(const struct lull_loop *loop)
{
	return loop->be_data;
}

/* loop_epoll_sqe.c: start a queued SQE: complete it now, or make it wait. */
void lull__epoll_op_start(struct lull_loop *loop, struct loop_op *op);
/* Descriptor @fd is ready with @revents: run the SQEs waiting on it. */
void lull__epoll_fd_ready(struct lull_loop *loop, int fd, uint32_t revents);
/* Complete the TIMEOUTs and fire the timers whose deadline passed. */
void lull__epoll_fire_due(struct lull_loop *loop);

/* --- loop_complete.c: the completion entry points, the op pool -------- */

/* A recycled or new op, on loop->all_ops; NULL when out of memory. */
struct loop_op *lull__loop_op_alloc(struct lull_loop *loop);
/* Recycle @op, which was never handed out. */
void lull__loop_op_free(struct lull_loop *loop, struct loop_op *op);
/* Run an op's callback and recycle it unless more CQEs follow. */
void lull__loop_op_complete(struct lull_loop *loop, struct loop_op *op,
			    int res, uint32_t flags);
/* A timer fired: run it, then re-arm or free it. */
void lull__loop_timer_fired(struct lull_loop *loop,
			    struct lull_loop_timer *timer);
/* A timer is done with (cancelled and disarmed): free it. */
void lull__loop_timer_gone(struct lull_loop *loop,
			   struct lull_loop_timer *timer);
/* Signal @signo arrived on loop->sigfd. */
void lull__loop_signal(struct lull_loop *loop, int signo);

/* --- loop_rings.c ------------------------------------------------------ */

/*
 * One batch from every ring.  Returns 1 when some ring may hold more, so
 * the loop should not park yet, 0 when none does, or a ring's read error
 * other than the end of a corrupt one (which delivers its poison and
 * detaches like any other), which ends the run.
 */
int lull__loop_drain(struct lull_loop *loop);
/* Shut every attached ring down, @how (LULL_SHUTDOWN_*). */
void lull__loop_rings_shutdown(struct lull_loop *loop, unsigned how);
/* Let go of every ring (lull_loop_destroy()). */
void lull__loop_rings_free(struct lull_loop *loop);

/* --- loop_ops.c -------------------------------------------------------- */

/*
 * Ask every user op in flight whose ctx is @ctx (any ctx when @all) to be
 * cancelled, once each.  Returns how many were asked, or the first error.
 */
int lull__loop_ops_cancel(struct lull_loop *loop, void *ctx, bool all);
/* Whether a user op in flight has not been asked to cancel yet. */
bool lull__loop_ops_to_cancel(const struct lull_loop *loop);
/* Free every op and timer (lull_loop_destroy()). */
void lull__loop_ops_free(struct lull_loop *loop);

/* Has lull_loop_stop() been called since the loop last acted on it? */
static inline bool lull__loop_stop_pending(struct lull_loop *loop)
{
	/* Pairs with the release RMW in lull_loop_stop(). */
	return atomic_load_explicit(&loop->stop_requests,
				    memory_order_acquire) != loop->stops_seen;
}

#endif /* LULL_LOOP_INTERNAL_H */
