/* SPDX-License-Identifier: MIT */
/*
 * test_loop_many_rings.c - the Criterion suite loop: a thousand rings on
 * one loop, a coalescing window that takes a stream of records without
 * wake-up calls, and the process's table of published eventfds.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

/* --- a thousand rings on one loop --------------------------------------- */

#define MANY_RINGS 1000u
#define MANY_RECORDS 1000u
#define MANY_BUSY_RECORDS 100u

struct many;

struct many_slot {
	struct many *m;
	uint32_t idx;
	uint32_t received;
	unsigned poisons; /* the stop's, after every record */
};

struct many {
	struct lull_loop *loop;
	struct lull_ring *rings[MANY_RINGS];
	struct lull_producer *prods[MANY_RINGS];
	struct many_slot slots[MANY_RINGS];
	uint32_t written[MANY_RINGS]; /* producer side */
	unsigned expected;            /* stop once this many arrived */
	_Atomic unsigned delivered;
	_Atomic unsigned errors;
	pid_t loop_tid;
	_Atomic unsigned running;
	uint32_t rng;
	/* The busy test: ring 0's handler holds the loop awake. */
	bool hold;
	_Atomic unsigned held;
	_Atomic unsigned release;
	/* What the producer thread saw. */
	bool never_slept;
	int write_ret;
	uint64_t wakes_before, wakes_during;
};

static uint32_t many_random(struct many *m)
{
	/* xorshift32: the same sequence of rings in every run */
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 17;
	m->rng ^= m->rng << 5;
	return m->rng;
}

