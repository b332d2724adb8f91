/* SPDX-License-Identifier: MIT */
/*
 * ring_spsc.c - the single-producer write path.
 *
 * The producer owns tail: it writes records past it with plain stores and
 * then publishes them with one release store of tail.  The consumer reads
 * only below the tail it acquired, so it never sees a partial record and
 * the data area needs no zeroing.  No atomic read-modify-write here: a
 * write is busy-mark, barrier, state check, copy, tail store, busy clear,
 * barrier, park check (the barriers are compiler-only in a lull-allocated
 * region, see lull__notify()).
 */
#include <string.h>

#include "internal.h"

/*
 * Find room for a record of @length bytes (header included) at the
 * producer's tail: where its header goes and where the tail ends up.
 * Returns 0 or -EAGAIN.
 */
static inline int spsc_reserve(struct lull_producer *prod, uint32_t length,
			       uint64_t *posp, uint64_t *endp)
{
	uint64_t size = lull__align8(length);
	uint64_t pad = lull__wrap_padding(prod->tail, prod->mask, size);
	uint64_t end = prod->tail + pad + size;

	if (unlikely(end - prod->head_cache > prod->mask + 1)) {
		/*
		 * Pairs with the consumer's release store of head: the
		 * consumer's reads of the space we are about to overwrite are
		 * finished before our writes to it.
		 */
		prod->head_cache = atomic_load_explicit(&prod->region->head,
							memory_order_acquire);
		if (end - prod->head_cache > prod->mask + 1)
			return -EAGAIN;
	}
	*posp = prod->tail + pad;
	*endp = end;
	return 0;
}

static inline void spsc_header(struct lull_producer *prod, uint64_t pos,
			       uint32_t length, int32_t type)
{
	struct lull_record_header *hdr =
		lull__header_at(prod->data, prod->mask, pos);

	/* Ordered for the consumer by the release store of tail. */
	atomic_store_explicit(&hdr->length, (int32_t)length,
			      memory_order_relaxed);
	hdr->type = type;
}

/*
 * Leave it: not busy any more, and wake the consumer if it sleeps (it may
 * be waiting for exactly this during a shutdown).
 */
static inline void spsc_leave(struct lull_producer *prod)
{
	/*
	 * Pairs with the consumer's acquire load of busy: a consumer that
	 * sees 0 also sees the tail stored before it.
	 */
	atomic_store_explicit(&prod->region->busy, 0, memory_order_release);
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
	/* Relaxed: ordered by the barrier below, like the park barrier. */
	atomic_store_explicit(&prod->region->busy, 1, memory_order_relaxed);
	if (prod->asym_barrier)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
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
	if (pos != prod->tail)
		spsc_header(prod, prod->tail, (uint32_t)(pos - prod->tail),
			    LULL_TYPE_PADDING);
	spsc_header(prod, pos, length, type);
	prod->tail = end;
	/*
	 * Pairs with the consumer's acquire load of tail: the headers and
	 * payload written above are visible before the tail that covers them.
	 */
	atomic_store_explicit(&prod->region->tail, end, memory_order_release);
}

static inline int spsc_check(const struct lull_producer *prod)
{
	if (unlikely(!prod || prod->mode != LULL_RING_SPSC))
		return -EINVAL;
	if (unlikely(prod->claimed))
		return -EBUSY;
	return 0;
}

LULL_EXPORT int lull_spsc_write(struct lull_producer *prod, int32_t type,
				const void *data, size_t len)
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
		if (len) /* memcpy from NULL is undefined even for 0 bytes */
			memcpy(lull__header_at(prod->data, prod->mask, pos) + 1,
			       data, len);
		spsc_publish(prod, pos, end, length, type);
	}
	spsc_leave(prod);
	return ret;
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
	/* Nothing was published: forgetting the claim is enough. */
	prod->claimed = false;
	spsc_leave(prod);
	return 0;
}
