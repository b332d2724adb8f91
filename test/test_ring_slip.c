/* SPDX-License-Identifier: MIT */
/*
 * test_ring_slip.c - the Criterion suite of the temporal slip of the reads
 * (ring_read.c): which reads make the next one hold back, for how long, and
 * which end it, read from the consumer handle's state (handles.h), never
 * timed.  That a read which holds back still hands out every record, in
 * order, is what every other ring suite checks with the slip on, and
 * test/stress/stress_slip.c under load; here each read's records are
 * counted and checked in sequence.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include <lull.h>

#include "handles.h"
#include "park.h"

#define SLIP_CAPACITY (64u * 1024)
#define SLIP_PAYLOAD 8u
#define SLIP_RECORD 16u /* its header and payload */

struct slip_fix {
	struct lull_ring *ring;
	struct lull_producer *prod;
	unsigned flags;
	uint64_t written, read; /* sequence numbers, one per record */
};

static void slip_init_cap(struct slip_fix *f, unsigned flags, size_t cap)
{
	memset(f, 0, sizeof(*f));
	f->flags = flags;
	cr_assert_eq(lull_ring_create(&f->ring, cap, flags), 0);
	cr_assert_eq(lull_producer_attach(f->ring, 0, &f->prod), 0);
}

static void slip_init(struct slip_fix *f, unsigned flags)
{
	slip_init_cap(f, flags, SLIP_CAPACITY);
}

static void slip_fini(struct slip_fix *f)
{
	cr_assert_eq(lull_producer_detach(f->prod), 0);
	cr_assert_eq(lull_ring_destroy(f->ring), 0);
}

static void put(struct slip_fix *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++, f->written++) {
		int r = f->flags == LULL_RING_SPSC
				? lull_spsc_write(f->prod, 1, &f->written,
						  SLIP_PAYLOAD)
				: lull_mpsc_write(f->prod, 1, &f->written,
						  SLIP_PAYLOAD);
		cr_assert_eq(r, 0, "write %llu: %d",
			     (unsigned long long)f->written, r);
	}
}

struct sink {
	struct slip_fix *f;
	unsigned stop_after; /* LULL_READ_STOP on this record (1-based) */
	unsigned seen;
};

static int in_sequence(const struct lull_record *rec, void *ctx)
{
	struct sink *s = ctx;
	uint64_t seq;

	cr_assert_eq(rec->len, SLIP_PAYLOAD);
	memcpy(&seq, rec->data, sizeof(seq));
	cr_assert_eq(seq, s->f->read, "record %llu where %llu was due",
		     (unsigned long long)seq,
		     (unsigned long long)s->f->read);
	s->f->read++;
	return ++s->seen == s->stop_after ? LULL_READ_STOP
					  : LULL_READ_CONTINUE;
}

/* Read up to @limit records, stopping after @stop_after (0: never). */
static int take(struct slip_fix *f, unsigned limit, unsigned stop_after)
{
	struct sink s = { .f = f, .stop_after = stop_after };
	int r = lull_ring_read(f->ring, in_sequence, &s, limit);

	if (r >= 0)
		cr_assert_eq((unsigned)r, s.seen);
	return r;
}

static uint32_t slip_of(const struct slip_fix *f)
{
	return f->ring->slip_ns;
}

/*
 * Short reads in a stream: the first arms the slip, the second sets it to
 * 64 ns, each one after doubles it, up to its bound.
 */
static void raise_to_bound(struct slip_fix *f)
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
		for (int once_ = (slip_init(&(f), topologies[t_]), 1); once_; \
		     once_ = (slip_fini(&(f)), 0))

Test(slip, short_reads_in_a_stream_double_it_up_to_its_bound, .timeout = 10)
{
	struct slip_fix f;

	EACH_TOPOLOGY(f) {
		cr_assert_eq(slip_of(&f), 0);
		raise_to_bound(&f);
	}
}

Test(slip, a_read_that_finds_nothing_ends_it, .timeout = 10)
{
	struct slip_fix f;

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
	struct slip_fix f;
	unsigned run = LULL_SLIP_RUN_BYTES / SLIP_RECORD;

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
	struct slip_fix f;

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
	const unsigned quarter = cap / 4 / SLIP_RECORD;
	struct slip_fix f;

	for (unsigned t = 0; t < sizeof(topologies) / sizeof(*topologies);
	     t++) {
		slip_init_cap(&f, topologies[t], cap);
		raise_to_bound(&f);
		put(&f, quarter - 1);
		cr_assert_eq(take(&f, 1000, 0) + 0u, quarter - 1);
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS,
			     "a run under a quarter is short");
		put(&f, quarter);
		cr_assert_eq(take(&f, 1000, 0) + 0u, quarter);
		cr_assert_eq(slip_of(&f), LULL_SLIP_MAX_NS / 2,
			     "a quarter of the ring is a long run");
		slip_fini(&f);
	}
}
