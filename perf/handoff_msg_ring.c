/* SPDX-License-Identifier: MIT */
/*
 * handoff_msg_ring.c - msg-ring: io_uring's IORING_OP_MSG_RING (Linux
 * 5.18) carries each message from the producer's own ring into the
 * consumer's.  The completion it posts there is the message: its res holds
 * the sequence number and its user_data the push time, so nothing but the
 * two rings is shared.  The consumer waits in io_uring_wait_cqe(); the
 * producer submits the SQE and reaps its own completion (the kernel runs
 * the op inline, so one io_uring_enter() does both).
 *
 * Both rings are plain (no SINGLE_ISSUER or DEFER_TASKRUN): the kernel
 * posts the completion straight into the consumer's ring and wakes its
 * waiter, the way MSG_RING has worked since it came.  Support is checked
 * at run time, once: the opcode probe, then one message between two rings.
 */
#include "handoff.h"

#define MSG_RING_ENTRIES 64 /* the consumer's ring: 128 completions */

struct msg_rings {
	struct io_uring prod;
	struct io_uring cons;
};

static const char *uring_error(int r)
{
	return r == -EPERM ? "io_uring is not permitted" :
			     "io_uring is not available";
}

/* One message from @from into @to, and back out: the whole mechanism. */
static int msg_ring_try(struct io_uring *from, struct io_uring *to)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(from);
	struct io_uring_cqe *cqe;
	int r, res;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_msg_ring(sqe, to->ring_fd, 7, 0x5eed, 0);
	r = io_uring_submit_and_wait(from, 1);
	if (r < 0)
		return r;
	r = io_uring_peek_cqe(from, &cqe);
	if (r < 0)
		return r;
	res = cqe->res;
	io_uring_cqe_seen(from, cqe);
	if (res < 0)
		return res;
	r = io_uring_peek_cqe(to, &cqe);
	if (r < 0)
		return r;
	res = cqe->res == 7 && cqe->user_data == 0x5eed ? 0 : -EPROTO;
	io_uring_cqe_seen(to, cqe);
	return res;
}

static const char *msg_ring_unsupported(void)
{
	struct io_uring_probe *probe;
	struct io_uring a, b;
	const char *why = NULL;
	int r;

	r = io_uring_queue_init(4, &a, 0);
	if (r < 0)
		return uring_error(r);
	probe = io_uring_get_probe_ring(&a);
	if (!probe || !io_uring_opcode_supported(probe, IORING_OP_MSG_RING))
		why = "unsupported: io_uring has no IORING_OP_MSG_RING "
		      "(Linux < 5.18)";
	if (probe)
		io_uring_free_probe(probe);
	if (!why) {
		r = io_uring_queue_init(4, &b, 0);
		if (r < 0) {
			why = uring_error(r);
		} else {
			if (msg_ring_try(&a, &b) < 0)
				why = "unsupported: a test IORING_OP_MSG_RING "
				      "failed";
			io_uring_queue_exit(&b);
		}
	}
	io_uring_queue_exit(&a);
	return why;
}

static void msg_ring_open(struct run *run)
{
	struct msg_rings *q = calloc(1, sizeof(*q));
	int r;

	if (!q)
		ho_die(run, "out of memory");
	r = io_uring_queue_init(4, &q->prod, 0);
	if (r < 0)
		ho_die(run, "io_uring_queue_init: %s", strerror(-r));
	r = io_uring_queue_init(MSG_RING_ENTRIES, &q->cons, 0);
	if (r < 0)
		ho_die(run, "io_uring_queue_init: %s", strerror(-r));
	run->queue = q;
}

static void msg_ring_consume(struct consumer *c)
{
	struct run *run = c->run;
	struct msg_rings *q = run->queue;
	struct io_uring_cqe *cqe;
	uint64_t t_push;
	uint32_t seq;
	int r;

	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	while (!c->done) {
		r = io_uring_peek_cqe(&q->cons, &cqe);
		if (r == -EAGAIN) {
			c->iters++;
			r = io_uring_wait_cqe(&q->cons, &cqe);
		}
		if (r == -EINTR)
			continue;
		if (r < 0)
			ho_die(run, "io_uring_wait_cqe: %s", strerror(-r));
		seq = (uint32_t)cqe->res;
		t_push = cqe->user_data;
		io_uring_cqe_seen(&q->cons, cqe);
		ho_take(c, seq, t_push);
	}
}

static void msg_ring_push(struct run *run, const struct msg *m)
{
	struct msg_rings *q = run->queue;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->prod);
	struct io_uring_cqe *cqe;
	int r;

	if (!sqe)
		ho_die(run, "io_uring_get_sqe: the producer's ring is full");
	/* The sequence number (< UINT32_MAX) becomes the res of its CQE. */
	io_uring_prep_msg_ring(sqe, q->cons.ring_fd, (unsigned int)m->seq,
			       m->t_push, 0);
	r = io_uring_submit_and_wait(&q->prod, 1);
	if (r < 0)
		ho_die(run, "io_uring_submit_and_wait: %s", strerror(-r));
	r = io_uring_wait_cqe(&q->prod, &cqe);
	if (r < 0)
		ho_die(run, "io_uring_wait_cqe: %s", strerror(-r));
	r = cqe->res;
	io_uring_cqe_seen(&q->prod, cqe);
	if (r < 0)
		ho_die(run, "IORING_OP_MSG_RING: %s", strerror(-r));
}

static void msg_ring_close(struct run *run)
{
	struct msg_rings *q = run->queue;

	io_uring_queue_exit(&q->prod);
	io_uring_queue_exit(&q->cons);
	free(q);
	run->queue = NULL;
}

const struct ho_queue ho_msg_ring = {
	.unsupported = msg_ring_unsupported,
	.open = msg_ring_open,
	.consume = msg_ring_consume,
	.push = msg_ring_push,
	.close = msg_ring_close,
};
