/* SPDX-License-Identifier: MIT */
/*
 * ring_read.c - the consumer: batch reads and peek/release.
 *
 * The consumer walks records from its private head in each lane, hands
 * them out in place, and publishes the lane's new head once per batch
 * with a release store.  Every topology publishes in band: a record is
 * readable when its header's length reads positive (acquire), and one
 * that reads 0 is not written yet (region.h says who keeps it so: on the
 * MPSC lane, the consumer zeroing what it consumed before publishing
 * head).  It never polls tail, the line the producers write on every
 * record; tail only marks the end for a closing consumer.  A LANES ring
 * has many lanes, taken in turn; the others have one.  An array record
 * (region.h) is handed out item by item, each as a record of its own; a
 * read or a peek that stops inside one leaves the lane's head at it and
 * the next item's index in the cursor.  lull_ring_read_items() hands out
 * an array's items as one run instead, and every other record as a run of
 * one.
 *
 * Nothing read from the region is trusted: any process that maps it may
 * have written anything anywhere.  Every header is checked before a
 * record is handed out or skipped (record_size()), and so is every tail a
 * shutdown reads; the first thing that no producer could have written
 * makes the ring fatal (lull__ring_corrupt(), shutdown.c): -EPROTO once,
 * then the poison record, then -EPIPE.
 */
#include <ck_pr.h>
#include <string.h>

#include "consume.h"

/* What next_record() found. */
#define NEXT_NONE 0    /* nothing readable (not written yet, or the end) */
#define NEXT_RECORD 1  /* a committed record */
#define NEXT_CLAIMED 2 /* MPSC: a claimed record, not committed yet */

/*
 * Where a walk of a lane from its head must stop: one lap past the head
 * (no producer writes further ahead), or once closing the lane's final
 * tail (nothing is published past it).
 */
static inline uint64_t walk_stop(const struct lull_ring *ring,
				 const struct lull_cursor *cur)
{
	return ring->closing != LULL_CLOSING_OPEN ? cur->final_tail
						  : cur->head + ring->mask + 1;
}

/*
 * Whether a read of @ring ends after the record that reaches a quarter lap
 * past the head (the give-back, read_lane()).  A read
 * publishes the head only at its end, and with a limit that holds a lap
 * of records, a producer that filled the ring would wait for the whole
 * lap to be read, then the consumer for the producer to write again: the
 * two would take turns instead of running side by side.  Reads that end
 * every quarter lap let the producer refill what was read while the
 * consumer reads the rest.  A ring of several lanes has that already (a
 * lane's producer writes while the consumer reads the other lanes), and
 * there it costs: producers that find their lane full less often yield
 * less, and when they outnumber the CPUs the consumer gets less of one
 * (perf/README.md).  Only in laps of LULL_GIVE_BACK_MIN_LAP and more,
 * where a lap takes long enough to read for the wait to tell; there a
 * quarter lap is at least the slip's long read, so a read that ends at
 * the give-back never starts a slip.
 */
static inline bool gives_back(const struct lull_ring *ring)
{
	return ring->lanes == 1 && ring->mask + 1 >= LULL_GIVE_BACK_MIN_LAP;
}

/*
 * The bytes a committed record at @pos occupies, @length (its length
 * field, LULL_LENGTH_BATCH_MORE masked off, > 0) rounded up to 8, or 0
 * when no producer could have written this header, in a lane whose walk
 * stops at @stop (> @pos):
 *   - shorter than a header;
 *   - across the end of the data area (a record there is moved to offset
 *     0 behind a padding), or past @stop, over the records of the next
 *     lap or past the final tail;
 *   - a user record or an array longer than the largest record
 *     (@max_record: header and payload), where a padding may be anything
 *     up to the end;
 *   - a reserved type other than padding and array: the fatal and poison
 *     records come from the consumer itself, never from the data area.
 * An array's own header is checked apart (array_items()).
 */
static inline uint64_t record_size(uint64_t mask, uint32_t max_record,
				   uint64_t pos, uint64_t stop, int32_t length,
				   int32_t type)
{
	uint64_t size = lull__align8((uint64_t)length);

	if (unlikely(length < (int32_t)LULL_RECORD_HEADER_SIZE ||
		     size > mask + 1 - (pos & mask) || size > stop - pos))
		return 0;
	if (type == LULL_TYPE_PADDING)
		return size;
	if (unlikely((type < 0 && type != LULL_TYPE_ARRAY) ||
		     (uint32_t)length > max_record))
		return 0;
	return size;
}

/*
 * The items of an array record (region.h) of @length (header included):
 * how many, their length and type into *lenp and *typep; or 0 when no
 * producer wrote this array header: an item type that is not a user's,
 * an item length that is 0, not a multiple of 8 or above the largest
 * payload, or items that do not fill the payload exactly.  Read once, as
 * a header is: what is checked is what is handed out.
 */
