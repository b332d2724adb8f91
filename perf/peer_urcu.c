/* SPDX-License-Identifier: MIT */
/*
 * peer_urcu.c - urcu-wfcq: liburcu's wait-free concurrent queue, built only
 * where pkg-config finds liburcu (the Makefile leaves this file out
 * otherwise; peers.c then lists it as not built).  Inline LGPL build, no
 * library to link.  Each producer takes a node from its own pool, fills it
 * and cds_wfcq_enqueue()s it (one xchg); the consumer
 * __cds_wfcq_splice_blocking()s the whole queue into a local one and walks
 * it; where a producer has swapped the tail but not linked its node yet, it
 * waits 10 PAUSEs and then sched_yield()s (urcu's default would sleep
 * 10 ms).  The queue is unbounded, so the pools bound it: the consumer
 * gives a producer's nodes back by publishing how many of them it has
 * finished, every 64 and whenever the queue is empty; a producer whose pool
 * is all in flight backs off like a producer of a full ring.
 *
 * Equal memory: the producers share capacity / (16 + align8(max(payload,
 * 8))) nodes (at least 256 each).
 */
/* liburcu's wfcqueue as inline functions: nothing to link.  Before urcu. */
#define _LGPL_SOURCE

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The consumer's wait for a node whose producer has swapped the tail but
 * not linked the node yet: 10 PAUSEs, then, by default, a 10 ms sleep.
 * Through the header's documented hook it yields instead, like every other
 * back-off here (a 10 ms nap per preempted producer would measure the
 * hook, not the queue).  Counted as consumer yields.
 */
static _Thread_local uint64_t wfcq_yields;
#define CDS_WFCQ_WAIT_SLEEP(msec) ((void)(msec), wfcq_yields++, sched_yield())
#include <urcu/wfcqueue.h>

#include "throughput.h"

#define URCU_CREDIT_EVERY 64u /* power of two */
#define URCU_MIN_POOL 256u

/* A urcu-wfcq message: the queue node, its producer, the payload. */
struct wfcq_msg {
	struct cds_wfcq_node qnode;
	uint32_t producer;
	uint32_t pad;
	unsigned char data[]; /* max(payload, 8) bytes, 8-byte aligned */
};

/* How many of a producer's nodes the consumer is done with. */
struct wfcq_credit {
	alignas(LINE) _Atomic uint64_t freed;
};

/* The queue: consumer's head and producers' tail on lines of their own. */
struct wfcq {
	alignas(LINE) struct __cds_wfcq_head head;
	alignas(LINE) struct cds_wfcq_tail tail;
	struct wfcq_credit credit[]; /* one per producer */
};

struct urcu {
	struct wfcq *wq;
	unsigned char *nodes; /* producers * pool nodes */
	size_t node_stride;
	size_t pool; /* nodes per producer */
	/* The consumer's: nodes finished per producer, and last published */
	uint64_t *done_nodes;
	uint64_t *published;
};

static int urcu_setup(struct config *cfg, const struct options *opt)
{
	size_t data = cfg->payload > 8 ? (cfg->payload + 7) & ~(size_t)7 : 8;
	struct urcu *u = calloc(1, sizeof(*u));
	size_t nodes;

	if (!u)
		return -ENOMEM;
	cfg->state = u;
	u->node_stride = sizeof(struct wfcq_msg) + data;
	u->pool = opt->capacity / u->node_stride / cfg->producers;
	if (u->pool < URCU_MIN_POOL)
		u->pool = URCU_MIN_POOL;
	nodes = u->pool * cfg->producers;
	cfg->slots = (unsigned int)nodes;
	u->nodes = tp_alloc_zeroed(nodes * u->node_stride);
	u->wq = tp_alloc_zeroed(sizeof(*u->wq) +
				cfg->producers * sizeof(u->wq->credit[0]));
	u->done_nodes = calloc(cfg->producers, sizeof(uint64_t));
	u->published = calloc(cfg->producers, sizeof(uint64_t));
	if (!u->nodes || !u->wq || !u->done_nodes || !u->published)
		return -ENOMEM;
	__cds_wfcq_init(&u->wq->head, &u->wq->tail);
	return 0;
}

static void urcu_teardown(struct config *cfg)
{
	struct urcu *u = cfg->state;

	if (u) {
		free(u->wq);
		free(u->nodes);
		free(u->done_nodes);
		free(u->published);
	}
	free(u);
}

