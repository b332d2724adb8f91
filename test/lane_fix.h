/* SPDX-License-Identifier: MIT */
/*
 * lane_fix.h - what the suites of batches and lanes (test_ring_batches.c,
 * test_ring_lanes.c) add to ring_fix.h: a LANES producer as a struct topo,
 * with either family's calls, and each family's batch calls.
 *
 * A LANES producer writes its lane as an SPSC producer writes its ring, so
 * ring_fix.h's model holds for it unchanged: records one after the other,
 * padding at the wrap, and an abort that leaves nothing (its topo is not
 * MPSC for topo_is_mpsc()).  Its rings have two lanes, so that every check
 * also sees the consumer step over a lane that stays empty.
 *
 * BATCH_TEST(name, seconds) { ... b ... } runs a check written once against
 * `const struct family *b` as one Test() in each of the suites spsc, mpsc,
 * lanes_spsc (a LANES producer calling lull_spsc_*) and lanes_mpsc (calling
 * lull_mpsc_*).
 *
 * For checks across lanes, where one model per ring does not apply:
 * struct lanes, a LANES ring whose producer p sends records stamped p, seq
 * (test/lib/topo.h; even producers by the lull_spsc_* calls, odd ones by
 * lull_mpsc_*), and struct got, what the consumer was handed, checked for
 * each producer's order as it arrives.
 *
 * Threads: a producer that writes (or detaches) once the consumer sleeps
 * in its park, which it observes (park word and thread state, test/lib's
 * proc.h) instead of guessing; and producers of random batches and writes
 * (struct tprod) with the consumer's check (tconsume()): each producer's
 * order and content through a struct ledger, and every batch whole, its
 * records one after the other in a read.  Threads never assert: they note
 * their first failure for the test thread.
 */
#ifndef LULL_TEST_LANE_FIX_H
#define LULL_TEST_LANE_FIX_H

#include <unistd.h>

#include "lib/ledger.h"
#include "lib/proc.h"
#include "ring_fix.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The rings of the lane topologies: the fixture's producer takes lane 0. */
#define LANE_FIX_LANES 2u

static const struct topo topo_lanes_spsc = {
	.flags = LULL_RING_LANES(LANE_FIX_LANES),
	.name = "lanes/spsc",
	.write = lull_spsc_write,
	.writev = lull_spsc_writev,
	.claim = lull_spsc_claim,
	.commit = lull_spsc_commit,
	.abort = lull_spsc_abort,
};

static const struct topo topo_lanes_mpsc = {
	.flags = LULL_RING_LANES(LANE_FIX_LANES),
	.name = "lanes/mpsc",
	.write = lull_mpsc_write,
	.writev = lull_mpsc_writev,
	.claim = lull_mpsc_claim,
	.commit = lull_mpsc_commit,
	.abort = lull_mpsc_abort,
};

/* A topology with its family's batch calls. */
struct family {
	const struct topo *t;
	int (*claim_batch)(struct lull_producer *prod,
			   struct lull_claim *claims, unsigned count);
	int (*write_batch)(struct lull_producer *prod,
			   const struct lull_record *recs, unsigned count);
	int (*write_array)(struct lull_producer *prod, int32_t type,
			   const void *items, size_t item_len, unsigned count);
	/* The MPSC ring's shared lane: an abort leaves padding behind. */
	bool shared;
};

static const struct family fam_spsc = {
	&topo_spsc, lull_spsc_claim_batch, lull_spsc_write_batch,
	lull_spsc_write_array, false
};
static const struct family fam_mpsc = {
	&topo_mpsc, lull_mpsc_claim_batch, lull_mpsc_write_batch,
	lull_mpsc_write_array, true
};
static const struct family fam_lanes_spsc = {
	&topo_lanes_spsc, lull_spsc_claim_batch, lull_spsc_write_batch,
	lull_spsc_write_array, false
};
static const struct family fam_lanes_mpsc = {
	&topo_lanes_mpsc, lull_mpsc_claim_batch, lull_mpsc_write_batch,
	lull_mpsc_write_array, false
};

