/* SPDX-License-Identifier: MIT */
/*
 * loop_uring.c - the loop's io_uring backends.  uring-futex keeps a futex
 * wait on every attached ring's park word in flight (Linux 6.7+);
 * uring-eventfd has producers write the loop's eventfd, which a read keeps
 * watched.  The futex waits are private where the ring's memory is the
 * process's own and the kernel cannot lose such a wait (sys.h), which
 * spares both sides of each wake-up the kernel's page lookup.  Both
 * submit user SQEs, timers and the signalfd read on the loop's io_uring,
 * and sleep in one io_uring_enter() that also submits.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"

#define LOOP_DEFAULT_ENTRIES 256u
#define LOOP_CQE_BATCH 64u

struct loop_uring {
	struct io_uring uring;
	bool enabled;   /* IORING_SETUP_R_DISABLED was lifted */
	bool no_iowait; /* the kernel takes IORING_ENTER_NO_IOWAIT */
	/* This run may arm private futex waits (asked at its start). */
	bool futex_private;
	bool kick_armed;
	bool sig_armed;
	uint64_t kick_buf;
	struct signalfd_siginfo sigbuf;
	struct loop_ring *detached; /* detached, futex wait still in flight */
};

static struct loop_uring *uring_of(const struct lull_loop *loop)
{
	return loop->be_data;
}

static int uring_init(struct lull_loop *loop, unsigned entries)
{
	struct io_uring_params params;
	struct loop_uring *u;
	int ret;

	if (!entries)
		entries = LOOP_DEFAULT_ENTRIES;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	memset(&params, 0, sizeof(params));
	/*
	 * SINGLE_ISSUER + DEFER_TASKRUN: completions are processed only when
	 * the loop's thread enters the kernel to wait, never by interrupting
	 * it.  R_DISABLED: the issuer becomes the thread that first runs the
	 * loop, not the one that created it.
	 */
	params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		       IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
	params.cq_entries = entries * 16;
	ret = io_uring_queue_init_params(entries, &u->uring, &params);
	if (ret == -EINVAL) { /* before Linux 6.1 */
		memset(&params, 0, sizeof(params));
		params.flags = IORING_SETUP_CQSIZE;
		params.cq_entries = entries * 16;
		ret = io_uring_queue_init_params(entries, &u->uring, &params);
	}
	if (ret < 0) {
		free(u);
		return ret;
	}
	if (!(params.features & IORING_FEAT_EXT_ARG)) {
		io_uring_queue_exit(&u->uring);
		free(u);
		return -EOPNOTSUPP;
	}
	u->enabled = !(params.flags & IORING_SETUP_R_DISABLED);
	u->no_iowait = params.features & IORING_FEAT_NO_IOWAIT;
	loop->be_data = u;
	return 0;
}

static void uring_fini(struct lull_loop *loop)
{
	struct loop_uring *u = uring_of(loop);

	/* Tearing the io_uring down cancels everything still in flight. */
	io_uring_queue_exit(&u->uring);
	while (u->detached) {
		struct loop_ring *lr = u->detached;

		u->detached = lr->next_detached;
		free(lr);
	}
	free(u);
	loop->be_data = NULL;
}

/* The first run: its thread becomes the io_uring's single issuer. */
static int uring_start(struct lull_loop *loop)
{
	struct loop_uring *u = uring_of(loop);
	int ret;

	/*
	 * Asked once a run: a process that was single-threaded when the run
	 * began keeps shared waits until the next run, which costs a page
	 * lookup a wake-up and loses nothing.
	 */
	u->futex_private = lull__futex_private_async_safe();
	if (u->enabled)
		return 0;
	ret = lull__uring_enable(&u->uring);
	if (ret < 0)
		return ret;
	u->enabled = true;
	return 0;
}

/*
 * An SQE from the loop's io_uring, flushing the queue to the kernel once
 * if it is full (not before the first run: the ring is disabled).  NULL
 * when there is still none.
 */
static struct io_uring_sqe *uring_get_sqe(struct loop_uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->uring);

	if (!sqe && u->enabled) {
		io_uring_submit(&u->uring);
		sqe = io_uring_get_sqe(&u->uring);
	}
	return sqe;
}

static struct io_uring_sqe *uring_sqe(struct lull_loop *loop,
				      struct loop_op *op)
{
	(void)op;
	return uring_get_sqe(uring_of(loop));
}

