/* SPDX-License-Identifier: MIT */
/*
 * peer_lull.c - lull's own rings, the ones the others are measured against:
 *   lull-spsc  lull SPSC ring: lull_spsc_write() of the payload.
 *   lull-mpsc  lull MPSC ring: each producer has its own lull_producer and
 *              calls lull_mpsc_write().
 *   lull-lanes lull LANES ring, a lane per producer (each lane a power of
 *              two at most --capacity / producers, so that every ring has
 *              the same memory): lull_mpsc_write() on each producer's lane.
 * With --producer-batch N, producers push N records with one
 * lull_*_write_array() call (one publish; MPSC: one claim), the records
 * being alike, as the slot rings' bursts take them.
 * The consumer is lull's parked consumer: lull_ring_read() (or, with
 * --lull-read runs, lull_ring_read_items(): an array's records in one
 * call) with a large batch limit and, when the ring is empty,
 * lull_ring_wait() (lull's park: a futex wait after the park handshake,
 * spin before it per --lull-spin-ns, default 0 as in lull), so that the
 * producers' wake-up system calls are real.  Producers back off on a full
 * ring like every other ring's (lull_producer_wait() would park them; it
 * is not measured here).
 *
 * The ring is created, its producers attached and the ring pre-faulted once
 * per configuration; each run hands the producers to its threads (a
 * producer moves between threads one at a time): the last detach shuts a
 * lull ring down, so they are detached only when the ring goes.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "throughput.h"

#define END_TYPE 2 /* the last producer's end-of-run record */
#define LULL_WAIT_NS (100ll * 1000000) /* then look at abort and stall */

struct lull_peer {
	struct lull_ring *ring;
	struct lull_producer **prods; /* attached for the ring's life */
};

static inline struct lull_ring *ring_of(const struct config *cfg)
{
	return ((struct lull_peer *)cfg->state)->ring;
}

/*
 * Whether lull's park barrier is membarrier(MEMBARRIER_CMD_PRIVATE_
 * EXPEDITED) here: lull uses it for the rings it allocates when the kernel
 * offers it (docs/DESIGN.md); only used to count system calls.
 */
