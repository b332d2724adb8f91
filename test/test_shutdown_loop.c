/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_loop.c - the Criterion suite of how rings end: what
 * lull_loop_stop() and a ring's end do to the rings of a lull_loop, on every
 * backend.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Loops with several rings
 */

#define LOOP_RINGS 3

struct loop_ring_fix {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct ledger ledger;
	struct sink sink;
	atomic_uint handled;
	atomic_uint poisoned;
	atomic_bool destroyed; /* by the loop's timer, after the poison */
	int destroy_error;
	/* Hold the handler at these seqs (UINT32_MAX: never). */
	uint32_t gate_seq[2];
	struct flag gate[2]; /* 1: held, 2: let go */
};

struct loop_fix {
	enum way way;
	char what[160];
	struct lull_loop *loop;
	struct loop_ring_fix r[LOOP_RINGS];
	unsigned nrings;
	pthread_t thread;
	_Atomic pid_t tid;
	struct flag done;
	int run_ret;
	bool destroy_in_timer;
};

static int loop_ring_take(const struct lull_record *rec, void *ctx)
{
	struct loop_ring_fix *r = ctx;
	struct stamp st;

	sink_take(&r->sink, rec);
	if (rec->type == LULL_TYPE_POISON)
		atomic_fetch_add_explicit(&r->poisoned, 1,
					  memory_order_release);
	atomic_fetch_add_explicit(&r->handled, 1, memory_order_release);
	if (rec->type > 0 && rec->len >= sizeof(st)) {
		memcpy(&st, rec->data, sizeof(st));
		for (int g = 0; g < 2; g++)
			if (st.seq == r->gate_seq[g]) {
				flag_set(&r->gate[g], 1);
				if (!flag_wait(&r->gate[g], 2, DEADLINE_MS))
					sink_bad(&r->sink, "never let go");
			}
	}
	return LULL_READ_CONTINUE;
}

/* On the loop's thread: destroy each ring once it has had its poison;
 * -EBUSY until the loop has detached it. */
static void loop_reaper(struct lull_loop *loop, void *ctx)
{
	struct loop_fix *lf = ctx;
	int ret;

	(void)loop;
	for (unsigned i = 0; i < lf->nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		if (atomic_load(&r->destroyed) || !atomic_load(&r->poisoned) ||
		    r->prod)
			continue;
		ret = lull_ring_destroy(r->ring);
		if (ret == 0)
			atomic_store(&r->destroyed, true);
		else if (ret != -EBUSY)
			r->destroy_error = ret;
	}
}

static void *loop_main(void *arg)
{
	struct loop_fix *lf = arg;

	atomic_store(&lf->tid, gettid());
	lf->run_ret = lull_loop_run(lf->loop);
	flag_set(&lf->done, 1);
	return NULL;
}

static void loop_fix_init(struct loop_fix *lf, enum way way, unsigned nrings,
			  unsigned batch, const char *what)
{
	struct lull_loop_config cfg = {
		.backend = loop_backend(way),
		.safety_timeout_ns = SAFETY_NS,
	};
	int ret;

	memset(lf, 0, sizeof(*lf));
	lf->way = way;
	lf->nrings = nrings;
	snprintf(lf->what, sizeof(lf->what), "%s, %s", what, way_name[way]);
	skip_unless_supported(way);
	flag_init(&lf->done);
	atomic_init(&lf->tid, 0);
	ret = lull_loop_create(&lf->loop, &cfg);
	cr_assert_eq(ret, 0, "lull_loop_create: %s", lull_strerror(ret));
	for (unsigned i = 0; i < nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		r->t = i % 2 ? &topo_mpsc : &topo_spsc;
		r->gate_seq[0] = r->gate_seq[1] = UINT32_MAX;
		flag_init(&r->gate[0]);
		flag_init(&r->gate[1]);
		atomic_init(&r->handled, 0);
		atomic_init(&r->poisoned, 0);
		atomic_init(&r->destroyed, false);
		cr_assert_eq(lull_ring_create(&r->ring, RING_CAP, r->t->flags),
			     0);
		cr_assert_eq(lull_producer_attach(r->ring, 0, &r->prod), 0);
		cr_assert_eq(lull_loop_attach(lf->loop, r->ring,
					      loop_ring_take, r, batch),
			     0);
	}
}

static void loop_fix_send(struct loop_fix *lf, unsigned i, unsigned n)
{
	struct loop_ring_fix *r = &lf->r[i];

	for (unsigned k = 0; k < n; k++) {
		uint32_t seq = r->ledger.next_seq[0]++;

		cr_assert_eq(stamp_send(r->t, r->prod, 0, seq), 0,
			     "%s: ring %u write", lf->what, i);
		ledger_add(&r->ledger, 0, seq);
	}
}

static void loop_fix_start(struct loop_fix *lf)
{
	cr_assert_eq(pthread_create(&lf->thread, NULL, loop_main, lf), 0);
	while (!atomic_load(&lf->tid))
		sched_yield();
}

