/* SPDX-License-Identifier: MIT */
/*
 * ring_batch.c - claims: one record or a batch of records claimed at once,
 * committed or aborted as a whole, and the vectored batch write.
 *
 * A batch is laid out like records written one by one (a record that
 * would straddle the end of the data area is preceded by padding), and
 * every header but one is written while the batch is claimed.  The one
 * left, the gate, is the first header the consumer will reach: the lane's
 * tail for a lane producer, the first record for an MPSC producer (whose
 * leading padding is published at once, as for a single claim).  The
 * commit is one release store of the gate's length, so the consumer sees
 * the whole batch or none of it, and an abort, a shutdown or a dead
 * producer never shows it half.  Every record but the last carries
 * LULL_LENGTH_BATCH_MORE, so that an immediate shutdown never cuts a batch
 * the consumer began (ring_read.c).  An array of alike items of a multiple
 * of 8 bytes goes packed into one record instead (region.h), written on
 * the steps of a single record (mpsc.h, lane.h).
 */
#include <string.h>

#include "lane.h"
#include "mpsc.h"

/*
 * Where a batch's records come from: claims (the caller writes payloads
 * after the claim) or records (copied in by lull_*_write_batch()).
 */
struct batch_src {
	struct lull_claim *claims;
	const struct lull_record *recs;
	const unsigned char *items; /* or @count items of @item_len */
	uint32_t item_len;
	int32_t item_type;
	unsigned count;
};

static inline uint32_t src_len(const struct batch_src *src, unsigned i)
{
	if (src->claims)
		return src->claims[i].len;
	return src->recs ? src->recs[i].len : src->item_len;
}

static inline int32_t src_type(const struct batch_src *src, unsigned i)
{
	if (src->claims)
		return src->claims[i].type;
	return src->recs ? src->recs[i].type : src->item_type;
}

/* Record @i's payload, for the sources that copy one in. */
static inline const void *src_data(const struct batch_src *src, unsigned i)
{
	if (src->recs)
		return src->recs[i].data;
	return src->items + (size_t)i * src->item_len;
}

static inline uint64_t record_size(uint32_t len)
{
	return lull__align8((uint64_t)LULL_RECORD_HEADER_SIZE + len);
}

/*
 * Check every record of a batch.  A batch must fit in an empty lane
 * wherever it starts: its records, plus the padding of at most one wrap,
 * which is shorter than the largest record.  Returns 0, -EINVAL or
 * -EMSGSIZE.
 */
static int batch_check(const struct lull_producer *prod,
		       const struct batch_src *src)
{
	uint64_t total = 0;
	uint32_t max_len = prod->max_record - LULL_RECORD_HEADER_SIZE;

	if (!src->count || (!src->claims && !src->recs && !src->items))
		return -EINVAL;
	if (src->items) {
		/* Alike records: one check, one product (of 32-bit values,
		 * so it cannot overflow). */
		if (src->item_type < 1)
			return -EINVAL;
		if (src->item_len > max_len)
			return -EMSGSIZE;
		total = record_size(src->item_len) * src->count;
		return total > prod->mask + 1 - prod->max_record ? -EMSGSIZE
								  : 0;
	}
	for (unsigned i = 0; i < src->count; i++) {
		if (src_type(src, i) < 1 ||
		    (src->recs && src->recs[i].len && !src->recs[i].data))
			return -EINVAL;
		if (src_len(src, i) > max_len)
			return -EMSGSIZE;
		total += record_size(src_len(src, i));
	}
	if (total > prod->mask + 1 - prod->max_record)
		return -EMSGSIZE;
	return 0;
}

/*
 * Where a batch placed at @start ends, and where its first record is.  An
 * array's records are alike: when the span fits before the end of the
 * data area, it is their total size.
 */
static uint64_t batch_end(const struct lull_producer *prod,
			  const struct batch_src *src, uint64_t start,
			  uint64_t *firstp)
{
	uint64_t pos = start, size;

	if (src->items) {
		size = record_size(src->item_len) * src->count;
		if (!lull__wrap_padding(start, prod->mask, size)) {
			*firstp = start;
			return start + size;
		}
	}

	for (unsigned i = 0; i < src->count; i++) {
		size = record_size(src_len(src, i));
		pos += lull__wrap_padding(pos, prod->mask, size);
		if (i == 0)
			*firstp = pos;
		pos += size;
	}
	return pos;
}

