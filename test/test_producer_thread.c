/* SPDX-License-Identifier: MIT */
/*
 * test_producer_thread.c - the Criterion suite of how rings end: producers
 * bound to their thread (LULL_PRODUCER_THREAD): the thread's end detaches them,
 * aborts their claim, and never wedges a wake-up.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Thread-bound producers
 */

enum exit_path {
	EXIT_RETURN,
	EXIT_PTHREAD_EXIT,
	EXIT_CANCEL_IN_READ,
	EXIT_CANCEL_IN_NANOSLEEP,
};

static const char *const exit_name[] = {
	"returns", "calls pthread_exit", "is cancelled in read(2)",
	"is cancelled in nanosleep(2)",
};

#define BOUND_RECORDS 3u

struct bound {
	const struct topo *t;
	struct lull_ring *ring;
	enum exit_path how;
	bool claim;
	int go[2]; /* the thread blocks reading it */
	struct flag ready;
	struct lull_producer *prod;
	char why[160];
};

/*
 * Frames that a cancellation unwinds carry no AddressSanitizer redzones:
 * GCC's ASan leaves a cancelled frame's redzones poisoned, and then trips
 * over them when the thread is torn down (a false stack-buffer-overflow in
 * its own sigaltstack call), with or without lull.
 */
#if defined(__SANITIZE_ADDRESS__)
#define UNWOUND __attribute__((no_sanitize_address, noinline))
#else
#define UNWOUND __attribute__((noinline))
#endif

/* The thread's end, by @b->how. */
static UNWOUND void *bound_end(struct bound *b)
{
	struct timespec forever = { 3600, 0 };
	char byte;
	int ret;

	switch (b->how) {
	case EXIT_RETURN:
		if (read(b->go[0], &byte, 1) != 1)
			snprintf(b->why, sizeof(b->why), "read of go failed");
		return (void *)1;
	case EXIT_PTHREAD_EXIT:
		if (read(b->go[0], &byte, 1) != 1)
			snprintf(b->why, sizeof(b->why), "read of go failed");
		pthread_exit((void *)2);
	case EXIT_CANCEL_IN_READ:
		ret = (int)read(b->go[0], &byte, 1);
		snprintf(b->why, sizeof(b->why), "read returned %d", ret);
		return NULL;
	case EXIT_CANCEL_IN_NANOSLEEP:
		nanosleep(&forever, NULL);
		snprintf(b->why, sizeof(b->why), "nanosleep returned");
		return NULL;
	}
	return NULL;
}

static void bound_start(struct bound *b)
{
	int ret;

	ret = lull_producer_attach(b->ring, LULL_PRODUCER_THREAD, &b->prod);
	if (ret < 0) {
		snprintf(b->why, sizeof(b->why), "attach: %d", ret);
		return;
	}
	for (uint32_t seq = 0; seq < BOUND_RECORDS; seq++)
		if ((ret = stamp_send(b->t, b->prod, 0, seq)) < 0)
			snprintf(b->why, sizeof(b->why), "write %u: %d", seq,
				 ret);
	if (b->claim &&
	    (ret = stamp_claim(b->t, b->prod, 0, BOUND_RECORDS)) < 0)
		snprintf(b->why, sizeof(b->why), "claim: %d", ret);
}

static UNWOUND void *bound_main(void *arg)
{
	struct bound *b = arg;

	bound_start(b);
	flag_set(&b->ready, 1);
	if (b->why[0])
		return NULL;
	return bound_end(b);
}

/*
 * A producer bound to its thread writes three records, maybe takes a claim,
 * and its thread ends.  The producer detaches by itself, its claim is
 * aborted (the records another producer committed behind it on MPSC still
 * arrive), and the ring shuts down if it was the last producer.
 */
