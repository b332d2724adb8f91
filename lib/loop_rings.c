/* SPDX-License-Identifier: MIT */
/*
 * loop_rings.c - the rings attached to a loop: attach and detach them,
 * hand each its next batch, and shut them all down when the loop stops.
 * How a ring's producers wake the loop is its backend's business
 * (ring_attached, ring_detached).
 */
#include <poll.h>
#include <stdlib.h>

#include "loop_internal.h"

#define LOOP_DEFAULT_BATCH 256u

/* The ring is no longer the loop's: its wake-ups no longer reach it. */
static void ring_unhook(struct lull_loop *loop, struct loop_ring *lr)
{
	struct lull_region *region = lr->ring->region;

	if (lull__wake_fd_of(region) == loop->kick_fd)
		lull__wake_fd_set(region, -1);
	lull__park_end(lr->ring);
	lull__bridge_stop(lr->bridge);
	lr->bridge = NULL;
	lr->ring->loop = NULL;
}

/*
 * A shared ring's producer processes, watched by the loop: a poll of the
 * ring's watch descriptor (ring_death.c), as one of the loop's own SQEs,
 * whose completion lets the ring take note of the deaths and recover.
 * The watch is its own object: its last completion may come after the
 * ring left the loop (and was destroyed), and then frees it alone.
 */
struct loop_watch {
	struct lull_ring *ring;
	bool armed;    /* its poll is in flight */
	bool detached; /* the ring left the loop: free at the completion */
};

static void watch_arm(struct lull_loop *loop, struct loop_watch *lw);

static void watch_cqe(struct lull_loop *loop, int res, uint32_t flags,
		      void *ctx)
{
	struct loop_watch *lw = ctx;

	(void)flags;
	lw->armed = false;
	if (lw->detached) {
		free(lw);
		return;
	}
	(void)lull_ring_watch(lw->ring);
	/* Cancelled: the loop stops; armed again by the next run. */
	if (res != -ECANCELED)
		watch_arm(loop, lw);
}

static void watch_arm(struct lull_loop *loop, struct loop_watch *lw)
{
	struct io_uring_sqe *sqe;
	int fd;

	if (lw->armed || lw->detached || loop->stopping)
		return;
	fd = lull_ring_watch_fd(lw->ring);
	if (fd < 0 || lull_loop_sqe(loop, watch_cqe, lw, &sqe) < 0)
		return; /* deaths are then noticed at the ring's next read */
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	lw->armed = true;
}

void lull__loop_watch_arm(struct lull_loop *loop)
{
	for (unsigned i = 0; i < loop->nrings; i++)
		if (loop->rings[i]->watch)
			watch_arm(loop, loop->rings[i]->watch);
}

static void watch_drop(struct lull_loop *loop, struct loop_ring *lr)
{
	struct loop_watch *lw = lr->watch;

	if (!lw)
		return;
	lr->watch = NULL;
	if (!lw->armed) {
		free(lw);
		return;
	}
	lw->detached = true;
	(void)lull_loop_cancel(loop, lw);
}

/* Attach with a record handler @fn or a run handler @items_fn. */
static int attach(struct lull_loop *loop, struct lull_ring *ring,
		  lull_record_fn fn, lull_items_fn items_fn, void *ctx,
		  unsigned batch)
{
	struct loop_ring *lr, **grown;
	unsigned cap;
	int ret;

	if (!loop || !ring || (!fn && !items_fn))
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	if (ring->loop || ring->uring_pending)
		return -EBUSY;
	if (loop->nrings == loop->rings_cap) {
		cap = loop->rings_cap ? loop->rings_cap * 2 : 8;
		grown = realloc(loop->rings, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		loop->rings = grown;
		loop->rings_cap = cap;
	}
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return -ENOMEM;
	lr->ring = ring;
	lr->fn = fn;
	lr->items_fn = items_fn;
	lr->ctx = ctx;
	lr->batch = batch ? batch : LOOP_DEFAULT_BATCH;
	if (ring->flags & LULL_REGION_SHARED) {
		lr->watch = calloc(1, sizeof(*lr->watch));
		if (!lr->watch) {
			free(lr);
			return -ENOMEM;
		}
		lr->watch->ring = ring;
	}
	/*
	 * Only a futex can be woken from another process: a backend that
	 * parks on its eventfd gets there through a bridge.
	 */
	if ((ring->flags & LULL_REGION_SHARED) &&
	    loop->be->park_how != LULL_PARK_FUTEX) {
		ret = lull__bridge_start(&lr->bridge, ring->region,
					 loop->kick_fd);
		if (ret < 0) {
			free(lr->watch);
			free(lr);
			return ret;
		}
	}
	if (!lr->bridge) {
		ret = loop->be->ring_attached(loop, lr);
		if (ret < 0) {
			free(lr->watch);
			free(lr);
			return ret;
		}
	}
	loop->rings[loop->nrings++] = lr;
	ring->loop = loop;
	/* A loop's rings do not slip (ring_read.c): end one under way. */
	ring->slip_ns = 0;
	ring->slip_armed = false;
	if (lr->watch && loop->running)
		watch_arm(loop, lr->watch);
	/* A stopping loop waits for every ring's end: this one's too. */
	if (loop->stopping)
		lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL);
	return 0;
}

