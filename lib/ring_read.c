/* SPDX-License-Identifier: MIT */
/*
 * ring_read.c - the consumer: batch reads and peek/release.
 *
 * The consumer walks records from its private head, hands them out in
 * place, and publishes the new head once per batch with a release store.
 * Both topologies publish in band: a record is readable when its header's
 * length reads positive (acquire).  The consumer zeroes what it consumed
 * before publishing head, so that on the next lap a header nobody wrote
 * yet reads 0.  It never polls tail, the line the producers write on
 * every record; tail only marks the end for a closing consumer.
 */
#include <string.h>

#include "park.h"
#include "record.h"

/*
 * Find the next readable record at or after @pos, skipping padding.
 * Returns 1 and fills *rec and *endp (the position after it); 0 when
 * nothing is readable, with *endp past any padding skipped; -EPROTO for a
 * corrupt header.  Both topologies publish records in band, through the
 * header's length, so one walk serves both.
 */
static inline __attribute__((always_inline)) int
next_record(const struct lull_ring *ring, uint64_t pos, struct lull_record *rec,
	    uint64_t *endp)
{
	struct lull_record_header *hdr;
	int32_t length;
	uint64_t size;

	for (;;) {
		/*
		 * A batch zeroes what it consumed only at its end, so a batch
		 * that has gone a whole lap would find its own first record
		 * again: stop there.
		 */
		if (unlikely(pos - ring->head > ring->mask))
			break;
		/* Closing: nothing is published past the final tail. */
		if (unlikely(ring->closing != LULL_CLOSING_OPEN &&
			     pos == ring->final_tail))
			break;
		hdr = lull__header_at(ring->data, ring->mask, pos);
		/*
		 * Pairs with the producer's release store of a positive
		 * length (spsc_header(), mpsc_commit_at(), or a padding
		 * length in mpsc_reserve()).  Zero: not written yet; MPSC
		 * negative: claimed, not committed.
		 */
		length = atomic_load_explicit(&hdr->length,
					      memory_order_acquire);
		if (length <= 0)
			break;
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
static inline void advance_head(struct lull_ring *ring, uint64_t to)
{
	if (to == ring->head)
		return;
	/*
	 * Zero what was consumed, so that on the next lap a header nobody
	 * wrote yet reads 0.  Plain stores into memory that producers later
	 * access atomically; no producer touches it before acquiring the
	 * head we publish below, so the two never race.  An immediate
	 * shutdown skips records without coming here: it must not write
	 * under producers still finishing them.
	 */
	zero_span(ring, ring->head, to);
	ring->head = to;
	/*
	 * Pairs with the producers' acquire load of head: our reads of the
	 * consumed records (and the zeroing above) are done before a producer
	 * reuses the space.
	 */
	atomic_store_explicit(&ring->region->head, to, memory_order_release);
	lull__space_notify(ring->region);
}

/*
 * Shutdown, as the consumer sees it.  When nothing is readable, the
 * consumer asks closure_next() what comes next: nothing yet (0: the ring is
 * open, or records before the final tail are still being committed), the
 * fatal or poison record (1, filled into *rec), or -EPIPE once the poison
 * was consumed.  The steps:
 *
 *   OPEN  --state CLOSED seen, final tail known-->  DRAIN
 *   DRAIN --head reached the final tail, sealed-->  FATAL or POISON
 *   FATAL --consumed-->  POISON  --consumed-->  DONE (-EPIPE)
 */
static const uint64_t no_payload;

/*
 * The position no record will pass any more.  MPSC: the closed tail,
 * since claims stop at the bit.  SPSC: the tail, once the producer is not
 * inside a write (see spsc_enter()); false when it still is, and its
 * spsc_leave() will wake us.
 */
static bool closure_final_tail(const struct lull_ring *ring, uint32_t state,
			       uint64_t *finalp)
{
	struct lull_region *region = ring->region;

	if (ring->mode == LULL_RING_MPSC) {
		/*
		 * lull__shutdown() sets the tail's bit before the state's
		 * (seq_cst), and we acquired the state: the bit is there.
		 */
		*finalp = atomic_load_explicit(&region->tail,
					       memory_order_acquire) &
			  ~(uint64_t)LULL_TAIL_FLAGS;
		return true;
	}
	if (!(state & LULL_STATE_DISCARD)) {
		/*
		 * Pairs with the barrier in spsc_enter(): either we see the
		 * producer busy, or its next state check sees the shutdown.
		 * Acquire pairs with spsc_leave()'s release of busy.
		 */
		/*
		 * A failed barrier (see lull__barrier_heavy()) proves
		 * nothing: not final yet, and the park that follows reports
		 * the error.
		 */
		if (lull__park_barrier(ring) < 0 ||
		    atomic_load_explicit(&region->busy, memory_order_acquire))
			return false;
	}
	/*
	 * Relaxed: the producer's tail store is ordered before its release
	 * of busy, which we acquired above.  Immediate: nothing is read any
	 * more, but records are found in band before tail passes them, so
	 * the tail read here may lag our head: never move the head back.
	 */
	*finalp = atomic_load_explicit(&region->tail, memory_order_relaxed);
	if ((int64_t)(*finalp - ring->head) < 0)
		*finalp = ring->head;
	return true;
}

static __attribute__((noinline)) int
closure_next(struct lull_ring *ring, uint64_t *posp, struct lull_record *rec)
{
	struct lull_region *region = ring->region;
	uint32_t state, sealed;

	switch (ring->closing) {
	case LULL_CLOSING_OPEN:
		/* Pairs with the seq_cst RMWs of lull__shutdown(). */
		state = atomic_load_explicit(&region->state,
					     memory_order_acquire);
		if (!(state & LULL_STATE_CLOSED) ||
		    !closure_final_tail(ring, state, &ring->final_tail))
			return 0;
		ring->closing = LULL_CLOSING_DRAIN;
		/* fall through */
	case LULL_CLOSING_DRAIN:
		/* Pairs with the seq_cst RMW of lull__shutdown(). */
		state = atomic_load_explicit(&region->state,
					     memory_order_acquire);
		if (state & LULL_STATE_DISCARD) {
			/* Skip, without zeroing under producers finishing
			 * claims; never handed, so never again either. */
			*posp = ring->final_tail;
			ring->head = ring->final_tail;
			/* Pairs with the producers' acquire of head (A1). */
			atomic_store_explicit(&region->head, ring->head,
					      memory_order_release);
			lull__space_notify(region);
		}
		if (*posp != ring->final_tail)
			return 0;
		/*
		 * Seal: from this RMW on a fatal report is too late.  Both
		 * are RMWs of state, so either we see its FATAL bit (and,
		 * acquiring it, the report) or it sees our SEALED bit and
		 * tells its caller -EPIPE.
		 */
		sealed = atomic_fetch_or_explicit(&region->state,
						  LULL_STATE_SEALED,
						  memory_order_acq_rel);
		ring->closing = sealed & LULL_STATE_FATAL ? LULL_CLOSING_FATAL
							  : LULL_CLOSING_POISON;
		break;
	case LULL_CLOSING_DONE:
		return -EPIPE;
	default:
		break;
	}
	if (ring->closing == LULL_CLOSING_FATAL) {
		rec->data = &region->fatal;
		rec->len = (uint32_t)offsetof(struct lull_fatal, message) +
			   region->fatal.length;
		rec->type = LULL_TYPE_FATAL;
	} else {
		rec->data = &no_payload;
		rec->len = 0;
		rec->type = LULL_TYPE_POISON;
	}
	return 1;
}

/* The fatal or poison record was consumed: on to the next step. */
static void closure_consume(struct lull_ring *ring)
{
	ring->closing = ring->closing == LULL_CLOSING_FATAL
				? LULL_CLOSING_POISON
				: LULL_CLOSING_DONE;
}

/* Must the consumer go straight to closure_next()? */
static inline bool closure_first(const struct lull_ring *ring)
{
	/* A peeked record stays what it was until its release. */
	return unlikely(ring->closing >= LULL_CLOSING_FATAL ||
			(!ring->peeked &&
			 (atomic_load_explicit(&ring->region->state,
					       memory_order_relaxed) &
			  LULL_STATE_DISCARD)));
}

static inline __attribute__((always_inline)) int
read_batch(struct lull_ring *ring, lull_record_fn fn, void *ctx,
	   unsigned limit)
{
	struct lull_record rec;
	uint64_t pos = ring->head, end;
	unsigned count = 0;
	bool kept = false;
	int found, verdict;

	/* Once per batch: an immediate shutdown skips what is left. */
	bool closure = closure_first(ring);

	while (count < limit) {
		if (closure)
			found = 0, end = pos;
		else
			found = next_record(ring, pos, &rec, &end);
		if (found <= 0) {
			if (unlikely(found < 0)) {
				advance_head(ring, pos);
				return count ? (int)count : found;
			}
			pos = end; /* past trailing padding */
			if (count)
				break;
			/* Empty: is it the end?  The fatal and poison
			 * records come alone, one per batch. */
			found = closure_next(ring, &pos, &rec);
			if (found < 0) {
				advance_head(ring, pos);
				return found;
			}
			if (found > 0) {
				if (fn(&rec, ctx) == LULL_READ_KEEP) {
					kept = true;
				} else {
					closure_consume(ring);
					count++;
				}
			}
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
	advance_head(ring, pos);
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
	return read_batch(ring, fn, ctx, limit);
}

/*
 * The next thing to hand out for the cold callers: a record (1), the fatal
 * or poison record (2), nothing (0) or -EPIPE / -EPROTO.  *endp is where
 * the head goes once it is consumed.
 */
static int next_any(struct lull_ring *ring, struct lull_record *rec,
		    uint64_t *endp)
{
	int found;

	if (closure_first(ring))
		found = 0, *endp = ring->head;
	else
		found = next_record(ring, ring->head, rec, endp);
	if (found != 0)
		return found;
	found = closure_next(ring, endp, rec);
	return found > 0 ? 2 : found;
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
	found = next_any(ring, rec, &end);
	if (found <= 0)
		return found < 0 ? found : -EAGAIN;
	ring->peeked = true;
	ring->peeked_closure = found == 2;
	ring->peek_end = end;
	return 0;
}

LULL_EXPORT int lull_ring_release(struct lull_ring *ring)
{
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!ring->peeked))
		return -EINVAL;
	ring->peeked = false;
	/* Committed records do not change until consumed: peek_end holds. */
	advance_head(ring, ring->peek_end);
	if (ring->peeked_closure)
		closure_consume(ring);
	return 0;
}

/*
 * A query, unlike next_any(): what a read would find, without taking any
 * shutdown step (no seal, no head published), so that the park's re-check
 * and the spins may ask as often as they like.  It foresees each step of
 * closure_next(): the fatal or poison record is next once the final tail
 * is known and reached (or the rest is discarded); before that, only a
 * committed record is readable.
 */
bool lull__ring_readable(const struct lull_ring *ring)
{
	struct lull_record rec;
	uint64_t end = ring->head, final_tail;
	uint32_t state;
	int found;

	if (!closure_first(ring)) {
		found = next_record(ring, ring->head, &rec, &end);
		if (found != 0)
			return true; /* a record, or a corrupt one: -EPROTO */
	}
	switch (ring->closing) {
	case LULL_CLOSING_OPEN:
		/* Pairs with the seq_cst RMWs of lull__shutdown(). */
		state = atomic_load_explicit(&ring->region->state,
					     memory_order_acquire);
		if (!(state & LULL_STATE_CLOSED) ||
		    !closure_final_tail(ring, state, &final_tail))
			return false;
		break;
	case LULL_CLOSING_DRAIN:
		/* Pairs with the seq_cst RMW of lull__shutdown(). */
		state = atomic_load_explicit(&ring->region->state,
					     memory_order_acquire);
		final_tail = ring->final_tail;
		break;
	default:
		return true; /* fatal, poison, or -EPIPE */
	}
	return (state & LULL_STATE_DISCARD) || end == final_tail;
}

LULL_EXPORT int lull_ring_close(struct lull_ring *ring)
{
	int ret = consumer_check(ring);

	if (ret < 0)
		return ret;
	ring->closing = LULL_CLOSING_DONE;
	lull__shutdown(ring->region, LULL_SHUTDOWN_IMMEDIATE,
		       LULL_STATE_SEALED);
	return 0;
}
