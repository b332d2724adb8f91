/* SPDX-License-Identifier: MIT */
/*
 * test_region_hostile.c - the Criterion suite of a consumer that trusts
 * nothing in its region: a producer process may write anything anywhere
 * in the shared mapping, and each case below writes one thing no producer
 * writes (a record longer than the largest, a padding past the end of the
 * data, a reserved type in the data, a tail a lap ahead, a fatal report
 * longer than its message, a header that lies about its lanes...) and
 * checks what the consumer does: it hands out nothing outside the data
 * area, reports the corruption once (-EPROTO, the corruptions counter),
 * then hands out the poison record and -EPIPE, and producers get -EPIPE;
 * open refuses a header that lies, and uses what it checked ever after.
 * The fuzzers (test/fuzz/fuzz_region_*.c) try the rest.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <lull.h>

/* The region's layout: what a hostile writer writes. */
#include "region.h"

#define TIMEOUT_S 10

/* A region in caller memory of exactly its size, and its consumer. */
struct hostile {
	unsigned char *mem;
	size_t size;
	size_t capacity;
	uint32_t lanes;
	struct lull_region *region;
	struct lull_ring *ring;
};

static void hostile_new(struct hostile *h, unsigned topology, size_t capacity)
{
	ssize_t size = lull_ring_region_size_for(capacity, topology);

	cr_assert_gt(size, 0);
	h->size = (size_t)size;
	h->capacity = capacity;
	h->lanes = (topology & 0xffu) == LULL_MODE_LANES ? topology >> 8 : 1;
	cr_assert_eq(posix_memalign((void **)&h->mem, 128, h->size), 0);
	h->region = (struct lull_region *)h->mem;
	cr_assert_eq(lull_ring_create_in(&h->ring, h->mem, h->size, capacity,
					 topology), 0);
}

static void hostile_free(struct hostile *h)
{
	if (h->ring)
		cr_assert_eq(lull_ring_destroy(h->ring), 0);
	free(h->mem);
}

static unsigned char *lane_data(const struct hostile *h, uint32_t lane)
{
	return h->mem + LULL_REGION_LANES_OFFSET +
	       h->lanes * sizeof(struct lull_lane) + lane * h->capacity;
}

/* A record header at @off of lane @lane's data area, as anyone may. */
static void header_put(const struct hostile *h, uint32_t lane, uint64_t off,
		       int32_t length, int32_t type)
{
	int32_t hdr[2] = { length, type };

	memcpy(lane_data(h, lane) + off, hdr, sizeof(hdr));
}

/* Drop the consumer and open another: it takes the region's head. */
static int hostile_reopen(struct hostile *h)
{
	cr_assert_eq(lull_ring_destroy(h->ring), 0);
	h->ring = NULL;
	return lull_ring_open(&h->ring, h->mem, h->size, LULL_OPEN_CONSUMER);
}

/* What a handler was handed. */
struct sink {
	const struct hostile *h;
	unsigned records;
	unsigned poisons;
	unsigned fatals;
	struct lull_record last;
};

static int sink_fn(const struct lull_record *rec, void *ctx)
{
	struct sink *s = ctx;
	const unsigned char *p = rec->data;

	s->last = *rec;
	if (rec->type == LULL_TYPE_POISON) {
		s->poisons++;
	} else if (rec->type == LULL_TYPE_FATAL) {
		s->fatals++;
	} else {
		/* Every user record lies within lane 0..n's data area. */
		cr_assert(p >= lane_data(s->h, 0) &&
			  p + rec->len <= lane_data(s->h, s->h->lanes));
		s->records++;
	}
	return LULL_READ_CONTINUE;
}

static uint64_t corruptions(const struct lull_ring *ring)
{
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	return st.corruptions;
}

/*
 * After a corruption was found: -EPROTO once (unless @reported already),
 * the poison, -EPIPE for good; counted once; the region shut down for
 * producers and sealed against a late fatal report.
 */
