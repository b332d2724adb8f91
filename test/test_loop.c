/* SPDX-License-Identifier: MIT */
/*
 * test_loop.c - the Criterion suite of lull/loop.h: creating and stopping a
 * loop, attaching rings, user SQEs, timers, signals, parking and counters.
 *
 * Every test is a parameterized test run once per loop backend
 * (uring-futex, uring-eventfd, epoll); a backend this kernel or sandbox
 * does not allow is skipped with the reason lull_backend_supported() gives.
 * Failure messages start with the backend's name, since Criterion does not
 * name the parameter.  Tests that create a loop with LULL_BACKEND_AUTO
 * compare it with lull_backend_probe(), so the suite also passes with
 * LULL_BACKEND=epoll in the environment.
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
 * assert: they leave what they saw in their state for the test thread.  No
 * test sleeps to let something happen: helpers wait for an atomic that a
 * callback sets, or for the loop's thread to be asleep in the kernel (its
 * state in /proc is 'S': the loop blocks nowhere else than in its park).
 * The one deliberate sleep is the idle period of the idle test.
 *
 * Every test has a .timeout watchdog, so a loop that never wakes fails the
 * test instead of stalling the run; some also arm a loop timer that stops
 * the loop early and fails with a message saying what was missing.  The
 * watchdog is 10 s for every test: with tests in parallel, Criterion 2.4
 * leaks the deadline records of mixed timeouts in its runner process, and
 * LeakSanitizer then fails the sanitizer run of the whole suite.
 */
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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static pid_t thread_id(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The state letter of thread @tid of this process ('R', 'S', ...), or 0. */
static char thread_state(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/*
 * Wait until thread @tid sleeps in the kernel; false after 5 s.  A loop
 * thread in these tests blocks nowhere but in its park, so this is "until
 * the loop has parked".
 */
static bool wait_sleeping(pid_t tid)
{
	const struct timespec pause = { .tv_nsec = 20 * US };
	uint64_t deadline = now_ns() + 5 * SEC;

	while (thread_state(tid) != 'S') {
		if (now_ns() > deadline)
			return false;
		nanosleep(&pause, NULL);
	}
	return true;
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

static void helper_join(struct helper *h)
{
	check_eq(pthread_join(h->thread, NULL), 0);
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

/* ========================================================================
 * Creating, destroying, running and stopping
 */

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

LOOP_TEST(create_and_every_call_reject_bad_arguments, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = backend };
	struct lull_loop *loop = NULL, *other;
	struct io_uring_sqe *sqe = NULL;
	struct seq_sink ends = { 0 };
	struct lull_loop_stats st;
	struct lull_ring *ring;
	sigset_t before, after;
	int sigs[2];

	check_eq(lull_loop_create(NULL, &cfg), -EINVAL);
	cfg.backend = LULL_BACKEND_BLOCKING;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");
	cfg.backend = (enum lull_backend)99;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");

	check_eq(lull_loop_destroy(NULL), -EINVAL);
	check_eq(lull_loop_backend(NULL), -EINVAL);
	check_eq(lull_loop_run(NULL), -EINVAL);
	check_eq(lull_loop_stop(NULL), -EINVAL);

	other = loop_new(backend, 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	check_eq(lull_loop_stats(NULL, &st), -EINVAL);
	check_eq(lull_loop_stats(other, NULL), -EINVAL);
	check_eq(lull_loop_sqe(NULL, nop_cqe, NULL, &sqe), -EINVAL);
	check_eq(lull_loop_sqe(other, NULL, NULL, &sqe), -EINVAL);
	check_eq(lull_loop_sqe(other, nop_cqe, NULL, NULL), -EINVAL);
	check(sqe == NULL, "a failed lull_loop_sqe set an SQE");
	check_eq(lull_loop_timer(NULL, MS, 0, nop_timer, NULL, NULL),
		 -EINVAL);
	check_eq(lull_loop_timer(other, MS, 0, NULL, NULL, NULL), -EINVAL);
	check_eq(lull_loop_timer_cancel(NULL, NULL), -EINVAL);
	check_eq(lull_loop_timer_cancel(other, NULL), -EINVAL);
	check_eq(lull_loop_attach(NULL, ring, never_called, NULL, 0),
		 -EINVAL);
	check_eq(lull_loop_attach(other, NULL, never_called, NULL, 0),
		 -EINVAL);
	check_eq(lull_loop_attach(other, ring, NULL, NULL, 0), -EINVAL);
	check_eq(lull_loop_detach(NULL, ring), -EINVAL);
	check_eq(lull_loop_detach(other, NULL), -EINVAL);

	/* Bad signal sets are refused before anything is blocked. */
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	sigs[0] = SIGUSR1;
	sigs[1] = SIGKILL;
	check_eq(lull_loop_signals(NULL, sigs, 1, nop_signal, NULL), -EINVAL);
	check_eq(lull_loop_signals(other, NULL, 1, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 0, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, -1, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 1, NULL, NULL), -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	sigs[1] = SIGSTOP;
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	/* No signal at all: refused, and errno left alone (lull never
	 * sets it, even where libc's sigaddset() would). */
	sigs[1] = 4096;
	errno = 0;
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	check_eq(errno, 0);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	check(!sigismember(&after, SIGUSR1) || sigismember(&before, SIGUSR1),
	      "a refused lull_loop_signals blocked SIGUSR1");

	/*
	 * The refused calls left nothing behind: the loop still works.  Its
	 * stop shuts the ring down, whose handler then gets the poison, and
	 * nothing else: nothing was ever written.
	 */
	check_eq(lull_loop_attach(other, ring, seq_handler, &ends, 0), 0);
	check_eq(lull_loop_stop(other), 0);
	run_loop(other);
	check_eq(ends.poisons, 1);
	check_eq(ends.next, 0);
	check_eq(ends.errors, 0);
	check_ring_ended(other, ring, NULL, false);
	loop_free(other);
	check_eq(lull_ring_destroy(ring), 0);
}

LOOP_TEST(backend_reports_the_requested_one, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_AUTO };
	struct lull_loop *loop;
	int probed;

	loop = loop_new(backend, 0);
	check_eq(lull_loop_backend(loop), backend);
	loop_free(loop);

	/* AUTO is lull_backend_probe(): LULL_BACKEND when it is set. */
	probed = lull_backend_probe();
	check(probed > 0, "lull_backend_probe: %d", probed);
	loop = NULL;
	check_eq(lull_loop_create(&loop, &cfg), 0);
	check_eq(lull_loop_backend(loop), probed);
	loop_free(loop);
	loop = NULL;
	check_eq(lull_loop_create(&loop, NULL), 0);
	check_eq(lull_loop_backend(loop), probed);
	loop_free(loop);
}

LOOP_TEST(auto_follows_lull_backend_from_the_environment, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_AUTO };
	const char *old = getenv("LULL_BACKEND");
	char *saved = old ? strdup(old) : NULL;
	struct lull_loop *loop = NULL;

	check_eq(setenv("LULL_BACKEND", bname, 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), 0);
	check_eq(lull_loop_backend(loop), backend);
	loop_free(loop);

	loop = NULL;
	check_eq(setenv("LULL_BACKEND", "no-such-backend", 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	/* "blocking" is a backend, but not one a loop can run on. */
	check_eq(setenv("LULL_BACKEND", "blocking", 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");

	if (saved)
		setenv("LULL_BACKEND", saved, 1);
	else
		unsetenv("LULL_BACKEND");
	free(saved);
}

struct reentry {
	int destroy_ret;
	int run_ret;
	unsigned calls;
};

static void destroy_from_callback(struct lull_loop *loop, int res,
				  uint32_t flags, void *ctx)
{
	struct reentry *r = ctx;

	(void)res;
	(void)flags;
	r->calls++;
	r->destroy_ret = lull_loop_destroy(loop);
	lull_loop_stop(loop);
}

LOOP_TEST(destroy_from_a_callback_is_ebusy, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct reentry r = { .destroy_ret = 1 };
	struct lull_loop *loop = loop_new(backend, 0);

	get_sqe(loop, destroy_from_callback, &r);
	run_loop(loop);
	check_eq(r.calls, 1);
	check_eq(r.destroy_ret, -EBUSY);
	loop_free(loop);
}

static void run_from_callback(struct lull_loop *loop, int res,
			      uint32_t flags, void *ctx)
{
	struct reentry *r = ctx;

	(void)res;
	(void)flags;
	r->calls++;
	r->run_ret = lull_loop_run(loop);
	lull_loop_stop(loop);
}

LOOP_TEST(run_from_a_callback_is_ebusy, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct reentry r = { .run_ret = 1 };
	struct lull_loop *loop = loop_new(backend, 0);

	get_sqe(loop, run_from_callback, &r);
	run_loop(loop);
	check_eq(r.calls, 1);
	check_eq(r.run_ret, -EBUSY);
	loop_free(loop);
}

LOOP_TEST(stop_before_run_returns_once_queued_sqes_complete, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct cqe_seen nop = { 0 };
	unsigned left = 3;

	nop.left = &left;
	get_sqe(loop, record_cqe, &nop);
	check_eq(lull_loop_stop(loop), 0);
	run_loop(loop);
	/* No ring to drain; the queued NOP completed before the return. */
	check_eq(nop.calls, 1);
	check_eq(nop.res, 0);

	/*
	 * The stop was used up: the next run goes on until stopped again,
	 * here by the second of two more NOPs.
	 */
	get_sqe(loop, record_cqe, &nop);
	get_sqe(loop, record_cqe, &nop);
	run_loop(loop);
	check_eq(nop.calls, 3);
	loop_free(loop);
}

static void stop_action(struct helper *h)
{
	lull_loop_stop(h->loop);
}

LOOP_TEST(stop_from_another_thread_wakes_a_parked_loop, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct lull_loop_stats st;
	struct helper h;

	helper_start(&h, loop, stop_action, NULL);
	run_loop(loop);
	helper_join(&h);
	st = loop_stats(loop);
	check_op(st.parks, >=, 1);
	check_eq(st.safety_timeouts, 0);
	loop_free(loop);
}

static void stop_then_count(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	(void)res;
	(void)flags;
	(*(unsigned *)ctx)++;
	check_eq(lull_loop_stop(loop), 0);
}

LOOP_TEST(stop_from_a_callback_ends_run_and_the_next_run_works, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	unsigned calls = 0;

	get_sqe(loop, stop_then_count, &calls);
	run_loop(loop);
	check_eq(calls, 1);
	get_sqe(loop, stop_then_count, &calls);
	run_loop(loop);
	check_eq(calls, 2);
	loop_free(loop);
}

/* lull_loop_stop() from a signal handler: the loop it stops. */
static struct lull_loop *signal_loop;
static _Atomic unsigned handler_calls;

static void stop_handler(int signo)
{
	(void)signo;
	/* Only async-signal-safe calls here; lull_loop_stop() is one. */
	lull_loop_stop(signal_loop);
	atomic_fetch_add_explicit(&handler_calls, 1, memory_order_relaxed);
}

static void install_stop_handler(struct lull_loop *loop)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = stop_handler;
	sigemptyset(&sa.sa_mask);
	signal_loop = loop;
	check_eq(sigaction(SIGUSR2, &sa, NULL), 0);
}

static void raise_action(struct helper *h)
{
	(void)h;
	/* raise() in a thread signals that thread: the handler runs here. */
	raise(SIGUSR2);
}

LOOP_TEST(stop_from_a_signal_handler_on_another_thread_wakes_the_loop,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct helper h;

	install_stop_handler(loop);
	helper_start(&h, loop, raise_action, NULL);
	run_loop(loop);
	helper_join(&h);
	check_eq(atomic_load(&handler_calls), 1);
	check_eq(loop_stats(loop).safety_timeouts, 0);
	loop_free(loop);
	signal(SIGUSR2, SIG_DFL);
}

static void kill_loop_action(struct helper *h)
{
	pthread_kill(h->loop_thread, SIGUSR2);
}

LOOP_TEST(stop_from_a_signal_handler_interrupting_the_park, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct helper h;

	install_stop_handler(loop);
	helper_start(&h, loop, kill_loop_action, NULL);
	run_loop(loop);
	helper_join(&h);
	check_eq(atomic_load(&handler_calls), 1);
	check_eq(loop_stats(loop).safety_timeouts, 0);
	loop_free(loop);
	signal(SIGUSR2, SIG_DFL);
}

/* ========================================================================
 * Rings
 */

LOOP_TEST(attach_and_detach_refuse_wrong_rings, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_loop *other = loop_new(backend, 0);
	struct lull_ring *ring, *owner, *view;
	ssize_t size = lull_ring_region_size(4096);
	void *mem;

	check_op(size, >, 0);
	mem = aligned_alloc(128, (size_t)size);
	check(mem != NULL, "out of memory");
	check_eq(lull_ring_create_in(&owner, mem, (size_t)size, 4096,
				     LULL_RING_SPSC),
		 0);
	check_eq(lull_ring_open(&view, mem, (size_t)size, 0), 0);
	ring = ring_new(LULL_RING_MPSC, 4096);

	/* A handle without the consumer role cannot be drained. */
	check_eq(lull_loop_attach(loop, view, never_called, NULL, 0), -EPERM);
	check_eq(lull_loop_detach(loop, view), -ENOENT);

	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), 0);
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 4), -EBUSY);
	check_eq(lull_loop_attach(other, ring, never_called, NULL, 0),
		 -EBUSY);
	/* The loop is its consumer now, not lull_ring_wait(). */
	check_eq(lull_ring_wait(ring, 0), -EBUSY);
	check_eq(lull_ring_wait(ring, 1000), -EBUSY);
	check_eq(lull_loop_detach(other, ring), -ENOENT);
	check_eq(lull_loop_detach(loop, owner), -ENOENT);

	check_eq(lull_loop_detach(loop, ring), 0);
	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	check_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	check_eq(lull_loop_attach(other, ring, never_called, NULL, 0), 0);
	check_eq(lull_loop_attach(other, owner, never_called, NULL, 0), 0);

	loop_free(other); /* detaches both */
	check_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	check_eq(lull_loop_attach(loop, owner, never_called, NULL, 0), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
	check_eq(lull_ring_destroy(view), 0);
	check_eq(lull_ring_destroy(owner), 0);
	free(mem);
}

LOOP_TEST(attach_is_ebusy_while_the_ring_is_parked_on_a_callers_uring,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct __kernel_timespec wait = { .tv_sec = 2 };
	struct lull_loop *loop = loop_new(backend, 0);
	struct io_uring_cqe *cqe;
	struct lull_ring *ring;
	struct io_uring uring;
	int ret, seen = 0;

	ret = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	if (ret < 0) {
		loop_free(loop);
		cr_skip_test("no io_uring here: %s", strerror(-ret));
	}
	check_eq(io_uring_queue_init(8, &uring, 0), 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	check_eq(lull_uring_park_arm(ring, &uring, 42), 0);
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), -EBUSY);

	/*
	 * Cancel the park; its two CQEs (the wait, the cancel: no safety
	 * net's timeout by default) end it.
	 */
	check_eq(lull_uring_park_cancel(ring, &uring), 0);
	check_op(io_uring_submit(&uring), >=, 1);
	while (seen < 2) {
		ret = io_uring_wait_cqe_timeout(&uring, &cqe, &wait);
		check(ret == 0, "park CQE %d missing: %s", seen, strerror(-ret));
		check_eq(lull_uring_park_cqe(ring, cqe), 1);
		io_uring_cqe_seen(&uring, cqe);
		seen++;
	}
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
	io_uring_queue_exit(&uring);
}

/* --- records from producer threads ----------------------------------- */

#define PT_RECORDS 20000u
#define PT_MPSC_PRODUCERS 3u

struct pt_shared {
	struct lull_loop *loop;
	unsigned delivered;
	unsigned expected;
};

struct pt_sink {
	struct pt_shared *shared;
	uint32_t ring; /* which ring this handler belongs to */
	uint32_t next[PT_MPSC_PRODUCERS];
	unsigned errors;
	unsigned poisons;
};

struct pt_producer {
	pthread_t thread;
	struct lull_producer *prod;
	bool mpsc;
	uint32_t ring;
	uint32_t id;
	int ret;
};

/* The tag of record: ring in the high half, producer in the low. */
static uint32_t pt_tag(uint32_t ring, uint32_t producer)
{
	return ring << 16 | producer;
}

static int pt_handler(const struct lull_record *record, void *ctx)
{
	struct pt_sink *s = ctx;
	struct rec r = rec_of(record);
	uint32_t producer = r.tag & 0xffff;

	/* The stop's poison: once, after every record. */
	if (record->type < 1) {
		if (!is_poison(record) || s->poisons ||
		    s->shared->delivered != s->shared->expected)
			s->errors++;
		s->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (s->poisons || record->type != 1 || r.tag >> 16 != s->ring ||
	    producer >= PT_MPSC_PRODUCERS || r.seq != s->next[producer])
		s->errors++;
	else
		s->next[producer]++;
	if (++s->shared->delivered == s->shared->expected)
		lull_loop_stop(s->shared->loop);
	return LULL_READ_CONTINUE;
}

static void *pt_main(void *arg)
{
	struct pt_producer *p = arg;

	for (uint32_t seq = 0; seq < PT_RECORDS && !p->ret; seq++)
		p->ret = write_rec(p->prod, p->mpsc, pt_tag(p->ring, p->id),
				   seq);
	return NULL;
}

LOOP_TEST(records_from_producer_threads_reach_their_handler_in_order,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct pt_producer producers[1 + PT_MPSC_PRODUCERS];
	struct pt_sink spsc_sink = { .ring = 1 }, mpsc_sink = { .ring = 2 };
	struct lull_ring *spsc, *mpsc;
	struct pt_shared shared;
	struct lull_loop *loop;

	loop = loop_new(backend, 0);
	shared.loop = loop;
	shared.delivered = 0;
	shared.expected = PT_RECORDS * (1 + PT_MPSC_PRODUCERS);
	spsc_sink.shared = &shared;
	mpsc_sink.shared = &shared;
	spsc = ring_new(LULL_RING_SPSC, 4096);
	mpsc = ring_new(LULL_RING_MPSC, 4096);
	check_eq(lull_loop_attach(loop, spsc, pt_handler, &spsc_sink, 0), 0);
	check_eq(lull_loop_attach(loop, mpsc, pt_handler, &mpsc_sink, 16), 0);

	memset(producers, 0, sizeof(producers));
	for (unsigned i = 0; i < ARRAY_SIZE(producers); i++) {
		struct pt_producer *p = &producers[i];

		p->mpsc = i > 0;
		p->ring = p->mpsc ? 2 : 1;
		p->id = p->mpsc ? i - 1 : 0;
		p->prod = producer_new(p->mpsc ? mpsc : spsc);
		check_eq(pthread_create(&p->thread, NULL, pt_main, p), 0);
	}
	run_loop(loop);
	for (unsigned i = 0; i < ARRAY_SIZE(producers); i++) {
		check_eq(pthread_join(producers[i].thread, NULL), 0);
		check_eq(producers[i].ret, 0);
		check_eq(lull_producer_detach(producers[i].prod), 0);
	}
	check_eq(shared.delivered, shared.expected);
	check_eq(spsc_sink.errors, 0);
	check_eq(mpsc_sink.errors, 0);
	check_eq(spsc_sink.poisons, 1);
	check_eq(mpsc_sink.poisons, 1);
	check_eq(spsc_sink.next[0], PT_RECORDS);
	for (unsigned i = 0; i < PT_MPSC_PRODUCERS; i++)
		check_eq(mpsc_sink.next[i], PT_RECORDS);
	/* Every record handed to a handler counts, the poisons too. */
	check_eq(loop_stats(loop).records, shared.expected + 2);
	check_ring_ended(loop, spsc, NULL, false);
	check_ring_ended(loop, mpsc, NULL, true);
	loop_free(loop);
	check_eq(lull_ring_destroy(spsc), 0);
	check_eq(lull_ring_destroy(mpsc), 0);
}

/* --- the batch limit --------------------------------------------------- */

#define BATCH_A 20u /* records in ring A, batch 4 */
#define BATCH_B 10u /* records in ring B, batch 1: one per pass */

struct batch_log {
	struct lull_loop *loop;
	char order[BATCH_A + BATCH_B + 1]; /* 'A' or 'B', in handler order */
	unsigned n; /* records, not counting the poisons */
};

struct batch_sink {
	struct seq_sink seq;
	struct batch_log *log;
	char name;
};

static int batch_handler(const struct lull_record *record, void *ctx)
{
	struct batch_sink *s = ctx;
	struct batch_log *log = s->log;

	if (record->type < 1) /* the stop's poison, after every record */
		return seq_handler(record, &s->seq);
	if (log->n < BATCH_A + BATCH_B)
		log->order[log->n] = s->name;
	log->n++;
	seq_handler(record, &s->seq);
	if (log->n == BATCH_A + BATCH_B)
		lull_loop_stop(log->loop);
	return LULL_READ_CONTINUE;
}

LOOP_TEST(handler_gets_at_most_batch_records_per_pass, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct batch_sink sa = { .name = 'A' }, sb = { .name = 'B' };
	struct lull_producer *pa, *pb;
	struct lull_ring *a, *b;
	struct batch_log log;
	unsigned run_len = 0, longest = 0;

	memset(&log, 0, sizeof(log));
	log.loop = loop_new(backend, 0);
	sa.log = &log;
	sb.log = &log;
	sa.seq.tag = 0;
	sb.seq.tag = 1;
	a = ring_new(LULL_RING_SPSC, 4096);
	b = ring_new(LULL_RING_SPSC, 4096);
	pa = producer_new(a);
	pb = producer_new(b);
	for (uint32_t i = 0; i < BATCH_A; i++)
		check_eq(write_rec(pa, false, 0, i), 0);
	for (uint32_t i = 0; i < BATCH_B; i++)
		check_eq(write_rec(pb, false, 1, i), 0);
	check_eq(lull_loop_attach(log.loop, a, batch_handler, &sa, 4), 0);
	check_eq(lull_loop_attach(log.loop, b, batch_handler, &sb, 1), 0);
	run_loop(log.loop);

	check_eq(log.n, BATCH_A + BATCH_B);
	check_eq(sa.seq.errors, 0);
	check_eq(sb.seq.errors, 0);
	check_eq(sa.seq.poisons, 1);
	check_eq(sb.seq.poisons, 1);
	check_ring_ended(log.loop, a, pa, false);
	check_ring_ended(log.loop, b, pb, false);
	/*
	 * Ring B gives one record per pass, so the A records between two B
	 * records are one pass's worth: at most 4.
	 */
	for (unsigned i = 0; i < log.n; i++) {
		if (log.order[i] == 'A') {
			run_len++;
			continue;
		}
		check(run_len <= 4, "%u records of ring A in one pass: %s",
		      run_len, log.order);
		longest = run_len > longest ? run_len : longest;
		run_len = 0;
	}
	check(longest >= 1, "ring A never shared a pass with ring B: %s",
	      log.order);
	check_eq(lull_producer_detach(pa), 0);
	check_eq(lull_producer_detach(pb), 0);
	loop_free(log.loop);
	check_eq(lull_ring_destroy(a), 0);
	check_eq(lull_ring_destroy(b), 0);
}

/* --- detach and attach again ------------------------------------------ */

/*
 * Run @loop until it has parked on @ring (uring-futex: with the ring's
 * futex wait in flight), then take the ring off the loop and stop it.  A
 * stop shuts down the rings attached at the time, so the ring is detached
 * first, on the loop's thread: a helper writes a pipe once the loop
 * sleeps, and the read's callback detaches the ring, then stops the loop,
 * which has no ring left to end and returns.
 */
struct park_detach {
	struct lull_ring *ring;
	int fds[2];
	char byte;
	int res;
	int detach_ret;
	unsigned calls;
};

static void park_detach_cqe(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	struct park_detach *pd = ctx;

	(void)flags;
	pd->calls++;
	pd->res = res;
	pd->detach_ret = lull_loop_detach(loop, pd->ring);
	lull_loop_stop(loop);
}

static void pipe_write_action(struct helper *h)
{
	struct park_detach *pd = h->ctx;

	/* Checked by the callback: it sees the byte or never runs. */
	if (write(pd->fds[1], "x", 1) != 1)
		pd->res = -errno;
}

static void run_and_detach_when_parked(struct lull_loop *loop,
				       struct lull_ring *ring)
{
	struct park_detach pd = { .ring = ring, .detach_ret = 1 };
	struct io_uring_sqe *sqe;
	struct helper h;

	check_eq(pipe2(pd.fds, O_CLOEXEC), 0);
	sqe = get_sqe(loop, park_detach_cqe, &pd);
	io_uring_prep_read(sqe, pd.fds[0], &pd.byte, 1, (uint64_t)-1);
	helper_start(&h, loop, pipe_write_action, &pd);
	run_loop(loop);
	helper_join(&h);
	check_eq(pd.calls, 1);
	check_eq(pd.res, 1);
	check_eq(pd.detach_ret, 0);
	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	close(pd.fds[0]);
	close(pd.fds[1]);
}

LOOP_TEST(detach_leaves_records_in_the_ring_and_reattach_delivers_them,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	struct lull_producer *prod = producer_new(ring);
	struct seq_sink sink = { .loop = loop, .tag = 7 };

	/*
	 * Delivered, then parked (uring-futex: a wait in flight), detached,
	 * stopped: a ring detached before the stop stays open.
	 */
	check_eq(write_rec(prod, false, 7, 0), 0);
	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_and_detach_when_parked(loop, ring);
	check_eq(sink.next, 1);
	check_eq(sink.poisons, 0);

	for (uint32_t i = 1; i <= 5; i++)
		check_eq(write_rec(prod, false, 7, i), 0);
	/* Still there, and the consumer reads them itself. */
	sink.stop_at = 0;
	check_eq(lull_ring_wait(ring, 0), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 2), 2);
	check_eq(sink.next, 3);

	/*
	 * Attached again, the loop delivers the rest; the stop at the last
	 * one shuts the ring down: the poison follows, and the loop detaches
	 * the ring.
	 */
	sink.stop_at = 6;
	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_loop(loop);
	check_eq(sink.next, 6);
	check_eq(sink.errors, 0);
	check_eq(sink.poisons, 1);
	check_eq(loop_stats(loop).records, 1 + 3 + 1);
	check_ring_ended(loop, ring, prod, false);

	check_eq(lull_producer_detach(prod), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
}

LOOP_TEST(destroy_after_detaching_a_parked_ring_frees_everything,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	struct lull_producer *prod = producer_new(ring);
	struct seq_sink sink = { .tag = 5 };
	struct lull_ring_stats st;

	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_and_detach_when_parked(loop, ring);
	/* Destroyed without running again (LeakSanitizer checks the rest). */
	loop_free(loop);

	/* The ring is nobody's parked consumer: a write wakes no one. */
	check_eq(write_rec(prod, false, 5, 0), 0);
	check_eq(lull_ring_stats(ring, &st), 0);
	check_eq(st.wakes, 0);
	check_eq(lull_ring_wait(ring, 0), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), 1);
	check_eq(sink.errors, 0);
	check_eq(sink.poisons, 0);
	/* Its producer's detach ends it. */
	check_eq(lull_producer_detach(prod), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), 1);
	check_eq(sink.poisons, 1);
	check_eq(sink.errors, 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), -EPIPE);
	check_eq(lull_ring_destroy(ring), 0);
}