static void bound_thread_ends(const struct topo *t, enum exit_path how,
			      bool claim, bool last)
{
	struct consumer c;
	struct ledger ledger = { 0 };
	struct lull_producer *other = NULL;
	struct lull_ring *ring;
	struct bound b = { .t = t, .how = how, .claim = claim };
	pthread_t thread;
	char what[160];
	void *result;

	snprintf(what, sizeof(what),
		 "%s, bound producer %s%s, %s producer", t->name,
		 exit_name[how], claim ? " holding a claim" : "",
		 last ? "last" : "not the last");
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, WAY_WAIT, what);
	b.ring = ring;
	flag_init(&b.ready);
	cr_assert_eq(pipe(b.go), 0);
	if (!last)
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, bound_main, &b), 0);
	cr_assert(flag_wait(&b.ready, 1, DEADLINE_MS), "%s: not ready", what);
	cr_assert(!b.why[0], "%s: %s", what, b.why);
	for (uint32_t seq = 0; seq < BOUND_RECORDS; seq++)
		ledger_add(&ledger, 0, seq);
	if (other) {
		/* Behind the claim, if there is one. */
		for (uint32_t seq = 0; seq < 2; seq++) {
			cr_assert_eq(stamp_send(t, other, 1, seq), 0);
			ledger_add(&ledger, 1, seq);
		}
	}
	consumer_wait_handled(&c, claim || !other ? BOUND_RECORDS
						  : BOUND_RECORDS + 2);
	consumer_wait_parked(&c, 0);
	/* The thread-bound producer is its thread's alone. */
	cr_assert_eq(lull_producer_detach(b.prod), -EPERM, "%s", what);

	if (how == EXIT_RETURN || how == EXIT_PTHREAD_EXIT)
		cr_assert_eq(write(b.go[1], "g", 1), 1);
	else
		cr_assert_eq(pthread_cancel(thread), 0);
	result = join_within(thread, DEADLINE_MS, what);
	cr_assert(!b.why[0], "%s: %s", what, b.why);
	cr_assert_eq(result,
		     how == EXIT_RETURN	       ? (void *)1
		     : how == EXIT_PTHREAD_EXIT ? (void *)2
						: PTHREAD_CANCELED,
		     "%s: thread result %p", what, result);
	if (!last) {
		/* Still open: the other producer's records all arrive. */
		consumer_wait_handled(&c, BOUND_RECORDS + 2);
		cr_assert_eq(stamp_send(t, other, 1, 2), 0);
		ledger_add(&ledger, 1, 2);
		consumer_wait_handled(&c, BOUND_RECORDS + 3);
		cr_assert_eq(consumer_poisoned(&c), 0,
			     "%s: poison while a producer remains", what);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	consumer_finish(&c);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	cr_assert_eq(lull_producer_attach(ring, 0, &other), -EPIPE,
		     "%s: attach after the last producer ended", what);
	close(b.go[0]);
	close(b.go[1]);
	consumer_fini(&c);
}

static void bound_all_exits(const struct topo *t, bool claim, bool last)
{
	for (unsigned how = 0; how < 4; how++)
		bound_thread_ends(t, (enum exit_path)how, claim, last);
}

Test(spsc, bound_producer_detaches_when_its_thread_ends, .timeout = 20)
{
	bound_all_exits(&topo_spsc, false, true);
}

Test(spsc, bound_producer_claim_is_aborted_when_its_thread_ends,
     .timeout = 20)
{
	bound_all_exits(&topo_spsc, true, true);
}

Test(mpsc, bound_producer_detaches_when_its_thread_ends, .timeout = 20)
{
	bound_all_exits(&topo_mpsc, false, true);
}

Test(mpsc, bound_producer_claim_is_aborted_when_its_thread_ends,
     .timeout = 20)
{
	bound_all_exits(&topo_mpsc, true, true);
}

Test(mpsc, bound_producer_ending_leaves_other_producers_open,
     .timeout = 20)
{
	bound_all_exits(&topo_mpsc, false, false);
}

Test(mpsc, dead_bound_claim_does_not_block_other_producers_records,
     .timeout = 20)
{
	bound_all_exits(&topo_mpsc, true, false);
}

struct two_bound {
	struct lull_ring *ring[2];
	int result[4];
};

/* One thread, three producers: two on one ring (one detached by hand
 * first), one on another.  Its end detaches what is left, once. */
static void *two_bound_main(void *arg)
{
	struct two_bound *tb = arg;
	struct lull_producer *a, *b, *c;

	tb->result[0] = lull_producer_attach(tb->ring[0],
					     LULL_PRODUCER_THREAD, &a);
	tb->result[1] = lull_producer_attach(tb->ring[0],
					     LULL_PRODUCER_THREAD, &b);
	tb->result[2] = lull_producer_attach(tb->ring[1],
					     LULL_PRODUCER_THREAD, &c);
	if (tb->result[0] == 0)
		tb->result[3] = lull_producer_detach(a);
	if (tb->result[1] == 0)
		lull_mpsc_write(b, 1, "b", 1);
	return NULL;
}