static void expect_fatal_ring(struct hostile *h, bool reported)
{
	struct sink s = { .h = h };
	struct lull_producer *prod;

	if (!reported)
		cr_assert_eq(lull_ring_read(h->ring, sink_fn, &s, 64), -EPROTO);
	cr_assert_eq(corruptions(h->ring), 1);
	cr_assert_eq(lull_ring_wait(h->ring, 0), 0, "the poison is readable");
	cr_assert_eq(lull_ring_read(h->ring, sink_fn, &s, 64), 1);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(s.records + s.fatals, 0, "nothing after the corruption");
	cr_assert_eq(lull_ring_read(h->ring, sink_fn, &s, 64), -EPIPE);
	cr_assert_eq(lull_ring_read(h->ring, sink_fn, &s, 64), -EPIPE);
	cr_assert_eq(lull_ring_wait(h->ring, 0), -EPIPE);
	cr_assert_eq(corruptions(h->ring), 1, "counted once");
	cr_assert_eq(lull_producer_attach(h->ring, 0, &prod), -EPIPE);
	cr_assert_eq(lull_ring_fatal(h->ring, 1, "late"), -EPIPE);
	cr_assert(atomic_load(&h->region->state) & LULL_STATE_CLOSED);
}

/* One corrupt header at the start of lane 0: the first read reports it. */
static void expect_header_refused(unsigned topology, size_t capacity,
				  int32_t length, int32_t type)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, topology, capacity);
	s = (struct sink){ .h = &h };
	header_put(&h, 0, 0, length, type);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), -EPROTO,
		     "length %d type %d", length, type);
	cr_assert_eq(s.records, 0);
	expect_fatal_ring(&h, true);
	hostile_free(&h);
}

/* ========================================================================
 * Record headers
 */

Test(hostile, a_length_of_2000_in_a_4096_ring_is_eproto, .timeout = TIMEOUT_S)
{
	/* The largest record is 4096 / 8 = 512 bytes, header included. */
	expect_header_refused(LULL_RING_SPSC, 4096, 2000, 1);
	expect_header_refused(LULL_RING_MPSC, 4096, 2000, 1);
	expect_header_refused(LULL_RING_SPSC, 4096, 513, 1);
	expect_header_refused(LULL_RING_LANES(2), 4096,
			      2000 | LULL_LENGTH_BATCH_MORE, 1);
}

Test(hostile, the_largest_record_is_still_read, .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_SPSC, 4096);
	s = (struct sink){ .h = &h };
	header_put(&h, 0, 0, 512, 1);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 1);
	cr_assert_eq(s.last.len, 504);
	cr_assert_eq(corruptions(h.ring), 0);
	hostile_free(&h);
}

Test(hostile, a_length_shorter_than_a_header_is_eproto,
     .timeout = TIMEOUT_S)
{
	for (int32_t len = 1; len < 8; len++)
		expect_header_refused(LULL_RING_MPSC, 256, len, 1);
	expect_header_refused(LULL_RING_SPSC, 256, LULL_LENGTH_BATCH_MORE, 1);
	expect_header_refused(LULL_RING_SPSC, 256, LULL_LENGTH_BATCH_MORE | 4,
			      0);
}

Test(hostile, a_padding_past_the_end_of_the_data_is_eproto,
     .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;

	expect_header_refused(LULL_RING_SPSC, 256, 0x3ffffff8, 0);
	expect_header_refused(LULL_RING_MPSC, 256, 264, 0);
	expect_header_refused(LULL_RING_LANES(3), 256, 512, 0);
	/* Up to the end is a padding, which is skipped. */
	hostile_new(&h, LULL_RING_SPSC, 256);
	s = (struct sink){ .h = &h };
	header_put(&h, 0, 0, 256, 0);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), -EAGAIN);
	cr_assert_eq(atomic_load(&lull__lane(h.region, 0)->head), 256);
	cr_assert_eq(corruptions(h.ring), 0);
	hostile_free(&h);
}

