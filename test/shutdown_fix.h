/* SPDX-License-Identifier: MIT */
/*
 * shutdown_fix.h - the fixture of the suites of how rings end
 * (test_shutdown_*.c, test_producer_thread.c).
 *
 * They cover (lull/ring.h, "Shutdown"): graceful and immediate shutdown,
 * fatal records, the last detach, producers bound to their thread, a consumer
 * that leaves with lull_ring_close(), and what lull_loop_stop() does to the
 * rings of a loop.
 *
 * What every test checks, through struct ledger (what the producers
 * committed, in ring order) and struct sink (what the consumer was handed):
 * every record committed before the shutdown arrives, in order, with its
 * content intact; the fatal record, when one was reported, arrives once,
 * right before the poison; the poison arrives exactly once and nothing
 * after it; every later read is -EPIPE; writes after the shutdown fail with
 * -EPIPE.
 *
 * The consumer runs in one of eight ways (enum way): polling with
 * lull_ring_read or lull_ring_peek/release, blocking in lull_ring_wait,
 * parked on an io_uring of its own (futex or eventfd), or as the handler of
 * a lull_loop on each of its backends (uring-futex, uring-eventfd, epoll).
 * A backend the kernel lacks is skipped with the reason.
 *
 * "Running" means the consumer is inside its record handler at the moment
 * of the shutdown (the handler holds at a gate until the test lets it go).
 * "Parked" means the consumer thread is asleep in the kernel: the test
 * waits until the thread's state in /proc is S and the ring's parks counter
 * stands still (and, for a loop, whose counter moves when a park ends,
 * checks afterwards that a park ended after the shutdown).  Sleeps appear
 * only as the short naps of those polls; every other hand-off is a condvar
 * or an atomic.
 *
 * Threads never assert: a consumer or producer thread notes its first
 * failure in its struct, and the test thread asserts on it after a timed
 * wait.  Parks use a 30 s safety net, so that a lost shutdown wake-up shows
 * as a consumer that never finishes (our 5 s deadline) instead of being
 * rescued; the tests of a producer thread ending around its commit's
 * wake-up park with no safety net at all.  Every test also has Criterion's
 * .timeout watchdog, at 20 s: well past any one of our waits, because
 * Criterion 2.4's runner gives up on the whole suite ("The test has already
 * ended, invalid state 'timeout'") when a test that failed near its
 * timeout is still exiting.
 *
 * In the AddressSanitizer build, frames that pthread_cancel unwinds carry
 * no redzones (UNWOUND), and loop teardowns check for leaks on the spot.
 */
#ifndef LULL_TEST_SHUTDOWN_FIX_H
#define LULL_TEST_SHUTDOWN_FIX_H

#include "shutdown_sink.h"
#include "topo_test.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

/* ------------------------------------------------------------------------
 * Waiting: deadlines, timed joins, leaks
 */

/* Join @thread, failing the test when it has not ended within @ms. */
static void *join_within(pthread_t thread, unsigned ms, const char *what)
{
	void *ret = NULL;
	int err = thread_join_within(thread, ms + 1000, &ret);

	cr_assert_eq(err, 0, "%s: thread still running after %u ms (%s)",
		     what, ms, strerror(err));
	return ret;
}

/*
 * In the AddressSanitizer build, fail when anything the test and the
 * library allocated is unreachable now (every test runs in a process of
 * its own).  Elsewhere a no-op.
 */
static void expect_no_leaks(const char *what)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
		     "%s: memory leaked (see the LeakSanitizer report)", what);
#else
	(void)what;
#endif
}

/* ------------------------------------------------------------------------
 * The consumer, in each of its ways
 */

enum way {
	WAY_READ,
	WAY_PEEK,
	WAY_WAIT,
	WAY_URING_FUTEX,
	WAY_URING_EVENTFD,
	WAY_LOOP_FUTEX,
	WAY_LOOP_EVENTFD,
	WAY_LOOP_EPOLL,
	WAYS
};

