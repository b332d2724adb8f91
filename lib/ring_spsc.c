/* SPDX-License-Identifier: MIT */
/*
 * ring_spsc.c - the single-producer write path.
 *
 * The producer owns tail: it writes each record past it, header type and
 * payload first, then publishes the record in band with a release store
 * of the header's length, as MPSC producers do; the consumer finds
 * records by their lengths and never polls tail.  tail is then stored
 * (relaxed) only to tell a closing consumer where the records end.  No
 * atomic read-modify-write here: a write is busy-mark, barrier, state
 * check, copy, header, tail store, busy clear, barrier, park check (the
 * barriers are compiler-only in a lull-allocated region, see
 * lull__notify()).
 */
#include <string.h>

#include "park.h"
#include "record.h"

/*
 * The producer's own tail.  Relaxed: only this producer stores it, and the
 * acquire in lull_producer_attach() ordered the previous producer's last
 * store before us.  Reading it back from the region instead of keeping a
 * copy in the handle saves a store per write (see lull_spsc_write()); the
 * line stays in our cache, since the consumer reads it only when closing.
 */
static inline uint64_t spsc_tail(const struct lull_producer *prod)
{
	return atomic_load_explicit(&prod->region->tail, memory_order_relaxed);
}

/*
 * Is the ring free up to @end?  Refreshes the head we know of only when
 * the cached one says no.
 */
static inline bool spsc_room(struct lull_producer *prod, uint64_t end)
{
	if (likely(end - prod->head_cache <= prod->mask + 1))
		return true;
	/*
	 * Pairs with the consumer's release store of head: the consumer's
	 * reads of the space we are about to overwrite are finished before
	 * our writes to it.
	 */
	prod->head_cache =
		atomic_load_explicit(&prod->region->head, memory_order_acquire);
	return end - prod->head_cache <= prod->mask + 1;
}

/*
 * Find room for a record of @length bytes (header included) at the
 * producer's tail: where its header goes and where the tail ends up.
 * Returns 0 or -EAGAIN.
 */
static inline int spsc_reserve(struct lull_producer *prod, uint32_t length,
			       uint64_t *posp, uint64_t *endp)
{
	uint64_t tail = spsc_tail(prod);
	uint64_t size = lull__align8(length);
	uint64_t pad = lull__wrap_padding(tail, prod->mask, size);
	uint64_t end = tail + pad + size;

	if (unlikely(!spsc_room(prod, end)))
		return -EAGAIN;
	*posp = tail + pad;
	*endp = end;
	return 0;
}

/*
 * Publish a record header: the type, then the length with release.  The
 * consumer finds records in band (ring_read.c): a header whose length
 * reads positive is committed.  Pairs with its acquire load of the
 * length: the type and payload written before are visible once the
 * length is.
 */
static inline void spsc_header(struct lull_producer *prod, uint64_t pos,
			       uint32_t length, int32_t type)
{
	struct lull_record_header *hdr =
		lull__header_at(prod->data, prod->mask, pos);

	hdr->type = type;
	atomic_store_explicit(&hdr->length, (int32_t)length,
			      memory_order_release);
}

/*
 * Move the producer's tail past what it published.  Relaxed: readers do
 * not find records through tail; it only tells a closing consumer where
 * the records end (read after busy, whose release orders it) and the
 * next producer where to go on (after detach's release).  The consumer
 * never polls it, so this store stays in the producer's cache.
 */
static inline void spsc_tail_store(struct lull_producer *prod, uint64_t end)
{
	atomic_store_explicit(&prod->region->tail, end, memory_order_relaxed);
}

/* The busy mark, spsc_enter()'s first half, and its clearing. */
static inline void spsc_busy_mark(struct lull_producer *prod)
{
	/*
	 * Relaxed: ordered by the barrier below, which pairs with the
	 * closing consumer's park barrier before its load of busy.
	 */
	atomic_store_explicit(&prod->region->busy, 1, memory_order_relaxed);
	lull__producer_barrier(prod);
}