static void loop_fix_wait_handled(struct loop_fix *lf, unsigned i,
				  unsigned n)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;

	while (atomic_load(&lf->r[i].handled) < n) {
		cr_assert_lt(now_ms(), deadline,
			     "%s: ring %u handed %u of %u records", lf->what,
			     i, atomic_load(&lf->r[i].handled), n);
		nap_us(100);
	}
}

/* Every ring's park word says the loop sleeps on it. */
static bool loop_fix_words_parked(struct loop_fix *lf)
{
	for (unsigned i = 0; i < lf->nrings; i++)
		if (ring_park_word(lf->r[i].ring) == RING_PARK_AWAKE)
			return false;
	return true;
}

/*
 * The loop is parked (see consumer_wait_parked): every ring's park word
 * announces the park, and the loop's thread is asleep in the kernel,
 * before and after a short nap.
 */
static void loop_fix_wait_parked(struct loop_fix *lf)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;
	pid_t tid = atomic_load(&lf->tid);

	while (!loop_fix_words_parked(lf) || proc_thread_state(tid) != 'S' ||
	       (nap_us(2000), proc_thread_state(tid) != 'S') ||
	       !loop_fix_words_parked(lf))
		cr_assert_lt(now_ms(), deadline, "%s: the loop never parked "
			     "(thread state %c)", lf->what,
			     proc_thread_state(tid) ? proc_thread_state(tid)
						    : '?');
}

static void loop_fix_finish(struct loop_fix *lf)
{
	cr_assert(flag_wait(&lf->done, 1, DEADLINE_MS),
		  "%s: lull_loop_run did not return", lf->what);
	join_within(lf->thread, DEADLINE_MS, lf->what);
	cr_assert_eq(lf->run_ret, 0, "%s: lull_loop_run returned %d",
		     lf->what, lf->run_ret);
}

static void loop_fix_fini(struct loop_fix *lf)
{
	for (unsigned i = 0; i < lf->nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		if (r->prod)
			cr_assert_eq(lull_producer_detach(r->prod), 0);
		if (!atomic_load(&r->destroyed))
			cr_assert_eq(lull_ring_destroy(r->ring), 0,
				     "%s: ring %u still attached to the loop",
				     lf->what, i);
	}
	cr_assert_eq(lull_loop_destroy(lf->loop), 0);
	expect_no_leaks(lf->what);
}

/* lull_loop_stop shuts down every ring: each delivers what was committed,
 * then its poison, is detached, and run returns. */
static void loop_stop_all(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, LOOP_RINGS, 16, "lull_loop_stop");
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 5);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 5);
	loop_fix_wait_parked(&lf);
	/* Pending at the stop: 1, 41 and 81 records. */
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 1 + i * 40);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++) {
		struct loop_ring_fix *r = &lf.r[i];

		sink_expect(lf.what, &r->sink, &r->ledger, NULL, false);
		cr_assert_eq(stamp_send(r->t, r->prod, 0, 999), -EPIPE);
	}
	loop_fix_fini(&lf);
}

static struct lull_loop *_Atomic signal_loop;

static void on_stop_signal(int signo)
{
	(void)signo;
	lull_loop_stop(atomic_load_explicit(&signal_loop,
					    memory_order_acquire));
}

static void loop_stop_all_by_signal(enum way way)
{
	struct loop_fix lf;
	struct sigaction sa;

	loop_fix_init(&lf, way, LOOP_RINGS, 16,
		      "lull_loop_stop from a signal handler");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	atomic_store(&signal_loop, lf.loop);
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 3);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 3);
	loop_fix_wait_parked(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 2);
	cr_assert_eq(pthread_kill(lf.thread, SIGUSR2), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* One ring shut down: it drains, gets its poison and is detached (the
 * loop's timer destroys it); the others keep delivering until the stop. */
static void loop_one_ring_ends(enum way way)
{
	struct loop_fix lf;
	uint64_t deadline;

	loop_fix_init(&lf, way, LOOP_RINGS, 16, "one ring shut down");
	cr_assert_eq(lull_loop_timer(lf.loop, 1000000, 1000000, loop_reaper,
				     &lf, NULL),
		     0);
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 4);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 4);
	loop_fix_send(&lf, 0, 30);
	loop_fix_send(&lf, 1, 7);
	cr_assert_eq(lull_ring_shutdown(lf.r[0].ring, LULL_SHUTDOWN_GRACEFUL),
		     0);
	loop_fix_send(&lf, 2, 7);
	cr_assert_eq(stamp_send(lf.r[0].t, lf.r[0].prod, 0, 999), -EPIPE);
	cr_assert_eq(lull_producer_detach(lf.r[0].prod), 0);
	lf.r[0].prod = NULL;
	deadline = now_ms() + DEADLINE_MS;
	while (!atomic_load(&lf.r[0].destroyed))
		cr_assert_lt(now_ms(), deadline,
			     "%s: ring 0 not destroyable after its poison "
			     "(poisoned %u, destroy error %d)",
			     lf.what, atomic_load(&lf.r[0].poisoned),
			     lf.r[0].destroy_error);
	cr_assert_eq(lf.r[0].destroy_error, 0);
	sink_expect(lf.what, &lf.r[0].sink, &lf.r[0].ledger, NULL, false);
	/* The others were never disturbed: they go on. */
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 1; i < LOOP_RINGS; i++) {
			unsigned had = lf.r[i].ledger.n;

			loop_fix_send(&lf, i, 5);
			loop_fix_wait_handled(&lf, i, had + 5);
			cr_assert_eq(atomic_load(&lf.r[i].poisoned), 0,
				     "%s: ring %u poisoned", lf.what, i);
		}
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 1; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* A second stop makes the shutdown immediate: what is undelivered when
 * the loop acts on it is discarded.  Batches of one record, so that the
 * loop acts on each stop right after the record it holds at. */
