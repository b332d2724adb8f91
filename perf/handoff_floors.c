/* SPDX-License-Identifier: MIT */
/*
 * handoff_floors.c - the floors: what the kernel charges for one wake-up
 * with no ring and no protocol.  The producer stores a message count
 * (release) and always wakes: FUTEX_WAKE (futex-floor, uring-futex-floor)
 * or an eventfd write (eventfd-floor, uring-eventfd-floor, epoll-floor);
 * the consumer waits with FUTEX_WAIT, read(2), the same through an
 * io_uring set up like lull's loop (SINGLE_ISSUER, DEFER_TASKRUN where the
 * kernel has them) but with no timeout, or in epoll_wait() on the eventfd,
 * edge-triggered as lull's epoll loop watches its own: every write is an
 * edge, so the eventfd is never read.  futex-xproc-floor is futex-floor
 * with the consumer in another process: a shared futex (no
 * FUTEX_PRIVATE_FLAG) on the count, which lies in the run's MAP_SHARED
 * mapping.
 */
#include <sys/epoll.h>

#include "handoff.h"

/* IORING_OP_FUTEX_WAIT (Linux 6.7) and its flags; liburing 2.3 lacks them. */
#define OP_FUTEX_WAIT 51
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE FUTEX_PRIVATE_FLAG
#endif


/* Take every message published since @seen; returns the new count. */
static inline uint32_t floor_take(struct consumer *c, uint32_t seen)
{
	struct run *run = c->run;
	/* Pairs with the producer's release store: ts[] is written. */
	uint32_t pub = atomic_load_explicit(&run->word, memory_order_acquire);

	for (; seen != pub && !c->done; seen++) {
		if (unlikely(!run->ts[seen]))
			ho_die(run, "message %u published without its timestamp",
			    seen);
		ho_take(c, seen, run->ts[seen]);
	}
	return seen;
}

static void uring_init(struct run *run, struct io_uring *ring)
{
	struct io_uring_params p;
	int r;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	r = io_uring_queue_init_params(8, ring, &p);
	if (r == -EINVAL) {
		memset(&p, 0, sizeof(p));
		r = io_uring_queue_init_params(8, ring, &p);
	}
	if (r < 0)
		ho_die(run, "io_uring_queue_init: %s", strerror(-r));
}

/* An epoll instance watching the run's eventfd, edge-triggered. */
static int epoll_init(struct run *run)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int epfd = epoll_create1(EPOLL_CLOEXEC);

	if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, run->efd, &ev) < 0)
		ho_die(run, "epoll: %s", strerror(errno));
	return epfd;
}

/* One io_uring wait: @sqe prepared, submit it and reap its completion. */
static int uring_wait_one(struct run *run, struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int r, res;

	r = io_uring_submit_and_wait(ring, 1);
	if (r < 0 && r != -EINTR)
		ho_die(run, "io_uring_submit_and_wait: %s", strerror(-r));
	r = io_uring_wait_cqe(ring, &cqe);
	if (r < 0)
		ho_die(run, "io_uring_wait_cqe: %s", strerror(-r));
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

void ho_consume_floor(struct consumer *c)
{
	struct run *run = c->run;
	enum mech_kind kind = run->mech->kind;
	bool uring = kind == MECH_URING_FUTEX_FLOOR ||
		     kind == MECH_URING_EVENTFD_FLOOR;
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct epoll_event ev;
	uint32_t seen = 0;
	uint64_t buf;
	int epfd = -1;
	long r;

	if (uring)
		uring_init(run, &ring);
	if (kind == MECH_EPOLL_FLOOR)
		epfd = epoll_init(run);
	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	for (;;) {
		uint32_t now = floor_take(c, seen);

		if (c->done)
			break;
		if (now != seen) {
			seen = now;
			continue;
		}
		c->iters++;
		switch (kind) {
		case MECH_FUTEX_FLOOR:
		case MECH_FUTEX_XPROC_FLOOR:
			/* Returns at once if the count is no longer @seen. */
			r = futex_op(&run->word,
				     FUTEX_WAIT | run->futex_private, seen);
			if (r < 0 && errno != EAGAIN && errno != EINTR)
				ho_die(run, "FUTEX_WAIT: %s", strerror(errno));
			break;
		case MECH_EVENTFD_FLOOR:
			if (eventfd_read(run->efd, &buf) < 0 && errno != EINTR)
				ho_die(run, "eventfd read: %s", strerror(errno));
			break;
		case MECH_EPOLL_FLOOR:
			if (epoll_wait(epfd, &ev, 1, -1) < 0 && errno != EINTR)
				ho_die(run, "epoll_wait: %s", strerror(errno));
			break;
		case MECH_URING_FUTEX_FLOOR:
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_rw(OP_FUTEX_WAIT, sqe,
					 FUTEX2_SIZE_U32 |
						 (run->futex_private
							  ? FUTEX2_PRIVATE
							  : 0),
					 (const void *)&run->word, 0, seen);
			sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
			r = uring_wait_one(run, &ring);
			if (r < 0 && r != -EAGAIN && r != -EINTR)
				ho_die(run, "io_uring futex wait: %s",
				    strerror((int)-r));
			break;
		default:
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, run->efd, &buf, sizeof(buf), 0);
			r = uring_wait_one(run, &ring);
			if (r != (long)sizeof(buf) && r != -EINTR)
				ho_die(run, "io_uring eventfd read: %s",
				    r < 0 ? strerror((int)-r) : "short read");
			break;
		}
	}
	if (uring)
		io_uring_queue_exit(&ring);
	if (epfd >= 0)
		close(epfd);
}

/* The producer's side: a wake every time, whether or not anyone waits. */
void ho_floor_wake(struct run *run)
{
	switch (run->mech->kind) {
	case MECH_FUTEX_FLOOR:
	case MECH_URING_FUTEX_FLOOR:
	case MECH_FUTEX_XPROC_FLOOR:
		if (futex_op(&run->word, FUTEX_WAKE | run->futex_private, 1) <
		    0)
			ho_die(run, "FUTEX_WAKE: %s", strerror(errno));
		break;
	default:
		if (eventfd_write(run->efd, 1) < 0)
			ho_die(run, "eventfd write: %s", strerror(errno));
		break;
	}
}
