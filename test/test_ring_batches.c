/* SPDX-License-Identifier: MIT */
/*
 * test_ring_batches.c - the Criterion suite of lull/ring.h: batches
 * (lull_{spsc,mpsc}_{claim,write}_batch, lull_{spsc,mpsc}_write_array):
 * records whole and in order, an array's items read as one run
 * (lull_ring_read_items),
 * padding at the wrap, all or nothing, the argument checks, commit, abort
 * and detach, and how a shutdown or a fatal report treats a batch; and
 * lull_producer_stats().
 * Each check runs for an SPSC ring, an MPSC ring and a LANES producer
 * with either family's calls (BATCH_TEST, lane_fix.h); the model of the
 * ring (struct model, struct fix) is ring_fix.h.
 */
#include "lane_fix.h"

/* Every test's .timeout: one value for the whole suite (see park_fix.h). */
#define TIMEOUT_S 20

/*
 * The ring of most checks: records of at most 128 bytes (a payload of
 * 120), so a batch may take 1024 - 128 = 896 bytes.
 */
#define CAP 1024u
#define MAX_PAYLOAD (CAP / 8 - LULL_RECORD_HEADER_SIZE)
#define LARGEST_BATCH (CAP - CAP / 8)
#define MAXB 128u

/* One batch: its records as claims and as records, and the model's seeds. */
struct batch {
	unsigned n;
	uint32_t len[MAXB];
	int32_t type[MAXB];
	uint32_t seed[MAXB];
	struct lull_claim claims[MAXB];
	struct lull_record recs[MAXB];
};

static uint8_t bufs[MAXB][256];

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(uint32_t below)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32) % below;
}

/* A batch of @n records of @lens, with the model's next seeds. */
static void batch_set(struct fix *f, struct batch *bt, const uint32_t *lens,
		      unsigned n)
{
	cr_assert_leq(n, MAXB);
	bt->n = n;
	for (unsigned i = 0; i < n; i++) {
		cr_assert_leq(lens[i], sizeof(bufs[i]));
		bt->len[i] = lens[i];
		bt->seed[i] = ++f->m.seed;
		bt->type[i] = pattern_type(bt->seed[i]);
		pattern_fill(bufs[i], lens[i], bt->seed[i]);
		bt->recs[i] = (struct lull_record){ bufs[i], lens[i],
						    bt->type[i] };
		bt->claims[i] = (struct lull_claim){ NULL, lens[i],
						     bt->type[i] };
	}
}

/* Where the batch would end if placed now; *firstp: its first record. */
static uint64_t batch_end_at(const struct model *m, const struct batch *bt,
			     uint64_t *firstp)
{
	uint64_t pos = m->wpos;
	size_t space, off;

	for (unsigned i = 0; i < bt->n; i++) {
		space = rec_space(bt->len[i]);
		off = (size_t)(pos & (m->cap - 1));
		if (off + space > m->cap)
			pos += m->cap - off;
		if (i == 0)
			*firstp = pos;
		pos += space;
	}
	return pos;
}

/* The claimed places are 8-byte aligned (the reads check where). */
static void check_claims(const struct batch *bt)
{
	uintptr_t at;

	for (unsigned i = 0; i < bt->n; i++) {
		at = (uintptr_t)bt->claims[i].data;
		cr_assert(at && at % LULL_RECORD_ALIGN == 0,
			  "claim %u: data %p", i, bt->claims[i].data);
	}
}

/*
 * Write @bt through @prod by write_batch, or by claim_batch, payloads and
 * commit; assert the result the model predicts (0 when it fits, -EAGAIN
 * when it does not) and enter the records into the model.
 */
static int batch_put(struct fix *f, const struct family *b,
		     struct lull_producer *prod, struct batch *bt,
		     bool by_claim)
{
	struct model *m = &f->m;
	uint64_t first, end = batch_end_at(m, bt, &first);
	bool must = end - m->rpos <= m->cap, may = end - m->rpos_hi <= m->cap;
	int ret;

	if (by_claim) {
		ret = b->claim_batch(prod, bt->claims, bt->n);
		if (ret == 0) {
			check_claims(bt);
			for (unsigned i = 0; i < bt->n; i++)
				pattern_fill(bt->claims[i].data, bt->len[i],
					     bt->seed[i]);
			cr_assert_eq(b->t->commit(prod), 0);
		} else {
			cr_assert_eq(b->t->commit(prod), -EINVAL,
				     "a failed batch claim left a claim");
		}
	} else {
		ret = b->write_batch(prod, bt->recs, bt->n);
	}
	if (must)
		cr_assert_eq(ret, 0, "batch of %u (%llu bytes, %llu used) = %d",
			     bt->n, (unsigned long long)(end - m->wpos),
			     (unsigned long long)(m->wpos - m->rpos), ret);
	else if (!may)
		cr_assert_eq(ret, -EAGAIN, "batch of %u that does not fit = %d",
			     bt->n, ret);
	else
		cr_assert(ret == 0 || ret == -EAGAIN, "batch = %d", ret);
	if (ret == 0 && !must)
		m->rpos = m->rpos_hi;
	for (unsigned i = 0; ret == 0 && i < bt->n; i++)
		model_push(m, bt->type[i], bt->len[i], bt->seed[i]);
	return ret;
}

static int batch_put_lens(struct fix *f, const struct family *b,
			  const uint32_t *lens, unsigned n, bool by_claim)
{
	struct batch bt;

	batch_set(f, &bt, lens, n);
	return batch_put(f, b, f->prod, &bt, by_claim);
}

/*
 * Claim @bt through @prod and leave it claimed, payloads full of fake
 * headers; in the model as records (WILL_COMMIT) or as what an abort
 * leaves (WILL_DROP: nothing, or padding on the MPSC ring).
 */
static void batch_hold(struct fix *f, const struct family *b,
		       struct lull_producer *prod, struct batch *bt,
		       enum fate fate)
{
	uint64_t first;
	int ret;

	cr_assert_leq(batch_end_at(&f->m, bt, &first) - f->m.rpos, f->m.cap,
		      "test bug: the batch does not fit");
	ret = b->claim_batch(prod, bt->claims, bt->n);
	cr_assert_eq(ret, 0, "claim of a batch of %u = %d", bt->n, ret);
	check_claims(bt);
	for (unsigned i = 0; i < bt->n; i++) {
		fill_fake_headers(bt->claims[i].data, bt->len[i]);
		if (fate == WILL_COMMIT)
			model_push(&f->m, bt->type[i], bt->len[i],
				   bt->seed[i]);
		else if (b->shared)
			model_skip(&f->m, bt->len[i]);
	}
}

