/* SPDX-License-Identifier: MIT */
/*
 * test_park.c - the Criterion suite of lull/park.h: the park/wake handshake
 * through every backend, and the calls that set it up.
 *
 * Suites:
 *   park, backend, uring    argument and state errors of every park.h call,
 *                           the backend names, the probe and LULL_BACKEND
 *   blocking                lull_ring_wait() (a futex wait in the thread)
 *   own_uring_futex         lull_uring_park_*() on the consumer's own
 *   own_uring_eventfd         io_uring, forced with LULL_BACKEND
 *   loop_uring_futex        a lull_loop on each of its three backends
 *   loop_uring_eventfd
 *   loop_epoll
 *   process                 forked children: a park armed while the process
 *                           is single-threaded (the Linux 6.16+ futex hash),
 *                           and io_uring blocked by a seccomp filter
 *
 * The six backend suites run the same checks, written once against struct
 * backend_case and a consumer thread (struct consumer) that sleeps the way
 * the backend does, and stamped out per suite by BACKEND_TESTS(): records
 * in order from producer threads; coalescing (a busy consumer costs
 * producers no wake-up, a burst to a parked one costs exactly one); idle
 * cost (one context switch and no CPU over a 2 s park; the default safety
 * net re-checks and is counted as idle); and the safety net's lost wake-up
 * counter, fed a lost wake-up on purpose.  The loop suites add that
 * lull_loop_stop() ends a loop that spins before parking; the own_uring
 * suites add the CQE handling of the caller's io_uring: safety-net expiry,
 * cancel, and what is (not) counted as a safety-net expiry.
 *
 * A ring ends when its last producer detaches or its loop stops: the
 * consumers expect one poison record after their records, and each check
 * ends by reading that poison (unless the consumer did) and -EPIPE.
 * Producers that must not end the ring stay attached until the test is
 * done with it.
 *
 * "Parked" is observed, not guessed: the consumer's park word says parked
 * (lib/handles.h, lib/park.h: this suite is white-box where it must be) and its thread
 * sleeps in the backend's system call (/proc/self/task/TID/{stat,syscall}).
 * The only sleeps are idle periods whose length is what a test measures.
 *
 * Every test has a watchdog (.timeout); threads are joined with a deadline,
 * so a hang fails with a message naming what did not finish.  io_uring
 * tests skip with the reason when the kernel (or a seccomp profile) does not
 * allow the backend; the fallbacks are tested regardless.
 */
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

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
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