Test(mpsc, thread_end_detaches_each_bound_producer_once, .timeout = 20)
{
	struct lull_producer *keep;
	struct two_bound tb = { 0 };
	struct sink sink = { 0 };
	pthread_t thread;
	struct lull_record rec;

	cr_assert_eq(lull_ring_create(&tb.ring[0], 4096, LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_create(&tb.ring[1], 4096, LULL_RING_MPSC), 0);
	/* Keeps ring 0 open past the thread's end. */
	cr_assert_eq(lull_producer_attach(tb.ring[0], 0, &keep), 0);
	cr_assert_eq(pthread_create(&thread, NULL, two_bound_main, &tb), 0);
	join_within(thread, DEADLINE_MS, "bound thread");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(tb.result[i], 0, "call %d returned %d", i,
			     tb.result[i]);
	/* Ring 1 lost its only producer: poison. */
	cr_assert_eq(lull_ring_read(tb.ring[1], sink_handler, &sink, 8), 1);
	cr_assert_eq(sink.poisons, 1);
	/* Ring 0 is open: b's record, then nothing until keep leaves. */
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, 1);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), -EAGAIN);
	cr_assert_eq(lull_mpsc_write(keep, 2, NULL, 0), 0);
	cr_assert_eq(lull_producer_detach(keep), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, 2);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, LULL_TYPE_POISON);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_destroy(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_destroy(tb.ring[1]), 0);
}

/* ------------------------------------------------------------------------
 * A bound producer's thread ends right after its commit
 *
 * The consumer is parked with no safety net, and the producer's thread
 * commits one record and ends: it returns, calls pthread_exit(), or is
 * cancelled, the cancel arriving before the write (or while it holds a
 * claim, before the commit) so that it is pending throughout the commit
 * and its wake-up and acted on at the first cancellation point after.
 * With another producer keeping the ring open, nothing but that commit's
 * wake-up can end the park: no timer of lull's own, and no shutdown (the
 * thread's end detaches a producer that was not the last).  A wake-up
 * lost to the thread's end (a cancellation point between the wake claim
 * and the system call, say) leaves the record undelivered, and the test
 * fails at its deadline instead of stalling.  As the last producer, the
 * thread's end also shuts the ring down: the record, then the poison.
 */

/* No safety net at all, whatever LULL_SAFETY_NET_MS says. */
#define NO_SAFETY_NET UINT64_MAX

/*
 * After consumer_init(): park with no safety net (for a loop, a loop made
 * again with none), and in lull_ring_wait with no timeout either: its
 * timeout would end the park with the record there, as a safety net
 * does.  A lost wake-up then leaves the consumer asleep for good, and the
 * test fails at its deadline (the process ends with the thread).
 */
