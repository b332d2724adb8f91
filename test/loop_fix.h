/* SPDX-License-Identifier: MIT */
/*
 * loop_fix.h - the fixture of the suites of lull/loop.h (test_loop_*.c):
 * creating and stopping a loop, attaching rings, user SQEs, timers,
 * signals, parking and counters.
 *
 * Suites (all Criterion suite "loop"):
 *   test_loop_lifecycle.c      create, backends, calls from callbacks,
 *                              attach and detach errors
 *   test_loop_stop.c           lull_loop_stop() from every place, the
 *                              SQEs a stop cancels, lull_loop_cancel()
 *   test_loop_rings.c          records from producer threads, the batch
 *                              limit, runs (lull_loop_attach_items),
 *                              detach and attach again
 *   test_loop_many_rings.c     a thousand rings on one loop, coalescing
 *   test_loop_ops.c            user SQEs: NOP, TIMEOUT, pipes, TCP,
 *                              ACCEPT, POLL, cancel, chains, a full SQ
 *   test_loop_timers_signals.c timers, signals, a loop kept busy by a
 *                              ring, timeouts at their extremes
 *   test_loop_idle_stats.c     an idle loop stays parked; the counters
 *
 * Every test is a parameterized test run once per loop backend
 * (LOOP_TEST: uring-futex, uring-eventfd, epoll); a backend this kernel or
 * sandbox does not allow is skipped with the reason
 * lull_backend_supported() gives.  Failure messages start with the
 * backend's name, since Criterion does not name the parameter.  Tests that
 * create a loop with LULL_BACKEND_AUTO compare it with
 * lull_backend_probe(), so the suites also pass with LULL_BACKEND=epoll in
 * the environment (scripts/run-tests.sh runs them so too).
 *
 * lull_loop_stop() shuts down every ring attached to the loop, and the run
 * returns once each has handed its handler the poison record and been
 * detached: handlers here expect that poison, once, after their last
 * record, and a ring that must outlive a run is detached before the stop.
 * The run then cancels the SQEs still in flight and returns once their
 * callbacks have run.
 *
 * The loop runs on the test's own thread, so its callbacks may assert.
 * Helper threads (producers, a thread that stops or signals the loop) never
 * assert: they leave what they saw in their state for the test thread, and
 * are joined with a deadline (test/lib's timed joins).  No test sleeps to
 * let something happen: helpers wait for an atomic that a callback sets,
 * or for the loop's thread to be parked: asleep in the kernel (its state
 * in /proc is 'S') inside the backend's sleeping system call
 * (io_uring_enter or epoll_wait), read through test/lib's /proc reader.
 * The one deliberate sleep is the idle period of the idle test.
 *
 * Every test has a .timeout watchdog, so a loop that never wakes fails the
 * test instead of stalling the run; some also arm a loop timer that stops
 * the loop early and fails with a message saying what was missing.  The
 * watchdog is 10 s for every test: with tests in parallel, Criterion 2.4
 * leaks the deadline records of mixed timeouts in its runner process, and
 * LeakSanitizer then fails the sanitizer run of the whole suite.
 */
#ifndef LULL_TEST_LOOP_FIX_H
#define LULL_TEST_LOOP_FIX_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <liburing.h>

#include <lull.h>


#include "criterion_hook.h"
#include "lib/ledger.h"
#include "lib/proc.h"
#include "lib/threads.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define US 1000ull
#define MS (1000ull * US)
#define SEC (1000ull * MS)

/* ------------------------------------------------------------------------
 * Backends and assertions
 */

static enum lull_backend backends[] = {
	LULL_BACKEND_URING_FUTEX,
	LULL_BACKEND_URING_EVENTFD,
	LULL_BACKEND_EPOLL,
};

/* The backend under test, named in every failure message. */
static const char *bname = "?";

#define LOOP_TEST(name, ...)                                                 \
	ParameterizedTestParameters(loop, name)                              \
	{                                                                    \
		return cr_make_param_array(enum lull_backend, backends,      \
					   ARRAY_SIZE(backends));            \
	}                                                                    \
	ParameterizedTest(enum lull_backend *backendp, loop, name, __VA_ARGS__)

#define check(cond, fmt, ...)                                                \
	cr_assert(cond, "[%s] " fmt, bname, ##__VA_ARGS__)

#define check_op(a, op, b)                                                   \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		cr_assert(a_ op b_, "[%s] %s %s %s: %lld vs %lld", bname,    \
			  #a, #op, #b, a_, b_);                              \
	} while (0)