Test(hostile, reserved_types_in_the_data_are_eproto, .timeout = TIMEOUT_S)
{
	static const int32_t types[] = { LULL_TYPE_POISON, LULL_TYPE_FATAL,
					 -3, INT32_MIN };

	for (unsigned i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		expect_header_refused(LULL_RING_SPSC, 256, 8, types[i]);
		expect_header_refused(LULL_RING_MPSC, 256, 16, types[i]);
	}
}

/* An array record (region.h) at the start of lane 0: header, items. */
static void array_put(const struct hostile *h, int32_t length,
		      int32_t item_type, uint32_t item_len)
{
	struct lull_array_header ah = { item_type, item_len };

	memcpy(lane_data(h, 0) + LULL_RECORD_HEADER_SIZE, &ah, sizeof(ah));
	header_put(h, 0, 0, length, LULL_TYPE_ARRAY);
}

/* One corrupt array at the start of lane 0: the read and the peek refuse it. */
static void expect_array_refused(int32_t length, int32_t item_type,
				 uint32_t item_len)
{
	struct lull_record rec;
	struct hostile h;
	struct sink s;

	for (int by_peek = 0; by_peek < 2; by_peek++) {
		hostile_new(&h, by_peek ? LULL_RING_MPSC : LULL_RING_SPSC,
			    4096);
		s = (struct sink){ .h = &h };
		array_put(&h, length, item_type, item_len);
		if (by_peek)
			cr_assert_eq(lull_ring_peek(h.ring, &rec), -EPROTO,
				     "length %d, items %d of %u", length,
				     item_type, item_len);
		else
			cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64),
				     -EPROTO, "length %d, items %d of %u",
				     length, item_type, item_len);
		cr_assert_eq(s.records, 0);
		expect_fatal_ring(&h, true);
		hostile_free(&h);
	}
}

Test(hostile, an_array_no_producer_writes_is_eproto, .timeout = TIMEOUT_S)
{
	/* 8 + 8 + 4 x 16: four items of 16 bytes, but: */
	expect_array_refused(80, 0, 16);   /* a reserved item type */
	expect_array_refused(80, LULL_TYPE_POISON, 16);
	expect_array_refused(80, 1, 0);    /* empty items */
	expect_array_refused(80, 1, 12);   /* not a multiple of 8 */
	expect_array_refused(80, 1, 24);   /* 64 is no multiple of 24 */
	expect_array_refused(88, 1, 16);   /* nor 72 of 16 */
	expect_array_refused(80, 1, 512);  /* above the largest payload */
	expect_array_refused(16, 1, 8);    /* no item at all */
	expect_array_refused(12, 1, 8);    /* no room for its header */
	expect_array_refused(520, 1, 8);   /* longer than a record */
}

/*
 * A real array read in part, then rewritten shorter under the consumer:
 * the items it had handed out stay handed, and the next read refuses
 * the array instead of reading past its new end.
 */
Test(hostile, an_array_shortened_under_the_consumer_is_eproto,
     .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_SPSC, 4096);
	s = (struct sink){ .h = &h };
	array_put(&h, 80, 1, 16);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 3), 3);
	cr_assert_eq(s.last.len, 16);
	cr_assert(s.last.data == lane_data(&h, 0) + 16 + 2 * 16);
	array_put(&h, 48, 1, 16); /* two items now */
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), -EPROTO);
	cr_assert_eq(s.records, 3);
	s.records = 0;
	expect_fatal_ring(&h, true);
	hostile_free(&h);
}

Test(hostile, a_record_across_the_end_of_the_data_is_eproto,
     .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_SPSC, 256);
	s = (struct sink){ .h = &h };
	/* The consumer at offset 248, a record of 16 there. */
	atomic_store(&lull__lane(h.region, 0)->head, 248);
	cr_assert_eq(hostile_reopen(&h), 0);
	header_put(&h, 0, 248, 16, 1);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), -EPROTO);
	cr_assert_eq(s.records, 0);
	expect_fatal_ring(&h, true);
	hostile_free(&h);
}

