/* SPDX-License-Identifier: MIT */
/*
 * test_ring_pacing.c - the Criterion suite of the two rules that pace a
 * stream's reads (ring_read.c), each checked without a clock.
 *
 * The temporal slip: which reads make the next one hold back, for how
 * long, and which end it, read from the consumer handle's state
 * (handles.h).  That a read which holds back still hands out every record,
 * in order, is what every other ring suite checks with the slip on, and
 * test/stress/stress_slip.c under load.
 *
 * The give-back: a read of a ring of one lane with a lap of
 * LULL_GIVE_BACK_MIN_LAP or more ends after the record that reaches a
 * quarter lap past its head, so that the producer refills what was read
 * while the consumer reads the rest; rings of several lanes and small
 * rings read whole laps.  What the producer can write after a read is the
 * space the read gave back.  The model of ring_fix.h holds every other
 * ring suite's reads to the same rule.
 *
 * Here each read's records are counted and checked in sequence.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include <lull.h>

#include "handles.h"
#include "park.h"

#define PACE_CAPACITY (64u * 1024)
#define PACE_PAYLOAD 8u
#define PACE_RECORD 16u /* its header and payload */

struct pace_fix {
	struct lull_ring *ring;
	struct lull_producer *prod;
	unsigned flags;
	uint64_t written, read; /* sequence numbers, one per record */
};

static void pace_init_cap(struct pace_fix *f, unsigned flags, size_t cap)
{
	memset(f, 0, sizeof(*f));
	f->flags = flags;
	cr_assert_eq(lull_ring_create(&f->ring, cap, flags), 0);
	cr_assert_eq(lull_producer_attach(f->ring, 0, &f->prod), 0);
}

static void pace_init(struct pace_fix *f, unsigned flags)
{
	pace_init_cap(f, flags, PACE_CAPACITY);
}

static void pace_fini(struct pace_fix *f)
{
	cr_assert_eq(lull_producer_detach(f->prod), 0);
	cr_assert_eq(lull_ring_destroy(f->ring), 0);
}

/* One record, the next sequence number: 0 or the write's error. */
static int put_one(struct pace_fix *f)
{
	int r = f->flags == LULL_RING_SPSC
			? lull_spsc_write(f->prod, 1, &f->written, PACE_PAYLOAD)
			: lull_mpsc_write(f->prod, 1, &f->written, PACE_PAYLOAD);

	if (r == 0)
		f->written++;
	return r;
}

static void put(struct pace_fix *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int r = put_one(f);

		cr_assert_eq(r, 0, "write %llu: %d",
			     (unsigned long long)f->written, r);
	}
}

struct sink {
	struct pace_fix *f;
	unsigned stop_after; /* LULL_READ_STOP on this record (1-based) */
	unsigned seen;
};

static int in_sequence(const struct lull_record *rec, void *ctx)
{
	struct sink *s = ctx;
	uint64_t seq;

	cr_assert_eq(rec->len, PACE_PAYLOAD);
	memcpy(&seq, rec->data, sizeof(seq));
	cr_assert_eq(seq, s->f->read, "record %llu where %llu was due",
		     (unsigned long long)seq,
		     (unsigned long long)s->f->read);
	s->f->read++;
	return ++s->seen == s->stop_after ? LULL_READ_STOP
					  : LULL_READ_CONTINUE;
}

/* Read up to @limit records, stopping after @stop_after (0: never). */
static int take(struct pace_fix *f, unsigned limit, unsigned stop_after)
{
	struct sink s = { .f = f, .stop_after = stop_after };
	int r = lull_ring_read(f->ring, in_sequence, &s, limit);

	if (r >= 0)
		cr_assert_eq((unsigned)r, s.seen);
	return r;
}

static uint32_t slip_of(const struct pace_fix *f)
{
	return f->ring->slip_ns;
}

/*
 * Short reads in a stream: the first arms the slip, the second sets it to
 * 64 ns, each one after doubles it, up to its bound.
 */
static void raise_to_bound(struct pace_fix *f)
{
	uint32_t want = LULL_SLIP_MIN_NS;

	put(f, 3);
	cr_assert_eq(take(f, 100, 0), 3);
	cr_assert_eq(slip_of(f), 0, "one short read set the slip");
	cr_assert(f->ring->slip_armed);
	for (int i = 0; i < 10; i++) {
		put(f, 3);
		cr_assert_eq(take(f, 100, 0), 3);
		cr_assert_eq(slip_of(f), want, "short read %d: slip %u, not %u",
			     i, slip_of(f), want);
		if (want < LULL_SLIP_MAX_NS)
			want *= 2;
	}
}

