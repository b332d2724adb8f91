/* SPDX-License-Identifier: MIT */
/*
 * test_ring_lanes.c - the Criterion suite of lull/ring.h: the
 * LULL_RING_LANES(n) topology: region sizes and setup, a lane per
 * producer (attach, detach and the next producer on a lane), both
 * families' calls, the consumer's merge (each producer's order, lanes in
 * turn, peek), capacity per lane, shutdown, parking on a lane, the
 * claim_waits counter, and four producer threads of batches and writes.
 * The fixture (struct lanes of stamped records, struct got, the threads)
 * is lane_fix.h.
 */
#include "lane_fix.h"

#include "criterion_hook.h"
/* The region's header: to corrupt its lane count. */
#include "region.h"

/* Every test's .timeout: one value for the whole suite (see park_fix.h). */
#define TIMEOUT_S 30

/* ========================================================================
 * Region sizes and setup
 */

Test(lanes, region_size_for_refuses_unknown_topologies, .timeout = TIMEOUT_S)
{
	static const unsigned bad[] = {
		LULL_RING_LANES(0), LULL_RING_LANES(LULL_RING_LANES_MAX + 1),
		LULL_RING_LANES(1000), LULL_RING_SPSC | 1u << 8,
		LULL_RING_MPSC | 2u << 8, LULL_RING_SPSC | 1u << 30, 0, 4,
		0xff, 3u | 0xffffffu << 8,
	};
	struct lull_ring *ring = NULL;

	for (unsigned i = 0; i < ARRAY_LEN(bad); i++) {
		cr_assert_eq(lull_ring_region_size_for(256, bad[i]), -EINVAL,
			     "flags %#x", bad[i]);
		cr_assert_eq(lull_ring_create(&ring, 256, bad[i]), -EINVAL,
			     "create with flags %#x", bad[i]);
	}
	for (unsigned n = 1; n <= LULL_RING_LANES_MAX; n++)
		cr_assert_gt(lull_ring_region_size_for(256, LULL_RING_LANES(n)),
			     0, "LANES(%u)", n);
	cr_assert_gt(lull_ring_region_size_for(256, LULL_RING_SPSC), 0);
	cr_assert_gt(lull_ring_region_size_for(256, LULL_RING_MPSC), 0);
	/* Bad capacities, whatever the lanes. */
	for (unsigned n = 1; n <= LULL_RING_LANES_MAX; n *= 4) {
		cr_assert_eq(lull_ring_region_size_for(0, LULL_RING_LANES(n)),
			     -EINVAL);
		cr_assert_eq(lull_ring_region_size_for(128, LULL_RING_LANES(n)),
			     -EINVAL);
		cr_assert_eq(lull_ring_region_size_for(384, LULL_RING_LANES(n)),
			     -EINVAL);
		cr_assert_eq(lull_ring_region_size_for(LULL_RING_MAX_CAPACITY * 2,
						       LULL_RING_LANES(n)),
			     -EINVAL);
	}
	cr_assert_eq(lull_ring_region_size(384), -EINVAL);
}

Test(lanes, region_size_grows_with_lanes_and_capacity, .timeout = TIMEOUT_S)
{
	ssize_t size, more_lanes, more_cap;

	for (size_t cap = LULL_RING_MIN_CAPACITY; cap <= LULL_RING_MAX_CAPACITY;
	     cap *= 2) {
		size = lull_ring_region_size(cap);
		cr_assert_gt(size, (ssize_t)cap);
		cr_assert_eq(lull_ring_region_size_for(cap, LULL_RING_SPSC),
			     size, "capacity %zu", cap);
		cr_assert_eq(lull_ring_region_size_for(cap, LULL_RING_MPSC),
			     size, "capacity %zu", cap);
		if (cap > (1u << 20))
			continue;
		for (unsigned n = 1; n <= LULL_RING_LANES_MAX; n++) {
			size = lull_ring_region_size_for(cap,
							 LULL_RING_LANES(n));
			cr_assert_geq(size, (ssize_t)(n * cap));
			more_cap = lull_ring_region_size_for(
				cap * 2, LULL_RING_LANES(n));
			cr_assert_geq(more_cap - size, (ssize_t)(n * cap),
				      "LANES(%u), capacity %zu", n, cap);
			if (n == LULL_RING_LANES_MAX)
				continue;
			more_lanes = lull_ring_region_size_for(
				cap, LULL_RING_LANES(n + 1));
			cr_assert_geq(more_lanes - size, (ssize_t)cap,
				      "LANES(%u), capacity %zu", n, cap);
		}
	}
}