static uint32_t park_word(const struct lull_ring *ring)
{
	return atomic_load_explicit(&ring->region->park, memory_order_relaxed);
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

static void join_or_fail(pthread_t thread, unsigned seconds, const char *what)
{
	struct timespec deadline;
	int ret;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += seconds;
	ret = pthread_timedjoin_np(thread, NULL, &deadline);
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
	uint64_t next_seq[MAX_SENDERS];
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
	if (m.producer >= MAX_SENDERS || m.seq != c->next_seq[m.producer]) {
		consumer_fail(c,
			      "producer %u: record %" PRIu64
			      " where %" PRIu64 " was next",
			      m.producer, m.seq,
			      m.producer < MAX_SENDERS
				      ? c->next_seq[m.producer]
				      : 0);
		return LULL_READ_STOP;
	}
	c->next_seq[m.producer]++;
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

static bool read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

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
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	if (!read_file(path, buf, sizeof(buf)))
		return false;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return false;
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	if (!read_file(path, buf, sizeof(buf)))
		return true; /* no syscall file: 'S' has to do */
	if (buf[0] < '0' || buf[0] > '9')
		return false; /* "running" */
	return is_park_syscall(bc, strtol(buf, NULL, 10));
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
 * Per-backend checks
 */

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

#define IDLE_NS (2 * NSEC_PER_SEC)

struct idle_marks {
	struct rusage ru[2];
	struct lull_ring_stats st; /* when record 1 arrived */
};

/* Record 0 starts the idle window, record 1 ends it. */
static void mark_idle(struct consumer *c, const struct msg *m)
{
	struct idle_marks *marks = c->arg;

	if (m->seq < 2)
		getrusage(RUSAGE_THREAD, &marks->ru[m->seq]);
	if (m->seq == 1)
		lull_ring_stats(c->ring, &marks->st);
}

/*
 * The voluntary context switches of thread @tid so far, from
 * /proc/self/task/TID/status: readable from another thread while @tid
 * sleeps, so the count covers exactly the window the test chooses.
 */
static long thread_voluntary_switches(pid_t tid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	cr_assert_geq(n, 0, "no voluntary_ctxt_switches in %s", path);
	return n;
}

/*
 * A consumer parked for 2 s, from just after record 0 (before it parks)
 * to just after record 1 arrives.  With no safety net (the default) it
 * sleeps through: while it is parked, 0 voluntary context switches (read
 * from /proc by this thread, so the window holds nothing but the park),
 * and 1 in all from record 0 to record 1 (the park itself), under 1 ms of
 * CPU.  With an opt-in 500 ms safety net, the net re-checks 3 or 4 times,
 * each counted as an idle timeout.  The counters are read when record 1
 * arrives, so the consumer's teardown does not count.  (perf/handoff's
 * idle windows, 10 s with --idle-s 10, measure the same at length.)
 */
static void check_idle(const struct backend_case *bc, bool quiet)
{
	struct idle_marks marks;
	struct lull_ring_stats st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t cpu_ns, parked_cpu_ns;
	long switches, parked_switches = 0;
	clockid_t cpu_clock;
	pid_t tid;

	require(bc->backend);
	memset(&marks, 0, sizeof(marks));
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.safety_ns = quiet ? QUIET_SAFETY_NS : 500 * NSEC_PER_MSEC;
	c.expected = 2;
	c.on_record = mark_idle;
	c.arg = &marks;
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(write_msg(prod, false, 0, 0), 0);
	consumer_start(&c);
	wait_received(&c, 1);
	wait_parked(&c);
	tid = atomic_load_explicit(&c.tid, memory_order_relaxed);
	cr_assert_eq(pthread_getcpuclockid(c.thread, &cpu_clock), 0);
	parked_switches = thread_voluntary_switches(tid);
	parked_cpu_ns = clock_ns(cpu_clock);
	sleep_ns(IDLE_NS);
	parked_cpu_ns = clock_ns(cpu_clock) - parked_cpu_ns;
	parked_switches = thread_voluntary_switches(tid) - parked_switches;
	cr_assert_eq(write_msg(prod, false, 0, 1), 0);
	consumer_join(&c);
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	st = marks.st;
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	if (quiet) {
		cr_assert_eq(parked_switches, 0,
			     "%s: the parked consumer woke %ld times in a "
			     "2 s idle window with no safety net; " ST_FMT,
			     bc->name, parked_switches, ST_ARGS(st));
		switches = marks.ru[1].ru_nvcsw - marks.ru[0].ru_nvcsw;
		cpu_ns = timeval_ns(&marks.ru[1].ru_utime) +
			 timeval_ns(&marks.ru[1].ru_stime) -
			 timeval_ns(&marks.ru[0].ru_utime) -
			 timeval_ns(&marks.ru[0].ru_stime);
		cr_assert_leq(switches, 1,
			      "%s: %ld voluntary context switches in a 2 s "
			      "park (1 is the park itself); " ST_FMT,
			      bc->name, switches, ST_ARGS(st));
		/*
		 * CPU while parked, read from this thread through the
		 * consumer's CPU clock (exact, not tick-sampled): nothing
		 * but what a stray wake-up would cost.  From record 0 to
		 * record 1, which also holds the park and the wake paths
		 * (slow under sanitizers and load), only loosely bounded.
		 */
		cr_assert_lt(parked_cpu_ns, 50 * NSEC_PER_MSEC / 1000,
			     "%s: %" PRIu64 " ns of CPU while parked for 2 s",
			     bc->name, parked_cpu_ns);
		cr_assert_lt(cpu_ns, 20 * NSEC_PER_MSEC,
			     "%s: %" PRIu64 " ns of CPU from record to record "
			     "across a 2 s park", bc->name, cpu_ns);
		cr_assert_eq(st.idle_timeouts, 0, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		/* The waker counts its wake-up after making it: read it now. */
		st = stats_of(ring);
		cr_assert_eq(st.wakes, 1, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
	} else {
		cr_assert(st.idle_timeouts >= 3 && st.idle_timeouts <= 4,
			  "%s: a 500 ms safety net fired %" PRIu64
			  " counted times in a 2 s idle park, not 3 or 4; "
			  ST_FMT,
			  bc->name, st.idle_timeouts, ST_ARGS(st));
		cr_assert_geq(parked_switches, 3,
			      "%s: the safety net woke the consumer %ld times",
			      bc->name, parked_switches);
	}
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * Fake a lost wake-up: while the consumer is parked (after a normal
 * wake-up cycle, as in any busy program), hide the park word from a
 * producer, commit, and put the word back.  The record stays unannounced
 * until the safety net ends the park, which must count it as exactly the
 * lost wake-up safety_timeouts exists to reveal.
 */
static void check_injected_lost_wake(const struct backend_case *bc)
{
	const uint64_t safety = 300 * NSEC_PER_MSEC;
	struct lull_ring_stats base, st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t start, elapsed;
	uint32_t how;

	require(bc->backend);
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.safety_ns = safety;
	c.expected = 2;
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	consumer_start(&c);
	wait_parked(&c);
	cr_assert_eq(write_msg(prod, false, 0, 0), 0);
	wait_received(&c, 1);
	wait_parked(&c);
	base = stats_of(ring);
	start = now_ns();
	how = atomic_exchange_explicit(&ring->region->park, LULL_PARK_AWAKE,
				       memory_order_seq_cst);
	cr_assert_neq(how, LULL_PARK_AWAKE);
	cr_assert_eq(write_msg(prod, false, 0, 1), 0);
	atomic_store_explicit(&ring->region->park, how, memory_order_seq_cst);
	consumer_join(&c);
	elapsed = now_ns() - start;
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, base.wakes, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_gt(elapsed, safety / 2,
		     "%s: the hidden record arrived after %" PRIu64
		     " ns, before the safety net could have fired",
		     bc->name, elapsed);
	cr_assert_eq(st.safety_timeouts - base.safety_timeouts, 1,
		     "%s: the safety net ended a park with a record waiting "
		     "and no waker (a lost wake-up), %.0f ms after the commit, "
		     "but counted %" PRIu64 " lost wake-ups; " ST_FMT,
		     bc->name, elapsed / 1e6,
		     st.safety_timeouts - base.safety_timeouts, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * A loop configured to spin before it parks, stopped from a callback
 * (lull_loop_stop(): shut the rings down, return once each has delivered
 * its poison), returns at once rather than after the spin.  The producer
 * stays attached: only the stop can end the ring, and it does, producer
 * or not.
 */
static void check_stop_while_spinning(const struct backend_case *bc)
{
	const uint64_t spin = 5 * NSEC_PER_SEC;
	struct lull_ring_stats st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t start, elapsed;

	require(bc->backend);
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.spin_ns = spin;
	c.expected = 1; /* its handler calls lull_loop_stop() */
	consumer_start(&c);
	start = now_ns();
	prod = write_one(ring, 0, 0);
	consumer_join(&c);
	elapsed = now_ns() - start;
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_lt(elapsed, NSEC_PER_SEC,
		     "%s: lull_loop_run() returned %.3f s after a callback "
		     "called lull_loop_stop(), with spin_ns %.0f s",
		     bc->name, elapsed / 1e9, spin / 1e9);
	cr_assert_eq(c.poisons, 1, "%s: the stop's poison", bc->name);
	cr_assert_eq(write_msg(prod, false, 0, 1), -EPIPE);
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

#define BACKEND_TESTS(suite, bc)                                             \
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
	Test(suite, idle_park_makes_no_wake_up_and_costs_no_cpu,             \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_idle(&bc, true);                                       \
	}                                                                    \
	Test(suite, opt_in_safety_net_rechecks_an_idle_park_and_counts_it,   \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_idle(&bc, false);                                      \
	}                                                                    \
	Test(suite, safety_net_counts_an_injected_lost_wake,                 \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_injected_lost_wake(&bc);                               \
	}

#define LOOP_TESTS(suite, bc)                                                \
	Test(suite, stop_ends_a_spinning_loop_promptly,                      \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_stop_while_spinning(&bc);                              \
	}

BACKEND_TESTS(blocking, blocking_case)
BACKEND_TESTS(own_uring_futex, own_futex_case)
BACKEND_TESTS(own_uring_eventfd, own_eventfd_case)
BACKEND_TESTS(loop_uring_futex, loop_futex_case)
BACKEND_TESTS(loop_uring_eventfd, loop_eventfd_case)
BACKEND_TESTS(loop_epoll, loop_epoll_case)
LOOP_TESTS(loop_uring_futex, loop_futex_case)
LOOP_TESTS(loop_uring_eventfd, loop_eventfd_case)
LOOP_TESTS(loop_epoll, loop_epoll_case)

/* ------------------------------------------------------------------------
 * park: configuration, counters and lull_ring_wait()
 */

Test(park, config_rejects_a_null_ring_and_takes_zero_as_no_safety_net,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = { .spin_ns = 0, .safety_timeout_ns = 0 };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	cr_assert_eq(LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS, 0, "off by default");
	cr_assert_eq(ring->safety_ns, 0, "a new ring has no safety net");
	cr_assert_eq(lull_ring_park_config(NULL, NULL), -EINVAL);
	cr_assert_eq(lull_ring_park_config(NULL, &cfg), -EINVAL);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(ring->safety_ns, 0);
	cfg.safety_timeout_ns = 1;
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(ring->safety_ns, 1);
	cr_assert_eq(lull_ring_park_config(ring, NULL), 0);
	cr_assert_eq(ring->safety_ns, 0, "NULL restores: no safety net");
	/* With none, a park on an io_uring is its wait alone. */
	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 1);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, consumer_calls_are_eperm_without_the_consumer_role,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = {
		.safety_timeout_ns = LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS,
	};
	struct lull_loop_config epoll_cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring, *other;
	struct io_uring dummy;
	struct io_uring_cqe cqe;
	struct lull_ring_stats st;
	struct lull_loop *loop;
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size);

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096,
					 LULL_RING_SPSC),
		     0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	memset(&dummy, 0, sizeof(dummy));
	memset(&cqe, 0, sizeof(cqe));
	cqe.user_data = PARK_UD;

	cr_assert_eq(lull_ring_park_config(other, &cfg), -EPERM);
	cr_assert_eq(lull_ring_park_config(other, NULL), -EPERM);
	cr_assert_eq(lull_ring_wait(other, 0), -EPERM);
	cr_assert_eq(lull_ring_wait(other, -1), -EPERM);
	/* The role is checked before the io_uring is looked at. */
	cr_assert_eq(lull_uring_park_arm(other, &dummy, PARK_UD), -EPERM);
	cr_assert_eq(lull_uring_park_drain(other, &dummy, consume_any, NULL,
					   1),
		     -EPERM);
	cr_assert_eq(lull_uring_park_cancel(other, &dummy), -EPERM);
	cr_assert_eq(lull_uring_park_cqe(other, &cqe), 0);
	cr_assert_eq(lull_loop_create(&loop, &epoll_cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, other, consume_any, NULL, 0),
		     -EPERM);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	/* Counters are for anyone. */
	cr_assert_eq(lull_ring_stats(other, &st), 0);

	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(park, stats_reject_null_and_start_at_zero, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_ring_stats st;

	memset(&st, 0xa5, sizeof(st));
	cr_assert_eq(lull_ring_stats(NULL, &st), -EINVAL);
	cr_assert_eq(lull_ring_stats(ring, NULL), -EINVAL);
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	cr_assert_eq(st.parks, 0);
	cr_assert_eq(st.park_cancels, 0);
	cr_assert_eq(st.wakes, 0);
	cr_assert_eq(st.safety_timeouts, 0);
	cr_assert_eq(st.idle_timeouts, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, stats_are_the_regions_seen_through_any_handle, .timeout = WATCHDOG_S)
{
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size);
	struct lull_ring *ring, *other;
	struct lull_ring_stats st;

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096,
					 LULL_RING_MPSC),
		     0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, 5 * (int64_t)NSEC_PER_MSEC),
		     -ETIMEDOUT);
	cr_assert_eq(lull_ring_stats(other, &st), 0);
	cr_assert_geq(st.parks, 1, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(park, wait_rejects_null, .timeout = WATCHDOG_S)
{
	cr_assert_eq(lull_ring_wait(NULL, 0), -EINVAL);
	cr_assert_eq(lull_ring_wait(NULL, -1), -EINVAL);
}

Test(park, wait_returns_at_once_when_a_record_is_there, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	uint64_t start;

	prod = write_one(ring, 0, 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, -1), 0);
	cr_assert_eq(lull_ring_wait(ring, 10 * (int64_t)NSEC_PER_SEC), 0);
	cr_assert_lt(now_ns() - start, NSEC_PER_SEC);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.wakes, 0, ST_FMT, ST_ARGS(st));
	/* Waiting consumes nothing. */
	cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 10), 1);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	/* The poison the last detach leaves is readable at once too. */
	cr_assert_eq(lull_producer_detach(prod), 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, -1), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_lt(now_ns() - start, NSEC_PER_SEC);
	expect_poison_then_epipe(ring);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.wakes, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * The re-check of every park and every spin asks lull__ring_readable()
 * again and again (here through lull_ring_wait(), which asks it first):
 * it must be a pure query.  After a shutdown it foresees the fatal or
 * poison record without taking the step itself: no seal (so a fatal
 * report still counts), no head published.
 */
static void readable_changes_nothing(unsigned mode, unsigned how)
{
	struct lull_ring *ring = new_ring(mode, 4096);
	struct lull_producer *prod = write_one(ring, 0, 0);
	struct tally t = { 0 };
	uint64_t head;

	/* Graceful: drained, so the poison is next; immediate: discarded. */
	if (how == LULL_SHUTDOWN_GRACEFUL)
		cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 10), 1);
	head = atomic_load_explicit(&ring->region->head, memory_order_relaxed);
	cr_assert_eq(lull_ring_shutdown(ring, how), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(ring->closing, LULL_CLOSING_OPEN);
	cr_assert_not(atomic_load_explicit(&ring->region->state,
					   memory_order_relaxed) &
		      LULL_STATE_SEALED);
	cr_assert_eq(atomic_load_explicit(&ring->region->head,
					  memory_order_relaxed),
		     head, "a query published the head");
	/* Not sealed yet: a fatal report still makes it through. */
	cr_assert_eq(lull_ring_fatal(ring, 7, "late"), 0);
	cr_assert_eq(lull_ring_read(ring, tally_record, &t, 16), 1);
	cr_assert_eq(t.others, 1, "the fatal record is not next");
	expect_poison_then_epipe(ring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, readable_is_a_query_graceful_spsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_SPSC, LULL_SHUTDOWN_GRACEFUL);
}

Test(park, readable_is_a_query_graceful_mpsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_MPSC, LULL_SHUTDOWN_GRACEFUL);
}