struct self_detach {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct seq_sink sink;
	int detach_ret;
	unsigned calls;
};

static int detach_self_handler(const struct lull_record *record, void *ctx)
{
	struct self_detach *d = ctx;

	d->calls++;
	seq_handler(record, &d->sink);
	d->detach_ret = lull_loop_detach(d->loop, d->ring);
	lull_loop_stop(d->loop);
	return LULL_READ_STOP;
}

LOOP_TEST(handler_can_detach_its_own_ring, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct self_detach d = { .detach_ret = 1 };
	struct lull_producer *prod;

	d.loop = loop_new(backend, 0);
	d.ring = ring_new(LULL_RING_SPSC, 4096);
	d.sink.tag = 3;
	prod = producer_new(d.ring);
	for (uint32_t i = 0; i < 10; i++)
		check_eq(write_rec(prod, false, 3, i), 0);
	check_eq(lull_loop_attach(d.loop, d.ring, detach_self_handler, &d, 0),
		 0);
	run_loop(d.loop);
	check_eq(d.calls, 1);
	check_eq(d.detach_ret, 0);
	check_eq(lull_loop_detach(d.loop, d.ring), -ENOENT);
	/*
	 * The other nine stayed in the ring, which the stop did not shut
	 * down: detached before it, it was not the loop's any more.
	 */
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 9);
	check_eq(d.sink.next, 10);
	check_eq(d.sink.errors, 0);
	check_eq(d.sink.poisons, 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), -EAGAIN);
	check_eq(write_rec(prod, false, 3, 10), 0);
	check_eq(lull_producer_detach(prod), 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 1);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 1);
	check_eq(d.sink.poisons, 1);
	check_eq(d.sink.errors, 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), -EPIPE);
	loop_free(d.loop);
	check_eq(lull_ring_destroy(d.ring), 0);
}

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
	check_eq(pthread_join(producer, NULL), 0);
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
	check_eq(st.safety_timeouts, 0);
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
	check_eq(pthread_join(producer, NULL), 0);
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
	check_eq(pthread_create(&producer, NULL, coalesce_producer, &c), 0);
	run_loop(c.loop);
	check_eq(pthread_join(producer, NULL), 0);
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

