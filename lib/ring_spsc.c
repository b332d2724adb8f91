/* SPDX-License-Identifier: MIT */
/*
 * ring_spsc.c - the single-producer write path: lull_spsc_write() and
 * lull_spsc_writev(), for the producer of an SPSC ring and for each
 * producer of a LANES ring on its own lane.  The steps, and why there is
 * no atomic read-modify-write among them, are in lane.h; claims and
 * batches in ring_batch.c.
 */
#include <string.h>

#include "lane.h"

/* lull_spsc_write(), every case: checks, wrapping, a full ring, closing. */
static int __attribute__((noinline))
spsc_write_any(struct lull_producer *prod, int32_t type, const void *data,
	       size_t len)
{
	uint64_t pos, end;
	uint32_t length;
	int ret;

	ret = lane_check(prod);
	if (unlikely(ret < 0))
		return ret;
	if (unlikely(len && !data))
		return -EINVAL;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = lane_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = lane_reserve(prod, length, &pos, &end);
	if (likely(ret == 0)) {
		lull__copy_payload(
			lull__header_at(prod->data, prod->mask, pos) + 1, data,
			len);
		lane_publish(prod, pos, end, length, type);
	}
	lane_leave(prod);
	return ret;
}

/* The fast path's wake-up, out of line so that it ends in a tail call. */
static int __attribute__((noinline))
spsc_write_wake(struct lull_producer *prod, uint32_t seen)
{
	lull__wake(prod, seen);
	return 0;
}

/*
 * The common write: a valid record of up to short_max bytes of payload
 * (64, where the ring takes records that long) that fits before the end
 * of the data area, to a ring with room that is not closing.  Everything
 * else goes to spsc_write_any() before anything is stored.  The steps are
 * lane_enter(), lane_publish() and lane_leave() with no call but the
 * wake-up's tail call, so that few registers need saving (each save is
 * one more store).
 *
 * Why it is this lean: while the consumer keeps up, the data line this
 * write stores to was just read by the consumer and must be fetched back,
 * and until it is, this write's stores and every later one wait in the
 * CPU's store buffer, which drains in order.  The fewer stores a write
 * makes (here: busy, the next record's length, the payload, the header's
 * type and length, tail, busy; only the lengths and the payload go to
 * lines the consumer reads), the more writes fit in that buffer before
 * the producer stalls.
 */
LULL_EXPORT int lull_spsc_write(struct lull_producer *prod, int32_t type,
				const void *data, size_t len)
{
	struct lull_record_header *hdr;
	struct lull_region *region;
	struct lull_lane *lane;
	uint64_t tail, end, size, mask;
	bool asym;
	uint32_t seen;

	if (unlikely(!prod || prod->mode == LULL_RING_MPSC || prod->claimed ||
		     type < 1 || len > prod->short_max || (len && !data)))
		return spsc_write_any(prod, type, data, len);
	/*
	 * Everything it needs from the handle, read once: the stores below
	 * go through pointers the compiler cannot tell from the handle's, so
	 * it would read each field again after each of them.
	 */
	region = prod->region;
	lane = prod->lane;
	mask = prod->mask;
	asym = prod->asym_barrier;
	/* Relaxed: the producer's own store; rounded as in lane_tail(). */
	tail = atomic_load_explicit(&lane->tail, memory_order_relaxed) &
	       ~(uint64_t)LULL_TAIL_FLAGS;
	size = lull__align8(LULL_RECORD_HEADER_SIZE + len);
	end = tail + size;
	/*
	 * The record would wrap (padding first), or the ring looks full.  It
	 * is not too long: short_max fits the ring.
	 */
	if (unlikely((tail & mask) + size > mask + 1 ||
		     end - prod->head_cache > mask + 1))
		return spsc_write_any(prod, type, data, len);
	/* The consumer's beacon moved: lane_enter() looks into it. */
	/* Relaxed: as in lull__consumer_lost(). */
	if (unlikely(atomic_load_explicit(prod->consumer_word,
					  memory_order_relaxed) !=
		     prod->consumer_word_ok))
		return spsc_write_any(prod, type, data, len);
	hdr = lull__header_at(prod->data, mask, tail);

	/* lane_enter(), with the -EPIPE case left to the general path */
	/* Relaxed: ordered by the barrier, as in lane_busy_mark(). */
	atomic_store_explicit(&lane->busy, 1, memory_order_relaxed);
	lull__barrier_light(asym);
	if (unlikely(lull__state(region) & LULL_STATE_CLOSED))
		return spsc_write_any(prod, type, data, len); /* leaves */

	/* lane_publish(): no padding, by the check above */
	/* lane_clear_next(), with the head read above */
	if (likely(end - prod->head_cache <= mask))
		lull__length_clear(prod->data, mask, end);
	lull__copy_short(hdr + 1, data, len);
	hdr->type = type;
	/* Pairs with the consumer's acquire load of length (lane_header()). */
	atomic_store_explicit(&hdr->length,
			      (int32_t)(LULL_RECORD_HEADER_SIZE + len),
			      memory_order_release);
	/* Relaxed: as in lane_tail_store(). */
	atomic_store_explicit(&lane->tail, end, memory_order_relaxed);

	/* lane_leave(), with the wake-up as a tail call */
	/* Pairs with the closing consumer's acquire of busy. */
	atomic_store_explicit(&lane->busy, 0, memory_order_release);
	lull__notify_barrier(region, asym);
	/* Relaxed: ordered by the barrier, as in lull__park_seen(). */
	seen = atomic_load_explicit(&region->park, memory_order_relaxed);
	if (unlikely(seen != LULL_PARK_AWAKE))
		return spsc_write_wake(prod, seen);
	return 0;
}

LULL_EXPORT int lull_spsc_writev(struct lull_producer *prod, int32_t type,
				 const struct iovec *iov, int iovcnt)
{
	uint64_t pos, end;
	uint32_t length;
	size_t len;
	int ret;

	ret = lane_check(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__iov_length(prod, iov, iovcnt, &len);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = lane_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = lane_reserve(prod, length, &pos, &end);
	if (likely(ret == 0)) {
		lull__iov_copy(lull__header_at(prod->data, prod->mask, pos) + 1,
			       iov, iovcnt);
		lane_publish(prod, pos, end, length, type);
	}
	lane_leave(prod);
	return ret;
}