Test(park, readable_is_a_query_immediate_mpsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_MPSC, LULL_SHUTDOWN_IMMEDIATE);
}

Test(park, wait_with_zero_timeout_is_etimedout_without_parking,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	st = stats_of(ring);
	cr_assert_eq(st.parks + st.park_cancels, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* A spin longer than the caller's timeout ends at the timeout. */
Test(park, wait_spins_no_longer_than_its_timeout, .timeout = WATCHDOG_S)
{
	const struct lull_park_config cfg = { .spin_ns = 20 * NSEC_PER_SEC };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	uint64_t start, elapsed;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, (int64_t)NSEC_PER_MSEC), -ETIMEDOUT);
	elapsed = now_ns() - start;
	cr_assert_lt(elapsed, 10 * NSEC_PER_SEC,
		     "a 1 ms wait spun for %" PRIu64 " ns", elapsed);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_times_out_after_its_timeout, .timeout = WATCHDOG_S)
{
	const uint64_t timeout = 50 * NSEC_PER_MSEC;
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_ring_stats st;
	uint64_t start, elapsed;

	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, (int64_t)timeout), -ETIMEDOUT);
	elapsed = now_ns() - start;
	cr_assert_geq(elapsed, timeout, "returned after %" PRIu64 " ns",
		      elapsed);
	cr_assert_lt(elapsed, timeout + 2 * NSEC_PER_SEC);
	st = stats_of(ring);
	cr_assert_geq(st.parks, 1, ST_FMT, ST_ARGS(st));
	/* The caller's timeout is not the safety net. */
	cr_assert_eq(st.idle_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_rechecks_at_the_safety_net_and_counts_idle_timeouts,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = {
		.safety_timeout_ns = 10 * NSEC_PER_MSEC,
	};
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_ring_wait(ring, 200 * (int64_t)NSEC_PER_MSEC),
		     -ETIMEDOUT);
	st = stats_of(ring);
	/* At most 19 whole 10 ms slices fit before the 200 ms deadline. */
	cr_assert(st.idle_timeouts >= 1 && st.idle_timeouts <= 19, ST_FMT,
		  ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_geq(st.parks, st.idle_timeouts, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_is_ebusy_while_attached_to_a_loop, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_loop *loop;

	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_ring_wait(ring, -1), -EBUSY);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_is_ebusy_while_a_uring_park_is_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_ring_wait(ring, -1), -EBUSY);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, destroy_is_ebusy_while_a_loop_or_a_uring_park_holds_the_ring,
     .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(io_uring_submit(&uring), 1);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(park_reap(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* ------------------------------------------------------------------------
 * backend: names, support, the probe
 */

/* ------------------------------------------------------------------------
 * lull_producer_wait(): producers blocked on a full ring
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

/* Records of one producer, checked for order from seq next_seq on. */
struct seq_check {
	unsigned records, bad;
	uint64_t next_seq;
};

static int seq_check_record(const struct lull_record *rec, void *ctx)
{
	struct seq_check *c = ctx;
	struct msg m;

	if (rec->type != MSG_TYPE || rec->len != sizeof(m)) {
		c->bad++;
		return LULL_READ_CONTINUE;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.seq != c->next_seq)
		c->bad++;
	c->next_seq = m.seq + 1;
	c->records++;
	return LULL_READ_CONTINUE;
}

/* A producer thread that waits for room, then writes one more record. */
struct room_waiter {
	struct lull_producer *prod;
	bool mpsc;
	uint64_t seq;
	int64_t timeout_ns;
	_Atomic pid_t tid;
	int wait_ret;
	int write_ret;
};

static void *room_waiter_main(void *arg)
{
	struct room_waiter *w = arg;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	w->wait_ret = lull_producer_wait(w->prod, sizeof(struct msg),
					 w->timeout_ns);
	w->write_ret = w->wait_ret ? w->wait_ret
				   : write_msg(w->prod, w->mpsc, 0, w->seq);
	return NULL;
}

/* Wait until the waiter sleeps in futex(2) (the blocking "park"). */
static void wait_waiter_asleep(struct room_waiter *w)
{
	uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;
	pid_t tid;

	for (;;) {
		tid = atomic_load(&w->tid);
		if (tid && asleep_in_park(tid, &blocking_case))
			return;
		if (now_ns() > deadline)
			cr_assert_fail("watchdog: the producer did not go to "
				       "sleep waiting for room within 10 s");
		sleep_ns(100 * 1000);
	}
}

static void check_wait_rejects(unsigned topology)
{
	struct lull_ring *ring = new_ring(topology, 4096);
	struct lull_producer *prod;
	void *data;

	cr_assert_eq(lull_producer_wait(NULL, 8, -1), -EINVAL);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(lull_producer_wait(prod, 4096, -1), -EMSGSIZE);
	cr_assert_eq(lull_producer_wait(prod, SIZE_MAX, -1), -EMSGSIZE);
	cr_assert_eq(topology == LULL_RING_MPSC
			     ? lull_mpsc_claim(prod, MSG_TYPE, 8, &data)
			     : lull_spsc_claim(prod, MSG_TYPE, 8, &data),
		     0);
	cr_assert_eq(lull_producer_wait(prod, 8, -1), -EBUSY);
	cr_assert_eq(topology == LULL_RING_MPSC ? lull_mpsc_abort(prod)
						: lull_spsc_abort(prod),
		     0);
	/* Room, and no timeout needed: at once. */
	cr_assert_eq(lull_producer_wait(prod, 8, 0), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, rejects_bad_arguments_spsc, .timeout = WATCHDOG_S)
{
	check_wait_rejects(LULL_RING_SPSC);
}

Test(producer_wait, rejects_bad_arguments_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_rejects(LULL_RING_MPSC);
}

static void check_wait_times_out(unsigned topology)
{
	struct lull_ring *ring = new_ring(topology, 4096);
	struct lull_producer *prod;
	unsigned written;
	uint64_t start;

	prod = fill_ring(ring, &written);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 0),
		     -ETIMEDOUT);
	start = now_ns();
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg),
					(int64_t)(30 * NSEC_PER_MSEC)),
		     -ETIMEDOUT);
	cr_assert_geq(now_ns() - start, 30 * NSEC_PER_MSEC);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, times_out_on_a_full_ring_spsc, .timeout = WATCHDOG_S)
{
	check_wait_times_out(LULL_RING_SPSC);
}

Test(producer_wait, times_out_on_a_full_ring_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_times_out(LULL_RING_MPSC);
}

/*
 * A producer blocked on a full ring sleeps until the consumer reads: it
 * then writes its record, which arrives after all the others.  @mem: the
 * region in caller memory (fences on both sides) instead of lull's own
 * (membarrier on the waiting side).
 */
static void check_wait_woken_by_read(unsigned topology, bool caller_memory)
{
	static alignas(128) unsigned char mem[8192];
	struct room_waiter w = { .timeout_ns = -1 };
	struct seq_check c = { .next_seq = 1 };
	struct lull_ring *ring;
	struct lull_record rec;
	unsigned written;
	pthread_t thread;

	if (caller_memory)
		cr_assert_eq(lull_ring_create_in(&ring, mem, sizeof(mem), 4096,
						 topology),
			     0);
	else
		ring = new_ring(topology, 4096);
	w.prod = fill_ring(ring, &written);
	w.mpsc = topology == LULL_RING_MPSC;
	w.seq = written;
	cr_assert_eq(pthread_create(&thread, NULL, room_waiter_main, &w), 0);
	wait_waiter_asleep(&w);
	cr_assert_eq(stats_of(ring).room_wakes, 0);
	/* Free one record's room: the consumer wakes the waiter. */
	cr_assert_eq(lull_ring_peek(ring, &rec), 0);
	cr_assert_eq(lull_ring_release(ring), 0);
	cr_assert_eq(stats_of(ring).room_wakes, 1);
	join_or_fail(thread, 20, "the producer waiting for room");
	cr_assert_eq(w.wait_ret, 0);
	cr_assert_eq(w.write_ret, 0);
	/* Records 1 .. written, the last one written after the wait. */
	while (lull_ring_read(ring, seq_check_record, &c, 1024) > 0)
		;
	cr_assert_eq(c.records, written);
	cr_assert_eq(c.bad, 0);
	cr_assert_eq(c.next_seq, (uint64_t)written + 1);
	cr_assert_eq(lull_producer_detach(w.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, sleeps_until_the_consumer_reads_spsc,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_SPSC, false);
}

Test(producer_wait, sleeps_until_the_consumer_reads_mpsc,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_MPSC, false);
}