/*
 * Write a header that the gate will publish: plain type, relaxed length.
 * The consumer reaches it only through the gate, whose release store
 * (lull_*_commit()) orders this before.
 */
static inline void header_behind_gate(struct lull_producer *prod,
				      uint64_t pos, int32_t length,
				      int32_t type)
{
	struct lull_record_header *hdr =
		lull__header_at(prod->data, prod->mask, pos);

	hdr->type = type;
	atomic_store_explicit(&hdr->length, length, memory_order_relaxed);
}

/*
 * Lay the batch out from @start: every header but the one at @gate, whose
 * length and type are kept for the commit; payloads copied in (records)
 * or their places handed out (claims).  Then the producer holds a claim.
 */
static void batch_place(struct lull_producer *prod,
			const struct batch_src *src, uint64_t start,
			uint64_t gate, uint64_t end)
{
	uint64_t pos = start, size, pad;
	int32_t length, type;
	void *payload;

	for (unsigned i = 0; i < src->count; i++) {
		size = record_size(src_len(src, i));
		pad = lull__wrap_padding(pos, prod->mask, size);
		if (pad && pos == gate) {
			prod->claim_length = (uint32_t)pad;
			prod->claim_type = LULL_TYPE_PADDING;
		} else if (pad) {
			header_behind_gate(prod, pos, (int32_t)pad,
					   LULL_TYPE_PADDING);
		}
		pos += pad;
		length = (int32_t)(LULL_RECORD_HEADER_SIZE + src_len(src, i));
		if (i + 1 < src->count)
			length |= LULL_LENGTH_BATCH_MORE;
		type = src_type(src, i);
		if (pos == gate) {
			prod->claim_length = (uint32_t)length;
			prod->claim_type = type;
		} else {
			header_behind_gate(prod, pos, length, type);
		}
		payload = lull__header_at(prod->data, prod->mask, pos) + 1;
		if (src->claims)
			src->claims[i].data = payload;
		else
			lull__copy_payload(payload, src_data(src, i),
					   src_len(src, i));
		pos += size;
	}
	prod->claimed = true;
	prod->claim_start = gate;
	prod->claim_end = end;
}

/*
 * Lay out an array's records back to back from @start, where they fit
 * before the end of the data area: the first is the gate, kept for the
 * commit; the others' headers and every payload are written behind it.
 * Then the producer holds a claim, as after batch_place().
 */
static void array_place(struct lull_producer *prod,
			const struct batch_src *src, uint64_t start)
{
	const uint64_t size = record_size(src->item_len);
	const int32_t length =
		(int32_t)(LULL_RECORD_HEADER_SIZE + src->item_len);
	const int32_t more = length | LULL_LENGTH_BATCH_MORE;
	uint64_t pos = start + size;

	prod->claim_length = (uint32_t)(src->count > 1 ? more : length);
	prod->claim_type = src->item_type;
	lull__copy_payload(lull__header_at(prod->data, prod->mask, start) + 1,
			   src->items, src->item_len);
	for (unsigned i = 1; i < src->count; i++, pos += size) {
		header_behind_gate(prod, pos, i + 1 < src->count ? more : length,
				   src->item_type);
		lull__copy_payload(lull__header_at(prod->data, prod->mask,
						   pos) + 1,
				   src->items + (size_t)i * src->item_len,
				   src->item_len);
	}
	prod->claimed = true;
	prod->claim_start = start;
	prod->claim_end = pos;
}

/*
 * A lane producer claims a batch at its tail; busy until commit or abort.
 * A claim the caller will hold (@held: lull_spsc_claim(),
 * lull_*_claim_batch()) is announced in the lane before any of it is
 * written, so that if its process dies the consumer can tell what it
 * skips (recover_lane() in ring_death.c).  Relaxed: only that consumer
 * reads it, once the process is dead.
 */
static int lane_claim_checked(struct lull_producer *prod,
			      const struct batch_src *src, bool held)
{
	uint64_t tail, end, first;
	int ret;

	ret = lane_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	tail = lane_tail(prod);
	end = batch_end(prod, src, tail, &first);
	if (unlikely(!lane_room(prod, end))) {
		lane_leave(prod);
		return lull__full(prod);
	}
	if (held)
		atomic_store_explicit(&prod->lane->claim_end, end,
				      memory_order_relaxed);
	/* The gate is the tail: padding, or the first record. */
	batch_place(prod, src, tail, tail, end);
	prod->claim_pos = first;
	return 0;
}

