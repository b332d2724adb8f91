/* SPDX-License-Identifier: MIT */
/* test/lib/ledger.c - see ledger.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"

static void ledger_fail(struct ledger *l, const char *fmt, ...)
{
	va_list ap;

	if (l->failed)
		return;
	l->failed = true;
	va_start(ap, fmt);
	vsnprintf(l->why, sizeof(l->why), fmt, ap);
	va_end(ap);
}

int ledger_init(struct ledger *l, unsigned nproducers)
{
	memset(l, 0, sizeof(*l));
	l->p = calloc(nproducers ? nproducers : 1, sizeof(*l->p));
	if (!l->p)
		return -ENOMEM;
	l->nproducers = nproducers;
	for (unsigned i = 0; i < nproducers; i++) {
		atomic_init(&l->p[i].sent, 0);
		atomic_init(&l->p[i].dropped, 0);
	}
	return 0;
}

void ledger_fini(struct ledger *l)
{
	for (unsigned i = 0; i < l->nproducers; i++)
		free(l->p[i].drops);
	free(l->p);
	l->p = NULL;
}

void ledger_sent(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p;

	if (producer >= l->nproducers) {
		ledger_fail(l, "sent by producer %u of %u", producer,
			    l->nproducers);
		return;
	}
	p = &l->p[producer];
	if (seq != atomic_load_explicit(&p->sent, memory_order_relaxed)) {
		ledger_fail(l, "producer %u sent seq %llu, expected %llu",
			    producer, (unsigned long long)seq,
			    (unsigned long long)atomic_load(&p->sent));
		return;
	}
	atomic_store_explicit(&p->sent, seq + 1, memory_order_release);
}

void ledger_drop(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p;
	uint64_t *d;

	if (producer >= l->nproducers)
		return;
	p = &l->p[producer];
	if (p->ndrops == p->drops_cap) {
		p->drops_cap = p->drops_cap ? 2 * p->drops_cap : 16;
		d = realloc(p->drops, p->drops_cap * sizeof(*d));
		if (!d) {
			ledger_fail(l, "out of memory");
			return;
		}
		p->drops = d;
	}
	p->drops[p->ndrops++] = seq;
	atomic_fetch_add_explicit(&p->dropped, 1, memory_order_release);
}

/* The consumer's next seq for @p, past any dropped ones. */
static void skip_drops(struct ledger_producer *p)
{
	while (p->drops_seen < p->ndrops && p->drops[p->drops_seen] <= p->next)
		if (p->drops[p->drops_seen++] == p->next)
			p->next++;
}

bool ledger_got(struct ledger *l, unsigned producer, uint64_t seq)
{
	struct ledger_producer *p;

	if (producer >= l->nproducers) {
		ledger_fail(l, "a record of producer %u (of %u)", producer,
			    l->nproducers);
		return false;
	}
	p = &l->p[producer];
	skip_drops(p);
	if (seq < p->next) {
		ledger_fail(l, "producer %u: seq %llu again (expected %llu): "
			    "a duplicate or a reorder", producer,
			    (unsigned long long)seq,
			    (unsigned long long)p->next);
		return false;
	}
	if (seq > p->next) {
		ledger_fail(l, "producer %u: seq %llu, expected %llu: %llu "
			    "records lost or reordered", producer,
			    (unsigned long long)seq,
			    (unsigned long long)p->next,
			    (unsigned long long)(seq - p->next));
		return false;
	}
	p->next = seq + 1;
	p->got++;
	return !l->failed;
}

bool ledger_complete(struct ledger *l)
{
	for (unsigned i = 0; i < l->nproducers; i++) {
		struct ledger_producer *p = &l->p[i];
		uint64_t sent = atomic_load(&p->sent);
		uint64_t live = sent - atomic_load(&p->dropped);

		skip_drops(p);
		if (p->got != live || p->next < sent)
			ledger_fail(l, "producer %u: %llu of %llu records "
				    "arrived", i, (unsigned long long)p->got,
				    (unsigned long long)live);
	}
	return !l->failed;
}