Test(lanes, open_from_another_handle_sees_the_same_lanes,
     .timeout = TIMEOUT_S)
{
	struct lanes l = { .n = 0 };
	struct lull_ring *other, *third;
	struct lull_producer *extra;
	struct region r;
	struct got g = { .n = 0 };

	lanes_region(&r, 1024, 3);
	cr_assert_eq(lull_ring_create_in(&l.ring, r.mem, r.size - 8, 1024,
					 LULL_RING_LANES(3)),
		     -EINVAL, "a region one word too small");
	cr_assert_eq(lull_ring_create_in(&l.ring, r.mem, r.size, 1024,
					 LULL_RING_LANES(3)),
		     0);
	other = region_open(&r, 0);
	cr_assert_eq(lull_ring_open(&third, r.mem, r.size - 8, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&third, r.mem, r.size, LULL_OPEN_CONSUMER),
		     -EBUSY);
	cr_assert_eq(lull_ring_capacity(other), 1024);
	cr_assert_eq(lull_ring_max_payload(other), 120);
	/* Three lanes, taken through the other handle. */
	for (unsigned p = 0; p < 3; p++) {
		cr_assert_eq(lull_producer_attach(other, 0, &l.prod[p]), 0);
		l.n++;
	}
	cr_assert_eq(lull_producer_attach(other, 0, &extra), -EBUSY);
	cr_assert_eq(lull_producer_attach(l.ring, 0, &extra), -EBUSY);
	for (unsigned i = 0; i < 5; i++)
		for (unsigned p = 0; p < 3; p++)
			lanes_send(&l, p, 1);
	got_drain(l.ring, &g, false);
	got_all(&l, &g);
	for (unsigned p = 0; p < 3; p++)
		cr_assert_eq(lull_producer_detach(l.prod[p]), 0);
	got_drain(l.ring, &g, true);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(l.ring), 0);
	region_free(&r);
}

Test(lanes, open_of_a_corrupt_lane_count_is_eproto, .timeout = TIMEOUT_S)
{
	static const uint32_t counts[] = { 0, 3, 5, 65, UINT32_MAX };
	struct lull_region *hdr;
	struct lull_ring *ring, *other;
	struct region a, b;

	lanes_region(&a, 256, 4);
	lanes_region(&b, 256, 4);
	cr_assert_eq(lull_ring_create_in(&ring, a.mem, a.size, 256,
					 LULL_RING_LANES(4)),
		     0);
	memcpy(b.mem, a.mem, a.size);
	other = region_open(&b, 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	hdr = (struct lull_region *)b.mem;
	for (unsigned i = 0; i < ARRAY_LEN(counts); i++) {
		memcpy(b.mem, a.mem, a.size);
		hdr->lanes = counts[i];
		cr_assert_eq(lull_ring_open(&other, b.mem, b.alloc, 0), -EPROTO,
			     "a lane count of %u", counts[i]);
	}
	/* A LANES region that says it is SPSC or MPSC. */
	for (uint32_t mode = LULL_RING_SPSC; mode <= LULL_RING_MPSC; mode++) {
		memcpy(b.mem, a.mem, a.size);
		hdr->mode = mode;
		cr_assert_eq(lull_ring_open(&other, b.mem, b.alloc, 0), -EPROTO,
			     "mode %u with 4 lanes", mode);
	}
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&a);
	region_free(&b);
}

/* ========================================================================
 * A lane per producer
 */