static int uring_cancel(struct lull_loop *loop, struct loop_op *op)
{
	struct io_uring_sqe *sqe = uring_get_sqe(uring_of(loop));

	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, loop_tag(op, TAG_OP), 0);
	io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
	return 0;
}

static int uring_timer_arm(struct lull_loop *loop,
			   struct lull_loop_timer *timer, uint64_t delay_ns)
{
	struct io_uring_sqe *sqe = uring_get_sqe(uring_of(loop));

	if (!sqe)
		return -EBUSY;
	/* UINT64_MAX ns is some 584 years: in range, and never comes. */
	timer->ts.tv_sec = (int64_t)(delay_ns / 1000000000u);
	timer->ts.tv_nsec = (long long)(delay_ns % 1000000000u);
	io_uring_prep_timeout(sqe, &timer->ts, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_tag(timer, TAG_TIMER));
	timer->armed = true;
	return 0;
}

static void uring_timer_cancel(struct lull_loop *loop,
			       struct lull_loop_timer *timer)
{
	struct io_uring_sqe *sqe;

	/* Inside its own callback: freed when the callback returns. */
	if (!timer->armed)
		return;
	/* Without an SQE it fires once more, silently, and is freed then. */
	sqe = uring_get_sqe(uring_of(loop));
	if (!sqe)
		return;
	/* Its TIMEOUT completes with -ECANCELED: freed then. */
	io_uring_prep_timeout_remove(sqe, loop_tag(timer, TAG_TIMER), 0);
	io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
}

/* The signalfd is read by an SQE that every poll and wait re-arms. */
static int uring_signals(struct lull_loop *loop)
{
	(void)loop;
	return 0;
}

/* uring-futex: the park word itself is watched, with a futex wait. */
static int uring_futex_ring_attached(struct lull_loop *loop,
				     struct loop_ring *lr)
{
	(void)loop;
	lr->futex_how = LULL_PARK_FUTEX;
	return 0;
}

/*
 * The futex kind @lr's next park announces: that of its wait in flight,
 * which waits for the word to hold that value, or else the kind its next
 * wait will have.  Private only for memory no other process maps.
 */
static uint32_t uring_futex_ring_park_how(struct lull_loop *loop,
					  struct loop_ring *lr)
{
	bool private_futex;

	if (!lr->futex_armed) {
		private_futex = uring_of(loop)->futex_private &&
				(lr->ring->flags & LULL_REGION_PRIVATE);
		lr->futex_how = private_futex ? LULL_PARK_FUTEX_PRIVATE
					      : LULL_PARK_FUTEX;
	}
	return lr->futex_how;
}

/* uring-eventfd: producers of this ring write the loop's eventfd. */
static int uring_eventfd_ring_attached(struct lull_loop *loop,
				       struct loop_ring *lr)
{
	return lull__wake_fd_set(lr->ring->region, loop->kick_fd);
}

static bool uring_ring_detached(struct lull_loop *loop, struct loop_ring *lr)
{
	struct loop_uring *u = uring_of(loop);
	struct io_uring_sqe *sqe;

	if (!lr->futex_armed)
		return false;
	/*
	 * Its futex wait is still in the kernel, pointing at lr through its
	 * user_data: cancel it, and free lr when its CQE arrives.
	 */
	lr->detached = true;
	lr->ring = NULL;
	lr->next_detached = u->detached;
	u->detached = lr;
	sqe = uring_get_sqe(u);
	if (sqe) {
		io_uring_prep_cancel64(sqe, loop_tag(lr, TAG_RING), 0);
		io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
		/* Now, not at the next park: the ring may be parked on
		 * elsewhere at once (lull__wake_region wakes every waiter
		 * of the word, so a late cancel costs no wake-up). */
		if (u->enabled)
			io_uring_submit(&u->uring);
	}
	/* Without an SQE the wait ends with the loop's io_uring. */
	return true;
}

/*
 * One completion.  Returns true when it ran the user's code (an op's
 * callback, a timer's, a signal's), which may have queued more: the pass
 * must go on.  A ring's futex wait and the kick read run none: the pass
 * that reaped them drains every ring next anyway.
 */
