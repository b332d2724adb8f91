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
static inline int mpsc_reserve(struct lull_producer *prod, uint32_t length,
			       uint64_t *posp)
{
	struct lull_lane *lane = prod->lane;
	uint64_t cap = prod->mask + 1;
	uint64_t size = lull__align8(length);
	uint64_t tail, pad, end;
	struct lull_record_header *hdr;

	if (lull__consumer_lost(prod))
		return -EPIPE;
	/* Relaxed: the CAS below validates whatever we read here. */
	tail = atomic_load_explicit(&lane->tail, memory_order_relaxed);
	for (;;) {
		/*
		 * Closed is a bit of tail itself, so the CAS that claims
		 * space also proves the ring was open at that instant.
		 */
		if (unlikely(tail & LULL_TAIL_CLOSED)) {
			lull__claim_given_up(prod);
			return -EPIPE;
		}
		pad = lull__wrap_padding(tail, prod->mask, size);
		end = tail + pad + size;
		/*
		 * Signed: our tail may be older than a head another producer
		 * let us see; the CAS then fails and we retry with a fresh
		 * tail rather than report a full ring.
		 */
		if (unlikely((int64_t)(end - prod->head_cache) > (int64_t)cap)) {
			/*
			 * Pairs with the consumer's release store of head:
			 * its reads and its zeroing of the space we are about
			 * to write are finished before our writes.
			 */
			prod->head_cache = atomic_load_explicit(
				&lane->head, memory_order_acquire);
			if ((int64_t)(end - prod->head_cache) > (int64_t)cap) {
				lull__claim_given_up(prod);
				return lull__full(prod);
			}
		}
		lull__claim_try(prod, tail, end);
		/*
		 * Relaxed: the CAS only has to be atomic.  The space it hands
		 * us was made writable by the acquire of head above, and the
		 * consumer learns about our record from its length, not from
		 * tail.
		 */
		if (atomic_compare_exchange_weak_explicit(
			    &lane->tail, &tail, end, memory_order_relaxed,
			    memory_order_relaxed))
			break;
		/* Private to this producer: lull_producer_stats(). */
		prod->claim_retries++;
	}
	lull__claim_won(prod);

	if (pad) {
		hdr = lull__header_at(prod->data, prod->mask, tail);
		hdr->type = LULL_TYPE_PADDING;
		/* Pairs with the consumer's acquire load of length. */
		atomic_store_explicit(&hdr->length, (int32_t)pad,
				      memory_order_release);
	}
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

static inline void mpsc_commit_at(struct lull_producer *prod, uint64_t pos,
				  uint32_t length, int32_t type)
{
	struct lull_record_header *hdr =
		lull__header_at(prod->data, prod->mask, pos);

	hdr->type = type;
	/*
	 * Pairs with the consumer's acquire load of length: type and payload
	 * are visible before the record reads as committed.
	 */
	atomic_store_explicit(&hdr->length, (int32_t)length,
			      memory_order_release);
	lull__claim_done(prod);
	/*
	 * An abort lands here too: turning a claim into padding can make the
	 * records behind it readable, so it must wake a parked consumer.
	 */
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
