/* SPDX-License-Identifier: MIT */
/*
 * lane.h - writing one lane as its only producer, inline: the steps of an
 * SPSC write (also a LANES producer's, on its own lane), shared by the
 * single-record calls (ring_spsc.c) and batches (ring_batch.c).
 *
 * The producer owns the lane's tail: it writes each record past it, header
 * type and payload first, then publishes it in band with a release store
 * of the header's length; the consumer finds records by their lengths and
 * never polls tail.  Before that store it zeroes the length where its
 * records end, the next one's header (lane_clear_next()), so that the
 * consumer stops there: nobody zeroes the rest of the free space
 * (region.h).  tail is then stored (relaxed) only to tell a closing
 * consumer where the records end.  No atomic read-modify-write: a write is
 * busy-mark, barrier, state check, next length cleared, copy, header, tail
 * store, busy clear, barrier, park check (the barriers are compiler-only
 * in a lull-allocated region, see lull__notify()).
 */
#ifndef LULL_PRIVATE_LANE_H
#define LULL_PRIVATE_LANE_H

#include "park.h"
#include "record.h"

/*
 * The producer's own tail.  Relaxed: only this producer stores it, and the
 * acquire of the lane's owner word in lull_producer_attach() ordered the
 * previous producer's last store before us.  Reading it back from the
 * lane instead of keeping a copy in the handle saves a store per write;
 * the line stays in our cache, since the consumer reads it only when
 * closing.
 */
static inline uint64_t lane_tail(const struct lull_producer *prod)
{
	/*
	 * A lane's tail is a multiple of 8 (no flag bits): rounded down, one
	 * that a shared region's other writer misaligned still puts each
	 * header, and the length cleared past it, within the data area.
	 */
	return atomic_load_explicit(&prod->lane->tail, memory_order_relaxed) &
	       ~(uint64_t)LULL_TAIL_FLAGS;
}

/*
 * Is the lane free up to @end?  Refreshes the head we know of only when
 * the cached one says no.
 */
static inline bool lane_room(struct lull_producer *prod, uint64_t end)
{
	if (likely(end - prod->head_cache <= prod->mask + 1))
		return true;
	/*
	 * Pairs with the consumer's release store of head: the consumer's
	 * reads of the space we are about to overwrite are finished before
	 * our writes to it.
	 */
	prod->head_cache =
		atomic_load_explicit(&prod->lane->head, memory_order_acquire);
	return end - prod->head_cache <= prod->mask + 1;
}

/*
 * Zero the length at @end, where the records about to be published end:
 * the consumer reads it next and must find "not written yet", not an
 * earlier lap's bytes.  Relaxed: the release store that publishes the
 * records orders it before them.  Left alone when @end is a whole lap
 * past the head we know of: the lane is then exactly full, and the
 * length there is the header of the record at that head (the consumer
 * zeroes it when it moves past, before it publishes the head that lets
 * us write there).  With a head older than the consumer's, the lane may
 * not be full: that head's record is then consumed, and its length
 * zeroed, already.
 */
static inline void lane_clear_next(struct lull_producer *prod, uint64_t end)
{
	if (likely(end - prod->head_cache <= prod->mask))
		lull__length_clear(prod->data, prod->mask, end);
}

/* Publish a record header on the lane (lull__header_publish()). */
static inline void lane_header(struct lull_producer *prod, uint64_t pos,
			       uint32_t length, int32_t type)
{
	lull__header_publish(prod->data, prod->mask, pos, (int32_t)length,
			     type);
}

/*
 * Move the producer's tail past what it published.  Relaxed: readers do
 * not find records through tail; it only tells a closing consumer where
 * the records end (read after busy, whose release orders it) and the
 * lane's next producer where to go on (after the owner word's release).
 */
static inline void lane_tail_store(struct lull_producer *prod, uint64_t end)
{
	atomic_store_explicit(&prod->lane->tail, end, memory_order_relaxed);
}

/* The busy mark, lane_enter()'s first half, and its clearing. */
static inline void lane_busy_mark(struct lull_producer *prod)
{
	/*
	 * Relaxed: ordered by the barrier below, which pairs with the
	 * closing consumer's park barrier before its load of busy.
	 */
	atomic_store_explicit(&prod->lane->busy, 1, memory_order_relaxed);
	lull__producer_barrier(prod);
}

/* Not busy any more.  Pairs with the closing consumer's acquire of busy. */
static inline void lane_busy_clear(struct lull_producer *prod)
{
	atomic_store_explicit(&prod->lane->busy, 0, memory_order_release);
}

/*
 * Leave it: not busy any more, and wake the consumer if it sleeps (it may
 * be waiting for exactly this during a shutdown).
 */
static inline void lane_leave(struct lull_producer *prod)
{
	/* A consumer that sees busy 0 also sees the tail stored before. */
	lane_busy_clear(prod);
	lull__notify(prod);
}

/*
 * Enter a write or a claim: mark the producer busy, then check for a
 * shutdown.  The store and the load are the producer's half of a Dekker
 * handshake with a consumer that saw the shutdown and then reads busy
 * (ring_read.c, closure_final_tails()): with the barrier between them on
 * both sides, either the consumer sees busy and waits for this write, or
 * this check sees the shutdown.  So no record is published after the
 * consumer settled on the final tail.  Before all that, the consumer's
 * beacon: a shared ring whose consumer's process ended is shut down here.
 */
static inline int lane_enter(struct lull_producer *prod)
{
	if (lull__consumer_lost(prod))
		return -EPIPE;
	lane_busy_mark(prod);
	if (unlikely(lull__state(prod->region) & LULL_STATE_CLOSED)) {
		/*
		 * Leave properly, notify included: a closing consumer may
		 * have seen us busy and parked until we are not (the model
		 * found the consumer asleep for good without it).
		 */
		lane_leave(prod);
		return -EPIPE;
	}
	return 0;
}

/* The lane write calls' checks: a lane producer with no claim. */
static inline int lane_check(const struct lull_producer *prod)
{
	if (unlikely(!prod || prod->mode == LULL_RING_MPSC))
		return -EINVAL;
	if (unlikely(prod->claimed))
		return -EBUSY;
	return 0;
}

/*
 * Find room for a record of @length bytes (header included) at the
 * producer's tail: where its header goes and where the tail ends up.
 * Returns 0 or -EAGAIN.
 */
static inline int lane_reserve(struct lull_producer *prod, uint32_t length,
			       uint64_t *posp, uint64_t *endp)
{
	uint64_t tail = lane_tail(prod);
	uint64_t size = lull__align8(length);
	uint64_t pad = lull__wrap_padding(tail, prod->mask, size);
	uint64_t end = tail + pad + size;

	if (unlikely(!lane_room(prod, end)))
		return lull__full(prod);
	*posp = tail + pad;
	*endp = end;
	return 0;
}

/*
 * Publish the record at @pos (its payload written), with the padding of a
 * wrap in front if any.  The padding goes last: until the record's header
 * is written, its place at the start of the data area holds an earlier
 * lap's bytes, which the consumer must not reach through the padding.
 */
static inline void lane_publish(struct lull_producer *prod, uint64_t pos,
				uint64_t end, uint32_t length, int32_t type)
{
	uint64_t tail = lane_tail(prod);

	lane_clear_next(prod, end);
	lane_header(prod, pos, length, type);
	if (pos != tail)
		lane_header(prod, tail, (uint32_t)(pos - tail),
			    LULL_TYPE_PADDING);
	lane_tail_store(prod, end);
}

#endif /* LULL_PRIVATE_LANE_H */