static inline uint32_t array_items(const struct lull_record_header *hdr,
				   int32_t length, uint32_t max_record,
				   uint32_t *lenp, int32_t *typep)
{
	const struct lull_array_header *ah = (const void *)(hdr + 1);
	uint32_t room = (uint32_t)length - LULL_RECORD_HEADER_SIZE;
	uint32_t len, bytes, count;
	int32_t type;

	/* Room first: a header-only record may end the data area. */
	if (unlikely(room < sizeof(*ah)))
		return 0;
	len = ah->item_len;
	type = ah->item_type;
	if (unlikely(type < 1 || !len || (len & 7) ||
		     len > max_record - LULL_RECORD_HEADER_SIZE))
		return 0;
	bytes = room - (uint32_t)sizeof(*ah);
	/*
	 * A division costs tens of cycles, once per array: item lengths are
	 * mostly powers of two, whose count is a shift, and otherwise one
	 * division serves the count and the check of the rest.
	 */
	if (likely(!(len & (len - 1))))
		count = bytes >> __builtin_ctz(len);
	else
		count = bytes / len;
	if (unlikely(count * len != bytes))
		return 0;
	*lenp = len;
	*typep = type;
	return count;
}

/* Item @item of an array whose items are @len bytes, as a record. */
static inline void array_item(struct lull_record *rec,
			      const struct lull_record_header *hdr,
			      uint32_t item, uint32_t len, int32_t type)
{
	rec->data = (const unsigned char *)(hdr + 1) +
		    sizeof(struct lull_array_header) + (size_t)item * len;
	rec->len = len;
	rec->type = type;
}

/*
 * What consuming the record next_record() found does to its lane: the
 * head moves to @end and the array index there becomes @item (0 but
 * within an array with items left); @more: it is not its batch's last.
 */
struct next_at {
	uint64_t end;
	uint32_t item;
	bool more;
};

/*
 * Find the next readable record of a lane from its head, skipping
 * padding; in an array, its next item.  Returns NEXT_RECORD and fills
 * *rec and *at (what consuming it does); NEXT_NONE or NEXT_CLAIMED when
 * nothing is readable, with at->end past any padding skipped; -EPROTO
 * for a corrupt header.
 */
static inline __attribute__((always_inline)) int
next_record(const struct lull_ring *ring, const struct lull_cursor *cur,
	    struct lull_record *rec, struct next_at *at)
{
	const uint64_t stop = walk_stop(ring, cur);
	struct lull_record_header *hdr;
	uint64_t pos = cur->head, size;
	int32_t raw, length, type, item_type;
	uint32_t items, item, item_len;

	/*
	 * A batch gives back what it consumed only at its end, so a batch
	 * that has gone a whole lap would find its own first record again:
	 * the walk stops there, or at the final tail, and never passes either
	 * (record_size()).
	 */
	while (pos != stop) {
		hdr = lull__header_at(cur->data, ring->mask, pos);
		/*
		 * Pairs with the producer's release store of a positive
		 * length (lane_header(), mpsc_commit_at(), a batch's gate in
		 * claim_commit(), or a padding).  Zero: not written yet;
		 * negative: claimed, not committed (MPSC).
		 */
		raw = atomic_load_explicit(&hdr->length, memory_order_acquire);
		if (raw <= 0) {
			at->end = pos;
			return raw < 0 ? NEXT_CLAIMED : NEXT_NONE;
		}
		length = raw & LULL_LENGTH_MASK;
		/* Read once: what is checked is what is handed out. */
		type = hdr->type;
		size = record_size(ring->mask, ring->max_record, pos, stop,
				   length, type);
		if (unlikely(!size))
			return -EPROTO; /* corrupt region */
		if (type == LULL_TYPE_PADDING) {
			pos += size;
			continue;
		}
		at->end = pos + size;
		at->item = 0;
		at->more = raw & LULL_LENGTH_BATCH_MORE;
		if (type != LULL_TYPE_ARRAY) {
			rec->data = hdr + 1;
			rec->len = (uint32_t)length - LULL_RECORD_HEADER_SIZE;
			rec->type = type;
			return NEXT_RECORD;
		}
		/* The items before cur->item were taken, if it is at head. */
		item = pos == cur->head ? cur->item : 0;
		items = array_items(hdr, length, ring->max_record, &item_len,
				    &item_type);
		if (unlikely(item >= items))
			return -EPROTO; /* no array, or shorter than taken */
		array_item(rec, hdr, item, item_len, item_type);
		if (item + 1 < items) {
			/* Consuming it leaves the head at the array. */
			at->end = pos;
			at->item = item + 1;
			at->more = true;
		}
		return NEXT_RECORD;
	}
	at->end = pos;
	return NEXT_NONE;
}

/*
 * Shutdown, as the consumer sees it.  When nothing is readable, the
 * consumer asks closure_next() what comes next: nothing yet (0: the ring is
 * open, or records before a final tail are still being committed), the
 * fatal or poison record (1, filled into *rec), or -EPIPE once the poison
 * was consumed.  The steps:
 *
 *   OPEN  --state CLOSED seen, final tails known-->  DRAIN
 *   DRAIN --every head at its final tail, sealed-->  FATAL or POISON
 *   FATAL --consumed-->  POISON  --consumed-->  DONE (-EPIPE)
 */