/* Not busy any more.  Pairs with the closing consumer's acquire of busy. */
static inline void spsc_busy_clear(struct lull_producer *prod)
{
	atomic_store_explicit(&prod->region->busy, 0, memory_order_release);
}

/*
 * Leave it: not busy any more, and wake the consumer if it sleeps (it may
 * be waiting for exactly this during a shutdown).
 */
static inline void spsc_leave(struct lull_producer *prod)
{
	/* A consumer that sees busy 0 also sees the tail stored before. */
	spsc_busy_clear(prod);
	lull__notify(prod);
}

/*
 * Enter a write or a claim: mark the producer busy, then check for a
 * shutdown.  The store and the load are the producer's half of a Dekker
 * handshake with a consumer that saw the shutdown and then reads busy
 * (ring_read.c, closure_final_tail()): with the barrier between them on
 * both sides, either the consumer sees busy and waits for this write, or
 * this check sees the shutdown.  So no record is published after the
 * consumer settled on the final tail.
 */
static inline int spsc_enter(struct lull_producer *prod)
{
	spsc_busy_mark(prod);
	if (unlikely(lull__state(prod->region) & LULL_STATE_CLOSED)) {
		/*
		 * Leave properly, notify included: a closing consumer may
		 * have seen us busy and parked until we are not (the model
		 * found the consumer asleep for good without it).
		 */
		spsc_leave(prod);
		return -EPIPE;
	}
	return 0;
}

/* Write the padding (if any) and the record header, then publish. */
static inline void spsc_publish(struct lull_producer *prod, uint64_t pos,
				uint64_t end, uint32_t length, int32_t type)
{
	uint64_t tail = spsc_tail(prod);

	if (pos != tail)
		spsc_header(prod, tail, (uint32_t)(pos - tail),
			    LULL_TYPE_PADDING);
	spsc_header(prod, pos, length, type);
	spsc_tail_store(prod, end);
}

static inline int spsc_check(const struct lull_producer *prod)
{
	if (unlikely(!prod || prod->mode != LULL_RING_SPSC))
		return -EINVAL;
	if (unlikely(prod->claimed))
		return -EBUSY;
	return 0;
}

/* lull_spsc_write(), every case: checks, wrapping, a full ring, closing. */
static int __attribute__((noinline))
spsc_write_any(struct lull_producer *prod, int32_t type, const void *data,
	       size_t len)
{
	uint64_t pos, end;
	uint32_t length;
	int ret;

	ret = spsc_check(prod);
	if (unlikely(ret < 0))
		return ret;
	if (unlikely(len && !data))
		return -EINVAL;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = spsc_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = spsc_reserve(prod, length, &pos, &end);
	if (likely(ret == 0)) {
		lull__copy_payload(
			lull__header_at(prod->data, prod->mask, pos) + 1, data,
			len);
		spsc_publish(prod, pos, end, length, type);
	}
	spsc_leave(prod);
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
 * The common write: a valid small record that fits before the end of the
 * data area, to a ring with room that is not closing.  Everything else
 * goes to spsc_write_any() before anything is stored.  The steps are
 * spsc_enter(), spsc_publish() and spsc_leave() with no call but the
 * wake-up's tail call, so that few registers need saving (each save is
 * one more store).
 *
 * Why it is this lean: while the consumer keeps up, the data line this
 * write stores to was just read by the consumer and must be fetched back,
 * and until it is, this write's stores and every later one wait in the
 * CPU's store buffer, which drains in order.  The fewer stores a write
 * makes (here: busy, the payload, the header's type and length, tail,
 * busy; only the payload and header go to a line the consumer reads), the
 * more writes fit in that buffer before the producer stalls.
 */
