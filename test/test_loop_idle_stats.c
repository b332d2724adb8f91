/* SPDX-License-Identifier: MIT */
/*
 * test_loop_idle_stats.c - the Criterion suite loop: an idle loop sleeps in
 * one park without waking, a loop woken by a record takes one pass before
 * it parks again, and the counters of delivered records and completions.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

/* ========================================================================
 * Idle: a parked loop stays parked
 */

struct idle {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct lull_producer *prod;
	pid_t loop_tid;
	_Atomic unsigned seen;
	struct rusage ru[2];
	struct lull_loop_stats st[2];
	bool slept;
	int write_ret;      /* the producer thread's */
	int handler_error;  /* the loop thread's */
	unsigned poisons;
};

/*
 * Records 0, 1 and 2: the measured idle period lies between 1 and 2, so
 * that the first park (which sets up what later parks reuse, one more
 * context switch on io_uring) is not part of it.
 */
static int idle_handler(const struct lull_record *record, void *ctx)
{
	struct idle *d = ctx;
	unsigned n = atomic_load(&d->seen);

	/* The stop's poison: after the three records. */
	if (record->type < 1) {
		if (is_poison(record) && n == 3)
			d->poisons++;
		else
			d->handler_error = -EPROTO;
		return LULL_READ_CONTINUE;
	}
	if (n == 1 || n == 2) {
		getrusage(RUSAGE_THREAD, &d->ru[n - 1]);
		lull_loop_stats(d->loop, &d->st[n - 1]);
	}
	if (n == 2)
		lull_loop_stop(d->loop);
	atomic_store_explicit(&d->seen, n + 1, memory_order_release);
	return LULL_READ_CONTINUE;
}

static void *idle_producer(void *arg)
{
	const struct timespec idle_time = { .tv_sec = 1 };
	struct idle *d = arg;

	/* A first park and wake-up... */
	d->slept = wait_at_least(&d->seen, 1) && wait_sleeping(d->loop_tid);
	d->write_ret = write_rec(d->prod, false, 0, 1);
	if (!d->slept || d->write_ret) {
		/* The test fails on these; end the run so that it says why. */
		lull_loop_stop(d->loop);
		return NULL;
	}
	/* ...then the one measured. */
	d->slept = wait_at_least(&d->seen, 2) && wait_sleeping(d->loop_tid);
	/* The idle period itself: nothing to synchronize here. */
	nanosleep(&idle_time, NULL);
	d->write_ret = write_rec(d->prod, false, 0, 2);
	return NULL;
}

LOOP_TEST(idle_loop_sleeps_in_one_park_without_waking, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct idle d = { .loop_tid = thread_id() };
	struct lull_ring_stats rs;
	pthread_t producer;
	long csw;

	d.loop = loop_new(backend, 10 * SEC);
	d.ring = ring_new(LULL_RING_SPSC, 4096);
	d.prod = producer_new(d.ring);
	check_eq(lull_loop_attach(d.loop, d.ring, idle_handler, &d, 0), 0);
	check_eq(write_rec(d.prod, false, 0, 0), 0);
	check_eq(pthread_create(&producer, NULL, idle_producer, &d), 0);
	run_loop(d.loop);
	join_within(producer, 8000, "a producer thread");
	check(d.slept, "the loop's thread never went to sleep");
	check_eq(d.write_ret, 0);
	check_eq(d.handler_error, 0);
	check_eq(atomic_load(&d.seen), 3);
	check_eq(d.poisons, 1);

	/* Across 1 s of idle: one park, its wake-up, nothing else. */
	check_op(d.st[1].parks - d.st[0].parks, <=, 1);
	check_op(d.st[1].iterations - d.st[0].iterations, <=, 3);
	check_eq(d.st[1].safety_timeouts - d.st[0].safety_timeouts, 0);
	csw = d.ru[1].ru_nvcsw - d.ru[0].ru_nvcsw;
	check(csw <= 2, "%ld voluntary context switches in 1 s of idle", csw);
	check_eq(lull_ring_stats(d.ring, &rs), 0);
	check_eq(rs.safety_timeouts, 0);
	check_eq(rs.idle_timeouts, 0);
	check_op(rs.wakes, <=, 2);

	check_eq(lull_producer_detach(d.prod), 0);
	loop_free(d.loop);
	check_eq(lull_ring_destroy(d.ring), 0);
}

/* ========================================================================
 * A wake-up: one pass, then the park
 */

#define WAKE_ROUNDS 20u

struct wakes {
	struct lull_loop *loop;
	struct lull_producer *prod;
	pid_t loop_tid;
	_Atomic unsigned seen;
	struct lull_loop_stats st[WAKE_ROUNDS];
	bool slept;
	int write_ret;      /* the producer thread's */
	int handler_error;  /* the loop thread's */
	unsigned poisons;
};

/* Record k: the loop's counters as its handler finds them. */
static int wakes_handler(const struct lull_record *record, void *ctx)
{
	struct wakes *d = ctx;
	unsigned n = atomic_load(&d->seen);

	if (record->type < 1) {
		if (is_poison(record) && n == WAKE_ROUNDS)
			d->poisons++;
		else
			d->handler_error = -EPROTO;
		return LULL_READ_CONTINUE;
	}
	if (n < WAKE_ROUNDS)
		lull_loop_stats(d->loop, &d->st[n]);
	if (n + 1 == WAKE_ROUNDS)
		lull_loop_stop(d->loop);
	atomic_store_explicit(&d->seen, n + 1, memory_order_release);
	return LULL_READ_CONTINUE;
}