static const uint64_t no_payload;

/*
 * Whether the final tails are settled: no record will be published past a
 * lane's tail any more.  MPSC: always, since claims stop at the tail's
 * closed bit.  SPSC and LANES: once no lane's producer is inside a write
 * (see lane_enter()); false while one is, and its lane_leave() will wake
 * us.
 */
static bool closure_settled(const struct lull_ring *ring, uint32_t state)
{
	if (ring->mode == LULL_RING_MPSC || (state & LULL_STATE_DISCARD))
		return true;
	/*
	 * Pairs with the barrier in lane_enter(): either we see the producer
	 * busy, or its next state check sees the shutdown.  A failed barrier
	 * (see lull__barrier_heavy()) proves nothing: not settled yet, and
	 * the park that follows reports the error.
	 */
	if (lull__busy_barrier(ring) < 0)
		return false;
	for (uint32_t i = 0; i < ring->lanes; i++)
		/* Pairs with lane_leave()'s release of busy. */
		if (atomic_load_explicit(&ring->cursor[i].lane->busy,
					 memory_order_acquire))
			return false;
	return true;
}

/*
 * A lane's final tail, once closure_settled(), into *finalp.  Returns
 * false when the tail is one no producer could have stored: not a
 * multiple of 8 (past the MPSC flag bits), or more than a lap past the
 * head (a producer never writes further ahead).
 */
static bool closure_final_tail(const struct lull_ring *ring,
			       const struct lull_cursor *cur,
			       uint64_t *finalp)
{
	uint64_t final;

	if (ring->mode == LULL_RING_MPSC) {
		/*
		 * lull__shutdown() sets the tail's bit before the state's
		 * (seq_cst), and we acquired the state: the bit is there.
		 */
		final = atomic_load_explicit(&cur->lane->tail,
					     memory_order_acquire) &
			~(uint64_t)LULL_TAIL_FLAGS;
	} else {
		/*
		 * Relaxed: the producer's tail store is ordered before its
		 * release of busy, which closure_settled() acquired.
		 */
		final = atomic_load_explicit(&cur->lane->tail,
					     memory_order_relaxed);
		if (final & LULL_TAIL_FLAGS)
			return false;
	}
	/*
	 * Immediate: nothing is read any more, but records are found in
	 * band before tail passes them, so the tail read here may lag our
	 * head: never move the head back.
	 */
	if ((int64_t)(final - cur->head) < 0)
		final = cur->head;
	if (final - cur->head > ring->mask + 1)
		return false;
	*finalp = final;
	return true;
}

/*
 * Is the consumer in an immediate shutdown's discard, or past the end?
 * Then a read hands out only the rest of a batch it began.
 */
static inline bool closure_discarding(const struct lull_ring *ring)
{
	/* A peeked record stays what it was until its release. */
	return unlikely(ring->closing >= LULL_CLOSING_CORRUPT ||
			(!ring->peeked &&
			 (atomic_load_explicit(&ring->region->state,
					       memory_order_relaxed) &
			  LULL_STATE_DISCARD)));
}

/* Whether a read may take records from this lane now. */
static inline bool lane_open_to(const struct lull_ring *ring,
				const struct lull_cursor *cur, bool discarding)
{
	return !discarding ||
	       (ring->closing < LULL_CLOSING_CORRUPT && cur->in_batch);
}

/* -EPROTO, reported once: the poison record is next. */
static int corruption_report(struct lull_ring *ring)
{
	ring->closing = LULL_CLOSING_POISON;
	return -EPROTO;
}

/*
 * The report the fatal record hands out: a copy of the region's, made
 * once at the seal, so that nobody can change it under the handler, its
 * length bounded by the room of its message and the message terminated
 * there whatever the region held.
 */
static void fatal_copy(struct lull_ring *ring)
{
	memcpy(&ring->fatal, &ring->region->fatal, sizeof(ring->fatal));
	if (ring->fatal.length > LULL_FATAL_MESSAGE_MAX - 1)
		ring->fatal.length = LULL_FATAL_MESSAGE_MAX - 1;
	ring->fatal.message[ring->fatal.length] = '\0';
}

static __attribute__((noinline)) int closure_next(struct lull_ring *ring,
						  struct lull_record *rec)
{
	struct lull_region *region = ring->region;
	struct lull_cursor *cur;
	uint32_t state, sealed;