#define check_eq(a, b) check_op(a, ==, b)

/* Skip the test when @backend is not usable here. */
static enum lull_backend use_backend(const enum lull_backend *backendp)
{
	int ret;

	bname = lull_backend_name(*backendp);
	ret = lull_backend_supported(*backendp);
	if (ret < 0)
		cr_skip_test("%s is not supported here: %s", bname,
			     strerror(-ret));
	return *backendp;
}

static struct lull_loop *loop_new_cfg(const struct lull_loop_config *cfg)
{
	struct lull_loop *loop = NULL;
	int ret;

	ret = lull_loop_create(&loop, cfg);
	check(ret == 0, "lull_loop_create: %s", strerror(-ret));
	check(loop != NULL, "lull_loop_create set no loop");
	check_eq(lull_loop_backend(loop), cfg->backend);
	return loop;
}

/* A loop on @backend whose safety net is @safety_ns (0: the default). */
static struct lull_loop *loop_new(enum lull_backend backend,
				  uint64_t safety_ns)
{
	struct lull_loop_config cfg = {
		.backend = backend,
		.safety_timeout_ns = safety_ns,
	};

	return loop_new_cfg(&cfg);
}

static void loop_free(struct lull_loop *loop)
{
	check_eq(lull_loop_destroy(loop), 0);
}

static void run_loop(struct lull_loop *loop)
{
	int ret = lull_loop_run(loop);

	check(ret == 0, "lull_loop_run: %s", strerror(-ret));
}

static struct lull_loop_stats loop_stats(const struct lull_loop *loop)
{
	struct lull_loop_stats st;

	check_eq(lull_loop_stats(loop, &st), 0);
	return st;
}

/* ------------------------------------------------------------------------
 * Time, threads, and whether the loop's thread is asleep
 */