#define BATCH_TEST(name, secs)                                               \
	static void name##_each(const struct family *b);                     \
	Test(spsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_each(&fam_spsc);                                      \
	}                                                                    \
	Test(mpsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_each(&fam_mpsc);                                      \
	}                                                                    \
	Test(lanes_spsc, name, .timeout = secs)                              \
	{                                                                    \
		name##_each(&fam_lanes_spsc);                                \
	}                                                                    \
	Test(lanes_mpsc, name, .timeout = secs)                              \
	{                                                                    \
		name##_each(&fam_lanes_mpsc);                                \
	}                                                                    \
	static void name##_each(const struct family *b)

/*
 * Bytes that look like committed record headers ({16, type 77} in every
 * 8-byte slot): what a claim that is then aborted leaves in its payloads,
 * so that a consumer that took any of it for a record would be caught.
 */
#define FAKE_TYPE 77

static void fill_fake_headers(void *dst, size_t len)
{
	int32_t slot[2] = { 16, FAKE_TYPE };
	uint8_t *p = dst;
	size_t i;

	for (i = 0; i + sizeof(slot) <= len; i += sizeof(slot))
		memcpy(p + i, slot, sizeof(slot));
	memset(p + i, 0x5a, len - i);
}

/* ------------------------------------------------------------------------
 * A LANES ring of stamped records, and what the consumer was handed
 */

#define SEC_NS 1000000000ll

/* A LANES ring and its producers; producer p stamps records as p. */
struct lanes {
	struct lull_ring *ring;
	unsigned n; /* producers attached so far (the array's length) */
	struct lull_producer *prod[LULL_RING_LANES_MAX];
	uint32_t seq[LULL_RING_LANES_MAX]; /* each one's next record */
};

/* Even producers use the lull_spsc_* calls, odd ones lull_mpsc_*. */
static const struct topo *family_of(unsigned p)
{
	return p % 2 ? &topo_lanes_mpsc : &topo_lanes_spsc;
}

static void lanes_attach(struct lanes *l)
{
	int ret = lull_producer_attach(l->ring, 0, &l->prod[l->n]);

	cr_assert_eq(ret, 0, "attach of producer %u = %d", l->n, ret);
	l->n++;
}

static void lanes_init(struct lanes *l, size_t cap, unsigned lanes,
		       unsigned attach)
{
	int ret;

	memset(l, 0, sizeof(*l));
	ret = lull_ring_create(&l->ring, cap, LULL_RING_LANES(lanes));
	cr_assert_eq(ret, 0, "create LANES(%u) = %d", lanes, ret);
	while (attach--)
		lanes_attach(l);
}

/* Producer @p sends its next record: 0 or the call's error. */
static int lanes_try(struct lanes *l, unsigned p)
{
	int ret = stamp_send(family_of(p), l->prod[p], p, l->seq[p]);

	if (ret == 0)
		l->seq[p]++;
	return ret;
}

static void lanes_send(struct lanes *l, unsigned p, unsigned count)
{
	while (count--) {
		int ret = lanes_try(l, p);

		cr_assert_eq(ret, 0, "producer %u, record %u = %d", p,
			     l->seq[p], ret);
	}
}

/* Detach every producer: the last detach shuts the ring down. */
static void lanes_fini_keep(struct lanes *l)
{
	for (unsigned p = 0; p < l->n; p++)
		if (l->prod[p])
			cr_assert_eq(lull_producer_detach(l->prod[p]), 0);
	memset(l->prod, 0, sizeof(l->prod));
}

static void lanes_fini(struct lanes *l)
{
	lanes_fini_keep(l);
	cr_assert_eq(lull_ring_destroy(l->ring), 0);
}