Test(producer_wait, sleeps_until_the_consumer_reads_in_caller_memory,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_SPSC, true);
	check_wait_woken_by_read(LULL_RING_MPSC, true);
}

static void check_wait_ended_by_shutdown(unsigned topology)
{
	struct room_waiter w = { .timeout_ns = -1 };
	struct lull_ring *ring = new_ring(topology, 4096);
	unsigned written;
	pthread_t thread;

	w.prod = fill_ring(ring, &written);
	w.mpsc = topology == LULL_RING_MPSC;
	cr_assert_eq(pthread_create(&thread, NULL, room_waiter_main, &w), 0);
	wait_waiter_asleep(&w);
	cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(stats_of(ring).room_wakes, 1);
	join_or_fail(thread, 20, "the producer waiting for room");
	cr_assert_eq(w.wait_ret, -EPIPE);
	cr_assert_eq(lull_producer_detach(w.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, is_ended_by_a_shutdown_spsc, .timeout = WATCHDOG_S)
{
	check_wait_ended_by_shutdown(LULL_RING_SPSC);
}

Test(producer_wait, is_ended_by_a_shutdown_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_ended_by_shutdown(LULL_RING_MPSC);
}

static const enum lull_backend every_backend[] = {
	LULL_BACKEND_AUTO,     LULL_BACKEND_URING_FUTEX,
	LULL_BACKEND_URING_EVENTFD, LULL_BACKEND_BLOCKING,
	LULL_BACKEND_EPOLL,
};

Test(backend, names_and_parse_round_trip, .timeout = WATCHDOG_S)
{
	static const char *const names[] = {
		"auto", "uring-futex", "uring-eventfd", "blocking", "epoll",
	};

	for (unsigned i = 0; i < ARRAY_SIZE(every_backend); i++) {
		const char *name = lull_backend_name(every_backend[i]);

		cr_assert_not_null(name);
		cr_assert_str_eq(name, names[i]);
		cr_assert_eq(lull_backend_parse(name), (int)every_backend[i]);
	}
}

Test(backend, unknown_values_and_names_are_rejected, .timeout = WATCHDOG_S)
{
	static const char *const bad[] = {
		"", "AUTO", "Epoll", "uring", "io_uring", "uring_futex",
		"uring-futex ", " blocking", "epoll\n", "eventfd", "futex",
	};

	cr_assert_null(lull_backend_name((enum lull_backend)5));
	cr_assert_null(lull_backend_name((enum lull_backend)-1));
	cr_assert_null(lull_backend_name((enum lull_backend)1000));
	cr_assert_eq(lull_backend_parse(NULL), -EINVAL);
	for (unsigned i = 0; i < ARRAY_SIZE(bad); i++)
		cr_assert_eq(lull_backend_parse(bad[i]), -EINVAL, "\"%s\"",
			     bad[i]);
}

Test(backend, supported_agrees_with_the_kernel, .timeout = WATCHDOG_S)
{
	struct io_uring_probe *probe;
	struct io_uring uring;
	int ret, futex, eventfd;

	cr_assert_eq(lull_backend_supported(LULL_BACKEND_BLOCKING), 0);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_EPOLL), 0);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_AUTO), -EINVAL);
	cr_assert_eq(lull_backend_supported((enum lull_backend)5), -EINVAL);
	cr_assert_eq(lull_backend_supported((enum lull_backend)-1), -EINVAL);

	futex = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	eventfd = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	cr_assert(futex == 0 || unavailable(futex), "uring-futex: %d", futex);
	cr_assert(eventfd == 0 || unavailable(eventfd), "uring-eventfd: %d",
		  eventfd);
	/* The answer is stable. */
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_URING_FUTEX), futex);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_URING_EVENTFD),
		     eventfd);

	ret = io_uring_queue_init(2, &uring, 0);
	if (ret < 0) {
		cr_assert_eq(eventfd, ret, "io_uring_queue_init: %d", ret);
		cr_assert_eq(futex, ret);
		return;
	}
	cr_assert_eq(eventfd, 0);
	probe = io_uring_get_probe_ring(&uring);
	cr_assert_not_null(probe);
	cr_assert_eq(futex,
		     io_uring_opcode_supported(probe, OP_FUTEX_WAIT)
			     ? 0
			     : -EOPNOTSUPP);
	io_uring_free_probe(probe);
	io_uring_queue_exit(&uring);
}

/* The probe's choice with LULL_BACKEND unset. */
static int best_backend(void)
{
	if (lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0)
		return LULL_BACKEND_URING_FUTEX;
	if (lull_backend_supported(LULL_BACKEND_URING_EVENTFD) == 0)
		return LULL_BACKEND_URING_EVENTFD;
	return LULL_BACKEND_EPOLL;
}

static int probe_with(const char *value)
{
	cr_assert_eq(setenv("LULL_BACKEND", value, 1), 0);
	return lull_backend_probe();
}

Test(backend, probe_without_lull_backend_picks_the_best_supported,
     .timeout = WATCHDOG_S)
{
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	cr_assert_eq(lull_backend_probe(), best_backend());
}

Test(backend, probe_honours_lull_backend, .timeout = WATCHDOG_S)
{
	int futex = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	int eventfd = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);

	cr_assert_eq(probe_with("blocking"), LULL_BACKEND_BLOCKING);
	cr_assert_eq(probe_with("epoll"), LULL_BACKEND_EPOLL);
	cr_assert_eq(probe_with("uring-futex"),
		     futex ? futex : LULL_BACKEND_URING_FUTEX);
	cr_assert_eq(probe_with("uring-eventfd"),
		     eventfd ? eventfd : LULL_BACKEND_URING_EVENTFD);
	cr_assert_eq(probe_with("auto"), best_backend());
	cr_assert_eq(probe_with(""), best_backend());
	cr_assert_eq(probe_with("kqueue"), -EINVAL);
	cr_assert_eq(probe_with("EPOLL"), -EINVAL);
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	cr_assert_eq(lull_backend_probe(), best_backend());
}

/* ------------------------------------------------------------------------
 * uring: the calls that park on the caller's own io_uring
 */

Test(uring, calls_reject_null_arguments, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe cqe;
	struct io_uring uring;

	memset(&uring, 0, sizeof(uring));
	memset(&cqe, 0, sizeof(cqe));
	cr_assert_eq(lull_uring_park_arm(NULL, &uring, PARK_UD), -EINVAL);
	cr_assert_eq(lull_uring_park_arm(ring, NULL, PARK_UD), -EINVAL);
	cr_assert_eq(lull_uring_park_cqe(NULL, &cqe), -EINVAL);
	cr_assert_eq(lull_uring_park_cqe(ring, NULL), -EINVAL);
	cr_assert_eq(lull_uring_park_drain(NULL, &uring, consume_any, NULL,
					   1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, NULL, consume_any, NULL, 1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, NULL, NULL, 1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   0),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_cancel(NULL, &uring), -EINVAL);
	cr_assert_eq(lull_uring_park_cancel(ring, NULL), -EINVAL);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_returns_1_and_queues_nothing_when_a_record_is_readable,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	/* Nothing is armed: the record is still there for a plain wait. */
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	/* Drained, the next arm parks. */
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(io_uring_sq_ready(&uring), 1,
		     "the drain re-arms: one SQE, no safety net by default");
	cr_assert_neq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	/* The poison is readable too: arm says 1; once it is read, -EPIPE. */
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	expect_poison_then_epipe(ring);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EPIPE);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_is_ealready_when_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 1);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EALREADY);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, OTHER_UD), -EALREADY);
	cr_assert_eq(io_uring_submit(&uring), 1);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EALREADY);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * The park needs one free SQE, two with a safety net (the wait and its
 * link timeout); without them it queues nothing and parks nothing.
 */
static void check_arm_needs_free_sqes(uint64_t safety_ns, unsigned need)
{
	struct lull_park_config cfg = { .safety_timeout_ns = safety_ns };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe *cqe;
	struct lull_ring_stats st;
	struct io_uring uring;

	own_uring_init(&uring, 2);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(io_uring_sq_space_left(&uring), 2);
	for (unsigned i = 0; i < 3 - need; i++)
		io_uring_prep_nop(io_uring_get_sqe(&uring));
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EBUSY);
	cr_assert_eq(io_uring_sq_ready(&uring), 3 - need);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	st = stats_of(ring);
	cr_assert_eq(st.parks + st.park_cancels, 0, ST_FMT, ST_ARGS(st));
	/* Nothing is armed: a plain wait is allowed. */
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(io_uring_submit_and_wait(&uring, 3 - need),
		     (int)(3 - need));
	while (io_uring_peek_cqe(&uring, &cqe) == 0)
		io_uring_cqe_seen(&uring, cqe);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), need);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_is_ebusy_without_a_free_sqe, .timeout = WATCHDOG_S)
{
	check_arm_needs_free_sqes(0, 1);
}