static void loop_second_stop(enum way way)
{
	struct loop_fix lf;
	struct loop_ring_fix *r;

	loop_fix_init(&lf, way, 2, 1, "second lull_loop_stop");
	for (unsigned i = 0; i < 2; i++) {
		lf.r[i].gate_seq[0] = 0;
		lf.r[i].gate_seq[1] = 1;
	}
	for (unsigned i = 0; i < 2; i++)
		loop_fix_send(&lf, i, 10);
	loop_fix_start(&lf);
	/* First stop while the loop holds at record 0 of both rings. */
	r = &lf.r[0];
	cr_assert(flag_wait(&r->gate[0], 1, DEADLINE_MS));
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	flag_set(&r->gate[0], 2);
	cr_assert(flag_wait(&lf.r[1].gate[0], 1, DEADLINE_MS));
	flag_set(&lf.r[1].gate[0], 2);
	/* Graceful: record 1 still comes; the second stop while it is held. */
	cr_assert(flag_wait(&r->gate[1], 1, DEADLINE_MS));
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	flag_set(&r->gate[1], 2);
	cr_assert(flag_wait(&lf.r[1].gate[1], 1, DEADLINE_MS));
	flag_set(&lf.r[1].gate[1], 2);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < 2; i++) {
		r = &lf.r[i];
		/* Records 2..9 were undelivered at the second stop. */
		for (unsigned k = 2; k < r->ledger.n; k++)
			r->ledger.e[k].live = false;
		sink_expect(lf.what, &r->sink, &r->ledger, NULL, false);
	}
	loop_fix_fini(&lf);
}

/* A stop requested before run: run drains every ring, then returns. */
static void loop_stop_before_run(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, LOOP_RINGS, 4, "lull_loop_stop before run");
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 3 + i * 5);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	lf.run_ret = lull_loop_run(lf.loop);
	cr_assert_eq(lf.run_ret, 0);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* A fatal report reaches the ring's handler, before its poison, while the
 * other rings carry on. */
static void loop_fatal(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, 2, 16, "fatal on one ring of a loop");
	loop_fix_start(&lf);
	loop_fix_send(&lf, 0, 3);
	loop_fix_send(&lf, 1, 3);
	loop_fix_wait_handled(&lf, 1, 3);
	cr_assert_eq(lull_ring_fatal(lf.r[1].ring, test_fatal.code,
				     test_fatal.message),
		     0);
	loop_fix_wait_handled(&lf, 1, 5);
	loop_fix_send(&lf, 0, 3);
	loop_fix_wait_handled(&lf, 0, 6);
	cr_assert_eq(atomic_load(&lf.r[0].poisoned), 0);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	sink_expect(lf.what, &lf.r[0].sink, &lf.r[0].ledger, NULL, false);
	sink_expect(lf.what, &lf.r[1].sink, &lf.r[1].ledger, &test_fatal,
		    false);
	loop_fix_fini(&lf);
}

#define LOOP_TESTS(name, way)                                               \
	Test(loop, stop_shuts_down_every_ring_and_returns_##name,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_stop_all(way);                                  \
	}                                                                   \
	Test(loop, stop_from_a_signal_handler_drains_and_returns_##name,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_stop_all_by_signal(way);                               \
	}                                                                   \
	Test(loop, one_ring_shut_down_leaves_the_others_running_##name,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_one_ring_ends(way);                                    \
	}                                                                   \
	Test(loop, second_stop_discards_what_is_undelivered_##name,         \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_second_stop(way);                                      \
	}                                                                   \
	Test(loop, stop_before_run_drains_every_ring_##name, .timeout = 20) \
	{                                                                   \
		loop_stop_before_run(way);                                  \
	}                                                                   \
	Test(loop, fatal_reaches_the_handler_before_the_poison_##name,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_fatal(way);                                            \
	}

LOOP_TESTS(uring_futex, WAY_LOOP_FUTEX)
LOOP_TESTS(uring_eventfd, WAY_LOOP_EVENTFD)
LOOP_TESTS(epoll, WAY_LOOP_EPOLL)