/* ========================================================================
 * User SQEs
 */

LOOP_TEST(nop_completes_with_zero, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct cqe_seen nop = { .res = 1 };
	unsigned left = 1;

	nop.left = &left;
	get_sqe(loop, record_cqe, &nop);
	run_loop(loop);
	check_eq(nop.calls, 1);
	check_eq(nop.res, 0);
	check_eq(nop.flags & IORING_CQE_F_MORE, 0);
	check_eq(loop_stats(loop).completions, 1);
	loop_free(loop);
}

LOOP_TEST(timeout_sqe_completes_with_etime_after_its_time, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct __kernel_timespec ts = { .tv_nsec = (long long)(30 * MS) };
	struct cqe_seen timeout = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 1;
	uint64_t start;

	timeout.left = &left;
	sqe = get_sqe(loop, record_cqe, &timeout);
	io_uring_prep_timeout(sqe, &ts, 0, 0);
	start = now_ns();
	run_loop(loop);
	check_eq(timeout.calls, 1);
	check_eq(timeout.res, -ETIME);
	check_op(timeout.at_ns - start, >=, 30 * MS);
	loop_free(loop);
}

static void make_pipe(int fds[2])
{
	/* Blocking: io_uring fails reads of non-blocking files at once. */
	check_eq(pipe2(fds, O_CLOEXEC), 0);
}

