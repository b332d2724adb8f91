/* SPDX-License-Identifier: MIT */
/*
 * loop_epoll.c - the loop's backend where io_uring is unavailable: epoll
 * over the loop's eventfd (which producers write to wake it), its
 * signalfd, and the file descriptors of emulated SQEs (loop_epoll_sqe.c);
 * timers and TIMEOUTs are deadlines that bound the sleep.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop_internal.h"

#define EPOLL_BATCH 64

/*
 * The loop's eventfd is watched edge-triggered and read only once every
 * this many edges (see epoll_sleep()).
 */
#define KICK_READ_EVERY 4096u

/* Watch @fd for @events (EPOLLIN, maybe EPOLLET), non-blocking, as @key. */
static int epoll_watch(struct loop_epoll *e, int fd, uint32_t events,
		       uint64_t key)
{
	struct epoll_event ev = { .events = events, .data.u64 = key };
	long ret;

	ret = LULL_SYSCALL(fcntl(fd, F_SETFL, O_NONBLOCK));
	if (ret >= 0)
		ret = LULL_SYSCALL(epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev));
	return ret < 0 ? (int)ret : 0;
}

static int epoll_init(struct lull_loop *loop, unsigned entries)
{
	struct loop_epoll *e;
	long fd;
	int ret;

	(void)entries; /* no submission queue to size */
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	fd = LULL_SYSCALL(epoll_create1(EPOLL_CLOEXEC));
	if (fd < 0) {
		free(e);
		return (int)fd;
	}
	e->epfd = (int)fd;
	ret = epoll_watch(e, loop->kick_fd, EPOLLIN | EPOLLET,
			  loop_tag(NULL, TAG_KICK));
	if (ret < 0) {
		close(e->epfd);
		free(e);
		return ret;
	}
	loop->be_data = e;
	return 0;
}

static void epoll_fini(struct lull_loop *loop)
{
	struct loop_epoll *e = loop_epoll_of(loop);

	close(e->epfd);
	free(e);
	loop->be_data = NULL;
}

static int epoll_start(struct lull_loop *loop)
{
	(void)loop;
	return 0;
}


/* Start what lull_loop_sqe() queued, in order: complete it, or wait. */
static bool epoll_reap(struct lull_loop *loop)
{
	struct loop_epoll *e = loop_epoll_of(loop);
	struct loop_op *list = e->pending, *op, *reversed = NULL;

	/* Queued newest first; start them in the order they were queued. */
	e->pending = NULL;
	while (list) {
		op = list;
		list = op->next;
		op->next = reversed;
		reversed = op;
	}
	while (reversed) {
		op = reversed;
		reversed = op->next;
		lull__epoll_op_start(loop, op);
	}
	return false;
}

/* Earliest deadline among emulated TIMEOUTs and timers, or UINT64_MAX. */
static uint64_t next_deadline(struct lull_loop *loop)
{
	struct loop_epoll *e = loop_epoll_of(loop);
	uint64_t next = UINT64_MAX;

	for (struct loop_op *op = e->waiting; op; op = op->next)
		if (op->deadline_ns && op->deadline_ns < next)
			next = op->deadline_ns;
	for (struct lull_loop_timer *t = loop->timers; t; t = t->next)
		if (!t->cancelled && t->deadline_ns < next)
			next = t->deadline_ns;
	return next;
}

static void read_signals(struct lull_loop *loop)
{
	struct signalfd_siginfo info;

	while (LULL_SYSCALL(read(loop->sigfd, &info, sizeof(info))) ==
	       (long)sizeof(info))
		lull__loop_signal(loop, (int)info.ssi_signo);
}

/*
 * Wait at most @timeout_ns (0: poll; LULL_NS_FOREVER or more: no limit)
 * for events, and handle them and every deadline that passed.  Returns
 * the number of events, or epoll_wait()'s error (-EINTR: a signal).
 */
static int epoll_sleep(struct lull_loop *loop, uint64_t timeout_ns)
{
	struct epoll_event events[EPOLL_BATCH];
	/*
	 * Rounded up to whole ms without overflow: a wait is never shorter
	 * than asked (0 stays a poll).
	 */
	uint64_t timeout_ms = timeout_ns / 1000000 + !!(timeout_ns % 1000000);
	int timeout = timeout_ns >= LULL_NS_FOREVER ? -1
		      : timeout_ms > INT_MAX	    ? INT_MAX
						    : (int)timeout_ms;
	struct loop_epoll *e = loop_epoll_of(loop);
	uint64_t drain;
	long n;

	n = LULL_SYSCALL(epoll_wait(e->epfd, events, EPOLL_BATCH, timeout));
	if (n < 0)
		return (int)n;
	for (long i = 0; i < n; i++) {
		uint64_t key = events[i].data.u64;

		switch (key & TAG_MASK) {
		case TAG_KICK:
			/*
			 * Edge-triggered: every write to an eventfd is an
			 * edge of its own, whatever its count, so the
			 * wake-up needs no read, which would be a second
			 * system call between the producer's write and the
			 * rings being drained.  The count only grows (by
			 * one a wake-up, a stop or a bridge's kick) and
			 * could not reach the eventfd's limit, 2^64 - 2, in
			 * any process's lifetime; a read now and then keeps
			 * it small all the same (one resets it to 0).
			 */
			if (++e->kicks_unread >= KICK_READ_EVERY) {
				e->kicks_unread = 0;
				(void)LULL_SYSCALL(read(loop->kick_fd, &drain,
							sizeof(drain)));
			}
			break;
		case TAG_SIGNAL:
			read_signals(loop);
			break;
		default:
			lull__epoll_fd_ready(loop, (int)(key >> 3),
					     events[i].events);
			break;
		}
	}
	lull__epoll_fire_due(loop);
	return (int)n;
}