Test(lanes, attach_beyond_the_lane_count_is_ebusy, .timeout = TIMEOUT_S)
{
	static const unsigned counts[] = { 1, 3, LULL_RING_LANES_MAX };
	struct lull_producer *extra;
	struct got g;
	struct lanes l;

	for (unsigned c = 0; c < ARRAY_LEN(counts); c++) {
		unsigned n = counts[c];

		memset(&g, 0, sizeof(g));
		lanes_init(&l, 1024, n, n);
		cr_assert_eq(lull_producer_attach(l.ring, 0, &extra), -EBUSY,
			     "producer %u of LANES(%u)", n + 1, n);
		/* A detach (not the last) frees a lane, for one more. */
		if (n > 1) {
			cr_assert_eq(lull_producer_detach(l.prod[n - 1]), 0);
			cr_assert_eq(lull_producer_attach(l.ring, 0,
							  &l.prod[n - 1]),
				     0);
			cr_assert_eq(lull_producer_attach(l.ring, 0, &extra),
				     -EBUSY);
		}
		/* Each writes a lane of its own. */
		for (unsigned p = 0; p < n; p++)
			lanes_send(&l, p, 1);
		for (unsigned p = 0; p < n; p++)
			lanes_send(&l, p, 5);
		got_drain(l.ring, &g, false);
		got_all(&l, &g);
		lanes_fini(&l);
	}
}

/*
 * A producer that detaches leaves its lane where it stopped, unread
 * records and all; the next one on the lane goes on from there, so the
 * consumer sees one sequence.  Also when the first one left with a batch
 * claimed, full of fake headers.
 */
Test(lanes, next_producer_on_a_lane_goes_on_where_the_last_stopped,
     .timeout = TIMEOUT_S)
{
	struct lull_claim claims[3] = {
		{ NULL, 40, 5 }, { NULL, 8, 5 }, { NULL, 16, 5 }
	};
	struct got g = { .n = 0 };
	struct lanes l;
	unsigned sent;
	int ret;

	lanes_init(&l, 1024, 2, 2);
	for (int round = 0; round < 60; round++) {
		/* Producer 0 leaves with records unread, and comes back. */
		lanes_send(&l, 0, 1 + round % 3);
		lanes_send(&l, 1, 1);
		if (round % 4 == 1) {
			cr_assert_eq(lull_spsc_claim_batch(l.prod[0], claims, 3),
				     0);
			for (unsigned i = 0; i < 3; i++)
				fill_fake_headers(claims[i].data, claims[i].len);
		}
		cr_assert_eq(lull_producer_detach(l.prod[0]), 0);
		cr_assert_eq(lull_producer_attach(l.ring, 0, &l.prod[0]), 0);
		/* It fills what is left of the lane, no more. */
		for (sent = 0; (ret = lanes_try(&l, 0)) == 0; sent++)
			cr_assert_lt(sent, 1024 / 16);
		cr_assert_eq(ret, -EAGAIN);
		got_drain(l.ring, &g, false);
		got_all(&l, &g);
	}
	lanes_fini(&l);
}

/* Both families' calls on a LANES producer, under ring_fix.h's model. */
static void either_family(const struct topo *t)
{
	struct fix f;
	void *dst;

	fix_init(&f, t, 512);
	for (int i = 0; i < 600; i++) {
		if (i % 7 == 3)
			cr_assert_eq(fix_claim_abort(&f, (size_t)(i % 50)), 0);
		fix_feed(&f, f.ring, (enum method)(i % METHODS),
			 (size_t)(i * 13 % 57));
		if (i % 5 == 0)
			model_drain_mixed(&f.m, f.ring, (unsigned)i);
	}
	model_drain(&f.m, f.ring);
	/* A claim of one family ends with the other's commit or abort. */
	cr_assert_eq(lull_spsc_claim(f.prod, 1, 8, &dst), 0);
	cr_assert_eq(lull_mpsc_abort(f.prod), 0);
	cr_assert_eq(lull_mpsc_claim(f.prod, 1, 8, &dst), 0);
	cr_assert_eq(lull_spsc_abort(f.prod), 0);
	expect_nothing(f.ring);
	fix_fini(&f);
}