static bool uring_dispatch(struct lull_loop *loop, uint64_t user_data,
			   int res, uint32_t flags)
{
	struct loop_uring *u = uring_of(loop);
	void *ptr = (void *)(uintptr_t)(user_data & ~(uint64_t)TAG_MASK);

	switch (user_data & TAG_MASK) {
	case TAG_OP:
		lull__loop_op_complete(loop, ptr, res, flags);
		return true;
	case TAG_RING: {
		struct loop_ring *lr = ptr;

		/* Woken: the next pass drains every ring anyway. */
		lr->futex_armed = false;
		if (lr->detached) {
			struct loop_ring **link = &u->detached;

			while (*link != lr)
				link = &(*link)->next_detached;
			*link = lr->next_detached;
			free(lr);
		}
		return false;
	}
	case TAG_KICK:
		/* A stop is seen at the next pass's start, or by the park. */
		u->kick_armed = false;
		return false;
	case TAG_TIMER: {
		struct lull_loop_timer *timer = ptr;

		if (res == -ETIME) {
			lull__loop_timer_fired(loop, timer);
		} else {
			timer->armed = false;
			lull__loop_timer_gone(loop, timer); /* removed */
		}
		return true;
	}
	case TAG_SIGNAL:
		u->sig_armed = false;
		if (res == (int)sizeof(u->sigbuf))
			lull__loop_signal(loop, (int)u->sigbuf.ssi_signo);
		return true;
	default:
		return false;
	}
}

/*
 * Reap every CQE there is.  They are copied out and the CQ advanced before
 * any callback runs, since a callback may submit, and an SQE that
 * completes inline posts its CQE right away.  True when one ran the
 * user's code; a wake-up alone is not more to do, so a loop woken by a
 * record takes one pass, not two, before it parks again.
 */
static bool uring_reap(struct lull_loop *loop)
{
	struct loop_uring *u = uring_of(loop);
	struct io_uring_cqe *cqes[LOOP_CQE_BATCH];
	struct {
		uint64_t user_data;
		int res;
		uint32_t flags;
	} done[LOOP_CQE_BATCH];
	bool ran_user_code = false;
	unsigned n;

	do {
		n = io_uring_peek_batch_cqe(&u->uring, cqes, LOOP_CQE_BATCH);
		for (unsigned i = 0; i < n; i++) {
			done[i].user_data = cqes[i]->user_data;
			done[i].res = cqes[i]->res;
			done[i].flags = cqes[i]->flags;
		}
		io_uring_cq_advance(&u->uring, n);
		for (unsigned i = 0; i < n; i++)
			ran_user_code |= uring_dispatch(loop, done[i].user_data,
							done[i].res,
							done[i].flags);
	} while (n == LOOP_CQE_BATCH);
	return ran_user_code;
}

/* Keep one read of @fd in flight into @buf, tagged @tag. */
/* Returns false when no SQE could be had: the read is not in flight. */
static bool uring_arm_read(struct loop_uring *u, bool *armed, int fd,
			   void *buf, unsigned len, enum loop_tag tag)
{
	struct io_uring_sqe *sqe;

	if (*armed || fd < 0)
		return true;
	sqe = uring_get_sqe(u);
	if (!sqe)
		return false;
	io_uring_prep_read(sqe, fd, buf, len, 0);
	io_uring_sqe_set_data64(sqe, loop_tag(NULL, tag));
	*armed = true;
	return true;
}

/*
 * Make sure every ring's park word has a futex wait in flight.  Returns
 * false when one could not be armed (no SQE even after a submit): the
 * loop must not sleep on that ring then.
 */
static bool uring_arm_futexes(struct lull_loop *loop)
{
	struct loop_uring *u = uring_of(loop);
	struct io_uring_sqe *sqe;

	for (unsigned i = 0; i < loop->nrings; i++) {
		struct loop_ring *lr = loop->rings[i];

		if (lr->futex_armed)
			continue;
		sqe = uring_get_sqe(u);
		if (!sqe)
			return false;
		lull__prep_futex_wait_how(sqe, &lr->ring->region->park,
					  lr->futex_how,
					  lr->futex_how ==
						  LULL_PARK_FUTEX_PRIVATE);
		io_uring_sqe_set_data64(sqe, loop_tag(lr, TAG_RING));
		lr->futex_armed = true;
	}
	return true;
}

