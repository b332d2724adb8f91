/* SPDX-License-Identifier: MIT */
/* test/lib/ledger.c - see ledger.h. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

enum { LEDGER_FINE, LEDGER_WRITING, LEDGER_FAILED };

__attribute__((format(printf, 2, 3)))
static void ledger_fail(struct ledger *l, const char *fmt, ...)
{
	int fine = LEDGER_FINE;
	va_list ap;

	/* The first failure, from either side, owns why. */
	if (!atomic_compare_exchange_strong_explicit(&l->state, &fine,
						     LEDGER_WRITING,
						     memory_order_relaxed,
						     memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(l->why, sizeof(l->why), fmt, ap);
	va_end(ap);
	/* Pairs with the acquire in ledger_failed(): why is complete. */
	atomic_store_explicit(&l->state, LEDGER_FAILED, memory_order_release);
}

int ledger_init(struct ledger *l, unsigned nproducers)
{
	size_t size = (nproducers ? nproducers : 1) * sizeof(*l->p);

	memset(l, 0, sizeof(*l));
	/* calloc() would not align the sides' 128-byte lines. */
	l->p = aligned_alloc(alignof(struct ledger_producer), size);
	if (!l->p)
		return -ENOMEM;
	memset(l->p, 0, size);
	l->nproducers = nproducers;
	atomic_init(&l->state, LEDGER_FINE);
	for (unsigned i = 0; i < nproducers; i++) {
		atomic_init(&l->p[i].sent, 0);
		atomic_init(&l->p[i].dropped, 0);
		atomic_init(&l->p[i].got, 0);
		pthread_mutex_init(&l->p[i].lock, NULL);
	}
	return 0;
}

void ledger_fini(struct ledger *l)
{
	for (unsigned i = 0; i < l->nproducers; i++) {
		pthread_mutex_destroy(&l->p[i].lock);
		free(l->p[i].drops);
	}
	free(l->p);
	l->p = NULL;
}

void ledger_sent(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p;
	uint64_t sent;

	if (producer >= l->nproducers) {
		ledger_fail(l, "sent by producer %u of %u", producer,
			    l->nproducers);
		return;
	}
	p = &l->p[producer];
	/* Relaxed: only this producer's thread stores sent. */
	sent = atomic_load_explicit(&p->sent, memory_order_relaxed);
	if (seq != sent) {
		ledger_fail(l, "producer %u sent seq %llu, expected %llu",
			    producer, (unsigned long long)seq,
			    (unsigned long long)sent);
		return;
	}
	/* Pairs with the acquire in ledger_count_sent(): a watchdog that
	 * sees the count may expect the record delivered. */
	atomic_store_explicit(&p->sent, seq + 1, memory_order_release);
}

void ledger_drop(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p;
	uint64_t *d;

	if (producer >= l->nproducers)
		return;
	p = &l->p[producer];
	pthread_mutex_lock(&p->lock);
	if (p->ndrops == p->drops_cap) {
		p->drops_cap = p->drops_cap ? 2 * p->drops_cap : 16;
		d = realloc(p->drops, p->drops_cap * sizeof(*d));
		if (!d) {
			pthread_mutex_unlock(&p->lock);
			ledger_fail(l, "out of memory");
			return;
		}
		p->drops = d;
	}
	p->drops[p->ndrops++] = seq;
	pthread_mutex_unlock(&p->lock);
	/*
	 * Pairs with the acquire in skip_drops(): a consumer that sees the
	 * count takes the lock for the drops.  The producer drops a record
	 * before it sends its next one, and the ring orders that send before
	 * the consumer's read of it, so a gap the consumer meets is always
	 * counted here already.
	 */
	atomic_fetch_add_explicit(&p->dropped, 1, memory_order_release);
}

/* The consumer's next seq for @p, past any dropped ones. */
static void skip_drops(struct ledger_producer *p)
{
	/* Most rings never abort: the lock only once there are drops. */
	if (atomic_load_explicit(&p->dropped, memory_order_acquire) ==
	    p->drops_seen)
		return;
	pthread_mutex_lock(&p->lock);
	while (p->drops_seen < p->ndrops && p->drops[p->drops_seen] <= p->next)
		if (p->drops[p->drops_seen++] == p->next)
			p->next++;
	pthread_mutex_unlock(&p->lock);
}

/* Whether @seq of @producer is the consumer's next; fails the ledger if not. */
static struct ledger_producer *expected(struct ledger *l, unsigned producer,
					uint64_t seq)
{
	struct ledger_producer *p;

	if (producer >= l->nproducers) {
		ledger_fail(l, "a record of producer %u (of %u)", producer,
			    l->nproducers);
		return NULL;
	}
	p = &l->p[producer];
	skip_drops(p);
	if (seq < p->next) {
		ledger_fail(l, "producer %u: seq %llu again (expected %llu): "
			    "a duplicate or a reorder", producer,
			    (unsigned long long)seq,
			    (unsigned long long)p->next);
		return NULL;
	}
	if (seq > p->next) {
		ledger_fail(l, "producer %u: seq %llu, expected %llu: %llu "
			    "records lost or reordered", producer,
			    (unsigned long long)seq,
			    (unsigned long long)p->next,
			    (unsigned long long)(seq - p->next));
		return NULL;
	}
	return p;
}

bool ledger_got(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p = expected(l, producer, seq);
	uint64_t got;

	if (!p)
		return false;
	p->next = seq + 1;
	/* Relaxed: only the consumer stores got. */
	got = atomic_load_explicit(&p->got, memory_order_relaxed);
	/* Pairs with the acquire in ledger_count_got(). */
	atomic_store_explicit(&p->got, got + 1, memory_order_release);
	return !ledger_failed(l);
}

bool ledger_check(struct ledger *l, unsigned producer, uint64_t seq)
{
	return expected(l, producer, seq) && !ledger_failed(l);
}

uint64_t ledger_expect(struct ledger *l, unsigned producer)
{
	struct ledger_producer *p = &l->p[producer];

	skip_drops(p);
	return p->next;
}

bool ledger_complete(struct ledger *l)
{
	for (unsigned i = 0; i < l->nproducers; i++) {
		struct ledger_producer *p = &l->p[i];
		uint64_t sent = ledger_count_sent(l, i);
		uint64_t live = sent - atomic_load_explicit(
						&p->dropped, memory_order_acquire);
		uint64_t got = ledger_count_got(l, i);

		skip_drops(p);
		if (got != live || p->next < sent)
			ledger_fail(l, "producer %u: %llu of %llu records "
				    "arrived", i, (unsigned long long)got,
				    (unsigned long long)live);
	}
	return !ledger_failed(l);
}

uint64_t ledger_count_sent(struct ledger *l, unsigned producer)
{
	/* Pairs with the release in ledger_sent(). */
	return atomic_load_explicit(&l->p[producer].sent,
				    memory_order_acquire);
}

uint64_t ledger_count_got(struct ledger *l, unsigned producer)
{
	/* Pairs with the release in ledger_got(). */
	return atomic_load_explicit(&l->p[producer].got, memory_order_acquire);
}

bool ledger_failed(struct ledger *l)
{
	/*
	 * A failure still writing its message counts: its writer is on its
	 * way.  Pairs with the release in ledger_fail() once it is written.
	 */
	return atomic_load_explicit(&l->state, memory_order_acquire) !=
	       LEDGER_FINE;
}

const char *ledger_why(struct ledger *l)
{
	int state;

	/*
	 * A failure being noted is a vsnprintf() away from complete (its
	 * writer cannot block).  Pairs with the release in ledger_fail().
	 */
	while ((state = atomic_load_explicit(&l->state,
					     memory_order_acquire)) ==
	       LEDGER_WRITING)
		sched_yield();
	return state == LEDGER_FINE ? "" : l->why;
}