Test(lanes, producer_takes_the_spsc_calls, .timeout = TIMEOUT_S)
{
	either_family(&topo_lanes_spsc);
}

Test(lanes, producer_takes_the_mpsc_calls, .timeout = TIMEOUT_S)
{
	either_family(&topo_lanes_mpsc);
}

/* ========================================================================
 * The consumer's merge
 */

Test(lanes, each_producers_records_arrive_in_its_order, .timeout = TIMEOUT_S)
{
	struct got g = { .n = 0 };
	struct lanes l;
	int ret;

	lanes_init(&l, 1024, 4, 4);
	for (unsigned round = 0; round < 200; round++) {
		for (unsigned p = 0; p < 4; p++) {
			if ((round + p) % (p + 1))
				continue;
			ret = lanes_try(&l, p);
			cr_assert(ret == 0 || ret == -EAGAIN, "send = %d", ret);
		}
		if (round % 3 == 0)
			cr_assert_gt(lull_ring_read(l.ring, collect, &g,
						    1 + round % 9),
				     0);
		if (round % 10 == 0)
			got_drain(l.ring, &g, false);
	}
	got_drain(l.ring, &g, false);
	got_all(&l, &g);
	lanes_fini(&l);
}

/*
 * Lanes are taken in turn: with limit 1, each read after one from a busy
 * lane goes to the other; a lane is read twice in a row only when the
 * others have nothing.
 */
Test(lanes, reads_take_the_lanes_in_turn, .timeout = TIMEOUT_S)
{
	static const unsigned order[] = { 1, 0, 1, 0, 1, 0, 0, 0 };
	struct lull_record rec;
	struct got g = { .n = 0 };
	struct lanes l;
	unsigned i;

	lanes_init(&l, 1024, 3, 3);
	lanes_send(&l, 0, 6);
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
	cr_assert_eq(got_last(&g), 0);
	lanes_send(&l, 1, 3);
	for (i = 0; i < ARRAY_LEN(order); i++) {
		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
		cr_assert_eq(got_last(&g), order[i], "read %u: producer %u",
			     i, got_last(&g));
	}
	got_drain(l.ring, &g, false);
	/* Lanes refilled after every read still take turns. */
	lanes_send(&l, 0, 4);
	lanes_send(&l, 2, 4);
	for (i = 0; i < 8; i++) {
		unsigned from = g.n, prev = got_last(&g);

		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 3), 3);
		for (unsigned j = from; j < g.n; j++)
			cr_assert_eq(g.st[j].producer, got_last(&g),
				     "a read of 3 from a lane of 4 moved on");
		if (i)
			cr_assert_neq(got_last(&g), prev,
				      "read %u took the same lane again", i);
		lanes_send(&l, got_last(&g), 3);
	}
	/* Peek and release go in turn too. */
	got_drain(l.ring, &g, false);
	lanes_send(&l, 1, 3);
	lanes_send(&l, 2, 3);
	for (i = 0; i < 6; i++) {
		cr_assert_eq(lull_ring_peek(l.ring, &rec), 0);
		cr_assert_eq(collect(&rec, &g), LULL_READ_CONTINUE);
		cr_assert_eq(lull_ring_release(l.ring), 0);
		if (i)
			cr_assert_neq(got_last(&g), g.st[g.n - 2].producer,
				      "peek %u took the same lane again", i);
	}
	got_drain(l.ring, &g, false);
	got_all(&l, &g);
	lanes_fini(&l);
}

Test(lanes, peek_holds_its_record_while_other_lanes_fill,
     .timeout = TIMEOUT_S)
{
	struct lull_record rec, again;
	struct got g = { .n = 0 };
	struct lanes l;

	lanes_init(&l, 1024, 2, 2);
	lanes_send(&l, 0, 1);
	cr_assert_eq(lull_ring_peek(l.ring, &rec), 0);
	lanes_send(&l, 1, 2);
	lanes_send(&l, 0, 1);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_ring_peek(l.ring, &again), 0);
		cr_assert(again.data == rec.data && again.len == rec.len &&
			  again.type == rec.type, "peek %d moved on", i);
	}
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), -EINVAL);
	cr_assert_eq(collect(&rec, &g), LULL_READ_CONTINUE);
	cr_assert_eq(g.st[0].producer, 0);
	cr_assert_eq(lull_ring_release(l.ring), 0);
	cr_assert_eq(lull_ring_release(l.ring), -EINVAL);
	/* Then the other lane's turn. */
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
	cr_assert_eq(got_last(&g), 1);
	got_drain(l.ring, &g, false);
	got_all(&l, &g);
	lanes_fini(&l);
}

