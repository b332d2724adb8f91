/* SPDX-License-Identifier: MIT */
/*
 * peer_boost.cpp - boost.lockfree's spsc_queue, built only where the
 * compiler finds <boost/lockfree/spsc_queue.hpp> (libboost-dev; the
 * Makefile leaves this file out otherwise, and peers.c then lists both as
 * not built):
 *   boost-spsc       push(const T &): one message per push.
 *   boost-spsc-bulk  push(const T *, n): --producer-batch messages per push,
 *                    32 when the option is not given (at 1 it would be
 *                    boost-spsc); a push that finds room for only part of
 *                    a batch is continued with the rest.
 * The consumer of both pop(T *, n)s up to 32 at a time (fewer with a
 * smaller --batch).  Messages are items by value (peer_items.hpp).  Equal
 * memory: the largest power-of-two count of items that fits in --capacity
 * (spsc_queue keeps one of them free).  Both sides spin, then yield
 * (bench_backoff_wait()).
 */
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <boost/lockfree/spsc_queue.hpp>

#include "peer_items.hpp"

template <size_t N> using spsc = boost::lockfree::spsc_queue<tp_item<N> >;

struct boost_ring {
	void *queue;   /* spsc<N> */
	void *items;   /* the producer's own: push_batch items */
	void *out;     /* the consumer's: ITEM_POP items */
	size_t slots;
};

template <size_t N> struct boost_make {
	static int call(struct config *cfg, const struct options *opt,
			struct boost_ring *b)
	{
		b->slots = tp_item_slots(opt->capacity, sizeof(tp_item<N>));
		try {
			b->queue = new spsc<N>(b->slots - 1);
		} catch (const std::bad_alloc &) {
			return -ENOMEM;
		}
		b->items = tp_items_new<N>(cfg->push_batch);
		b->out = tp_items_new<N>(ITEM_POP);
		return b->items && b->out ? 0 : -ENOMEM;
	}
};

template <size_t N> struct boost_free {
	static int call(struct boost_ring *b)
	{
		delete static_cast<spsc<N> *>(b->queue);
		delete[] static_cast<tp_item<N> *>(b->items);
		delete[] static_cast<tp_item<N> *>(b->out);
		return 0;
	}
};

static int boost_setup(struct config *cfg, const struct options *opt)
{
	struct boost_ring *b =
		static_cast<struct boost_ring *>(calloc(1, sizeof(*b)));

	if (!b)
		return -ENOMEM;
	cfg->state = b;
	return tp_item_dispatch<boost_make>(cfg, 0, cfg, opt, b);
}

static void boost_teardown(struct config *cfg)
{
	struct boost_ring *b = static_cast<struct boost_ring *>(cfg->state);

	if (!b)
		return;
	tp_item_dispatch<boost_free>(cfg, 0, b);
	free(b);
}

static void boost_json(const struct config *cfg)
{
	const struct boost_ring *b =
		static_cast<const struct boost_ring *>(cfg->state);

	printf("\"slots\":%zu,", b->slots);
}

template <size_t N>
static int boost_send(struct producer *p, struct config *cfg,
		      unsigned char *msg, uint64_t value,
		      struct send_state *st)
{
	struct boost_ring *b = static_cast<struct boost_ring *>(cfg->state);
	spsc<N> *q = static_cast<spsc<N> *>(b->queue);
	tp_item<N> *it = static_cast<tp_item<N> *>(b->items);

	(void)msg;
	tp_item_set(it, value);
	while (unlikely(!q->push(*it))) {
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	return 0;
}

template <size_t N>
static int boost_send_bulk(struct producer *p, struct config *cfg,
			   unsigned char *msg, const uint64_t *values,
			   unsigned int n, struct send_state *st)
{
	struct boost_ring *b = static_cast<struct boost_ring *>(cfg->state);
	spsc<N> *q = static_cast<spsc<N> *>(b->queue);
	tp_item<N> *items = static_cast<tp_item<N> *>(b->items);
	unsigned int i, done = 0;

	(void)msg;
	for (i = 0; i < n; i++)
		tp_item_set(&items[i], values[i]);
	for (;;) {
		done += (unsigned int)q->push(items + done, n - done);
		if (likely(done == n))
			return 0;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
}

template <size_t N>
static int boost_pop(struct config *cfg, struct consumer_state *cs,
		     unsigned int batch)
{
	struct boost_ring *b = static_cast<struct boost_ring *>(cfg->state);
	spsc<N> *q = static_cast<spsc<N> *>(b->queue);
	tp_item<N> *out = static_cast<tp_item<N> *>(b->out);
	size_t i, n;

	n = q->pop(out, batch < ITEM_POP ? batch : ITEM_POP);
	for (i = 0; i < n; i++)
		tp_item_take(cs, &out[i]);
	return (int)n;
}

template <size_t N> struct boost_produce_one {
	static int call(struct producer *p, unsigned char *msg)
	{
		struct config *cfg = p->run->cfg;
		struct boost_ring *b =
			static_cast<struct boost_ring *>(cfg->state);

		tp_items_fill(static_cast<tp_item<N> *>(b->items),
			      cfg->push_batch, msg, cfg->payload);
		tp_produce(p, msg, boost_send<N>);
		return 0;
	}
};

template <size_t N> struct boost_produce_bulk {
	static int call(struct producer *p, unsigned char *msg)
	{
		struct config *cfg = p->run->cfg;
		struct boost_ring *b =
			static_cast<struct boost_ring *>(cfg->state);

		tp_items_fill(static_cast<tp_item<N> *>(b->items),
			      cfg->push_batch, msg, cfg->payload);
		tp_produce_batch(p, msg, boost_send_bulk<N>);
		return 0;
	}
};

template <size_t N> struct boost_consume {
	static int call(struct run *run, struct consumer_state *cs)
	{
		tp_consume_spin(run, cs, boost_pop<N>);
		return 0;
	}
};

static void boost_produce(struct producer *p, unsigned char *msg)
{
	tp_item_dispatch<boost_produce_one>(p->run->cfg, 0, p, msg);
}

static void boost_bulk_produce(struct producer *p, unsigned char *msg)
{
	tp_item_dispatch<boost_produce_bulk>(p->run->cfg, 0, p, msg);
}

static void boost_consume_run(struct run *run, struct consumer_state *cs)
{
	tp_item_dispatch<boost_consume>(run->cfg, 0, run, cs);
}

extern "C" {

extern const struct peer_ring tp_boost_spsc, tp_boost_spsc_bulk;

const struct peer_ring tp_boost_spsc = {
	.name = "boost-spsc",
	.cls = CLASS_SPSC,
	.is_lull = false,
	.target = false,
	.kernel = true,
	.push_batch = 0,
	.setup = boost_setup,
	.producer_attach = NULL,
	.run_open = NULL,
	.run_close = NULL,
	.produce = boost_produce,
	.end_stream = NULL,
	.consume = boost_consume_run,
	.consumer_exit = NULL,
	.counters = NULL,
	.json = boost_json,
	.teardown = boost_teardown,
};

const struct peer_ring tp_boost_spsc_bulk = {
	.name = "boost-spsc-bulk",
	.cls = CLASS_SPSC,
	.is_lull = false,
	.target = false,
	.kernel = true,
	.push_batch = 32,
	.setup = boost_setup,
	.producer_attach = NULL,
	.run_open = NULL,
	.run_close = NULL,
	.produce = boost_bulk_produce,
	.end_stream = NULL,
	.consume = boost_consume_run,
	.consumer_exit = NULL,
	.counters = NULL,
	.json = boost_json,
	.teardown = boost_teardown,
};

} /* extern "C" */