/* Submit what callbacks queued, and post what completed, without waiting. */
static int uring_poll(struct lull_loop *loop, bool busy)
{
	struct loop_uring *u = uring_of(loop);

	if (!busy)
		return 0; /* the park's wait submits what is queued */
	uring_arm_read(u, &u->sig_armed, loop->sigfd, &u->sigbuf,
		       sizeof(u->sigbuf), TAG_SIGNAL);
	/*
	 * GETEVENTS with no minimum: with DEFER_TASKRUN, completions are
	 * only posted when the loop's thread asks for events.
	 */
	if (loop->ops_in_flight || loop->timers || loop->sigfd >= 0 ||
	    io_uring_sq_ready(&u->uring))
		lull__uring_submit_wait(&u->uring, 0, NULL, false);
	return 1;
}

/* Sleep in one io_uring_enter() that also submits; @wait_nr 0: do not. */
static int uring_sleep(struct lull_loop *loop, uint64_t timeout_ns,
		       unsigned wait_nr)
{
	struct loop_uring *u = uring_of(loop);
	struct __kernel_timespec ts = {
		.tv_sec = (int64_t)(timeout_ns / 1000000000u),
		.tv_nsec = (long long)(timeout_ns % 1000000000u),
	};
	/* No timeout asked for (no safety net): none at all. */
	struct __kernel_timespec *tsp = timeout_ns < LULL_NS_FOREVER ? &ts
								      : NULL;
	bool timed_out;
	int ret;

	/*
	 * The kick read carries lull_loop_stop() (and, on uring-eventfd,
	 * every ring's wake-up): without it in flight the loop must not
	 * sleep; it submits, reaps, and tries again on the next pass.
	 */
	if (!uring_arm_read(u, &u->kick_armed, loop->kick_fd, &u->kick_buf,
			    sizeof(u->kick_buf), TAG_KICK))
		wait_nr = 0;
	if (!uring_arm_read(u, &u->sig_armed, loop->sigfd, &u->sigbuf,
			    sizeof(u->sigbuf), TAG_SIGNAL))
		wait_nr = 0;
	ret = lull__uring_submit_wait(&u->uring, wait_nr, tsp, u->no_iowait);
	/*
	 * An enter that also submitted returns the count submitted, not
	 * -ETIME, when its wait times out: an empty completion queue after
	 * it is the timeout too.
	 */
	timed_out = tsp && wait_nr &&
		    (ret == -ETIME ||
		     (ret >= 0 && !io_uring_cq_ready(&u->uring)));
	if (ret == -ETIME || ret == -EINTR || ret == -EBUSY || ret >= 0)
		return timed_out;
	return ret;
}

static int uring_eventfd_wait(struct lull_loop *loop, uint64_t timeout_ns,
			      bool parked)
{
	(void)parked; /* the kick read is armed either way */
	return uring_sleep(loop, timeout_ns, 1);
}

static int uring_futex_wait(struct lull_loop *loop, uint64_t timeout_ns,
			    bool parked)
{
	/*
	 * A ring without its futex wait would sleep unwatched: submit and
	 * reap instead of sleeping, and park again on the next pass.
	 */
	if (parked && !uring_arm_futexes(loop))
		return uring_sleep(loop, timeout_ns, 0);
	return uring_sleep(loop, timeout_ns, 1);
}

const struct loop_backend lull__loop_uring_futex = {
	.park_how = LULL_PARK_FUTEX,
	.init = uring_init,
	.fini = uring_fini,
	.start = uring_start,
	.sqe = uring_sqe,
	.cancel = uring_cancel,
	.timer_arm = uring_timer_arm,
	.timer_cancel = uring_timer_cancel,
	.signals = uring_signals,
	.ring_attached = uring_futex_ring_attached,
	.ring_park_how = uring_futex_ring_park_how,
	.ring_detached = uring_ring_detached,
	.reap = uring_reap,
	.poll = uring_poll,
	.wait = uring_futex_wait,
};

const struct loop_backend lull__loop_uring_eventfd = {
	.park_how = LULL_PARK_EVENTFD,
	.init = uring_init,
	.fini = uring_fini,
	.start = uring_start,
	.sqe = uring_sqe,
	.cancel = uring_cancel,
	.timer_arm = uring_timer_arm,
	.timer_cancel = uring_timer_cancel,
	.signals = uring_signals,
	.ring_attached = uring_eventfd_ring_attached,
	.ring_detached = uring_ring_detached,
	.reap = uring_reap,
	.poll = uring_poll,
	.wait = uring_eventfd_wait,
};