static void batch_commit(const struct family *b, struct lull_producer *prod,
			 struct batch *bt)
{
	for (unsigned i = 0; i < bt->n; i++)
		pattern_fill(bt->claims[i].data, bt->len[i], bt->seed[i]);
	cr_assert_eq(b->t->commit(prod), 0, "commit of a batch");
}

/* The batch call alone: claim_batch (its claim left held) or write_batch. */
static int batch_call(const struct family *b, struct lull_producer *prod,
		      struct batch *bt, bool by_claim)
{
	return by_claim ? b->claim_batch(prod, bt->claims, bt->n)
			: b->write_batch(prod, bt->recs, bt->n);
}

/* Move the empty ring to data offset @off, with records read at once. */
static void advance_to(struct fix *f, size_t off)
{
	struct model *m = &f->m;
	size_t at, step;

	while ((at = (size_t)(m->wpos & (m->cap - 1))) != off) {
		step = (off - at) & (m->cap - 1);
		if (step > m->cap - at)
			step = m->cap - at;
		if (step > f->max + LULL_RECORD_HEADER_SIZE)
			step = f->max + LULL_RECORD_HEADER_SIZE;
		cr_assert_eq(fix_put(f, BY_WRITE, step - LULL_RECORD_HEADER_SIZE),
			     0);
		model_read(m, f->ring, 4);
	}
}

/* Forget the last @n records the model expects: discarded, never read. */
static void model_forget(struct model *m, unsigned n)
{
	cr_assert_geq(model_queued(m), n);
	m->qtail -= n;
}

/* The end of a ring after a shutdown, where the fixture cannot check it. */
static void fix_close(struct fix *f)
{
	cr_assert_eq(lull_producer_detach(f->prod), 0);
	cr_assert_eq(lull_ring_destroy(f->ring), 0);
}

/* ========================================================================
 * Records whole, in order, at the right places
 */

