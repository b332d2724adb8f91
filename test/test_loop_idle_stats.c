/* SPDX-License-Identifier: MIT */
/*
 * test_loop_idle_stats.c - the Criterion suite loop: an idle loop sleeps in
 * one park without waking, a loop woken by a record takes one pass before
 * it parks again, and the counters of delivered records and completions.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

/* ========================================================================
 * A loop fed one record at a time
 */

#define WOKEN_MAX 20u

/*
 * A producer thread writes @records records, each when it chooses; the
 * loop's handler keeps the loop's counters and its thread's rusage as each
 * one arrives, and stops the loop after the last.
 */
struct woken {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct lull_producer *prod;
	pid_t loop_tid;
	unsigned records;
	_Atomic unsigned seen;
	struct rusage ru[WOKEN_MAX];
	struct lull_loop_stats st[WOKEN_MAX];
	bool slept;
	int write_ret;      /* the producer thread's */
	int handler_error;  /* the loop thread's */
	unsigned poisons;
};

static int woken_handler(const struct lull_record *record, void *ctx)
{
	struct woken *d = ctx;
	unsigned n = atomic_load(&d->seen);

	/* The stop's poison: after every record. */
	if (record->type < 1 || n >= d->records) {
		if (is_poison(record) && n == d->records)
			d->poisons++;
		else
			d->handler_error = -EPROTO;
		return LULL_READ_CONTINUE;
	}
	getrusage(RUSAGE_THREAD, &d->ru[n]);
	lull_loop_stats(d->loop, &d->st[n]);
	if (n + 1 == d->records)
		lull_loop_stop(d->loop);
	/* Pairs with wait_at_least()'s acquire: st[n] and ru[n] are kept. */
	atomic_store_explicit(&d->seen, n + 1, memory_order_release);
	return LULL_READ_CONTINUE;
}

/* Record @k, once the loop handled the one before and sleeps again. */
static bool woken_write_when_asleep(struct woken *d, unsigned k)
{
	d->slept = wait_at_least(&d->seen, k) && wait_sleeping(d->loop_tid);
	if (d->slept)
		d->write_ret = write_rec(d->prod, false, 0, k);
	if (!d->slept || d->write_ret) {
		/* The test fails on these; end the run so that it says why. */
		lull_loop_stop(d->loop);
		return false;
	}
	return true;
}

/*
 * Run a loop on @backend that @producer feeds (record 0 is written before,
 * if @first_before), and check how it ended.
 */
static void woken_run(struct woken *d, enum lull_backend backend,
		      uint64_t safety_ns, unsigned records, bool first_before,
		      void *(*producer)(void *))
{
	pthread_t thread;

	check_op(records, <=, WOKEN_MAX);
	d->loop_tid = thread_id();
	d->records = records;
	d->slept = true;
	d->loop = loop_new(backend, safety_ns);
	d->ring = ring_new(LULL_RING_SPSC, 4096);
	d->prod = producer_new(d->ring);
	check_eq(lull_loop_attach(d->loop, d->ring, woken_handler, d, 0), 0);
	if (first_before)
		check_eq(write_rec(d->prod, false, 0, 0), 0);
	check_eq(pthread_create(&thread, NULL, producer, d), 0);
	run_loop(d->loop);
	join_within(thread, 8000, "a producer thread");
	check(d->slept, "the loop's thread never went to sleep");
	check_eq(d->write_ret, 0);
	check_eq(d->handler_error, 0);
	check_eq(atomic_load(&d->seen), records);
	check_eq(d->poisons, 1);
}

static void woken_free(struct woken *d)
{
	check_eq(lull_producer_detach(d->prod), 0);
	loop_free(d->loop);
	check_eq(lull_ring_destroy(d->ring), 0);
}

/* ========================================================================
 * Idle: a parked loop stays parked
 */

/*
 * Records 0, 1 and 2: the measured idle period lies between 1 and 2, so
 * that the first park (which sets up what later parks reuse, one more
 * context switch on io_uring) is not part of it.
 */
static void *idle_producer(void *arg)
{
	const struct timespec idle_time = { .tv_sec = 1 };
	struct woken *d = arg;

	/* A first park and wake-up... */
	if (!woken_write_when_asleep(d, 1))
		return NULL;
	/* ...then the one measured. */
	d->slept = wait_at_least(&d->seen, 2) && wait_sleeping(d->loop_tid);
	if (!d->slept) {
		lull_loop_stop(d->loop);
		return NULL;
	}
	/* The idle period itself: nothing to synchronize here. */
	nanosleep(&idle_time, NULL);
	d->write_ret = write_rec(d->prod, false, 0, 2);
	return NULL;
}

LOOP_TEST(idle_loop_sleeps_in_one_park_without_waking, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct woken d = { 0 };
	struct lull_ring_stats rs;
	long csw;

	woken_run(&d, backend, 10 * SEC, 3, true, idle_producer);

	/* Across 1 s of idle: one park, its wake-up, nothing else. */
	check_op(d.st[2].parks - d.st[1].parks, <=, 1);
	check_op(d.st[2].iterations - d.st[1].iterations, <=, 3);
	check_eq(d.st[2].safety_timeouts - d.st[1].safety_timeouts, 0);
	csw = d.ru[2].ru_nvcsw - d.ru[1].ru_nvcsw;
	check(csw <= 2, "%ld voluntary context switches in 1 s of idle", csw);
	check_eq(lull_ring_stats(d.ring, &rs), 0);
	check_eq(rs.safety_timeouts, 0);
	check_eq(rs.idle_timeouts, 0);
	check_op(rs.wakes, <=, 2);
	woken_free(&d);
}

/* ========================================================================
 * A wake-up: one pass, then the park
 */

/* Each record only once the loop sleeps: every one is a wake-up. */
static void *wakes_producer(void *arg)
{
	struct woken *d = arg;

	for (unsigned k = 0; k < WOKEN_MAX; k++)
		if (!woken_write_when_asleep(d, k))
			break;
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
	const unsigned last = WOKEN_MAX - 1;
	struct woken d = { 0 };
	uint64_t passes, parks;

	woken_run(&d, backend, 0, WOKEN_MAX, false, wakes_producer);

	/* From the second wake-up on (the first park sets up the rest). */
	passes = d.st[last].iterations - d.st[1].iterations;
	parks = d.st[last].parks - d.st[1].parks;
	check_eq(parks, last - 1);
	check(passes <= last - 1 + 1,
	      "%llu passes for %u wake-ups: more than one each",
	      (unsigned long long)passes, last - 1);
	woken_free(&d);
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

