/* SPDX-License-Identifier: MIT */
/*
 * park_fix.h - the fixture of the suites of lull/park.h (test_park_*.c,
 * test_producer_wait.c): the park/wake handshake through every backend,
 * and the calls that set it up.
 *
 * Suites (Criterion suite names, then the file):
 *   park, backend          test_park_calls.c: argument and state errors of
 *                          the park calls and lull_ring_wait(), the
 *                          backend names, the probe and LULL_BACKEND
 *   park (extremes)        test_park_timeouts.c: timeouts and safety nets
 *                          at 0, 1 ns and the integer limits
 *   uring                  test_park_uring.c: lull_uring_park_*() errors
 *   own_uring_futex        test_park_own_uring.c: the park's CQEs on the
 *   own_uring_eventfd        caller's io_uring (expiry, cancel, counting)
 *   producer_wait          test_producer_wait.c: lull_producer_wait()
 *   blocking               test_park_handshake.c: records in order and
 *   own_uring_futex          coalescing through each of the six backend
 *   own_uring_eventfd        cases (struct backend_case);
 *   loop_uring_futex       test_park_idle.c: idle cost, the safety net's
 *   loop_uring_eventfd       lost wake-up counter, and a loop stopped
 *   loop_epoll               while it spins
 *   process                test_park_process.c: forked children (the
 *                          Linux 6.16+ futex hash, membarrier, seccomp,
 *                          LULL_SAFETY_NET_MS)
 *
 * The backend suites run the same checks, written once against struct
 * backend_case and a consumer thread (struct consumer) that sleeps the way
 * the backend does, and stamped out per suite by the files' macros:
 * records in order from producer threads; coalescing (a busy consumer
 * costs producers no wake-up, a burst to a parked one costs exactly one);
 * idle cost (one context switch and no CPU over a 2 s park; the default
 * safety net re-checks and is counted as idle); and the safety net's lost
 * wake-up counter, fed a lost wake-up on purpose.
 *
 * A ring ends when its last producer detaches or its loop stops: the
 * consumers expect one poison record after their records, and each check
 * ends by reading that poison (unless the consumer did) and -EPIPE.
 * Producers that must not end the ring stay attached until the test is
 * done with it.
 *
 * "Parked" is observed, not guessed: the consumer's park word says parked
 * (test/lib's ring_park_word(), through lib/handles.h: these suites are
 * white-box where they must be) and its thread sleeps in the backend's
 * system call (test/lib's /proc reader: proc_thread_state() and
 * proc_thread_syscall()).  The only sleeps are idle periods whose length
 * is what a test measures, and the short naps of polls.
 *
 * Every test has a watchdog (.timeout); threads are joined with a deadline
 * (test/lib's timed joins), so a hang fails with a message naming what did
 * not finish.  io_uring tests skip with the reason when the kernel (or a
 * seccomp profile) does not allow the backend; the fallbacks are tested
 * regardless.
 */
#ifndef LULL_TEST_PARK_FIX_H
#define LULL_TEST_PARK_FIX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <liburing.h>

#include <criterion/criterion.h>

#include <lull.h>

/* The region layout: the park word, to observe and to fake a lost wake. */
#include "handles.h"
#include "park.h"
/* The loop's state: its safety net. */

#include "criterion_hook.h"
#include "lib/ledger.h"
#include "lib/proc.h"
#include "lib/threads.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#include "loop_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NSEC_PER_MSEC 1000000ull
#define NSEC_PER_SEC 1000000000ull

/* IORING_OP_FUTEX_WAIT (Linux 6.7); Debian's liburing 2.3 lacks it. */
#define OP_FUTEX_WAIT 51

/* The user_data of every own-io_uring park in this suite. */
#define PARK_UD 0x7061726bull /* "park" */
/* A foreign user_data: a CQE the park must not claim. */
#define OTHER_UD 0x6f746865ull

/* The safety net of tests that must not see it fire: none, the default. */
#define QUIET_SAFETY_NS 0
/*
 * An opt-in safety net that must not fire either: for the tests of what a
 * park with its link timeout reports (its second CQE, what it counts).
 */
#define LONG_SAFETY_NS (10 * NSEC_PER_SEC)

#define MAX_SENDERS 4
#define BATCH 64u