/*
 * A claim call's checks, before anything is touched: the producer's
 * family and claim (a lane's, or the shared MPSC lane's), then the batch.
 */
static int claim_checks(const struct lull_producer *prod,
			const struct batch_src *src, bool mpsc)
{
	int ret = mpsc ? mpsc_check(prod) : lane_check(prod);

	if (unlikely(ret < 0))
		return ret;
	return batch_check(prod, src);
}

static int lane_claim(struct lull_producer *prod, const struct batch_src *src)
{
	int ret = claim_checks(prod, src, false);

	return ret < 0 ? ret : lane_claim_checked(prod, src, true);
}

/*
 * An MPSC producer claims a checked batch with one CAS on the shared
 * tail, as mpsc_reserve() does one record (mpsc.h, which explains the
 * orders); a wrap before the first record is published at once as
 * padding, so the gate is the first record.
 */
static int mpsc_claim_checked(struct lull_producer *prod,
			      const struct batch_src *src)
{
	struct lull_record_header *hdr;
	uint64_t tail, end, first;
	int ret;

	if (lull__consumer_lost(prod))
		return -EPIPE;
	/* Relaxed: the CAS validates it. */
	tail = atomic_load_explicit(&prod->lane->tail, memory_order_relaxed);
	for (;;) {
		/* Any flag bit, as in mpsc_reserve(). */
		if (unlikely(tail & LULL_TAIL_FLAGS)) {
			lull__claim_given_up(prod);
			return -EPIPE;
		}
		end = batch_end(prod, src, tail, &first);
		ret = mpsc_room(prod, end);
		if (unlikely(ret < 0))
			return ret;
		if (mpsc_take(prod, &tail, end))
			break;
	}
	lull__claim_won(prod);
	if (first != tail)
		lull__header_publish(prod->data, prod->mask, tail,
				     (int32_t)(first - tail),
				     LULL_TYPE_PADDING);
	/* Relaxed: "claimed" only tells the consumer to wait here. */
	hdr = lull__header_at(prod->data, prod->mask, first);
	atomic_store_explicit(&hdr->length, INT32_MIN, memory_order_relaxed);
	if (src->items && end - first ==
				  record_size(src->item_len) * src->count)
		array_place(prod, src, first); /* nothing wraps inside */
	else
		batch_place(prod, src, first, first, end);
	prod->claim_pos = first;
	return 0;
}

static int mpsc_claim(struct lull_producer *prod, const struct batch_src *src)
{
	int ret = claim_checks(prod, src, true);

	return ret < 0 ? ret : mpsc_claim_checked(prod, src);
}

/* Publish the claim: the gate's release store, then the lane's tail. */
static void claim_commit(struct lull_producer *prod)
{
	struct lull_record_header *hdr =
		lull__header_at(prod->data, prod->mask, prod->claim_start);

	prod->claimed = false;
	if (prod->mode != LULL_RING_MPSC)
		lane_clear_next(prod, prod->claim_end);
	hdr->type = prod->claim_type;
	/*
	 * Pairs with the consumer's acquire load of length: every header
	 * and payload of the batch, written before, is visible once the
	 * gate is (and so is the next record's length, cleared above).
	 */
	atomic_store_explicit(&hdr->length, (int32_t)prod->claim_length,
			      memory_order_release);
	if (prod->mode == LULL_RING_MPSC) {
		lull__claim_done(prod);
		/* As after a write: the next claim's CAS waits for our
		 * stores. */
		mpsc_prefetch_next(prod, prod->claim_end,
				   prod->claim_end - prod->claim_start);
		lull__notify(prod);
		return;
	}
	lane_tail_store(prod, prod->claim_end);
	lane_leave(prod);
}