/* What the consumer was handed: each producer's records in its order. */
#define GOT_MAX 4096u

struct got {
	unsigned n, poisons;
	uint32_t next[LULL_RING_LANES_MAX];
	struct stamp st[GOT_MAX];
};

static int collect(const struct lull_record *rec, void *ctx)
{
	struct got *g = ctx;
	struct stamp st;
	char why[160];

	cr_assert_eq(g->poisons, 0, "type %d after the poison", rec->type);
	if (rec->type == LULL_TYPE_POISON) {
		g->poisons++;
		return LULL_READ_CONTINUE;
	}
	cr_assert_eq(stamp_check(rec, LULL_RING_LANES_MAX, &st, why,
				 sizeof(why)),
		     0, "%s", why);
	cr_assert_eq(st.seq, g->next[st.producer],
		     "producer %u: record %u, expected %u", st.producer,
		     st.seq, g->next[st.producer]);
	g->next[st.producer]++;
	cr_assert_lt(g->n, GOT_MAX);
	g->st[g->n++] = st;
	return LULL_READ_CONTINUE;
}

/* Read with varying limits until -EAGAIN, or (@to_end) the poison. */
static void got_drain(struct lull_ring *ring, struct got *g, bool to_end)
{
	unsigned limit = 1;
	int ret;

	while ((ret = lull_ring_read(ring, collect, g, limit)) > 0)
		limit = limit % 7 + 1;
	cr_assert_eq(ret, to_end ? -EPIPE : -EAGAIN, "read = %d", ret);
	cr_assert_eq(g->poisons, to_end ? 1u : 0u);
}

/* Every record the producers sent arrived. */
static void got_all(const struct lanes *l, const struct got *g)
{
	for (unsigned p = 0; p < l->n; p++)
		cr_assert_eq(g->next[p], l->seq[p],
			     "producer %u: %u of %u records arrived", p,
			     g->next[p], l->seq[p]);
}

/* The producer of the last record handed. */
static unsigned got_last(const struct got *g)
{
	cr_assert_gt(g->n, 0);
	return g->st[g->n - 1].producer;
}

/* Caller memory for a LANES region, with room to spare. */
static void lanes_region(struct region *r, size_t cap, unsigned n)
{
	ssize_t size = lull_ring_region_size_for(cap, LULL_RING_LANES(n));

	cr_assert_gt(size, 0);
	r->size = (size_t)size;
	r->alloc = (r->size + REGION_SLACK + REGION_ALIGN - 1) &
		   ~(size_t)(REGION_ALIGN - 1);
	r->mem = aligned_alloc(REGION_ALIGN, r->alloc);
	cr_assert_not_null(r->mem);
	memset(r->mem, 0xa5, r->alloc);
}

/* Producer @p sends @count records as one batch (odd p: mpsc calls). */
static int lanes_batch(struct lanes *l, unsigned p, unsigned count)
{
	const struct family *fam = p % 2 ? &fam_lanes_mpsc : &fam_lanes_spsc;
	static uint8_t buf[16][STAMP_MAX_LEN];
	struct lull_record recs[16];
	int ret;

	cr_assert_leq(count, 16);
	for (unsigned i = 0; i < count; i++) {
		stamp_fill(buf[i], p, l->seq[p] + i);
		recs[i] = (struct lull_record){ buf[i],
						(uint32_t)stamp_len(l->seq[p] + i),
						stamp_type(p) };
	}
	ret = fam->write_batch(l->prod[p], recs, count);
	if (ret == 0)
		l->seq[p] += count;
	return ret;
}

/* ------------------------------------------------------------------------
 * Threads: a producer that writes once the consumer sleeps, and producers
 * of batches of random sizes with a consumer that checks them
 */

struct waker {
	struct lanes *l;
	unsigned p;       /* the producer that writes */
	bool detach_all;  /* or: every producer detaches */
	pid_t consumer;   /* the consumer's thread */
	int ret;
};