/*
 * An array record of 8 bytes, its header alone, in the last 8 bytes of
 * the data area, which ends the region: no array header follows it, and
 * the consumer refuses it without reading past the region (AddressSanitizer
 * reports it where the read of the array's header comes before the check
 * of its room).  The entries that walk the lane: the peek, after a wait
 * (which answers from the head's header: work) and alone, and the read.
 */
Test(hostile, an_array_header_past_the_end_of_the_region_is_not_read,
     .timeout = TIMEOUT_S)
{
	struct lull_record rec;
	struct hostile h;
	struct sink s;

	for (int entry = 0; entry < 3; entry++) {
		hostile_new(&h, LULL_RING_SPSC, 256);
		cr_assert_eq(lane_data(&h, 0) + h.capacity, h.mem + h.size,
			     "the data area ends the region");
		s = (struct sink){ .h = &h };
		atomic_store(&lull__lane(h.region, 0)->head, 248);
		cr_assert_eq(hostile_reopen(&h), 0);
		header_put(&h, 0, 248, LULL_RECORD_HEADER_SIZE,
			   LULL_TYPE_ARRAY);
		if (entry == 0)
			cr_assert_eq(lull_ring_wait(h.ring, 0), 0);
		if (entry <= 1)
			cr_assert_eq(lull_ring_peek(h.ring, &rec), -EPROTO);
		else
			cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64),
				     -EPROTO);
		cr_assert_eq(s.records, 0);
		expect_fatal_ring(&h, true);
		hostile_free(&h);
	}
}

/*
 * A producer of a region whose lane tail another writer misaligned: its
 * writes stay within the data area, which here 64 bytes of canary follow
 * in the allocation.  A lane's tail is taken rounded down; a
 * shared tail with a flag bit but the closed one refuses claims as a
 * closed one does.  Without either, the length cleared past a record,
 * or a wrap's padding header, went up to 7 bytes past the data area.
 */
static void expect_writes_in_the_data(unsigned topology, uint64_t tail,
				      uint64_t head, int expected)
{
	ssize_t size = lull_ring_region_size_for(256, topology);
	struct lull_producer *prod;
	struct lull_ring *ring;
	unsigned char *mem;
	int ret;

	cr_assert_gt(size, 0);
	cr_assert_eq(posix_memalign((void **)&mem, 128, (size_t)size + 64), 0);
	memset(mem + size, 0xa5, 64);
	cr_assert_eq(lull_ring_create_in(&ring, mem, (size_t)size, 256,
					 topology),
		     0);
	atomic_store(&lull__lane((struct lull_region *)mem, 0)->tail, tail);
	atomic_store(&lull__lane((struct lull_region *)mem, 0)->head, head);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	if (topology == LULL_RING_MPSC)
		ret = lull_mpsc_write(prod, 1, "12345678", 8);
	else
		ret = lull_spsc_write(prod, 1, "12345678", 8);
	cr_assert_eq(ret, expected, "tail %llu: %d",
		     (unsigned long long)tail, ret);
	for (int i = 0; i < 64; i++)
		cr_assert_eq(mem[size + i], 0xa5,
			     "tail %llu: byte %d past the data written",
			     (unsigned long long)tail, i);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(hostile, a_misaligned_tail_keeps_writes_in_the_data_area,
     .timeout = TIMEOUT_S)
{
	/* The lean write: its record ends 1 byte short of the end. */
	expect_writes_in_the_data(LULL_RING_SPSC, 239, 0, 0);
	/* The general one: a wrap's padding in the last byte. */
	expect_writes_in_the_data(LULL_RING_SPSC, 255, 16, 0);
	expect_writes_in_the_data(LULL_RING_MPSC, 254, 16, -EPIPE);
	expect_writes_in_the_data(LULL_RING_MPSC, 252, 16, -EPIPE);
}

Test(hostile, a_record_over_the_next_lap_is_eproto, .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_SPSC, 256);
	s = (struct sink){ .h = &h };
	/*
	 * Head at 8: a padding to the end, then a record of 32 at offset
	 * 0, which ends at 288, past 8 + 256: over the consumer's own
	 * unread records.  Walking on would go round and round.
	 */
	atomic_store(&lull__lane(h.region, 0)->head, 8);
	cr_assert_eq(hostile_reopen(&h), 0);
	header_put(&h, 0, 8, 248, 0);
	header_put(&h, 0, 0, 32, 1);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 1000), -EPROTO);
	cr_assert_eq(s.records, 0);
	expect_fatal_ring(&h, true);
	hostile_free(&h);
}