static void consumer_no_safety_net(struct consumer *c)
{
	struct lull_park_config park = { .safety_timeout_ns = NO_SAFETY_NET };
	struct lull_loop_config cfg = {
		.backend = loop_backend(c->way),
		.safety_timeout_ns = NO_SAFETY_NET,
	};

	cr_assert_eq(lull_ring_park_config(c->ring, &park), 0);
	c->wait_forever = true;
	if (!c->loop)
		return;
	cr_assert_eq(lull_loop_destroy(c->loop), 0);
	cr_assert_eq(lull_loop_create(&c->loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(c->loop, c->ring, consumer_take_in_loop,
				      c, c->limit),
		     0);
}

enum commit_end {
	END_RETURN,
	END_PTHREAD_EXIT,
	END_CANCEL_IN_WRITE,  /* cancel pending through the write */
	END_CANCEL_IN_COMMIT, /* cancel pending through claim's commit */
	COMMIT_ENDS
};

static const char *const commit_end_name[COMMIT_ENDS] = {
	"returns", "calls pthread_exit",
	"is cancelled (pending through its write)",
	"is cancelled (pending through its commit)",
};

struct committer {
	const struct topo *t;
	struct lull_ring *ring;
	enum commit_end how;
	struct lull_producer *prod;
	struct flag ready;
	atomic_int go;
	int ret;
	char why[160];
};

static UNWOUND void *committer_main(void *arg)
{
	struct committer *m = arg;
	bool cancel = m->how == END_CANCEL_IN_WRITE ||
		      m->how == END_CANCEL_IN_COMMIT;
	int ret;

	/* Until the commit, no cancellation point may act on the cancel. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	ret = lull_producer_attach(m->ring, LULL_PRODUCER_THREAD, &m->prod);
	if (ret < 0)
		snprintf(m->why, sizeof(m->why), "attach: %d", ret);
	else if (m->how == END_CANCEL_IN_COMMIT &&
		 (ret = stamp_claim(m->t, m->prod, 0, 0)) < 0)
		snprintf(m->why, sizeof(m->why), "claim: %d", ret);
	flag_set(&m->ready, 1);
	if (m->why[0])
		return NULL;
	while (!atomic_load_explicit(&m->go, memory_order_acquire))
		sched_yield();
	/* A cancel sent by now stays pending: no cancellation point yet. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	if (m->how == END_CANCEL_IN_COMMIT)
		ret = m->t->commit(m->prod);
	else
		ret = stamp_send(m->t, m->prod, 0, 0);
	if (ret < 0)
		snprintf(m->why, sizeof(m->why), "commit: %d", ret);
	if (cancel) {
		pthread_testcancel();
		snprintf(m->why, sizeof(m->why),
			 "a pending cancel was not acted on");
		return NULL;
	}
	if (m->how == END_PTHREAD_EXIT)
		pthread_exit((void *)2);
	return (void *)1;
}

static void commit_then_end(const struct topo *t, enum way way,
			    enum commit_end how, bool last)
{
	struct lull_ring_stats st;
	struct lull_producer *other = NULL;
	struct committer m = { .t = t, .how = how };
	struct ledger ledger = { 0 };
	struct lull_ring *ring;
	struct consumer c;
	pthread_t thread;
	char what[200];
	void *result;

	snprintf(what, sizeof(what),
		 "%s, %s, no safety net: the %s bound producer commits to a "
		 "parked consumer and its thread %s",
		 t->name, way_name[way], last ? "last" : "not the last",
		 commit_end_name[how]);
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, way, what);
	consumer_no_safety_net(&c);
	if (!last)
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
	m.ring = ring;
	flag_init(&m.ready);
	atomic_init(&m.go, 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, committer_main, &m), 0);
	cr_assert(flag_wait(&m.ready, 1, DEADLINE_MS), "%s: not ready", what);
	cr_assert(!m.why[0], "%s: %s", what, m.why);
	consumer_wait_parked(&c, 0);
	if (how == END_CANCEL_IN_WRITE || how == END_CANCEL_IN_COMMIT)
		cr_assert_eq(pthread_cancel(thread), 0);
	atomic_store_explicit(&m.go, 1, memory_order_release);
	result = join_within(thread, DEADLINE_MS, what);
	cr_assert(!m.why[0], "%s: %s", what, m.why);
	cr_assert_eq(result,
		     how == END_RETURN	       ? (void *)1
		     : how == END_PTHREAD_EXIT ? (void *)2
					       : PTHREAD_CANCELED,
		     "%s: thread result %p", what, result);
	ledger_add(&ledger, 0, 0);
	if (!last) {
		/*
		 * The ring is open and nothing else wakes the consumer: the
		 * record arrives by its commit's wake-up or never.
		 */
		consumer_wait_handled(&c, 1);
		cr_assert_eq(consumer_poisoned(&c), 0,
			     "%s: poison while a producer remains", what);
		cr_assert_eq(lull_ring_stats(ring, &st), 0);
		cr_assert_geq(st.wakes, 1, "%s: the record arrived without a "
					   "wake-up call", what);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	consumer_finish(&c);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	/* Read from the region, which lasts until the ring is destroyed. */
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	cr_assert_geq(st.wakes, 1, "%s: no wake-up call for a record "
				   "committed to a parked consumer", what);
	cr_assert_eq(st.safety_timeouts, 0, "%s", what);
	consumer_fini(&c);
}

static void commit_then_end_all(const struct topo *t, enum way way)
{
	for (unsigned how = 0; how < COMMIT_ENDS; how++) {
		commit_then_end(t, way, (enum commit_end)how, true);
		if (topo_is_mpsc(t))
			commit_then_end(t, way, (enum commit_end)how, false);
	}
}

#define COMMIT_END_TESTS(suite, topo)                                       \
	Test(suite, thread_ending_after_commit_wakes_lull_ring_wait,         \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_WAIT);                       \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_uring_futex_park,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_URING_FUTEX);                \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_uring_eventfd_park,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_URING_EVENTFD);              \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_futex,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_FUTEX);                 \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_eventfd,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_EVENTFD);               \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_epoll,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_EPOLL);                 \
	}

COMMIT_END_TESTS(spsc, topo_spsc)
COMMIT_END_TESTS(mpsc, topo_mpsc)

/* ------------------------------------------------------------------------
 * A producer cancelled right after its wake-up
 *
 * The producer's write commits, finds the consumer parked and wakes it,
 * with a cancellation already pending.  The wake-up has no cancellation
 * point (lib/wake.c and lib/sys.h make every system call through
 * syscall(), the futex wake and the eventfd write included), so the
 * cancellation cannot cut the wake-up short: the write returns, and the
 * thread ends at the next cancellation point, pthread_testcancel() right
 * after it (the test checks that the write returned 0 first).  The
 * thread-bound producer then detaches (the ring shuts down), and the
 * consumer must get the record and the poison and be able to tear down.
 */