/* Each record only once the loop sleeps: every one is a wake-up. */
static void *wakes_producer(void *arg)
{
	struct wakes *d = arg;

	d->slept = true;
	for (unsigned k = 0; k < WAKE_ROUNDS; k++) {
		if (!wait_at_least(&d->seen, k) ||
		    !wait_sleeping(d->loop_tid)) {
			d->slept = false;
			lull_loop_stop(d->loop);
			return NULL;
		}
		d->write_ret = write_rec(d->prod, false, 0, k);
		if (d->write_ret) {
			lull_loop_stop(d->loop);
			return NULL;
		}
	}
	return NULL;
}

/*
 * A loop woken by a record hands it out, takes one pass that finds nothing
 * more, and parks again: its own wake-up is not work that asks for a
 * second pass (it made two on io_uring, reaping the wake's completion).
 */
LOOP_TEST(a_wake_up_by_one_record_costs_one_pass, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct wakes d = { .loop_tid = thread_id() };
	struct lull_ring *ring;
	pthread_t producer;
	uint64_t passes, parks;

	d.loop = loop_new(backend, 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	d.prod = producer_new(ring);
	check_eq(lull_loop_attach(d.loop, ring, wakes_handler, &d, 0), 0);
	check_eq(pthread_create(&producer, NULL, wakes_producer, &d), 0);
	run_loop(d.loop);
	join_within(producer, 8000, "a producer thread");
	check(d.slept, "the loop's thread never went to sleep");
	check_eq(d.write_ret, 0);
	check_eq(d.handler_error, 0);
	check_eq(atomic_load(&d.seen), WAKE_ROUNDS);
	check_eq(d.poisons, 1);

	/* From the second wake-up on (the first park sets up the rest). */
	passes = d.st[WAKE_ROUNDS - 1].iterations - d.st[1].iterations;
	parks = d.st[WAKE_ROUNDS - 1].parks - d.st[1].parks;
	check_eq(parks, WAKE_ROUNDS - 2);
	check(passes <= WAKE_ROUNDS - 2 + 1,
	      "%llu passes for %u wake-ups: more than one each",
	      (unsigned long long)passes, WAKE_ROUNDS - 2);

	check_eq(lull_producer_detach(d.prod), 0);
	loop_free(d.loop);
	check_eq(lull_ring_destroy(ring), 0);
}

/* ========================================================================
 * Counters
 */

#define STATS_RINGS 3u
#define STATS_RECORDS 50u
#define STATS_NOPS 20u

struct stats_run {
	struct lull_loop *loop;
	unsigned records, nops;
	unsigned poisons, errors;
};

static void stats_maybe_stop(struct stats_run *s)
{
	if (s->records == STATS_RINGS * STATS_RECORDS &&
	    s->nops == STATS_NOPS)
		lull_loop_stop(s->loop);
}

static int stats_handler(const struct lull_record *record, void *ctx)
{
	struct stats_run *s = ctx;

	/* The stop's poison, once per ring, after every record. */
	if (record->type < 1) {
		if (!is_poison(record) ||
		    s->records != STATS_RINGS * STATS_RECORDS)
			s->errors++;
		s->poisons++;
		return LULL_READ_CONTINUE;
	}
	s->records++;
	stats_maybe_stop(s);
	return LULL_READ_CONTINUE;
}

static void stats_nop(struct lull_loop *loop, int res, uint32_t flags,
		      void *ctx)
{
	struct stats_run *s = ctx;

	(void)loop;
	(void)res;
	(void)flags;
	s->nops++;
	stats_maybe_stop(s);
}

LOOP_TEST(stats_count_delivered_records_and_completions, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_producer *prods[STATS_RINGS];
	struct lull_ring *rings[STATS_RINGS];
	struct stats_run s = { 0 };
	struct lull_loop_stats st;

	s.loop = loop_new(backend, 0);
	st = loop_stats(s.loop);
	check_eq(st.iterations + st.parks + st.park_cancels +
			 st.safety_timeouts + st.records + st.completions,
		 0);
	for (unsigned i = 0; i < STATS_RINGS; i++) {
		rings[i] = ring_new(LULL_RING_MPSC, 4096);
		prods[i] = producer_new(rings[i]);
		for (uint32_t k = 0; k < STATS_RECORDS; k++)
			check_eq(write_rec(prods[i], true, i, k), 0);
		check_eq(lull_loop_attach(s.loop, rings[i], stats_handler, &s,
					  7),
			 0);
	}
	for (unsigned i = 0; i < STATS_NOPS; i++)
		get_sqe(s.loop, stats_nop, &s);
	run_loop(s.loop);
	st = loop_stats(s.loop);
	check_eq(s.records, STATS_RINGS * STATS_RECORDS);
	check_eq(s.nops, STATS_NOPS);
	check_eq(s.poisons, STATS_RINGS);
	check_eq(s.errors, 0);
	/* Every record handed to a handler counts, the poisons too. */
	check_eq(st.records, STATS_RINGS * STATS_RECORDS + STATS_RINGS);
	check_eq(st.completions, STATS_NOPS);
	check_op(st.iterations, >=, STATS_RECORDS / 7);
	for (unsigned i = 0; i < STATS_RINGS; i++) {
		/* The loop detached each ring after its poison. */
		check_ring_ended(s.loop, rings[i], prods[i], true);
		check_eq(lull_producer_detach(prods[i]), 0);
		check_eq(lull_ring_destroy(rings[i]), 0);
	}
	loop_free(s.loop);
}