BATCH_TEST(batch_records_arrive_whole_and_in_order, TIMEOUT_S)
{
	uint32_t lens[8];
	struct fix f;
	unsigned n;

	fix_init(&f, b->t, CAP);
	for (int round = 0; round < 400; round++) {
		n = 1 + rnd(7); /* 7 of the largest records: the bound */
		for (unsigned i = 0; i < n; i++)
			lens[i] = rnd(4) ? rnd(48) : rnd(MAX_PAYLOAD + 1);
		if (batch_put_lens(&f, b, lens, n, round % 2) == -EAGAIN)
			model_drain_mixed(&f.m, f.ring, (unsigned)round);
		if (round % 5 == 0)
			fix_put(&f, (enum method)(round % METHODS), rnd(30));
		if (round % 3 == 0)
			model_drain_mixed(&f.m, f.ring, (unsigned)round);
	}
	model_drain(&f.m, f.ring);
	/* Empty payloads, and the largest ones. */
	batch_put_lens(&f, b, (uint32_t[]){ 0, 0, 0 }, 3, false);
	batch_put_lens(&f, b, (uint32_t[]){ 0, MAX_PAYLOAD, 0 }, 3, true);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

/*
 * A batch at every start offset: padding before its first record, before
 * one in its middle, or none; each record where the format puts it.
 */
BATCH_TEST(batch_straddling_the_end_is_padded_at_every_offset, TIMEOUT_S)
{
	static const uint32_t lens[] = { 40, 100, 0, 64, 8 };
	unsigned pad_first = 0, pad_middle = 0;
	struct batch bt;
	uint64_t first, pos;
	struct fix f;

	fix_init(&f, b->t, CAP);
	for (size_t off = 0; off < CAP; off += 8) {
		advance_to(&f, off);
		batch_set(&f, &bt, lens, 5);
		batch_end_at(&f.m, &bt, &first);
		pad_first += first != f.m.wpos;
		pos = first;
		for (unsigned i = 0; i < bt.n; pos += rec_space(lens[i++]))
			if ((pos & (CAP - 1)) + rec_space(lens[i]) > CAP) {
				pad_middle++;
				break;
			}
		cr_assert_eq(batch_put(&f, b, f.prod, &bt, off % 16), 0);
		if (off % 24)
			model_drain_mixed(&f.m, f.ring, (unsigned)off / 8);
		else
			model_read_expect(&f.m, f.ring, 16, 5);
	}
	cr_assert_gt(pad_first, 0, "no batch began with padding");
	cr_assert_gt(pad_middle, 0, "no batch had padding in its middle");
	fix_fini(&f);
}

/* ========================================================================
 * All or nothing, and the size limit
 */

BATCH_TEST(batch_that_does_not_fit_is_eagain_and_writes_nothing, TIMEOUT_S)
{
	uint32_t big[7] = { 120, 120, 120, 120, 120, 120, 120 };
	unsigned refused = 0;
	uint32_t lens[8];
	struct fix f;

	fix_init(&f, b->t, CAP);
	/* 128 bytes used: 896 more fit exactly, 904 do not. */
	fix_put(&f, BY_WRITE, 120);
	cr_assert_eq(batch_put_lens(&f, b, big, 7, false), 0);
	model_drain(&f.m, f.ring);
	for (int by_claim = 0; by_claim < 2; by_claim++) {
		fix_put(&f, BY_WRITEV, 120);
		fix_put(&f, BY_WRITE, 0);
		cr_assert_eq(batch_put_lens(&f, b, big, 7, by_claim), -EAGAIN);
		/* The read sees the two records and nothing of the batch. */
		model_read_expect(&f.m, f.ring, 16, 2);
		model_read(&f.m, f.ring, 16);
		cr_assert_eq(batch_put_lens(&f, b, big, 7, by_claim), 0);
		model_drain(&f.m, f.ring);
	}
	/* At random fill levels and offsets, the model says which fit. */
	for (int round = 0; round < 600; round++) {
		unsigned n = 1 + rnd(7);

		for (unsigned i = 0; i < n; i++)
			lens[i] = rnd(MAX_PAYLOAD + 1);
		if (batch_put_lens(&f, b, lens, n, round % 2) == -EAGAIN) {
			refused++;
			model_read(&f.m, f.ring, 1 + rnd(6));
		}
	}
	cr_assert_gt(refused, 50, "only %u batches did not fit", refused);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

BATCH_TEST(batch_larger_than_the_ring_allows_is_emsgsize, TIMEOUT_S)
{
	uint32_t lens[MAXB];
	struct batch bt;
	struct fix f;

	fix_init(&f, b->t, CAP);
	/* The largest batch fits in the empty ring wherever it starts. */
	for (size_t off = 0; off < CAP; off += 8) {
		advance_to(&f, off);
		for (unsigned i = 0; i < 7; i++)
			lens[i] = MAX_PAYLOAD;
		cr_assert_eq(batch_put_lens(&f, b, lens, 7, off % 16), 0,
			     "largest batch at offset %zu", off);
		model_drain(&f.m, f.ring);
	}
	for (unsigned i = 0; i < MAXB; i++)
		lens[i] = 0; /* 8 bytes each: 112 make the largest batch */
	cr_assert_eq(batch_put_lens(&f, b, lens, LARGEST_BATCH / 8, false), 0);
	model_drain(&f.m, f.ring);
	for (int by_claim = 0; by_claim < 2; by_claim++) {
		/* One 8-byte record more than the bound, even in an empty ring. */
		for (unsigned i = 0; i < MAXB; i++)
			lens[i] = 0;
		batch_set(&f, &bt, lens, LARGEST_BATCH / 8 + 1);
		cr_assert_eq(batch_call(b, f.prod, &bt, by_claim), -EMSGSIZE,
			     "113 records of 8 bytes");
		/* 7 of the largest records and one more of 8 bytes. */
		for (unsigned i = 0; i < 7; i++)
			lens[i] = MAX_PAYLOAD;
		batch_set(&f, &bt, lens, 8);
		cr_assert_eq(batch_call(b, f.prod, &bt, by_claim), -EMSGSIZE,
			     "904 bytes");
		/* One record above the maximum payload. */
		lens[3] = MAX_PAYLOAD + 1;
		batch_set(&f, &bt, lens, 4);
		cr_assert_eq(batch_call(b, f.prod, &bt, by_claim), -EMSGSIZE,
			     "a record above the maximum payload");
		cr_assert_eq(b->t->commit(f.prod), -EINVAL);
	}
	expect_nothing(f.ring);
	fix_fini(&f);
}

/* ========================================================================
 * Argument checks
 */

static void expect_batch_ret(const struct family *b, struct fix *f,
			     struct batch *bt, int want, const char *what)
{
	int ret = b->write_batch(f->prod, bt->recs, bt->n);

	cr_assert_eq(ret, want, "write_batch, %s: %d", what, ret);
	ret = b->claim_batch(f->prod, bt->claims, bt->n);
	cr_assert_eq(ret, want, "claim_batch, %s: %d", what, ret);
	cr_assert_eq(b->t->commit(f->prod), -EINVAL, "%s left a claim", what);
}

BATCH_TEST(batch_arguments_are_checked, TIMEOUT_S)
{
	static const int32_t reserved[] = { LULL_TYPE_PADDING,
					    LULL_TYPE_POISON, LULL_TYPE_FATAL,
					    -3, INT32_MIN };
	static const uint32_t lens[] = { 8, 16, 24, 0 };
	const struct family *other;
	struct batch bt;
	struct fix f;

	fix_init(&f, b->t, CAP);
	batch_set(&f, &bt, lens, 4);
	bt.n = 0;
	expect_batch_ret(b, &f, &bt, -EINVAL, "count 0");
	cr_assert_eq(b->write_batch(f.prod, NULL, 4), -EINVAL);
	cr_assert_eq(b->claim_batch(f.prod, NULL, 4), -EINVAL);
	cr_assert_eq(b->write_batch(NULL, bt.recs, 4), -EINVAL);
	cr_assert_eq(b->claim_batch(NULL, bt.claims, 4), -EINVAL);
	for (unsigned at = 0; at < 4; at++)
		for (unsigned r = 0; r < ARRAY_LEN(reserved); r++) {
			batch_set(&f, &bt, lens, 4);
			bt.recs[at].type = bt.claims[at].type = reserved[r];
			expect_batch_ret(b, &f, &bt, -EINVAL, "reserved type");
		}
	for (unsigned at = 0; at < 3; at++) {
		batch_set(&f, &bt, lens, 4);
		bt.recs[at].data = NULL;
		cr_assert_eq(b->write_batch(f.prod, bt.recs, 4), -EINVAL,
			     "NULL data for %u bytes", bt.recs[at].len);
	}
	expect_nothing(f.ring);
	/* NULL data is fine for an empty payload. */
	batch_set(&f, &bt, lens, 4);
	bt.recs[3].data = NULL;
	cr_assert_eq(batch_put(&f, b, f.prod, &bt, false), 0);
	model_drain(&f.m, f.ring);
	/* The other family's calls refuse an SPSC or MPSC producer. */
	if (b == &fam_spsc || b == &fam_mpsc) {
		other = b == &fam_spsc ? &fam_mpsc : &fam_spsc;
		batch_set(&f, &bt, lens, 4);
		cr_assert_eq(other->write_batch(f.prod, bt.recs, 4), -EINVAL);
		cr_assert_eq(other->claim_batch(f.prod, bt.claims, 4),
			     -EINVAL);
		expect_nothing(f.ring);
	}
	fix_fini(&f);
}

BATCH_TEST(batch_while_a_claim_is_held_is_ebusy, TIMEOUT_S)
{
	static const uint32_t lens[] = { 24, 8, 40 };
	struct batch held, bt;
	struct pending pc;
	void *dst;
	struct fix f;

	fix_init(&f, b->t, CAP);
	/* A single claim held. */
	pending_claim(&f, &pc, f.prod, 16, WILL_COMMIT);
	batch_set(&f, &bt, lens, 3);
	cr_assert_eq(b->claim_batch(f.prod, bt.claims, 3), -EBUSY);
	cr_assert_eq(b->write_batch(f.prod, bt.recs, 3), -EBUSY);
	pending_commit(&f, &pc);
	/* A batch held: every write or claim is -EBUSY. */
	batch_set(&f, &held, lens, 3);
	batch_hold(&f, b, f.prod, &held, WILL_COMMIT);
	cr_assert_eq(b->claim_batch(f.prod, bt.claims, 3), -EBUSY);
	cr_assert_eq(b->write_batch(f.prod, bt.recs, 3), -EBUSY);
	cr_assert_eq(b->t->claim(f.prod, 1, 8, &dst), -EBUSY);
	cr_assert_eq(b->t->write(f.prod, 1, bufs[0], 8), -EBUSY);
	cr_assert_eq(b->t->writev(f.prod, 1, NULL, 0), -EBUSY);
	/* The held batch is intact and commits whole. */
	model_read_expect(&f.m, f.ring, 16, 1);
	expect_nothing(f.ring);
	batch_commit(b, f.prod, &held);
	model_read_expect(&f.m, f.ring, 16, 3);
	fix_fini(&f);
}

/* ========================================================================
 * Arrays: a batch of alike records from one buffer (write_array)
 */

static uint8_t items[MAXB * 128];

/*
 * Whether write_array packs @n items of @len into one record (region.h):
 * two or more, a multiple of 8 bytes each, together within the largest
 * payload after the 8-byte array header.
 */
static bool array_packed(uint32_t len, unsigned n)
{
	return n > 1 && len && len % 8 == 0 && n * len <= MAX_PAYLOAD - 8;
}

/*
 * Write @n records of @len bytes and one type as an array through
 * write_array: the model predicts the result as for any batch, packed
 * or record by record, and each item carries its own seed's pattern, so
 * the read checks every record against the right part of the ring.
 */
static int array_put(struct fix *f, const struct family *b, uint32_t len,
		     unsigned n)
{
	uint32_t lens[MAXB] = { 0 };
	struct batch bt;
	uint64_t first, end, need;
	bool must, may, packed = array_packed(len, n);
	int ret;

	for (unsigned i = 0; i < n; i++)
		lens[i] = len;
	batch_set(f, &bt, lens, n);
	for (unsigned i = 0; i < n; i++) {
		bt.type[i] = bt.type[0];
		pattern_fill(items + (size_t)i * len, len, bt.seed[i]);
	}
	if (packed)
		end = model_start(&f->m, 8 + n * len, &need) +
		      rec_space(8 + n * len);
	else
		end = batch_end_at(&f->m, &bt, &first);
	must = end - f->m.rpos <= f->m.cap;
	may = end - f->m.rpos_hi <= f->m.cap;
	ret = b->write_array(f->prod, bt.type[0], items, len, n);
	if (must)
		cr_assert_eq(ret, 0, "array of %u x %u (%llu used) = %d", n,
			     len, (unsigned long long)(f->m.wpos - f->m.rpos),
			     ret);
	else if (!may)
		cr_assert_eq(ret, -EAGAIN, "array that does not fit = %d", ret);
	else
		cr_assert(ret == 0 || ret == -EAGAIN, "array = %d", ret);
	if (ret == 0 && !must)
		f->m.rpos = f->m.rpos_hi;
	if (ret == 0 && packed)
		model_push_array(&f->m, bt.type[0], len, bt.seed, n);
	for (unsigned i = 0; ret == 0 && !packed && i < n; i++)
		model_push(&f->m, bt.type[i], len, bt.seed[i]);
	return ret;
}

/* The most records of @len an array may hold (the bound of batches). */
static unsigned array_most(uint32_t len)
{
	unsigned most = LARGEST_BATCH / (unsigned)rec_space(len);

	return most < MAXB ? most : MAXB;
}

BATCH_TEST(array_records_arrive_whole_and_in_order, TIMEOUT_S)
{
	unsigned refused = 0, n;
	uint32_t len;
	struct fix f;

	fix_init(&f, b->t, CAP);
	for (int round = 0; round < 600; round++) {
		len = rnd(4) ? rnd(24) : rnd(MAX_PAYLOAD + 1);
		n = 1 + rnd(array_most(len));
		if (array_put(&f, b, len, n) == -EAGAIN) {
			refused++;
			model_drain_mixed(&f.m, f.ring, (unsigned)round);
		}
		if (round % 4 == 0)
			fix_put(&f, (enum method)(round % METHODS), rnd(30));
		if (round % 3 == 0)
			model_read(&f.m, f.ring, 1 + rnd(40));
	}
	cr_assert_gt(refused, 20, "only %u arrays did not fit", refused);
	model_drain(&f.m, f.ring);
	/* Empty items, with and without a buffer; the largest arrays. */
	cr_assert_eq(array_put(&f, b, 0, 5), 0);
	cr_assert_eq(b->write_array(f.prod, 3, NULL, 0, 2), 0);
	model_push(&f.m, 3, 0, 0);
	model_push(&f.m, 3, 0, 0);
	model_drain(&f.m, f.ring);
	cr_assert_eq(array_put(&f, b, 0, LARGEST_BATCH / 8), 0);
	model_drain(&f.m, f.ring);
	cr_assert_eq(array_put(&f, b, MAX_PAYLOAD, 7), 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

/*
 * An array at every start offset: one straight pass where it fits before
 * the end of the data area, padding before its first record or in its
 * middle where it does not, and -EAGAIN when the ring lacks room.
 */
BATCH_TEST(array_at_every_offset_is_padded_where_it_wraps, TIMEOUT_S)
{
	struct fix f;

	fix_init(&f, b->t, CAP);
	for (size_t off = 0; off < CAP; off += 8) {
		advance_to(&f, off);
		cr_assert_eq(array_put(&f, b, 40, 6), 0, "at offset %zu", off);
		cr_assert_eq(array_put(&f, b, 8, 3), 0, "at offset %zu", off);
		if (off % 24)
			model_drain_mixed(&f.m, f.ring, (unsigned)off / 8);
		else
			model_read_expect(&f.m, f.ring, 16, 9);
	}
	/*
	 * The last 128 bytes of a full ring: 8 records of 4 bytes, one by
	 * one, fit and 9 do not; packed, 14 of 8 bytes fit (8 + 8 + 112).
	 */
	model_drain(&f.m, f.ring);
	advance_to(&f, 0);
	for (unsigned i = 0; i < 7; i++)
		fix_put(&f, BY_WRITE, MAX_PAYLOAD);
	cr_assert_eq(array_put(&f, b, 4, 9), -EAGAIN);
	cr_assert_eq(array_put(&f, b, 4, 8), 0);
	cr_assert_eq(array_put(&f, b, 0, 1), -EAGAIN);
	model_drain(&f.m, f.ring);
	advance_to(&f, 0);
	for (unsigned i = 0; i < 7; i++)
		fix_put(&f, BY_WRITE, MAX_PAYLOAD);
	cr_assert(array_packed(8, 14) && !array_packed(8, 15));
	cr_assert_eq(array_put(&f, b, 8, 15), -EAGAIN); /* 15 x 16 bytes */
	cr_assert_eq(array_put(&f, b, 8, 14), 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

BATCH_TEST(array_arguments_are_checked, TIMEOUT_S)
{
	static const int32_t reserved[] = { LULL_TYPE_PADDING,
					    LULL_TYPE_POISON, LULL_TYPE_FATAL,
					    -3, INT32_MIN };
	struct pending pc;
	struct fix f;

	fix_init(&f, b->t, CAP);
	cr_assert_eq(b->write_array(NULL, 1, items, 8, 2), -EINVAL);
	cr_assert_eq(b->write_array(f.prod, 1, items, 8, 0), -EINVAL);
	cr_assert_eq(b->write_array(f.prod, 1, NULL, 8, 2), -EINVAL);
	for (unsigned r = 0; r < ARRAY_LEN(reserved); r++)
		cr_assert_eq(b->write_array(f.prod, reserved[r], items, 8, 2),
			     -EINVAL, "type %d", reserved[r]);
	cr_assert_eq(b->write_array(f.prod, 1, items, MAX_PAYLOAD + 1, 1),
		     -EMSGSIZE);
	cr_assert_eq(b->write_array(f.prod, 1, items, (size_t)UINT32_MAX + 9,
				    1),
		     -EMSGSIZE);
	/* One record more than the bound, even in an empty ring. */
	cr_assert_eq(b->write_array(f.prod, 1, items, 0, LARGEST_BATCH / 8 + 1),
		     -EMSGSIZE);
	cr_assert_eq(b->write_array(f.prod, 1, items, MAX_PAYLOAD, 8),
		     -EMSGSIZE);
	cr_assert_eq(b->write_array(f.prod, 1, items, 8, UINT32_MAX),
		     -EMSGSIZE);
	/* Items whose total overflows 64 bits: too long, not packed. */
	cr_assert_eq(b->write_array(f.prod, 1, items, (SIZE_MAX >> 3) + 1, 8),
		     -EMSGSIZE);
	/* A claim held: -EBUSY, and the claim is intact. */
	pending_claim(&f, &pc, f.prod, 16, WILL_COMMIT);
	cr_assert_eq(b->write_array(f.prod, 1, items, 8, 2), -EBUSY);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	expect_nothing(f.ring);
	/* The other family's call refuses an SPSC or MPSC producer. */
	if (b == &fam_spsc)
		cr_assert_eq(lull_mpsc_write_array(f.prod, 1, items, 8, 2),
			     -EINVAL);
	if (b == &fam_mpsc)
		cr_assert_eq(lull_spsc_write_array(f.prod, 1, items, 8, 2),
			     -EINVAL);
	expect_nothing(f.ring);
	fix_fini(&f);
}

/* ========================================================================
 * Runs: lull_ring_read_items() hands out an array's items in one call
 */

/*
 * A run handler that answers @action at its @at-th call (from 0) and
 * CONTINUE otherwise, checking every run it consumes against the model
 * and noting each run's length.
 */
struct run_script {
	struct run_check rc;
	unsigned calls, at;
	int action;
	uint32_t counts[8];
};

static int run_script_handler(const struct lull_items *run, void *ctx)
{
	struct run_script *s = ctx;
	unsigned call = s->calls++;

	cr_assert_lt(call, ARRAY_LEN(s->counts), "too many runs");
	s->counts[call] = run->count;
	if (call == s->at && s->action == LULL_READ_KEEP) {
		cr_assert_eq(run->count,
			     model_run_expected(s->rc.m, s->rc.room),
			     "the kept run is not whole");
		return LULL_READ_KEEP;
	}
	run_check_handler(run, &s->rc);
	return call == s->at ? s->action : LULL_READ_CONTINUE;
}

static int run_read(struct fix *f, unsigned limit, unsigned at, int action,
		    struct run_script *s)
{
	int ret;

	memset(s, 0, sizeof(*s));
	s->rc.m = &f->m;
	s->rc.room = limit;
	s->at = at;
	s->action = action;
	ret = lull_ring_read_items(f->ring, run_script_handler, s, limit);
	model_consumer_called(&f->m);
	return ret;
}

/* The runs of the last run_read(), as "3,1,2". */
static const char *run_counts(const struct run_script *s)
{
	static char buf[96];
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < s->calls && i < ARRAY_LEN(s->counts); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%u",
					i ? "," : "", (unsigned)s->counts[i]);
	return buf;
}

BATCH_TEST(run_is_an_array_whole_cut_only_by_the_limit, TIMEOUT_S)
{
	struct run_script s;
	struct fix f;

	fix_init(&f, b->t, CAP);
	cr_assert(array_packed(8, 10) && array_packed(16, 4) &&
		  !array_packed(12, 3));
	cr_assert_eq(array_put(&f, b, 8, 10), 0);
	fix_put(&f, BY_WRITE, 24);
	cr_assert_eq(array_put(&f, b, 16, 4), 0);
	/* KEEP leaves the whole run. */
	cr_assert_eq(run_read(&f, 16, 0, LULL_READ_KEEP, &s), 0);
	cr_assert_str_eq(run_counts(&s), "10");
	/* The limit cuts a run; the rest of the array is the next one. */
	cr_assert_eq(run_read(&f, 3, 99, 0, &s), 3);
	cr_assert_str_eq(run_counts(&s), "3");
	cr_assert_eq(run_read(&f, 4, 99, 0, &s), 4);
	cr_assert_str_eq(run_counts(&s), "4");
	cr_assert_eq(run_read(&f, 6, 99, 0, &s), 6);
	cr_assert_str_eq(run_counts(&s), "3,1,2");
	/* KEEP after a run: the run before it is consumed. */
	fix_put(&f, BY_WRITE, 40);
	cr_assert_eq(array_put(&f, b, 8, 5), 0);
	cr_assert_eq(run_read(&f, 16, 1, LULL_READ_KEEP, &s), 2);
	cr_assert_str_eq(run_counts(&s), "2,1");
	/* STOP consumes its whole run and ends the read. */
	fix_put(&f, BY_WRITE, 0);
	cr_assert_eq(run_read(&f, 16, 1, LULL_READ_STOP, &s), 6);
	cr_assert_str_eq(run_counts(&s), "1,5");
	cr_assert_eq(run_read(&f, 16, 99, 0, &s), 1);
	cr_assert_str_eq(run_counts(&s), "1");
	/* A peek takes one item; the others come as one run. */
	cr_assert_eq(array_put(&f, b, 8, 6), 0);
	model_peek(&f.m, f.ring);
	cr_assert_eq(run_read(&f, 16, 99, 0, &s), 5);
	cr_assert_str_eq(run_counts(&s), "5");
	/* Items that are not packed (12 bytes) come one per run. */
	cr_assert_eq(array_put(&f, b, 12, 3), 0);
	cr_assert_eq(run_read(&f, 16, 99, 0, &s), 3);
	cr_assert_str_eq(run_counts(&s), "1,1,1");
	cr_assert_eq(run_read(&f, 16, 99, 0, &s), -EAGAIN);
	cr_assert_eq(s.calls, 0);
	fix_fini(&f);
}

/* The end of a ring read in runs: the fatal and poison records alone. */
struct run_end {
	struct run_check rc;
	unsigned fatals, poisons;
};

static int run_end_handler(const struct lull_items *run, void *ctx)
{
	static const char message[] = "runs end here";
	struct run_end *e = ctx;
	const struct lull_fatal *fatal = run->data;

	cr_assert_eq(e->poisons, 0, "a run after the poison");
	if (run->type != LULL_TYPE_FATAL && run->type != LULL_TYPE_POISON)
		return run_check_handler(run, &e->rc);
	cr_assert_eq(run->count, 1, "type %d as a run of %u", run->type,
		     (unsigned)run->count);
	cr_assert_eq(model_queued(e->rc.m), 0, "type %d before %u records",
		     run->type, model_queued(e->rc.m));
	if (run->type == LULL_TYPE_POISON) {
		cr_assert_eq(e->fatals, 1, "poison before the fatal");
		cr_assert_eq(run->len, 0);
		e->poisons++;
	} else {
		cr_assert_eq(run->len, offsetof(struct lull_fatal, message) +
					       sizeof(message) - 1);
		cr_assert_eq(fatal->code, -5);
		cr_assert_str_eq(fatal->message, message);
		e->fatals++;
	}
	return LULL_READ_CONTINUE;
}

BATCH_TEST(runs_end_with_the_fatal_and_poison_records_alone, TIMEOUT_S)
{
	struct run_end e = { .rc.m = NULL };
	struct fix f;
	int got[4];

	fix_init(&f, b->t, CAP);
	e.rc.m = &f.m;
	cr_assert_eq(array_put(&f, b, 8, 5), 0);
	cr_assert_eq(lull_ring_fatal(f.ring, -5, "runs end here"), 0);
	for (unsigned i = 0; i < ARRAY_LEN(got); i++) {
		e.rc.room = 16;
		got[i] = lull_ring_read_items(f.ring, run_end_handler, &e, 16);
	}
	cr_assert(got[0] == 5 && got[1] == 1 && got[2] == 1 &&
		  got[3] == -EPIPE,
		  "reads returned %d, %d, %d, %d", got[0], got[1], got[2],
		  got[3]);
	cr_assert_eq(e.fatals, 1);
	cr_assert_eq(e.poisons, 1);
	fix_close(&f);
}

/*
 * An array is a batch to a shutdown: an immediate one finishes an array a
 * read began and discards one it did not; a graceful one refuses arrays
 * after it.
 */
static void immediate_after_items(const struct family *b, size_t off)
{
	struct fix f;

	fix_init(&f, b->t, CAP);
	advance_to(&f, off);
	cr_assert(!array_packed(12, 4));
	cr_assert_eq(array_put(&f, b, 12, 4), 0);
	cr_assert_eq(array_put(&f, b, 12, 3), 0);
	model_read_expect(&f.m, f.ring, 1, 1);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	model_forget(&f.m, 3);
	cr_assert(model_expect_end(&f.m, f.ring));
	fix_close(&f);
}

static void immediate_after_array_at(const struct family *b, size_t off,
				     bool by_peek)
{
	struct fix f;

	fix_init(&f, b->t, CAP);
	advance_to(&f, off);
	cr_assert_eq(array_put(&f, b, 16, 4), 0);
	cr_assert_eq(array_put(&f, b, 8, 3), 0);
	if (by_peek)
		model_peek(&f.m, f.ring);
	else
		model_read_expect(&f.m, f.ring, 1, 1);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	cr_assert_eq(b->write_array(f.prod, 1, items, 8, 2), -EPIPE);
	model_forget(&f.m, 3);
	cr_assert(model_expect_end(&f.m, f.ring));
	fix_close(&f);
}

BATCH_TEST(immediate_shutdown_finishes_an_array_begun_by_a_read, TIMEOUT_S)
{
	/* Both arrays packed: at offset 0, and behind a padding. */
	immediate_after_array_at(b, 0, false);
	immediate_after_array_at(b, CAP - 40, false);
	immediate_after_array_at(b, 0, true);
	immediate_after_array_at(b, CAP - 40, true);
	/* Record by record (12-byte items do not pack): a straight pass,
	 * and padding in its middle. */
	immediate_after_items(b, 0);
	immediate_after_items(b, CAP - 40);
}

/*
 * A packed array's items are records to the handler: STOP consumes one
 * and ends the read, KEEP leaves it first for the next read, a read's
 * limit or a peek may end between two of them, and the records around
 * the array keep their places.
 */
BATCH_TEST(array_items_obey_the_handlers_verdicts, TIMEOUT_S)
{
	struct fix f;

	fix_init(&f, b->t, CAP);
	fix_put(&f, BY_WRITE, 8);
	cr_assert(array_packed(8, 10));
	cr_assert_eq(array_put(&f, b, 8, 10), 0);
	fix_put(&f, BY_WRITE, 24);
	cr_assert_eq(script_read(&f, 3, LULL_READ_STOP, 100), 3);
	cr_assert_eq(script_read(&f, 2, LULL_READ_KEEP, 100), 1);
	cr_assert_eq(script_read(&f, 1, LULL_READ_KEEP, 100), 0);
	model_peek(&f.m, f.ring);
	cr_assert_eq(script_read(&f, 3, LULL_READ_STOP, 3), 3);
	cr_assert_eq(script_read(&f, 3, LULL_READ_KEEP, 100), 2);
	/* The array's last item, kept, then the record after it. */
	model_read_expect(&f.m, f.ring, 100, 2);
	expect_nothing(f.ring);
	fix_fini(&f);
}

/* ========================================================================
 * Commit, abort, detach
 */

BATCH_TEST(claimed_batch_is_invisible_until_commit_then_whole, TIMEOUT_S)
{
	static const uint32_t lens[] = { 32, 0, 120, 7 };
	struct lull_producer *p2 = NULL;
	struct batch bt;
	struct fix f;

	fix_init(&f, b->t, CAP);
	for (size_t off = 0; off < CAP; off += 40) {
		advance_to(&f, off);
		batch_set(&f, &bt, lens, 4);
		batch_hold(&f, b, f.prod, &bt, WILL_COMMIT);
		expect_nothing(f.ring);
		batch_commit(b, f.prod, &bt);
		/* Whole: one read hands all four. */
		model_read_expect(&f.m, f.ring, 16, 4);
	}
	/* Behind a committed record: that one only. */
	fix_put(&f, BY_WRITE, 5);
	batch_set(&f, &bt, lens, 4);
	batch_hold(&f, b, f.prod, &bt, WILL_COMMIT);
	model_read_expect(&f.m, f.ring, 16, 1);
	expect_nothing(f.ring);
	batch_commit(b, f.prod, &bt);
	model_read_expect(&f.m, f.ring, 16, 4);
	/* MPSC: another producer's record behind it waits for the commit. */
	if (b->shared) {
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
		batch_set(&f, &bt, lens, 4);
		batch_hold(&f, b, f.prod, &bt, WILL_COMMIT);
		fix_put_by(&f, p2, BY_WRITE, 9);
		expect_nothing(f.ring);
		batch_commit(b, f.prod, &bt);
		cr_assert_eq(lull_producer_detach(p2), 0);
	}
	model_read(&f.m, f.ring, 16);
	fix_fini(&f);
}

/*
 * An aborted batch is never seen, and leaves nothing a later lap could
 * take for a record: its payloads hold fake headers, and the record
 * written next ends where its second header was.
 */
BATCH_TEST(aborted_batch_leaves_no_stale_header_over_many_laps, TIMEOUT_S)
{
	uint32_t lens[6];
	struct batch bt;
	struct fix f;
	unsigned n;

	fix_init(&f, b->t, CAP);
	for (int round = 0; round < 1500; round++) {
		n = 1 + rnd(6);
		for (unsigned i = 0; i < n; i++)
			lens[i] = 8 * rnd(16);
		batch_set(&f, &bt, lens, n);
		batch_hold(&f, b, f.prod, &bt, WILL_DROP);
		expect_nothing(f.ring);
		cr_assert_eq(b->t->abort(f.prod), 0);
		cr_assert_eq(b->t->abort(f.prod), -EINVAL, "abort after abort");
		model_read(&f.m, f.ring, 8);
		cr_assert_eq(fix_put(&f, (enum method)(round % METHODS), lens[0]),
			     0);
		model_read(&f.m, f.ring, 8);
		model_read(&f.m, f.ring, 8);
		if (round % 7 == 0) {
			/* Now a batch of another shape over the same space. */
			for (unsigned i = 0; i < n; i++)
				lens[i] = 8 * rnd(15) + rnd(8);
			batch_put_lens(&f, b, lens, n, round % 2);
			model_drain_mixed(&f.m, f.ring, (unsigned)round);
		}
	}
	fix_fini(&f);
}

/*
 * MPSC: a batch aborted behind which another producer claimed is padding
 * the consumer skips, also when it wraps; until then, it waits there.
 */
Test(mpsc, aborted_batch_before_another_claim_becomes_padding,
     .timeout = TIMEOUT_S)
{
	static const uint32_t lens[] = { 56, 120, 24 };
	struct lull_producer *p2;
	unsigned wrapped = 0;
	uint64_t first, end;
	struct pending pc;
	struct batch bt;
	struct fix f;

	fix_init(&f, &topo_mpsc, CAP);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	for (size_t off = 0; off < CAP; off += 8) {
		advance_to(&f, off);
		batch_set(&f, &bt, lens, 3);
		end = batch_end_at(&f.m, &bt, &first);
		wrapped += (first & ~(uint64_t)(CAP - 1)) !=
			   ((end - 1) & ~(uint64_t)(CAP - 1));
		batch_hold(&f, &fam_mpsc, f.prod, &bt, WILL_DROP);
		if (off % 16) {
			fix_put_by(&f, p2, (enum method)(off % 3), 16);
		} else {
			pending_claim(&f, &pc, p2, 16, WILL_COMMIT);
			pending_commit(&f, &pc);
		}
		expect_nothing(f.ring);
		cr_assert_eq(lull_mpsc_abort(f.prod), 0);
		model_read_expect(&f.m, f.ring, 8, 1);
		model_read(&f.m, f.ring, 8);
	}
	cr_assert_gt(wrapped, 0, "no aborted batch wrapped");
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

/* A detach with a batch claimed aborts it: the end comes without it. */
BATCH_TEST(detach_with_a_claimed_batch_aborts_it, TIMEOUT_S)
{
	static const uint32_t lens[] = { 16, 96, 0 };
	struct lull_producer *p2;
	struct batch bt;
	struct fix f;

	fix_init(&f, b->t, CAP);
	if (b->shared) {
		/* Another producer's record waits behind it, then comes. */
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
		batch_set(&f, &bt, lens, 3);
		batch_hold(&f, b, p2, &bt, WILL_DROP);
		fix_put(&f, BY_WRITE, 11);
		expect_nothing(f.ring);
		cr_assert_eq(lull_producer_detach(p2), 0);
		model_read_expect(&f.m, f.ring, 8, 1);
	}
	fix_put(&f, BY_CLAIM, 12);
	batch_set(&f, &bt, lens, 3);
	batch_hold(&f, b, f.prod, &bt, WILL_DROP);
	/* The last detach: the record, then the poison. */
	fix_fini(&f);
}

/* ========================================================================
 * Shutdown and fatal
 */

BATCH_TEST(graceful_shutdown_delivers_whole_batches_then_the_poison,
	   TIMEOUT_S)
{
	static const uint32_t lens[] = { 8, 64, 0, 120, 33 };
	struct batch held;
	struct fix f;

	fix_init(&f, b->t, CAP);
	advance_to(&f, CAP - 64);
	batch_put_lens(&f, b, lens, 5, false);
	batch_put_lens(&f, b, lens, 3, true);
	/* Claimed before the shutdown: it may still commit. */
	batch_set(&f, &held, lens + 1, 4);
	batch_hold(&f, b, f.prod, &held, WILL_COMMIT);
	model_read_expect(&f.m, f.ring, 2, 2);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(b->write_batch(f.prod, held.recs, 1), -EBUSY);
	model_read_expect(&f.m, f.ring, 16, 6);
	/* Not the poison: the claimed batch comes first. */
	cr_assert_eq(lull_ring_read(f.ring, unexpected_handler, NULL, 16),
		     -EAGAIN);
	batch_commit(b, f.prod, &held);
	cr_assert_eq(b->write_batch(f.prod, held.recs, 2), -EPIPE);
	cr_assert_eq(b->claim_batch(f.prod, held.claims, 2), -EPIPE);
	cr_assert(model_expect_end(&f.m, f.ring));
	fix_close(&f);
}

/*
 * Immediate shutdown: the rest of a batch whose first record(s) the
 * consumer took (by @how) is delivered, what no read began is not.
 */
enum took { BY_READ_1, BY_READ_2, BY_PEEK, BY_PEEK_THEN_SHUT, NOTHING,
	    WHOLE_FIRST, TOOK_WAYS };

static void immediate_after_took(const struct family *b, enum took how)
{
	static const uint32_t lens[] = { 16, 120, 0, 48 };
	struct lull_record rec;
	struct fix f;

	fix_init(&f, b->t, CAP);
	advance_to(&f, CAP - 160);
	batch_put_lens(&f, b, lens, 4, how % 2);
	batch_put_lens(&f, b, lens, 3, !(how % 2));
	fix_put(&f, BY_WRITE, 3);
	switch (how) {
	case BY_READ_1:
	case BY_READ_2:
		model_read_expect(&f.m, f.ring, how == BY_READ_1 ? 1 : 2,
				  how == BY_READ_1 ? 1 : 2);
		break;
	case BY_PEEK:
		model_peek(&f.m, f.ring);
		break;
	case BY_PEEK_THEN_SHUT:
		cr_assert_eq(lull_ring_peek(f.ring, &rec), 0);
		model_check(&f.m, &rec);
		break;
	case WHOLE_FIRST:
		model_read_expect(&f.m, f.ring, 4, 4);
		break;
	default:
		break;
	}
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	if (how == BY_PEEK_THEN_SHUT) {
		cr_assert_eq(lull_ring_release(f.ring), 0);
		model_pop(&f.m);
	}
	/* The second batch and the record after it: never begun. */
	model_forget(&f.m, 4);
	if (how == NOTHING)
		model_forget(&f.m, 4);
	cr_assert(model_expect_end(&f.m, f.ring));
	fix_close(&f);
}

BATCH_TEST(immediate_shutdown_finishes_a_batch_begun_by_a_read, TIMEOUT_S)
{
	immediate_after_took(b, BY_READ_1);
	immediate_after_took(b, BY_READ_2);
}

BATCH_TEST(immediate_shutdown_finishes_a_batch_begun_by_a_peek, TIMEOUT_S)
{
	immediate_after_took(b, BY_PEEK);
	immediate_after_took(b, BY_PEEK_THEN_SHUT);
}

BATCH_TEST(immediate_shutdown_discards_batches_not_begun, TIMEOUT_S)
{
	immediate_after_took(b, NOTHING);
	immediate_after_took(b, WHOLE_FIRST);
}

/* What follows the records at the end: the fatal record, then poison. */
struct fatal_end {
	struct model *m;
	unsigned fatals, poisons;
};

static int fatal_end_handler(const struct lull_record *rec, void *ctx)
{
	struct fatal_end *e = ctx;
	const struct lull_fatal *fatal = rec->data;

	cr_assert_eq(e->poisons, 0, "a record after the poison");
	if (rec->type == LULL_TYPE_FATAL || rec->type == LULL_TYPE_POISON) {
		cr_assert_eq(model_queued(e->m), 0,
			     "type %d came before %u records", rec->type,
			     model_queued(e->m));
		if (rec->type == LULL_TYPE_POISON) {
			cr_assert_eq(e->fatals, 1, "poison before the fatal");
			e->poisons++;
		} else {
			cr_assert_eq(fatal->code, -77);
			cr_assert_str_eq(fatal->message, "batch producer died");
			e->fatals++;
		}
		return LULL_READ_CONTINUE;
	}
	model_check(e->m, rec);
	model_pop(e->m);
	return LULL_READ_CONTINUE;
}

BATCH_TEST(fatal_is_delivered_after_whole_batches, TIMEOUT_S)
{
	static const uint32_t lens[] = { 72, 0, 120 };
	struct fatal_end e = { .m = NULL };
	struct batch held;
	struct fix f;
	int ret;

	fix_init(&f, b->t, CAP);
	e.m = &f.m;
	advance_to(&f, CAP - 96);
	batch_put_lens(&f, b, lens, 3, false);
	model_read_expect(&f.m, f.ring, 1, 1);
	batch_set(&f, &held, lens, 3);
	batch_hold(&f, b, f.prod, &held, WILL_COMMIT);
	cr_assert_eq(lull_ring_fatal(f.ring, -77, "batch producer died"), 0);
	model_read_expect(&f.m, f.ring, 16, 2);
	cr_assert_eq(lull_ring_read(f.ring, unexpected_handler, NULL, 16),
		     -EAGAIN, "the fatal record overtook a claimed batch");
	batch_commit(b, f.prod, &held);
	for (int reads = 0; (ret = lull_ring_read(f.ring, fatal_end_handler,
						  &e, 2)) != -EPIPE;
	     reads++) {
		cr_assert_gt(ret, 0, "read = %d", ret);
		cr_assert_lt(reads, 10);
	}
	cr_assert_eq(e.fatals, 1);
	cr_assert_eq(e.poisons, 1);
	fix_close(&f);
}

/* ========================================================================
 * Producer counters
 */

BATCH_TEST(producer_stats_count_no_retries_without_contention, TIMEOUT_S)
{
	static const uint32_t lens[] = { 8, 120, 40 };
	struct lull_producer_stats st = { .claim_retries = 99 };
	struct fix f;

	fix_init(&f, b->t, CAP);
	cr_assert_eq(lull_producer_stats(NULL, &st), -EINVAL);
	cr_assert_eq(lull_producer_stats(f.prod, NULL), -EINVAL);
	cr_assert_eq(lull_producer_stats(f.prod, &st), 0);
	cr_assert_eq(st.claim_retries, 0);
	for (int round = 0; round < 300; round++) {
		if (batch_put_lens(&f, b, lens, 1 + round % 3, round % 2))
			model_read(&f.m, f.ring, 4);
		fix_put(&f, (enum method)(round % METHODS), 8);
	}
	cr_assert_eq(lull_producer_stats(f.prod, &st), 0);
	cr_assert_eq(st.claim_retries, 0, "%llu retries by one producer",
		     (unsigned long long)st.claim_retries);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}
