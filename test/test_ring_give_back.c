/* SPDX-License-Identifier: MIT */
/*
 * test_ring_give_back.c - the Criterion suite of a long read's give-back
 * (give_back_at() in ring_read.c): a read of a ring of one lane with a lap
 * of LULL_GIVE_BACK_MIN_LAP or more starts no record a quarter lap past
 * its head once it handed one, and publishes the head there, so that the
 * producer refills what was read while the consumer reads the rest.  Rings
 * of several lanes and small rings read whole laps.  Every record is
 * checked in sequence; what the producer can write after each read is
 * the space the read gave back.  The model of ring_fix.h holds every other
 * ring suite's reads to the same rule.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <criterion/criterion.h>

#include <lull.h>

#include "park.h"

#define GB_PAYLOAD 8u
/* A record: its header and payload, 8-byte aligned. */
#define GB_RECORD ((LULL_RECORD_HEADER_SIZE + GB_PAYLOAD + 7) / 8 * 8)

struct gb_fix {
	struct lull_ring *ring;
	struct lull_producer *prod;
	unsigned flags;
	uint64_t written, read; /* sequence numbers, one per record */
};

static void gb_init(struct gb_fix *f, unsigned flags, size_t cap)
{
	memset(f, 0, sizeof(*f));
	f->flags = flags;
	cr_assert_eq(lull_ring_create(&f->ring, cap, flags), 0);
	cr_assert_eq(lull_producer_attach(f->ring, 0, &f->prod), 0);
}

static void gb_fini(struct gb_fix *f)
{
	cr_assert_eq(lull_producer_detach(f->prod), 0);
	cr_assert_eq(lull_ring_destroy(f->ring), 0);
}

static int put_one(struct gb_fix *f)
{
	int r = f->flags == LULL_RING_MPSC
			? lull_mpsc_write(f->prod, 1, &f->written, GB_PAYLOAD)
			: lull_spsc_write(f->prod, 1, &f->written, GB_PAYLOAD);

	if (r == 0)
		f->written++;
	return r;
}

/* Write until the ring is full; returns how many records went in. */
static unsigned fill(struct gb_fix *f)
{
	unsigned n = 0;
	int r;

	while ((r = put_one(f)) == 0)
		n++;
	cr_assert_eq(r, -EAGAIN, "write %u: %d", n, r);
	return n;
}

static int in_sequence(const struct lull_record *rec, void *ctx)
{
	struct gb_fix *f = ctx;
	uint64_t seq;

	cr_assert_eq(rec->len, GB_PAYLOAD);
	memcpy(&seq, rec->data, sizeof(seq));
	cr_assert_eq(seq, f->read, "record %llu where %llu was due",
		     (unsigned long long)seq, (unsigned long long)f->read);
	f->read++;
	return LULL_READ_CONTINUE;
}

/* One read with a limit far above a lap of records. */
static int take(struct gb_fix *f)
{
	uint64_t before = f->read;
	int r = lull_ring_read(f->ring, in_sequence, f, 1u << 24);

	if (r >= 0)
		cr_assert_eq((uint64_t)r, f->read - before);
	return r;
}

/* The records of a quarter lap from a head at a record's start. */
static unsigned quarter_records(size_t cap)
{
	return (unsigned)((cap / 4 + GB_RECORD - 1) / GB_RECORD);
}

/*
 * A full ring of one lane: each read ends at the first record past a
 * quarter lap, and the producer can write as many records again at once.
 * The head starts at 0, and every record takes GB_RECORD bytes until the
 * lap's end, where a padding may take the rest: the first read's count is
 * exact, later ones are checked against the space they gave back.
 */
static void gives_back_every_quarter(unsigned flags, size_t cap)
{
	struct gb_fix f;
	unsigned full, refill, left, reads = 0;
	int r;

	gb_init(&f, flags, cap);
	full = fill(&f);
	cr_assert_gt(full, 4 * quarter_records(cap) - 4);
	r = take(&f);
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
	while ((r = take(&f)) > 0) {
		cr_assert_leq(r, (int)quarter_records(cap) + 1,
			      "read %u took %d records", reads, r);
		reads++;
	}
	cr_assert_eq(r, -EAGAIN);
	cr_assert_eq(f.read, f.written);
	cr_assert_geq(reads, left / (quarter_records(cap) + 1),
		      "%u records read in %u reads", left, reads);
	gb_fini(&f);
}

Test(give_back, spsc_reads_end_every_quarter_lap)
{
	gives_back_every_quarter(LULL_RING_SPSC, LULL_GIVE_BACK_MIN_LAP);
	gives_back_every_quarter(LULL_RING_SPSC, 1u << 20);
}