/*
 * Every test's .timeout.  One value for all: Criterion's runner (BoxFort
 * 2.4) leaks a timeout request when tests with different timeouts run in
 * parallel, which fails the ASan run's leak check.  The suite's own
 * deadlines (10 s for a park or a record, 20 s for a join, 20 s for a
 * child) are shorter, so they fail first and say what hung.
 */
#define WATCHDOG_S 30

/* ------------------------------------------------------------------------
 * Time
 */

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / NSEC_PER_SEC),
		.tv_nsec = (long)(ns % NSEC_PER_SEC),
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void spin_for_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		;
}

static uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*state = x;
	return x;
}

static uint64_t timeval_ns(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * NSEC_PER_SEC +
	       (uint64_t)tv->tv_usec * 1000;
}

/* ------------------------------------------------------------------------
 * Records: {producer id, sequence number}, checked in order per producer
 */

#define MSG_TYPE 7

struct msg {
	uint32_t producer;
	uint32_t zero;
	uint64_t seq;
};

/* Write one record, retrying while the ring is full. */
static int write_msg(struct lull_producer *prod, bool mpsc, unsigned id,
		     uint64_t seq)
{
	struct msg m = { .producer = id, .seq = seq };
	int ret;

	for (;;) {
		ret = mpsc ? lull_mpsc_write(prod, MSG_TYPE, &m, sizeof(m))
			   : lull_spsc_write(prod, MSG_TYPE, &m, sizeof(m));
		if (ret != -EAGAIN)
			return ret;
		sched_yield();
	}
}

static bool ring_is_mpsc(struct lull_ring *ring)
{
	return ring->mode == LULL_RING_MPSC;
}

/*
 * Attach a producer and write one record, from the test's thread.  The
 * producer stays attached: its detach, the ring's last, would shut the
 * ring down, and the consumer would find the poison record after the
 * record.  The caller detaches it when the test is done with the ring.
 */
static struct lull_producer *write_one(struct lull_ring *ring, unsigned id,
				       uint64_t seq)
{
	struct lull_producer *prod;

	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(write_msg(prod, ring_is_mpsc(ring), id, seq), 0);
	return prod;
}

static struct lull_ring *new_ring(unsigned topology, size_t capacity)
{
	struct lull_ring *ring;
	int ret = lull_ring_create(&ring, capacity, topology);

	cr_assert_eq(ret, 0, "lull_ring_create: %s", lull_strerror(ret));
	return ring;
}

static int consume_any(const struct lull_record *rec, void *ctx)
{
	(void)rec;
	(void)ctx;
	return LULL_READ_CONTINUE;
}

static bool is_poison(const struct lull_record *rec)
{
	return rec->type == LULL_TYPE_POISON && rec->len == 0;
}

/* Counts what it is handed: records of this suite, poisons, others. */
struct tally {
	unsigned records, poisons, others;
};

static int tally_record(const struct lull_record *rec, void *ctx)
{
	struct tally *t = ctx;

	if (rec->type == MSG_TYPE)
		t->records++;
	else if (is_poison(rec))
		t->poisons++;
	else
		t->others++;
	return LULL_READ_CONTINUE;
}

/*
 * The ring's last producer has detached (or the ring was shut down) and
 * every record was read: all that is left is the poison record, which a
 * wait finds at once; then reads and waits are -EPIPE.  Any thread, once
 * no other consumer call is in progress.
 */
static void expect_poison_then_epipe(struct lull_ring *ring)
{
	struct tally t = { 0 };

	cr_assert_eq(lull_ring_wait(ring, 0), 0, "no poison to wait for");
	cr_assert_eq(lull_ring_read(ring, tally_record, &t, 16), 1);
	cr_assert(t.poisons == 1 && t.records == 0 && t.others == 0,
		  "%u poisons, %u records, %u others where only the poison "
		  "was left", t.poisons, t.records, t.others);
	cr_assert_eq(lull_ring_read(ring, tally_record, &t, 16), -EPIPE);
	cr_assert_eq(lull_ring_wait(ring, 0), -EPIPE);
	cr_assert_eq(lull_ring_wait(ring, -1), -EPIPE);
}

/* The park word (test/lib's reader): LULL_PARK_AWAKE unless parked. */
static uint32_t park_word(const struct lull_ring *ring)
{
	return ring_park_word(ring);
}