Test(hostile, records_before_the_corruption_come_first,
     .timeout = TIMEOUT_S)
{
	struct lull_producer *prod;
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_MPSC, 256);
	s = (struct sink){ .h = &h };
	cr_assert_eq(lull_producer_attach(h.ring, 0, &prod), 0);
	cr_assert_eq(lull_mpsc_write(prod, 1, "one", 3), 0);
	cr_assert_eq(lull_mpsc_write(prod, 2, "two", 3), 0);
	/* Then a record twice the largest, and a good one behind it. */
	header_put(&h, 0, 32, 64, 3);
	header_put(&h, 0, 96, 16, 4);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 2);
	cr_assert_eq(s.records, 2);
	/* Found and counted; reported by the next read. */
	cr_assert_eq(corruptions(h.ring), 1);
	cr_assert_eq(lull_ring_wait(h.ring, 0), 0);
	/* What a producer writes now, nobody reads. */
	cr_assert_eq(lull_mpsc_write(prod, 5, "late", 4), -EPIPE);
	/* The good record behind it is never handed out. */
	header_put(&h, 0, 32, 16, 3);
	expect_fatal_ring(&h, false);
	cr_assert_eq(lull_producer_detach(prod), 0);
	hostile_free(&h);
}

Test(hostile, a_corrupt_lane_ends_every_lane, .timeout = TIMEOUT_S)
{
	struct lull_producer *prod[3];
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_LANES(3), 256);
	s = (struct sink){ .h = &h };
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_producer_attach(h.ring, 0, &prod[i]), 0);
		cr_assert_eq(lull_spsc_write(prod[i], 1 + i, "r", 1), 0);
	}
	/* Lane 1's second record: a reserved type. */
	header_put(&h, 1, 16, 8, LULL_TYPE_FATAL);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 2,
		     "lane 0's record, lane 1's first");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_spsc_write(prod[i], 9, "r", 1), -EPIPE);
		cr_assert_eq(lull_producer_detach(prod[i]), 0);
	}
	expect_fatal_ring(&h, false);
	hostile_free(&h);
}

Test(hostile, peek_reports_the_corruption_once, .timeout = TIMEOUT_S)
{
	struct lull_record rec;
	struct hostile h;

	hostile_new(&h, LULL_RING_SPSC, 1024);
	header_put(&h, 0, 0, 2000, 1);
	cr_assert(lull_ring_wait(h.ring, 0) == 0, "readable: to say -EPROTO");
	cr_assert_eq(lull_ring_peek(h.ring, &rec), -EPROTO);
	cr_assert_eq(corruptions(h.ring), 1);
	cr_assert_eq(lull_ring_peek(h.ring, &rec), 0);
	cr_assert_eq(rec.type, LULL_TYPE_POISON);
	cr_assert_eq(lull_ring_release(h.ring), 0);
	cr_assert_eq(lull_ring_peek(h.ring, &rec), -EPIPE);
	cr_assert_eq(lull_ring_wait(h.ring, 0), -EPIPE);
	hostile_free(&h);
}

/* ========================================================================
 * Tails, the fatal report, the wake-up fields
 */

