/* SPDX-License-Identifier: MIT */
/*
 * ring_read.c - the consumer: batch reads and peek/release.
 *
 * The consumer walks records from its private head, hands them out in
 * place, and publishes the new head once per batch with a release store.
 * SPSC: a record is readable when it lies below the tail the consumer
 * acquired.  MPSC: a record is readable when its length reads positive
 * (acquire); the consumer zeroes what it consumed before publishing head,
 * so that on the next lap a header nobody wrote yet reads 0.
 */
#include <string.h>

#include "internal.h"

/*
 * Find the next readable record at or after @pos, skipping padding.
 * Returns true and fills *rec and *recpos (the record's position) and
 * *endp (the position after it); false when nothing is readable, with *endp
 * past any padding skipped.  @mode is a constant in each caller, so the
 * compiler emits one specialised walk per topology.
 */
static inline __attribute__((always_inline)) int
next_record(struct lull_ring *ring, uint32_t mode, uint64_t pos,
	    struct lull_record *rec, uint64_t *endp)
{
	struct lull_record_header *hdr;
	int32_t length;
	uint64_t size;

	for (;;) {
		if (mode == LULL_RING_SPSC) {
			if (pos == ring->tail_cache) {
				/*
				 * Pairs with the producer's release store of
				 * tail: records below it are complete.
				 */
				ring->tail_cache = atomic_load_explicit(
					&ring->region->tail,
					memory_order_acquire);
				if (pos == ring->tail_cache)
					break;
			}
			hdr = lull__header_at(ring->data, ring->mask, pos);
			/* Ordered by the acquire of tail above. */
			length = atomic_load_explicit(&hdr->length,
						      memory_order_relaxed);
		} else {
			/*
			 * A batch zeroes what it consumed only at its end, so a
			 * batch that has gone a whole lap would find its own
			 * first record again: stop there.
			 */
			if (unlikely(pos - ring->head > ring->mask))
				break;
			hdr = lull__header_at(ring->data, ring->mask, pos);
			/*
			 * Pairs with the producer's release store of a
			 * positive length in mpsc_commit_at() (or of a
			 * padding length in mpsc_reserve()).
			 */
			length = atomic_load_explicit(&hdr->length,
						      memory_order_acquire);
			if (length <= 0)
				break;
		}
		size = lull__align8((uint64_t)length);
		if (unlikely(length < (int32_t)LULL_RECORD_HEADER_SIZE ||
			     size > ring->mask + 1 - (pos & ring->mask)))
			return -EPROTO; /* corrupt region */
		if (hdr->type != LULL_TYPE_PADDING) {
			rec->data = hdr + 1;
			rec->len = (uint32_t)length - LULL_RECORD_HEADER_SIZE;
			rec->type = hdr->type;
			*endp = pos + size;
			return 1;
		}
		pos += size;
	}
	*endp = pos;
	return 0;
}

/* Zero [from, to) of the data area, which may wrap. */
static void zero_span(struct lull_ring *ring, uint64_t from, uint64_t to)
{
	uint64_t off = from & ring->mask;
	uint64_t len = to - from;
	uint64_t first = ring->mask + 1 - off;

	if (first > len)
		first = len;
	memset(ring->data + off, 0, first);
	if (len > first)
		memset(ring->data, 0, len - first);
}

/* Consume everything from ring->head to @to and tell the producers. */
static inline void advance_head(struct lull_ring *ring, uint32_t mode,
				uint64_t to)
{
	if (to == ring->head)
		return;
	/*
	 * MPSC zeroing is plain stores into memory that producers later
	 * access atomically; no producer touches it before acquiring the
	 * head we publish below, so the two never race.
	 */
	if (mode == LULL_RING_MPSC)
		zero_span(ring, ring->head, to);
	ring->head = to;
	/*
	 * Pairs with the producers' acquire load of head: our reads of the
	 * consumed records (and the zeroing above) are done before a producer
	 * reuses the space.
	 */
	atomic_store_explicit(&ring->region->head, to, memory_order_release);
}

static inline __attribute__((always_inline)) int
read_batch(struct lull_ring *ring, uint32_t mode, lull_record_fn fn,
	   void *ctx, unsigned limit)
{
	struct lull_record rec;
	uint64_t pos = ring->head, end;
	unsigned count = 0;
	bool kept = false;
	int found, verdict;

	while (count < limit) {
		found = next_record(ring, mode, pos, &rec, &end);
		if (found <= 0) {
			if (unlikely(found < 0)) {
				advance_head(ring, mode, pos);
				return count ? (int)count : found;
			}
			pos = end; /* past trailing padding */
			break;
		}
		verdict = fn(&rec, ctx);
		if (verdict == LULL_READ_KEEP) {
			kept = true;
			break;
		}
		pos = end;
		count++;
		if (verdict != LULL_READ_CONTINUE)
			break;
	}
	advance_head(ring, mode, pos);
	if (count == 0 && !kept)
		return -EAGAIN;
	return (int)count;
}

static inline int consumer_check(const struct lull_ring *ring)
{
	if (unlikely(!ring))
		return -EINVAL;
	if (unlikely(!ring->is_consumer))
		return -EPERM;
	return 0;
}

LULL_EXPORT int lull_ring_read(struct lull_ring *ring, lull_record_fn fn,
			       void *ctx, unsigned limit)
{
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!fn || !limit || ring->peeked))
		return -EINVAL;
	if (limit > INT32_MAX)
		limit = INT32_MAX;
	if (ring->mode == LULL_RING_SPSC)
		return read_batch(ring, LULL_RING_SPSC, fn, ctx, limit);
	return read_batch(ring, LULL_RING_MPSC, fn, ctx, limit);
}

/* next_record() for the ring's own topology, for the cold callers. */
static int next_record_any(struct lull_ring *ring, struct lull_record *rec,
			   uint64_t *endp)
{
	if (ring->mode == LULL_RING_SPSC)
		return next_record(ring, LULL_RING_SPSC, ring->head, rec, endp);
	return next_record(ring, LULL_RING_MPSC, ring->head, rec, endp);
}

LULL_EXPORT int lull_ring_peek(struct lull_ring *ring, struct lull_record *rec)
{
	uint64_t end;
	int found;
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!rec))
		return -EINVAL;
	found = next_record_any(ring, rec, &end);
	if (found <= 0)
		return found < 0 ? found : -EAGAIN;
	ring->peeked = true;
	return 0;
}

LULL_EXPORT int lull_ring_release(struct lull_ring *ring)
{
	struct lull_record rec;
	uint64_t end;
	int found;
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!ring->peeked))
		return -EINVAL;
	ring->peeked = false;
	/*
	 * The peeked record is still the next one (committed records do not
	 * change until consumed): find its end again.
	 */
	found = next_record_any(ring, &rec, &end);
	if (unlikely(found <= 0))
		return -EPROTO;
	if (ring->mode == LULL_RING_SPSC)
		advance_head(ring, LULL_RING_SPSC, end);
	else
		advance_head(ring, LULL_RING_MPSC, end);
	return 0;
}

bool lull__ring_readable(struct lull_ring *ring)
{
	struct lull_record rec;
	uint64_t end;

	return next_record_any(ring, &rec, &end) != 0;
}