/* 1 while the consumer asks its producers to fence (lib/park.h). */
static uint32_t park_fence_word(const struct lull_ring *ring)
{
	/* Relaxed: a snapshot, as ring_park_word() reads the park word. */
	return atomic_load_explicit(&ring->region->park_fence,
				    memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Stats
 */

#define ST_FMT                                                               \
	"parks %" PRIu64 ", park_cancels %" PRIu64 ", wakes %" PRIu64        \
	", safety_timeouts %" PRIu64 ", idle_timeouts %" PRIu64
#define ST_ARGS(st)                                                          \
	(st).parks, (st).park_cancels, (st).wakes, (st).safety_timeouts,     \
		(st).idle_timeouts

static struct lull_ring_stats stats_of(const struct lull_ring *ring)
{
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	return st;
}

/* ------------------------------------------------------------------------
 * Backends
 */

enum via {
	VIA_WAIT,  /* lull_ring_wait() in the consumer's thread */
	VIA_URING, /* lull_uring_park_*() on the consumer's own io_uring */
	VIA_LOOP,  /* a lull_loop */
};

struct backend_case {
	const char *name;
	enum lull_backend backend;
	enum via via;
};

static const struct backend_case blocking_case = {
	"blocking", LULL_BACKEND_BLOCKING, VIA_WAIT,
};
static const struct backend_case own_futex_case = {
	"own io_uring, uring-futex", LULL_BACKEND_URING_FUTEX, VIA_URING,
};
static const struct backend_case own_eventfd_case = {
	"own io_uring, uring-eventfd", LULL_BACKEND_URING_EVENTFD, VIA_URING,
};
static const struct backend_case loop_futex_case = {
	"loop, uring-futex", LULL_BACKEND_URING_FUTEX, VIA_LOOP,
};
static const struct backend_case loop_eventfd_case = {
	"loop, uring-eventfd", LULL_BACKEND_URING_EVENTFD, VIA_LOOP,
};
static const struct backend_case loop_epoll_case = {
	"loop, epoll", LULL_BACKEND_EPOLL, VIA_LOOP,
};

static bool unavailable(int err)
{
	return err == -ENOSYS || err == -EPERM || err == -EOPNOTSUPP;
}

/* Skip the test, with the reason, when @backend does not work here. */
static void require(enum lull_backend backend)
{
	int ret = lull_backend_supported(backend);

	if (unavailable(ret))
		cr_skip_test("%s is not available here: %s",
			     lull_backend_name(backend), lull_strerror(ret));
	cr_assert_eq(ret, 0, "lull_backend_supported(%s) = %d",
		     lull_backend_name(backend), ret);
}

/* A fresh io_uring for tests that park on their own, or skip. */
static void own_uring_init(struct io_uring *uring, unsigned entries)
{
	int ret;

	require(LULL_BACKEND_URING_EVENTFD);
	ret = io_uring_queue_init(entries, uring, 0);
	cr_assert_eq(ret, 0, "io_uring_queue_init: %s", strerror(-ret));
}

/* The SQE @back entries before the SQ's tail: what arm queued. */
static const struct io_uring_sqe *queued_sqe(const struct io_uring *uring,
					     unsigned back)
{
	return &uring->sq.sqes[(uring->sq.sqe_tail - back) &
			       uring->sq.ring_mask];
}

/*
 * Hand every CQE of @uring to @ring's park; returns how many were the
 * park's, and in *foreign how many were not.
 */
static unsigned reap_cqes(struct lull_ring *ring, struct io_uring *uring,
			  unsigned *foreign)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0, ours = 0;

	io_uring_for_each_cqe(uring, head, cqe) {
		if (lull_uring_park_cqe(ring, cqe) == 1)
			ours++;
		else if (foreign)
			(*foreign)++;
		n++;
	}
	io_uring_cq_advance(uring, n);
	return ours;
}

/*
 * Submit and collect CQEs until @ring's park has none outstanding (probed
 * with lull_ring_wait(), which is -EBUSY exactly then).  Returns 0, or a
 * negative errno when they did not come within 5 s.  Any thread: no
 * Criterion asserts.
 */
static int park_reap(struct lull_ring *ring, struct io_uring *uring)
{
	struct __kernel_timespec ts = { .tv_sec = 5 };
	struct io_uring_cqe *cqe;
	int ret;

	while (lull_ring_wait(ring, 0) == -EBUSY) {
		ret = io_uring_submit_and_wait_timeout(uring, &cqe, 1, &ts,
						       NULL);
		if (ret < 0 && ret != -EINTR)
			return ret;
		reap_cqes(ring, uring, NULL);
	}
	return 0;
}

/* Cancel @ring's park, if armed, and collect its CQEs. */
static int park_teardown(struct lull_ring *ring, struct io_uring *uring)
{
	int ret = lull_uring_park_cancel(ring, uring);

	if (ret == -EBUSY) { /* the SQ is full: make room */
		io_uring_submit(uring);
		ret = lull_uring_park_cancel(ring, uring);
	}
	if (ret == -ENOENT)
		return 0;
	if (ret < 0)
		return ret;
	return park_reap(ring, uring);
}

/* ------------------------------------------------------------------------
 * Producer threads
 */

struct sender {
	struct lull_ring *ring;
	/*
	 * A producer attached by the test, handed over to this thread; NULL:
	 * the thread attaches its own.  Either way the thread detaches it.
	 */
	struct lull_producer *prod;
	unsigned id;
	uint64_t first_seq;
	uint64_t count;
	uint64_t gap_max_ns; /* spin 0..this after each record; 0: burst */
	pthread_barrier_t *start;
	uint64_t rng;
	int error;
	pthread_t thread;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct lull_producer *prod = s->prod;
	int ret = 0;

	/*
	 * Every sender attaches before any may detach (the barrier): the
	 * last detach shuts the ring down, and it must be the very last.
	 */
	if (!prod)
		ret = lull_producer_attach(s->ring, 0, &prod);
	if (s->start)
		pthread_barrier_wait(s->start);
	if (ret < 0) {
		s->error = ret;
		return NULL;
	}
	for (uint64_t i = 0; i < s->count; i++) {
		ret = write_msg(prod, ring_is_mpsc(s->ring), s->id,
				s->first_seq + i);
		if (ret < 0) {
			s->error = ret;
			break;
		}
		if (s->gap_max_ns)
			spin_for_ns(rng_next(&s->rng) % (s->gap_max_ns + 1));
	}
	lull_producer_detach(prod);
	return NULL;
}

/* Join @thread within @seconds (test/lib's timed join), or fail. */
static void join_or_fail(pthread_t thread, unsigned seconds, const char *what)
{
	int ret = thread_join_within(thread, seconds * 1000u, NULL);

	if (ret == ETIMEDOUT)
		cr_assert_fail("watchdog: %s did not finish within %u s", what,
			 seconds);
	cr_assert_eq(ret, 0, "pthread_join: %s", strerror(ret));
}

/* Run @n senders, released together, and check that each wrote all. */
static void senders_run(struct sender *s, unsigned n)
{
	pthread_barrier_t start;

	cr_assert_eq(pthread_barrier_init(&start, NULL, n), 0);
	for (unsigned i = 0; i < n; i++) {
		s[i].start = &start;
		s[i].rng = 0x9e3779b97f4a7c15ull * (i + 1);
		cr_assert_eq(pthread_create(&s[i].thread, NULL, sender_main,
					    &s[i]),
			     0);
	}
	for (unsigned i = 0; i < n; i++)
		join_or_fail(s[i].thread, 20, "a producer thread");
	pthread_barrier_destroy(&start);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(s[i].error, 0, "producer %u: %s", i,
			     lull_strerror(s[i].error));
}

/* ------------------------------------------------------------------------
 * A consumer thread that parks the way its backend does
 */

struct consumer {
	/* Set before consumer_start(). */
	const struct backend_case *bc;
	struct lull_ring *ring;
	uint64_t safety_ns;
	uint64_t spin_ns;
	uint64_t expected; /* it returns after this many records */
	/*
	 * VIA_URING: after the first park ends, read by polling instead of
	 * parking again (a consumer that stays busy).
	 */
	bool busy;
	/* Called on the consumer's thread for each record, before counting. */
	void (*on_record)(struct consumer *c, const struct msg *m);
	void *arg;

	struct lull_loop *loop;
	pthread_t thread;
	_Atomic int tid;
	_Atomic uint64_t received;
	/* Each sender's records in order, once (from consumer_start() to
	 * consumer_join()). */
	struct ledger ledger;
	/*
	 * Poison records handed to it: a loop's stop or the last producer's
	 * detach shuts the ring down, and the poison follows the records.
	 */
	unsigned poisons;
	_Atomic bool failed;
	char why[256];
};

static void consumer_init(struct consumer *c, const struct backend_case *bc,
			  struct lull_ring *ring)
{
	memset(c, 0, sizeof(*c));
	c->bc = bc;
	c->ring = ring;
	c->safety_ns = QUIET_SAFETY_NS;
	atomic_init(&c->tid, 0);
	atomic_init(&c->received, 0);
	atomic_init(&c->failed, false);
}

__attribute__((format(printf, 2, 3))) static void
consumer_fail(struct consumer *c, const char *fmt, ...)
{
	va_list ap;

	if (atomic_load_explicit(&c->failed, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	/* Pairs with the acquire in the test's thread: why is complete. */
	atomic_store_explicit(&c->failed, true, memory_order_release);
	if (c->loop)
		lull_loop_stop(c->loop);
}

static bool consumer_done(struct consumer *c)
{
	return atomic_load_explicit(&c->failed, memory_order_relaxed) ||
	       atomic_load_explicit(&c->received, memory_order_relaxed) >=
		       c->expected;
}

static int consumer_record(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;
	struct msg m;
	uint64_t n;

	if (rec->type < 1 && is_poison(rec) && !c->poisons &&
	    atomic_load_explicit(&c->received, memory_order_relaxed) ==
		    c->expected) {
		c->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (c->poisons) {
		consumer_fail(c, "a record of type %d after the poison",
			      rec->type);
		return LULL_READ_STOP;
	}
	if (rec->type != MSG_TYPE || rec->len != sizeof(m)) {
		consumer_fail(c, "a record of type %d, %u bytes", rec->type,
			      rec->len);
		return LULL_READ_STOP;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (!ledger_got(&c->ledger, m.producer, m.seq)) {
		consumer_fail(c, "%s", ledger_why(&c->ledger));
		return LULL_READ_STOP;
	}
	if (c->on_record)
		c->on_record(c, &m);
	/* Release: the hooks' results are visible to whoever sees it. */
	n = atomic_fetch_add_explicit(&c->received, 1, memory_order_release) +
	    1;
	if (c->loop && n == c->expected)
		lull_loop_stop(c->loop);
	return LULL_READ_CONTINUE;
}

static void consume_wait(struct consumer *c)
{
	int ret;

	while (!consumer_done(c)) {
		ret = lull_ring_wait(c->ring, -1);
		if (ret < 0) {
			consumer_fail(c, "lull_ring_wait: %s",
				      lull_strerror(ret));
			return;
		}
		ret = lull_ring_read(c->ring, consumer_record, c, BATCH);
		if (ret < 0) {
			consumer_fail(c, "lull_ring_read after a wait: %s",
				      lull_strerror(ret));
			return;
		}
	}
}

static void consume_polling(struct consumer *c)
{
	int ret;

	while (!consumer_done(c)) {
		ret = lull_ring_read(c->ring, consumer_record, c, BATCH);
		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret < 0) {
			consumer_fail(c, "lull_ring_read: %s",
				      lull_strerror(ret));
			return;
		}
	}
}

static void consume_own_uring(struct consumer *c)
{
	struct io_uring uring;
	unsigned foreign = 0;
	int ret;

	ret = io_uring_queue_init(8, &uring, 0);
	if (ret < 0) {
		consumer_fail(c, "io_uring_queue_init: %s", strerror(-ret));
		return;
	}
	ret = lull_uring_park_arm(c->ring, &uring, PARK_UD);
	if (ret == 1)
		ret = lull_uring_park_drain(c->ring, &uring, consumer_record,
					    c, BATCH);
	/* -EPIPE: the drain delivered the poison; nothing is armed. */
	if (ret < 0 && !(ret == -EPIPE && c->poisons))
		consumer_fail(c, "lull_uring_park_arm: %s",
			      lull_strerror(ret));
	while (!consumer_done(c)) {
		ret = io_uring_submit_and_wait(&uring, 1);
		if (ret < 0 && ret != -EINTR) {
			consumer_fail(c, "io_uring_submit_and_wait: %s",
				      strerror(-ret));
			break;
		}
		if (!reap_cqes(c->ring, &uring, &foreign)) {
			if (foreign)
				consumer_fail(c, "%u CQEs not the park's",
					      foreign);
			continue;
		}
		if (c->busy) {
			consume_polling(c);
			break;
		}
		ret = lull_uring_park_drain(c->ring, &uring, consumer_record,
					    c, BATCH);
		if (ret == -EPIPE && c->poisons)
			break; /* the poison was delivered: nothing armed */
		if (ret < 0)
			consumer_fail(c, "lull_uring_park_drain: %s",
				      lull_strerror(ret));
	}
	ret = park_teardown(c->ring, &uring);
	if (ret < 0)
		consumer_fail(c, "cancelling the park: %s", lull_strerror(ret));
	io_uring_queue_exit(&uring);
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;
	struct lull_park_config cfg = {
		.spin_ns = c->spin_ns,
		.safety_timeout_ns = c->safety_ns,
	};
	int ret;

	atomic_store_explicit(&c->tid, gettid(), memory_order_relaxed);
	if (c->bc->via == VIA_LOOP) {
		ret = lull_loop_run(c->loop);
		if (ret < 0)
			consumer_fail(c, "lull_loop_run: %s",
				      lull_strerror(ret));
		return NULL;
	}
	ret = lull_ring_park_config(c->ring, &cfg);
	if (ret < 0) {
		consumer_fail(c, "lull_ring_park_config: %s",
			      lull_strerror(ret));
		return NULL;
	}
	if (c->bc->via == VIA_WAIT)
		consume_wait(c);
	else
		consume_own_uring(c);
	return NULL;
}

static void consumer_start(struct consumer *c)
{
	const struct backend_case *bc = c->bc;
	struct lull_loop_config cfg = {
		.backend = bc->backend,
		.spin_ns = c->spin_ns,
		.safety_timeout_ns = c->safety_ns,
	};
	int ret;

	cr_assert_eq(ledger_init(&c->ledger, MAX_SENDERS), 0);
	if (bc->via == VIA_URING)
		cr_assert_eq(setenv("LULL_BACKEND",
				    lull_backend_name(bc->backend), 1),
			     0);
	if (bc->via == VIA_LOOP) {
		ret = lull_loop_create(&c->loop, &cfg);
		cr_assert_eq(ret, 0, "lull_loop_create(%s): %s", bc->name,
			     lull_strerror(ret));
		cr_assert_eq(lull_loop_backend(c->loop), (int)bc->backend);
		ret = lull_loop_attach(c->loop, c->ring, consumer_record, c,
				       BATCH);
		cr_assert_eq(ret, 0, "lull_loop_attach: %s",
			     lull_strerror(ret));
	}
	cr_assert_eq(pthread_create(&c->thread, NULL, consumer_main, c), 0);
}

static void consumer_join(struct consumer *c)
{
	char what[128];

	snprintf(what, sizeof(what), "the %s consumer (%" PRIu64 " of %" PRIu64
		 " records)", c->bc->name,
		 atomic_load_explicit(&c->received, memory_order_relaxed),
		 c->expected);
	join_or_fail(c->thread, 20, what);
	ledger_fini(&c->ledger);
	if (c->loop)
		cr_assert_eq(lull_loop_destroy(c->loop), 0);
	c->loop = NULL;
	unsetenv("LULL_BACKEND");
	cr_assert(!atomic_load_explicit(&c->failed, memory_order_acquire),
		  "%s consumer: %s", c->bc->name, c->why);
	cr_assert_eq(atomic_load_explicit(&c->received, memory_order_relaxed),
		     c->expected);
}

/*
 * After consumer_join(), once every producer has detached: the ring ends
 * with one poison record, after all the records.  A loop has handed it to
 * the consumer before its run returned (the stop shut the ring down, if
 * the last detach had not); a consumer of its own may have stopped
 * reading before it, and then it is still there.
 */
static void consumer_end(struct consumer *c)
{
	struct tally t = { 0 };

	cr_assert_leq(c->poisons, 1);
	if (c->bc->via == VIA_LOOP)
		cr_assert_eq(c->poisons, 1, "%s: the loop returned before the "
			     "poison", c->bc->name);
	if (c->poisons)
		cr_assert_eq(lull_ring_read(c->ring, tally_record, &t, 16),
			     -EPIPE, "%s: a read after the poison",
			     c->bc->name);
	else
		expect_poison_then_epipe(c->ring);
}

static void consumer_check_alive(struct consumer *c)
{
	if (atomic_load_explicit(&c->failed, memory_order_acquire))
		cr_assert_fail("%s consumer: %s", c->bc->name, c->why);
}

static void wait_received(struct consumer *c, uint64_t n)
{
	uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;

	while (atomic_load_explicit(&c->received, memory_order_acquire) < n) {
		consumer_check_alive(c);
		if (now_ns() > deadline)
			cr_assert_fail("watchdog: the %s consumer got %" PRIu64
				 " of %" PRIu64 " records in 10 s",
				 c->bc->name,
				 atomic_load_explicit(&c->received,
						      memory_order_relaxed),
				 n);
		sleep_ns(100 * 1000);
	}
}

/* ------------------------------------------------------------------------
 * Is the consumer thread asleep in its park?
 */

static bool is_park_syscall(const struct backend_case *bc, long nr)
{
	switch (bc->backend) {
	case LULL_BACKEND_BLOCKING:
		return nr == SYS_futex;
	case LULL_BACKEND_EPOLL:
		return nr == SYS_epoll_wait || nr == SYS_epoll_pwait
#ifdef SYS_epoll_pwait2
		       || nr == SYS_epoll_pwait2
#endif
			;
	default:
		return nr == SYS_io_uring_enter;
	}
}

/* The thread is sleeping ('S') inside the backend's sleeping call. */
static bool asleep_in_park(pid_t tid, const struct backend_case *bc)
{
	long nr;

	if (proc_thread_state(tid) != 'S')
		return false;
	nr = proc_thread_syscall(tid);
	if (nr == -2)
		return true; /* no syscall file: 'S' has to do */
	return nr >= 0 && is_park_syscall(bc, nr);
}

/* Wait until the consumer has announced a park and sleeps in it. */
static void wait_parked(struct consumer *c)
{
	uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;
	pid_t tid;

	for (;;) {
		consumer_check_alive(c);
		tid = atomic_load_explicit(&c->tid, memory_order_relaxed);
		if (tid && park_word(c->ring) != LULL_PARK_AWAKE &&
		    asleep_in_park(tid, c->bc))
			return;
		if (now_ns() > deadline)
			cr_assert_fail("watchdog: the %s consumer did not park "
				       "within 10 s (park word %u)",
				       c->bc->name, park_word(c->ring));
		sleep_ns(100 * 1000);
	}
}

/* ------------------------------------------------------------------------
 * A gate the consumer's handler waits at
 */

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
};

#define GATE_INIT                                                            \
	{ PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false }

static void gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* The first record waits until the test opens the gate. */
static void hold_first_record(struct consumer *c, const struct msg *m)
{
	(void)m;
	if (atomic_load_explicit(&c->received, memory_order_relaxed) == 0)
		gate_wait(c->arg);
}

/* ------------------------------------------------------------------------
 * Helpers of more than one suite
 */

/* A ring full of 24-byte records: no room for one more. */
static struct lull_producer *fill_ring(struct lull_ring *ring,
				       unsigned *written)
{
	bool mpsc = ring_is_mpsc(ring);
	struct lull_producer *prod;
	struct msg m = { 0 };
	int ret;

	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	*written = 0;
	for (;;) {
		m.seq = *written;
		ret = mpsc ? lull_mpsc_write(prod, MSG_TYPE, &m, sizeof(m))
			   : lull_spsc_write(prod, MSG_TYPE, &m, sizeof(m));
		if (ret == -EAGAIN)
			break;
		cr_assert_eq(ret, 0);
		++*written;
	}
	cr_assert_gt(*written, 0);
	return prod;
}

/* One record, from a new thread, once the consumer has parked. */
static void *write_when_parked(void *arg)
{
	struct lull_producer *prod = arg;

	while (park_word(prod->ring) == LULL_PARK_AWAKE)
		sched_yield();
	return (void *)(intptr_t)write_msg(prod, false, 0, 0);
}

/* Read one batch once a producer waits for room. */
static void *read_when_waited(void *arg)
{
	struct lull_ring *ring = arg;

	while (!atomic_load_explicit(&ring->region->space_waiters,
				     memory_order_relaxed))
		sched_yield();
	return (void *)(intptr_t)(lull_ring_read(ring, consume_any, NULL, 4) < 1);
}

#pragma GCC diagnostic pop

#endif