Test(uring, arm_with_a_safety_net_is_ebusy_with_fewer_than_two_free_sqes,
     .timeout = WATCHDOG_S)
{
	check_arm_needs_free_sqes(500 * NSEC_PER_MSEC, 2);
}

Test(uring, arm_is_ebusy_while_attached_to_a_loop, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EBUSY);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, loop_attach_is_ebusy_while_armed, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0),
		     -EBUSY);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cqe_claims_only_the_parks_own, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe cqe;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	memset(&cqe, 0, sizeof(cqe));
	cqe.user_data = PARK_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0, "nothing armed");
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cqe.user_data = OTHER_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0);
	cqe.user_data = 0;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0);
	/* Still armed, untouched by the foreign CQEs. */
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_neq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cancel_is_enoent_when_nothing_is_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cancel_is_ebusy_without_a_free_sqe, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 2);
	io_uring_prep_nop(io_uring_get_sqe(&uring));
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_space_left(&uring), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -EBUSY);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* Arm a fresh ring with LULL_BACKEND=@value (NULL: unset); the opcode. */
static int armed_opcode(const char *value)
{
	const struct io_uring_sqe *wait, *timeout;
	const struct __kernel_timespec *ts;
	struct lull_park_config cfg = {
		.safety_timeout_ns = 1234 * NSEC_PER_MSEC,
	};
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;
	int opcode;

	if (value)
		cr_assert_eq(setenv("LULL_BACKEND", value, 1), 0);
	else
		cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	own_uring_init(&uring, 8);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 2);
	wait = queued_sqe(&uring, 2);
	timeout = queued_sqe(&uring, 1);
	opcode = wait->opcode;
	cr_assert(wait->flags & IOSQE_IO_LINK, "the wait links its timeout");
	cr_assert_eq(wait->user_data, PARK_UD);
	cr_assert_eq(timeout->opcode, IORING_OP_LINK_TIMEOUT);
	cr_assert_eq(timeout->user_data, PARK_UD);
	ts = (const struct __kernel_timespec *)(uintptr_t)timeout->addr;
	cr_assert_eq(ts->tv_sec, 1);
	cr_assert_eq(ts->tv_nsec, 234 * (long long)NSEC_PER_MSEC);
	if (opcode == OP_FUTEX_WAIT) {
		cr_assert_eq(wait->addr,
			     (uint64_t)(uintptr_t)&ring->region->park);
		cr_assert_eq(park_word(ring), LULL_PARK_FUTEX);
	} else {
		cr_assert_eq(opcode, IORING_OP_READ);
		cr_assert_geq(wait->fd, 0);
		cr_assert_eq(park_word(ring), LULL_PARK_EVENTFD);
	}
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	return opcode;
}

Test(uring, lull_backend_chooses_the_parks_wait, .timeout = WATCHDOG_S)
{
	int best;

	require(LULL_BACKEND_URING_EVENTFD);
	best = lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0
		       ? OP_FUTEX_WAIT
		       : IORING_OP_READ;
	cr_assert_eq(armed_opcode("uring-eventfd"), IORING_OP_READ);
	if (best == OP_FUTEX_WAIT)
		cr_assert_eq(armed_opcode("uring-futex"), OP_FUTEX_WAIT);
	/* Names that are no io_uring backend leave the choice to lull. */
	cr_assert_eq(armed_opcode(NULL), best);
	cr_assert_eq(armed_opcode("auto"), best);
	cr_assert_eq(armed_opcode("epoll"), best);
	cr_assert_eq(armed_opcode("blocking"), best);
	cr_assert_eq(armed_opcode("nonsense"), best);
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
}

/* ------------------------------------------------------------------------
 * own_uring_*: the park's CQEs on the caller's io_uring
 */

/* Set up a ring and an io_uring whose parks use @bc's backend. */
static struct lull_ring *own_setup(const struct backend_case *bc,
				   struct io_uring *uring, uint64_t safety_ns)
{
	struct lull_park_config cfg = { .safety_timeout_ns = safety_ns };
	struct lull_ring *ring;

	require(bc->backend);
	own_uring_init(uring, 8);
	cr_assert_eq(setenv("LULL_BACKEND", lull_backend_name(bc->backend),
			    1),
		     0);
	ring = new_ring(LULL_RING_SPSC, 4096);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	return ring;
}

/* Wait for @n CQEs in the CQ (submitting first), at most 5 s. */
static void wait_cqes(struct io_uring *uring, unsigned n)
{
	struct __kernel_timespec ts = { .tv_sec = 5 };
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_submit_and_wait_timeout(uring, &cqe, n, &ts, NULL);
	cr_assert(ret >= 0 || ret == -EINTR, "waiting for %u CQEs: %s", n,
		  strerror(-ret));
	cr_assert_geq(io_uring_cq_ready(uring), n,
		      "%u CQEs in 5 s, expected %u",
		      io_uring_cq_ready(uring), n);
}

/* Take the next CQE out of the CQ and hand it to the park. */
static int next_cqe_to_park(struct lull_ring *ring, struct io_uring *uring,
			    struct io_uring_cqe *copy)
{
	struct io_uring_cqe *cqe;
	int ret;

	cr_assert_eq(io_uring_peek_cqe(uring, &cqe), 0);
	*copy = *cqe;
	ret = lull_uring_park_cqe(ring, cqe);
	io_uring_cqe_seen(uring, cqe);
	return ret;
}

/* End an own-io_uring test: the io_uring, the ring, the forced backend. */
static void own_teardown(struct lull_ring *ring, struct io_uring *uring)
{
	io_uring_queue_exit(uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	unsetenv("LULL_BACKEND");
}

static void check_safety_net_cqes(const struct backend_case *bc)
{
	const uint64_t safety = 20 * NSEC_PER_MSEC;
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, safety);
	uint64_t start;

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	for (unsigned i = 1; i <= 3; i++) {
		start = now_ns();
		wait_cqes(&uring, 2);
		cr_assert_geq(now_ns() - start, safety,
			      "park %u ended before its safety net", i);
		cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
		cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
		st = stats_of(ring);
		cr_assert_eq(st.idle_timeouts, i, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		cr_assert_eq(st.wakes, 0);
		/* Nothing to read; both CQEs are in, so it parks again. */
		cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any,
						   NULL, 16),
			     0);
		cr_assert_eq(io_uring_sq_ready(&uring), 2);
		cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	}
	st = stats_of(ring);
	cr_assert_eq(st.parks, 4, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(park_teardown(ring, &uring), 0);
	own_teardown(ring, &uring);
}

static void check_cancel(const struct backend_case *bc)
{
	struct io_uring_cqe cqe, fake;
	struct lull_producer *prod;
	struct io_uring_sqe *sqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, LONG_SAFETY_NS);
	unsigned ours = 0, foreign = 0;

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	/* A foreign request in the same batch. */
	sqe = io_uring_get_sqe(&uring);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, OTHER_UD);
	wait_cqes(&uring, 4);
	while (io_uring_cq_ready(&uring)) {
		if (next_cqe_to_park(ring, &uring, &cqe) == 1) {
			cr_assert_eq(cqe.user_data, PARK_UD);
			ours++;
		} else {
			cr_assert_eq(cqe.user_data, OTHER_UD);
			foreign++;
		}
	}
	cr_assert_eq(ours, 3, "%s: the wait's, the timeout's and the cancel's",
		     bc->name);
	cr_assert_eq(foreign, 1);
	/* All in: nothing armed, and the park's user_data is no longer its. */
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	memset(&fake, 0, sizeof(fake));
	fake.user_data = PARK_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &fake), 0);
	fake.user_data = OTHER_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &fake), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	/* A cancelled park stays down through a drain... */
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	/* ...until armed again. */
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_then_epipe(ring);
	own_teardown(ring, &uring);
}

/*
 * The safety net ends a park with nothing to read; the caller handles the
 * first of its CQEs (the park is over, the word is awake again), a
 * producer commits (and rightly makes no wake-up: nobody is parked), and
 * then the second CQE comes through.  Nothing was lost: this is an idle
 * timeout, not a safety timeout.
 */
static void check_record_between_cqes(const struct backend_case *bc)
{
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, 20 * NSEC_PER_MSEC);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	wait_cqes(&uring, 2);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, 0, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0,
		     "%s: a record committed after the park ended (between "
		     "its two CQEs) was counted as a lost wake-up; " ST_FMT,
		     bc->name, ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 1, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_then_epipe(ring);
	own_teardown(ring, &uring);
}

/* A park ended by lull_uring_park_cancel() is no safety-net expiry. */
static void check_cancel_not_counted(const struct backend_case *bc)
{
	struct lull_ring_stats st;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, LONG_SAFETY_NS);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	cr_assert_eq(park_reap(ring, &uring), 0);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 1, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 0,
		     "%s: a cancelled park (the safety net is 10 s) was "
		     "counted as a safety-net expiry; " ST_FMT,
		     bc->name, ST_ARGS(st));
	own_teardown(ring, &uring);
}

