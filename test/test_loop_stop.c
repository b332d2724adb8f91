/* SPDX-License-Identifier: MIT */
/*
 * test_loop_stop.c - the Criterion suite loop: lull_loop_stop() before
 * a run, from another thread, a callback or a signal handler; the SQEs a
 * stop cancels or a destroy drops; lull_loop_cancel() of one context.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

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