	switch (ring->closing) {
	case LULL_CLOSING_OPEN:
		/* Pairs with the seq_cst RMWs of lull__shutdown(). */
		state = atomic_load_explicit(&region->state,
					     memory_order_acquire);
		if (!(state & LULL_STATE_CLOSED) ||
		    !closure_settled(ring, state))
			return 0;
		for (uint32_t i = 0; i < ring->lanes; i++) {
			cur = &ring->cursor[i];
			if (!closure_final_tail(ring, cur, &cur->final_tail)) {
				lull__ring_corrupt(ring);
				return corruption_report(ring);
			}
		}
		ring->closing = LULL_CLOSING_DRAIN;
		/* fall through */
	case LULL_CLOSING_DRAIN:
		/* Pairs with the seq_cst RMW of lull__shutdown(). */
		state = atomic_load_explicit(&region->state,
					     memory_order_acquire);
		for (uint32_t i = 0; i < ring->lanes; i++) {
			cur = &ring->cursor[i];
			if ((state & LULL_STATE_DISCARD) && !cur->in_batch &&
			    cur->head != cur->final_tail)
				/* Skip, without zeroing under producers
				 * finishing claims; never handed, so never
				 * again either. */
				lull__head_publish(ring, cur, cur->final_tail);
			if (cur->head != cur->final_tail)
				return 0;
		}
		/*
		 * A shared region's death notices come before the end.  A
		 * notice is due once the head passes where its producer
		 * died, and a read walking nothing but paddings (aborted
		 * claims) may take the head there and on to the end with
		 * nothing to hand out.  Each queued notice is due now
		 * (closing is DRAIN); the reads hand it out before asking
		 * again (read_shared(), next_any()).
		 */
		if (unlikely(ring->flags & LULL_REGION_SHARED) &&
		    lull__watch_notice_queued(ring))
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
		if (ring->closing == LULL_CLOSING_FATAL)
			fatal_copy(ring);
		break;
	case LULL_CLOSING_CORRUPT:
		return corruption_report(ring);
	case LULL_CLOSING_DONE:
		return -EPIPE;
	default:
		break;
	}
	if (ring->closing == LULL_CLOSING_FATAL) {
		rec->data = &ring->fatal;
		rec->len = (uint32_t)offsetof(struct lull_fatal, message) +
			   ring->fatal.length;
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

/*
 * What a read hands records to: @rec_fn, one call per record
 * (lull_ring_read()), or @items_fn, one call per run of items
 * (lull_ring_read_items()).  Exactly one is set.  Passed by value into
 * the inlined walks, so each public read compiles to its own loop with
 * no test of which it is.
 */
struct handler {
	lull_record_fn rec_fn;
	lull_items_fn items_fn;
	void *ctx;
};

/* Hand one record to @h: to an items handler, as a run of one. */
static inline __attribute__((always_inline)) int
hand_one(struct handler h, const struct lull_record *rec)
{
	struct lull_items run;

	if (!h.items_fn)
		return h.rec_fn(rec, h.ctx);
	run.data = rec->data;
	run.len = rec->len;
	run.type = rec->type;
	run.count = 1;
	return h.items_fn(&run, h.ctx);
}

/* How a read of one lane ended. */
struct lane_read {
	unsigned count; /* records consumed so far in this read */
	uint64_t bytes; /* ... and the bytes they took in their lanes */
	bool stopped;   /* the handler ended the read (STOP or KEEP) */
	bool kept;      /* ... with LULL_READ_KEEP */
};

/*
 * Hand a lane's committed records to @h until @limit records were
 * consumed in this read, the lane has nothing readable, or @h ends the
 * read; then publish the lane's head.  While @discarding, only the rest
 * of a batch the consumer began.  Returns 0 or -EPROTO.
 *
 * The walk keeps what it needs in locals: the handler is opaque, so the
 * compiler would read every field of the handle again after each call.
 * It stops at one position, the end of a lap (a batch gives back what it
 * consumed only at its end, so a walk that went a whole lap would find
 * its own first record again) or, closing, the final tail (nothing is
 * published past it): the walk never passes either, since no producer
 * writes more than a lap ahead of the head.
 *
 * In a large ring of one lane (@giving_back, gives_back()) it also ends
 * after the record that reaches a quarter lap past the head, so that a
 * long read gives its space back as it goes.
 */
static inline __attribute__((always_inline)) int
read_lane(struct lull_ring *ring, struct lull_cursor *cur, struct handler h,
	  unsigned limit, bool discarding, bool giving_back,
	  struct lane_read *rd)
{
	unsigned char *data = cur->data;
	const uint64_t mask = ring->mask, head = cur->head;
	const uint64_t stop = walk_stop(ring, cur);
	const uint64_t give_back = head + (mask + 1) / 4;
	const uint32_t max_record = ring->max_record;
	struct lull_record_header *hdr;
	struct lull_record rec;
	struct lull_items run;
	uint64_t pos = head, size;
	unsigned count = rd->count, take;
	/* The array index in the record at pos: items before it are taken. */
	uint32_t item = cur->item, items, item_len;
	int32_t raw, length, type, item_type;
	int verdict, ret = 0;
	bool handed = false, more = false;

	while (count < limit && pos != stop) {
		hdr = lull__header_at(data, mask, pos);
		/*
		 * Pairs with the producer's release store of a positive
		 * length (see next_record()).  Zero: not written yet;
		 * negative: claimed, not committed (MPSC).
		 */
		raw = atomic_load_explicit(&hdr->length, memory_order_acquire);
		if (raw <= 0) {
			if (unlikely(raw < 0))
				lull__count(&ring->region->claim_waits);
			break;
		}
		length = raw & LULL_LENGTH_MASK;
		/* Read once: what is checked is what is handed out. */
		type = hdr->type;
		size = record_size(mask, max_record, pos, stop, length, type);
		if (unlikely(!size)) {
			ret = -EPROTO; /* corrupt region */
			break;
		}
		if (type == LULL_TYPE_PADDING) {
			pos += size;
			item = 0;
			continue;
		}
		if (type == LULL_TYPE_ARRAY) {
			/* Its items, one by one, as records of their own. */
			items = array_items(hdr, length, max_record, &item_len,
					    &item_type);
			if (unlikely(item >= items)) {
				ret = -EPROTO; /* no array, or too short */
				break;
			}
			verdict = LULL_READ_CONTINUE;
			if (h.items_fn) {
				/* One run: the items left, up to the limit. */
				take = items - item;
				if (take > limit - count)
					take = limit - count;
				array_item(&rec, hdr, item, item_len,
					   item_type);
				run.data = rec.data;
				run.len = item_len;
				run.type = item_type;
				run.count = take;
				verdict = h.items_fn(&run, h.ctx);
				if (verdict != LULL_READ_KEEP) {
					item += take;
					count += take;
					handed = true;
					more = item < items ||
					       (raw & LULL_LENGTH_BATCH_MORE);
				}
			}
			while (!h.items_fn && item < items && count < limit &&
			       verdict == LULL_READ_CONTINUE) {
				array_item(&rec, hdr, item, item_len,
					   item_type);
				verdict = h.rec_fn(&rec, h.ctx);
				if (verdict == LULL_READ_KEEP)
					break;
				item++;
				count++;
				handed = true;
				/* Until its last item, the array is a batch
				 * the consumer began. */
				more = item < items ||
				       (raw & LULL_LENGTH_BATCH_MORE);
			}
			if (item == items) {
				pos += size;
				item = 0;
			}
			if (verdict != LULL_READ_CONTINUE) {
				rd->stopped = true;
				rd->kept = verdict == LULL_READ_KEEP;
				break;
			}
			if (unlikely(discarding) && !more)
				break;
			if (giving_back && (int64_t)(pos - give_back) >= 0)
				break;
			continue;
		}
		rec.data = hdr + 1;
		rec.len = (uint32_t)length - LULL_RECORD_HEADER_SIZE;
		rec.type = type;
		verdict = hand_one(h, &rec);
		if (verdict == LULL_READ_KEEP) {
			rd->stopped = rd->kept = true;
			break;
		}
		pos += size;
		item = 0;
		count++;
		handed = true;
		more = raw & LULL_LENGTH_BATCH_MORE;
		if (verdict != LULL_READ_CONTINUE) {
			rd->stopped = true;
			break;
		}
		if (unlikely(discarding) && !more)
			break; /* the batch is whole: discard the rest */
		/* The give-back, after a record: paddings never end a walk. */
		if (giving_back && (int64_t)(pos - give_back) >= 0)
			break;
	}
	rd->count = count;
	rd->bytes += pos - head;
	if (handed)
		cur->in_batch = more;
	lull__consume_to(ring, cur, pos);
	/* After the head moved (which starts a record at 0): where in it. */
	cur->item = item;
	return ret;
}

/*
 * The temporal slip.  A consumer faster than its producer catches up with
 * it, and then reads the very line the producer is writing, a few records
 * per read: each such read costs the producer's next store a cache-line
 * round trip, and the stream runs at the line's pace (perf/README.md, "the
 * caught-up regime").  So after two reads in a row that found records but
 * reached the producers' end within LULL_SLIP_RUN_BYTES (or a quarter of
 * a smaller lane, so that the producers never fill it), the next read
 * first lets them run ahead, keeping the consumer's distance as
 * FastForward's temporal slipping does.  The slip doubles after each such
 * short read and halves after a longer one; a read that finds nothing (a
 * trickle, an idle ring) ends it, so it never delays a lone record, nor
 * the empty read after one.
 */
static inline void slip_adapt(struct lull_ring *ring,
			      const struct lane_read *rd, unsigned limit)
{
	uint32_t slip = ring->slip_ns;
	/* A quarter lane at most: a slip must never fill the ring. */
	uint64_t long_run = (ring->mask + 1) / 4 < LULL_SLIP_RUN_BYTES
			       ? (ring->mask + 1) / 4
			       : LULL_SLIP_RUN_BYTES;
	bool short_run = rd->count && rd->count < limit && !rd->stopped &&
			 rd->bytes < long_run;

	/*
	 * Not on a loop's ring: a pass reads each of its rings in turn, and
	 * a pause per ring would hold up the others and the loop's I/O.
	 */
	if (likely(!slip && !short_run && !ring->slip_armed) ||
	    ring->spin_ns != LULL_PARK_SPIN_ADAPTIVE || ring->loop)
		return;
	if (short_run && !slip && !ring->slip_armed) {
		/* One short read may be a lone record: wait for a second. */
		ring->slip_armed = true;
		return;
	}
	ring->slip_armed = false;
	if (!rd->count)
		slip = 0;
	else if (short_run)
		slip = !slip ? LULL_SLIP_MIN_NS
		     : slip < LULL_SLIP_MAX_NS / 2 ? slip * 2
						   : LULL_SLIP_MAX_NS;
	else
		slip = slip / 2 >= LULL_SLIP_MIN_NS ? slip / 2 : 0;
	ring->slip_ns = slip;
}

/* Hold back for the slip: pauses, the clock read every 8 of them. */
static __attribute__((noinline)) void slip_behind(uint32_t slip_ns)
{
	uint64_t until = lull__now_ns() + slip_ns;

	do {
		for (int i = 0; i < 8; i++)
			ck_pr_stall();
	} while (lull__now_ns() < until);
}

static inline __attribute__((always_inline)) int
read_batch(struct lull_ring *ring, struct handler h, unsigned limit)
{
	struct lane_read rd = { 0 };
	struct lull_record rec;
	uint32_t lane = ring->next_lane, visited;
	/* Once per read: an immediate shutdown skips what is left. */
	bool discarding = closure_discarding(ring);
	int found;

	if (unlikely(ring->slip_ns))
		slip_behind(ring->slip_ns);
	for (visited = 0; visited < ring->lanes; visited++) {
		if (rd.count == limit || rd.stopped)
			break;
		if (lane_open_to(ring, &ring->cursor[lane], discarding)) {
			/*
			 * Two walks, one with the give-back and one without
			 * a test of it: with the test in every walk, 8
			 * producers of 8-byte records on 2 CPUs lost 6%.
			 */
			if (gives_back(ring))
				found = read_lane(ring, &ring->cursor[lane], h,
						  limit, discarding, true, &rd);
			else
				found = read_lane(ring, &ring->cursor[lane], h,
						  limit, discarding, false, &rd);
			if (unlikely(found < 0)) {
				lull__ring_corrupt(ring);
				/* What was handed out before counts; the
				 * next read says -EPROTO. */
				return rd.count ? (int)rd.count
						: corruption_report(ring);
			}
			/* A kept record is the next one handed out. */
			if (rd.kept)
				break;
		}
		if (++lane == ring->lanes)
			lane = 0;
	}
	ring->next_lane = lane;
	slip_adapt(ring, &rd, limit);
	ring->records_since_wait += rd.count;
	ring->records_since_park += rd.count;
	/* A stream: producers stop fencing before the next park asks. */
	if (unlikely(ring->park_fence_asked) &&
	    ring->records_since_park >= LULL_PARK_STREAM_RECORDS)
		lull__park_fence_off(ring);
	if (rd.count || rd.kept)
		return (int)rd.count;
	/* Empty: is it the end?  The fatal and poison records come alone,
	 * one per read. */
	found = closure_next(ring, &rec);
	if (found <= 0)
		return found < 0 ? found : -EAGAIN;
	if (hand_one(h, &rec) == LULL_READ_KEEP)
		return 0;
	closure_consume(ring);
	return 1;
}

/*
 * A shared region's read: what the watch learnt first (a dead producer's
 * claim skipped, its lane freed), and a death notice that is due comes
 * alone, as the fatal and poison records do.
 */
static __attribute__((noinline)) int
read_shared(struct lull_ring *ring, struct handler h, unsigned limit)
{
	struct lull_record rec;
	int n;

	lull__watch_sync(ring, false);
	if (lull__watch_notice(ring, &rec))
		goto notice;
	n = read_batch(ring, h, limit);
	/*
	 * The read may have stopped at a dead producer's claim: skip it now,
	 * so that a consumer about to park finds what lies behind it (and
	 * the death notice) readable instead of sleeping in front of it.
	 */
	if (lull__watch_recovering(ring))
		lull__watch_sync(ring, false);
	/*
	 * Nothing read, but a notice may have come due on the way (the head
	 * passed paddings to where its producer died), and then the end
	 * waits for it (closure_next()).
	 */
	if (n != -EAGAIN || !lull__watch_notice(ring, &rec))
		return n;
notice:
	if (hand_one(h, &rec) == LULL_READ_KEEP)
		return 0;
	lull__watch_notice_consume(ring);
	return 1;
}

static inline int consumer_check(const struct lull_ring *ring)
{
	if (unlikely(!ring))
		return -EINVAL;
	if (unlikely(!ring->is_consumer))
		return -EPERM;
	return 0;
}

/* The checks both reads make; @limit capped so the count fits an int. */
static inline int read_check(const struct lull_ring *ring, bool has_fn,
			     unsigned *limit)
{
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!has_fn || !*limit || ring->peeked))
		return -EINVAL;
	if (*limit > INT32_MAX)
		*limit = INT32_MAX;
	return 0;
}