/* Closed, with lane @lane's tail at @tail: the read says what it says. */
static void closed_with_tail(unsigned topology, uint32_t lane, uint64_t tail,
			     bool corrupt)
{
	struct hostile h;
	struct sink s;

	hostile_new(&h, topology, 256);
	s = (struct sink){ .h = &h };
	cr_assert_eq(lull_ring_shutdown(h.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	atomic_store(&lull__lane(h.region, lane)->tail, tail);
	if (corrupt) {
		expect_fatal_ring(&h, false);
	} else {
		cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 1);
		cr_assert_eq(s.poisons, 1);
		cr_assert_eq(corruptions(h.ring), 0);
	}
	hostile_free(&h);
}

Test(hostile, a_tail_no_producer_stores_is_eproto, .timeout = TIMEOUT_S)
{
	/* A lap ahead of the head and more. */
	closed_with_tail(LULL_RING_SPSC, 0, (uint64_t)1 << 40, true);
	closed_with_tail(LULL_RING_SPSC, 0, 264, true);
	closed_with_tail(LULL_RING_MPSC, 0, ((uint64_t)1 << 40) | 1, true);
	/* Not a multiple of 8. */
	closed_with_tail(LULL_RING_LANES(2), 1, 3, true);
	closed_with_tail(LULL_RING_SPSC, 0, 12, true);
	/* Behind the head: a lagging tail, taken as the head. */
	closed_with_tail(LULL_RING_MPSC, 0, (uint64_t)-64 | 1, false);
	closed_with_tail(LULL_RING_LANES(2), 0, (uint64_t)-8, false);
}

Test(hostile, a_fatal_report_longer_than_its_message_is_clamped,
     .timeout = TIMEOUT_S)
{
	const struct lull_fatal *fatal;
	struct lull_record rec;
	struct hostile h;

	hostile_new(&h, LULL_RING_SPSC, 256);
	cr_assert_eq(lull_ring_fatal(h.ring, 42, "boom"), 0);
	/* Then a length far past the struct, and no terminating NUL. */
	h.region->fatal.length = UINT32_MAX;
	memset(h.region->fatal.message, 'A', LULL_FATAL_MESSAGE_MAX);
	cr_assert_eq(lull_ring_peek(h.ring, &rec), 0);
	cr_assert_eq(rec.type, LULL_TYPE_FATAL);
	cr_assert_eq(rec.len, offsetof(struct lull_fatal, message) +
				      LULL_FATAL_MESSAGE_MAX - 1);
	fatal = rec.data;
	cr_assert_eq(fatal->code, 42);
	cr_assert_eq(fatal->length, LULL_FATAL_MESSAGE_MAX - 1);
	cr_assert_eq(fatal->message[LULL_FATAL_MESSAGE_MAX - 1], '\0');
	/* A copy: rewriting the region changes nothing handed out. */
	cr_assert((const unsigned char *)rec.data < h.mem ||
		  (const unsigned char *)rec.data >= h.mem + h.size);
	h.region->fatal.code = 7;
	cr_assert_eq(lull_ring_peek(h.ring, &rec), 0);
	cr_assert_eq(((const struct lull_fatal *)rec.data)->code, 42);
	cr_assert_eq(lull_ring_release(h.ring), 0);
	cr_assert_eq(lull_ring_peek(h.ring, &rec), 0);
	cr_assert_eq(rec.type, LULL_TYPE_POISON);
	cr_assert_eq(lull_ring_release(h.ring), 0);
	cr_assert_eq(corruptions(h.ring), 0, "clamped, not corrupt");
	hostile_free(&h);
}

/* Whether anything was written into @fd (a pipe's read end). */
static bool pipe_written(int fd)
{
	char c;

	return read(fd, &c, 1) > 0;
}

Test(hostile, nothing_in_the_process_writes_the_regions_wake_fd,
     .timeout = TIMEOUT_S)
{
	struct hostile h;
	struct sink s;
	int fds[2];

	struct lull_producer *prod;

	cr_assert_eq(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
	for (int i = 0; i < 5; i++) {
		hostile_new(&h, LULL_RING_SPSC, 256);
		s = (struct sink){ .h = &h };
		/*
		 * The park word says "asleep on an eventfd" of this very
		 * process, and wake_fd names a descriptor that is none.
		 */
		atomic_store(&h.region->wake_pid, (int32_t)getpid());
		atomic_store(&h.region->wake_fd, fds[1]);
		atomic_store(&h.region->park, LULL_PARK_EVENTFD);
		if (i == 0) {
			header_put(&h, 0, 0, 2000, 1);
			cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 8),
				     -EPROTO);
		} else if (i == 1) {
			cr_assert_eq(lull_ring_close(h.ring), 0);
		} else if (i == 2) {
			/* Any thread of the process may shut it down. */
			cr_assert_eq(lull_ring_shutdown(
					     h.ring, LULL_SHUTDOWN_GRACEFUL),
				     0);
		} else if (i == 3) {
			cr_assert_eq(lull_ring_fatal(h.ring, 5, "engine"), 0);
		} else {
			/* A producer of this process, writing. */
			cr_assert_eq(lull_producer_attach(h.ring, 0, &prod), 0);
			cr_assert_eq(lull_spsc_write(prod, 1, "x", 1), 0);
			cr_assert_eq(lull_producer_detach(prod), 0);
		}
		cr_assert(!pipe_written(fds[0]),
			  "case %d: the region's wake_fd was written", i);
		hostile_free(&h);
	}
	close(fds[0]);
	close(fds[1]);
}