static int many_handler(const struct lull_record *record, void *ctx)
{
	struct many_slot *slot = ctx;
	struct many *m = slot->m;
	struct rec r = rec_of(record);
	unsigned n;

	if (record->type < 1) {
		if (!is_poison(record) || slot->poisons ||
		    atomic_load(&m->delivered) != m->expected)
			atomic_fetch_add(&m->errors, 1);
		slot->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (slot->poisons || r.tag != slot->idx || r.seq != slot->received)
		atomic_fetch_add(&m->errors, 1);
	slot->received++;
	if (slot->idx == 0 && m->hold) {
		/* Stay busy, awake, until the producer is done. */
		atomic_store_explicit(&m->held, 1, memory_order_release);
		wait_at_least(&m->release, 1);
	}
	/* Release: the producer's next write follows this record. */
	n = atomic_fetch_add_explicit(&m->delivered, 1, memory_order_release);
	if (n + 1 == m->expected)
		lull_loop_stop(m->loop);
	return LULL_READ_CONTINUE;
}

static struct many *many_new(enum lull_backend backend)
{
	struct many *m = calloc(1, sizeof(*m));

	check(m != NULL, "out of memory");
	/* A lost wake-up shows as a safety timeout, not as a hang. */
	m->loop = loop_new(backend, 200 * MS);
	m->rng = 2463534242u;
	m->loop_tid = thread_id();
	for (uint32_t i = 0; i < MANY_RINGS; i++) {
		m->rings[i] = ring_new(LULL_RING_SPSC, LULL_RING_MIN_CAPACITY);
		m->prods[i] = producer_new(m->rings[i]);
		m->slots[i].m = m;
		m->slots[i].idx = i;
		check_eq(lull_loop_attach(m->loop, m->rings[i], many_handler,
					  &m->slots[i], i == 0 ? 1 : 0),
			 0);
	}
	mark_running(m->loop, &m->running);
	return m;
}

static void many_free(struct many *m)
{
	for (uint32_t i = 0; i < MANY_RINGS; i++)
		check_ring_ended(m->loop, m->rings[i], m->prods[i], false);
	loop_free(m->loop);
	for (uint32_t i = 0; i < MANY_RINGS; i++) {
		check_eq(lull_producer_detach(m->prods[i]), 0);
		check_eq(lull_ring_destroy(m->rings[i]), 0);
	}
	free(m);
}

static uint64_t many_wakes(struct many *m, uint32_t from)
{
	struct lull_ring_stats st;
	uint64_t wakes = 0;

	for (uint32_t i = from; i < MANY_RINGS; i++) {
		lull_ring_stats(m->rings[i], &st);
		wakes += st.wakes;
	}
	return wakes;
}

/* The idle re-checks (safety-net expiries with nothing to read) of all. */
static uint64_t many_idle(struct many *m)
{
	struct lull_ring_stats st;
	uint64_t idle = 0;

	for (uint32_t i = 0; i < MANY_RINGS; i++) {
		lull_ring_stats(m->rings[i], &st);
		idle += st.idle_timeouts;
	}
	return idle;
}

static bool many_write(struct many *m, uint32_t i)
{
	m->write_ret = write_rec(m->prods[i], false, i, m->written[i]);
	if (m->write_ret)
		return false;
	m->written[i]++;
	return true;
}

/* The loop did not park or a write failed: give up, stop the loop. */
static void *many_abort(struct many *m, bool slept)
{
	m->never_slept = !slept;
	lull_loop_stop(m->loop);
	return NULL;
}

static void *many_one_at_a_time(void *arg)
{
	struct many *m = arg;

	for (unsigned k = 0; k < MANY_RECORDS; k++) {
		if (!wait_parked(&m->running, m->loop_tid))
			return many_abort(m, false);
		if (!many_write(m, many_random(m) % MANY_RINGS))
			return many_abort(m, true);
		wait_at_least(&m->delivered, k + 1);
	}
	return NULL;
}

static void many_check_rings(struct many *m)
{
	struct lull_ring_stats st;

	check_eq(atomic_load(&m->errors), 0);
	for (uint32_t i = 0; i < MANY_RINGS; i++) {
		check(m->slots[i].received == m->written[i],
		      "ring %u: %u of %u records", i, m->slots[i].received,
		      m->written[i]);
		check(m->slots[i].poisons == 1, "ring %u: %u poison records",
		      i, m->slots[i].poisons);
		check_eq(lull_ring_stats(m->rings[i], &st), 0);
		check(st.safety_timeouts == 0, "ring %u: %llu lost wake-ups",
		      i, (unsigned long long)st.safety_timeouts);
	}
}

LOOP_TEST(thousand_rings_each_record_reaches_its_own_handler, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct many *m = many_new(backend);
	struct lull_loop_stats st;
	pthread_t producer;
	uint64_t wakes;

	m->expected = MANY_RECORDS;
	check_eq(pthread_create(&producer, NULL, many_one_at_a_time, m), 0);
	run_loop(m->loop);
	join_within(producer, 8000, "a producer thread");
	check(!m->never_slept, "the loop never parked between records");
	check_eq(m->write_ret, 0);
	check_eq(atomic_load(&m->delivered), MANY_RECORDS);
	many_check_rings(m);

	/*
	 * Every record was written while the loop slept, so every one ended
	 * a park, and only its producer's wake-up call can have ended it: one
	 * call per record, and never more calls than parks.
	 */
	st = loop_stats(m->loop);
	wakes = many_wakes(m, 0);
	check_eq(st.records, MANY_RECORDS + MANY_RINGS); /* and the poisons */
	check_op(st.parks, >=, MANY_RECORDS);
	/*
	 * The loop counts every park its 200 ms net ended, idle ones too: a
	 * producer thread starved that long on a loaded machine ends a park
	 * that way, and the loop-wide count is then not 0 (it failed so in
	 * about 1 of 10 runs beside another suite).  Lost wake-ups are the
	 * rings' counters, all 0 above; each net expiry of the loop is an
	 * idle re-check of the rings that had nothing.
	 */
	check_op(many_idle(m), >=, st.safety_timeouts);
	check_op(wakes, <=, st.parks + st.park_cancels);
	check_eq(wakes, MANY_RECORDS);
	many_free(m);
}

static void *many_while_busy(void *arg)
{
	struct many *m = arg;

	/* Wake the parked loop with one record on ring 0... */
	if (!wait_parked(&m->running, m->loop_tid))
		return many_abort(m, false);
	if (!many_write(m, 0))
		return many_abort(m, true);
	/* ...whose handler then keeps it awake while we write elsewhere. */
	wait_at_least(&m->held, 1);
	m->wakes_before = many_wakes(m, 1);
	for (unsigned k = 0; k < MANY_BUSY_RECORDS; k++)
		if (!many_write(m, 1 + many_random(m) % (MANY_RINGS - 1)))
			break;
	m->wakes_during = many_wakes(m, 1);
	atomic_store_explicit(&m->release, 1, memory_order_release);
	return NULL;
}

LOOP_TEST(thousand_rings_producer_to_a_busy_loop_makes_no_wake_call,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct many *m = many_new(backend);
	struct lull_ring_stats st0;
	pthread_t producer;

	m->hold = true;
	m->expected = 1 + MANY_BUSY_RECORDS;
	check_eq(pthread_create(&producer, NULL, many_while_busy, m), 0);
	run_loop(m->loop);
	join_within(producer, 8000, "a producer thread");
	check(!m->never_slept, "the loop never parked");
	check_eq(m->write_ret, 0);
	check_eq(atomic_load(&m->delivered), 1 + MANY_BUSY_RECORDS);
	many_check_rings(m);
	check(m->wakes_during == m->wakes_before,
	      "%llu wake-up calls to a loop that was awake",
	      (unsigned long long)(m->wakes_during - m->wakes_before));
	check_eq(lull_ring_stats(m->rings[0], &st0), 0);
	check_eq(st0.wakes, 1);
	many_free(m);
}

/*
 * coalesce_ns: after record 1 wakes the parked loop, records 2..10 come
 * while it sleeps in its window, so they cost no wake-up call and arrive
 * in one batch.  The window (1 s) is long only so that a slow CI thread
 * cannot outlast it between its writes.
 */
#define COALESCE_RECORDS 10u

struct coalesce {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct lull_producer *prod;
	_Atomic uint32_t seen; /* the last seq handled */
	uint64_t iteration_at[COALESCE_RECORDS + 1];
	int write_ret;
	int stats_ret;  /* lull_ring_stats() in the producer thread */
	bool timed_out; /* a wait in the producer thread gave up */
	uint64_t wakes_before, wakes_after;
	pid_t loop_tid;
};

static int coalesce_handler(const struct lull_record *record, void *ctx)
{
	struct coalesce *c = ctx;
	struct rec r = rec_of(record);

	if (record->type < 1 || r.seq > COALESCE_RECORDS)
		return LULL_READ_CONTINUE;
	c->iteration_at[r.seq] = loop_stats(c->loop).iterations;
	/* Pairs with the producer's acquire load in coalesce_wait_seen(). */
	atomic_store_explicit(&c->seen, r.seq, memory_order_release);
	return LULL_READ_CONTINUE;
}

/* The last seq handled reaches @seq; false after 5 s. */
static bool coalesce_wait_seen(struct coalesce *c, uint32_t seq)
{
	uint64_t deadline = now_ns() + 5 * SEC;

	while (atomic_load_explicit(&c->seen, memory_order_acquire) < seq) {
		if (now_ns() > deadline)
			return false;
		sched_yield();
	}
	return true;
}

/*
 * The producer thread: it never asserts (the test thread checks what it
 * recorded); on any failure it stops the loop so that the run ends.
 */
static void *coalesce_producer(void *arg)
{
	struct coalesce *c = arg;
	uint64_t deadline = now_ns() + 5 * SEC;
	struct lull_ring_stats st;

	/* Let the loop park first, so that record 1 has to wake it. */
	do {
		sched_yield();
		c->stats_ret = lull_ring_stats(c->ring, &st);
		c->timed_out = now_ns() > deadline;
	} while (!c->stats_ret && !c->timed_out && st.parks == 0);
	if (c->stats_ret || c->timed_out)
		goto out;
	c->write_ret = write_rec(c->prod, false, 0, 1);
	c->timed_out = !c->write_ret && !coalesce_wait_seen(c, 1);
	if (c->write_ret || c->timed_out)
		goto out;
	/*
	 * Write the stream only once the loop sleeps in its window (asleep
	 * in the backend's wait with no park announced): a slow loop (a
	 * sanitizer build under load) could otherwise take records 2.. in
	 * the passes right after record 1, before any window began.
	 */
	c->timed_out = !wait_sleeping(c->loop_tid);
	if (!c->timed_out &&
	    ring_park_word(c->ring) != RING_PARK_AWAKE)
		c->timed_out = true; /* parked, not coalescing */
	if (c->timed_out)
		goto out;
	c->stats_ret = lull_ring_stats(c->ring, &st);
	c->wakes_before = st.wakes;
	for (uint32_t seq = 2; seq <= COALESCE_RECORDS && !c->write_ret; seq++)
		c->write_ret = write_rec(c->prod, false, 0, seq);
	c->timed_out = !c->write_ret &&
		       !coalesce_wait_seen(c, COALESCE_RECORDS);
	if (!c->stats_ret)
		c->stats_ret = lull_ring_stats(c->ring, &st);
	c->wakes_after = st.wakes;
out:
	lull_loop_stop(c->loop);
	return NULL;
}

LOOP_TEST(coalesce_window_takes_a_stream_without_wake_calls, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = {
		.backend = backend,
		.safety_timeout_ns = 60 * SEC,
		.coalesce_ns = SEC,
	};
	struct coalesce c = { .write_ret = 0 };
	struct lull_loop_stats st;
	pthread_t producer;

	c.loop = loop_new_cfg(&cfg);
	c.ring = ring_new(LULL_RING_SPSC, 4096);
	c.prod = producer_new(c.ring);
	check_eq(lull_loop_attach(c.loop, c.ring, coalesce_handler, &c, 0), 0);
	c.loop_tid = thread_id();
	check_eq(pthread_create(&producer, NULL, coalesce_producer, &c), 0);
	run_loop(c.loop);
	join_within(producer, 8000, "a producer thread");
	check(!c.timed_out, "the producer waited 5 s for the loop (seen %u)",
	      (unsigned)atomic_load(&c.seen));
	check_eq(c.stats_ret, 0);
	check_eq(c.write_ret, 0);
	check_eq(atomic_load(&c.seen), COALESCE_RECORDS);
	check(c.wakes_after == c.wakes_before,
	      "%llu wake-up calls during the coalescing window",
	      (unsigned long long)(c.wakes_after - c.wakes_before));
	check(c.iteration_at[2] == c.iteration_at[COALESCE_RECORDS],
	      "records 2..%u came in passes %llu..%llu, not in one batch",
	      COALESCE_RECORDS, (unsigned long long)c.iteration_at[2],
	      (unsigned long long)c.iteration_at[COALESCE_RECORDS]);
	st = loop_stats(c.loop);
	check_op(st.coalesce_waits, >=, 1);
	check_eq(lull_producer_detach(c.prod), 0);
	check_eq(lull_ring_destroy(c.ring), 0);
	loop_free(c.loop);
}


/* --- the process's table of eventfds ------------------------------------ */

#define TABLE_RINGS 4096u /* wake.c's WAKE_FD_SLOTS */

static int noop_handler(const struct lull_record *record, void *ctx)
{
	(void)record;
	(void)ctx;
	return LULL_READ_CONTINUE;
}

/* The helper's action: one record through producer @h->ctx. */
static void write_one(struct helper *h)
{
	check_eq(lull_spsc_write(h->ctx, 1, "x", 1), 0);
}

/* The ring attached last: its record stops the loop (@ctx). */
static int stop_handler(const struct lull_record *record, void *ctx)
{
	if (record->type == 1)
		lull_loop_stop(ctx);
	return LULL_READ_CONTINUE;
}

/*
 * On the eventfd backends each ring's producers wake the loop's eventfd,
 * which the process publishes for the ring in a table of its own (never
 * in the region, which anyone sharing it may rewrite).  The table holds
 * 4096 rings: the one past that is -ENOMEM and attaches nothing, one
 * detached makes room again, and the ring attached last wakes the loop
 * from its sleep.
 * uring-futex publishes nothing and takes them all.
 */
LOOP_TEST(the_process_publishes_4096_eventfd_rings_and_refuses_the_next,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	bool eventfd = backend != LULL_BACKEND_URING_FUTEX;
	struct lull_ring **rings = calloc(TABLE_RINGS + 1, sizeof(*rings));
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_producer *prod;
	struct lull_loop_stats st;
	struct helper h;

	cr_assert_not_null(rings);
	for (unsigned i = 0; i <= TABLE_RINGS; i++)
		rings[i] = ring_new(LULL_RING_SPSC, 4096);
	for (unsigned i = 0; i < TABLE_RINGS; i++)
		check_eq(lull_loop_attach(loop, rings[i], noop_handler, NULL,
					  0),
			 0);
	check_eq(lull_loop_attach(loop, rings[TABLE_RINGS], noop_handler,
				  NULL, 0),
		 eventfd ? -ENOMEM : 0);
	if (eventfd) {
		/* Nothing of it was attached: detach says so. */
		check_eq(lull_loop_detach(loop, rings[TABLE_RINGS]), -ENOENT);
		check_eq(lull_loop_detach(loop, rings[0]), 0);
	} else {
		check_eq(lull_loop_detach(loop, rings[TABLE_RINGS]), 0);
	}
	check_eq(lull_loop_attach(loop, rings[TABLE_RINGS], stop_handler, loop,
				  0),
		 0);
	/* Written once the loop sleeps: only its wake-up ends the run. */
	check_eq(lull_producer_attach(rings[TABLE_RINGS], 0, &prod), 0);
	helper_start(&h, loop, write_one, prod);
	run_loop(loop);
	helper_join(&h);
	st = loop_stats(loop);
	check_op(st.records, >=, 1);
	check_eq(lull_producer_detach(prod), 0);
	loop_free(loop);
	for (unsigned i = 0; i <= TABLE_RINGS; i++)
		check_eq(lull_ring_destroy(rings[i]), 0);
	free(rings);
}