LULL_EXPORT int lull_ring_read(struct lull_ring *ring, lull_record_fn fn,
			       void *ctx, unsigned limit)
{
	const struct handler h = { .rec_fn = fn, .ctx = ctx };
	int ret = read_check(ring, fn != NULL, &limit);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(ring->flags & LULL_REGION_SHARED))
		return read_shared(ring, h, limit);
	return read_batch(ring, h, limit);
}

LULL_EXPORT int lull_ring_read_items(struct lull_ring *ring, lull_items_fn fn,
				     void *ctx, unsigned limit)
{
	const struct handler h = { .items_fn = fn, .ctx = ctx };
	int ret = read_check(ring, fn != NULL, &limit);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(ring->flags & LULL_REGION_SHARED))
		return read_shared(ring, h, limit);
	return read_batch(ring, h, limit);
}

/*
 * The next thing to hand out for the cold callers: a record (1, of lane
 * *lanep), the fatal or poison record (2), a death notice (3), nothing (0)
 * or -EPIPE / -EPROTO.  *at says what consuming a record does to its lane.
 */
static int next_any(struct lull_ring *ring, struct lull_record *rec,
		    uint32_t *lanep, struct next_at *at)
{
	bool discarding = closure_discarding(ring);
	uint32_t lane = ring->next_lane;
	struct lull_cursor *cur;
	int found;

	if (ring->flags & LULL_REGION_SHARED) {
		lull__watch_sync(ring, false);
		if (lull__watch_notice(ring, rec))
			return 3;
	}
	for (uint32_t visited = 0; visited < ring->lanes; visited++) {
		cur = &ring->cursor[lane];
		if (lane_open_to(ring, cur, discarding)) {
			found = next_record(ring, cur, rec, at);
			if (unlikely(found < 0)) {
				lull__ring_corrupt(ring);
				return corruption_report(ring);
			}
			if (found == NEXT_RECORD) {
				*lanep = lane;
				return 1;
			}
			/* Past trailing padding, as a read goes: the end
			 * of a closing lane may lie behind it. */
			lull__consume_to(ring, cur, at->end);
		}
		if (++lane == ring->lanes)
			lane = 0;
	}
	found = closure_next(ring, rec);
	/* A notice come due on the way (as in read_shared()): before the
	 * end, which waits for it. */
	if (found == 0 && (ring->flags & LULL_REGION_SHARED) &&
	    lull__watch_notice(ring, rec))
		return 3;
	return found > 0 ? 2 : found;
}

