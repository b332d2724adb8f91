/* SPDX-License-Identifier: MIT */
/*
 * peer_rte.c - DPDK's rte_ring, built only where pkg-config finds libdpdk
 * (the Makefile leaves this file out otherwise; peers.c then lists the two
 * as not built):
 *   rte-spsc   made with RING_F_SP_ENQ | RING_F_SC_DEQ:
 *              rte_ring_sp_enqueue() of one message,
 *              rte_ring_sc_dequeue_burst() of up to 256.
 *   rte-mpsc   made with RING_F_SC_DEQ: rte_ring_mp_enqueue() (the
 *              classic CAS on the head, then an in-order wait for the tail)
 *              and the same burst dequeue.
 * With --producer-batch N both enqueue N at a time instead, with
 * rte_ring_sp_enqueue_burst() and rte_ring_mp_enqueue_burst(), continuing
 * a burst that found room for only part of it.
 * rte_ring_init() on memory this program allocates (rte_ring_get_memsize()):
 * no EAL, no hugepages, no privileges.  rte_ring holds one message less
 * than its slots.  Both sides spin, then yield (bench_backoff_wait()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wpointer-arith"
#include <rte_ring.h>
#pragma GCC diagnostic pop

#include "throughput.h"

/*
 * The consumer takes a burst before it copies any of it out, freeing up to
 * RTE_BURST slots whose buffers are still to be read, and a producer fills
 * a batch's buffers before it enqueues the first of them: the slabs have
 * as many buffers more.
 */
static int rte_setup(struct config *cfg, const struct options *opt)
{
	unsigned int flags = RING_F_SC_DEQ;
	struct rte_ring *ring;
	ssize_t size;
	int r;

	r = tp_slots_setup(cfg, opt, RTE_BURST + cfg->push_batch);
	if (r)
		return r;
	if (cfg->kind == RING_RTE_SPSC)
		flags |= RING_F_SP_ENQ;
	size = rte_ring_get_memsize(cfg->slots);
	if (size < 0)
		return (int)size;
	ring = tp_alloc_zeroed((size_t)size);
	if (!ring)
		return -ENOMEM;
	cfg->state = ring;
	r = rte_ring_init(ring, cfg->ring->name, cfg->slots, flags);
	if (r) {
		fprintf(stderr, "throughput: rte_ring_init: %s\n",
			strerror(-r));
		return r;
	}
	return 0;
}

static void rte_teardown(struct config *cfg)
{
	free(cfg->state);
}

static void rte_json(const struct config *cfg)
{
	printf("\"slots\":%u,", cfg->slots);
}

static inline __attribute__((always_inline)) int
rte_send(struct producer *p, struct config *cfg, unsigned char *msg,
	 uint64_t value, struct send_state *st, bool single)
{
	struct rte_ring *ring = cfg->state;
	void *entry = tp_slot_entry(p, cfg, msg, value, st);

	for (;;) {
		if (single ? rte_ring_sp_enqueue(ring, entry) == 0 :
			     rte_ring_mp_enqueue(ring, entry) == 0)
			return 0;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
}

static int rte_sp_send(struct producer *p, struct config *cfg,
		       unsigned char *msg, uint64_t value,
		       struct send_state *st)
{
	return rte_send(p, cfg, msg, value, st, true);
}

static int rte_mp_send(struct producer *p, struct config *cfg,
		       unsigned char *msg, uint64_t value,
		       struct send_state *st)
{
	return rte_send(p, cfg, msg, value, st, false);
}

/* A batch: every message's entry, then bursts until all are in. */
static inline __attribute__((always_inline)) int
rte_send_burst(struct producer *p, struct config *cfg, unsigned char *msg,
	       const uint64_t *values, unsigned int n, struct send_state *st,
	       bool single)
{
	struct rte_ring *ring = cfg->state;
	void *entries[MAX_PUSH_BATCH];
	unsigned int i, done = 0;

	for (i = 0; i < n; i++)
		entries[i] = tp_slot_entry(p, cfg, msg, values[i], st);
	for (;;) {
		done += single ? rte_ring_sp_enqueue_burst(ring, entries + done,
							   n - done, NULL) :
				 rte_ring_mp_enqueue_burst(ring, entries + done,
							   n - done, NULL);
		if (likely(done == n))
			return 0;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
}

static int rte_sp_send_burst(struct producer *p, struct config *cfg,
			     unsigned char *msg, const uint64_t *values,
			     unsigned int n, struct send_state *st)
{
	return rte_send_burst(p, cfg, msg, values, n, st, true);
}

static int rte_mp_send_burst(struct producer *p, struct config *cfg,
			     unsigned char *msg, const uint64_t *values,
			     unsigned int n, struct send_state *st)
{
	return rte_send_burst(p, cfg, msg, values, n, st, false);
}

static int rte_pop(struct config *cfg, struct consumer_state *cs,
		   unsigned int batch)
{
	void *objs[RTE_BURST];
	unsigned int i, n;

	n = rte_ring_sc_dequeue_burst(cfg->state, objs,
				      batch < RTE_BURST ? batch : RTE_BURST,
				      NULL);
	for (i = 0; i < n; i++)
		tp_take_entry(cs, cfg, objs[i]);
	return (int)n;
}

static void rte_sp_produce(struct producer *p, unsigned char *msg)
{
	if (p->run->cfg->push_batch > 1)
		tp_produce_batch(p, msg, rte_sp_send_burst);
	else
		tp_produce(p, msg, rte_sp_send);
}

static void rte_mp_produce(struct producer *p, unsigned char *msg)
{
	if (p->run->cfg->push_batch > 1)
		tp_produce_batch(p, msg, rte_mp_send_burst);
	else
		tp_produce(p, msg, rte_mp_send);
}

static void rte_consume(struct run *run, struct consumer_state *cs)
{
	tp_consume_spin(run, cs, rte_pop);
}

const struct peer_ring tp_rte_spsc = {
	.name = "rte-spsc",
	.cls = CLASS_SPSC,
	.push_batch = 1,
	.setup = rte_setup,
	.produce = rte_sp_produce,
	.consume = rte_consume,
	.json = rte_json,
	.teardown = rte_teardown,
};

const struct peer_ring tp_rte_mpsc = {
	.name = "rte-mpsc",
	.cls = CLASS_MPSC,
	.target = true,
	.push_batch = 1,
	.setup = rte_setup,
	.produce = rte_mp_produce,
	.consume = rte_consume,
	.json = rte_json,
	.teardown = rte_teardown,
};