/* Drop the claim: the consumer never sees any of it. */
static void claim_abort(struct lull_producer *prod)
{
	uint64_t start = prod->claim_start, end = prod->claim_end, first;
	struct lull_record_header *hdr;

	prod->claimed = false;
	if (prod->mode != LULL_RING_MPSC) {
		/*
		 * Nothing was published and the tail stays.  The gate still
		 * reads 0; what was written behind it is left: the next
		 * write covers the gate, and nobody reads further (region.h).
		 * The claim is no longer announced.
		 */
		atomic_store_explicit(&prod->lane->claim_end, start,
				      memory_order_relaxed);
		lane_leave(prod);
		return;
	}
	/*
	 * Others may have claimed past it, so the space cannot be given
	 * back: it becomes padding that the consumer skips (and zeroes).  A
	 * padding never crosses the end of the data area, so a batch that
	 * wraps becomes two, the second one behind the gate.
	 */
	first = prod->mask + 1 - (start & prod->mask);
	if (first > end - start)
		first = end - start;
	if (end - start > first)
		header_behind_gate(prod, start + first,
				   (int32_t)(end - start - first),
				   LULL_TYPE_PADDING);
	hdr = lull__header_at(prod->data, prod->mask, start);
	hdr->type = LULL_TYPE_PADDING;
	/* Pairs with the consumer's acquire load of length. */
	atomic_store_explicit(&hdr->length, (int32_t)first,
			      memory_order_release);
	lull__claim_done(prod);
	/* A padding can make the records behind it readable. */
	lull__notify(prod);
}

/*
 * A lane producer writes a batch of records in one pass: each record is
 * checked as it is written, behind the gate, so a bad one, a full lane or
 * a batch too large is undone by leaving the gate as it is (nothing was
 * visible) and nothing else is ever looked at twice.
 * The checks give the errors batch_check() would, in the same cases: a
 * batch larger than the bound fails on its size before the lane can look
 * full, since its span exceeds the capacity only when its records exceed
 * the bound (the padding of a wrap is shorter than a record).
 */
static int lane_write_batch(struct lull_producer *prod,
			    const struct lull_record *recs, unsigned count)
{
	uint64_t tail, pos, size, pad, total = 0, bound;
	uint32_t max_len;
	int32_t length;
	int ret;

	ret = lane_check(prod);
	if (unlikely(ret < 0))
		return ret;
	if (unlikely(!recs || !count))
		return -EINVAL;
	ret = lane_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	max_len = prod->max_record - LULL_RECORD_HEADER_SIZE;
	bound = prod->mask + 1 - prod->max_record;
	tail = pos = lane_tail(prod);
	for (unsigned i = 0; i < count; i++) {
		const struct lull_record *rec = &recs[i];

		if (unlikely(rec->type < 1 || (rec->len && !rec->data))) {
			ret = -EINVAL;
			goto undo;
		}
		if (unlikely(rec->len > max_len)) {
			ret = -EMSGSIZE;
			goto undo;
		}
		size = record_size(rec->len);
		total += size;
		if (unlikely(total > bound)) {
			ret = -EMSGSIZE;
			goto undo;
		}
		pad = lull__wrap_padding(pos, prod->mask, size);
		if (unlikely(!lane_room(prod, pos + pad + size))) {
			ret = lull__full(prod);
			goto undo;
		}
		if (unlikely(pad)) {
			if (pos == tail) {
				prod->claim_length = (uint32_t)pad;
				prod->claim_type = LULL_TYPE_PADDING;
			} else {
				header_behind_gate(prod, pos, (int32_t)pad,
						   LULL_TYPE_PADDING);
			}
			pos += pad;
		}
		length = (int32_t)(LULL_RECORD_HEADER_SIZE + rec->len);
		if (i + 1 < count)
			length |= LULL_LENGTH_BATCH_MORE;
		if (pos == tail) {
			prod->claim_length = (uint32_t)length;
			prod->claim_type = rec->type;
		} else {
			header_behind_gate(prod, pos, length, rec->type);
		}
		lull__copy_payload(lull__header_at(prod->data, prod->mask,
						   pos) + 1,
				   rec->data, rec->len);
		pos += size;
	}
	prod->claimed = true;
	prod->claim_start = tail;
	prod->claim_end = pos;
	claim_commit(prod);
	return 0;
undo:
	lane_leave(prod);
	return ret;
}

/*
 * A lane producer writes a checked array record by record: @count records
 * of one type and length.  The common case, a span that neither wraps nor
 * finds the lane full, is one straight pass: room and wrapping are checked
 * once for the whole span, and each record costs its header and its copy.
 * Anything else is a claim of the batch (which places the padding of a
 * wrap), then the commit.
 */