LULL_EXPORT int lull_ring_peek(struct lull_ring *ring, struct lull_record *rec)
{
	struct next_at at = { 0 };
	uint32_t lane = 0;
	int found;
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!rec))
		return -EINVAL;
	/* The same record until its release, whatever arrived since. */
	if (ring->peeked) {
		*rec = ring->peek_rec;
		return 0;
	}
	found = next_any(ring, rec, &lane, &at);
	if (found <= 0)
		return found < 0 ? found : -EAGAIN;
	ring->peeked = true;
	ring->peeked_closure = found == 2;
	ring->peeked_notice = found == 3;
	ring->peek_lane = lane;
	ring->peek_end = at.end;
	ring->peek_item = at.item;
	ring->peek_more = at.more;
	ring->peek_rec = *rec;
	return 0;
}

LULL_EXPORT int lull_ring_release(struct lull_ring *ring)
{
	struct lull_cursor *cur;
	int ret = consumer_check(ring);

	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!ring->peeked))
		return -EINVAL;
	ring->peeked = false;
	if (ring->peeked_closure) {
		closure_consume(ring);
		return 0;
	}
	if (ring->peeked_notice) {
		ring->peeked_notice = false;
		lull__watch_notice_consume(ring);
		return 0;
	}
	cur = &ring->cursor[ring->peek_lane];
	/* Committed records do not change until consumed: peek_end holds. */
	cur->in_batch = ring->peek_more;
	lull__consume_to(ring, cur, ring->peek_end);
	cur->item = ring->peek_item;
	if (ring->lanes > 1)
		ring->next_lane = (ring->peek_lane + 1) % ring->lanes;
	return 0;
}