/* Once the consumer sleeps in its park, write (or detach). */
static void *wake_when_parked(void *arg)
{
	struct waker *w = arg;
	uint64_t deadline = now_ms() + 10000;

	while (ring_park_word(w->l->ring) == RING_PARK_AWAKE ||
	       proc_thread_state(w->consumer) != 'S') {
		if (now_ms() > deadline) {
			w->ret = -ETIMEDOUT;
			return NULL;
		}
		nap_us(200);
	}
	if (!w->detach_all) {
		w->ret = lanes_try(w->l, w->p);
		return NULL;
	}
	for (unsigned p = 0; p < w->l->n; p++) {
		w->ret = lull_producer_detach(w->l->prod[p]);
		w->l->prod[p] = NULL;
	}
	return NULL;
}

#define T_PRODUCERS 4u
#define T_RECORDS 40000u
#define T_BATCH_MAX 12u

/* A record of the threaded test: whose, which, and its batch. */
struct trec {
	uint32_t producer, seq;
	uint32_t batch;        /* the producer's batch number */
	uint16_t index, count; /* its place in that batch */
	uint32_t array;        /* sent by write_array: alike records */
};

static size_t trec_len(uint32_t seq)
{
	return sizeof(struct trec) + (seq * 37u) % 97u;
}

/* Its length: its own, or in an array its batch's first record's. */
static size_t trec_len_of(const struct trec *h)
{
	return trec_len(h->array ? h->seq - h->index : h->seq);
}

struct tprod {
	struct lull_ring *ring;
	struct ledger *ledger;
	unsigned id;
	uint64_t rng;
	struct lull_producer_stats st;
	char why[160]; /* the first failure; the test thread asserts */
};

static unsigned trand(struct tprod *tp, unsigned below)
{
	tp->rng ^= tp->rng << 13;
	tp->rng ^= tp->rng >> 7;
	tp->rng ^= tp->rng << 17;
	return (unsigned)(tp->rng >> 32) % below;
}

static void trec_fill(uint8_t *buf, const struct trec *h)
{
	memcpy(buf, h, sizeof(*h));
	for (size_t i = sizeof(*h); i < trec_len_of(h); i++)
		buf[i] = stamp_byte(h->producer, h->seq, i);
}

/*
 * Send T_RECORDS records: single writes, write_batch, write_array,
 * claim_batch then commit, and claim_batch then abort (the seqs are sent
 * again); on a full lane, yield and try another shape.  Even producers use
 * the lull_spsc_* calls, odd ones lull_mpsc_*.
 */
