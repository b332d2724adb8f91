/* SPDX-License-Identifier: MIT */
/*
 * consume.h - the consumer giving a lane's space back, inline: zero what
 * must read as not written, publish the new head, wake producers waiting
 * for room.
 * Shared by the reads (ring_read.c) and the recovery of a dead
 * producer's claim (ring_death.c).
 */
#ifndef LULL_PRIVATE_CONSUME_H
#define LULL_PRIVATE_CONSUME_H

#include "park.h"
#include "record.h"

/* Publish a lane's new head and wake producers waiting for room. */
static inline void lull__head_publish(struct lull_ring *ring,
				      struct lull_cursor *cur, uint64_t to)
{
	cur->head = to;
	cur->item = 0; /* a new record at head: none of its items taken */
	/*
	 * Pairs with the producers' acquire load of head: our reads of the
	 * consumed records (and the zeroing before) are done before a
	 * producer reuses the space.
	 */
	atomic_store_explicit(&cur->lane->head, to, memory_order_release);
	lull__space_notify(ring);
}

/*
 * Consume everything of a lane from its head to @to.  What it leaves
 * behind must read "not written yet" wherever the next lap's producers
 * may look for a header next (region.h): on the shared MPSC lane, any
 * word, so all of it is zeroed; on a lane of one producer, which zeroes
 * the length past its records itself, only the length at the old head,
 * where the producer cannot when it fills the lane exactly.  Plain
 * stores, or relaxed ones, into memory that producers later access
 * atomically; no producer touches it before acquiring the head we
 * publish next, so the two never race.  An immediate shutdown skips
 * records without coming here: it must not write under producers still
 * finishing them.
 */
static inline void lull__consume_to(struct lull_ring *ring,
				    struct lull_cursor *cur, uint64_t to)
{
	if (to == cur->head)
		return;
	if (ring->mode == LULL_RING_MPSC)
		lull__zero_span(cur->data, ring->mask, cur->head, to);
	else
		lull__length_clear(cur->data, ring->mask, cur->head);
	lull__head_publish(ring, cur, to);
}

#endif /* LULL_PRIVATE_CONSUME_H */