/*
 * A record the handler keeps (LULL_READ_KEEP) is "handed out again by the
 * next read" (lull_ring_read(3)): first, before another lane's turn.
 */
struct keeper {
	struct got *g;
	unsigned take; /* records to consume before keeping one */
	struct stamp kept;
};

static int keep_after(const struct lull_record *rec, void *ctx)
{
	struct keeper *k = ctx;

	if (k->take == 0) {
		memcpy(&k->kept, rec->data, sizeof(k->kept));
		return LULL_READ_KEEP;
	}
	k->take--;
	return collect(rec, k->g);
}

Test(lanes, kept_record_is_the_first_of_the_next_read, .timeout = TIMEOUT_S)
{
	struct got g = { .n = 0 };
	struct keeper k = { .g = &g };
	struct lanes l;

	lanes_init(&l, 1024, 2, 2);
	for (unsigned take = 0; take < 3; take++) {
		lanes_send(&l, 0, 3);
		lanes_send(&l, 1, 3);
		/* Consume @take records of a lane, keep the next one. */
		k.take = take;
		cr_assert_eq(lull_ring_read(l.ring, keep_after, &k, 8),
			     (int)take);
		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
		cr_assert(got_last(&g) == k.kept.producer &&
				  g.st[g.n - 1].seq == k.kept.seq,
			  "kept %u/%u, the next read handed %u/%u",
			  k.kept.producer, k.kept.seq, got_last(&g),
			  g.st[g.n - 1].seq);
		got_drain(l.ring, &g, false);
	}
	got_all(&l, &g);
	lanes_fini(&l);
}

/* ========================================================================
 * Capacity per lane
 */

static int count_any(const struct lull_record *rec, void *ctx)
{
	(void)rec;
	++*(unsigned *)ctx;
	return LULL_READ_CONTINUE;
}

Test(lanes, capacity_is_per_lane, .timeout = TIMEOUT_S)
{
	static const char full[24] = "a lane full of these";
	unsigned fits, read = 0;
	struct lanes l;

	lanes_init(&l, 256, 3, 3);
	cr_assert_eq(lull_ring_capacity(l.ring), 256);
	/* Each lane takes 256 bytes, whatever the others hold. */
	for (unsigned p = 0; p < 3; p++) {
		for (fits = 0; lull_spsc_write(l.prod[p], 1, full, 24) ==
			       0;
		     fits++)
			;
		cr_assert_eq(fits, 8, "lane %u held %u records of 32 bytes", p,
			     fits);
		cr_assert_eq(lull_mpsc_write(l.prod[p], 1, "x", 1), -EAGAIN);
	}
	/* A read frees room in one lane only. */
	cr_assert_eq(lull_ring_read(l.ring, count_any, &read, 1), 1);
	for (unsigned p = 0, room = 0; p < 3; p++) {
		room += lull_spsc_write(l.prod[p], 1, full, 24) == 0;
		cr_assert_leq(room, 1, "a read made room in two lanes");
		cr_assert_eq(lull_spsc_write(l.prod[p], 1, "x", 1), -EAGAIN);
	}
	/* Every lane's records, 3 x 8 of them, then the poison. */
	lanes_fini_keep(&l);
	while (lull_ring_read(l.ring, count_any, &read, 5) > 0)
		;
	cr_assert_eq(read, 1 + 3 * 8 + 1);
	cr_assert_eq(lull_ring_destroy(l.ring), 0);
}

/* ========================================================================
 * Shutdown
 */