static const char *const way_name[WAYS] = {
	"lull_ring_read", "lull_ring_peek", "lull_ring_wait",
	"own io_uring (futex)", "own io_uring (eventfd)",
	"loop (uring-futex)", "loop (uring-eventfd)", "loop (epoll)",
};

static bool way_parks(enum way w)
{
	return w >= WAY_WAIT;
}

static bool way_is_uring(enum way w)
{
	return w == WAY_URING_FUTEX || w == WAY_URING_EVENTFD;
}

static bool way_is_loop(enum way w)
{
	return w >= WAY_LOOP_FUTEX;
}

struct consumer {
	enum way way;
	const char *what; /* the case, for messages */
	struct lull_ring *ring;
	unsigned limit;
	struct sink sink;
	pthread_t thread;
	bool started;
	_Atomic pid_t tid;
	struct flag done;
	char why[240]; /* the consumer thread's first failure */
	atomic_uint handled;
	atomic_uint poisoned;
	/* The handler holds at user record gate_seq of producer 0. */
	_Atomic uint32_t gate_seq;
	struct flag gate; /* 1: held there, 2: let go */
	struct io_uring uring;
	bool has_uring;
	struct lull_loop *loop;
	int run_ret;
	/* lull_ring_wait with no timeout (else DEADLINE_MS, which fails) */
	bool wait_forever;
};

static void consumer_fail(struct consumer *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

static void consumer_expect(struct consumer *c, int got, int want,
			    const char *call)
{
	if (got != want)
		consumer_fail(c, "%s returned %d (%s), expected %d", call, got,
			      lull_strerror(got), want);
}

static int consumer_take(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;
	struct stamp st;

	sink_take(&c->sink, rec);
	if (rec->type == LULL_TYPE_POISON)
		atomic_fetch_add_explicit(&c->poisoned, 1,
					  memory_order_release);
	atomic_fetch_add_explicit(&c->handled, 1, memory_order_release);
	if (rec->type > 0 && rec->len >= sizeof(st)) {
		memcpy(&st, rec->data, sizeof(st));
		if (st.producer == 0 &&
		    st.seq == atomic_load_explicit(&c->gate_seq,
						   memory_order_relaxed)) {
			flag_set(&c->gate, 1);
			if (!flag_wait(&c->gate, 2, DEADLINE_MS))
				consumer_fail(c, "never let go at the gate");
		}
	}
	return LULL_READ_CONTINUE;
}

static int consumer_take_in_loop(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;

	consumer_take(rec, ctx);
	/* The ring is detached after its poison: nothing else to wait for. */
	if (rec->type == LULL_TYPE_POISON)
		lull_loop_stop(c->loop);
	return LULL_READ_CONTINUE;
}

static void consume_read(struct consumer *c)
{
	uint64_t idle_since = now_ms();
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_read(c->ring, consumer_take, c, c->limit);
		if (ret == -EAGAIN) {
			if (now_ms() - idle_since > DEADLINE_MS) {
				consumer_fail(c, "no poison after %u ms idle",
					      DEADLINE_MS);
				return;
			}
			sched_yield();
			continue;
		}
		if (ret <= 0) {
			consumer_fail(c, "lull_ring_read returned %d", ret);
			return;
		}
		idle_since = now_ms();
	}
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the poison");
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 1),
			-EPIPE, "a second lull_ring_read after the poison");
}