#define OWN_URING_TESTS(suite, bc)                                           \
	Test(suite, safety_net_cqes_are_recognised_and_counted_as_idle,      \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_safety_net_cqes(&bc);                                  \
	}                                                                    \
	Test(suite, cancel_ends_the_park_and_every_cqe_is_recognised,        \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_cancel(&bc);                                           \
	}                                                                    \
	Test(suite, record_committed_between_the_park_cqes_is_no_lost_wake,  \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_record_between_cqes(&bc);                              \
	}                                                                    \
	Test(suite, cancelled_park_is_not_counted_as_a_safety_net_expiry,    \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_cancel_not_counted(&bc);                               \
	}

OWN_URING_TESTS(own_uring_futex, own_futex_case)
OWN_URING_TESTS(own_uring_eventfd, own_eventfd_case)

/*
 * A producer that claims a wake-up the consumer turned out not to need (it
 * found the record at its re-check) leaves a count in the eventfd, which
 * ends the next park at once.  DESIGN.md: a stale wake-up "counts
 * nothing"; above all it is no safety-net expiry (the net here is 10 s).
 * The count is written here directly, as that producer's write would be.
 */
Test(own_uring_eventfd, stale_wake_up_is_not_counted_as_a_safety_net_expiry,
     .timeout = WATCHDOG_S)
{
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring =
		own_setup(&own_eventfd_case, &uring, LONG_SAFETY_NS);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(queued_sqe(&uring, 2)->opcode, IORING_OP_READ);
	cr_assert_geq(ring->eventfd, 0);
	cr_assert_eq(eventfd_write(ring->eventfd, 1), 0);
	wait_cqes(&uring, 2);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	st = stats_of(ring);
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 0,
		     "a park ended by a stale eventfd count at once (the "
		     "safety net is 10 s) was counted as a safety-net expiry; "
		     ST_FMT,
		     ST_ARGS(st));
	cr_assert_eq(park_teardown(ring, &uring), 0);
	own_teardown(ring, &uring);
}

/* ------------------------------------------------------------------------
 * process: checks that need a process of their own
 */

#define CHILD_OK 0
#define CHILD_FAIL 1
#define CHILD_SKIP 77

/*
 * Run @fn in a forked child with an alarm() watchdog.  It returns one of
 * the codes above and explains itself in @why, which comes back through a
 * pipe.  The child uses no Criterion calls.
 */
static void run_in_child(int (*fn)(char *why, size_t len),
			 unsigned watchdog_s, const char *what)
{
	char why[1024] = "";
	size_t got = 0;
	ssize_t n;
	int fds[2], status, code;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		alarm(watchdog_s);
		code = fn(why, sizeof(why));
		if (write(fds[1], why, strlen(why)) < 0)
			code = CHILD_FAIL;
		_exit(code);
	}
	close(fds[1]);
	while (got < sizeof(why) - 1 &&
	       (n = read(fds[0], why + got, sizeof(why) - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	why[got] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR);
	if (WIFSIGNALED(status))
		cr_assert_fail("%s: the child died of signal %d%s", what,
			 WTERMSIG(status),
			 WTERMSIG(status) == SIGALRM ? " (its watchdog: a hang)"
						     : "");
	cr_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == CHILD_SKIP)
		cr_skip_test("%s", why);
	cr_assert_eq(WEXITSTATUS(status), CHILD_OK, "%s: %s", what, why);
}

#define CHILD_CHECK(cond, ...)                                               \
	do {                                                                 \
		if (!(cond)) {                                               \
			snprintf(why, len, __VA_ARGS__);                     \
			return CHILD_FAIL;                                   \
		}                                                            \
	} while (0)

static int thread_count(void)
{
	char buf[4096], *p;

	if (!read_file("/proc/self/status", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "\nThreads:");
	return p ? atoi(p + strlen("\nThreads:")) : -1;
}

static void *write_one_record(void *arg)
{
	struct lull_producer *prod = arg;

	return (void *)(intptr_t)write_msg(prod, false, 0, 0);
}

/*
 * In a process that is still single-threaded, park on a futex through
 * io_uring, then create the first thread and wake the park from it.  On
 * Linux 6.16+ the first pthread_create() gives the process a private
 * futex hash: a private futex wait queued before it is never found by a
 * wake after it.  lull's futexes are shared (park.c), so the wake finds
 * it; there is no safety net here to hide a lost one, and a wait of 4 s
 * turns one into a failure.
 */
static int futex_hash_child(char *why, size_t len)
{
	struct __kernel_timespec ts = { .tv_sec = 4 };
	struct io_uring_cqe *cqe;
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct lull_ring *ring;
	struct io_uring uring;
	uint64_t start;
	int ret, res;
	void *thread_ret;
	pthread_t thread;

	if (setenv("LULL_BACKEND", "uring-futex", 1))
		return CHILD_FAIL;
	ret = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	if (ret < 0) {
		snprintf(why, len, "uring-futex is not available here: %s",
			 lull_strerror(ret));
		return CHILD_SKIP;
	}
	CHILD_CHECK(thread_count() == 1, "the child has %d threads",
		    thread_count());
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create failed");
	CHILD_CHECK(ring->safety_ns == 0, "a safety net is on");
	CHILD_CHECK(lull_producer_attach(ring, 0, &prod) == 0, "attach");
	ret = io_uring_queue_init(8, &uring, 0);
	CHILD_CHECK(ret == 0, "io_uring_queue_init: %s", strerror(-ret));
	ret = lull_uring_park_arm(ring, &uring, PARK_UD);
	CHILD_CHECK(ret == 0, "lull_uring_park_arm: %d", ret);
	CHILD_CHECK(queued_sqe(&uring, 1)->opcode == OP_FUTEX_WAIT,
		    "the park is no futex wait (opcode %u)",
		    queued_sqe(&uring, 1)->opcode);
	ret = io_uring_submit(&uring);
	CHILD_CHECK(ret == 1, "io_uring_submit: %d", ret);
	CHILD_CHECK(thread_count() == 1, "armed with %d threads",
		    thread_count());

	start = now_ns();
	ret = pthread_create(&thread, NULL, write_one_record, prod);
	CHILD_CHECK(ret == 0, "pthread_create: %s", strerror(ret));
	ret = io_uring_wait_cqe_timeout(&uring, &cqe, &ts);
	CHILD_CHECK(ret == 0,
		    "the futex wait was not woken by the producer within "
		    "%.1f s (a private futex queued before the first "
		    "pthread_create() is lost on Linux 6.16+): %s",
		    (now_ns() - start) / 1e9, strerror(-ret));
	res = cqe->res;
	ret = lull_uring_park_cqe(ring, cqe);
	io_uring_cqe_seen(&uring, cqe);
	CHILD_CHECK(ret == 1, "the CQE is not the park's");
	CHILD_CHECK(res == 0 || res == -EAGAIN, "the futex wait ended with %d",
		    res);
	pthread_join(thread, &thread_ret);
	CHILD_CHECK(thread_ret == NULL, "the producer's write failed");
	lull_ring_stats(ring, &st);
	CHILD_CHECK(st.wakes == 1 && st.safety_timeouts == 0 &&
			    st.idle_timeouts == 0,
		    ST_FMT, ST_ARGS(st));
	CHILD_CHECK(lull_ring_read(ring, consume_any, NULL, 16) == 1,
		    "the record is not there");
	return CHILD_OK;
}

Test(process, futex_park_armed_before_the_first_thread_is_woken_by_it,
     .timeout = WATCHDOG_S)
{
	run_in_child(futex_hash_child, 20, "futex park before pthread_create");
}

/*
 * The same trap for a loop: its futex waits are armed by its first park,
 * in a process with one thread; a timer then creates the first thread,
 * whose record must wake the loop.  A 4 s timer is the watchdog.
 */
struct first_thread {
	struct lull_loop *loop;
	struct lull_producer *prod;
	pthread_t thread;
	bool created;
	bool timed_out;
	unsigned records;
};

static void first_thread_start(struct lull_loop *loop, void *ctx)
{
	struct first_thread *ft = ctx;

	(void)loop;
	ft->created = thread_count() == 1 &&
		      pthread_create(&ft->thread, NULL, write_one_record,
				     ft->prod) == 0;
}

static void first_thread_watchdog(struct lull_loop *loop, void *ctx)
{
	struct first_thread *ft = ctx;

	ft->timed_out = true;
	lull_loop_stop(loop);
}

static int first_thread_record(const struct lull_record *rec, void *ctx)
{
	struct first_thread *ft = ctx;

	if (rec->type == MSG_TYPE && ++ft->records == 1)
		lull_loop_stop(ft->loop);
	return LULL_READ_CONTINUE;
}

static int futex_hash_loop_child(char *why, size_t len)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_URING_FUTEX };
	struct first_thread ft = { 0 };
	struct lull_loop_timer *watchdog;
	struct lull_loop *loop;
	struct lull_ring *ring;
	void *thread_ret;
	int ret;

	ret = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	if (ret < 0) {
		snprintf(why, len, "uring-futex is not available here: %s",
			 lull_strerror(ret));
		return CHILD_SKIP;
	}
	CHILD_CHECK(thread_count() == 1, "the child has %d threads",
		    thread_count());
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create failed");
	CHILD_CHECK(lull_producer_attach(ring, 0, &ft.prod) == 0, "attach");
	ret = lull_loop_create(&loop, &cfg);
	CHILD_CHECK(ret == 0, "lull_loop_create: %s", lull_strerror(ret));
	ft.loop = loop;
	CHILD_CHECK(lull_loop_attach(loop, ring, first_thread_record, &ft,
				     0) == 0,
		    "lull_loop_attach");
	/* 20 ms: the loop has parked, its futex wait armed, by then. */
	CHILD_CHECK(lull_loop_timer(loop, 20 * NSEC_PER_MSEC, 0,
				    first_thread_start, &ft, NULL) == 0,
		    "lull_loop_timer");
	CHILD_CHECK(lull_loop_timer(loop, 4 * NSEC_PER_SEC, 0,
				    first_thread_watchdog, &ft,
				    &watchdog) == 0,
		    "lull_loop_timer");
	ret = lull_loop_run(loop);
	CHILD_CHECK(ret == 0, "lull_loop_run: %s", lull_strerror(ret));
	CHILD_CHECK(ft.created, "the timer did not create the first thread");
	pthread_join(ft.thread, &thread_ret);
	CHILD_CHECK(thread_ret == NULL, "the producer's write failed");
	CHILD_CHECK(!ft.timed_out && ft.records == 1,
		    "the loop's futex wait, armed before the first "
		    "pthread_create(), was not woken by its record within "
		    "4 s (%u records)",
		    ft.records);
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	CHILD_CHECK(lull_producer_detach(ft.prod) == 0, "detach");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, loop_futex_wait_armed_before_the_first_thread_is_woken_by_it,
     .timeout = WATCHDOG_S)
{
	run_in_child(futex_hash_loop_child, 20,
		     "loop futex park before pthread_create");
}

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS SECCOMP_RET_KILL
#endif

