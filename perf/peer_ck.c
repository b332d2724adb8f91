/* SPDX-License-Identifier: MIT */
/*
 * peer_ck.c - Concurrency Kit's ck_ring, three ways:
 *   ck-spsc    ck_ring_enqueue_spsc() / ck_ring_dequeue_spsc().
 *   ck-mpmc    ck_ring_enqueue_mpmc() / ck_ring_dequeue_mpmc(): ck's
 *              general ring, whose dequeue pays a CAS even with one consumer.
 *   ck-mpsc    ck_ring_enqueue_mpsc() / ck_ring_dequeue_mpsc(): the same
 *              multi-producer enqueue (a CAS on p_head, then an in-order
 *              wait for p_tail) with the single-consumer dequeue.
 * Pointer slots: the value itself up to 8 bytes, else a slab buffer
 * (tp_slots_setup()).  Both sides spin, then yield (bench_backoff_wait()).
 */
#include <errno.h>
#include <stdlib.h>

#include <ck_ring.h>

#include "throughput.h"

struct ck {
	struct ck_ring *ring;
	ck_ring_buffer_t *buf;
};

static int ck_setup(struct config *cfg, const struct options *opt)
{
	struct ck *ck = calloc(1, sizeof(*ck));
	int r;

	if (!ck)
		return -ENOMEM;
	cfg->state = ck;
	r = tp_slots_setup(cfg, opt, 0);
	if (r)
		return r;
	ck->ring = tp_alloc_zeroed(sizeof(*ck->ring));
	ck->buf = tp_alloc_zeroed(cfg->slots * sizeof(*ck->buf));
	if (!ck->ring || !ck->buf)
		return -ENOMEM;
	ck_ring_init(ck->ring, cfg->slots);
	return 0;
}

static void ck_teardown(struct config *cfg)
{
	struct ck *ck = cfg->state;

	if (ck) {
		free(ck->ring);
		free(ck->buf);
	}
	free(ck);
}

static void ck_json(const struct config *cfg)
{
	printf("\"slots\":%u,", cfg->slots);
}

/* One push through @enqueue, backing off while the ring is full. */
static inline __attribute__((always_inline)) int
ck_send(struct producer *p, struct config *cfg, unsigned char *msg,
	uint64_t value, struct send_state *st,
	bool (*enqueue)(struct ck_ring *, ck_ring_buffer_t *,
			const void *))
{
	struct ck *ck = cfg->state;
	void *entry = tp_slot_entry(p, cfg, msg, value, st);

	while (unlikely(!enqueue(ck->ring, ck->buf, entry))) {
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	return 0;
}

/* Up to @batch messages through @dequeue. */
static inline __attribute__((always_inline)) int
ck_pop(struct config *cfg, struct consumer_state *cs, unsigned int batch,
       bool (*dequeue)(struct ck_ring *, const ck_ring_buffer_t *, void *))
{
	struct ck *ck = cfg->state;
	unsigned int n;
	void *entry;

	for (n = 0; n < batch; n++) {
		if (!dequeue(ck->ring, ck->buf, &entry))
			break;
		tp_take_entry(cs, cfg, entry);
	}
	return (int)n;
}

/* ck's enqueues take the entry as const void *; wrap each kind once. */
#define CK_KIND(kind)                                                        \
	static int ck_##kind##_send(struct producer *p, struct config *cfg,  \
				    unsigned char *msg, uint64_t value,      \
				    struct send_state *st)                   \
	{                                                                    \
		return ck_send(p, cfg, msg, value, st,                       \
			       ck_ring_enqueue_##kind);                      \
	}                                                                    \
	static int ck_##kind##_pop(struct config *cfg,                       \
				   struct consumer_state *cs,                \
				   unsigned int batch)                       \
	{                                                                    \
		return ck_pop(cfg, cs, batch, ck_ring_dequeue_##kind);       \
	}                                                                    \
	static void ck_##kind##_produce(struct producer *p,                  \
					unsigned char *msg)                  \
	{                                                                    \
		tp_produce(p, msg, ck_##kind##_send);                        \
	}                                                                    \
	static void ck_##kind##_consume(struct run *run,                     \
					struct consumer_state *cs)           \
	{                                                                    \
		tp_consume_spin(run, cs, ck_##kind##_pop);                   \
	}

CK_KIND(spsc)
CK_KIND(mpmc)
CK_KIND(mpsc)

#define CK_RING(kind, cls_, target_)                                         \
	{                                                                    \
		.name = "ck-" #kind, .cls = cls_, .target = target_,         \
		.setup = ck_setup, .produce = ck_##kind##_produce,           \
		.consume = ck_##kind##_consume, .json = ck_json,             \
		.teardown = ck_teardown,                                     \
	}

const struct peer_ring tp_ck_spsc = CK_RING(spsc, CLASS_SPSC, true);
const struct peer_ring tp_ck_mpmc = CK_RING(mpmc, CLASS_MPSC, true);
const struct peer_ring tp_ck_mpsc = CK_RING(mpsc, CLASS_MPSC, false);
