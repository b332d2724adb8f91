/* SPDX-License-Identifier: MIT */
/*
 * mpsc.h - one record claimed on the shared MPSC tail and committed,
 * inline: the steps of lull_mpsc_write() (ring_mpsc.c), shared with the
 * packed array write (ring_batch.c).
 *
 * Producers claim space by advancing tail with a CAS, then write and commit
 * each record on their own: the record's length field is the commit flag
 * (0 not written, negative claimed, positive committed, see region.h).
 */
#ifndef LULL_PRIVATE_MPSC_H
#define LULL_PRIVATE_MPSC_H

#include "park.h"
#include "record.h"

/*
 * Claim a record of @length bytes (header included), with the padding it
 * needs at the wrap, and mark it claimed.  Returns 0 and the position of the
 * record header in *posp, or -EAGAIN, or -EPIPE after a shutdown.
 */
/*
 * Is the shared lane free up to @end?  Refreshes the head we know of only
 * when the cached one says no; when full, gives the claim's try up.
 * Signed: our tail may be older than a head another producer let us see;
 * the CAS then fails and we retry with a fresh tail rather than report a
 * full ring.  Returns 0, -EAGAIN, or -EPIPE (lull__full()).
 */
static inline int mpsc_room(struct lull_producer *prod, uint64_t end)
{
	const int64_t cap = (int64_t)(prod->mask + 1);

	if (likely((int64_t)(end - prod->head_cache) <= cap))
		return 0;
	/*
	 * Pairs with the consumer's release store of head: its reads and its
	 * zeroing of the space we are about to write are finished before our
	 * writes.
	 */
	prod->head_cache =
		atomic_load_explicit(&prod->lane->head, memory_order_acquire);
	if ((int64_t)(end - prod->head_cache) <= cap)
		return 0;
	lull__claim_given_up(prod);
	return lull__full(prod);
}

/*
 * Claim [*tailp, @end) with one CAS on the shared tail, announced first
 * (a shared region's slot, handles.h).  On a lost race, *tailp is the
 * tail the CAS saw, and the retry is counted.
 */
static inline bool mpsc_take(struct lull_producer *prod, uint64_t *tailp,
			     uint64_t end)
{
	lull__claim_try(prod, *tailp, end);
	/*
	 * Relaxed: the CAS only has to be atomic.  The space it hands us was
	 * made writable by the acquire of head in mpsc_room(), and the
	 * consumer learns about our record from its length, not from tail.
	 */
	if (atomic_compare_exchange_weak_explicit(&prod->lane->tail, tailp,
						  end, memory_order_relaxed,
						  memory_order_relaxed))
		return true;
	/* Private to this producer: lull_producer_stats(). */
	prod->claim_retries++;
	return false;
}

/*
 * Claim a record of @length bytes (header included), with the padding it
 * needs at the wrap, and mark it claimed.  Returns 0 and the position of the
 * record header in *posp, or -EAGAIN, or -EPIPE after a shutdown.
 */
static inline int mpsc_reserve(struct lull_producer *prod, uint32_t length,
			       uint64_t *posp)
{
	uint64_t size = lull__align8(length);
	uint64_t tail, pad, end;
	struct lull_record_header *hdr;
	int ret;

	if (lull__consumer_lost(prod))
		return -EPIPE;
	/* Relaxed: the CAS below validates whatever we read here. */
	tail = atomic_load_explicit(&prod->lane->tail, memory_order_relaxed);
	for (;;) {
		/*
		 * Closed is a bit of tail itself, so the CAS that claims
		 * space also proves the ring was open at that instant.  The
		 * other flag bits are never set: a tail with one is a
		 * corrupt region's, and claims there end as on a closed one
		 * (its headers would not be 8-byte aligned).
		 */
		if (unlikely(tail & LULL_TAIL_FLAGS)) {
			lull__claim_given_up(prod);
			return -EPIPE;
		}
		pad = lull__wrap_padding(tail, prod->mask, size);
		end = tail + pad + size;
		ret = mpsc_room(prod, end);
		if (unlikely(ret < 0))
			return ret;
		if (mpsc_take(prod, &tail, end))
			break;
	}
	lull__claim_won(prod);

	if (pad)
		lull__header_publish(prod->data, prod->mask, tail,
				     (int32_t)pad, LULL_TYPE_PADDING);
	hdr = lull__header_at(prod->data, prod->mask, tail + pad);
	/*
	 * Relaxed: "claimed" is informational (the consumer treats it as not
	 * ready); the commit's release store orders the payload.
	 */
	atomic_store_explicit(&hdr->length, -(int32_t)length,
			      memory_order_relaxed);
	*posp = tail + pad;
	return 0;
}

/*
 * Payloads from LULL_PREFETCH_NEXT_MIN to LULL_PREFETCH_NEXT_MAX bytes:
 * where mpsc_prefetch_next() measured faster (perf/README.md, "The shared
 * tail's claim waits for the stores before it").  Below, 32- and 64-byte
 * records with four producers lost up to a tenth; above, it did nothing.
 */
#define LULL_PREFETCH_NEXT_MIN 96u
#define LULL_PREFETCH_NEXT_MAX 2048u

/*
 * Fetch the lines that a next record as long as ours (@length bytes,
 * header included; or a committed claim's whole span), right after it at
 * @next, would take, if the head we know of says they are free.  A claim's
 * locked CAS waits until every store before it is done, and each store of the
 * record before waits for its line to come from the consumer, which last
 * zeroed it: fetched now, the lines are here or on their way by the next
 * claim.  At 512 bytes the CAS held three quarters of a producer's time,
 * and this made the shared-tail ring 1.2x to 1.3x faster with 1 to 8
 * producers, 1.3x to 1.5x at 128 and 192 bytes.  A read prefetch:
 * PREFETCHW was no faster.  A hint only, never a fault; space not yet
 * free is left alone, since pulling a line the consumer is still reading
 * would slow both.
 */
static inline void mpsc_prefetch_next(const struct lull_producer *prod,
				      uint64_t next, uint64_t length)
{
	const int64_t cap = (int64_t)(prod->mask + 1);
	uint64_t end = next + length;

	if (length < LULL_RECORD_HEADER_SIZE + LULL_PREFETCH_NEXT_MIN ||
	    length > LULL_RECORD_HEADER_SIZE + LULL_PREFETCH_NEXT_MAX ||
	    (int64_t)(end - prod->head_cache) > cap)
		return;
	for (uint64_t at = next & ~(uint64_t)63; at < end; at += 64)
		__builtin_prefetch(prod->data + (at & prod->mask), 0, 3);
}

/* Commit the claimed record at @pos (lull__header_publish()), then wake. */
static inline void mpsc_commit_at(struct lull_producer *prod, uint64_t pos,
				  uint32_t length, int32_t type)
{
	lull__header_publish(prod->data, prod->mask, pos, (int32_t)length,
			     type);
	lull__claim_done(prod);
	mpsc_prefetch_next(prod, pos + lull__align8(length), length);
	/* The park handshake's producer half: wake a parked consumer. */
	lull__notify(prod);
}

/* The MPSC write calls' checks: an MPSC producer with no claim. */
static inline int mpsc_check(const struct lull_producer *prod)
{
	if (unlikely(!prod || prod->mode != LULL_RING_MPSC))
		return -EINVAL;
	if (unlikely(prod->claimed))
		return -EBUSY;
	return 0;
}

#endif /* LULL_PRIVATE_MPSC_H */