/* Make system call @nr fail with EPERM in this process, as seccomp does. */
static int block_syscall(long nr)
{
#if defined(__x86_64__)
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
			 (uint32_t)(__X32_SYSCALL_BIT | nr), 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = ARRAY_SIZE(filter),
		.filter = filter,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
#else
	(void)nr;
	return -EOPNOTSUPP;
#endif
}

/* What a container's seccomp profile does: io_uring_setup() is EPERM. */
static int block_io_uring(void)
{
	return block_syscall(__NR_io_uring_setup);
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

/*
 * membarrier(2) registration fails (a seccomp profile that denies it):
 * the region records the symmetric barrier when it is created, its
 * producers fence, and a consumer parked with no safety net is still
 * woken by the next commit.
 */
static int no_membarrier_child(char *why, size_t len)
{
	struct lull_producer *prod;
	struct lull_ring *ring;
	void *thread_ret;
	pthread_t thread;
	int ret;

	ret = block_syscall(__NR_membarrier);
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	CHILD_CHECK(syscall(SYS_membarrier, 0, 0, 0) < 0 && errno == EPERM,
		    "membarrier is not blocked");
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(!(ring->region->flags & LULL_REGION_ASYM_BARRIER),
		    "the region says asymmetric barrier without membarrier");
	CHILD_CHECK(lull_producer_attach(ring, 0, &prod) == 0, "attach");
	CHILD_CHECK(!prod->asym_barrier, "the producer does not fence");
	CHILD_CHECK(ring->safety_ns == 0, "a safety net is on");
	for (int i = 0; i < 200; i++) {
		CHILD_CHECK(pthread_create(&thread, NULL, write_when_parked,
					   prod) == 0,
			    "pthread_create");
		ret = lull_ring_wait(ring, -1);
		pthread_join(thread, &thread_ret);
		CHILD_CHECK(ret == 0, "lull_ring_wait: %s", lull_strerror(ret));
		CHILD_CHECK(thread_ret == NULL, "the write failed");
		CHILD_CHECK(lull_ring_read(ring, consume_any, NULL, 16) == 1,
			    "record %d is not there", i);
	}
	CHILD_CHECK(lull_producer_detach(prod) == 0, "detach");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, park_barrier_without_membarrier_is_a_fence_on_both_sides,
     .timeout = WATCHDOG_S)
{
	run_in_child(no_membarrier_child, 20, "membarrier denied");
}

/*
 * membarrier(2) fails after a region chose it (a filter installed later):
 * its producers only have a compiler barrier, so a fence on the
 * consumer's side alone would not restore the handshake.  Every park
 * reports the error instead of sleeping on a broken barrier.
 */
static int membarrier_lost_child(char *why, size_t len)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct io_uring uring;
	int ret;

	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	if (!(ring->region->flags & LULL_REGION_ASYM_BARRIER)) {
		snprintf(why, len, "membarrier(2) is not available here");
		return CHILD_SKIP;
	}
	ret = block_syscall(__NR_membarrier);
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	ret = lull_ring_wait(ring, 2 * (int64_t)NSEC_PER_SEC);
	CHILD_CHECK(ret == -EPERM, "lull_ring_wait without its barrier: %d",
		    ret);
	CHILD_CHECK(park_word(ring) == LULL_PARK_AWAKE, "left announced");
	ret = io_uring_queue_init(8, &uring, 0);
	CHILD_CHECK(ret == 0, "io_uring_queue_init: %s", strerror(-ret));
	ret = lull_uring_park_arm(ring, &uring, PARK_UD);
	CHILD_CHECK(ret == -EPERM, "lull_uring_park_arm: %d", ret);
	CHILD_CHECK(io_uring_sq_ready(&uring) == 0, "an SQE was queued");
	io_uring_queue_exit(&uring);
	CHILD_CHECK(lull_loop_create(&loop, &cfg) == 0, "lull_loop_create");
	CHILD_CHECK(lull_loop_attach(loop, ring, consume_any, NULL, 0) == 0,
		    "lull_loop_attach");
	ret = lull_loop_run(loop);
	CHILD_CHECK(ret == -EPERM, "lull_loop_run: %d", ret);
	CHILD_CHECK(park_word(ring) == LULL_PARK_AWAKE, "left announced");
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, failing_membarrier_is_reported_never_degraded_to_one_fence,
     .timeout = WATCHDOG_S)
{
	run_in_child(membarrier_lost_child, 20, "membarrier lost");
}

struct fallback {
	struct lull_ring *ring;
	struct lull_loop *loop;
	uint64_t received;
	uint64_t expected;
	unsigned poisons; /* after the records: the ring ended */
	bool out_of_order;
};