/*
 * The word that counted wakers until layout 5 (now park_fence, which only
 * an asymmetric region's consumer writes): whatever it holds, a detach
 * does not wait on it.
 */
Test(hostile, a_park_fence_word_in_the_region_holds_up_nobody,
     .timeout = TIMEOUT_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_loop *loop;
	struct hostile h;

	hostile_new(&h, LULL_RING_SPSC, 256);
	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, h.ring, sink_fn, NULL, 0), 0);
	cr_assert_geq(atomic_load(&h.region->wake_fd), 0, "the loop's eventfd");
	/* What once said "a producer is writing the eventfd", for good. */
	atomic_store(&h.region->park_fence, 1);
	cr_assert_eq(lull_loop_detach(loop, h.ring), 0);
	cr_assert_eq(atomic_load(&h.region->wake_fd), -1);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	hostile_free(&h);
}

/* ========================================================================
 * Opening
 */

/* A LANES(2) region whose header is rewritten by @lie, then opened. */
static void expect_open_refused(void (*lie)(struct lull_region *), int err)
{
	struct lull_ring *other = NULL;
	struct hostile h;

	hostile_new(&h, LULL_RING_LANES(2), 256);
	cr_assert_eq(lull_ring_destroy(h.ring), 0);
	h.ring = NULL;
	lie(h.region);
	cr_assert_eq(lull_ring_open(&other, h.mem, h.size, 0), err);
	cr_assert_eq(lull_ring_open(&other, h.mem, h.size, LULL_OPEN_CONSUMER),
		     err);
	cr_assert_eq(other, NULL);
	hostile_free(&h);
}

static void lanes_3(struct lull_region *r) { r->lanes = 3; }
static void lanes_1(struct lull_region *r) { r->lanes = 1; }
static void lanes_max(struct lull_region *r) { r->lanes = 65; }
static void lanes_wrap(struct lull_region *r) { r->lanes = 0x01000002; }
static void lanes_huge(struct lull_region *r) { r->lanes = UINT32_MAX; }
static void mode_spsc(struct lull_region *r) { r->mode = LULL_RING_SPSC; }
static void mode_flags(struct lull_region *r) { r->mode = 0x201; }
/* Creation flags, not a mode word: LANES(2) as lull_ring_create() takes it. */
static void mode_lanes2(struct lull_region *r)
{
	r->mode = LULL_RING_LANES(2);
}
static void capacity_odd(struct lull_region *r) { r->capacity = 384; }
static void capacity_big(struct lull_region *r) { r->capacity = 1u << 30; }
static void offset_lie(struct lull_region *r) { r->data_offset += 256; }
static void size_lie(struct lull_region *r) { r->region_size -= 8; }
static void flags_lie(struct lull_region *r) { r->flags = 8; }
static void version_lie(struct lull_region *r) { r->layout_version = 2; }