/* WRITE then READ through a pipe, both with file offset @offset. */
static void pipe_round_trip(enum lull_backend backend, uint64_t offset)
{
	static const char out[] = "through the pipe";
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen wr = { .res = 1 }, rd = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 2;
	bool stalled;
	char in[64];
	int fds[2];

	make_pipe(fds);
	memset(in, 0, sizeof(in));
	wr.left = &left;
	rd.left = &left;
	sqe = get_sqe(loop, record_cqe, &rd);
	io_uring_prep_read(sqe, fds[0], in, sizeof(in), offset);
	sqe = get_sqe(loop, record_cqe, &wr);
	io_uring_prep_write(sqe, fds[1], out, sizeof(out), offset);
	arm_watchdog(loop, 2 * SEC, &stalled);
	run_loop(loop);
	check_eq(wr.calls, 1);
	check(wr.res == (int)sizeof(out), "write: %d (%s)", wr.res,
	      wr.res < 0 ? strerror(-wr.res) : "short");
	check(!stalled, "the read never completed");
	check_eq(rd.calls, 1);
	check(rd.res == (int)sizeof(out), "read: %d (%s)", rd.res,
	      rd.res < 0 ? strerror(-rd.res) : "short");
	check(memcmp(in, out, sizeof(out)) == 0, "read %.64s", in);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

LOOP_TEST(read_and_write_on_a_pipe, .timeout = 10)
{
	pipe_round_trip(use_backend(backendp), (uint64_t)-1);
}

/*
 * io_uring_prep_read(3): "On files that are not capable of seeking, the
 * offset must be 0 or -1."  0 is what most io_uring code passes for pipes
 * and sockets (lull itself does, for its eventfd).
 */
LOOP_TEST(read_and_write_on_a_pipe_with_offset_zero, .timeout = 10)
{
	pipe_round_trip(use_backend(backendp), 0);
}

/* --- a TCP echo exchange on loopback ---------------------------------- */

static int tcp_listener(uint16_t *port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	socklen_t len = sizeof(addr);
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check(fd >= 0, "socket: %s", strerror(errno));
	check_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	check_eq(listen(fd, 16), 0);
	check_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	*port = ntohs(addr.sin_port);
	return fd;
}

/* A blocking connect: loopback completes it from the listen backlog. */
static int tcp_connect(uint16_t port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct echo {
	struct lull_loop *loop;
	int lfd, cfd, sfd;
	char cbuf[32], sbuf[32];
	int accept_res, srecv_res, ssend_res, csend_res, crecv_res;
	unsigned done;
};

#define ECHO_MSG "ping through lull"

static void echo_step_done(struct echo *e)
{
	if (++e->done == 5)
		lull_loop_stop(e->loop);
}

static void echo_server_sent(struct lull_loop *loop, int res, uint32_t flags,
			     void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->ssend_res = res;
	echo_step_done(e);
}

static void echo_server_received(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct echo *e = ctx;
	struct io_uring_sqe *sqe;

	(void)flags;
	e->srecv_res = res;
	if (res > 0) {
		sqe = get_sqe(loop, echo_server_sent, e);
		io_uring_prep_send(sqe, e->sfd, e->sbuf, (size_t)res, 0);
	}
	echo_step_done(e);
}

static void echo_accepted(struct lull_loop *loop, int res, uint32_t flags,
			  void *ctx)
{
	struct echo *e = ctx;
	struct io_uring_sqe *sqe;

	(void)flags;
	e->accept_res = res;
	e->sfd = res;
	if (res >= 0) {
		sqe = get_sqe(loop, echo_server_received, e);
		io_uring_prep_recv(sqe, e->sfd, e->sbuf, sizeof(e->sbuf), 0);
	}
	echo_step_done(e);
}

static void echo_client_sent(struct lull_loop *loop, int res, uint32_t flags,
			     void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->csend_res = res;
	echo_step_done(e);
}

static void echo_client_received(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->crecv_res = res;
	echo_step_done(e);
}

LOOP_TEST(tcp_echo_through_accept_recv_and_send, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct echo e = { .sfd = -1, .accept_res = 1 };
	struct io_uring_sqe *sqe;
	bool stalled;
	uint16_t port;

	e.loop = loop_new(backend, 20 * MS);
	e.lfd = tcp_listener(&port);
	e.cfd = tcp_connect(port);
	check(e.cfd >= 0, "connect: %s", strerror(errno));
	memset(e.cbuf, 0, sizeof(e.cbuf));

	sqe = get_sqe(e.loop, echo_accepted, &e);
	io_uring_prep_accept(sqe, e.lfd, NULL, NULL, 0);
	sqe = get_sqe(e.loop, echo_client_sent, &e);
	io_uring_prep_send(sqe, e.cfd, ECHO_MSG, sizeof(ECHO_MSG), 0);
	sqe = get_sqe(e.loop, echo_client_received, &e);
	io_uring_prep_recv(sqe, e.cfd, e.cbuf, sizeof(e.cbuf), 0);
	arm_watchdog(e.loop, 5 * SEC, &stalled);
	run_loop(e.loop);

	check(!stalled, "the exchange stalled after %u of 5 steps", e.done);
	check(e.accept_res >= 0, "accept: %s", strerror(-e.accept_res));
	check_eq(e.csend_res, sizeof(ECHO_MSG));
	check_eq(e.srecv_res, sizeof(ECHO_MSG));
	check_eq(e.ssend_res, sizeof(ECHO_MSG));
	check_eq(e.crecv_res, sizeof(ECHO_MSG));
	check(strcmp(e.cbuf, ECHO_MSG) == 0, "echoed %.32s", e.cbuf);
	check_eq(loop_stats(e.loop).completions, 5);
	loop_free(e.loop);
	close(e.sfd);
	close(e.cfd);
	close(e.lfd);
}

/* --- ACCEPT must wait for a connection without blocking the loop -------- */

struct accept_wait {
	uint16_t port;
	int cfd, rescue_fd;
	int accept_res;
	unsigned done;
	_Atomic unsigned nop_ran;
	bool rescued;
	pthread_t thread;
};

static void accept_wait_done(struct lull_loop *loop, struct accept_wait *a)
{
	if (++a->done == 2)
		lull_loop_stop(loop);
}

static void accept_wait_accepted(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct accept_wait *a = ctx;

	(void)flags;
	a->accept_res = res;
	accept_wait_done(loop, a);
}

/* Runs after the ACCEPT was started: only now does a client connect. */
static void accept_wait_connect(struct lull_loop *loop, int res,
				uint32_t flags, void *ctx)
{
	struct accept_wait *a = ctx;

	(void)res;
	(void)flags;
	a->cfd = tcp_connect(a->port);
	atomic_store(&a->nop_ran, 1);
	accept_wait_done(loop, a);
}

/*
 * If the NOP has not run after 2 s, the loop's thread is stuck in the
 * ACCEPT: connect from here to free it, and say so.
 */
static void *accept_wait_rescue(void *arg)
{
	const struct timespec pause = { .tv_nsec = (long)MS };
	struct accept_wait *a = arg;
	uint64_t deadline = now_ns() + 2 * SEC;

	while (!atomic_load(&a->nop_ran)) {
		if (now_ns() > deadline) {
			a->rescued = true;
			a->rescue_fd = tcp_connect(a->port);
			break;
		}
		nanosleep(&pause, NULL);
	}
	return NULL;
}

LOOP_TEST(accept_waits_for_a_connection_without_blocking_the_loop,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct accept_wait a = { .cfd = -1, .rescue_fd = -1, .accept_res = 1 };
	struct io_uring_sqe *sqe;
	int lfd = tcp_listener(&a.port);

	/* A blocking listening socket, as io_uring users have them. */
	sqe = get_sqe(loop, accept_wait_accepted, &a);
	io_uring_prep_accept(sqe, lfd, NULL, NULL, 0);
	get_sqe(loop, accept_wait_connect, &a);
	check_eq(pthread_create(&a.thread, NULL, accept_wait_rescue, &a), 0);
	run_loop(loop);
	check_eq(pthread_join(a.thread, NULL), 0);
	check(!a.rescued,
	      "the loop's thread blocked in ACCEPT: nothing else ran until "
	      "a connection came");
	check(a.accept_res >= 0, "accept: %s", strerror(-a.accept_res));
	check(a.cfd >= 0, "connect failed");
	loop_free(loop);
	close(a.accept_res);
	close(a.cfd);
	if (a.rescue_fd >= 0)
		close(a.rescue_fd);
	close(lfd);
}

struct poll_wait {
	int fds[2];
	struct cqe_seen poll, nop;
	unsigned left;
};

static void poll_wait_write(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	struct poll_wait *p = ctx;

	(void)loop;
	(void)res;
	(void)flags;
	p->nop.calls++;
	/* The poll must still be waiting: nothing was readable before. */
	check_eq(p->poll.calls, 0);
	check_eq(write(p->fds[1], "x", 1), 1);
}

LOOP_TEST(poll_add_completes_when_the_file_becomes_ready, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct poll_wait p = { .left = 1 };
	struct io_uring_sqe *sqe;

	make_pipe(p.fds);
	p.poll.left = &p.left;
	sqe = get_sqe(loop, record_cqe, &p.poll);
	io_uring_prep_poll_add(sqe, p.fds[0], POLLIN);
	get_sqe(loop, poll_wait_write, &p);
	run_loop(loop);
	check_eq(p.nop.calls, 1);
	check_eq(p.poll.calls, 1);
	check(p.poll.res > 0 && (p.poll.res & POLLIN),
	      "poll completed with %d", p.poll.res);
	loop_free(loop);
	close(p.fds[0]);
	close(p.fds[1]);
}

LOOP_TEST(async_cancel_ends_a_pending_read_with_ecanceled, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen rd = { .res = 1 }, cancel = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 2;
	uint64_t user_data;
	char buf[16];
	int fds[2];

	make_pipe(fds);
	rd.left = &left;
	cancel.left = &left;
	sqe = get_sqe(loop, record_cqe, &rd);
	io_uring_prep_read(sqe, fds[0], buf, sizeof(buf), (uint64_t)-1);
	user_data = sqe->user_data;
	sqe = get_sqe(loop, record_cqe, &cancel);
	io_uring_prep_cancel64(sqe, user_data, 0);
	run_loop(loop);
	check_eq(rd.calls, 1);
	check_eq(cancel.calls, 1);
	check_eq(rd.res, -ECANCELED);
	check_eq(cancel.res, 0);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

LOOP_TEST(unsupported_opcode_completes_with_eopnotsupp_on_epoll,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen op = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 1;
	int fds[2];

	make_pipe(fds);
	op.left = &left;
	sqe = get_sqe(loop, record_cqe, &op);
	io_uring_prep_fsync(sqe, fds[1], 0);
	run_loop(loop);
	check_eq(op.calls, 1);
	/* io_uring runs it (an fsync of a pipe is -EINVAL there). */
	if (backend == LULL_BACKEND_EPOLL)
		check_eq(op.res, -EOPNOTSUPP);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

#define CHAIN_LENGTH 100u

static void chain_next(struct lull_loop *loop, int res, uint32_t flags,
		       void *ctx)
{
	unsigned *count = ctx;

	(void)flags;
	check_eq(res, 0);
	if (++*count == CHAIN_LENGTH)
		lull_loop_stop(loop);
	else
		get_sqe(loop, chain_next, count);
}

LOOP_TEST(callbacks_submit_a_chain_of_nops_without_delay, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	/* The default safety net: a stalled SQE would wait for it. */
	struct lull_loop *loop = loop_new(backend, 0);
	unsigned count = 0;
	bool stalled;

	get_sqe(loop, chain_next, &count);
	arm_watchdog(loop, 2 * SEC, &stalled);
	run_loop(loop);
	check(!stalled,
	      "only %u of %u NOPs completed in 2 s: an SQE queued by a "
	      "callback waited for something else to wake the loop",
	      count, CHAIN_LENGTH);
	check_eq(count, CHAIN_LENGTH);
	check_eq(loop_stats(loop).completions, CHAIN_LENGTH);
	loop_free(loop);
}

#define FLUSH_SQES 50u

static void submit_many(struct lull_loop *loop, int res, uint32_t flags,
			void *ctx)
{
	struct cqe_seen *c = ctx;

	(void)res;
	(void)flags;
	/* Far more than the 4 entries of the queue: it is flushed. */
	for (unsigned i = 0; i < FLUSH_SQES; i++)
		get_sqe(loop, record_cqe, c);
}

LOOP_TEST(sqe_flushes_a_full_queue_while_running_and_is_ebusy_before,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = {
		.backend = backend,
		.entries = 4,
		.safety_timeout_ns = 20 * MS,
	};
	struct lull_loop *loop = loop_new_cfg(&cfg);
	struct cqe_seen first = { 0 }, many = { 0 };
	struct io_uring_sqe *sqe;
	unsigned prepared = 1, left;
	int ret = 0;

	/*
	 * Before the first run nothing can be flushed: io_uring's queue of 4
	 * fills up (epoll's has no limit).
	 */
	get_sqe(loop, submit_many, &many);
	while (prepared < 8) {
		ret = lull_loop_sqe(loop, record_cqe, &first, &sqe);
		if (ret < 0)
			break;
		prepared++;
	}
	if (backend == LULL_BACKEND_EPOLL) {
		check_eq(ret, 0);
	} else {
		check_eq(ret, -EBUSY);
		check_eq(prepared, 4);
	}
	left = prepared - 1 + FLUSH_SQES;
	first.left = &left;
	many.left = &left;
	run_loop(loop);
	check_eq(first.calls, prepared - 1);
	check_eq(many.calls, FLUSH_SQES);
	check_eq(loop_stats(loop).completions, prepared + FLUSH_SQES);
	loop_free(loop);
}

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

LOOP_TEST(stop_cancels_sqes_in_flight_and_runs_their_callbacks,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct cqe_seen read1 = { 0 }, read2 = { 0 };
	struct __kernel_timespec ts;
	struct io_uring_sqe *sqe;
	unsigned fired = 0;
	char buf[8];
	int fds[2];

	make_pipe(fds);
	/* Two reads that would never complete: nothing is ever written. */
	sqe = get_sqe(loop, record_cqe, &read1);
	io_uring_prep_read(sqe, fds[0], buf, sizeof(buf), (uint64_t)-1);
	sqe = get_sqe(loop, record_cqe, &read2);
	io_uring_prep_read(sqe, fds[0], buf, sizeof(buf), (uint64_t)-1);
	check_eq(lull_loop_timer(loop, 60 * SEC, 0, must_not_fire, &fired,
				 NULL),
		 0);
	stop_after(loop, &ts, 10 * MS);
	run_loop(loop);
	check_eq(read1.calls, 1);
	check_eq(read1.res, -ECANCELED);
	check_eq(read2.calls, 1);
	check_eq(read2.res, -ECANCELED);
	check_eq(fired, 0);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

/* A read that re-arms itself on every completion, cancellation included. */
struct rearming_read {
	struct cqe_seen seen; /* first: record_cqe() takes it as its ctx */
	int fd;
	char buf[8];
};

static void rearm_read(struct lull_loop *loop, int res, uint32_t flags,
		       void *ctx)
{
	struct rearming_read *r = ctx;
	struct io_uring_sqe *sqe;

	record_cqe(loop, res, flags, &r->seen);
	if (r->seen.calls < 3) {
		sqe = get_sqe(loop, rearm_read, r);
		io_uring_prep_read(sqe, r->fd, r->buf, sizeof(r->buf),
				   (uint64_t)-1);
	}
}

LOOP_TEST(stop_also_cancels_sqes_that_callbacks_queue_while_stopping,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct rearming_read r = { .seen = { 0 } };
	struct __kernel_timespec ts;
	struct io_uring_sqe *sqe;
	int fds[2];

	make_pipe(fds);
	r.fd = fds[0];
	sqe = get_sqe(loop, rearm_read, &r);
	io_uring_prep_read(sqe, r.fd, r.buf, sizeof(r.buf), (uint64_t)-1);
	stop_after(loop, &ts, 10 * MS);
	run_loop(loop);
	/* Cancelled, re-armed, cancelled again, until it stopped re-arming. */
	check_eq(r.seen.calls, 3);
	check_eq(r.seen.res, -ECANCELED);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

LOOP_TEST(destroy_drops_queued_sqes_and_timers_without_calling_them,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct io_uring_sqe *sqe;
	unsigned calls = 0;
	char buf[8];
	int fds[2];

	make_pipe(fds);
	check_eq(lull_loop_timer(loop, 60 * SEC, 0, must_not_fire, &calls,
				 NULL),
		 0);
	check_eq(lull_loop_timer(loop, 60 * SEC, SEC, must_not_fire, &calls,
				 NULL),
		 0);
	/* Never submitted at all: */
	sqe = get_sqe(loop, must_not_run, &calls);
	io_uring_prep_read(sqe, fds[0], buf, sizeof(buf), (uint64_t)-1);
	loop_free(loop);
	check_eq(calls, 0);
	close(fds[0]);
	close(fds[1]);
}

/* A NOP's callback that cancels another context's requests, twice. */
struct cancel_call {
	void *target;
	int ret, again;
};

static void cancel_target(struct lull_loop *loop, int res, uint32_t flags,
			  void *ctx)
{
	struct cancel_call *cc = ctx;

	(void)res;
	(void)flags;
	cc->ret = lull_loop_cancel(loop, cc->target);
	/* Asked once each: a second call asks nothing more. */
	cc->again = lull_loop_cancel(loop, cc->target);
}

LOOP_TEST(cancel_ends_exactly_the_requests_of_one_context, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct cqe_seen a = { 0 }, b = { 0 };
	struct cancel_call cc = { .target = &a, .ret = 99, .again = 99 };
	struct io_uring_sqe *sqe;
	unsigned left = 3;
	char buf_a[2][8], buf_b[8];
	int pa[2], pb[2];

	make_pipe(pa);
	make_pipe(pb);
	check_eq(lull_loop_cancel(NULL, &a), -EINVAL);
	check_eq(lull_loop_cancel(loop, &a), 0); /* nothing in flight */

	/* Two reads with context a, one with b; a's can never complete. */
	a.left = &left;
	b.left = &left;
	for (int i = 0; i < 2; i++) {
		sqe = get_sqe(loop, record_cqe, &a);
		io_uring_prep_read(sqe, pa[0], buf_a[i], 8, (uint64_t)-1);
	}
	sqe = get_sqe(loop, record_cqe, &b);
	io_uring_prep_read(sqe, pb[0], buf_b, 8, (uint64_t)-1);
	/* a's are cancelled from a callback, as a server closing a client */
	get_sqe(loop, cancel_target, &cc);
	/* b's completes for real; the third completion stops the loop. */
	check_eq(write(pb[1], "x", 1), 1);
	run_loop(loop);
	check_eq(cc.ret, 2);
	check_eq(cc.again, 0);
	check_eq(a.calls, 2);
	check_eq(a.res, -ECANCELED);
	check_eq(b.calls, 1);
	check_eq(b.res, 1);
	loop_free(loop);
	close(pa[0]);
	close(pa[1]);
	close(pb[0]);
	close(pb[1]);
}

/* ========================================================================
 * Timers
 */

struct timer_seen {
	struct lull_loop_timer *self;
	unsigned fired;
	unsigned cancel_at; /* cancel self at this count */
	int cancel_ret;
	uint64_t at_ns[16];
	struct __kernel_timespec ts;
};

static void timer_count(struct lull_loop *loop, void *ctx)
{
	struct timer_seen *t = ctx;

	(void)loop;
	if (t->fired < ARRAY_SIZE(t->at_ns))
		t->at_ns[t->fired] = now_ns();
	t->fired++;
}

LOOP_TEST(one_shot_timer_fires_once, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct timer_seen t = { 0 };
	struct __kernel_timespec ts;
	uint64_t start = now_ns();

	check_eq(lull_loop_timer(loop, 5 * MS, 0, timer_count, &t, &t.self),
		 0);
	check(t.self != NULL, "no timer handle");
	stop_after(loop, &ts, 60 * MS);
	run_loop(loop);
	check_eq(t.fired, 1);
	check_op(t.at_ns[0] - start, >=, 5 * MS);
	loop_free(loop);
}

static void timer_cancel_self(struct lull_loop *loop, void *ctx)
{
	struct timer_seen *t = ctx;

	timer_count(loop, t);
	if (t->fired == t->cancel_at) {
		/* Stop later: the timer must stay quiet meanwhile. */
		stop_after(loop, &t->ts, 30 * MS);
		t->cancel_ret = lull_loop_timer_cancel(loop, t->self);
	}
}

LOOP_TEST(repeating_timer_stops_when_cancelled_from_its_own_callback,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct timer_seen t = { .cancel_at = 4, .cancel_ret = 1 };

	check_eq(lull_loop_timer(loop, 2 * MS, 2 * MS, timer_cancel_self, &t,
				 &t.self),
		 0);
	run_loop(loop);
	check_eq(t.fired, 4);
	check_eq(t.cancel_ret, 0);
	for (unsigned i = 1; i < 4; i++)
		check_op(t.at_ns[i] - t.at_ns[i - 1], >=, 2 * MS);
	loop_free(loop);
}

struct cancel_other {
	struct timer_seen t;
	unsigned fired_at_cancel;
};

static void cancel_from_nop(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	struct cancel_other *c = ctx;

	(void)res;
	(void)flags;
	c->fired_at_cancel = c->t.fired;
	c->t.cancel_ret = lull_loop_timer_cancel(loop, c->t.self);
	stop_after(loop, &c->t.ts, 30 * MS);
}

static void timer_then_nop(struct lull_loop *loop, void *ctx)
{
	struct cancel_other *c = ctx;

	timer_count(loop, &c->t);
	if (c->t.fired == 3)
		get_sqe(loop, cancel_from_nop, c);
}

LOOP_TEST(repeating_timer_stops_when_cancelled_from_another_callback,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cancel_other c = { .t.cancel_ret = 1 };

	check_eq(lull_loop_timer(loop, 2 * MS, 2 * MS, timer_then_nop, &c,
				 &c.t.self),
		 0);
	run_loop(loop);
	check_op(c.fired_at_cancel, >=, 3);
	check_eq(c.t.cancel_ret, 0);
	check_eq(c.t.fired, c.fired_at_cancel);
	loop_free(loop);
}

struct cancel_checks {
	struct lull_loop_timer *fired, *pending;
	int fired_ret, null_ret, pending_ret, again_ret;
	unsigned pending_calls;
	struct timer_seen t;
};

static void cancel_checks_run(struct lull_loop *loop, int res,
			      uint32_t flags, void *ctx)
{
	struct cancel_checks *c = ctx;

	(void)res;
	(void)flags;
	c->fired_ret = lull_loop_timer_cancel(loop, c->fired);
	c->null_ret = lull_loop_timer_cancel(loop, NULL);
	c->pending_ret = lull_loop_timer_cancel(loop, c->pending);
	c->again_ret = lull_loop_timer_cancel(loop, c->pending);
	/* Past the cancelled timer's time: it must not fire. */
	stop_after(loop, &c->t.ts, 40 * MS);
}

LOOP_TEST(cancel_of_a_fired_one_shot_is_enoent, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cancel_checks c = { .fired_ret = 1, .pending_ret = 1 };
	struct __kernel_timespec ts;
	struct io_uring_sqe *sqe;

	check_eq(lull_loop_timer(loop, MS, 0, timer_count, &c.t, &c.fired), 0);
	check_eq(lull_loop_timer(loop, 25 * MS, 0, must_not_fire,
				 &c.pending_calls, &c.pending),
		 0);
	/* After the first timer fired, before the second: */
	sqe = get_sqe(loop, cancel_checks_run, &c);
	ts.tv_sec = 0;
	ts.tv_nsec = (long long)(10 * MS);
	io_uring_prep_timeout(sqe, &ts, 0, 0);
	run_loop(loop);
	check_eq(c.t.fired, 1);
	check_eq(c.fired_ret, -ENOENT);
	check_eq(c.null_ret, -EINVAL);
	check_eq(c.pending_ret, 0);
	check_eq(c.again_ret, -ENOENT);
	check_eq(c.pending_calls, 0);
	loop_free(loop);
}

/* ========================================================================
 * Signals
 */

struct sig_seen {
	pthread_t loop_thread;
	_Atomic unsigned count;
	int signos[4];
	bool off_thread;
};

static void sig_record(struct lull_loop *loop, int signo, void *ctx)
{
	struct sig_seen *s = ctx;
	unsigned n = atomic_load(&s->count);

	if (n < ARRAY_SIZE(s->signos))
		s->signos[n] = signo;
	if (!pthread_equal(pthread_self(), s->loop_thread))
		s->off_thread = true;
	if (n + 1 == 2)
		lull_loop_stop(loop);
	atomic_store_explicit(&s->count, n + 1, memory_order_release);
}

static void signal_twice_action(struct helper *h)
{
	struct sig_seen *s = h->ctx;

	pthread_kill(h->loop_thread, SIGUSR1);
	wait_at_least(&s->count, 1);
	/* The first one was read: this one is a second delivery. */
	if (!wait_sleeping(h->loop_tid))
		h->slept = false;
	pthread_kill(h->loop_thread, SIGUSR1);
}

LOOP_TEST(signals_reach_the_callback_on_the_loop_thread, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct sig_seen s = { .loop_thread = pthread_self() };
	int signos[] = { SIGUSR1 };
	sigset_t set, old;
	struct helper h;

	/*
	 * Blocked here before any helper thread exists, so that they
	 * inherit it; and sent to the loop's thread only, so that no other
	 * thread of the test process can take it.
	 */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	check_eq(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
	check_eq(lull_loop_signals(loop, signos, 1, sig_record, &s), 0);
	check_eq(lull_loop_signals(loop, signos, 1, sig_record, &s), -EBUSY);

	helper_start(&h, loop, signal_twice_action, &s);
	run_loop(loop);
	helper_join(&h);
	check_eq(atomic_load(&s.count), 2);
	check_eq(s.signos[0], SIGUSR1);
	check_eq(s.signos[1], SIGUSR1);
	check(!s.off_thread, "a signal callback ran off the loop's thread");
	check_eq(loop_stats(loop).safety_timeouts, 0);
	loop_free(loop);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* ========================================================================
 * A loop kept busy by a ring still runs timers, I/O and signals
 */

struct busy {
	struct lull_loop *loop;
	struct lull_producer *prod;
	uint32_t seq;
	uint64_t deadline_ns;
	bool timer_fired, timeout_done, signal_seen, gave_up, stopped;
	int write_ret;
	unsigned epipes;  /* writes refused because the stop shut the ring */
	unsigned poisons;
	struct __kernel_timespec ts;
};

static void busy_maybe_stop(struct busy *b)
{
	if (b->timer_fired && b->timeout_done && b->signal_seen &&
	    !b->stopped) {
		b->stopped = true;
		lull_loop_stop(b->loop);
	}
}

/*
 * Each record writes the next one into its own ring, and the batch is 1:
 * the ring is never empty after a pass, so the loop never parks.  The
 * stop shuts the ring down with one record in it: that record's write is
 * -EPIPE, then the poison comes.
 */
static int busy_handler(const struct lull_record *record, void *ctx)
{
	struct busy *b = ctx;
	int ret;

	if (record->type < 1) {
		if (!is_poison(record) || b->poisons)
			b->write_ret = -EPROTO;
		b->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (b->poisons)
		b->write_ret = -EPROTO; /* a record after the poison */
	if (b->write_ret == 0) {
		ret = write_rec(b->prod, false, 0, b->seq + 1);
		if (ret == 0 && ++b->seq == 10)
			pthread_kill(pthread_self(), SIGUSR1);
		else if (ret == -EPIPE && (b->stopped || b->gave_up))
			b->epipes++;
		else if (ret)
			b->write_ret = ret;
	}
	if (!b->gave_up && !b->stopped && (b->seq & 1023) == 0 &&
	    now_ns() > b->deadline_ns) {
		b->gave_up = true;
		lull_loop_stop(b->loop);
	}
	return LULL_READ_CONTINUE;
}

static void busy_timer(struct lull_loop *loop, void *ctx)
{
	struct busy *b = ctx;

	(void)loop;
	b->timer_fired = true;
	busy_maybe_stop(b);
}

static void busy_timeout(struct lull_loop *loop, int res, uint32_t flags,
			 void *ctx)
{
	struct busy *b = ctx;

	(void)loop;
	(void)flags;
	check_eq(res, -ETIME);
	b->timeout_done = true;
	busy_maybe_stop(b);
}

static void busy_signal(struct lull_loop *loop, int signo, void *ctx)
{
	struct busy *b = ctx;

	(void)loop;
	check_eq(signo, SIGUSR1);
	b->signal_seen = true;
	busy_maybe_stop(b);
}

LOOP_TEST(timers_sqes_and_signals_run_while_a_ring_keeps_the_loop_busy,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	int signos[] = { SIGUSR1 };
	struct io_uring_sqe *sqe;
	struct busy b = { 0 };
	sigset_t set, old;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	check_eq(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
	b.loop = loop_new(backend, 0);
	b.prod = producer_new(ring);
	check_eq(lull_loop_signals(b.loop, signos, 1, busy_signal, &b), 0);
	check_eq(lull_loop_timer(b.loop, 5 * MS, 0, busy_timer, &b, NULL), 0);
	sqe = get_sqe(b.loop, busy_timeout, &b);
	b.ts.tv_nsec = (long long)(5 * MS);
	io_uring_prep_timeout(sqe, &b.ts, 0, 0);
	check_eq(write_rec(b.prod, false, 0, 0), 0);
	check_eq(lull_loop_attach(b.loop, ring, busy_handler, &b, 1), 0);
	b.deadline_ns = now_ns() + SEC;
	run_loop(b.loop);

	check_eq(b.write_ret, 0);
	check(!b.gave_up,
	      "after 1 s and %u records: timer %s, TIMEOUT SQE %s, signal %s",
	      b.seq, b.timer_fired ? "fired" : "starved",
	      b.timeout_done ? "completed" : "starved",
	      b.signal_seen ? "delivered" : "starved");
	check_op(loop_stats(b.loop).parks, ==, 0);
	check_eq(b.epipes, 1);
	check_eq(b.poisons, 1);
	check_ring_ended(b.loop, ring, b.prod, false);
	check_eq(lull_producer_detach(b.prod), 0);
	loop_free(b.loop);
	check_eq(lull_ring_destroy(ring), 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

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
	int write_ret;
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
			d->write_ret = -EPROTO;
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
	check_eq(pthread_join(producer, NULL), 0);
	check(d.slept, "the loop's thread never went to sleep");
	check_eq(d.write_ret, 0);
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

/* --- timeouts at their extremes --------------------------------------- */

struct extreme_timer {
	unsigned fired;
	bool far_fired;
};

static void extreme_fired(struct lull_loop *loop, void *ctx)
{
	struct extreme_timer *t = ctx;

	(void)loop;
	t->fired++;
}

static void far_timer_fired(struct lull_loop *loop, void *ctx)
{
	(void)loop;
	*(bool *)ctx = true;
}

/*
 * Every duration a loop takes is converted without overflow: a safety net
 * of 1 ns, INT64_MAX or UINT64_MAX, and timers of 0, 1 ns, INT64_MAX and
 * UINT64_MAX.  The short ones fire, the long ones never do, and an idle
 * loop with a huge safety net sleeps instead of spinning (it spun with
 * UINT64_MAX on epoll: 2.77 million parks in 2 s).
 */
LOOP_TEST(timeouts_of_0_1ns_int64_max_and_uint64_max_are_converted_safely,
	  .timeout = 10)
{
	static const uint64_t nets[] = { 1, INT64_MAX, UINT64_MAX };
	static const uint64_t delays[] = { 0, 1 };
	enum lull_backend backend = use_backend(backendp);
	struct extreme_timer t = { 0 };
	struct lull_loop_stats st;
	struct __kernel_timespec ts;
	struct lull_loop *loop;
	bool far_fired = false;

	for (size_t n = 0; n < ARRAY_SIZE(nets); n++) {
		loop = loop_new(backend, nets[n]);
		t.fired = 0;
		for (size_t d = 0; d < ARRAY_SIZE(delays); d++)
			check_eq(lull_loop_timer(loop, delays[d], 0,
						 extreme_fired, &t, NULL),
				 0);
		check_eq(lull_loop_timer(loop, INT64_MAX, 0, far_timer_fired,
					 &far_fired, NULL),
			 0);
		check_eq(lull_loop_timer(loop, UINT64_MAX, 0, far_timer_fired,
					 &far_fired, NULL),
			 0);
		/* 300 ms idle (nothing but the far timers), then stop. */
		stop_after(loop, &ts, 300 * MS);
		run_loop(loop);
		st = loop_stats(loop);
		check(t.fired == 2, "safety net %" PRIu64 " ns: %u of the "
		      "2 short timers fired", nets[n], t.fired);
		check(!far_fired, "safety net %" PRIu64 " ns: a timer of "
		      "INT64_MAX or UINT64_MAX ns fired", nets[n]);
		if (nets[n] != 1)
			check(st.parks <= 10 && st.safety_timeouts == 0,
			      "safety net %" PRIu64 " ns: %" PRIu64 " parks, "
			      "%" PRIu64 " safety-net expiries in 300 ms "
			      "idle: the loop spins",
			      nets[n], st.parks, st.safety_timeouts);
		loop_free(loop);
	}
}