static const unsigned topologies[] = {
	LULL_RING_SPSC, LULL_RING_MPSC, LULL_RING_LANES(2),
};
#define EACH_TOPOLOGY(f)                                                  \
	for (unsigned t_ = 0; t_ < sizeof(topologies) / sizeof(*topologies); \
	     t_++)                                                            \
		for (int once_ = (pace_init(&(f), topologies[t_]), 1); once_; \
		     once_ = (pace_fini(&(f)), 0))

Test(slip, short_reads_in_a_stream_double_it_up_to_its_bound, .timeout = 10)
{
	struct pace_fix f;

	EACH_TOPOLOGY(f) {
		cr_assert_eq(slip_of(&f), 0);
		raise_to_bound(&f);
	}
}

Test(slip, a_read_that_finds_nothing_ends_it, .timeout = 10)
{
	struct pace_fix f;

	EACH_TOPOLOGY(f) {
		raise_to_bound(&f);
		cr_assert_eq(take(&f, 100, 0), -EAGAIN);
		cr_assert_eq(slip_of(&f), 0);
		cr_assert(!f.ring->slip_armed);
		/* Lone records: neither their reads nor the empty read after
		 * each holds back. */
		for (int i = 0; i < 4; i++) {
			put(&f, 1);
			cr_assert_eq(take(&f, 100, 0), 1);
			cr_assert_eq(slip_of(&f), 0);
			cr_assert_eq(take(&f, 100, 0), -EAGAIN);
			cr_assert_eq(slip_of(&f), 0);
			cr_assert(!f.ring->slip_armed);
		}
	}
}

Test(slip, a_long_run_halves_it, .timeout = 10)
{
	struct pace_fix f;
	unsigned run = LULL_SLIP_RUN_BYTES / PACE_RECORD;

	EACH_TOPOLOGY(f) {
		raise_to_bound(&f);
		put(&f, run);
		cr_assert_eq(take(&f, run, 0) + 0u, run);
		/* Cut by its limit: the consumer is behind, not caught up. */
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS / 2);
		put(&f, run);
		cr_assert_eq(take(&f, 2 * run, 0) + 0u, run);
		/* Not cut, but long enough. */
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS / 4);
		for (uint32_t s = LULL_SLIP_MAX_NS / 4; s;) {
			put(&f, 4);
			cr_assert_eq(take(&f, 100, 2), 2);
			s = s / 2 >= LULL_SLIP_MIN_NS ? s / 2 : 0;
			cr_assert_eq(slip_of(&f), s,
				     "a read the handler stopped halves it");
			cr_assert_eq(take(&f, 2, 0), 2);
			s = s / 2 >= LULL_SLIP_MIN_NS ? s / 2 : 0;
			cr_assert_eq(slip_of(&f), s,
				     "a read cut by its limit halves it");
		}
		cr_assert_eq(slip_of(&f), 0);
		/* Armed, then a long read: disarmed. */
		put(&f, 3);
		cr_assert_eq(take(&f, 100, 0), 3);
		cr_assert(f.ring->slip_armed);
		put(&f, 4);
		cr_assert_eq(take(&f, 2, 0), 2);
		cr_assert(!f.ring->slip_armed);
		cr_assert_eq(take(&f, 100, 0), 2);
		cr_assert(f.ring->slip_armed);
		cr_assert_eq(slip_of(&f), 0);
	}
}

Test(slip, only_the_adaptive_spin_slips, .timeout = 10)
{
	static const uint64_t spins[] = { 0, 1000, 1000 * 1000 };
	struct lull_park_config cfg = { 0 };
	struct pace_fix f;

	EACH_TOPOLOGY(f) {
		for (size_t i = 0; i < sizeof(spins) / sizeof(*spins); i++) {
			cfg.spin_ns = spins[i];
			cr_assert_eq(lull_ring_park_config(f.ring, &cfg), 0);
			for (int k = 0; k < 4; k++) {
				put(&f, 3);
				cr_assert_eq(take(&f, 100, 0), 3);
				cr_assert_eq(slip_of(&f), 0, "spin_ns %llu",
					     (unsigned long long)spins[i]);
			}
		}
		/* A slip under way ends with the setting. */
		cr_assert_eq(lull_ring_park_config(f.ring, NULL), 0);
		raise_to_bound(&f);
		cfg.spin_ns = 0;
		cr_assert_eq(lull_ring_park_config(f.ring, &cfg), 0);
		cr_assert_eq(slip_of(&f), 0);
		cr_assert(!f.ring->slip_armed);
	}
}

