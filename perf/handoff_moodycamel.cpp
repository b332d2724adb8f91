/* SPDX-License-Identifier: MIT */
/*
 * handoff_moodycamel.cpp - moodycamel-blocking: moodycamel's
 * BlockingConcurrentQueue, built only where the C++ compiler finds
 * <concurrentqueue/blockingconcurrentqueue.h> (libconcurrentqueue-dev; the
 * Makefile leaves this file out otherwise and handoff lists the mechanism
 * as not built).  The producer enqueue()s each message with its
 * ProducerToken (into room made for the whole run: it never allocates);
 * the consumer wait_dequeue()s, which spins on the queue's semaphore (its
 * default MAX_SEMA_SPINS, 10000 tries) and then parks in sem_wait().  A
 * wait is counted when a try_dequeue() first finds nothing.
 */
#include <new>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <concurrentqueue/blockingconcurrentqueue.h>
#pragma GCC diagnostic pop

#include "handoff.h"

typedef moodycamel::BlockingConcurrentQueue<struct msg> blocking_queue;

struct mc_blocking {
	blocking_queue *queue;
	moodycamel::ProducerToken *token;
};

static void mc_open(struct run *run)
{
	struct mc_blocking *q = new (std::nothrow) mc_blocking();

	if (!q)
		ho_die(run, "out of memory");
	try {
		/* Room for every message of the run: no allocation. */
		q->queue = new blocking_queue(run->n + 1, 1, 0);
		q->token = new moodycamel::ProducerToken(*q->queue);
	} catch (const std::bad_alloc &) {
		ho_die(run, "out of memory");
	}
	if (!q->token->valid())
		ho_die(run, "moodycamel: no producer token");
	run->queue = q;
}

static void mc_consume(struct consumer *c)
{
	struct run *run = c->run;
	struct mc_blocking *q = static_cast<struct mc_blocking *>(run->queue);
	struct msg m;

	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	while (!c->done) {
		if (!q->queue->try_dequeue(m)) {
			c->iters++;
			q->queue->wait_dequeue(m);
		}
		ho_take(c, m.seq, m.t_push);
	}
}

static void mc_push(struct run *run, const struct msg *m)
{
	struct mc_blocking *q = static_cast<struct mc_blocking *>(run->queue);

	if (!q->queue->enqueue(*q->token, *m))
		ho_die(run, "moodycamel: enqueue failed");
}

static void mc_close(struct run *run)
{
	struct mc_blocking *q = static_cast<struct mc_blocking *>(run->queue);

	delete q->token;
	delete q->queue;
	delete q;
	run->queue = NULL;
}

extern "C" const struct ho_queue ho_moodycamel_blocking = {
	.unsupported = NULL,
	.open = mc_open,
	.consume = mc_consume,
	.push = mc_push,
	.close = mc_close,
};