static pid_t thread_id(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The backend's sleeping system call: where a parked loop blocks. */
static bool is_park_syscall(long nr)
{
	return nr == SYS_io_uring_enter || nr == SYS_epoll_wait ||
	       nr == SYS_epoll_pwait
#ifdef SYS_epoll_pwait2
	       || nr == SYS_epoll_pwait2
#endif
		;
}

/*
 * Wait until thread @tid, the loop's, is parked: asleep in the kernel
 * ('S') inside the backend's sleeping call (test/lib's /proc reader; 'S'
 * alone when /proc has no syscall file); false after 5 s.  A thread that
 * sleeps elsewhere (a page fault, a lock in the allocator) is not parked.
 */
static bool wait_sleeping(pid_t tid)
{
	uint64_t deadline = now_ns() + 5 * SEC;
	long nr;

	for (;;) {
		if (proc_thread_state(tid) == 'S') {
			nr = proc_thread_syscall(tid);
			if (nr == -2 || (nr >= 0 && is_park_syscall(nr)))
				return true;
		}
		if (now_ns() > deadline)
			return false;
		nap_us(20);
	}
}

/*
 * Wait until @value reaches @target; false after 5 s, so that a lost
 * record fails the test with its own message instead of a bare timeout.
 */
static bool wait_at_least(_Atomic unsigned *value, unsigned target)
{
	uint64_t deadline = now_ns() + 5 * SEC;

	while (atomic_load_explicit(value, memory_order_acquire) < target) {
		if (now_ns() > deadline)
			return false;
		sched_yield();
	}
	return true;
}

/* ------------------------------------------------------------------------
 * User SQEs
 */

/* What a user SQE's callback saw. */
struct cqe_seen {
	unsigned *left; /* if set: decremented, and the loop stops at 0 */
	unsigned calls;
	int res;
	uint32_t flags;
	uint64_t at_ns;
};

static void record_cqe(struct lull_loop *loop, int res, uint32_t flags,
		       void *ctx)
{
	struct cqe_seen *c = ctx;

	c->calls++;
	c->res = res;
	c->flags = flags;
	c->at_ns = now_ns();
	if (c->left && --*c->left == 0)
		lull_loop_stop(loop);
}

static void stop_cqe(struct lull_loop *loop, int res, uint32_t flags,
		     void *ctx)
{
	(void)res;
	(void)flags;
	(void)ctx;
	lull_loop_stop(loop);
}

static struct io_uring_sqe *get_sqe(struct lull_loop *loop, lull_cqe_fn fn,
				    void *ctx)
{
	struct io_uring_sqe *sqe = NULL;
	int ret;

	ret = lull_loop_sqe(loop, fn, ctx, &sqe);
	check(ret == 0, "lull_loop_sqe: %s", strerror(-ret));
	check(sqe != NULL, "lull_loop_sqe set no SQE");
	return sqe;
}

/*
 * Stop the loop @ns from now with a TIMEOUT SQE (not a loop timer, so that
 * tests of other things do not depend on timers); @ts must outlive the
 * submission.
 */
static void stop_after(struct lull_loop *loop, struct __kernel_timespec *ts,
		       uint64_t ns)
{
	struct io_uring_sqe *sqe = get_sqe(loop, stop_cqe, NULL);

	ts->tv_sec = (long long)(ns / SEC);
	ts->tv_nsec = (long long)(ns % SEC);
	io_uring_prep_timeout(sqe, ts, 0, 0);
}

/* A loop timer that stops the loop and says so: fails a test fast. */
static void watchdog_fired(struct lull_loop *loop, void *ctx)
{
	*(bool *)ctx = true;
	lull_loop_stop(loop);
}

static void arm_watchdog(struct lull_loop *loop, uint64_t ns, bool *fired)
{
	*fired = false;
	check_eq(lull_loop_timer(loop, ns, 0, watchdog_fired, fired, NULL),
		 0);
}

/*
 * Set *@flag once the loop runs (a NOP's callback), so that a thread
 * waiting for the loop to park does not take a sleep of the test thread
 * before lull_loop_run() for one.
 */
static void running_cqe(struct lull_loop *loop, int res, uint32_t flags,
			void *ctx)
{
	(void)loop;
	(void)res;
	(void)flags;
	atomic_store_explicit((_Atomic unsigned *)ctx, 1,
			      memory_order_release);
}

static void mark_running(struct lull_loop *loop, _Atomic unsigned *flag)
{
	atomic_store(flag, 0);
	get_sqe(loop, running_cqe, flag);
}

/* Wait until the loop runs, then until it has parked. */
static bool wait_parked(_Atomic unsigned *running, pid_t loop_tid)
{
	return wait_at_least(running, 1) && wait_sleeping(loop_tid);
}

/*
 * A helper thread that waits for the loop (running on the test thread) to
 * park, then runs @action.  It costs the loop one NOP.
 */
struct helper {
	pthread_t thread;
	pthread_t loop_thread;
	pid_t loop_tid;
	struct lull_loop *loop;
	void (*action)(struct helper *h);
	void *ctx;
	_Atomic unsigned running;
	bool slept; /* the loop's thread was seen asleep before @action */
};

static void *helper_main(void *arg)
{
	struct helper *h = arg;

	h->slept = wait_parked(&h->running, h->loop_tid);
	h->action(h);
	return NULL;
}

static void helper_start(struct helper *h, struct lull_loop *loop,
			 void (*action)(struct helper *h), void *ctx)
{
	h->loop_thread = pthread_self();
	h->loop_tid = thread_id();
	h->loop = loop;
	h->action = action;
	h->ctx = ctx;
	h->slept = false;
	mark_running(loop, &h->running);
	check_eq(pthread_create(&h->thread, NULL, helper_main, h), 0);
}

/* Join @thread within @ms (test/lib's timed join), or fail. */
static void join_within(pthread_t thread, unsigned ms, const char *what)
{
	int err = thread_join_within(thread, ms, NULL);

	check(err == 0, "%s did not end within %u ms: %s", what, ms,
	      strerror(err));
}

static void helper_join(struct helper *h)
{
	join_within(h->thread, 8000, "the helper thread");
	check(h->slept, "the loop's thread never went to sleep");
}

/* ------------------------------------------------------------------------
 * Rings and records
 */

static struct lull_ring *ring_new(unsigned flags, size_t capacity)
{
	struct lull_ring *ring = NULL;

	check_eq(lull_ring_create(&ring, capacity, flags), 0);
	return ring;
}

static struct lull_producer *producer_new(struct lull_ring *ring)
{
	struct lull_producer *prod = NULL;

	check_eq(lull_producer_attach(ring, 0, &prod), 0);
	return prod;
}

/* The payload of most test records: which stream, and where in it. */
struct rec {
	uint32_t tag;
	uint32_t seq;
};

/* Write, waiting (yielding) while the ring is full. */
static int write_rec(struct lull_producer *prod, bool mpsc, uint32_t tag,
		     uint32_t seq)
{
	struct rec r = { .tag = tag, .seq = seq };
	int ret;

	for (;;) {
		ret = mpsc ? lull_mpsc_write(prod, 1, &r, sizeof(r))
			   : lull_spsc_write(prod, 1, &r, sizeof(r));
		if (ret != -EAGAIN)
			return ret;
		sched_yield();
	}
}

static struct rec rec_of(const struct lull_record *record)
{
	struct rec r = { .tag = UINT32_MAX, .seq = UINT32_MAX };

	if (record->len == sizeof(r))
		memcpy(&r, record->data, sizeof(r));
	return r;
}

/*
 * The record a stop ends each ring with: lull_loop_stop() shuts every
 * attached ring down, and its handler gets, after the last record, one
 * poison record (no payload); then the loop detaches the ring.
 */
static bool is_poison(const struct lull_record *record)
{
	return record->type == LULL_TYPE_POISON && record->len == 0;
}

/*
 * A consumer that expects records tag, 0, 1, 2, ... and, once the ring is
 * shut down, the poison after them.
 */
struct seq_sink {
	struct lull_loop *loop;
	uint32_t tag;
	uint32_t next;    /* the seq expected next */
	uint32_t stop_at; /* stop the loop once next reaches it; 0: never */
	unsigned errors;  /* records out of order, or after the poison */
	unsigned poisons;
};

static int seq_handler(const struct lull_record *record, void *ctx)
{
	struct seq_sink *s = ctx;
	struct rec r = rec_of(record);

	if (record->type < 1) {
		if (!is_poison(record) || s->poisons)
			s->errors++;
		s->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (s->poisons || record->type != 1 || r.tag != s->tag ||
	    r.seq != s->next)
		s->errors++;
	s->next++;
	if (s->loop && s->next == s->stop_at)
		lull_loop_stop(s->loop);
	return LULL_READ_CONTINUE;
}

/*
 * After a run that a stop ended, @ring (attached to @loop then) is shut
 * down, its poison delivered, and detached: the loop no longer knows it,
 * reads are -EPIPE, its producer @prod (if still attached) writes nothing,
 * and no new producer attaches (-EPIPE; -EBUSY first for a second SPSC
 * one).
 */
static void check_ring_ended(struct lull_loop *loop, struct lull_ring *ring,
			     struct lull_producer *prod, bool mpsc)
{
	struct lull_producer *late = NULL;
	struct lull_record record;

	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	check_eq(lull_ring_read(ring, seq_handler, &(struct seq_sink){ 0 }, 4),
		 -EPIPE);
	check_eq(lull_ring_peek(ring, &record), -EPIPE);
	if (prod)
		check_eq(mpsc ? lull_mpsc_write(prod, 1, "x", 1)
			      : lull_spsc_write(prod, 1, "x", 1),
			 -EPIPE);
	check_eq(lull_producer_attach(ring, 0, &late),
		 prod && !mpsc ? -EBUSY : -EPIPE);
}

/* For rings that stay empty. */
static int never_called(const struct lull_record *record, void *ctx)
{
	(void)ctx;
	check(false, "a handler got a record of %u bytes on an empty ring",
	      record->len);
	return LULL_READ_CONTINUE;
}

static inline int never_called_run(const struct lull_items *run, void *ctx)
{
	(void)ctx;
	check(false, "a handler got a run of %u records on an empty ring",
	      run->count);
	return LULL_READ_CONTINUE;
}

/* Callbacks that do nothing. */
static void nop_cqe(struct lull_loop *loop, int res, uint32_t flags,
		    void *ctx)
{
	(void)loop;
	(void)res;
	(void)flags;
	(void)ctx;
}

static void nop_timer(struct lull_loop *loop, void *ctx)
{
	(void)loop;
	(void)ctx;
}

static void nop_signal(struct lull_loop *loop, int signo, void *ctx)
{
	(void)loop;
	(void)signo;
	(void)ctx;
}

/* Callbacks that count the calls they should never get. */
static void must_not_run(struct lull_loop *loop, int res, uint32_t flags,
			 void *ctx)
{
	(void)loop;
	(void)res;
	(void)flags;
	(*(unsigned *)ctx)++;
}

static void must_not_fire(struct lull_loop *loop, void *ctx)
{
	(void)loop;
	(*(unsigned *)ctx)++;
}

static void make_pipe(int fds[2])
{
	/* Blocking: io_uring fails reads of non-blocking files at once. */
	check_eq(pipe2(fds, O_CLOEXEC), 0);
}

#pragma GCC diagnostic pop

#endif