/*
 * On a lane smaller than four runs, a quarter of it is a long run: what
 * the producers write during a slip must never fill the ring.
 */
Test(slip, a_quarter_of_a_small_ring_is_a_long_run, .timeout = 10)
{
	const size_t cap = 4096;
	const unsigned quarter = cap / 4 / PACE_RECORD;
	struct pace_fix f;

	for (unsigned t = 0; t < sizeof(topologies) / sizeof(*topologies);
	     t++) {
		pace_init_cap(&f, topologies[t], cap);
		raise_to_bound(&f);
		put(&f, quarter - 1);
		cr_assert_eq(take(&f, 1000, 0) + 0u, quarter - 1);
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS,
			     "a run under a quarter is short");
		put(&f, quarter);
		cr_assert_eq(take(&f, 1000, 0) + 0u, quarter);
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS / 2,
			     "a quarter of the ring is a long run");
		pace_fini(&f);
	}
}

/* ------------------------------------------------------------------------
 * The give-back
 */

/* Write until the ring is full; returns how many records went in. */
static unsigned fill(struct pace_fix *f)
{
	unsigned n = 0;
	int r;

	while ((r = put_one(f)) == 0)
		n++;
	cr_assert_eq(r, -EAGAIN, "write %u: %d", n, r);
	return n;
}

/* One read with a limit far above a lap of records. */
static int take_all(struct pace_fix *f)
{
	return take(f, 1u << 24, 0);
}

/* The records of a quarter lap from a head at a record's start. */
static unsigned quarter_records(size_t cap)
{
	return (unsigned)((cap / 4 + PACE_RECORD - 1) / PACE_RECORD);
}

/*
 * A full ring of one lane: each read ends after the record that reaches a
 * quarter lap, and the producer can write as many records again at once.
 * The head starts at 0, and every record takes PACE_RECORD bytes until the
 * lap's end, where a padding may take the rest: the first read's count is
 * exact, later ones are checked against the space they gave back.
 */
static void gives_back_every_quarter(unsigned flags, size_t cap)
{
	struct pace_fix f;
	unsigned full, refill, left, reads = 0;
	int r;

	pace_init_cap(&f, flags, cap);
	full = fill(&f);
	cr_assert_gt(full, 4 * quarter_records(cap) - 4);
	r = take_all(&f);
	cr_assert_eq(r, (int)quarter_records(cap),
		     "a full ring's first read took %d records, not %u", r,
		     quarter_records(cap));
	/*
	 * Its space is the producer's again before the rest is read (less a
	 * record's room at most, for the padding at the lap's end).
	 */
	refill = fill(&f);
	cr_assert(refill == (unsigned)r || refill + 1 == (unsigned)r,
		  "%u records fit after the read of %d", refill, r);
	/* The rest, a quarter lap at a time; nothing lost, none twice. */
	left = full + refill - (unsigned)r;
	while ((r = take_all(&f)) > 0) {
		cr_assert_leq(r, (int)quarter_records(cap) + 1,
			      "read %u took %d records", reads, r);
		reads++;
	}
	cr_assert_eq(r, -EAGAIN);
	cr_assert_eq(f.read, f.written);
	cr_assert_geq(reads, left / (quarter_records(cap) + 1),
		      "%u records read in %u reads", left, reads);
	pace_fini(&f);
}

Test(give_back, spsc_reads_end_every_quarter_lap, .timeout = 10)
{
	gives_back_every_quarter(LULL_RING_SPSC, LULL_GIVE_BACK_MIN_LAP);
	gives_back_every_quarter(LULL_RING_SPSC, 1u << 20);
}

Test(give_back, mpsc_reads_end_every_quarter_lap, .timeout = 10)
{
	gives_back_every_quarter(LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP);
	gives_back_every_quarter(LULL_RING_MPSC, 1u << 20);
}

Test(give_back, one_lane_lanes_ring_reads_end_every_quarter_lap,
     .timeout = 10)
{
	gives_back_every_quarter(LULL_RING_LANES(1), LULL_GIVE_BACK_MIN_LAP);
}

/*
 * Arrays of ARRAY_ITEMS records, each packed into one record (an 8-byte
 * array header, then the items): the read hands out their items one by
 * one and ends after the array that reaches the quarter lap.
 */
#define ARRAY_ITEMS 32u
#define ARRAY_RECORD \
	((LULL_RECORD_HEADER_SIZE + 8 + ARRAY_ITEMS * PACE_PAYLOAD + 7) / 8 * 8)

