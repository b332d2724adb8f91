/* SPDX-License-Identifier: MIT */
/*
 * peer_moodycamel.cpp - moodycamel: moodycamel::ConcurrentQueue, built only
 * where the compiler finds <concurrentqueue/concurrentqueue.h>
 * (libconcurrentqueue-dev; the Makefile leaves this file out otherwise, and
 * peers.c then lists it as not built).  An MPMC queue made of one sub-queue
 * per producer, so FIFO only per producer: the consumer takes the
 * producers' messages in no set order between them.
 *
 * Each producer has its own ProducerToken (an explicit producer, made at
 * setup and handed to the producer's thread in each run, like lull's
 * attached producers) and try_enqueue()s one message per push, or
 * try_enqueue_bulk()s --producer-batch messages with it.  The consumer
 * try_dequeue_bulk()s up to 32 at a time (fewer with a smaller --batch)
 * with a ConsumerToken.  Messages are items by value (peer_items.hpp).
 *
 * Equal memory, and a bound: the queue is unbounded when its enqueues may
 * allocate, so the producers use the try_ forms, which only take blocks
 * (32 items each) from the pool the queue is made with, and back off like
 * a producer of a full ring when there is none.  The pool holds
 * --capacity bytes of items, shared out at setup: each producer token
 * takes its share of blocks by enqueueing that many items once (then the
 * consumer drains them), and keeps them, reusing each block once it is
 * empty; no producer can then starve another of blocks.  A share is at
 * least 256 items, and two batches plus a block.  Both sides spin, then
 * yield (bench_backoff_wait()).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <concurrentqueue/concurrentqueue.h>
#pragma GCC diagnostic pop

#include "peer_items.hpp"

#define MC_BLOCK moodycamel::ConcurrentQueueDefaultTraits::BLOCK_SIZE
#define MC_MIN_SHARE 256u

template <size_t N> using mcq = moodycamel::ConcurrentQueue<tp_item<N> >;

/* A producer's token and its own items. */
struct mc_producer {
	moodycamel::ProducerToken *token;
	void *items; /* push_batch items */
};

struct mc {
	void *queue;  /* mcq<N> */
	void *out;    /* the consumer's: ITEM_POP items */
	moodycamel::ConsumerToken *ctok; /* the running consumer's */
	struct mc_producer *prods;
	size_t share; /* items per producer */
};

template <size_t N> struct mc_make {
	static int call(struct config *cfg, const struct options *opt,
			struct mc *m)
	{
		size_t share = opt->capacity / sizeof(tp_item<N>) /
			       cfg->producers;
		size_t least = 2 * (size_t)cfg->push_batch + MC_BLOCK;
		size_t blocks, i, j, got;
		mcq<N> *q = NULL;

		if (share < MC_MIN_SHARE)
			share = MC_MIN_SHARE;
		if (share < least)
			share = least;
		blocks = (share + MC_BLOCK - 1) / MC_BLOCK;
		m->share = blocks * MC_BLOCK;
		try {
			q = new mcq<N>(m->share * cfg->producers);
			m->queue = q;
			for (i = 0; i < cfg->producers; i++) {
				m->prods[i].token =
					new moodycamel::ProducerToken(*q);
				m->prods[i].items =
					tp_items_new<N>(cfg->push_batch);
				if (!m->prods[i].token->valid() ||
				    !m->prods[i].items)
					return -ENOMEM;
			}
		} catch (const std::bad_alloc &) {
			return -ENOMEM;
		}
		m->out = tp_items_new<N>(ITEM_POP);
		if (!m->out)
			return -ENOMEM;

		/* Each token takes its blocks from the pool, for good. */
		tp_item<N> it{};

		for (i = 0; i < cfg->producers; i++)
			for (j = 0; j < m->share; j++)
				if (!q->try_enqueue(*m->prods[i].token, it)) {
					fprintf(stderr,
						"throughput: moodycamel: "
						"producer %zu took %zu of "
						"its %zu items\n",
						i, j, m->share);
					return -ENOSPC;
				}
		got = 0;
		for (;;) {
			size_t n = q->try_dequeue_bulk(
				static_cast<tp_item<N> *>(m->out), ITEM_POP);

			if (!n)
				break;
			got += n;
		}
		if (got != m->share * cfg->producers) {
			fprintf(stderr,
				"throughput: moodycamel: drained %zu of %zu "
				"items\n",
				got, m->share * cfg->producers);
			return -EIO;
		}
		cfg->slots = (unsigned int)(m->share * cfg->producers);
		return 0;
	}
};

template <size_t N> struct mc_free {
	static int call(struct config *cfg, struct mc *m)
	{
		unsigned int i;

		for (i = 0; m->prods && i < cfg->producers; i++) {
			delete m->prods[i].token;
			delete[] static_cast<tp_item<N> *>(m->prods[i].items);
		}
		delete static_cast<mcq<N> *>(m->queue);
		delete[] static_cast<tp_item<N> *>(m->out);
		return 0;
	}
};