Test(lanes, graceful_shutdown_delivers_every_lane_then_one_poison,
     .timeout = TIMEOUT_S)
{
	struct lull_producer *late;
	struct got g = { .n = 0 };
	struct lanes l;

	lanes_init(&l, 1024, 4, 4);
	for (unsigned p = 0; p < 4; p++) {
		lanes_send(&l, p, 2 + p);
		cr_assert_eq(lanes_batch(&l, p, 3), 0);
	}
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 2), 2);
	cr_assert_eq(lull_ring_shutdown(l.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	for (unsigned p = 0; p < 4; p++) {
		cr_assert_eq(lanes_try(&l, p), -EPIPE);
		cr_assert_eq(lanes_batch(&l, p, 2), -EPIPE);
	}
	/* A lane freed after the shutdown takes no new producer. */
	cr_assert_eq(lull_producer_detach(l.prod[3]), 0);
	l.prod[3] = NULL;
	cr_assert_eq(lull_producer_attach(l.ring, 0, &late), -EPIPE);
	got_drain(l.ring, &g, true);
	got_all(&l, &g);
	lanes_fini(&l);
}

Test(lanes, immediate_shutdown_discards_all_but_a_batch_begun,
     .timeout = TIMEOUT_S)
{
	struct got g = { .n = 0 };
	struct lanes l;

	lanes_init(&l, 1024, 3, 3);
	for (unsigned p = 0; p < 3; p++)
		lanes_send(&l, p, 4);
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
	cr_assert_eq(lull_ring_shutdown(l.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	got_drain(l.ring, &g, true);
	cr_assert_eq(g.n, 1, "%u records after an immediate shutdown", g.n);
	lanes_fini(&l);

	/* The batch of lane 0 was begun: its rest comes, lane 1's not. */
	memset(&g, 0, sizeof(g));
	lanes_init(&l, 1024, 2, 2);
	cr_assert_eq(lanes_batch(&l, 0, 4), 0);
	cr_assert_eq(lanes_batch(&l, 1, 3), 0);
	lanes_send(&l, 1, 1);
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 1), 1);
	cr_assert_eq(lull_ring_shutdown(l.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	got_drain(l.ring, &g, true);
	cr_assert_eq(g.next[got_last(&g)], 4, "the begun batch was cut");
	cr_assert_eq(g.n, 4, "%u records: a batch not begun came too", g.n);
	lanes_fini(&l);
}

Test(lanes, last_detach_shuts_the_ring_down, .timeout = TIMEOUT_S)
{
	struct lull_producer *late;
	struct got g = { .n = 0 };
	struct lanes l;

	lanes_init(&l, 1024, 3, 3);
	for (unsigned p = 0; p < 3; p++)
		lanes_send(&l, p, 3);
	for (unsigned p = 0; p < 2; p++) {
		cr_assert_eq(lull_producer_detach(l.prod[p]), 0);
		l.prod[p] = NULL;
		got_drain(l.ring, &g, false);
	}
	lanes_send(&l, 2, 2);
	/* One comes and goes: still not the last. */
	cr_assert_eq(lull_producer_attach(l.ring, 0, &late), 0);
	cr_assert_eq(lull_producer_detach(late), 0);
	cr_assert_eq(lull_producer_detach(l.prod[2]), 0);
	l.prod[2] = NULL;
	cr_assert_eq(lull_producer_attach(l.ring, 0, &late), -EPIPE);
	got_drain(l.ring, &g, true);
	got_all(&l, &g);
	lanes_fini(&l);
}

/*
 * A claim taken before a graceful shutdown holds the poison back until it
 * commits (and is delivered) or aborts.
 */
Test(lanes, claim_open_at_a_graceful_shutdown_may_still_commit,
     .timeout = TIMEOUT_S)
{
	struct lull_claim claims[2] = { { NULL, 16, 3 }, { NULL, 0, 3 } };
	struct got g = { .n = 0 };
	struct lanes l;

	for (int abort = 0; abort < 2; abort++) {
		memset(&g, 0, sizeof(g));
		lanes_init(&l, 1024, 2, 2);
		if (abort)
			cr_assert_eq(lull_mpsc_claim_batch(l.prod[0], claims, 2),
				     0);
		else
			cr_assert_eq(stamp_claim(&topo_lanes_spsc, l.prod[0], 0,
						 0),
				     0);
		lanes_send(&l, 1, 2);
		cr_assert_eq(lull_ring_shutdown(l.ring, LULL_SHUTDOWN_GRACEFUL),
			     0);
		cr_assert_eq(lanes_try(&l, 1), -EPIPE);
		got_drain(l.ring, &g, false); /* no poison yet */
		cr_assert_eq(g.n, 2);
		if (abort) {
			fill_fake_headers(claims[0].data, claims[0].len);
			cr_assert_eq(lull_spsc_abort(l.prod[0]), 0);
		} else {
			cr_assert_eq(lull_mpsc_commit(l.prod[0]), 0);
			l.seq[0]++;
		}
		got_drain(l.ring, &g, true);
		got_all(&l, &g);
		lanes_fini(&l);
	}
}

/* ========================================================================
 * Parking: a record in any lane wakes the consumer
 */

Test(lanes, wait_wakes_for_a_record_in_any_lane, .timeout = TIMEOUT_S)
{
	static const unsigned order[] = { 2, 0, 3, 1, 1 };
	struct lull_park_config cfg = { .spin_ns = 0 };
	struct lull_ring_stats base, st;
	struct got g = { .n = 0 };
	struct watchdog wd;
	struct lanes l;
	pthread_t th;
	int ret;

	cr_assert_eq(watchdog_start(&wd, 25, "lanes: a parked consumer"), 0);
	lanes_init(&l, 1024, 4, 4);
	cr_assert_eq(lull_ring_park_config(l.ring, &cfg), 0);
	for (unsigned round = 0; round <= ARRAY_LEN(order); round++) {
		struct waker w = { .l = &l, .consumer = gettid() };

		w.detach_all = round == ARRAY_LEN(order);
		w.p = w.detach_all ? 0 : order[round];
		cr_assert_eq(lull_ring_stats(l.ring, &base), 0);
		cr_assert_eq(thread_start(&th, wake_when_parked, &w), 0);
		ret = lull_ring_wait(l.ring, 10 * SEC_NS);
		thread_join_or_fail(th, 15000, "the producer waiting for a park");
		cr_assert_eq(w.ret, 0, "round %u: the producer: %d", round,
			     w.ret);
		cr_assert_eq(ret, 0, "round %u: wait = %d", round, ret);
		cr_assert_eq(lull_ring_stats(l.ring, &st), 0);
		cr_assert_gt(st.parks, base.parks, "round %u: no park", round);
		if (w.detach_all)
			break;
		cr_assert_gt(st.wakes, base.wakes, "round %u: no wake-up",
			     round);
		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 8), 1);
		cr_assert_eq(got_last(&g), w.p);
	}
	got_drain(l.ring, &g, true);
	got_all(&l, &g);
	lanes_fini(&l);
	watchdog_stop(&wd);
}

/* ========================================================================
 * claim_waits: reads stopped at a claim, which only MPSC has
 */

Test(mpsc, read_stopped_at_a_claim_counts_a_claim_wait, .timeout = TIMEOUT_S)
{
	struct lull_ring_stats st;
	struct got g = { .n = 0 };
	struct lanes l;

	memset(&l, 0, sizeof(l));
	cr_assert_eq(lull_ring_create(&l.ring, 1024, LULL_RING_MPSC), 0);
	lanes_attach(&l);
	lanes_attach(&l);
	/* An empty ring is no claim wait. */
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), -EAGAIN);
	cr_assert_eq(lull_ring_stats(l.ring, &st), 0);
	cr_assert_eq(st.claim_waits, 0);
	cr_assert_eq(stamp_claim(&topo_mpsc, l.prod[0], 0, 0), 0);
	cr_assert_eq(stamp_send(&topo_mpsc, l.prod[1], 1, 0), 0);
	l.seq[1]++;
	for (uint64_t i = 1; i <= 3; i++) {
		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), -EAGAIN);
		cr_assert_eq(lull_ring_stats(l.ring, &st), 0);
		cr_assert_eq(st.claim_waits, i, "after %llu reads: %llu",
			     (unsigned long long)i,
			     (unsigned long long)st.claim_waits);
	}
	cr_assert_eq(lull_mpsc_commit(l.prod[0]), 0);
	l.seq[0]++;
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), 2);
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), -EAGAIN);
	cr_assert_eq(lull_ring_stats(l.ring, &st), 0);
	cr_assert_eq(st.claim_waits, 3);
	got_all(&l, &g);
	lanes_fini(&l);
}

