/* SPDX-License-Identifier: MIT */
/*
 * loop_complete.c - the core's completion entry points, which the backends
 * call (an op completed, a timer fired or went, a signal arrived), and the
 * op pool they share with the core.  Nothing here calls into the core's
 * other files: a timer that re-arms does it through its backend.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_internal.h"

struct loop_op *lull__loop_op_alloc(struct lull_loop *loop)
{
	struct loop_op *op = loop->free_ops;

	if (op) {
		struct loop_op *all_next = op->all_next;

		loop->free_ops = op->next;
		memset(op, 0, sizeof(*op));
		op->all_next = all_next;
		return op;
	}
	op = calloc(1, sizeof(*op));
	if (op) {
		op->all_next = loop->all_ops;
		loop->all_ops = op;
	}
	return op;
}

void lull__loop_op_free(struct lull_loop *loop, struct loop_op *op)
{
	op->next = loop->free_ops;
	loop->free_ops = op;
}

void lull__loop_op_complete(struct lull_loop *loop, struct loop_op *op,
			    int res, uint32_t flags)
{
	bool last = !(flags & IORING_CQE_F_MORE);

	/* Before the callback, which may cancel by its ctx. */
	if (last)
		op->in_flight = false;
	if (op->fn) {
		loop->stats.completions++;
		op->fn(loop, res, flags, op->ctx);
	}
	if (!last)
		return;
	lull__loop_op_free(loop, op);
	loop->ops_in_flight--;
}

void lull__loop_timer_gone(struct lull_loop *loop,
			   struct lull_loop_timer *timer)
{
	struct lull_loop_timer **link;

	for (link = &loop->timers; *link; link = &(*link)->next)
		if (*link == timer) {
			*link = timer->next;
			break;
		}
	free(timer);
}

void lull__loop_timer_fired(struct lull_loop *loop,
			    struct lull_loop_timer *timer)
{
	timer->armed = false;
	timer->firing = true;
	if (!timer->cancelled)
		timer->fn(loop, timer->ctx);
	timer->firing = false;
	/* A periodic timer that cannot re-arm (no SQE) ends here. */
	if (timer->cancelled || !timer->interval_ns ||
	    loop->be->timer_arm(loop, timer, timer->interval_ns) < 0)
		lull__loop_timer_gone(loop, timer);
}

void lull__loop_signal(struct lull_loop *loop, int signo)
{
	loop->sigfn(loop, signo, loop->sigctx);
}