static void consume_peek(struct consumer *c)
{
	uint64_t idle_since = now_ms();
	struct lull_record a, b;
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_peek(c->ring, &a);
		if (ret == -EAGAIN) {
			if (now_ms() - idle_since > DEADLINE_MS) {
				consumer_fail(c, "no poison after %u ms idle",
					      DEADLINE_MS);
				return;
			}
			sched_yield();
			continue;
		}
		if (ret < 0) {
			consumer_fail(c, "lull_ring_peek returned %d", ret);
			return;
		}
		/* Peeking again hands the same record until the release. */
		ret = lull_ring_peek(c->ring, &b);
		if (ret != 0 || a.data != b.data || a.len != b.len ||
		    a.type != b.type) {
			consumer_fail(c, "a second peek of a record of type %d "
					 "returned %d, type %d",
				      a.type, ret, b.type);
			return;
		}
		consumer_take(&a, c);
		consumer_expect(c, lull_ring_release(c->ring), 0,
				"lull_ring_release");
		idle_since = now_ms();
	}
	consumer_expect(c, lull_ring_peek(c->ring, &a), -EPIPE,
			"lull_ring_peek after the poison");
	consumer_expect(c, lull_ring_peek(c->ring, &a), -EPIPE,
			"a second lull_ring_peek after the poison");
	consumer_expect(c, lull_ring_release(c->ring), -EINVAL,
			"lull_ring_release after the poison");
}

static void consume_wait(struct consumer *c)
{
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_wait(c->ring,
				     c->wait_forever
					     ? -1
					     : (int64_t)DEADLINE_MS * 1000 *
						       1000);
		if (ret < 0) {
			consumer_fail(c, "lull_ring_wait returned %d (%s)", ret,
				      lull_strerror(ret));
			return;
		}
		/* Readable: a read hands at least one record. */
		ret = lull_ring_read(c->ring, consumer_take, c, c->limit);
		if (ret <= 0) {
			consumer_fail(c, "lull_ring_read after a wait returned "
					 "%d", ret);
			return;
		}
	}
	consumer_expect(c, lull_ring_wait(c->ring, -1), -EPIPE,
			"lull_ring_wait after the poison");
	consumer_expect(c, lull_ring_wait(c->ring, 0), -EPIPE,
			"lull_ring_wait(0) after the poison");
}

static void consume_uring(struct consumer *c)
{
	struct __kernel_timespec ts = { .tv_sec = DEADLINE_MS / 1000 };
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	bool ours;
	int ret;

	ret = lull_uring_park_arm(c->ring, &c->uring, URING_TAG);
	if (ret == 1)
		ret = lull_uring_park_drain(c->ring, &c->uring, consumer_take,
					    c, c->limit);
	/* -EPIPE from the drain that delivered the poison: the end. */
	if (ret < 0 && !(ret == -EPIPE && c->sink.poisons)) {
		consumer_fail(c, "arming the park returned %d", ret);
		return;
	}
	while (!c->sink.poisons) {
		ret = io_uring_submit_and_wait_timeout(&c->uring, &cqe, 1, &ts,
						       NULL);
		if (ret == -ETIME) {
			consumer_fail(c, "no CQE for %u ms", DEADLINE_MS);
			return;
		}
		if (ret < 0 && ret != -EINTR) {
			consumer_fail(c, "io_uring_submit_and_wait_timeout "
					 "returned %d", ret);
			return;
		}
		seen = 0;
		ours = false;
		io_uring_for_each_cqe(&c->uring, head, cqe) {
			seen++;
			if (lull_uring_park_cqe(c->ring, cqe) == 1)
				ours = true;
		}
		io_uring_cq_advance(&c->uring, seen);
		if (!ours)
			continue;
		ret = lull_uring_park_drain(c->ring, &c->uring, consumer_take,
					    c, c->limit);
		/*
		 * The drain that delivers the poison says -EPIPE: nothing
		 * is armed, and no CQE will come.  Before the poison, any
		 * error is one.
		 */
		if (ret == -EPIPE && !c->sink.poisons) {
			consumer_fail(c, "lull_uring_park_drain returned "
					 "-EPIPE without the poison");
			return;
		}
		if (ret < 0 && ret != -EPIPE) {
			consumer_fail(c, "lull_uring_park_drain returned %d "
					 "before the poison", ret);
			return;
		}
	}
	consumer_expect(c,
			lull_uring_park_drain(c->ring, &c->uring,
					      consumer_take, c, c->limit),
			-EPIPE, "lull_uring_park_drain after the poison");
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the poison");
}