/*
 * The common case of the two queries below, from one header: a ring of
 * one lane, not shared between processes, that is open (its state and
 * the consumer's view both).
 * HEAD_EMPTY when its head's header reads not committed (nothing to read,
 * nothing to skip: the walk would stop there too), HEAD_COMMITTED with
 * the header's type in *type when it reads committed (whatever it holds,
 * a record, an array, a padding or a corrupt header that the read
 * reports, the walk would find work there too), HEAD_WALK when the walk
 * must answer.  A consumer that wakes up to a record asks both queries
 * before its read, and one that finds none both before it parks: from
 * this, about 20 instructions each instead of 70 (perf/README.md, "The
 * wake-up's two queries").
 */
enum head_state { HEAD_WALK, HEAD_EMPTY, HEAD_COMMITTED };

static inline enum head_state head_state(const struct lull_ring *ring,
					 int32_t *type)
{
	const struct lull_cursor *cur = &ring->cursor[0];
	const struct lull_record_header *hdr;

	if (ring->lanes != 1 || ring->closing != LULL_CLOSING_OPEN ||
	    (ring->flags & LULL_REGION_SHARED))
		return HEAD_WALK;
	/*
	 * Relaxed: a false answer needs only that the state was open when
	 * read.  Where that answer lets the consumer sleep (the park's
	 * re-check), the park barrier before it orders this load after the
	 * announce, so a shutdown after it finds the consumer parked and
	 * wakes it (park.h).
	 */
	if (atomic_load_explicit(&ring->region->state, memory_order_relaxed) &
	    (LULL_STATE_CLOSED | LULL_STATE_DISCARD))
		return HEAD_WALK;
	hdr = lull__header_at(cur->data, ring->mask, cur->head);
	/* Pairs with the producer's release store (see next_record()). */
	if (atomic_load_explicit(&hdr->length, memory_order_acquire) <= 0)
		return HEAD_EMPTY;
	*type = hdr->type;
	return HEAD_COMMITTED;
}