struct doomed {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct flag ready;
	atomic_int go;
	int ret;
	bool wrote; /* the write returned before the cancellation acted */
	uint8_t record[sizeof(struct stamp)];
};

static UNWOUND void *doomed_main(void *arg)
{
	struct doomed *d = arg;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	d->ret = lull_producer_attach(d->ring, LULL_PRODUCER_THREAD,
				      &d->prod);
	flag_set(&d->ready, 1);
	if (d->ret < 0)
		return NULL;
	while (!atomic_load_explicit(&d->go, memory_order_acquire))
		sched_yield();
	/* The cancel is pending: the next cancellation point acts on it. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	d->ret = d->t->write(d->prod, stamp_type(0), d->record,
			     sizeof(d->record));
	d->wrote = true;
	pthread_testcancel();
	return NULL;
}

/* Runs lull_ring_destroy, which must not hang. */
struct destroyer {
	struct consumer *c;
	struct flag done;
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	consumer_fini(d->c);
	flag_set(&d->done, 1);
	return NULL;
}

static void cancelled_after_wake(const struct topo *t, enum way way)
{
	struct lull_ring_stats st;
	struct destroyer killer;
	struct consumer c;
	struct doomed d = { .t = t };
	struct ledger ledger = { 0 };
	struct lull_ring *ring;
	pthread_t thread, reaper;
	char what[160];

	snprintf(what, sizeof(what),
		 "%s, bound producer cancelled right after waking a "
		 "consumer (%s)",
		 t->name, way_name[way]);
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, way, what);
	/*
	 * No safety net: a wake-up claimed and then cut short by the
	 * cancellation would leave the consumer asleep for good (the
	 * detach's shutdown finds the park word already claimed), and the
	 * consumer would not finish by our deadline.
	 */
	consumer_no_safety_net(&c);
	d.ring = ring;
	stamp_fill(d.record, 0, 0);
	flag_init(&d.ready);
	atomic_init(&d.go, 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, doomed_main, &d), 0);
	cr_assert(flag_wait(&d.ready, 1, DEADLINE_MS));
	cr_assert_eq(d.ret, 0);
	consumer_wait_parked(&c, 0);
	cr_assert_eq(pthread_cancel(thread), 0);
	atomic_store_explicit(&d.go, 1, memory_order_release);
	cr_assert_eq(join_within(thread, DEADLINE_MS, what), PTHREAD_CANCELED);
	cr_assert(d.wrote && d.ret == 0,
		  "%s: the cancellation acted inside the write (returned: "
		  "%d, result %d)", what, d.wrote, d.ret);
	/* The record was committed before any wake-up was tried. */
	ledger_add(&ledger, 0, 0);
	/* Stats are read from the region: still there after the teardown. */
	consumer_finish(&c);
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	killer.c = &c;
	flag_init(&killer.done);
	cr_assert_eq(pthread_create(&reaper, NULL, destroyer_main, &killer),
		     0);
	cr_assert(flag_wait(&killer.done, 1, 2000),
		  "%s: tearing the consumer down hangs (a wake-up cut short "
		  "by the cancellation left the region's waker count up)",
		  what);
	join_within(reaper, DEADLINE_MS, what);
	/* The consumer was parked when the record was committed. */
	cr_assert_geq(st.wakes, 1,
		      "%s: no wake-up call completed for a record committed "
		      "to a parked consumer",
		      what);
}

#define CANCEL_WAKE_TESTS(suite, topo)                                       \
	Test(suite, producer_cancelled_after_waking_lull_ring_wait_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_WAIT);                       \
	}                                                                    \
	Test(suite, producer_cancelled_after_waking_uring_futex_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_URING_FUTEX);                \
	}                                                                    \
	Test(suite, producer_cancelled_after_waking_uring_eventfd_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_URING_EVENTFD);              \
	}                                                                    \
	Test(suite, producer_cancelled_after_waking_loop_futex_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_LOOP_FUTEX);                 \
	}                                                                    \
	Test(suite, producer_cancelled_after_waking_loop_eventfd_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_LOOP_EVENTFD);               \
	}                                                                    \
	Test(suite, producer_cancelled_after_waking_loop_epoll_wedges_nothing, \
	     .timeout = 20)                                                  \
	{                                                                    \
		cancelled_after_wake(&topo, WAY_LOOP_EPOLL);                 \
	}

CANCEL_WAKE_TESTS(spsc, topo_spsc)
CANCEL_WAKE_TESTS(mpsc, topo_mpsc)