static void consume_loop(struct consumer *c)
{
	c->run_ret = lull_loop_run(c->loop);
	if (c->run_ret != 0)
		consumer_fail(c, "lull_loop_run returned %d", c->run_ret);
	if (!c->sink.poisons)
		consumer_fail(c, "lull_loop_run returned without the poison");
	/* Detached after the poison: the handle reads again, and says so. */
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the loop's poison");
	consumer_expect(c, lull_ring_wait(c->ring, 0), -EPIPE,
			"lull_ring_wait after the loop's poison");
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;

	atomic_store_explicit(&c->tid, gettid(), memory_order_release);
	switch (c->way) {
	case WAY_READ:
		consume_read(c);
		break;
	case WAY_PEEK:
		consume_peek(c);
		break;
	case WAY_WAIT:
		consume_wait(c);
		break;
	case WAY_URING_FUTEX:
	case WAY_URING_EVENTFD:
		consume_uring(c);
		break;
	default:
		consume_loop(c);
		break;
	}
	flag_set(&c->done, 1);
	return NULL;
}

static enum lull_backend loop_backend(enum way w)
{
	return w == WAY_LOOP_FUTEX	   ? LULL_BACKEND_URING_FUTEX
	       : w == WAY_LOOP_EVENTFD ? LULL_BACKEND_URING_EVENTFD
				       : LULL_BACKEND_EPOLL;
}

/* Skip the test when this kernel cannot run @way. */
static void skip_unless_supported(enum way w)
{
	enum lull_backend b;
	int ret;

	if (w == WAY_URING_FUTEX)
		b = LULL_BACKEND_URING_FUTEX;
	else if (w == WAY_URING_EVENTFD)
		b = LULL_BACKEND_URING_EVENTFD;
	else if (way_is_loop(w))
		b = loop_backend(w);
	else
		return;
	ret = lull_backend_supported(b);
	if (ret < 0)
		cr_skip_test("%s: %s", lull_backend_name(b),
			     lull_strerror(ret));
}

/*
 * Set up the consumer side of @ring for @way: the park's safety net, and
 * the io_uring or loop it parks on.  Skips the test where the kernel lacks
 * the backend.
 */
static void consumer_init(struct consumer *c, struct lull_ring *ring,
			  enum way way, const char *what)
{
	struct lull_park_config park = { .safety_timeout_ns = SAFETY_NS };
	struct lull_loop_config cfg = { .safety_timeout_ns = SAFETY_NS };
	int ret;

	memset(c, 0, sizeof(*c));
	c->way = way;
	c->what = what;
	c->ring = ring;
	c->limit = 64;
	flag_init(&c->done);
	flag_init(&c->gate);
	atomic_init(&c->handled, 0);
	atomic_init(&c->poisoned, 0);
	atomic_init(&c->gate_seq, UINT32_MAX);
	atomic_init(&c->tid, 0);
	skip_unless_supported(way);
	cr_assert_eq(lull_ring_park_config(ring, &park), 0);
	if (way_is_uring(way)) {
		/* Read once, at the first arm, before any thread starts. */
		setenv("LULL_BACKEND",
		       way == WAY_URING_FUTEX ? "uring-futex" : "uring-eventfd",
		       1);
		ret = io_uring_queue_init(8, &c->uring, 0);
		if (ret == -ENOSYS || ret == -EPERM)
			cr_skip_test("io_uring: %s", strerror(-ret));
		cr_assert_eq(ret, 0, "io_uring_queue_init: %s",
			     strerror(-ret));
		c->has_uring = true;
	} else if (way_is_loop(way)) {
		cfg.backend = loop_backend(way);
		ret = lull_loop_create(&c->loop, &cfg);
		cr_assert_eq(ret, 0, "lull_loop_create(%s): %s",
			     lull_backend_name(cfg.backend),
			     lull_strerror(ret));
		cr_assert_eq(lull_loop_attach(c->loop, ring,
					      consumer_take_in_loop, c,
					      c->limit),
			     0);
	}
}