/* Every number consistent, but more than the memory holds. */
static void size_more(struct lull_region *r)
{
	r->capacity = 512;
	r->region_size = 1024 + 2 * 256 + 2 * 512;
}

Test(hostile, open_refuses_a_header_that_lies, .timeout = TIMEOUT_S)
{
	expect_open_refused(lanes_3, -EPROTO);
	expect_open_refused(lanes_1, -EPROTO);
	expect_open_refused(lanes_max, -EPROTO);
	expect_open_refused(lanes_wrap, -EPROTO);
	expect_open_refused(lanes_huge, -EPROTO);
	expect_open_refused(mode_spsc, -EPROTO);
	expect_open_refused(mode_flags, -EPROTO);
	expect_open_refused(mode_lanes2, -EPROTO);
	expect_open_refused(capacity_odd, -EPROTO);
	expect_open_refused(capacity_big, -EPROTO);
	expect_open_refused(offset_lie, -EPROTO);
	expect_open_refused(size_lie, -EPROTO);
	expect_open_refused(flags_lie, -EPROTO);
	expect_open_refused(version_lie, -EPROTO);
	expect_open_refused(size_more, -EINVAL);
}

Test(hostile, open_refuses_a_head_that_is_no_position, .timeout = TIMEOUT_S)
{
	struct lull_ring *other;
	struct hostile h;

	hostile_new(&h, LULL_RING_LANES(2), 256);
	atomic_store(&lull__lane(h.region, 1)->head, 12);
	cr_assert_eq(hostile_reopen(&h), -EPROTO);
	h.ring = NULL;
	/* A handle that does not consume reads no head. */
	cr_assert_eq(lull_ring_open(&other, h.mem, h.size, 0), 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	/* The refused open left the consumer role free. */
	atomic_store(&lull__lane(h.region, 1)->head, 16);
	cr_assert_eq(lull_ring_open(&h.ring, h.mem, h.size,
				    LULL_OPEN_CONSUMER), 0);
	hostile_free(&h);
}

Test(hostile, a_header_rewritten_after_open_changes_nothing,
     .timeout = TIMEOUT_S)
{
	struct lull_producer *prod[3];
	struct hostile h;
	struct sink s;

	hostile_new(&h, LULL_RING_LANES(2), 256);
	s = (struct sink){ .h = &h };
	/* Lanes, capacity, offsets: far outside the memory. */
	h.region->lanes = 64;
	h.region->capacity = (uint64_t)1 << 30;
	h.region->data_offset = (uint64_t)1 << 40;
	h.region->region_size = (uint64_t)1 << 41;
	h.region->mode = LULL_RING_MPSC;
	/* Two lanes, as checked at open; the third attach is refused. */
	cr_assert_eq(lull_producer_attach(h.ring, 0, &prod[0]), 0);
	cr_assert_eq(lull_producer_attach(h.ring, 0, &prod[1]), 0);
	cr_assert_eq(lull_producer_attach(h.ring, 0, &prod[2]), -EBUSY);
	cr_assert_eq(lull_ring_max_payload(h.ring), 256 / 8 - 8);
	cr_assert_eq(lull_spsc_write(prod[0], 1, "a", 1), 0);
	cr_assert_eq(lull_spsc_write(prod[1], 2, "b", 1), 0);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 2);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(lull_producer_detach(prod[i]), 0);
	cr_assert_eq(lull_ring_read(h.ring, sink_fn, &s, 64), 1);
	cr_assert_eq(s.poisons, 1);
	hostile_free(&h);
}