Test(lanes, claim_waits_stay_zero, .timeout = TIMEOUT_S)
{
	struct lull_ring_stats st;
	struct got g = { .n = 0 };
	struct lanes l;

	lanes_init(&l, 1024, 2, 2);
	cr_assert_eq(stamp_claim(&topo_lanes_mpsc, l.prod[0], 0, 0), 0);
	lanes_send(&l, 1, 1);
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), -EAGAIN);
	cr_assert_eq(lull_mpsc_commit(l.prod[0]), 0);
	l.seq[0]++;
	cr_assert_eq(lull_ring_read(l.ring, collect, &g, 4), 1);
	cr_assert_eq(lull_ring_stats(l.ring, &st), 0);
	cr_assert_eq(st.claim_waits, 0);
	got_all(&l, &g);
	lanes_fini(&l);
}

/* ========================================================================
 * Four producer threads: batches of random sizes and single writes
 */

Test(lanes, four_producer_threads_batches_arrive_whole_in_order,
     .timeout = TIMEOUT_S)
{
	/* Static: a failed assertion leaves the threads running. */
	static struct tprod tp[T_PRODUCERS];
	static struct ledger ledger;
	pthread_t th[T_PRODUCERS];
	struct lull_ring_stats st;
	struct tcons c = { .open = -1 };
	struct lull_ring *ring;
	struct watchdog wd;
	unsigned limit = 1;
	int ret;

	cr_assert_eq(watchdog_start(&wd, 25, "lanes: four producer threads"),
		     0);
	cr_assert_eq(ledger_init(&ledger, T_PRODUCERS), 0);
	c.ledger = &ledger;
	cr_assert_eq(lull_ring_create(&ring, 4096,
				      LULL_RING_LANES(T_PRODUCERS)),
		     0);
	/* Attached before any thread runs, so no detach ends it early. */
	for (unsigned i = 0; i < T_PRODUCERS; i++) {
		tp[i] = (struct tprod){ .ring = ring, .ledger = &ledger,
					.id = i, .rng = 0x2545f4914f6cdd1dull * (i + 1) };
		cr_assert_eq(thread_start(&th[i], tproducer_main, &tp[i]), 0);
	}
	for (;;) {
		c.open = -1;
		ret = lull_ring_read(ring, tconsume, &c, limit);
		if (ret == -EPIPE)
			break;
		if (ret == -EAGAIN) {
			ret = lull_ring_wait(ring, 5 * SEC_NS);
			cr_assert(ret == 0 || ret == -EPIPE, "wait = %d", ret);
			continue;
		}
		cr_assert_gt(ret, 0, "read = %d", ret);
		cr_assert((unsigned)ret == limit || c.open < 0,
			  "a read of %d (limit %u) ended inside producer "
			  "%d's batch", ret, limit, c.open);
		limit = limit % 37 + 1;
	}
	for (unsigned i = 0; i < T_PRODUCERS; i++) {
		thread_join_or_fail(th[i], 10000, "a producer thread");
		cr_assert_eq(tp[i].why[0], '\0', "%s", tp[i].why);
		/* A lane producer shares no tail: it never retries. */
		cr_assert_eq(tp[i].st.claim_retries, 0);
	}
	cr_assert_eq(c.poisons, 1);
	cr_assert(ledger_complete(&ledger), "%s", ledger.why);
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	cr_assert_eq(st.claim_waits, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	ledger_fini(&ledger);
	watchdog_stop(&wd);
}
