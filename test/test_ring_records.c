/* SPDX-License-Identifier: MIT */
/*
 * test_ring_records.c - the Criterion suite of lull/ring.h: records: round
 * trips of every size and shape, types, a full ring, wrapping with padding
 * at every offset, random sequences, earlier laps' bytes never read as
 * records, a ring filled exactly.
 * The fixture (struct model, struct fix, TOPO_TEST) is ring_fix.h.
 */
#include "ring_fix.h"

/* ========================================================================
 * Records: round trips, types, sizes
 */

static void every_payload_size(const struct topo *t, enum method how)
{
	struct fix f;
	size_t len;
	unsigned tries;

	fix_init(&f, t, 4096);
	/* One at a time... */
	for (len = 0; len <= f.max; len++) {
		cr_assert_eq(fix_put(&f, how, len), 0, "%zu bytes", len);
		model_read(&f.m, f.ring, 1);
	}
	/* ...and with the ring kept full, so records of every size wrap. */
	for (len = 0; len <= f.max; len++) {
		for (tries = 0; fix_put(&f, how, len) == -EAGAIN; tries++) {
			cr_assert_lt(tries, 4096u);
			model_read(&f.m, f.ring, 1);
		}
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(write_round_trips_every_payload_size, 10)
{
	every_payload_size(t, BY_WRITE);
}

TOPO_TEST(writev_round_trips_every_payload_size, 10)
{
	every_payload_size(t, BY_WRITEV);
}

TOPO_TEST(claim_round_trips_every_payload_size, 10)
{
	every_payload_size(t, BY_CLAIM);
}

/* The largest record of big rings, and one byte more. */
static void largest_records(const struct topo *t)
{
	static const size_t caps[] = { 1u << 16, 1u << 20 };
	struct fix f;
	size_t i;
	int how;

	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		fix_init(&f, t, caps[i]);
		for (how = 0; how < METHODS; how++) {
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 1, 1), -EMSGSIZE,
				     "%s of max + 1 bytes", method_name[how]);
			fix_feed(&f, f.ring, (enum method)how, f.max);
			fix_feed(&f, f.ring, (enum method)how, f.max - 1);
		}
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

TOPO_TEST(largest_records_round_trip_on_big_rings, 10)
{
	largest_records(t);
}

/* writev: no entries, many entries, empty entries. */
static void writev_shapes(const struct topo *t)
{
	struct iovec iov[64];
	struct model *m;
	struct fix f;
	uint32_t seed;
	int i;

	fix_init(&f, t, 4096);
	m = &f.m;
	cr_assert_eq(t->writev(f.prod, 3, iov, 0), 0, "iovcnt 0");
	model_push(m, 3, 0, 0);
	/* 64 one-byte pieces make one 64-byte record. */
	seed = ++m->seed;
	pattern_fill(payload_buf, 64, seed);
	for (i = 0; i < 64; i++)
		iov[i] = (struct iovec){ payload_buf + i, 1 };
	cr_assert_eq(t->writev(f.prod, 4, iov, 64), 0);
	model_push(m, 4, 64, seed);
	/* Empty pieces around the data. */
	seed = ++m->seed;
	pattern_fill(payload_buf, 100, seed);
	iov[0] = (struct iovec){ payload_buf, 0 };
	iov[1] = (struct iovec){ payload_buf, 100 };
	iov[2] = (struct iovec){ payload_buf + 100, 0 };
	cr_assert_eq(t->writev(f.prod, 5, iov, 3), 0);
	model_push(m, 5, 100, seed);
	model_drain(m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(writev_gathers_any_number_of_pieces, 10)
{
	writev_shapes(t);
}

/* Only @len > 0 with NULL @data is an error. */
static void null_data_of_zero_bytes(const struct topo *t)
{
	struct fix f;

	fix_init(&f, t, 256);
	cr_assert_eq(t->write(f.prod, 6, NULL, 1), -EINVAL);
	expect_nothing(f.ring);
	cr_assert_eq(t->write(f.prod, 6, NULL, 0), 0, "NULL data, 0 bytes");
	model_push(&f.m, 6, 0, 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(write_of_zero_bytes_accepts_null_data, 10)
{
	null_data_of_zero_bytes(t);
}

static void reserved_types(const struct topo *t)
{
	static const int32_t bad[] = { LULL_TYPE_PADDING, -1, -2, INT32_MIN };
	struct fix f;
	size_t i;
	int how;

	fix_init(&f, t, 256);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (how = 0; how < METHODS; how++)
			cr_assert_eq(put(t, f.prod, (enum method)how, bad[i],
					 8, 1), -EINVAL, "%s of type %d",
				     method_name[how], (int)bad[i]);
	expect_nothing(f.ring);
	/* The bounds of the user range are fine. */
	for (how = 0; how < METHODS; how++) {
		f.m.seed++;
		cr_assert_eq(put(t, f.prod, (enum method)how, 1, 8, f.m.seed),
			     0);
		model_push(&f.m, 1, 8, f.m.seed);
		f.m.seed++;
		cr_assert_eq(put(t, f.prod, (enum method)how, LULL_TYPE_MAX,
				 8, f.m.seed), 0);
		model_push(&f.m, LULL_TYPE_MAX, 8, f.m.seed);
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(reserved_types_are_einval, 10)
{
	reserved_types(t);
}

static void oversized(const struct topo *t)
{
	static const size_t caps[] = { 256, 4096 };
	struct iovec iov[2];
	void *dst;
	struct fix f;
	size_t i;
	int how;

	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		fix_init(&f, t, caps[i]);
		for (how = 0; how < METHODS; how++) {
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 1, 1), -EMSGSIZE);
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 8, 1), -EMSGSIZE);
		}
		cr_assert_eq(t->write(f.prod, 1, payload_buf, SIZE_MAX),
			     -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, SIZE_MAX, &dst), -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, (size_t)UINT32_MAX + 1, &dst),
			     -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, (size_t)INT32_MAX, &dst),
			     -EMSGSIZE);
		/* Pieces that each fit but not together. */
		iov[0] = (struct iovec){ payload_buf, f.max };
		iov[1] = (struct iovec){ payload_buf, 1 };
		cr_assert_eq(t->writev(f.prod, 1, iov, 2), -EMSGSIZE);
		/* Pieces whose sum wraps around to 0. */
		iov[0] = (struct iovec){ payload_buf, SIZE_MAX / 2 + 1 };
		iov[1] = (struct iovec){ payload_buf, SIZE_MAX / 2 + 1 };
		cr_assert_eq(t->writev(f.prod, 1, iov, 2), -EMSGSIZE);
		cr_assert_eq(t->commit(f.prod), -EINVAL);
		expect_nothing(f.ring);
		fix_put(&f, BY_WRITEV, f.max);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

TOPO_TEST(oversized_records_are_emsgsize, 10)
{
	oversized(t);
}

/* ========================================================================
 * Full ring
 */

static void full_ring(const struct topo *t)
{
	struct fix f;
	size_t len;
	int i, n;

	/* 32-byte records: 8 of them fill the 256 bytes exactly. */
	fix_init(&f, t, 256);
	for (i = 0; i < 8; i++)
		cr_assert_eq(fix_put(&f, (enum method)(i % METHODS), 24), 0,
			     "record %d of 8", i);
	/* No way of writing gets in, not even the smallest record. */
	for (i = 0; i < METHODS; i++) {
		cr_assert_eq(fix_put(&f, (enum method)i, 24), -EAGAIN);
		cr_assert_eq(fix_put(&f, (enum method)i, 0), -EAGAIN);
	}
	/* One read makes room for one record, no more. */
	model_read(&f.m, f.ring, 1);
	cr_assert_eq(fix_put(&f, BY_CLAIM, 24), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 0), -EAGAIN);
	/* Exactly the accepted records come out, whole. */
	model_drain(&f.m, f.ring);
	fix_fini(&f);

	/* Every size: fill a fresh ring, read one, write one more. */
	for (len = 0; len <= 24; len++) {
		fix_init(&f, t, 256);
		for (n = 0; fix_put(&f, (enum method)(n % METHODS), len) == 0;
		     n++)
			cr_assert_leq(n, 32);
		cr_assert_eq(n, (int)(256 / rec_space(len)),
			     "%d records of %zu bytes fit in 256", n, len);
		model_read(&f.m, f.ring, 1);
		cr_assert_eq(fix_put(&f, (enum method)(len % METHODS), len),
			     0, "after a read, %zu bytes", len);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

TOPO_TEST(full_ring_is_eagain_until_a_read, 10)
{
	full_ring(t);
}

/* ========================================================================
 * Wrapping: padding at every offset
 */

/* Write and read filler records until the ring is at offset @to. */
static void advance_to(struct fix *f, size_t to)
{
	size_t left = to, chunk, most = f->m.cap / 8;

	while (left) {
		chunk = left < most ? left : most;
		cr_assert_eq(fix_put(f, BY_WRITE,
				     chunk - LULL_RECORD_HEADER_SIZE), 0);
		model_read(&f->m, f->ring, 1);
		left -= chunk;
	}
	cr_assert_eq(f->m.wpos & (f->m.cap - 1), to);
}

static const size_t wrap_sizes[] = {
	~(size_t)0, 0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 40, 47, 56,
};

#define NWRAP_SIZES (sizeof(wrap_sizes) / sizeof(wrap_sizes[0]))

/* Sizes from wrap_sizes, capped at the largest payload (~0 is that). */
static size_t wrap_size(const struct fix *f, unsigned i)
{
	size_t len = wrap_sizes[i % NWRAP_SIZES];

	return len > f->max ? f->max : len;
}

/*
 * Fill the ring until a record does not fit, then try a small one; with
 * @aborts, every fourth record is a claim that is aborted.
 */
static void fill_ring(struct fix *f, unsigned salt, bool aborts)
{
	unsigned i;
	size_t len;
	int ret;

	for (i = 0;; i++) {
		cr_assert_lt(i, 1000u);
		len = wrap_size(f, i * 7 + salt);
		if (aborts && i % 4 == 3)
			ret = fix_claim_abort(f, len);
		else
			ret = fix_put(f, (enum method)((i + salt) % METHODS),
				      len);
		if (ret == -EAGAIN)
			break;
	}
	fix_put(f, BY_WRITE, 0);
}

static void wrap_everywhere(const struct topo *t, bool aborts)
{
	static const size_t caps[] = { 256, 512 };
	struct fix f;
	size_t c, to;
	unsigned round;

	for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		for (to = 0; to < caps[c]; to += LULL_RECORD_ALIGN) {
			fix_init(&f, t, caps[c]);
			advance_to(&f, to);
			/* The largest record first: near the end it wraps. */
			if (aborts)
				fix_claim_abort(&f, f.max);
			fix_put(&f, (enum method)(to / 8 % METHODS), f.max);
			for (round = 0; round < 4; round++) {
				fill_ring(&f, (unsigned)to / 8 + round, aborts);
				model_drain_mixed(&f.m, f.ring, round);
			}
			fix_fini(&f);
		}
	}
}

TOPO_TEST(records_wrap_with_padding_at_every_offset, 10)
{
	wrap_everywhere(t, false);
}

Test(spsc, aborts_at_every_offset_leave_nothing, .timeout = 10)
{
	wrap_everywhere(&topo_spsc, true);
}

Test(mpsc, aborts_at_every_offset_are_skipped, .timeout = 10)
{
	wrap_everywhere(&topo_mpsc, true);
}

/* One read with a large limit takes everything, and only that, once. */
static void one_read_drains_full_ring(const struct topo *t)
{
	static const size_t starts[] = { 0, 8, 100, 200, 248 };
	static const size_t lens[] = { 24, 0, 16, 5 };
	struct fix f;
	size_t i, j;

	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			fix_init(&f, t, 256);
			advance_to(&f, starts[i] & ~(size_t)7);
			while (fix_put(&f, BY_WRITE, lens[j]) == 0)
				;
			model_read_expect(&f.m, f.ring, 1000,
					  (int)model_queued(&f.m));
			model_read_expect(&f.m, f.ring, 1000, -EAGAIN);
			/* And the ring is whole: it fills and drains again. */
			while (fix_put(&f, BY_CLAIM, lens[j]) == 0)
				;
			model_read_expect(&f.m, f.ring, UINT_MAX,
					  (int)model_queued(&f.m));
			fix_fini(&f);
		}
	}
}

