/* SPDX-License-Identifier: MIT */
/*
 * shutdown.c - how a ring ends: graceful and immediate shutdown, and the
 * fatal report.  The consumer's side of it (drain, fatal, poison, -EPIPE)
 * is in ring_read.c; producers that end with their thread in producer.c.
 *
 * Everything a shutdown writes is an atomic read-modify-write of the
 * region, so it is async-signal-safe and idempotent, and can come from any
 * thread, any handle, any process that maps the region.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "park.h"

/*
 * The state a shutdown sets, as RMWs: on MPSC (@mpsc) the tail's closed
 * bit first, then the state bits.  Returns the state before.
 */
static uint32_t shutdown_state(struct lull_region *region, bool mpsc,
			       unsigned how, uint32_t extra)
{
	uint32_t bits = LULL_STATE_CLOSED | extra;

	if (how == LULL_SHUTDOWN_IMMEDIATE)
		bits |= LULL_STATE_DISCARD;
	/*
	 * MPSC: close the tail first, so that no claim succeeds after a
	 * consumer saw the state (it acquires the state, then reads the final
	 * tail).  seq_cst on both RMWs keeps them in this order for everyone.
	 */
	if (mpsc)
		atomic_fetch_or_explicit(&lull__lane(region, 0)->tail,
					 LULL_TAIL_CLOSED,
					 memory_order_seq_cst);
	return atomic_fetch_or_explicit(&region->state, bits,
					memory_order_seq_cst);
}

/*
 * Likewise for producers waiting for room: either their re-check sees
 * the state, or this load sees them waiting.
 */
static void shutdown_wake_waiters(struct lull_region *region)
{
	if (atomic_load_explicit(&region->space_waiters, memory_order_seq_cst))
		lull__space_wake(region);
}

uint32_t lull__shutdown(struct lull_region *region, uint32_t mode,
			unsigned how, uint32_t extra)
{
	uint32_t old, seen;

	old = shutdown_state(region, mode == LULL_RING_MPSC, how, extra);
	/*
	 * Wake a parked consumer so it sees the shutdown.  The seq_cst RMW
	 * above and this load pair with the consumer's park barrier the way a
	 * producer's commit and check do: either its re-check sees the state,
	 * or this load sees it parked.
	 */
	seen = atomic_load_explicit(&region->park, memory_order_seq_cst);
	if (seen != LULL_PARK_AWAKE)
		lull__wake_region(region, seen);
	shutdown_wake_waiters(region);
	return old;
}

void lull__shutdown_by_consumer(struct lull_ring *ring, unsigned how,
				uint32_t extra)
{
	struct lull_region *region = ring->region;
	uint32_t seen;

	shutdown_state(region, ring->mode == LULL_RING_MPSC, how, extra);
	/*
	 * The consumer is awake, since it is here; what may still sleep is
	 * a park it armed on an io_uring, whose completion its owner waits
	 * for.  Paired as in lull__shutdown().
	 */
	seen = atomic_load_explicit(&region->park, memory_order_seq_cst);
	if (seen != LULL_PARK_AWAKE)
		lull__wake_own(ring, seen);
	shutdown_wake_waiters(region);
}

/*
 * The region holds what no producer writes: the ring is fatal.  Counted
 * once; from here on nothing of its data is read (LULL_CLOSING_CORRUPT),
 * and the region is shut down at once and sealed, as lull_ring_close()
 * does, so that producers get -EPIPE and a fatal report comes too late
 * (it lives in the region the corruption came from).  The read that found
 * it returns what it handed out before; the next one says -EPROTO.
 */
__attribute__((noinline, cold)) void lull__ring_corrupt(struct lull_ring *ring)
{
	if (ring->closing >= LULL_CLOSING_CORRUPT)
		return;
	ring->closing = LULL_CLOSING_CORRUPT;
	/* Relaxed: a counter, read by lull_ring_stats() from any thread. */
	atomic_fetch_add_explicit(&ring->corruptions, 1, memory_order_relaxed);
	lull__shutdown_by_consumer(ring, LULL_SHUTDOWN_IMMEDIATE,
				   LULL_STATE_SEALED);
}

LULL_EXPORT int lull_ring_shutdown(struct lull_ring *ring, unsigned how)
{
	if (!ring || how > LULL_SHUTDOWN_IMMEDIATE)
		return -EINVAL;
	lull__shutdown(ring->region, ring->mode, how, 0);
	return 0;
}

LULL_EXPORT int lull_ring_fatal(struct lull_ring *ring, int32_t code,
				const char *message)
{
	struct lull_region *region;
	uint32_t expected = 0, old;
	size_t len = 0;

	if (!ring)
		return -EINVAL;
	region = ring->region;
	/* Only the first report is kept; its writer owns the fields. */
	if (!atomic_compare_exchange_strong_explicit(
		    &region->fatal_state, &expected, 1, memory_order_relaxed,
		    memory_order_relaxed))
		return -EALREADY;
	if (message) {
		while (len < LULL_FATAL_MESSAGE_MAX - 1 && message[len])
			len++;
		memcpy(region->fatal.message, message, len);
	}
	region->fatal.message[len] = '\0';
	region->fatal.length = (uint32_t)len;
	region->fatal.code = code;
	/* The fields above are published by the release half of the seq_cst
	 * RMW of state in lull__shutdown(), which the consumer acquires. */
	old = lull__shutdown(region, ring->mode, LULL_SHUTDOWN_GRACEFUL,
			     LULL_STATE_FATAL);
	/* Sealed: the consumer had already chosen the poison. */
	return old & LULL_STATE_SEALED ? -EPIPE : 0;
}
