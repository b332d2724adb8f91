/* SPDX-License-Identifier: MIT */
/*
 * test/lib/ledger.h - no loss, no duplicate, no reorder, per producer.
 *
 * Each producer numbers its records 0, 1, 2, ... (a struct stamp, topo.h,
 * or a stamp of the program's own).  The producer side notes what it
 * committed; the consumer side notes what it was handed; the first record
 * that breaks "in order, once, nothing missing" is kept as a message.
 * Aborted records are taken back with ledger_drop() by the producer before
 * any later record of its own.
 *
 *	struct ledger l;
 *	ledger_init(&l, nproducers);
 *	producer p:  if (stamp_send(t, prod, p, seq) == 0) ledger_sent(&l, p, seq);
 *	consumer:    if (!ledger_got(&l, st.producer, st.seq)) fail(ledger_why(&l));
 *	at the end:  if (!ledger_complete(&l)) fail(ledger_why(&l));
 *	ledger_fini(&l);
 *
 * A consumer that cannot read the seq from every record (a record too
 * short for its stamp) asks ledger_expect() which one must come, and one
 * that looks at a record before taking it (a peek, a record left in place
 * to come back) checks it with ledger_check(), which takes nothing.
 *
 * Threads: each side is one thread per producer (a producer's ledger_sent()
 * and ledger_drop(); the consumer's ledger_got(), ledger_check(),
 * ledger_expect()), and the two sides may run at once.  Any thread - a
 * watchdog - may read the counts (ledger_count_sent(), ledger_count_got())
 * and ledger_failed() and ledger_why() at any time.
 * ledger_complete() runs once the producers are done.
 */
#ifndef LULL_TEST_LIB_LEDGER_H
#define LULL_TEST_LIB_LEDGER_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* One producer's; what each side writes lives 128 bytes from the other. */
struct ledger_producer {
	/* The producer's side. */
	alignas(128) _Atomic uint64_t sent; /* committed: seqs 0..sent-1 */
	_Atomic uint64_t dropped; /* of which aborted (never to arrive) */
	/* The aborted seqs, ascending: the producer appends under lock. */
	pthread_mutex_t lock;
	uint64_t *drops;
	unsigned ndrops, drops_cap;
	/* The consumer's side. */
	alignas(128) _Atomic uint64_t got; /* records handed to it */
	uint64_t next;       /* the seq it must get next */
	unsigned drops_seen; /* drops it has skipped */
};

struct ledger {
	unsigned nproducers;
	struct ledger_producer *p;
	_Atomic int state; /* 0, 1 while the first failure writes why, 2 */
	char why[200];     /* the first failure */
};

/* 0, or -ENOMEM. */
int ledger_init(struct ledger *l, unsigned nproducers);
void ledger_fini(struct ledger *l);
/* Producer @producer committed record @seq (the next of its own). */
void ledger_sent(struct ledger *l, unsigned producer, uint64_t seq);
/* Record @seq of @producer, claimed and counted as sent, was aborted. */
void ledger_drop(struct ledger *l, unsigned producer, uint64_t seq);
/*
 * The consumer was handed record @seq of @producer: false, and
 * ledger_why() says what went wrong (a duplicate, a gap, an unknown
 * producer), when that breaks the order.
 */
bool ledger_got(struct ledger *l, unsigned producer, uint64_t seq);
/* Whether ledger_got() would take record @seq of @producer; takes nothing. */
bool ledger_check(struct ledger *l, unsigned producer, uint64_t seq);
/* The seq the consumer must get next from @producer (below nproducers). */
uint64_t ledger_expect(struct ledger *l, unsigned producer);
/* Everything sent and not dropped arrived: false (with why) otherwise. */
bool ledger_complete(struct ledger *l);

/* Records @producer has noted as sent (aborted ones included); any thread. */
uint64_t ledger_count_sent(struct ledger *l, unsigned producer);
/* Records of @producer the consumer has taken; any thread. */
uint64_t ledger_count_got(struct ledger *l, unsigned producer);
/* Whether a record broke the order (or ledger_complete() failed). */
bool ledger_failed(struct ledger *l);
/* The first failure, or "" when there was none. */
const char *ledger_why(struct ledger *l);

#endif