static int fallback_record(const struct lull_record *rec, void *ctx)
{
	struct fallback *f = ctx;
	struct msg m;

	if (is_poison(rec) && !f->poisons && f->received == f->expected) {
		f->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (f->poisons || rec->type != MSG_TYPE || rec->len != sizeof(m)) {
		f->out_of_order = true;
		return LULL_READ_CONTINUE;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.seq != f->received)
		f->out_of_order = true;
	if (++f->received == f->expected)
		lull_loop_stop(f->loop);
	return LULL_READ_CONTINUE;
}

/* Rounds of 100 records, each sent once the consumer has parked. */
static void *fallback_producer(void *arg)
{
	struct fallback *f = arg;
	struct lull_producer *prod;
	uint64_t seq = 0;

	if (lull_producer_attach(f->ring, 0, &prod) < 0)
		return (void *)1;
	for (int round = 0; round < 10; round++) {
		while (park_word(f->ring) == LULL_PARK_AWAKE)
			sched_yield();
		for (int i = 0; i < 100; i++)
			if (write_msg(prod, true, 0, seq++) < 0)
				return (void *)1;
	}
	lull_producer_detach(prod);
	return NULL;
}

/* One record once the consumer is parked in lull_ring_wait(). */
static void *late_producer(void *arg)
{
	struct fallback *f = arg;
	struct lull_producer *prod;
	int ret;

	if (lull_producer_attach(f->ring, 0, &prod) < 0)
		return (void *)1;
	while (park_word(f->ring) == LULL_PARK_AWAKE)
		sched_yield();
	ret = write_msg(prod, true, 0, 0);
	lull_producer_detach(prod);
	return ret < 0 ? (void *)1 : NULL;
}

static int seccomp_child(char *why, size_t len)
{
	struct lull_loop_config forced = {
		.backend = LULL_BACKEND_URING_FUTEX,
	};
	struct fallback f = { .expected = 1000 };
	struct lull_ring_stats st;
	struct io_uring uring;
	void *thread_ret;
	pthread_t thread;
	int ret;

	unsetenv("LULL_BACKEND");
	ret = block_io_uring();
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	ret = io_uring_queue_init(2, &uring, 0);
	CHILD_CHECK(ret == -EPERM, "io_uring_queue_init under the filter: %d",
		    ret);

	ret = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	CHILD_CHECK(ret == -EPERM, "supported(uring-futex) = %d", ret);
	ret = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	CHILD_CHECK(ret == -EPERM, "supported(uring-eventfd) = %d", ret);
	CHILD_CHECK(lull_backend_supported(LULL_BACKEND_EPOLL) == 0, "epoll");
	CHILD_CHECK(lull_backend_supported(LULL_BACKEND_BLOCKING) == 0,
		    "blocking");
	ret = lull_backend_probe();
	CHILD_CHECK(ret == LULL_BACKEND_EPOLL, "probe = %d", ret);
	setenv("LULL_BACKEND", "uring-eventfd", 1);
	ret = lull_backend_probe();
	CHILD_CHECK(ret == -EPERM, "probe with uring-eventfd forced = %d",
		    ret);
	unsetenv("LULL_BACKEND");
	ret = lull_loop_create(&f.loop, &forced);
	CHILD_CHECK(ret == -EPERM, "a uring-futex loop: %d", ret);

	ret = lull_loop_create(&f.loop, NULL);
	CHILD_CHECK(ret == 0, "lull_loop_create(AUTO): %s",
		    lull_strerror(ret));
	ret = lull_loop_backend(f.loop);
	CHILD_CHECK(ret == LULL_BACKEND_EPOLL, "the loop's backend is %d",
		    ret);
	CHILD_CHECK(lull_ring_create(&f.ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	ret = lull_loop_attach(f.loop, f.ring, fallback_record, &f, 0);
	CHILD_CHECK(ret == 0, "lull_loop_attach: %s", lull_strerror(ret));
	CHILD_CHECK(pthread_create(&thread, NULL, fallback_producer, &f) == 0,
		    "pthread_create");
	ret = lull_loop_run(f.loop);
	pthread_join(thread, &thread_ret);
	CHILD_CHECK(ret == 0, "lull_loop_run: %s", lull_strerror(ret));
	CHILD_CHECK(thread_ret == NULL, "the producer failed");
	CHILD_CHECK(f.received == f.expected && !f.out_of_order,
		    "%" PRIu64 " of %" PRIu64 " records%s", f.received,
		    f.expected, f.out_of_order ? ", out of order" : "");
	/* The stop (or the producer's detach) ended the ring: its poison. */
	CHILD_CHECK(f.poisons == 1, "%u poison records", f.poisons);
	lull_ring_stats(f.ring, &st);
	CHILD_CHECK(st.wakes >= 1 && st.wakes <= st.parks + st.park_cancels &&
			    st.safety_timeouts == 0,
		    ST_FMT, ST_ARGS(st));
	/* The loop detached the ring after its poison. */
	CHILD_CHECK(lull_loop_detach(f.loop, f.ring) == -ENOENT, "detach");
	CHILD_CHECK(lull_loop_destroy(f.loop) == 0, "destroy");
	CHILD_CHECK(lull_ring_read(f.ring, consume_any, NULL, 16) == -EPIPE,
		    "a read after the poison");
	CHILD_CHECK(lull_ring_destroy(f.ring) == 0, "lull_ring_destroy");

	/* The blocking wait needs no io_uring either; on a new ring. */
	CHILD_CHECK(lull_ring_create(&f.ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(pthread_create(&thread, NULL, late_producer, &f) == 0,
		    "pthread_create");
	ret = lull_ring_wait(f.ring, 5 * (int64_t)NSEC_PER_SEC);
	pthread_join(thread, &thread_ret);
	CHILD_CHECK(ret == 0, "lull_ring_wait: %s", lull_strerror(ret));
	CHILD_CHECK(thread_ret == NULL, "the late producer failed");
	CHILD_CHECK(lull_ring_read(f.ring, consume_any, NULL, 16) == 1,
		    "the late record");
	/* Its producer's detach, the last, left the poison after it. */
	ret = lull_ring_wait(f.ring, 5 * (int64_t)NSEC_PER_SEC);
	CHILD_CHECK(ret == 0, "lull_ring_wait for the poison: %s",
		    lull_strerror(ret));
	f.poisons = 0;
	f.received = f.expected;
	CHILD_CHECK(lull_ring_read(f.ring, fallback_record, &f, 16) == 1 &&
			    f.poisons == 1 && !f.out_of_order,
		    "the poison after the late record");
	ret = lull_ring_wait(f.ring, 0);
	CHILD_CHECK(ret == -EPIPE, "lull_ring_wait after the poison: %d", ret);
	CHILD_CHECK(lull_ring_destroy(f.ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, io_uring_blocked_by_seccomp_falls_back_to_epoll,
     .timeout = WATCHDOG_S)
{
	run_in_child(seccomp_child, 20, "io_uring blocked by seccomp");
}

/* ------------------------------------------------------------------------
 * Timeouts at their extremes, and the safety net's environment variable
 */

/*
 * lull_ring_wait() and lull_producer_wait() with 0, 1 ns, INT64_MAX: the
 * first two time out at once, the last sleeps until the other side acts
 * (a late producer, a read), never on a wrapped deadline.
 */
Test(park, wait_timeouts_of_0_1ns_and_int64_max_are_converted_safely,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	void *thread_ret;
	pthread_t thread;
	unsigned written;

	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(lull_ring_wait(ring, 1), -ETIMEDOUT);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(pthread_create(&thread, NULL, write_when_parked, prod), 0);
	cr_assert_eq(lull_ring_wait(ring, INT64_MAX), 0);
	join_or_fail(thread, 10, "the late producer");
	cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 16), 1);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);

	ring = new_ring(LULL_RING_MPSC, 4096);
	prod = fill_ring(ring, &written);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 0),
		     -ETIMEDOUT);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 1),
		     -ETIMEDOUT);
	cr_assert_eq(pthread_create(&thread, NULL, read_when_waited, ring), 0);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), INT64_MAX),
		     0);
	join_or_fail(thread, 10, "the late reader");
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	(void)thread_ret;
}

/*
 * A safety net of 1 ns, INT64_MAX and UINT64_MAX: the first ends every
 * park at once (idle re-checks), the others are no timer at all (the park
 * on an io_uring is its wait alone) and never overflow a conversion.
 */
Test(park, safety_nets_of_1ns_int64_max_and_uint64_max_are_converted_safely,
     .timeout = WATCHDOG_S)
{
	static const uint64_t nets[] = { INT64_MAX, UINT64_MAX };
	struct lull_park_config cfg = { .safety_timeout_ns = 1 };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring uring;
	pthread_t thread;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_ring_wait(ring, 20 * NSEC_PER_MSEC), -ETIMEDOUT);
	st = stats_of(ring);
	cr_assert_geq(st.idle_timeouts, 1, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	own_uring_init(&uring, 8);
	for (size_t i = 0; i < ARRAY_SIZE(nets); i++) {
		cfg.safety_timeout_ns = nets[i];
		cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
		cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
		cr_assert_eq(io_uring_sq_ready(&uring), 1,
			     "a safety net of %" PRIu64 " ns armed a timeout",
			     nets[i]);
		cr_assert_eq(park_teardown(ring, &uring), 0);
		cr_assert_eq(pthread_create(&thread, NULL, write_when_parked,
					    prod),
			     0);
		cr_assert_eq(lull_ring_wait(ring, -1), 0);
		join_or_fail(thread, 10, "the late producer");
		cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 16), 1);
	}
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* LULL_SAFETY_NET_MS switches the net on for rings and loops alike. */
static int safety_env_child(char *why, size_t len)
{
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct io_uring uring;

	(void)why;
	(void)len;
	CHILD_CHECK(setenv("LULL_SAFETY_NET_MS", "250", 1) == 0, "setenv");
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(ring->safety_ns == 250 * NSEC_PER_MSEC,
		    "the ring's safety net is %" PRIu64 " ns", ring->safety_ns);
	CHILD_CHECK(io_uring_queue_init(8, &uring, 0) == 0, "io_uring");
	CHILD_CHECK(lull_uring_park_arm(ring, &uring, PARK_UD) == 0, "arm");
	CHILD_CHECK(io_uring_sq_ready(&uring) == 2, "no link timeout armed");
	CHILD_CHECK(park_teardown(ring, &uring) == 0, "teardown");
	io_uring_queue_exit(&uring);
	CHILD_CHECK(lull_ring_wait(ring, 600 * (int64_t)NSEC_PER_MSEC) ==
			    -ETIMEDOUT,
		    "wait");
	CHILD_CHECK(stats_of(ring).idle_timeouts >= 2,
		    "the 250 ms net fired %" PRIu64 " times in 600 ms",
		    stats_of(ring).idle_timeouts);
	CHILD_CHECK(lull_loop_create(&loop, NULL) == 0, "lull_loop_create");
	CHILD_CHECK(loop->safety_ns == 250 * NSEC_PER_MSEC,
		    "the loop's safety net is %" PRIu64 " ns", loop->safety_ns);
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	/* Read once: a later change does not count. */
	CHILD_CHECK(setenv("LULL_SAFETY_NET_MS", "0", 1) == 0, "setenv");
	CHILD_CHECK(lull_ring_park_config(ring, NULL) == 0, "config");
	CHILD_CHECK(ring->safety_ns == 250 * NSEC_PER_MSEC, "read again");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, lull_safety_net_ms_switches_the_safety_net_on,
     .timeout = WATCHDOG_S)
{
	run_in_child(safety_env_child, 20, "LULL_SAFETY_NET_MS");
}