/* The last run took every node back: all are free again. */
static int urcu_run_open(struct run *run)
{
	struct config *cfg = run->cfg;
	struct urcu *u = cfg->state;
	unsigned int i;

	for (i = 0; i < cfg->producers; i++) {
		atomic_store_explicit(&u->wq->credit[i].freed, 0,
				      memory_order_relaxed);
		u->done_nodes[i] = u->published[i] = 0;
	}
	return 0;
}

static int urcu_send(struct producer *p, struct config *cfg,
		     unsigned char *msg, uint64_t value, struct send_state *st)
{
	struct urcu *u = cfg->state;
	struct wfcq_msg *m;

	while (unlikely(st->taken - st->freed >= u->pool)) {
		/*
		 * Acquire pairs with the consumer's release in
		 * wfcq_publish(): it has finished with the nodes it counts,
		 * so the oldest may be written again.
		 */
		st->freed = atomic_load_explicit(&u->wq->credit[p->id].freed,
						 memory_order_acquire);
		if (st->taken - st->freed < u->pool)
			break;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	m = (struct wfcq_msg *)(u->nodes + ((size_t)p->id * u->pool +
					    st->slab_next) *
						   u->node_stride);
	if (++st->slab_next == u->pool)
		st->slab_next = 0;
	st->taken++;
	m->producer = p->id;
	if (cfg->payload > 8) {
		memcpy(msg, &value, 8);
		memcpy(m->data, msg, cfg->payload);
	} else {
		memcpy(m->data, &value, 8);
	}
	cds_wfcq_node_init(&m->qnode);
	/* A full barrier (xchg) before the node is linked. */
	cds_wfcq_enqueue(&u->wq->head, &u->wq->tail, &m->qnode);
	return 0;
}

static void urcu_produce(struct producer *p, unsigned char *msg)
{
	tp_produce(p, msg, urcu_send);
}

/* Give producer @p's finished nodes back. */
static inline void wfcq_publish(struct urcu *u, unsigned int p)
{
	u->published[p] = u->done_nodes[p];
	/*
	 * Release: the node's payload was read before; pairs with the
	 * producer's acquire in urcu_send(), which then overwrites it.
	 */
	atomic_store_explicit(&u->wq->credit[p].freed, u->done_nodes[p],
			      memory_order_release);
}

/* The queue is empty: give back every node not yet given back. */
static void wfcq_publish_all(struct config *cfg, struct urcu *u)
{
	unsigned int p;

	for (p = 0; p < cfg->producers; p++)
		if (u->published[p] != u->done_nodes[p])
			wfcq_publish(u, p);
}

/* Take all there are (not limited by --batch). */
static int urcu_pop(struct config *cfg, struct consumer_state *cs,
		    unsigned int batch)
{
	struct urcu *u = cfg->state;
	struct __cds_wfcq_head lhead;
	struct cds_wfcq_tail ltail;
	struct cds_wfcq_node *qn, *qnext;
	unsigned int n = 0;

	(void)batch;
	__cds_wfcq_init(&lhead, &ltail);
	if (__cds_wfcq_splice_blocking(&lhead, &ltail, &u->wq->head,
				       &u->wq->tail) ==
	    CDS_WFCQ_RET_SRC_EMPTY) {
		wfcq_publish_all(cfg, u);
		return 0;
	}
	/* _safe: the next node is found before this one goes back */
	__cds_wfcq_for_each_blocking_safe(&lhead, &ltail, qn, qnext)
	{
		struct wfcq_msg *m =
			caa_container_of(qn, struct wfcq_msg, qnode);
		unsigned int p = m->producer;

		if (cfg->payload > 8) {
			tp_take_copy(cs, m->data, cfg->payload);
		} else {
			uint64_t v;

			memcpy(&v, m->data, 8);
			tp_take_value(cs, v);
		}
		if (!(++u->done_nodes[p] & (URCU_CREDIT_EVERY - 1)))
			wfcq_publish(u, p);
		n++;
	}
	return (int)n;
}

static void urcu_consume(struct run *run, struct consumer_state *cs)
{
	tp_consume_spin(run, cs, urcu_pop);
	run->cons_yields += wfcq_yields;
	wfcq_yields = 0;
}

static void urcu_json(const struct config *cfg)
{
	printf("\"nodes\":%u,", cfg->slots);
}

const struct peer_ring tp_urcu_wfcq = {
	.name = "urcu-wfcq",
	.cls = CLASS_MPSC,
	.target = true,
	.setup = urcu_setup,
	.run_open = urcu_run_open,
	.produce = urcu_produce,
	.consume = urcu_consume,
	.json = urcu_json,
	.teardown = urcu_teardown,
};