static void consumer_start(struct consumer *c)
{
	cr_assert_eq(pthread_create(&c->thread, NULL, consumer_main, c), 0);
	c->started = true;
	while (!atomic_load_explicit(&c->tid, memory_order_acquire))
		sched_yield();
}

/* Wait for the consumer to end (poison and checks done), then join it. */
static void consumer_finish(struct consumer *c)
{
	bool done = flag_wait(&c->done, 1, DEADLINE_MS);

	cr_assert(done, "%s: consumer (%s) not finished after %u ms: %u "
			"records handed, %u poison%s%s%s",
		  c->what, way_name[c->way], DEADLINE_MS,
		  atomic_load(&c->handled), atomic_load(&c->poisoned),
		  way_is_loop(c->way) && atomic_load(&c->poisoned)
			  ? " (lull_loop_run never returned after the poison)"
			  : "",
		  c->why[0] ? "; " : "", c->why);
	join_within(c->thread, DEADLINE_MS, c->what);
	c->started = false;
	cr_assert(!c->why[0], "%s: consumer (%s): %s", c->what,
		  way_name[c->way], c->why);
}

/* Wait until the consumer has been handed @n records. */
static void consumer_wait_handled(struct consumer *c, unsigned n)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;

	while (atomic_load_explicit(&c->handled, memory_order_acquire) < n) {
		cr_assert_lt(now_ms(), deadline,
			     "%s: consumer (%s) handed %u records, waiting "
			     "for %u%s%s",
			     c->what, way_name[c->way],
			     atomic_load(&c->handled), n,
			     c->why[0] ? ": " : "", c->why);
		nap_us(100);
	}
}

/*
 * Wait until the consumer is parked: the ring's park word says it sleeps
 * (a futex or eventfd park announced, before and after the nap), its
 * thread asleep in the kernel, and the ring's park counters standing
 * still across a short nap (the nap is what lets us see that).  The state
 * 'S' alone would also be a thread blocked anywhere else (a lock, a
 * page-in); the park word is set only by a park.  For the parking ways other
 * than a loop, the parks counter, which counts a park when it begins, must
 * also have moved past @after.  Returns the parks counter.
 */
static uint64_t consumer_wait_parked(struct consumer *c, uint64_t after)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;
	struct lull_ring_stats a, b;
	pid_t tid = atomic_load(&c->tid);
	uint32_t wa, wb;
	char sa, sb;

	cr_assert(way_parks(c->way));
	for (;;) {
		cr_assert_eq(lull_ring_stats(c->ring, &a), 0);
		wa = ring_park_word(c->ring);
		sa = proc_thread_state(tid);
		nap_us(2000);
		cr_assert_eq(lull_ring_stats(c->ring, &b), 0);
		wb = ring_park_word(c->ring);
		sb = proc_thread_state(tid);
		if (wa != RING_PARK_AWAKE && wb != RING_PARK_AWAKE &&
		    sa == 'S' && sb == 'S' && a.parks == b.parks &&
		    a.park_cancels == b.park_cancels &&
		    (way_is_loop(c->way) || b.parks > after))
			return b.parks;
		cr_assert_lt(now_ms(), deadline,
			     "%s: consumer (%s) not parked: park word %u, "
			     "thread state %c, parks %llu (after %llu)%s%s",
			     c->what, way_name[c->way], (unsigned)wb,
			     sb ? sb : '?',
			     (unsigned long long)b.parks,
			     (unsigned long long)after, c->why[0] ? "; " : "",
			     c->why);
	}
}

/* The consumer thread was handed the poison (it may still be checking). */
static unsigned consumer_poisoned(struct consumer *c)
{
	return atomic_load_explicit(&c->poisoned, memory_order_acquire);
}