bool tp_lull_membarrier_used(void)
{
	static int known = -1;
	long cmds;

	if (known < 0) {
		cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
		known = cmds > 0 &&
			(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
	}
	return known;
}

/*
 * The consumer's spin as JSON: ns, or "adaptive" for lull's default when
 * that is LULL_PARK_SPIN_ADAPTIVE (a value no int64_t holds).
 */
const char *tp_lull_spin_json(int64_t spin_ns)
{
	static char buf[32];

	if (spin_ns < 0 && LULL_PARK_SPIN_DEFAULT_NS > (uint64_t)INT64_MAX)
		return "\"adaptive\"";
	snprintf(buf, sizeof(buf), "%llu",
		 spin_ns >= 0 ? (unsigned long long)spin_ns
			      : (unsigned long long)LULL_PARK_SPIN_DEFAULT_NS);
	return buf;
}

/*
 * A lull record that is no message: the end of the run, or the poison of a
 * ring that was shut down (type < 1: lull's own records; the fatal one is
 * handled like the poison).  Both end the batch and the consumer's loop.
 */
static int __attribute__((noinline))
lull_other_record(struct consumer_state *cs, const struct lull_record *rec)
{
	if (rec->type == END_TYPE) {
		cs->end = true;
		return LULL_READ_STOP;
	}
	if (rec->type < 1) {
		cs->poisoned = true;
		cs->end = true;
		return LULL_READ_STOP;
	}
	cs->bad = 1;
	return LULL_READ_CONTINUE;
}

/* Payload of exactly 8 bytes. */
static int lull_handler_8(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;
	uint64_t v;

	if (unlikely(rec->type != MSG_TYPE))
		return lull_other_record(cs, rec);
	cs->bad |= rec->len ^ cs->payload;
	memcpy(&v, rec->data, 8);
	tp_take_value(cs, v);
	return LULL_READ_CONTINUE;
}

/* Payload below 8 bytes. */
static int lull_handler_small(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;
	uint64_t v = 0;

	if (unlikely(rec->type != MSG_TYPE))
		return lull_other_record(cs, rec);
	cs->bad |= rec->len ^ cs->payload;
	memcpy(&v, rec->data, rec->len < 8 ? rec->len : 8);
	tp_take_value(cs, v);
	return LULL_READ_CONTINUE;
}

/* Payload above 8 bytes: copied out, like the slot rings' slab buffers. */
static int lull_handler_copy(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;

	if (unlikely(rec->type != MSG_TYPE))
		return lull_other_record(cs, rec);
	cs->bad |= rec->len ^ cs->payload;
	if (likely(rec->len == cs->payload))
		tp_take_copy(cs, rec->data, cs->payload);
	return LULL_READ_CONTINUE;
}

static lull_record_fn lull_handler(size_t payload)
{
	if (payload == 8)
		return lull_handler_8;
	return payload < 8 ? lull_handler_small : lull_handler_copy;
}

/* A run that is no message: as lull_other_record(). */
static int __attribute__((noinline))
lull_other_run(struct consumer_state *cs, const struct lull_items *run)
{
	const struct lull_record rec = { .data = run->data, .len = run->len,
					 .type = run->type };

	return lull_other_record(cs, &rec);
}

/*
 * --lull-read runs: a run of 8-byte payloads, summed in a local as a
 * bulk pop's loop does (the handler is opaque to the read: cs lives in
 * memory).
 */
static int lull_run_8(const struct lull_items *run, void *ctx)
{
	struct consumer_state *cs = ctx;
	const unsigned char *p = run->data;
	uint64_t v, sum = 0;

	if (unlikely(run->type != MSG_TYPE))
		return lull_other_run(cs, run);
	cs->bad |= run->len ^ cs->payload;
	for (uint32_t i = 0; i < run->count; i++) {
		memcpy(&v, p + (size_t)i * 8, 8);
		sum += v & cs->mask;
	}
	cs->sum += sum;
	cs->count += run->count;
	return LULL_READ_CONTINUE;
}

/*
 * Any other payload.  Above 8 bytes, the run is copied out in chunks of
 * ITEM_POP messages into the sink, as a bulk pop copies its items out
 * (peer_items.hpp), and each message's value is taken from its copy;
 * smaller ones as lull_handler() takes them.
 */
static int lull_run_any(const struct lull_items *run, void *ctx)
{
	struct consumer_state *cs = ctx;
	const unsigned char *p = run->data;
	const size_t len = run->len;
	uint32_t i, done, n;
	uint64_t v, sum = 0;

	if (unlikely(run->type != MSG_TYPE))
		return lull_other_run(cs, run);
	cs->bad |= run->len ^ cs->payload;
	if (len <= 8) {
		for (i = 0; i < run->count; i++, p += len) {
			v = 0;
			memcpy(&v, p, len);
			tp_take_value(cs, v);
		}
		return LULL_READ_CONTINUE;
	}
	if (unlikely(len != cs->payload))
		return LULL_READ_CONTINUE; /* counted bad above */
	for (done = 0; done < run->count; done += n) {
		n = run->count - done < ITEM_POP ? run->count - done : ITEM_POP;
		memcpy(cs->sink, p + (size_t)done * len, (size_t)n * len);
		for (i = 0; i < n; i++) {
			memcpy(&v, cs->sink + (size_t)i * len, 8);
			sum += v & cs->mask;
		}
	}
	cs->sum += sum;
	cs->count += run->count;
	return LULL_READ_CONTINUE;
}

/* One read of up to @limit records, by the handler --lull-read chose. */
static inline __attribute__((always_inline)) int
lull_read(struct lull_ring *ring, const struct options *opt,
	  size_t payload, void *cs, unsigned int limit)
{
	if (opt->lull_read_runs)
		return lull_ring_read_items(ring, payload == 8 ? lull_run_8
							       : lull_run_any,
					    cs, limit);
	return lull_ring_read(ring, lull_handler(payload), cs, limit);
}

static inline __attribute__((always_inline)) int
lull_write(const struct config *cfg, struct lull_producer *prod,
	   uint16_t type, const void *data, size_t len)
{
	if (cfg->kind == RING_LULL_SPSC)
		return lull_spsc_write(prod, type, data, len);
	return lull_mpsc_write(prod, type, data, len);
}

/* The ring's topology and the capacity of each of its lanes. */
static unsigned lull_topology(const struct config *cfg,
			      const struct options *opt, size_t *capacityp)
{
	size_t lane = opt->capacity;

	*capacityp = opt->capacity;
	if (cfg->kind == RING_LULL_SPSC)
		return LULL_RING_SPSC;
	if (cfg->kind == RING_LULL_MPSC)
		return LULL_RING_MPSC;
	while (lane / 2 >= LULL_RING_MIN_CAPACITY &&
	       lane * cfg->producers > opt->capacity)
		lane /= 2;
	*capacityp = lane;
	return LULL_RING_LANES(cfg->producers);
}

/*
 * Fill the ring to -EAGAIN through the first producer and drain it once,
 * so that no timed run pays for first-touch page faults.  The producer
 * stays attached: detaching the last one would shut the ring down.
 */
static int prefault(struct config *cfg)
{
	struct lull_peer *lp = cfg->state;
	struct consumer_state cs = {
		.mask = UINT64_MAX,
		.payload = cfg->payload,
	};
	lull_record_fn handler = lull_handler(cfg->payload);
	unsigned char msg[64] = { 0 };
	unsigned char *buf = cfg->payload > sizeof(msg) ?
				     calloc(1, cfg->payload) :
				     msg;
	uint64_t written = 0;
	int r;

	cs.sink = malloc(cfg->payload + 8);
	if (!buf || !cs.sink) {
		r = -ENOMEM;
		goto out;
	}
	for (;;) {
		r = lull_write(cfg, lp->prods[0], MSG_TYPE, buf, cfg->payload);
		if (r)
			break;
		written++;
	}
	/* Read exactly what was written: no batch may lap the ring. */
	while (r == -EAGAIN && cs.count < written && !cs.end) {
		r = lull_ring_read(lp->ring, handler, &cs,
				   (unsigned int)(written - cs.count));
		if (r > 0)
			r = -EAGAIN;
	}
	if (r == -EAGAIN && cs.count == written && !cs.end && !cs.bad)
		r = 0;
	else if (!r)
		r = -EPROTO;
	if (r)
		fprintf(stderr, "throughput: %s: pre-fault: %s\n",
			cfg->ring->name, lull_strerror(r));
out:
	if (buf != msg)
		free(buf);
	free(cs.sink);
	return r;
}

static int lull_setup(struct config *cfg, const struct options *opt)
{
	struct lull_park_config pc = {
		.spin_ns = LULL_PARK_SPIN_DEFAULT_NS,
		.safety_timeout_ns = LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS,
	};
	struct lull_peer *lp = calloc(1, sizeof(*lp));
	unsigned int i, topology;
	size_t capacity;
	int r;

	if (!lp)
		return -ENOMEM;
	cfg->state = lp;
	if (cfg->kind == RING_LULL_LANES && cfg->producers > LULL_RING_LANES_MAX) {
		cfg->skipped = true;
		return 0;
	}
	topology = lull_topology(cfg, opt, &capacity);
	r = lull_ring_create(&lp->ring, capacity, topology);
	if (r) {
		fprintf(stderr, "throughput: lull_ring_create: %s\n",
			lull_strerror(r));
		return r;
	}
	if (lull_ring_max_payload(lp->ring) < (ssize_t)cfg->payload) {
		fprintf(stderr,
			"throughput: payload %zu above the max of %zd for "
			"capacity %zu\n",
			cfg->payload, lull_ring_max_payload(lp->ring),
			capacity);
		return -EMSGSIZE;
	}
	if (opt->lull_spin_ns >= 0) {
		pc.spin_ns = (uint64_t)opt->lull_spin_ns;
		r = lull_ring_park_config(lp->ring, &pc);
		if (r) {
			fprintf(stderr,
				"throughput: lull_ring_park_config: %s\n",
				lull_strerror(r));
			return r;
		}
	}
	lp->prods = calloc(cfg->producers, sizeof(*lp->prods));
	if (!lp->prods)
		return -ENOMEM;
	for (i = 0; i < cfg->producers; i++) {
		r = lull_producer_attach(lp->ring, 0, &lp->prods[i]);
		if (r) {
			fprintf(stderr,
				"throughput: %s: lull_producer_attach: %s\n",
				cfg->ring->name, lull_strerror(r));
			return r;
		}
	}
	return prefault(cfg);
}

static void lull_teardown(struct config *cfg)
{
	struct lull_peer *lp = cfg->state;
	unsigned int i;

	if (!lp)
		return;
	/*
	 * The last detach shuts the ring down; its poison record is never
	 * read, and need not be before the destroy.
	 */
	if (lp->prods)
		for (i = 0; i < cfg->producers; i++)
			if (lp->prods[i])
				lull_producer_detach(lp->prods[i]);
	if (lp->ring)
		lull_ring_destroy(lp->ring);
	free(lp->prods);
	free(lp);
}

static void *lull_producer_lend(struct config *cfg, unsigned int i)
{
	return ((struct lull_peer *)cfg->state)->prods[i];
}

static inline __attribute__((always_inline)) int
lull_send(struct producer *p, struct config *cfg, unsigned char *msg,
	  uint64_t value, struct send_state *st, enum ring_kind kind)
{
	size_t payload = cfg->payload;
	int r;

	if (payload >= 8)
		memcpy(msg, &value, 8);
	else
		memcpy(msg, &value, payload);
	for (;;) {
		if (kind == RING_LULL_SPSC)
			r = lull_spsc_write(p->handle, MSG_TYPE, msg, payload);
		else
			r = lull_mpsc_write(p->handle, MSG_TYPE, msg, payload);
		if (likely(r == 0))
			return 0;
		if (r != -EAGAIN)
			return r;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
}

/*
 * @n records at once, one lull_*_write_array() call: all of them or, on a
 * full ring, none (then again after a back-off).  The records are alike,
 * so they go as an array of @payload-byte items, as to the slot rings'
 * bursts: the values themselves when they are 8 bytes, else built in msg.
 */
static inline __attribute__((always_inline)) int
lull_send_batch(struct producer *p, struct config *cfg, unsigned char *msg,
		const uint64_t *values, unsigned int n, struct send_state *st,
		enum ring_kind kind)
{
	size_t payload = cfg->payload;
	const void *items = values;
	unsigned int i;
	int r;

	if (payload != 8) {
		/*
		 * msg has room for a batch (producer_main(), throughput.c).
		 * One 8-byte store per item, as the slot rings' tp_item_set():
		 * a copy of a length known only at run time costs a branchy
		 * sequence per item, about a fifth of the producer's time at
		 * 64 bytes on one CPU.
		 */
		if (payload > 8)
			for (i = 0; i < n; i++)
				memcpy(msg + i * payload, &values[i], 8);
		else
			for (i = 0; i < n; i++)
				memcpy(msg + i * payload, &values[i], payload);
		items = msg;
	}
	for (;;) {
		if (kind == RING_LULL_SPSC)
			r = lull_spsc_write_array(p->handle, MSG_TYPE, items,
						  payload, n);
		else
			r = lull_mpsc_write_array(p->handle, MSG_TYPE, items,
						  payload, n);
		if (likely(r == 0))
			return 0;
		if (r != -EAGAIN)
			return r;
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
}

static int lull_spsc_send_batch(struct producer *p, struct config *cfg,
				unsigned char *msg, const uint64_t *values,
				unsigned int n, struct send_state *st)
{
	return lull_send_batch(p, cfg, msg, values, n, st, RING_LULL_SPSC);
}

static int lull_mpsc_send_batch(struct producer *p, struct config *cfg,
				unsigned char *msg, const uint64_t *values,
				unsigned int n, struct send_state *st)
{
	return lull_send_batch(p, cfg, msg, values, n, st, RING_LULL_MPSC);
}

static int lull_spsc_send(struct producer *p, struct config *cfg,
			  unsigned char *msg, uint64_t value,
			  struct send_state *st)
{
	return lull_send(p, cfg, msg, value, st, RING_LULL_SPSC);
}

static int lull_mpsc_send(struct producer *p, struct config *cfg,
			  unsigned char *msg, uint64_t value,
			  struct send_state *st)
{
	return lull_send(p, cfg, msg, value, st, RING_LULL_MPSC);
}

static void lull_spsc_produce(struct producer *p, unsigned char *msg)
{
	if (p->run->cfg->push_batch > 1)
		tp_produce_batch(p, msg, lull_spsc_send_batch);
	else
		tp_produce(p, msg, lull_spsc_send);
}

/* lull-mpsc and lull-lanes: the MPSC calls, which a lane producer takes. */
static void lull_mpsc_produce(struct producer *p, unsigned char *msg)
{
	if (p->run->cfg->push_batch > 1)
		tp_produce_batch(p, msg, lull_mpsc_send_batch);
	else
		tp_produce(p, msg, lull_mpsc_send);
}

#define lull_lanes_produce lull_mpsc_produce

/*
 * The end record, through @handle, after every message of the run.  A
 * parked consumer is woken for it like for any record.
 */
static void lull_end_stream(struct run *run, void *handle)
{
	struct bench_backoff bo;
	int r;

	if (!handle)
		return;
	bench_backoff_init(&bo);
	for (;;) {
		r = lull_write(run->cfg, handle, END_TYPE, NULL, 0);
		if (r == 0)
			return;
		if (r != -EAGAIN) {
			tp_run_fail(run, "end record: %s", lull_strerror(r));
			return;
		}
		if (tp_aborted(run))
			return;
		bench_backoff_wait(&bo);
	}
}

/*
 * Read batches while there are records, park in lull_ring_wait() when
 * there are none, stop at the end record.  The wait's timeout only bounds
 * how long an aborted run takes to notice.
 */
static void lull_consume(struct run *run, struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	struct lull_ring *ring = ring_of(cfg);
	unsigned int batch = run->opt->batch;
	struct progress prog = { .last_ns = bench_now_ns() };
	uint64_t waits = 0;
	int r;

	while (!cs->end) {
		r = lull_read(ring, run->opt, cfg->payload, cs, batch);
		if (likely(r >= 0))
			continue;
		if (r != -EAGAIN) {
			tp_run_fail(run, "%s: read: %s",
				    cfg->ring->name, lull_strerror(r));
			break;
		}
		if (tp_aborted(run))
			break;
		waits++;
		r = lull_ring_wait(ring, LULL_WAIT_NS);
		if (r == -ETIMEDOUT) {
			if (tp_stalled(run, &prog, cs))
				break;
		} else if (r) {
			tp_run_fail(run, "%s: lull_ring_wait: %s",
				    cfg->ring->name, lull_strerror(r));
			break;
		}
	}
	/*
	 * A LANES ring promises order per producer only: the end record,
	 * written on the last producer's lane after every other producer was
	 * done (tp_producers_done()), may come before other lanes' last
	 * records.  They were committed before it, so they are readable now.
	 */
	while (cfg->kind == RING_LULL_LANES && !cs->poisoned &&
	       lull_read(ring, run->opt, cfg->payload, cs, batch) > 0)
		;
	if (cs->poisoned)
		tp_run_fail(run, "%s: poison record: the ring was shut down",
			    cfg->ring->name);
	run->cons_waits = waits;
}

/*
 * Its counters; every park attempt, slept or cancelled, issues the park
 * barrier, a system call where it is membarrier(2).
 */
static void lull_counters(struct config *cfg, struct peer_counters *c)
{
	struct lull_peer *lp = cfg->state;
	struct lull_producer_stats ps;
	struct lull_ring_stats st = { 0 };

	c->claim_retries = 0;
	for (unsigned int i = 0; i < cfg->producers; i++)
		if (lull_producer_stats(lp->prods[i], &ps) == 0)
			c->claim_retries += ps.claim_retries;
	lull_ring_stats(ring_of(cfg), &st);
	c->claim_waits = st.claim_waits;
	c->wakes = st.wakes;
	c->parks = st.parks;
	c->park_cancels = st.park_cancels;
	c->safety_timeouts = st.safety_timeouts;
	c->syscalls = st.parks + (tp_lull_membarrier_used() ?
					  st.parks + st.park_cancels :
					  0);
}

#define LULL_PEER(kind, cls_)                                                \
	{                                                                    \
		.name = "lull-" #kind, .cls = cls_, .is_lull = true,         \
		.push_batch = 1,                                             \
		.setup = lull_setup, .producer_attach = lull_producer_lend,  \
		.produce = lull_##kind##_produce,                            \
		.end_stream = lull_end_stream, .consume = lull_consume,      \
		.counters = lull_counters, .teardown = lull_teardown,        \
	}

const struct peer_ring tp_lull_spsc = LULL_PEER(spsc, CLASS_SPSC);
const struct peer_ring tp_lull_mpsc = LULL_PEER(mpsc, CLASS_MPSC);
const struct peer_ring tp_lull_lanes = LULL_PEER(lanes, CLASS_MPSC);
