/* SPDX-License-Identifier: MIT */
/*
 * handoff_uv.c - uv-async: libuv's cross-thread wake-up, built only where
 * pkg-config finds libuv (libuv1-dev; the Makefile leaves this file out
 * otherwise and handoff lists the mechanism as not built).  The producer
 * appends each message to a mutex-protected queue and calls
 * uv_async_send(); the consumer thread runs a uv loop whose async callback
 * takes everything queued (uv_async_send() coalesces: one callback may
 * find several).  The loop's waits are counted with a prepare handle,
 * which runs before each of them.
 *
 * The queue has room for every message of the run, so pushing never
 * allocates.  The consumer stops its loop (uv_stop()) after the last
 * message but closes nothing: the producer may still be inside its last
 * uv_async_send(), so the handles are closed and the loop is closed on
 * main's thread once both threads have been joined.
 */
#include <uv.h>

#include "handoff.h"

struct async_queue {
	uv_loop_t loop;
	uv_async_t async;
	uv_prepare_t prepare;
	struct consumer *c;
	pthread_mutex_t lock;
	struct msg *msgs; /* every message of the run */
	uint64_t head;    /* the consumer's next; under lock */
	uint64_t tail;    /* the producer's next; under lock */
};

static void async_open(struct run *run)
{
	struct async_queue *q = calloc(1, sizeof(*q));

	if (!q)
		ho_die(run, "out of memory");
	q->msgs = calloc(run->n + 1, sizeof(*q->msgs));
	if (!q->msgs)
		ho_die(run, "out of memory");
	pthread_mutex_init(&q->lock, NULL);
	q->c = &run->c;
	run->queue = q;
}

/* The loop's thread: take everything queued so far. */
static void async_on_send(uv_async_t *async)
{
	struct async_queue *q = async->data;
	struct consumer *c = q->c;
	uint64_t head, tail;

	pthread_mutex_lock(&q->lock);
	head = q->head;
	tail = q->tail;
	q->head = tail;
	pthread_mutex_unlock(&q->lock);
	/* The producer never writes below tail again: read unlocked. */
	for (; head < tail && !c->done; head++)
		ho_take(c, q->msgs[head].seq, q->msgs[head].t_push);
	if (c->done)
		uv_stop(&q->loop);
}

static void async_on_prepare(uv_prepare_t *prepare)
{
	struct async_queue *q = prepare->data;

	q->c->iters++;
}

static void async_consume(struct consumer *c)
{
	struct run *run = c->run;
	struct async_queue *q = run->queue;
	int r;

	r = uv_loop_init(&q->loop);
	if (r < 0)
		ho_die(run, "uv_loop_init: %s", uv_strerror(r));
	q->async.data = q;
	q->prepare.data = q;
	r = uv_async_init(&q->loop, &q->async, async_on_send);
	if (r < 0)
		ho_die(run, "uv_async_init: %s", uv_strerror(r));
	r = uv_prepare_init(&q->loop, &q->prepare);
	if (r == 0)
		r = uv_prepare_start(&q->prepare, async_on_prepare);
	if (r < 0)
		ho_die(run, "uv_prepare: %s", uv_strerror(r));
	/* The async handle is ready: the producer may send. */
	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	uv_run(&q->loop, UV_RUN_DEFAULT);
	if (!c->done)
		ho_die(run, "uv_run returned before the last message");
}

static void async_push(struct run *run, const struct msg *m)
{
	struct async_queue *q = run->queue;
	int r;

	pthread_mutex_lock(&q->lock);
	q->msgs[q->tail++] = *m;
	pthread_mutex_unlock(&q->lock);
	r = uv_async_send(&q->async);
	if (r < 0)
		ho_die(run, "uv_async_send: %s", uv_strerror(r));
}

static void async_close(struct run *run)
{
	struct async_queue *q = run->queue;
	int r;

	/* Both threads are joined: the loop is main's now. */
	uv_close((uv_handle_t *)&q->async, NULL);
	uv_close((uv_handle_t *)&q->prepare, NULL);
	uv_run(&q->loop, UV_RUN_DEFAULT);
	r = uv_loop_close(&q->loop);
	if (r < 0)
		ho_die(run, "uv_loop_close: %s", uv_strerror(r));
	pthread_mutex_destroy(&q->lock);
	free(q->msgs);
	free(q);
	run->queue = NULL;
}

const struct ho_queue ho_uv_async = {
	.unsupported = NULL,
	.open = async_open,
	.consume = async_consume,
	.push = async_push,
	.close = async_close,
};