Test(give_back, mpsc_reads_end_every_quarter_lap)
{
	gives_back_every_quarter(LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP);
	gives_back_every_quarter(LULL_RING_MPSC, 1u << 20);
}

Test(give_back, one_lane_lanes_ring_reads_end_every_quarter_lap)
{
	gives_back_every_quarter(LULL_RING_LANES(1), LULL_GIVE_BACK_MIN_LAP);
}

/*
 * Arrays of GB_ITEMS records, each packed into one record (an 8-byte
 * array header, then the items): the read hands out their items one by
 * one and ends after the array that reaches the quarter lap.
 */
#define GB_ITEMS 32u
#define GB_ARRAY ((LULL_RECORD_HEADER_SIZE + 8 + GB_ITEMS * GB_PAYLOAD + 7) / 8 * 8)

static void arrays_give_back(unsigned flags)
{
	uint64_t items[GB_ITEMS];
	unsigned arrays = 0, quarter;
	struct gb_fix f;
	int r;

	gb_init(&f, flags, LULL_GIVE_BACK_MIN_LAP);
	for (;;) {
		for (unsigned i = 0; i < GB_ITEMS; i++)
			items[i] = f.written + i;
		r = flags == LULL_RING_MPSC
			    ? lull_mpsc_write_array(f.prod, 1, items,
						    GB_PAYLOAD, GB_ITEMS)
			    : lull_spsc_write_array(f.prod, 1, items,
						    GB_PAYLOAD, GB_ITEMS);
		if (r)
			break;
		f.written += GB_ITEMS;
		arrays++;
	}
	cr_assert_eq(r, -EAGAIN);
	quarter = (LULL_GIVE_BACK_MIN_LAP / 4 + GB_ARRAY - 1) / GB_ARRAY;
	cr_assert_gt(arrays, quarter);
	r = take(&f);
	cr_assert_eq(r, (int)(quarter * GB_ITEMS),
		     "the first read took %d items, not the %u arrays' %u", r,
		     quarter, quarter * GB_ITEMS);
	while ((r = take(&f)) > 0)
		;
	cr_assert_eq(r, -EAGAIN);
	cr_assert_eq(f.read, f.written);
	gb_fini(&f);
}

Test(give_back, arrays_end_a_read_at_the_quarter_too)
{
	arrays_give_back(LULL_RING_SPSC);
	arrays_give_back(LULL_RING_MPSC);
}

/* A full ring whose read takes the whole lap at once. */
static void reads_whole_lap(unsigned flags, size_t cap)
{
	struct gb_fix f;
	unsigned full;

	gb_init(&f, flags, cap);
	full = fill(&f);
	cr_assert_eq(take(&f), (int)full, "a lap of %u records in one read",
		     full);
	cr_assert_eq(take(&f), -EAGAIN);
	gb_fini(&f);
}

Test(give_back, small_rings_read_whole_laps)
{
	reads_whole_lap(LULL_RING_SPSC, LULL_GIVE_BACK_MIN_LAP / 2);
	reads_whole_lap(LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP / 2);
}

/*
 * Several lanes: the others are read while one lane's producer writes, so
 * a lane is read a lap at a time (one producer here, in lane 0).
 */
Test(give_back, lanes_rings_read_whole_laps)
{
	reads_whole_lap(LULL_RING_LANES(2), LULL_GIVE_BACK_MIN_LAP);
}

/*
 * An aborted MPSC claim leaves a padding; paddings past a quarter lap at
 * the head must not end the read before the record behind them, or the
 * read would say "empty" with a record committed (and its caller park).
 * A record is an eighth of the lap at most: three of the largest make it.
 */
Test(give_back, paddings_past_the_quarter_never_end_a_read_empty)
{
	struct gb_fix f;
	ssize_t max;
	void *data;

	gb_init(&f, LULL_RING_MPSC, LULL_GIVE_BACK_MIN_LAP);
	max = lull_ring_max_payload(f.ring);
	cr_assert_gt(max, 0);
	cr_assert_gt(3 * (size_t)max, LULL_GIVE_BACK_MIN_LAP / 4);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_mpsc_claim(f.prod, 1, (size_t)max, &data), 0);
		cr_assert_eq(lull_mpsc_abort(f.prod), 0);
	}
	cr_assert_eq(put_one(&f), 0);
	cr_assert_eq(take(&f), 1);
	cr_assert_eq(take(&f), -EAGAIN);
	gb_fini(&f);
}
