/* SPDX-License-Identifier: MIT */
/*
 * park_uring.c - parking a ring's consumer on the caller's own io_uring:
 * the handshake of park.c, with the sleep being an SQE (a futex wait on the
 * park word, or a read of the ring's eventfd), linked to a safety-net
 * timeout only when one is configured (opt-in), all carrying the caller's
 * user_data.
 */
#include <stdlib.h>
#include <string.h>

#include "park.h"
#include "uring_compat.h"

/* The backend a ring uses on a caller's io_uring, chosen once. */
static int uring_backend(struct lull_ring *ring)
{
	const char *forced;
	int backend;

	if (ring->uring_backend)
		return ring->uring_backend;
	forced = getenv("LULL_BACKEND");
	backend = forced ? lull_backend_parse(forced) : -EINVAL;
	if (backend != LULL_BACKEND_URING_FUTEX &&
	    backend != LULL_BACKEND_URING_EVENTFD)
		backend = lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0
				  ? LULL_BACKEND_URING_FUTEX
				  : LULL_BACKEND_URING_EVENTFD;
	ring->uring_backend = backend;
	return backend;
}

static int consumer_check(const struct lull_ring *ring)
{
	if (!ring)
		return -EINVAL;
	return ring->is_consumer ? 0 : -EPERM;
}

LULL_EXPORT int lull_uring_park_arm(struct lull_ring *ring,
				    struct io_uring *uring,
				    uint64_t user_data)
{
	struct io_uring_sqe *wait, *timeout;
	bool safety;
	int backend, ret;

	ret = consumer_check(ring);
	if (ret < 0)
		return ret;
	if (!uring)
		return -EINVAL;
	if (ring->uring_pending)
		return -EALREADY;
	if (ring->loop)
		return -EBUSY;
	if (lull__ring_done(ring))
		return -EPIPE;
	/* The wait, and its link timeout when a safety net is on. */
	safety = ring->safety_ns && ring->safety_ns < LULL_NS_FOREVER;
	if (io_uring_sq_space_left(uring) < (safety ? 2u : 1u))
		return -EBUSY;
	backend = uring_backend(ring);
	/* An eventfd cannot be written from another process. */
	if (backend == LULL_BACKEND_URING_EVENTFD &&
	    (ring->flags & LULL_REGION_SHARED))
		return -EOPNOTSUPP;
	if (backend == LULL_BACKEND_URING_EVENTFD) {
		ret = lull__ring_eventfd(ring);
		if (ret < 0)
			return ret;
	}
	/* A shared ring's roster change is no record: take note of it. */
	if (ring->flags & LULL_REGION_SHARED)
		lull__watch_sync(ring, false);
	ring->uring_user_data = user_data;
	ring->uring_armed_once = true;
	ring->uring_cancelled = false;
	ret = lull__park_begin(ring, backend == LULL_BACKEND_URING_FUTEX
					     ? LULL_PARK_FUTEX
					     : LULL_PARK_EVENTFD);
	if (ret <= 0)
		return ret < 0 ? ret : 1;

	wait = io_uring_get_sqe(uring);
	if (backend == LULL_BACKEND_URING_FUTEX)
		lull__prep_futex_wait(wait, &ring->region->park,
				      LULL_PARK_FUTEX);
	else
		io_uring_prep_read(wait, ring->eventfd, &ring->eventfd_buf,
				   sizeof(ring->eventfd_buf), 0);
	io_uring_sqe_set_data64(wait, user_data);
	ring->uring_pending = 1;
	if (safety) {
		wait->flags |= IOSQE_IO_LINK;
		timeout = io_uring_get_sqe(uring);
		ring->uring_timeout.tv_sec =
			(int64_t)(ring->safety_ns / 1000000000u);
		ring->uring_timeout.tv_nsec =
			(long long)(ring->safety_ns % 1000000000u);
		io_uring_prep_link_timeout(timeout, &ring->uring_timeout, 0);
		io_uring_sqe_set_data64(timeout, user_data);
		ring->uring_pending = 2;
	}
	ring->uring_sleeping = true;
	ring->uring_armed_ns = lull__now_ns();
	return 0;
}

LULL_EXPORT int lull_uring_park_cqe(struct lull_ring *ring,
				    const struct io_uring_cqe *cqe)
{
	if (!ring || !cqe)
		return -EINVAL;
	if (!ring->uring_pending || cqe->user_data != ring->uring_user_data)
		return 0;
	ring->uring_pending--;
	if (ring->uring_sleeping) {
		/*
		 * The first CQE of the park, whichever: the sleep is over.
		 * Both carry the caller's user_data, and what a fired link
		 * timeout reports varies (-ETIME, or the count it cancelled:
		 * 1 for a futex wait on Linux 6.18), so do not ask: the safety
		 * net fired if the park lasted its length (a cancel or a stale
		 * wake-up ends it sooner and counts nothing).
		 */
		ring->uring_sleeping = false;
		lull__park_finish(ring, !ring->uring_cancelled &&
						ring->safety_ns &&
						lull__now_ns() - ring->uring_armed_ns >=
							ring->safety_ns);
	}
	return 1;
}

LULL_EXPORT int lull_uring_park_drain(struct lull_ring *ring,
				      struct io_uring *uring,
				      lull_record_fn fn, void *ctx,
				      unsigned limit)
{
	int total = 0, ret;

	ret = consumer_check(ring);
	if (ret < 0)
		return ret;
	if (!uring || !fn || !limit)
		return -EINVAL;
	for (;;) {
		ret = lull_ring_read(ring, fn, ctx, limit);
		if (ret > 0) {
			total += ret;
			continue;
		}
		if (ret == 0) /* the handler kept a record: stop here */
			return total;
		/*
		 * -EPIPE: the poison was delivered (in this call or before),
		 * and nothing will ever complete on this park again.  Said
		 * even after records were delivered, so that a CQE loop never
		 * waits for a park that will not be armed.
		 */
		if (ret == -EPIPE)
			return ret;
		/*
		 * Any other error, even after records were delivered: nothing
		 * is armed now, so a count would leave the caller waiting for
		 * a CQE that never comes.
		 */
		if (ret != -EAGAIN)
			return ret;
		if (ring->uring_pending || ring->uring_cancelled ||
		    !ring->uring_armed_once)
			return total;
		ret = lull_uring_park_arm(ring, uring, ring->uring_user_data);
		if (ret == 0)
			return total;
		if (ret < 0)
			return ret;
		/* 1: a record arrived during the handshake; read it. */
	}
}

LULL_EXPORT int lull_uring_park_cancel(struct lull_ring *ring,
				       struct io_uring *uring)
{
	struct io_uring_sqe *sqe;
	int ret;

	ret = consumer_check(ring);
	if (ret < 0)
		return ret;
	if (!uring)
		return -EINVAL;
	if (!ring->uring_pending)
		return -ENOENT;
	sqe = io_uring_get_sqe(uring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_cancel64(sqe, ring->uring_user_data, 0);
	io_uring_sqe_set_data64(sqe, ring->uring_user_data);
	/* The cancel's own CQE carries the same user_data: expect it too. */
	ring->uring_pending++;
	ring->uring_cancelled = true;
	return 0;
}
