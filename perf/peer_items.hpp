/* SPDX-License-Identifier: MIT */
/*
 * peer_items.hpp - what the C++ peers (peer_boost.cpp, peer_moodycamel.cpp)
 * share: their queues hold messages by value, so a message is a fixed-size
 * item, one type per payload size, and each ring's code is a template over
 * that size, instantiated once per size by tp_item_dispatch().
 *
 * Item sizes: 8, 64 and 512 bytes, the benchmark's payloads; a payload in
 * between travels in the next size up (the whole item is copied), and one
 * above 512 bytes is skipped.  Each side copies each message once, as the
 * slot rings' sides do with their slabs: the producer sets the value in an
 * item of its own (filled with the message once per run) and the queue's
 * push copies the item in; the consumer's pop copies items out into an
 * array on the heap, then takes the value from each one's first 8 bytes.
 */
#ifndef LULL_PERF_PEER_ITEMS_HPP
#define LULL_PERF_PEER_ITEMS_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "throughput.h"

#define ITEM_MAX 512u

template <size_t N> struct tp_item {
	alignas(8) unsigned char data[N];
};

/* The item size that carries @payload bytes, 0 when none does. */
static inline size_t tp_item_size(size_t payload)
{
	if (payload <= 8)
		return 8;
	if (payload <= 64)
		return 64;
	if (payload <= ITEM_MAX)
		return ITEM_MAX;
	return 0;
}

/*
 * Calls F<N>::call(args...) for @cfg's item size N; a payload no item holds
 * marks the configuration skipped, says so, and returns @none.
 */
template <template <size_t> class F, typename R, typename... A>
static inline R tp_item_dispatch(struct config *cfg, R none, A... args)
{
	switch (tp_item_size(cfg->payload)) {
	case 8:
		return F<8>::call(args...);
	case 64:
		return F<64>::call(args...);
	case ITEM_MAX:
		return F<ITEM_MAX>::call(args...);
	}
	if (!cfg->skipped)
		fprintf(stderr,
			"throughput: %s P=%u payload=%zu skipped: its items "
			"hold at most %u bytes\n",
			cfg->ring->name, cfg->producers, cfg->payload,
			ITEM_MAX);
	cfg->skipped = true;
	return none;
}

/*
 * A producer's own items: @n of them (one per message of a push), each
 * holding the message of @msg, to which each push writes its value.
 */
template <size_t N>
static inline tp_item<N> *tp_items_new(unsigned int n)
{
	return new (std::nothrow) tp_item<N>[n]();
}

template <size_t N>
static inline void tp_items_fill(tp_item<N> *items, unsigned int n,
				 const unsigned char *msg, size_t payload)
{
	for (unsigned int i = 0; i < n; i++)
		memcpy(items[i].data, msg, payload < N ? payload : N);
}

template <size_t N>
static inline void tp_item_set(tp_item<N> *it, uint64_t value)
{
	memcpy(it->data, &value, 8);
}

/* Taken by the consumer: the value in the first 8 bytes. */
template <size_t N>
static inline __attribute__((always_inline)) void
tp_item_take(struct consumer_state *cs, const tp_item<N> *it)
{
	uint64_t v;

	memcpy(&v, it->data, 8);
	tp_take_value(cs, v);
}

/*
 * Equal memory (throughput.c): the largest power-of-two count of
 * @item_size items that fits in @capacity bytes, at least 4.
 */
static inline size_t tp_item_slots(size_t capacity, size_t item_size)
{
	size_t n = 4;

	while (n <= capacity / item_size / 2)
		n *= 2;
	return n;
}

#endif /* LULL_PERF_PEER_ITEMS_HPP */