static void *tproducer_main(void *arg)
{
	struct tprod *tp = arg;
	const struct family *fam = tp->id % 2 ? &fam_lanes_mpsc
					      : &fam_lanes_spsc;
	static _Thread_local uint8_t buf[T_BATCH_MAX][sizeof(struct trec) + 96];
	/* An array's items, back to back. */
	static _Thread_local uint8_t items[T_BATCH_MAX *
					   (sizeof(struct trec) + 96)];
	struct lull_record recs[T_BATCH_MAX];
	struct lull_claim claims[T_BATCH_MAX];
	struct trec h = { .producer = tp->id };
	struct lull_producer *prod;
	unsigned count, kind;
	int ret;

	ret = lull_producer_attach(tp->ring, 0, &prod);
	if (ret) {
		snprintf(tp->why, sizeof(tp->why), "attach = %d", ret);
		return NULL;
	}
	while (h.seq < T_RECORDS) {
		kind = trand(tp, 8);
		count = kind == 0 ? 1 : 1 + trand(tp, T_BATCH_MAX);
		if (count > T_RECORDS - h.seq)
			count = T_RECORDS - h.seq;
		for (unsigned i = 0; i < count; i++) {
			struct trec r = { tp->id, h.seq + i, h.batch,
					  (uint16_t)i, (uint16_t)count,
					  kind == 3 };
			uint8_t *at = kind == 3 ? items + i * trec_len_of(&r)
						: buf[i];

			trec_fill(at, &r);
			recs[i] = (struct lull_record){
				at, (uint32_t)trec_len_of(&r),
				stamp_type(tp->id) };
			claims[i] = (struct lull_claim){ NULL, recs[i].len,
							 recs[i].type };
		}
		if (kind == 0) {
			ret = fam->t->write(prod, recs[0].type, recs[0].data,
					    recs[0].len);
		} else if (kind < 3) {
			ret = fam->write_batch(prod, recs, count);
		} else if (kind == 3) {
			ret = fam->write_array(prod, recs[0].type, items,
					       recs[0].len, count);
		} else {
			ret = fam->claim_batch(prod, claims, count);
			for (unsigned i = 0; ret == 0 && i < count; i++)
				memcpy(claims[i].data, recs[i].data,
				       recs[i].len);
			if (ret == 0 && kind == 4) {
				for (unsigned i = 0; i < count; i++)
					fill_fake_headers(claims[i].data,
							  claims[i].len);
				ret = fam->t->abort(prod);
				if (ret == 0)
					continue;
			} else if (ret == 0) {
				ret = fam->t->commit(prod);
			}
		}
		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret) {
			snprintf(tp->why, sizeof(tp->why),
				 "producer %u, kind %u, record %u = %d",
				 tp->id, kind, h.seq, ret);
			break;
		}
		for (unsigned i = 0; i < count; i++)
			ledger_sent(tp->ledger, tp->id, h.seq + i);
		h.seq += count;
		h.batch++;
	}
	lull_producer_stats(prod, &tp->st);
	lull_producer_detach(prod);
	return NULL;
}

/* The consumer: ledger order, content, and batches whole per lane. */
struct tcons {
	struct ledger *ledger;
	struct trec at[T_PRODUCERS]; /* each producer's next batch, index */
	int open;                    /* producer mid-batch in this read */
	unsigned poisons;
};

static int tconsume(const struct lull_record *rec, void *ctx)
{
	struct tcons *c = ctx;
	const uint8_t *p = rec->data;
	struct trec h, *at;

	if (rec->type == LULL_TYPE_POISON) {
		cr_assert_eq(c->open, -1, "the poison cut a batch");
		c->poisons++;
		return LULL_READ_CONTINUE;
	}
	cr_assert_geq(rec->len, sizeof(h));
	memcpy(&h, p, sizeof(h));
	cr_assert(h.producer < T_PRODUCERS &&
			  rec->type == stamp_type(h.producer) &&
			  rec->len == trec_len_of(&h),
		  "type %d, %u bytes, producer %u, seq %u", rec->type,
		  rec->len, h.producer, h.seq);
	for (size_t i = sizeof(h); i < rec->len; i++)
		cr_assert_eq(p[i], stamp_byte(h.producer, h.seq, i),
			     "record %u/%u: byte %zu", h.producer, h.seq, i);
	cr_assert(ledger_got(c->ledger, h.producer, h.seq), "%s",
		  c->ledger->why);
	cr_assert(c->open < 0 || c->open == (int)h.producer,
		  "producer %u's batch was seen in part: producer %u's "
		  "record came in the same read", c->open, h.producer);
	at = &c->at[h.producer];
	cr_assert(h.batch == at->batch && h.index == at->index &&
			  (h.index == 0 || h.count == at->count) &&
			  h.index < h.count,
		  "producer %u: batch %u record %u of %u, expected batch %u "
		  "record %u", h.producer, h.batch, h.index, h.count,
		  at->batch, at->index);
	at->count = h.count;
	if (++at->index == h.count) {
		at->batch++;
		at->index = 0;
		c->open = -1;
	} else {
		c->open = (int)h.producer;
	}
	return LULL_READ_CONTINUE;
}

#pragma GCC diagnostic pop

#endif
