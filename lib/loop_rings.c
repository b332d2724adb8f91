/* SPDX-License-Identifier: MIT */
/*
 * loop_rings.c - the rings attached to a loop: attach and detach them,
 * hand each its next batch, and shut them all down when the loop stops.
 * How a ring's producers wake the loop is its backend's business
 * (ring_attached, ring_detached).
 */
#include <stdlib.h>

#include "loop_internal.h"

#define LOOP_DEFAULT_BATCH 256u

static void recompute_asym(struct lull_loop *loop)
{
	loop->any_asym = false;
	for (unsigned i = 0; i < loop->nrings; i++)
		if (loop->rings[i]->ring->flags & LULL_REGION_ASYM_BARRIER)
			loop->any_asym = true;
}

/* The ring is no longer the loop's: its wake-ups no longer reach it. */
static void ring_unhook(struct lull_loop *loop, struct loop_ring *lr)
{
	struct lull_region *region = lr->ring->region;

	if (atomic_load_explicit(&region->wake_fd, memory_order_relaxed) ==
	    loop->kick_fd)
		lull__wake_fd_set(region, -1);
	lull__park_end(lr->ring);
	lr->ring->loop = NULL;
}

LULL_EXPORT int lull_loop_attach(struct lull_loop *loop,
				 struct lull_ring *ring, lull_record_fn fn,
				 void *ctx, unsigned batch)
{
	struct loop_ring *lr, **grown;
	unsigned cap;

	if (!loop || !ring || !fn)
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
	lr->ctx = ctx;
	lr->batch = batch ? batch : LOOP_DEFAULT_BATCH;
	loop->rings[loop->nrings++] = lr;
	ring->loop = loop;
	loop->be->ring_attached(loop, lr);
	recompute_asym(loop);
	/* A stopping loop waits for every ring's end: this one's too. */
	if (loop->stopping)
		lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL);
	return 0;
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
	recompute_asym(loop);
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
		n = lull_ring_read(ring, lr->fn, lr->ctx, batch);
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
