/* SPDX-License-Identifier: MIT */
/*
 * test_park_handshake.c - the Criterion suites of the park/wake handshake
 * through each backend case: records in order from producer threads,
 * coalescing (a busy consumer costs producers no wake-up, a burst to a
 * parked one costs exactly one), and the park barrier's mode following
 * the traffic.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/*
 * Records in order from two producer threads with random gaps, which
 * start once the consumer is parked: at least one wake-up, never more
 * than there were parks announced, and no lost wake-up.
 */
static void check_round_trip(const struct backend_case *bc)
{
	enum { PER_SENDER = 3000 };
	struct sender s[2] = {
		{ .id = 0, .count = PER_SENDER, .gap_max_ns = 20000 },
		{ .id = 1, .count = PER_SENDER, .gap_max_ns = 20000 },
	};
	struct lull_ring_stats st;
	struct consumer c;
	struct lull_ring *ring;

	require(bc->backend);
	ring = new_ring(LULL_RING_MPSC, 4096);
	consumer_init(&c, bc, ring);
	c.expected = 2 * PER_SENDER;
	consumer_start(&c);
	wait_parked(&c);
	s[0].ring = s[1].ring = ring;
	senders_run(s, 2);
	consumer_join(&c);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_geq(st.wakes, 1, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_leq(st.wakes, st.parks + st.park_cancels,
		      "%s: more wake-ups than parks announced: " ST_FMT,
		      bc->name, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * A consumer that is awake (spinning, or polling after its own-io_uring
 * park ended) while @n producers commit many records: they make no
 * wake-up, and it parks no more.
 */
static void check_busy(const struct backend_case *bc, unsigned n)
{
	enum { PER_SENDER = 20000 };
	struct sender s[MAX_SENDERS];
	struct lull_ring_stats base, st;
	struct lull_producer *first;
	struct consumer c;
	struct lull_ring *ring;

	require(bc->backend);
	ring = new_ring(n > 1 ? LULL_RING_MPSC : LULL_RING_SPSC, 1 << 16);
	consumer_init(&c, bc, ring);
	c.expected = 1 + (uint64_t)n * PER_SENDER;
	/*
	 * Spin far longer than the producers need.  A loop keeps spinning
	 * after lull_loop_stop() (see stop_ends_a_spinning_loop_promptly), so
	 * its spin is only long, not endless.
	 */
	if (bc->via == VIA_URING)
		c.busy = true;
	else if (bc->via == VIA_LOOP)
		c.spin_ns = NSEC_PER_SEC;
	else
		c.spin_ns = 60 * NSEC_PER_SEC;
	consumer_start(&c);
	if (bc->via == VIA_URING)
		wait_parked(&c); /* then the first record ends its park */
	first = write_one(ring, 0, 0);
	wait_received(&c, 1);
	base = stats_of(ring);
	memset(s, 0, sizeof(s));
	for (unsigned i = 0; i < n; i++) {
		s[i].ring = ring;
		s[i].id = i;
		s[i].first_seq = i == 0;
		s[i].count = PER_SENDER;
	}
	/* Sender 0 goes on with the producer that wrote record 0. */
	s[0].prod = first;
	senders_run(s, n);
	consumer_join(&c);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, base.wakes,
		     "%s: producers made wake-ups while the consumer was "
		     "awake: " ST_FMT,
		     bc->name, ST_ARGS(st));
	cr_assert_eq(st.parks, base.parks, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	if (bc->via != VIA_URING)
		cr_assert_eq(st.wakes, 0, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * A parked consumer, @n producers committing 1000 records each, and a
 * consumer that reads nothing until every commit is done: one wake-up.
 */
static void check_burst(const struct backend_case *bc, unsigned n)
{
	enum { PER_SENDER = 1000 };
	struct sender s[MAX_SENDERS];
	struct lull_ring_stats base, st;
	struct gate gate = GATE_INIT;
	struct consumer c;
	struct lull_ring *ring;

	require(bc->backend);
	ring = new_ring(n > 1 ? LULL_RING_MPSC : LULL_RING_SPSC, 1 << 17);
	consumer_init(&c, bc, ring);
	c.expected = (uint64_t)n * PER_SENDER;
	c.on_record = hold_first_record;
	c.arg = &gate;
	consumer_start(&c);
	wait_parked(&c);
	base = stats_of(ring);
	cr_assert_eq(base.wakes, 0);
	memset(s, 0, sizeof(s));
	for (unsigned i = 0; i < n; i++) {
		s[i].ring = ring;
		s[i].id = i;
		s[i].count = PER_SENDER;
	}
	senders_run(s, n);
	gate_open(&gate);
	consumer_join(&c);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, 1,
		     "%s: %u x %d commits to a parked consumer: " ST_FMT,
		     bc->name, n, PER_SENDER, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}
/*
 * What the consumer saw of the barrier's mode: it holds the stream's
 * first record until the test has written the whole stream, and notes
 * park_fence as it reads the stream's last.
 */
struct mode_watch {
	struct gate gate;
	uint64_t stream_first, stream_last;
	uint32_t fence_at_last;
};

static void watch_mode(struct consumer *c, const struct msg *m)
{
	struct mode_watch *w = c->arg;

	if (m->seq == w->stream_first)
		gate_wait(&w->gate);
	if (m->seq == w->stream_last)
		w->fence_at_last = park_fence_word(c->ring);
}

/* One record to a parked consumer; returns once it parked again. */
static void trickle_one(struct consumer *c, struct lull_producer *prod,
			uint64_t seq)
{
	cr_assert_eq(write_msg(prod, false, 0, seq), 0);
	wait_received(c, seq + 1);
	wait_parked(c);
}

/*
 * The park barrier follows the traffic (lib/park.h): a consumer that
 * parks after every record asks its producers to fence, and then parks
 * with a fence alone; a stream of more records than
 * LULL_PARK_STREAM_RECORDS takes the request back while it is read,
 * before any park, and the parks after it use membarrier(2) again until
 * records trickle once more.  A park with nothing read before it (the
 * first) asks nothing.  Every record arrives, in order, through both
 * switches.  Only a ring whose barrier is asymmetric has the modes.
 */
static void check_barrier_mode(const struct backend_case *bc)
{
	enum { TRICKLE = 20, STREAM = 2 * LULL_PARK_STREAM_RECORDS };
	struct mode_watch w = { .gate = GATE_INIT };
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t seq = 0;

	require(bc->backend);
	ring = new_ring(LULL_RING_SPSC, 1 << 16);
	if (!(ring->flags & LULL_REGION_ASYM_BARRIER)) {
		cr_assert_eq(lull_ring_destroy(ring), 0);
		cr_skip_test("membarrier(2) is not available: both sides "
			     "always fence");
	}
	consumer_init(&c, bc, ring);
	/* The last record ends the consumer's run: no park after it. */
	c.expected = 2 * TRICKLE + STREAM + 1;
	w.stream_first = TRICKLE;
	w.stream_last = TRICKLE + STREAM - 1;
	c.on_record = watch_mode;
	c.arg = &w;
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	consumer_start(&c);
	wait_parked(&c);
	/* Parked with nothing read: no traffic to go by yet. */
	cr_assert_eq(park_fence_word(ring), 0, "%s: the first park",
		     bc->name);
	for (; seq < TRICKLE; seq++) {
		trickle_one(&c, prod, seq);
		cr_assert_eq(park_fence_word(ring), 1,
			     "%s: after record %" PRIu64, bc->name, seq);
	}
	/* The stream, held at its first record until all of it is in. */
	for (; seq < TRICKLE + STREAM; seq++)
		cr_assert_eq(write_msg(prod, false, 0, seq), 0);
	gate_open(&w.gate);
	wait_received(&c, seq);
	wait_parked(&c);
	cr_assert_eq(w.fence_at_last, 0,
		     "%s: still asking for fences at the stream's end",
		     bc->name);
	cr_assert_eq(park_fence_word(ring), 0, "%s: the park after a stream",
		     bc->name);
	/* A trickle again: the park after its first record asks again. */
	for (; seq < 2 * TRICKLE + STREAM; seq++) {
		trickle_one(&c, prod, seq);
		cr_assert_eq(park_fence_word(ring), 1,
			     "%s: after record %" PRIu64, bc->name, seq);
	}
	cr_assert_eq(write_msg(prod, false, 0, seq), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_join(&c);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

#define HANDSHAKE_TESTS(suite, bc)                                           \
	Test(suite, delivers_records_from_two_producer_threads_in_order,     \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_round_trip(&bc);                                       \
	}                                                                    \
	Test(suite, busy_consumer_costs_a_producer_no_wake,                  \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_busy(&bc, 1);                                          \
	}                                                                    \
	Test(suite, busy_consumer_costs_4_producers_no_wake,                 \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_busy(&bc, 4);                                          \
	}                                                                    \
	Test(suite, burst_of_1000_commits_to_a_parked_consumer_is_one_wake,  \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_burst(&bc, 1);                                         \
	}                                                                    \
	Test(suite, bursts_of_1000_commits_from_4_producers_are_one_wake,    \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_burst(&bc, 4);                                         \
	}                                                                    \
	Test(suite, park_barrier_fences_while_parks_are_frequent,            \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_barrier_mode(&bc);                                     \
	}

HANDSHAKE_TESTS(blocking, blocking_case)
HANDSHAKE_TESTS(own_uring_futex, own_futex_case)
HANDSHAKE_TESTS(own_uring_eventfd, own_eventfd_case)
HANDSHAKE_TESTS(loop_uring_futex, loop_futex_case)
HANDSHAKE_TESTS(loop_uring_eventfd, loop_eventfd_case)
HANDSHAKE_TESTS(loop_epoll, loop_epoll_case)