TOPO_TEST(one_read_drains_a_full_ring, 10)
{
	one_read_drains_full_ring(t);
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A long random mix of every producer and consumer call. */
static void random_sequence(const struct topo *t, size_t cap, uint64_t x)
{
	struct fix f;
	uint64_t r;
	size_t len;
	unsigned i;

	fix_init(&f, t, cap);
	for (i = 0; i < 40000; i++) {
		r = xorshift(&x);
		if ((r >> 8) % 8 == 0)
			len = f.max - (size_t)(r >> 16) % 9;
		else
			len = (size_t)(r >> 16) % (f.max + 1);
		switch (r % 10) {
		case 0:
		case 1:
		case 2:
		case 3:
			fix_put(&f, (enum method)((r >> 40) % METHODS), len);
			break;
		case 4:
			fix_claim_abort(&f, len);
			break;
		case 5:
			model_peek(&f.m, f.ring);
			break;
		default:
			model_read(&f.m, f.ring, (unsigned)(r >> 40) % 6 + 1);
			break;
		}
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, long_random_sequence_round_trips, .timeout = 10)
{
	random_sequence(&topo_spsc, 256, 0x9e3779b97f4a7c15ull);
	random_sequence(&topo_spsc, 2048, 0x2545f4914f6cdd1dull);
}

Test(mpsc, long_random_sequence_round_trips, .timeout = 10)
{
	random_sequence(&topo_mpsc, 256, 0x9e3779b97f4a7c15ull);
	random_sequence(&topo_mpsc, 2048, 0x2545f4914f6cdd1dull);
}

/* ========================================================================
 * What earlier laps leave in the free space is never read as a record
 */

#define LOOKALIKE_TYPE 7
#define PROBE_TYPE 9
#define LAP_QUEUE 256u

/* The records written and not read yet, in order, and the read's check. */
struct lap_check {
	int32_t type[LAP_QUEUE];
	uint32_t len[LAP_QUEUE];
	unsigned head, tail;
};

static int lap_handler(const struct lull_record *rec, void *ctx)
{
	struct lap_check *c = ctx;
	unsigned i = c->head % LAP_QUEUE;

	cr_assert_lt(c->head, c->tail,
		     "a record nobody wrote (type %d, %u bytes) was handed out",
		     (int)rec->type, (unsigned)rec->len);
	cr_assert_eq(rec->type, c->type[i], "record %u: type %d, expected %d",
		     c->head, (int)rec->type, (int)c->type[i]);
	cr_assert_eq(rec->len, c->len[i], "record %u: %u bytes, expected %u",
		     c->head, (unsigned)rec->len, (unsigned)c->len[i]);
	c->head++;
	return LULL_READ_CONTINUE;
}

/* Everything written comes in @limit-sized reads, then nothing. */
static void lap_drain(struct lull_ring *ring, struct lap_check *c,
		      unsigned limit)
{
	int ret;

	while (c->head != c->tail) {
		ret = lull_ring_read(ring, lap_handler, c, limit);
		cr_assert_gt(ret, 0, "read = %d with %u records unread", ret,
			     c->tail - c->head);
	}
	cr_assert_eq(lull_ring_read(ring, lap_handler, c, limit), -EAGAIN);
}

/*
 * Write @count (1 or 2) records of @type and @len bytes, every 8-byte word
 * of their payloads a valid-looking header ({16, LOOKALIKE_TYPE}), by one
 * of six calls (@how); returns the call's result.
 */
static int lap_write(struct lull_producer *p, bool mpsc, unsigned how,
		     int32_t type, size_t len, struct lap_check *c)
{
	static const int32_t lookalike[2] = { 16, LOOKALIKE_TYPE };
	unsigned char buf[2 * 64];
	struct lull_record recs[2] = {
		{ .data = buf, .len = (uint32_t)len, .type = type },
		{ .data = buf + len, .len = (uint32_t)len, .type = type },
	};
	struct lull_claim claims[2] = { { .len = (uint32_t)len, .type = type },
					{ .len = (uint32_t)len, .type = type } };
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	unsigned count = how >= 3 ? 2 : 1;
	void *data;
	int ret;

	cr_assert_leq(len, 64u);
	for (size_t i = 0; i < sizeof(buf); i += 8)
		memcpy(buf + i, lookalike, 8);
	switch (how) {
	case 0:
		ret = (mpsc ? lull_mpsc_write : lull_spsc_write)(p, type, buf,
								 len);
		break;
	case 1:
		ret = (mpsc ? lull_mpsc_writev : lull_spsc_writev)(p, type,
								   &iov, 1);
		break;
	case 2:
		ret = (mpsc ? lull_mpsc_claim : lull_spsc_claim)(p, type, len,
								 &data);
		if (ret == 0) {
			memcpy(data, buf, len);
			ret = (mpsc ? lull_mpsc_commit : lull_spsc_commit)(p);
		}
		break;
	case 3:
		ret = (mpsc ? lull_mpsc_write_batch
			    : lull_spsc_write_batch)(p, recs, 2);
		break;
	case 4: /* packed into one record when len is a multiple of 8 */
		ret = (mpsc ? lull_mpsc_write_array
			    : lull_spsc_write_array)(p, type, buf, len, 2);
		break;
	default:
		ret = (mpsc ? lull_mpsc_claim_batch
			    : lull_spsc_claim_batch)(p, claims, 2);
		if (ret == 0) {
			memcpy(claims[0].data, buf, len);
			memcpy(claims[1].data, buf, len);
			ret = (mpsc ? lull_mpsc_commit : lull_spsc_commit)(p);
		}
		break;
	}
	for (unsigned i = 0; ret == 0 && i < count; i++) {
		cr_assert_lt(c->tail - c->head, LAP_QUEUE);
		c->type[c->tail % LAP_QUEUE] = type;
		c->len[c->tail % LAP_QUEUE] = (uint32_t)len;
		c->tail++;
	}
	return ret;
}

/* lap_write(), reading everything first when the ring is full. */
static void lap_put(struct lull_ring *ring, struct lull_producer *p,
		    bool mpsc, unsigned how, int32_t type, size_t len,
		    struct lap_check *c)
{
	int ret = lap_write(p, mpsc, how, type, len, c);

	if (ret == -EAGAIN) {
		lap_drain(ring, c, 1000);
		ret = lap_write(p, mpsc, how, type, len, c);
	}
	cr_assert_eq(ret, 0, "write %u of %zu bytes = %d", how, len, ret);
}

/*
 * Records whose payloads look like headers fill the free space lap after
 * lap; records of other sizes (0 to 40 bytes, from a fixed random
 * sequence) then end inside them, anywhere in the ring.  A read must hand
 * out what was written and then find nothing: the length where the
 * records end reads "not written", whoever wrote there before.
 */
static void stale_laps(unsigned flags, bool mpsc)
{
	struct lull_producer *p;
	struct lull_ring *ring;
	struct lap_check c = { .head = 0 };
	uint64_t x = 0x9e3779b97f4a7c15ull, r;

	/* The largest record is an eighth: 128 bytes. */
	cr_assert_eq(lull_ring_create(&ring, 1024, flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	for (unsigned i = 0; i < 3000; i++) {
		r = xorshift(&x);
		lap_put(ring, p, mpsc, i % 6, LOOKALIKE_TYPE,
			8 * (1 + (size_t)(r >> 8) % 8), &c);
		lap_put(ring, p, mpsc, (i / 6) % 6, PROBE_TYPE,
			(size_t)(r >> 16) % 41, &c);
		if ((r >> 32) % 3 == 0)
			lap_drain(ring, &c, 1 + (unsigned)(r >> 40) % 4);
	}
	lap_drain(ring, &c, 1000);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(earlier_laps_bytes_never_read_as_records, 10)
{
	stale_laps(t->flags, topo_is_mpsc(t));
}

Test(lanes, earlier_laps_bytes_never_read_as_records, .timeout = 10)
{
	stale_laps(LULL_RING_LANES(2), false);
	stale_laps(LULL_RING_LANES(2), true);
}

/*
 * A ring filled exactly, from every start, drained in reads of @limit:
 * where the last record ends is where the first began, a header the
 * producer could not clear; the read that moved past it must have.
 */
static void exactly_full(unsigned flags, bool mpsc, unsigned limit)
{
	struct lull_producer *p;
	struct lull_ring *ring;
	struct lap_check c = { .head = 0 };

	cr_assert_eq(lull_ring_create(&ring, 256, flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	for (unsigned start = 0; start < 256; start += 8) {
		/* 32 empty records, a header each, take the 256 exactly. */
		for (unsigned i = 0; i < 32; i++)
			cr_assert_eq(lap_write(p, mpsc, i % 3, LOOKALIKE_TYPE,
					       0, &c),
				     0, "start %u, record %u", start, i);
		cr_assert_eq(lap_write(p, mpsc, 0, PROBE_TYPE, 0, &c),
			     -EAGAIN, "start %u: the ring is not full", start);
		lap_drain(ring, &c, limit);
		/* Move the start on by one record. */
		cr_assert_eq(lap_write(p, mpsc, 0, PROBE_TYPE, 0, &c), 0);
		lap_drain(ring, &c, limit);
	}
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(exactly_full_ring_drains_to_nothing, 10)
{
	exactly_full(t->flags, topo_is_mpsc(t), 1000);
	exactly_full(t->flags, topo_is_mpsc(t), 5);
}

Test(lanes, exactly_full_lane_drains_to_nothing, .timeout = 10)
{
	exactly_full(LULL_RING_LANES(2), false, 1000);
	exactly_full(LULL_RING_LANES(2), false, 5);
}