LULL_EXPORT int lull_loop_attach(struct lull_loop *loop,
				 struct lull_ring *ring, lull_record_fn fn,
				 void *ctx, unsigned batch)
{
	return attach(loop, ring, fn, NULL, ctx, batch);
}

LULL_EXPORT int lull_loop_attach_items(struct lull_loop *loop,
				       struct lull_ring *ring,
				       lull_items_fn fn, void *ctx,
				       unsigned batch)
{
	return attach(loop, ring, NULL, fn, ctx, batch);
}

LULL_EXPORT int lull_loop_detach(struct lull_loop *loop,
				 struct lull_ring *ring)
{
	struct loop_ring *lr;
	unsigned i;

	if (!loop || !ring)
		return -EINVAL;
	for (i = 0; i < loop->nrings; i++)
		if (loop->rings[i]->ring == ring)
			break;
	if (i == loop->nrings)
		return -ENOENT;
	lr = loop->rings[i];
	loop->rings[i] = loop->rings[--loop->nrings];
	ring_unhook(loop, lr);
	watch_drop(loop, lr);
	/* A wait of the backend's may still point at lr: then it frees lr. */
	if (!loop->be->ring_detached(loop, lr))
		free(lr);
	return 0;
}

/*
 * A ring whose handler consumed the poison record is detached: there is
 * nothing more to read from it, and its owner may destroy it.
 */
int lull__loop_drain(struct lull_loop *loop)
{
	bool more = false;
	unsigned i = 0;
	int n;

	while (i < loop->nrings) {
		struct loop_ring *lr = loop->rings[i];
		struct lull_ring *ring = lr->ring;
		unsigned batch = lr->batch;

		/* The handler may detach (and free) lr: use only copies. */
		n = lr->items_fn
			    ? lull_ring_read_items(ring, lr->items_fn, lr->ctx,
						   batch)
			    : lull_ring_read(ring, lr->fn, lr->ctx, batch);
		if (n > 0) {
			loop->stats.records += (unsigned)n;
			if ((unsigned)n >= batch)
				more = true;
		} else if (n == -EPIPE) {
			/*
			 * Another pass, not a park: the loop may be done.  The
			 * detach moves the last ring into slot i: look at it
			 * next.
			 */
			more = true;
			if (lull_loop_detach(loop, ring) == 0)
				continue;
		} else if (n == -EPROTO) {
			/*
			 * A corrupt region: the ring is fatal, and its next
			 * read hands the poison to its handler, then -EPIPE
			 * detaches it, as for any shutdown.  One process
			 * writing garbage into its ring never ends the run
			 * for the others (lull_ring_stats() counts it).
			 */
			more = true;
		} else if (n != -EAGAIN) {
			return n;
		}
		i++;
	}
	return more;
}

/*
 * Each ring on its own: one ring's state never keeps the others from
 * closing.  The loop then runs on until every ring has delivered its
 * poison and detached.
 */
void lull__loop_rings_shutdown(struct lull_loop *loop, unsigned how)
{
	for (unsigned i = 0; i < loop->nrings; i++)
		lull_ring_shutdown(loop->rings[i]->ring, how);
}

void lull__loop_rings_free(struct lull_loop *loop)
{
	for (unsigned i = 0; i < loop->nrings; i++) {
		ring_unhook(loop, loop->rings[i]);
		free(loop->rings[i]);
	}
	free(loop->rings);
	loop->rings = NULL;
	loop->nrings = 0;
}