static int lane_write_array(struct lull_producer *prod,
			    const struct batch_src *src)
{
	uint64_t tail, total;
	int ret;

	total = record_size(src->item_len) * src->count;
	tail = lane_tail(prod);
	if (unlikely(lull__wrap_padding(tail, prod->mask, total) ||
		     !lane_room(prod, tail + total))) {
		ret = lane_claim_checked(prod, src, false);
		if (ret == 0)
			claim_commit(prod);
		return ret;
	}
	ret = lane_enter(prod);
	if (unlikely(ret < 0))
		return ret;
	array_place(prod, src, tail);
	claim_commit(prod);
	return 0;
}

/* The array writes' source: @count items of @item_len bytes at @items. */
static int array_src(struct batch_src *src, int32_t type, const void *items,
		     size_t item_len, unsigned count)
{
	static const unsigned char no_items;

	if (unlikely(item_len && !items))
		return -EINVAL;
	*src = (struct batch_src){
		.items = item_len ? items : &no_items,
		/* Too long either way: batch_check() says -EMSGSIZE. */
		.item_len = item_len > UINT32_MAX ? UINT32_MAX :
						    (uint32_t)item_len,
		.item_type = type,
		.count = count,
	};
	return 0;
}

/*
 * Write an array packed: one record of type LULL_TYPE_ARRAY, its array
 * header, then the items in one copy.  It is written and committed as any
 * single record (mpsc.h, lane.h), so it is delivered whole; the consumer
 * hands out its items one by one (ring_read.c).
 */
static int array_write_packed(struct lull_producer *prod, int32_t type,
			      const void *items, uint32_t item_len,
			      unsigned count, bool mpsc)
{
	size_t bytes = (size_t)count * item_len;
	uint32_t length = (uint32_t)(LULL_RECORD_HEADER_SIZE +
				     sizeof(struct lull_array_header) + bytes);
	struct lull_array_header *ah;
	uint64_t pos, end;
	int ret;

	if (mpsc) {
		ret = mpsc_reserve(prod, length, &pos);
		if (unlikely(ret < 0))
			return ret;
	} else {
		ret = lane_enter(prod);
		if (unlikely(ret < 0))
			return ret;
		ret = lane_reserve(prod, length, &pos, &end);
		if (unlikely(ret < 0)) {
			lane_leave(prod);
			return ret;
		}
	}
	ah = (struct lull_array_header *)(lull__header_at(prod->data,
							  prod->mask, pos) + 1);
	ah->item_type = type;
	ah->item_len = item_len;
	memcpy(ah + 1, items, bytes);
	if (mpsc) {
		mpsc_commit_at(prod, pos, length, LULL_TYPE_ARRAY);
	} else {
		lane_publish(prod, pos, end, length, LULL_TYPE_ARRAY);
		lane_leave(prod);
	}
	return 0;
}

/*
 * Write an array: on a lane, or (@mpsc) through the shared MPSC lane.
 * Packed into one record where it can be: two items or more, of a
 * multiple of 8 bytes each (so that every item is as aligned as a
 * record's payload), that fit one record together; such an array always
 * passes batch_check() too (as records it would take at most twice its
 * bytes, two largest records, where a batch may take seven), so its
 * errors are a batch's.  Else record by record, checked as a batch.
 */
static int array_write(struct lull_producer *prod, int32_t type,
		       const void *items, size_t item_len, unsigned count,
		       bool mpsc)
{
	struct batch_src src;
	int ret = mpsc ? mpsc_check(prod) : lane_check(prod);

	if (unlikely(ret < 0))
		return ret;
	/* item_len bounded first, so that the product cannot overflow. */
	if (likely(type >= 1 && count > 1 && items && item_len &&
		   !(item_len & 7) && item_len <= prod->max_record &&
		   (uint64_t)count * item_len <=
			   prod->max_record - LULL_RECORD_HEADER_SIZE -
				   sizeof(struct lull_array_header)))
		return array_write_packed(prod, type, items,
					  (uint32_t)item_len, count, mpsc);
	ret = array_src(&src, type, items, item_len, count);
	if (unlikely(ret < 0))
		return ret;
	ret = batch_check(prod, &src);
	if (unlikely(ret < 0))
		return ret;
	if (!mpsc)
		return lane_write_array(prod, &src);
	ret = mpsc_claim_checked(prod, &src);
	if (ret == 0)
		claim_commit(prod);
	return ret;
}

