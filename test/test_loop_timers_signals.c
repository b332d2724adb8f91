/* SPDX-License-Identifier: MIT */
/*
 * test_loop_timers_signals.c - the Criterion suite loop: timers (one-shot,
 * repeating, cancelled), signals on the loop thread, a loop kept busy
 * by a ring, and timeouts at their extremes.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

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