static int epoll_poll(struct lull_loop *loop, bool busy)
{
	int ret;

	/* SQEs that callbacks queued start on the next pass. */
	if (!busy && !loop_epoll_of(loop)->pending)
		return 0;
	if (loop->ops_in_flight || loop->timers || loop->sigfd >= 0) {
		ret = epoll_sleep(loop, 0);
		if (ret < 0 && ret != -EINTR)
			return ret;
	}
	return 1;
}

static int epoll_wait_event(struct lull_loop *loop, uint64_t timeout_ns,
			    bool parked)
{
	/* Only a timeout of the caller's own counts as one. */
	bool limited = timeout_ns < LULL_NS_FOREVER;
	uint64_t next, now;
	int ret;

	(void)parked; /* every ring's producers write the eventfd watched */
	next = next_deadline(loop);
	if (next != UINT64_MAX) {
		now = lull__now_ns();
		if (next <= now) {
			timeout_ns = 0;
			limited = false;
		} else if (next - now < timeout_ns) {
			timeout_ns = next - now;
			limited = false;
		}
	}
	ret = epoll_sleep(loop, timeout_ns);
	if (ret < 0)
		return ret == -EINTR ? 0 : ret;
	return limited && ret == 0;
}

static struct io_uring_sqe *epoll_sqe(struct lull_loop *loop,
				      struct loop_op *op)
{
	struct loop_epoll *e = loop_epoll_of(loop);

	op->next = e->pending;
	e->pending = op;
	return &op->sqe;
}

/* An emulated ASYNC_CANCEL, queued after @op. */
static int epoll_cancel(struct lull_loop *loop, struct loop_op *op)
{
	struct loop_epoll *e = loop_epoll_of(loop);
	struct loop_op *cancel = lull__loop_op_alloc(loop);

	if (!cancel)
		return -ENOMEM;
	io_uring_prep_cancel64(&cancel->sqe, loop_tag(op, TAG_OP), 0);
	cancel->in_flight = true;
	cancel->next = e->pending;
	e->pending = cancel;
	loop->ops_in_flight++;
	return 0;
}

static int epoll_timer_arm(struct lull_loop *loop,
			   struct lull_loop_timer *timer, uint64_t delay_ns)
{
	(void)loop;
	/* Saturated: UINT64_MAX is a deadline that never comes. */
	timer->deadline_ns = lull__deadline_ns(lull__now_ns(), delay_ns);
	return 0;
}

static void epoll_timer_cancel(struct lull_loop *loop,
			       struct lull_loop_timer *timer)
{
	/* Inside its own callback: freed when the callback returns. */
	if (!timer->firing)
		lull__loop_timer_gone(loop, timer);
}

static int epoll_signals(struct lull_loop *loop)
{
	return epoll_watch(loop_epoll_of(loop), loop->sigfd, EPOLLIN,
			   loop_tag(NULL, TAG_SIGNAL));
}

/* Producers of this ring write the loop's eventfd. */
static int epoll_ring_attached(struct lull_loop *loop, struct loop_ring *lr)
{
	return lull__wake_fd_set(lr->ring->region, loop->kick_fd);
}

static bool epoll_ring_detached(struct lull_loop *loop, struct loop_ring *lr)
{
	(void)loop;
	(void)lr;
	return false;
}

const struct loop_backend lull__loop_epoll = {
	.park_how = LULL_PARK_EVENTFD,
	.init = epoll_init,
	.fini = epoll_fini,
	.start = epoll_start,
	.sqe = epoll_sqe,
	.cancel = epoll_cancel,
	.timer_arm = epoll_timer_arm,
	.timer_cancel = epoll_timer_cancel,
	.signals = epoll_signals,
	.ring_attached = epoll_ring_attached,
	.ring_detached = epoll_ring_detached,
	.reap = epoll_reap,
	.poll = epoll_poll,
	.wait = epoll_wait_event,
};