LULL_EXPORT int lull_spsc_write_array(struct lull_producer *prod,
				      int32_t type, const void *items,
				      size_t item_len, unsigned count)
{
	return array_write(prod, type, items, item_len, count, false);
}

/* Write a batch of records: a claim, the copies, the commit. */
static int batch_write(struct lull_producer *prod, const struct batch_src *src,
		       bool mpsc)
{
	int ret;

	if (!mpsc)
		return lane_write_batch(prod, src->recs, src->count);
	ret = mpsc_claim(prod, src);
	if (ret == 0)
		claim_commit(prod);
	return ret;
}

/*
 * The single claims, a batch of one; -EINVAL (not -EBUSY) for a NULL
 * @datap, before anything else.
 */
static int claim_one(struct lull_producer *prod, int32_t type, size_t len,
		     void **datap, bool mpsc)
{
	struct lull_claim claim;
	struct batch_src src = { .claims = &claim, .count = 1 };
	int ret;

	if (unlikely(!datap))
		return -EINVAL;
	/* Too long either way: batch_check() says -EMSGSIZE. */
	claim.len = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
	claim.type = type;
	ret = mpsc ? mpsc_claim(prod, &src) : lane_claim(prod, &src);
	if (ret == 0)
		*datap = claim.data;
	return ret;
}

/* Commit and abort of either family: the claim says what it was. */
static int claim_end_check(const struct lull_producer *prod, bool mpsc)
{
	if (unlikely(!prod || !prod->claimed ||
		     (prod->mode == LULL_RING_MPSC) != mpsc))
		return -EINVAL;
	return 0;
}

LULL_EXPORT int lull_spsc_claim(struct lull_producer *prod, int32_t type,
				size_t len, void **datap)
{
	return claim_one(prod, type, len, datap, false);
}

LULL_EXPORT int lull_spsc_claim_batch(struct lull_producer *prod,
				      struct lull_claim *claims,
				      unsigned count)
{
	struct batch_src src = { .claims = claims, .count = count };

	return lane_claim(prod, &src);
}

LULL_EXPORT int lull_spsc_write_batch(struct lull_producer *prod,
				      const struct lull_record *recs,
				      unsigned count)
{
	struct batch_src src = { .recs = recs, .count = count };

	return batch_write(prod, &src, false);
}

LULL_EXPORT int lull_spsc_commit(struct lull_producer *prod)
{
	int ret = claim_end_check(prod, false);

	if (ret == 0)
		claim_commit(prod);
	return ret;
}

LULL_EXPORT int lull_spsc_abort(struct lull_producer *prod)
{
	int ret = claim_end_check(prod, false);

	if (ret == 0)
		claim_abort(prod);
	return ret;
}

/* A LANES producer may use the MPSC calls: its lane is written as SPSC. */
static inline bool is_lane_producer(const struct lull_producer *prod)
{
	return prod && prod->mode == LULL_MODE_LANES;
}

LULL_EXPORT int lull_mpsc_claim(struct lull_producer *prod, int32_t type,
				size_t len, void **datap)
{
	return claim_one(prod, type, len, datap, !is_lane_producer(prod));
}

LULL_EXPORT int lull_mpsc_claim_batch(struct lull_producer *prod,
				      struct lull_claim *claims,
				      unsigned count)
{
	struct batch_src src = { .claims = claims, .count = count };

	if (is_lane_producer(prod))
		return lane_claim(prod, &src);
	return mpsc_claim(prod, &src);
}

LULL_EXPORT int lull_mpsc_write_batch(struct lull_producer *prod,
				      const struct lull_record *recs,
				      unsigned count)
{
	struct batch_src src = { .recs = recs, .count = count };

	return batch_write(prod, &src, !is_lane_producer(prod));
}

LULL_EXPORT int lull_mpsc_write_array(struct lull_producer *prod,
				      int32_t type, const void *items,
				      size_t item_len, unsigned count)
{
	return array_write(prod, type, items, item_len, count,
			   !is_lane_producer(prod));
}

LULL_EXPORT int lull_mpsc_commit(struct lull_producer *prod)
{
	int ret = claim_end_check(prod, !is_lane_producer(prod));

	if (ret == 0)
		claim_commit(prod);
	return ret;
}

LULL_EXPORT int lull_mpsc_abort(struct lull_producer *prod)
{
	int ret = claim_end_check(prod, !is_lane_producer(prod));

	if (ret == 0)
		claim_abort(prod);
	return ret;
}