/* lull__ring_skip_padding() where head_state() cannot answer. */
static __attribute__((noinline)) bool
skip_padding_walk(struct lull_ring *ring)
{
	bool discarding = closure_discarding(ring), found_record = false;
	struct lull_cursor *cur;
	struct lull_record rec;
	struct next_at at;
	int found;

	for (uint32_t i = 0; i < ring->lanes; i++) {
		cur = &ring->cursor[i];
		if (!lane_open_to(ring, cur, discarding))
			continue;
		at.end = cur->head;
		found = next_record(ring, cur, &rec, &at);
		if (found == NEXT_NONE || found == NEXT_CLAIMED)
			lull__consume_to(ring, cur, at.end);
		else
			found_record = true; /* a record, or -EPROTO */
	}
	return found_record;
}

/*
 * Out of line, the walk: without it, the common cases would save and
 * restore the six registers the walk uses.
 */
bool lull__ring_skip_padding(struct lull_ring *ring)
{
	int32_t type;

	if (ring->peeked)
		return false; /* its release moves the head */
	switch (head_state(ring, &type)) {
	case HEAD_EMPTY:
		return false;
	case HEAD_COMMITTED:
		if (type != LULL_TYPE_PADDING)
			return true;
		break;
	case HEAD_WALK:
		break;
	}
	return skip_padding_walk(ring);
}

/*
 * A query, unlike next_any(): what a read would find, without taking any
 * shutdown step (no seal, no head published), so that the park's re-check
 * and the spins may ask as often as they like.  It foresees each step of
 * closure_next(): the fatal or poison record is next once the final tails
 * are known and reached (or the rest is discarded); before that, only a
 * committed record is readable.
 */
static __attribute__((noinline)) bool
readable_walk(const struct lull_ring *ring)
{
	bool discarding = closure_discarding(ring);
	const struct lull_cursor *cur;
	struct lull_record rec;
	struct next_at at;
	uint64_t final_tail;
	uint32_t state;
	int found;

	/* A death notice, or producers to watch, are work too. */
	if (unlikely(ring->flags & LULL_REGION_SHARED) &&
	    lull__watch_pending(ring))
		return true;
	for (uint32_t i = 0; i < ring->lanes; i++) {
		cur = &ring->cursor[i];
		if (!lane_open_to(ring, cur, discarding))
			continue;
		at.end = cur->head;
		found = next_record(ring, cur, &rec, &at);
		if (found == NEXT_RECORD || found < 0)
			return true; /* a record, or a corrupt one: -EPROTO */
		/*
		 * Padding to skip is work too: an aborted batch's padding may
		 * hold the room a producer waits for, and only the consumer
		 * frees it (lull__ring_skip_padding(), or a read).
		 */
		if (at.end != cur->head)
			return true;
	}
	if (ring->closing >= LULL_CLOSING_CORRUPT)
		return true; /* -EPROTO, fatal, poison, or -EPIPE */
	/* Pairs with the seq_cst RMWs of lull__shutdown(). */
	state = atomic_load_explicit(&ring->region->state,
				     memory_order_acquire);
	if (!(state & LULL_STATE_CLOSED))
		return false;
	if (ring->closing == LULL_CLOSING_OPEN &&
	    !closure_settled(ring, state))
		return false;
	if (state & LULL_STATE_DISCARD)
		return true;
	for (uint32_t i = 0; i < ring->lanes; i++) {
		cur = &ring->cursor[i];
		final_tail = cur->final_tail;
		if (ring->closing == LULL_CLOSING_OPEN &&
		    !closure_final_tail(ring, cur, &final_tail))
			return true; /* corrupt: the read says -EPROTO */
		at.end = cur->head;
		(void)next_record(ring, cur, &rec, &at);
		if (at.end != final_tail)
			return false;
	}
	return true;
}

/* As lull__ring_skip_padding(): the walk out of line. */
bool lull__ring_readable(const struct lull_ring *ring)
{
	int32_t type;

	switch (head_state(ring, &type)) {
	case HEAD_EMPTY:
		return false;
	case HEAD_COMMITTED:
		return true;
	case HEAD_WALK:
		break;
	}
	return readable_walk(ring);
}

LULL_EXPORT int lull_ring_close(struct lull_ring *ring)
{
	int ret = consumer_check(ring);

	if (ret < 0)
		return ret;
	ring->closing = LULL_CLOSING_DONE;
	lull__shutdown_by_consumer(ring, LULL_SHUTDOWN_IMMEDIATE,
				   LULL_STATE_SEALED);
	return 0;
}
