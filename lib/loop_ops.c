/* SPDX-License-Identifier: MIT */
/*
 * loop_ops.c - the core's side of user SQEs, cancels, timers and signals:
 * their bookkeeping, and their lifetime rules.  Getting an SQE, cancelling
 * it, arming a timer and watching the signalfd are the backend's; what
 * completes comes back through loop_complete.c.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "loop_internal.h"

LULL_EXPORT int lull_loop_sqe(struct lull_loop *loop, lull_cqe_fn fn,
			      void *ctx, struct io_uring_sqe **sqep)
{
	struct io_uring_sqe *sqe;
	struct loop_op *op;

	if (!loop || !fn || !sqep)
		return -EINVAL;
	op = lull__loop_op_alloc(loop);
	if (!op)
		return -ENOMEM;
	sqe = loop->be->sqe(loop, op);
	if (!sqe) {
		lull__loop_op_free(loop, op);
		return -EBUSY;
	}
	op->fn = fn;
	op->ctx = ctx;
	op->in_flight = true;
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, loop_tag(op, TAG_OP));
	loop->ops_in_flight++;
	*sqep = sqe;
	return 0;
}

/*
 * Ask for @op to be cancelled: an ASYNC_CANCEL of its user_data, real or
 * emulated.  Its callback runs when its last CQE comes, with -ECANCELED or
 * whatever it completed with first.  The cancel cannot hit a later op that
 * reuses @op's memory: ops are recycled only when their last CQE is
 * reaped, and an op queued after that is submitted after this cancel.
 * Returns 0 or -EBUSY (no SQE; @op is left to be asked again) or -ENOMEM.
 */
static int op_cancel_ask(struct lull_loop *loop, struct loop_op *op)
{
	int ret = loop->be->cancel(loop, op);

	if (ret < 0)
		return ret;
	op->cancel_asked = true;
	return 0;
}

static bool op_cancellable(const struct loop_op *op)
{
	return op->in_flight && op->fn && !op->cancel_asked;
}

bool lull__loop_ops_to_cancel(const struct lull_loop *loop)
{
	for (struct loop_op *op = loop->all_ops; op; op = op->all_next)
		if (op_cancellable(op))
			return true;
	return false;
}

int lull__loop_ops_cancel(struct lull_loop *loop, void *ctx, bool all)
{
	int asked = 0, ret;

	for (struct loop_op *op = loop->all_ops; op; op = op->all_next) {
		if (!op_cancellable(op) || (!all && op->ctx != ctx))
			continue;
		ret = op_cancel_ask(loop, op);
		if (ret < 0)
			return ret;
		asked++;
	}
	return asked;
}

LULL_EXPORT int lull_loop_cancel(struct lull_loop *loop, void *ctx)
{
	if (!loop)
		return -EINVAL;
	return lull__loop_ops_cancel(loop, ctx, false);
}

LULL_EXPORT int lull_loop_timer(struct lull_loop *loop, uint64_t delay_ns,
				uint64_t interval_ns, lull_timer_fn fn,
				void *ctx, struct lull_loop_timer **timerp)
{
	struct lull_loop_timer *timer;
	int ret;

	if (!loop || !fn)
		return -EINVAL;
	timer = calloc(1, sizeof(*timer));
	if (!timer)
		return -ENOMEM;
	timer->fn = fn;
	timer->ctx = ctx;
	timer->interval_ns = interval_ns;
	ret = loop->be->timer_arm(loop, timer, delay_ns);
	if (ret < 0) {
		free(timer);
		return ret;
	}
	timer->next = loop->timers;
	loop->timers = timer;
	if (timerp)
		*timerp = timer;
	return 0;
}

LULL_EXPORT int lull_loop_timer_cancel(struct lull_loop *loop,
				       struct lull_loop_timer *timer)
{
	struct lull_loop_timer *t;

	if (!loop || !timer)
		return -EINVAL;
	for (t = loop->timers; t && t != timer; t = t->next)
		;
	if (!t || t->cancelled)
		return -ENOENT;
	/* Its callback never runs again, even if it fires once more. */
	t->cancelled = true;
	loop->be->timer_cancel(loop, t);
	return 0;
}

LULL_EXPORT int lull_loop_signals(struct lull_loop *loop, const int *signos,
				  int count, lull_signal_fn fn, void *ctx)
{
	sigset_t set, old;
	long fd;
	int ret;

	if (!loop || !signos || count <= 0 || !fn)
		return -EINVAL;
	if (loop->sigfd >= 0)
		return -EBUSY;
	sigemptyset(&set);
	for (int i = 0; i < count; i++)
		/* LULL_SYSCALL: sigaddset() sets errno on a bad number. */
		if (signos[i] == SIGKILL || signos[i] == SIGSTOP ||
		    LULL_SYSCALL(sigaddset(&set, signos[i])) != 0)
			return -EINVAL;
	pthread_sigmask(SIG_BLOCK, &set, &old);
	/* Blocking, for an io_uring read; the epoll backend changes that. */
	fd = LULL_SYSCALL(signalfd(-1, &set, SFD_CLOEXEC));
	if (fd < 0) {
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		return (int)fd;
	}
	loop->sigfd = (int)fd;
	loop->sigfn = fn;
	loop->sigctx = ctx;
	ret = loop->be->signals(loop);
	if (ret < 0) {
		/* Nothing is left changed: the signals as they were. */
		close(loop->sigfd);
		loop->sigfd = -1;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return ret;
}

void lull__loop_ops_free(struct lull_loop *loop)
{
	struct lull_loop_timer *timer, *next_timer;
	struct loop_op *op, *next_op;

	for (timer = loop->timers; timer; timer = next_timer) {
		next_timer = timer->next;
		free(timer);
	}
	loop->timers = NULL;
	/* Every op the loop allocated, in flight or not, is on all_ops. */
	for (op = loop->all_ops; op; op = next_op) {
		next_op = op->all_next;
		free(op);
	}
	loop->all_ops = NULL;
	loop->free_ops = NULL;
}
