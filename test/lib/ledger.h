/* SPDX-License-Identifier: MIT */
/*
 * test/lib/ledger.h - no loss, no duplicate, no reorder, per producer.
 *
 * Each producer numbers its records 0, 1, 2, ... (a struct stamp, topo.h).
 * The producer side notes what it committed; the consumer side notes what
 * it was handed; the first record that breaks "in order, once, nothing
 * missing" is kept as a message.  Aborted records are taken back with
 * ledger_drop() by the producer before any later record of its own.
 *
 *	struct ledger l;
 *	ledger_init(&l, nproducers);
 *	producer p:  if (stamp_send(t, prod, p, seq) == 0) ledger_sent(&l, p, seq);
 *	consumer:    if (!ledger_got(&l, st.producer, st.seq)) fail(l.why);
 *	at the end:  if (!ledger_complete(&l)) fail(l.why);
 *	ledger_fini(&l);
 *
 * ledger_sent() and ledger_got() may run on different threads at once for
 * the same producer (they touch different counters, atomically); each
 * side must be one thread per producer.  ledger_drop() grows an array the
 * consumer side reads: call it while the consumer is not in ledger_got().
 */
#ifndef LULL_TEST_LIB_LEDGER_H
#define LULL_TEST_LIB_LEDGER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct ledger_producer {
	_Atomic uint64_t sent;    /* records committed: seqs 0..sent-1 */
	_Atomic uint64_t dropped; /* of which aborted (never to arrive) */
	uint64_t next;            /* the seq the consumer must get next */
	uint64_t got;             /* records handed to the consumer */
	uint64_t *drops;          /* the aborted seqs, ascending */
	unsigned ndrops, drops_cap, drops_seen;
};

struct ledger {
	unsigned nproducers;
	struct ledger_producer *p;
	bool failed;
	char why[200]; /* the first failure */
};

/* 0, or -ENOMEM. */
int ledger_init(struct ledger *l, unsigned nproducers);
void ledger_fini(struct ledger *l);
/* Producer @producer committed record @seq (the next of its own). */
void ledger_sent(struct ledger *l, unsigned producer, uint64_t seq);
/* Record @seq of @producer, claimed and counted as sent, was aborted. */
void ledger_drop(struct ledger *l, unsigned producer, uint64_t seq);
/*
 * The consumer was handed record @seq of @producer: false, and l->why
 * says what went wrong (a duplicate, a gap, an unknown producer), when
 * that breaks the order.
 */
bool ledger_got(struct ledger *l, unsigned producer, uint64_t seq);
/* Everything sent and not dropped arrived: false (with why) otherwise. */
bool ledger_complete(struct ledger *l);

#endif