/*
 * Tear down the consumer side and destroy the ring; every producer of the
 * ring must be detached.  The destroy must succeed: for a loop, the ring
 * was detached by the loop itself after its poison.
 */
static void consumer_fini(struct consumer *c)
{
	struct __kernel_timespec ts = { .tv_sec = DEADLINE_MS / 1000 };
	struct io_uring_cqe *cqe;
	int ret;

	if (c->started)
		join_within(c->thread, DEADLINE_MS, c->what);
	if (c->loop) {
		cr_assert_eq(lull_loop_destroy(c->loop), 0);
		c->loop = NULL;
		expect_no_leaks(c->what);
	}
	if (c->has_uring) {
		/* The park's CQEs must be in before the handle goes. */
		lull_uring_park_cancel(c->ring, &c->uring);
		io_uring_submit(&c->uring);
		while ((ret = lull_ring_destroy(c->ring)) == -EBUSY) {
			cr_assert_eq(io_uring_wait_cqe_timeout(&c->uring, &cqe,
							       &ts),
				     0, "%s: the park's CQEs never came",
				     c->what);
			lull_uring_park_cqe(c->ring, cqe);
			io_uring_cqe_seen(&c->uring, cqe);
		}
		io_uring_queue_exit(&c->uring);
		c->has_uring = false;
	} else {
		ret = lull_ring_destroy(c->ring);
	}
	cr_assert_eq(ret, 0, "%s: lull_ring_destroy returned %d", c->what,
		     ret);
	c->ring = NULL;
}

/* ------------------------------------------------------------------------
 * The fixture: a ring, producers on the test thread, a consumer thread
 */

struct fix {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod[MAX_PRODUCERS];
	unsigned nprod;
	struct ledger ledger;
	struct consumer c;
	char what[160];
};

static void fix_init(struct fix *f, const struct topo *t, enum way way,
		     unsigned nprod, const char *fmt, ...)
{
	va_list ap;

	memset(f, 0, sizeof(*f));
	f->t = t;
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
	cr_assert_eq(lull_ring_create(&f->ring, RING_CAP, t->flags), 0);
	f->nprod = nprod;
	for (unsigned i = 0; i < nprod; i++)
		cr_assert_eq(lull_producer_attach(f->ring, 0, &f->prod[i]), 0,
			     "%s: attach", f->what);
	consumer_init(&f->c, f->ring, way, f->what);
}

/* Send the next record of producer @i; on success it must arrive. */
static int fix_send(struct fix *f, unsigned i)
{
	uint32_t seq = f->ledger.next_seq[i];
	int ret = stamp_send(f->t, f->prod[i], i, seq);

	if (ret == 0) {
		ledger_add(&f->ledger, i, seq);
		f->ledger.next_seq[i]++;
	}
	return ret;
}

static void fix_send_ok(struct fix *f, unsigned i, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		cr_assert_eq(fix_send(f, i), 0, "%s: write %u of producer %u",
			     f->what, k, i);
}

/* Claim the next record of producer @i, in the ledger until aborted. */
static void fix_claim(struct fix *f, unsigned i)
{
	uint32_t seq = f->ledger.next_seq[i];

	cr_assert_eq(stamp_claim(f->t, f->prod[i], i, seq), 0,
		     "%s: claim", f->what);
	ledger_add(&f->ledger, i, seq);
	f->ledger.next_seq[i]++;
}

static void fix_detach(struct fix *f, unsigned i)
{
	cr_assert_eq(lull_producer_detach(f->prod[i]), 0);
	f->prod[i] = NULL;
}