static void arrays_give_back(unsigned flags)
{
	uint64_t items[ARRAY_ITEMS];
	unsigned arrays = 0, quarter;
	struct pace_fix f;
	int r;

	pace_init_cap(&f, flags, LULL_GIVE_BACK_MIN_LAP);
	for (;;) {
		for (unsigned i = 0; i < ARRAY_ITEMS; i++)
			items[i] = f.written + i;
		r = flags == LULL_RING_MPSC
			    ? lull_mpsc_write_array(f.prod, 1, items,
						    PACE_PAYLOAD, ARRAY_ITEMS)
			    : lull_spsc_write_array(f.prod, 1, items,
						    PACE_PAYLOAD, ARRAY_ITEMS);
		if (r)
			break;
		f.written += ARRAY_ITEMS;
		arrays++;
	}
	cr_assert_eq(r, -EAGAIN);
	quarter = (LULL_GIVE_BACK_MIN_LAP / 4 + ARRAY_RECORD - 1) / ARRAY_RECORD;
	cr_assert_gt(arrays, quarter);
	r = take_all(&f);
	cr_assert_eq(r, (int)(quarter * ARRAY_ITEMS),
		     "the first read took %d items, not the %u arrays' %u", r,
		     quarter, quarter * ARRAY_ITEMS);
	while ((r = take_all(&f)) > 0)
		;
	cr_assert_eq(r, -EAGAIN);
	cr_assert_eq(f.read, f.written);
	pace_fini(&f);
}

Test(give_back, arrays_end_a_read_at_the_quarter_too, .timeout = 10)
{
	arrays_give_back(LULL_RING_SPSC);
	arrays_give_back(LULL_RING_MPSC);
}

/*
 * The test comes after each record handed out: a padding (an aborted MPSC
 * claim) from below the quarter to past it does not end the read, the
 * record behind it does.
 */
Test(give_back, a_read_ends_after_the_record_that_reaches_the_quarter,
     .timeout = 10)
{
	unsigned below = LULL_GIVE_BACK_MIN_LAP / 4 / PACE_RECORD - 1;
	struct pace_fix f;
	void *data;

	pace_init_cap(&f, LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP);
	put(&f, below); /* they end a record short of the quarter */
	cr_assert_eq(lull_mpsc_claim(f.prod, 1, 4 * PACE_RECORD, &data), 0);
	cr_assert_eq(lull_mpsc_abort(f.prod), 0);
	put(&f, 2);
	cr_assert_eq(take_all(&f), (int)below + 1);
	cr_assert_eq(take_all(&f), 1);
	cr_assert_eq(take_all(&f), -EAGAIN);
	pace_fini(&f);
}

/* A full ring whose read takes the whole lap at once. */
static void reads_whole_lap(unsigned flags, size_t cap)
{
	struct pace_fix f;
	unsigned full;

	pace_init_cap(&f, flags, cap);
	full = fill(&f);
	cr_assert_eq(take_all(&f), (int)full, "a lap of %u records in one read",
		     full);
	cr_assert_eq(take_all(&f), -EAGAIN);
	pace_fini(&f);
}

Test(give_back, small_rings_read_whole_laps, .timeout = 10)
{
	reads_whole_lap(LULL_RING_SPSC, LULL_GIVE_BACK_MIN_LAP / 2);
	reads_whole_lap(LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP / 2);
}

/*
 * Several lanes: the others are read while one lane's producer writes, so
 * a lane is read a lap at a time (one producer here, in lane 0).
 */
Test(give_back, lanes_rings_read_whole_laps, .timeout = 10)
{
	reads_whole_lap(LULL_RING_LANES(2), LULL_GIVE_BACK_MIN_LAP);
}

/*
 * An aborted MPSC claim leaves a padding; paddings past a quarter lap at
 * the head must not end the read before the record behind them, or the
 * read would say "empty" with a record committed (and its caller park).
 * A record is an eighth of the lap at most: three of the largest make it.
 */
Test(give_back, paddings_past_the_quarter_never_end_a_read_empty, .timeout = 10)
{
	struct pace_fix f;
	ssize_t max;
	void *data;

	pace_init_cap(&f, LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP);
	max = lull_ring_max_payload(f.ring);
	cr_assert_gt(max, 0);
	cr_assert_gt(3 * (size_t)max, LULL_GIVE_BACK_MIN_LAP / 4);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_mpsc_claim(f.prod, 1, (size_t)max, &data), 0);
		cr_assert_eq(lull_mpsc_abort(f.prod), 0);
	}
	cr_assert_eq(put_one(&f), 0);
	cr_assert_eq(take_all(&f), 1);
	cr_assert_eq(take_all(&f), -EAGAIN);
	pace_fini(&f);
}