static int mc_setup(struct config *cfg, const struct options *opt)
{
	struct mc *m = static_cast<struct mc *>(calloc(1, sizeof(*m)));

	if (!m)
		return -ENOMEM;
	cfg->state = m;
	m->prods = static_cast<struct mc_producer *>(
		calloc(cfg->producers, sizeof(*m->prods)));
	if (!m->prods)
		return -ENOMEM;
	return tp_item_dispatch<mc_make>(cfg, 0, cfg, opt, m);
}

static void mc_teardown(struct config *cfg)
{
	struct mc *m = static_cast<struct mc *>(cfg->state);

	if (!m)
		return;
	tp_item_dispatch<mc_free>(cfg, 0, cfg, m);
	free(m->prods);
	free(m);
}

static void *mc_producer_attach(struct config *cfg, unsigned int i)
{
	struct mc *m = static_cast<struct mc *>(cfg->state);

	return &m->prods[i];
}

static void mc_json(const struct config *cfg)
{
	printf("\"slots\":%u,", cfg->slots);
}

template <size_t N>
static int mc_send(struct producer *p, struct config *cfg,
		   unsigned char *msg, uint64_t value, struct send_state *st)
{
	struct mc_producer *mp = static_cast<struct mc_producer *>(p->handle);
	mcq<N> *q = static_cast<mcq<N> *>(
		static_cast<struct mc *>(cfg->state)->queue);
	tp_item<N> *it = static_cast<tp_item<N> *>(mp->items);

	(void)msg;
	tp_item_set(it, value);
	while (unlikely(!q->try_enqueue(*mp->token, *it))) {
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	return 0;
}

template <size_t N>
static int mc_send_bulk(struct producer *p, struct config *cfg,
			unsigned char *msg, const uint64_t *values,
			unsigned int n, struct send_state *st)
{
	struct mc_producer *mp = static_cast<struct mc_producer *>(p->handle);
	mcq<N> *q = static_cast<mcq<N> *>(
		static_cast<struct mc *>(cfg->state)->queue);
	tp_item<N> *items = static_cast<tp_item<N> *>(mp->items);
	unsigned int i;

	(void)msg;
	for (i = 0; i < n; i++)
		tp_item_set(&items[i], values[i]);
	/* All or nothing: the share always has room for a batch, later. */
	while (unlikely(!q->try_enqueue_bulk(*mp->token, items, n))) {
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	return 0;
}

template <size_t N>
static int mc_pop(struct config *cfg, struct consumer_state *cs,
		  unsigned int batch)
{
	struct mc *m = static_cast<struct mc *>(cfg->state);
	mcq<N> *q = static_cast<mcq<N> *>(m->queue);
	tp_item<N> *out = static_cast<tp_item<N> *>(m->out);
	size_t i, n;

	n = q->try_dequeue_bulk(*m->ctok, out,
				batch < ITEM_POP ? batch : ITEM_POP);
	for (i = 0; i < n; i++)
		tp_item_take(cs, &out[i]);
	return (int)n;
}

template <size_t N> struct mc_produce_run {
	static int call(struct producer *p, unsigned char *msg)
	{
		struct config *cfg = p->run->cfg;
		struct mc_producer *mp =
			static_cast<struct mc_producer *>(p->handle);

		tp_items_fill(static_cast<tp_item<N> *>(mp->items),
			      cfg->push_batch, msg, cfg->payload);
		if (cfg->push_batch > 1)
			tp_produce_batch(p, msg, mc_send_bulk<N>);
		else
			tp_produce(p, msg, mc_send<N>);
		return 0;
	}
};

template <size_t N> struct mc_consume_run {
	static int call(struct run *run, struct consumer_state *cs)
	{
		struct mc *m = static_cast<struct mc *>(run->cfg->state);

		try {
			m->ctok = new moodycamel::ConsumerToken(
				*static_cast<mcq<N> *>(m->queue));
		} catch (const std::bad_alloc &) {
			tp_run_fail(run, "moodycamel: out of memory");
			return -ENOMEM;
		}
		tp_consume_spin(run, cs, mc_pop<N>);
		delete m->ctok;
		m->ctok = NULL;
		return 0;
	}
};

static void mc_produce(struct producer *p, unsigned char *msg)
{
	tp_item_dispatch<mc_produce_run>(p->run->cfg, 0, p, msg);
}

static void mc_consume(struct run *run, struct consumer_state *cs)
{
	tp_item_dispatch<mc_consume_run>(run->cfg, 0, run, cs);
}

extern "C" {

extern const struct peer_ring tp_moodycamel;

const struct peer_ring tp_moodycamel = {
	.name = "moodycamel",
	.cls = CLASS_MPSC,
	.is_lull = false,
	.target = true,
	.kernel = true,
	.push_batch = 1,
	.setup = mc_setup,
	.producer_attach = mc_producer_attach,
	.run_open = NULL,
	.run_close = NULL,
	.produce = mc_produce,
	.end_stream = NULL,
	.consume = mc_consume,
	.consumer_exit = NULL,
	.counters = NULL,
	.json = mc_json,
	.teardown = mc_teardown,
};

} /* extern "C" */