/* Every way in, for every producer still attached, and for a new one. */
static void fix_expect_closed(struct fix *f)
{
	struct lull_producer *prod;
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	bool busy = false;
	void *dst;

	for (unsigned i = 0; i < f->nprod; i++) {
		if (!f->prod[i])
			continue;
		cr_assert_eq(f->t->write(f->prod[i], 1, "x", 1), -EPIPE,
			     "%s: write after the shutdown", f->what);
		cr_assert_eq(f->t->writev(f->prod[i], 1, &iov, 1), -EPIPE,
			     "%s: writev after the shutdown", f->what);
		cr_assert_eq(f->t->claim(f->prod[i], 1, 8, &dst), -EPIPE,
			     "%s: claim after the shutdown", f->what);
	}
	/* SPSC: the producer role is still taken, which is checked first. */
	for (unsigned i = 0; i < f->nprod; i++)
		if (f->prod[i] && !topo_is_mpsc(f->t))
			busy = true;
	cr_assert_eq(lull_producer_attach(f->ring, 0, &prod),
		     busy ? -EBUSY : -EPIPE, "%s: attach after the shutdown",
		     f->what);
}

static void fix_fini(struct fix *f)
{
	for (unsigned i = 0; i < f->nprod; i++)
		if (f->prod[i])
			fix_detach(f, i);
	consumer_fini(&f->c);
}

/* ------------------------------------------------------------------------
 * How a test ends the ring
 */

enum kind {
	KIND_GRACEFUL,
	KIND_IMMEDIATE,
	KIND_FATAL,
	KIND_LAST_DETACH,
};

static const char *const kind_name[] = {
	"graceful shutdown", "immediate shutdown", "fatal report",
	"last detach",
};

static const struct fatal_want test_fatal = { -5, "producer on fire" };

static void fix_end(struct fix *f, enum kind kind)
{
	switch (kind) {
	case KIND_GRACEFUL:
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		/* Idempotent: a second call changes nothing. */
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		break;
	case KIND_IMMEDIATE:
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_IMMEDIATE),
			     0);
		break;
	case KIND_FATAL:
		cr_assert_eq(lull_ring_fatal(f->ring, test_fatal.code,
					     test_fatal.message),
			     0);
		cr_assert_eq(lull_ring_fatal(f->ring, 1, "again"), -EALREADY);
		break;
	case KIND_LAST_DETACH:
		for (unsigned i = 0; i < f->nprod; i++)
			if (f->prod[i])
				fix_detach(f, i);
		break;
	}
}

static const unsigned pending_counts[] = { 0, 1, MANY };

/* ------------------------------------------------------------------------
 * Single-threaded checks of the consumer's side
 */

/* A ring with one producer, read on the test thread. */
struct solo {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct ledger ledger;
	struct sink sink;
};

static void solo_init(struct solo *s, const struct topo *t, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->t = t;
	cr_assert_eq(lull_ring_create(&s->ring, cap, t->flags), 0);
	cr_assert_eq(lull_producer_attach(s->ring, 0, &s->prod), 0);
}

static void solo_send(struct solo *s, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		uint32_t seq = s->ledger.next_seq[0]++;

		cr_assert_eq(stamp_send(s->t, s->prod, 0, seq), 0);
		ledger_add(&s->ledger, 0, seq);
	}
}

static int sink_handler(const struct lull_record *rec, void *ctx)
{
	sink_take(ctx, rec);
	return LULL_READ_CONTINUE;
}

/* Read everything there is into the sink; returns the last result. */
static int solo_read_all(struct solo *s)
{
	int ret;

	while ((ret = lull_ring_read(s->ring, sink_handler, &s->sink, 16)) >
	       0)
		;
	return ret;
}

static void solo_fini(struct solo *s)
{
	if (s->prod)
		cr_assert_eq(lull_producer_detach(s->prod), 0);
	cr_assert_eq(lull_ring_destroy(s->ring), 0);
}

static void after_poison_everything_is_epipe(struct lull_ring *ring)
{
	struct lull_record rec;

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_ring_read(ring, sink_handler, NULL, 4),
			     -EPIPE);
		cr_assert_eq(lull_ring_peek(ring, &rec), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 0), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 1000), -EPIPE);
	}
	cr_assert_eq(lull_ring_release(ring), -EINVAL);
}


#pragma GCC diagnostic pop

#endif