LULL_EXPORT int lull_spsc_write(struct lull_producer *prod, int32_t type,
				const void *data, size_t len)
{
	struct lull_region *region;
	unsigned char *at;
	uint64_t tail, end, size;
	uint32_t seen;

	if (unlikely(!prod || prod->mode != LULL_RING_SPSC || prod->claimed ||
		     type < 1 || len > 16 || (len && !data)))
		return spsc_write_any(prod, type, data, len);
	region = prod->region;
	tail = spsc_tail(prod);
	size = lull__align8(LULL_RECORD_HEADER_SIZE + len);
	end = tail + size;
	/* The record would wrap (padding first), or the ring looks full. */
	if (unlikely((tail & prod->mask) + size > prod->mask + 1 ||
		     end - prod->head_cache > prod->mask + 1 ||
		     LULL_RECORD_HEADER_SIZE + len > prod->max_record))
		return spsc_write_any(prod, type, data, len);

	/* spsc_enter(), with the -EPIPE case left to the general path */
	spsc_busy_mark(prod);
	if (unlikely(lull__state(region) & LULL_STATE_CLOSED))
		return spsc_write_any(prod, type, data, len); /* leaves */

	/* spsc_publish(): no padding, by the check above */
	at = (unsigned char *)lull__header_at(prod->data, prod->mask, tail);
	lull__copy_small(at + LULL_RECORD_HEADER_SIZE, data, len);
	spsc_header(prod, tail, (uint32_t)(LULL_RECORD_HEADER_SIZE + len),
		    type);
	spsc_tail_store(prod, end);

	/* spsc_leave(), with the wake-up as a tail call */
	spsc_busy_clear(prod);
	seen = lull__park_seen(prod);
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

	ret = spsc_check(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__iov_length(prod, iov, iovcnt, &len);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = spsc_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = spsc_reserve(prod, length, &pos, &end);
	if (likely(ret == 0)) {
		lull__iov_copy(lull__header_at(prod->data, prod->mask, pos) + 1,
			       iov, iovcnt);
		spsc_publish(prod, pos, end, length, type);
	}
	spsc_leave(prod);
	return ret;
}

LULL_EXPORT int lull_spsc_claim(struct lull_producer *prod, int32_t type,
				size_t len, void **datap)
{
	uint64_t pos, end;
	uint32_t length;
	int ret;

	ret = spsc_check(prod);
	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!datap))
		return -EINVAL;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = spsc_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = spsc_reserve(prod, length, &pos, &end);
	if (unlikely(ret < 0)) {
		spsc_leave(prod);
		return ret;
	}
	/* Busy until commit or abort. */
	prod->claimed = true;
	prod->claim_type = type;
	prod->claim_length = length;
	prod->claim_pos = pos;
	prod->claim_end = end;
	*datap = lull__header_at(prod->data, prod->mask, pos) + 1;
	return 0;
}

LULL_EXPORT int lull_spsc_commit(struct lull_producer *prod)
{
	if (unlikely(!prod || prod->mode != LULL_RING_SPSC || !prod->claimed))
		return -EINVAL;
	prod->claimed = false;
	spsc_publish(prod, prod->claim_pos, prod->claim_end,
		     prod->claim_length, prod->claim_type);
	spsc_leave(prod);
	return 0;
}

LULL_EXPORT int lull_spsc_abort(struct lull_producer *prod)
{
	if (!prod || prod->mode != LULL_RING_SPSC || !prod->claimed)
		return -EINVAL;
	/*
	 * Nothing was published, but the caller may have filled the claimed
	 * payload: zero it, or the consumer could take a stale byte there for
	 * the header of a record after the next, shorter one.  Not the
	 * header, which the claim never wrote (it still reads 0) and which
	 * the consumer may be polling right now.
	 */
	memset(lull__header_at(prod->data, prod->mask, prod->claim_pos) + 1, 0,
	       prod->claim_end - prod->claim_pos - LULL_RECORD_HEADER_SIZE);
	prod->claimed = false;
	spsc_leave(prod);
	return 0;
}
