/* SPDX-License-Identifier: MIT */
/*
 * throughput.c - messages per second through one consumer and P producers,
 * for lull's rings and Concurrency Kit's ck_ring side by side.
 *
 * Rings (--ring, repeatable; default all):
 *   lull-spsc  lull SPSC ring: lull_spsc_write() of the payload; the
 *              consumer calls lull_ring_read() with a large batch limit.
 *   lull-mpsc  lull MPSC ring: each producer has its own lull_producer and
 *              calls lull_mpsc_write().
 *   ck-spsc    ck_ring_enqueue_spsc() / ck_ring_dequeue_spsc().
 *   ck-mpmc    ck_ring_enqueue_mpmc() / ck_ring_dequeue_mpmc(): ck's
 *              general ring, whose dequeue pays a CAS even with one consumer.
 *   ck-mpsc    ck_ring_enqueue_mpsc() / ck_ring_dequeue_mpsc(): the same
 *              multi-producer enqueue (a CAS on p_head, then an in-order
 *              wait for p_tail) with the single-consumer dequeue, which has
 *              no atomic read-modify-write; the closest peer of lull-mpsc.
 * SPSC rings only run with one producer.
 *
 * Equal work.  ck_ring moves pointers, lull copies records, so:
 *   payload <= 8  ck carries the value itself in the pointer slot (the fair
 *                 zero-copy equivalent of a small record); lull copies it in
 *                 and the consumer reads it in place.
 *   payload > 8   each ck producer owns a slab of buffers; it builds the
 *                 message in a local buffer, copies it into the next slab
 *                 buffer and enqueues that buffer's address.  The lull
 *                 producer builds the same local message and lull_*_write()
 *                 copies it into the ring.  Both consumers copy the payload
 *                 out into a sink buffer, then sum its first 8 bytes.
 *                 A producer's slab has slots + 1 buffers, used round-robin:
 *                 by the time it writes a buffer again, its enqueue of the
 *                 message before has seen c_head at least slots - 2 behind
 *                 the ring's end, so the consumer has dequeued the message
 *                 after the buffer's last user, hence finished copying that
 *                 user out (the consumer works in order).
 *
 * Equal memory.  --capacity is lull's data area in bytes (default 1 MiB).
 * ck gets the largest power-of-two slot count whose memory fits in the same
 * bytes: capacity / 8 slots for payload <= 8 (slot array only), capacity /
 * (8 + align8(payload)) rounded down to a power of two for larger payloads
 * (slot plus one slab buffer per slot; the slab is per producer, but a
 * producer's share of the traffic only ever touches its own).  At payload 8
 * lull's 16-byte records hold half the messages that ck's 8-byte slots do:
 * the same cache footprint, not the same message count.
 *
 * Fairness.  Every side of every ring backs off the same way on a full or
 * empty ring (bench_backoff_wait(): PAUSE spins, then sched_yield()).  The
 * rings are interleaved within each repetition: run 1 of every ring, then
 * run 2 of every ring, and so on, so machine noise hits all alike; each
 * result is the median over --runs, with min and max.  Every ring is
 * created and pre-faulted once before the first run and reused.
 *
 * Checks.  Producer p sends the values (p + 1) * K + seq (cut to the
 * payload's bytes); the consumer counts the messages and sums the values,
 * so the compiler cannot drop the work, and both must match what the
 * producers sent (exit status 1 otherwise).  lull records are also checked
 * for their length and type.
 *
 * Diagnostics.  Each run also records the CPU time its threads got, the CPU
 * time every other process took meanwhile (--max-others repeats runs that
 * shared the machine) and the cache-line round trip between the first two
 * CPUs: on a virtual machine the latter can change several times over as
 * the host moves the virtual CPUs, and every ring's result follows it.
 * --verbose prints each run with its full/empty back-off counts.
 *
 * Build: make build/perf/throughput (or make bench, which also runs it).
 * Run:   build/perf/throughput --runs 5 --seconds 1 [--pin] [--json]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>
#include <ck_ring.h>

#include <lull.h>

#include "bench_common.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MAX_LIST 32
#define MSG_TYPE 1
#define DEFAULT_CAPACITY ((size_t)1 << 20)
#define DEFAULT_BATCH 4096u
#define STALL_NS (10ull * 1000000000ull)
#define VALUE_STRIDE 0x9e3779b97f4a7c15ull
#define LINE 128
#define C2C_ROUND_TRIPS 2000

enum ring_kind {
	RING_LULL_SPSC,
	RING_LULL_MPSC,
	RING_CK_SPSC,
	RING_CK_MPMC,
	RING_CK_MPSC,
	RING_KINDS
};

static const struct ring_desc {
	const char *name;
	bool multi_producer;
	bool is_lull;
} ring_descs[RING_KINDS] = {
	[RING_LULL_SPSC] = { "lull-spsc", false, true },
	[RING_LULL_MPSC] = { "lull-mpsc", true, true },
	[RING_CK_SPSC] = { "ck-spsc", false, false },
	[RING_CK_MPMC] = { "ck-mpmc", true, false },
	[RING_CK_MPSC] = { "ck-mpsc", true, false },
};

struct options {
	int rings[RING_KINDS];
	int nrings;
	unsigned int producers[MAX_LIST];
	int nproducers;
	size_t payloads[MAX_LIST];
	int npayloads;
	double seconds;
	uint64_t messages; /* 0: run for @seconds instead */
	double time_limit; /* message mode: stop a run after this long */
	int runs;
	size_t capacity;
	unsigned int batch;
	double max_others; /* repeat runs busier than this; < 0: never */
	bool json;
	bool pin;
	bool verbose;
};

/* One (ring, producers, payload) combination and its results. */
struct config {
	enum ring_kind kind;
	unsigned int producers;
	size_t payload;
	bool failed;

	/* lull */
	struct lull_ring *lring;

	/* ck */
	struct ck_ring *ckring;
	ck_ring_buffer_t *ckbuf;
	unsigned int ck_slots;
	unsigned char *slab; /* producers * slab_count buffers */
	size_t stride;       /* align8(payload) when slabbed, else 0 */
	size_t slab_count;   /* buffers per producer */

	/* per run */
	double *mps;
	double *nspm;
	double *msgs;
	double *cpus;  /* CPU seconds per second of the run */
	double *other; /* the same for everything else on the machine */
	double *c2c;   /* cache-line round trip ns just before the run */
	int done_runs;
	int truncated_runs; /* message mode: stopped at --time-limit */
};

/* The shared state of one run; control flags on lines of their own. */
struct run {
	struct config *cfg;
	const struct options *opt;
	int consumer_cpu;
	uint64_t mask; /* the value bits that fit in the payload */

	alignas(LINE) _Atomic int go;
	alignas(LINE) _Atomic int stop;
	alignas(LINE) _Atomic int abort;
	_Atomic unsigned int done;
	_Atomic uint64_t sent;
	_Atomic uint64_t sent_sum;
	_Atomic uint64_t prod_waits;  /* producer back-offs on a full ring */
	_Atomic uint64_t prod_yields; /* of which sched_yield() */
	_Atomic uint64_t cpu_ns;      /* CPU time of all the run's threads */

	/* Written by the consumer, read by main after the join. */
	alignas(LINE) uint64_t t_end;
	uint64_t received;
	uint64_t recv_sum;
	uint64_t bad;
	uint64_t cons_waits;  /* consumer back-offs on an empty ring */
	uint64_t cons_yields; /* of which sched_yield() */
	char err[160];
};

struct producer {
	alignas(LINE) struct run *run;
	unsigned int id;
	int cpu;
	uint64_t quota; /* messages to send, or UINT64_MAX until stop */
	struct lull_producer *lprod;
	int err;
};

struct consumer_state {
	uint64_t count;
	uint64_t sum;
	uint64_t bad;
	uint64_t mask;
	size_t payload;
	unsigned char *sink;
	lull_record_fn handler;
};

/* Record the first failure of a run and tell every thread to stop. */
static __attribute__((format(printf, 2, 3))) void
run_fail(struct run *run, const char *fmt, ...)
{
	int expected = 0;
	va_list ap;

	/*
	 * Relaxed: abort is only a flag; the one thread that wins writes
	 * err, which main reads after joining every thread.
	 */
	if (atomic_compare_exchange_strong_explicit(&run->abort, &expected, 1,
						    memory_order_relaxed,
						    memory_order_relaxed)) {
		va_start(ap, fmt);
		vsnprintf(run->err, sizeof(run->err), fmt, ap);
		va_end(ap);
	}
}

static bool run_aborted(struct run *run)
{
	/* Relaxed: a flag, see run_fail(). */
	return atomic_load_explicit(&run->abort, memory_order_relaxed);
}

/*
 * Add the calling thread's CPU time to the run's: CPU seconds per second of
 * the run tell whether the threads really ran in parallel (about 2 on two
 * CPUs) or took turns on one CPU (about 1), which unpinned runs sometimes
 * do and which changes the result more than any ring does.
 */
static void account_cpu(struct run *run)
{
	struct rusage ru;
	uint64_t ns;

	if (getrusage(RUSAGE_THREAD, &ru))
		return;
	ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		     1000000000u +
	     ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		     1000u;
	atomic_fetch_add_explicit(&run->cpu_ns, ns, memory_order_relaxed);
}

static void wait_go(struct run *run)
{
	/* Pairs with main's release store of go: the run's setup is seen. */
	while (!atomic_load_explicit(&run->go, memory_order_acquire))
		sched_yield();
}

/*
 * Producers.  One loop per ring kind, specialised by constant propagation
 * through an always-inlined function, so no ring pays for a dispatch.
 */
static inline __attribute__((always_inline)) int
send_one(struct producer *p, struct config *cfg, const enum ring_kind kind,
	 unsigned char *msg, uint64_t value, size_t *slab_next,
	 struct bench_backoff *bo)
{
	size_t payload = cfg->payload;
	void *entry;
	int r;

	if (kind == RING_LULL_SPSC || kind == RING_LULL_MPSC) {
		if (payload >= 8)
			memcpy(msg, &value, 8);
		else
			memcpy(msg, &value, payload);
		for (;;) {
			if (kind == RING_LULL_SPSC)
				r = lull_spsc_write(p->lprod, MSG_TYPE, msg,
						    payload);
			else
				r = lull_mpsc_write(p->lprod, MSG_TYPE, msg,
						    payload);
			if (likely(r == 0))
				return 0;
			if (r != -EAGAIN)
				return r;
			if (run_aborted(p->run))
				return -ECANCELED;
			bench_backoff_wait(bo);
		}
	}

	if (!cfg->stride) {
		entry = (void *)(uintptr_t)value;
	} else {
		unsigned char *buf = cfg->slab +
				     (p->id * cfg->slab_count + *slab_next) *
					     cfg->stride;

		memcpy(msg, &value, 8);
		memcpy(buf, msg, payload);
		if (++*slab_next == cfg->slab_count)
			*slab_next = 0;
		entry = buf;
	}
	for (;;) {
		bool ok;

		if (kind == RING_CK_SPSC)
			ok = ck_ring_enqueue_spsc(cfg->ckring, cfg->ckbuf,
						  entry);
		else if (kind == RING_CK_MPMC)
			ok = ck_ring_enqueue_mpmc(cfg->ckring, cfg->ckbuf,
						  entry);
		else
			ok = ck_ring_enqueue_mpsc(cfg->ckring, cfg->ckbuf,
						  entry);
		if (likely(ok))
			return 0;
		if (run_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(bo);
	}
}

static inline __attribute__((always_inline)) void
produce(struct producer *p, const enum ring_kind kind, unsigned char *msg)
{
	struct run *run = p->run;
	struct config *cfg = run->cfg;
	uint64_t base = (uint64_t)(p->id + 1) * VALUE_STRIDE;
	uint64_t seq, sum = 0;
	size_t slab_next = 0;
	struct bench_backoff bo;
	int r = 0;

	bench_backoff_init(&bo);
	for (seq = 0; seq < p->quota; seq++) {
		uint64_t value = (base + seq) & run->mask;

		/*
		 * Relaxed: a flag, raised once by main (time mode, or the
		 * time limit); until then its line stays shared in every
		 * cache and the load costs next to nothing.
		 */
		if (atomic_load_explicit(&run->stop, memory_order_relaxed))
			break;
		r = send_one(p, cfg, kind, msg, value, &slab_next, &bo);
		if (unlikely(r))
			break;
		bench_backoff_reset(&bo);
		sum += value;
	}
	if (r && r != -ECANCELED) {
		p->err = r;
		run_fail(run, "%s: producer %u: write failed: %s",
			 ring_descs[kind].name, p->id, lull_strerror(r));
	}
	atomic_fetch_add_explicit(&run->sent, seq, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->sent_sum, sum, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_waits, bo.waits,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_yields, bo.yields,
				  memory_order_relaxed);
	account_cpu(run);
	/* Publishes sent and sent_sum to the consumer's acquire of done. */
	atomic_fetch_add_explicit(&run->done, 1, memory_order_release);
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct run *run = p->run;
	size_t len = run->cfg->payload > 8 ? run->cfg->payload : 8;
	unsigned char *msg = aligned_alloc(64, (len + 63) & ~(size_t)63);

	if (!msg) {
		run_fail(run, "producer %u: out of memory", p->id);
		atomic_fetch_add_explicit(&run->done, 1, memory_order_release);
		return NULL;
	}
	memset(msg, 0xa5, len);
	bench_pin_self(p->cpu);
	wait_go(run);
	switch (run->cfg->kind) {
	case RING_LULL_SPSC:
		produce(p, RING_LULL_SPSC, msg);
		break;
	case RING_LULL_MPSC:
		produce(p, RING_LULL_MPSC, msg);
		break;
	case RING_CK_SPSC:
		produce(p, RING_CK_SPSC, msg);
		break;
	case RING_CK_MPMC:
		produce(p, RING_CK_MPMC, msg);
		break;
	case RING_CK_MPSC:
		produce(p, RING_CK_MPSC, msg);
		break;
	default:
		break;
	}
	free(msg);
	return NULL;
}

/*
 * Consumer.  Every ring's consumer does the same per message: copy the
 * payload out into the sink when it is larger than 8 bytes, take the value
 * from its first 8 bytes, add it to the sum and count the message.  The lull
 * handlers also fold the record's length and type into cs->bad (a branchless
 * OR, a few instructions): ck_ring has neither to check.
 */
static inline __attribute__((always_inline)) void
take_value(struct consumer_state *cs, uint64_t v)
{
	cs->sum += v & cs->mask;
	cs->count++;
}

static inline __attribute__((always_inline)) void
take_copy(struct consumer_state *cs, const void *data, size_t len)
{
	uint64_t v;

	memcpy(cs->sink, data, len);
	memcpy(&v, cs->sink, 8);
	take_value(cs, v);
}

static inline __attribute__((always_inline)) void
check_record(struct consumer_state *cs, const struct lull_record *rec)
{
	cs->bad |= (rec->len ^ cs->payload) |
		   (uint32_t)(rec->type ^ MSG_TYPE);
}

/* Payload of exactly 8 bytes. */
static int lull_handler_8(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;
	uint64_t v;

	check_record(cs, rec);
	memcpy(&v, rec->data, 8);
	take_value(cs, v);
	return LULL_READ_CONTINUE;
}

/* Payload below 8 bytes. */
static int lull_handler_small(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;
	uint64_t v = 0;

	check_record(cs, rec);
	memcpy(&v, rec->data, rec->len < 8 ? rec->len : 8);
	take_value(cs, v);
	return LULL_READ_CONTINUE;
}

/* Payload above 8 bytes: copied out, like ck's slab buffers. */
static int lull_handler_copy(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;

	check_record(cs, rec);
	if (likely(rec->len == cs->payload))
		take_copy(cs, rec->data, cs->payload);
	return LULL_READ_CONTINUE;
}

static lull_record_fn lull_handler(size_t payload)
{
	if (payload == 8)
		return lull_handler_8;
	return payload < 8 ? lull_handler_small : lull_handler_copy;
}

/*
 * Take up to @batch messages.  Returns how many, 0 when the ring was empty,
 * or a negative errno.
 */
static inline __attribute__((always_inline)) int
poll_batch(struct config *cfg, const enum ring_kind kind,
	   struct consumer_state *cs, unsigned int batch)
{
	unsigned int n;
	void *entry;
	int r;

	if (kind == RING_LULL_SPSC || kind == RING_LULL_MPSC) {
		r = lull_ring_read(cfg->lring, cs->handler, cs, batch);
		return r == -EAGAIN ? 0 : r;
	}
	for (n = 0; n < batch; n++) {
		bool ok;

		if (kind == RING_CK_SPSC)
			ok = ck_ring_dequeue_spsc(cfg->ckring, cfg->ckbuf,
						  &entry);
		else if (kind == RING_CK_MPMC)
			ok = ck_ring_dequeue_mpmc(cfg->ckring, cfg->ckbuf,
						  &entry);
		else
			ok = ck_ring_dequeue_mpsc(cfg->ckring, cfg->ckbuf,
						  &entry);
		if (!ok)
			break;
		if (cfg->stride)
			take_copy(cs, entry, cfg->payload);
		else
			take_value(cs, (uint64_t)(uintptr_t)entry);
	}
	return (int)n;
}

static inline __attribute__((always_inline)) void
consume_loop(struct run *run, const enum ring_kind kind,
	     struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	uint64_t last_count = 0, last_progress = bench_now_ns();
	unsigned int empties = 0;
	struct bench_backoff bo;
	int r;

	bench_backoff_init(&bo);
	for (;;) {
		r = poll_batch(cfg, kind, cs, batch);
		if (likely(r > 0)) {
			bench_backoff_reset(&bo);
			continue;
		}
		if (r < 0) {
			run_fail(run, "%s: lull_ring_read failed: %s",
				 ring_descs[kind].name, lull_strerror(r));
			break;
		}
		/*
		 * Empty: finished when every producer is done and all it sent
		 * was received.  Pairs with the producers' release increment
		 * of done: their sent counts are final.
		 */
		if (atomic_load_explicit(&run->done, memory_order_acquire) ==
		    cfg->producers) {
			uint64_t sent = atomic_load_explicit(
				&run->sent, memory_order_relaxed);

			if (cs->count >= sent)
				break;
		}
		if (run_aborted(run))
			break;
		if (++empties % 1024 == 0) {
			uint64_t now = bench_now_ns();

			if (cs->count != last_count) {
				last_count = cs->count;
				last_progress = now;
			} else if (now - last_progress > STALL_NS) {
				run_fail(run,
					 "%s: no progress for 10 s, %llu "
					 "messages received",
					 ring_descs[kind].name,
					 (unsigned long long)cs->count);
				break;
			}
		}
		bench_backoff_wait(&bo);
	}
	run->t_end = bench_now_ns();
	run->cons_waits = bo.waits;
	run->cons_yields = bo.yields;
}

static void *consumer_main(void *arg)
{
	struct run *run = arg;
	struct config *cfg = run->cfg;
	struct consumer_state cs = {
		.mask = run->mask,
		.payload = cfg->payload,
		.handler = lull_handler(cfg->payload),
	};

	cs.sink = aligned_alloc(64, (cfg->payload + 64) & ~(size_t)63);
	if (!cs.sink) {
		run_fail(run, "consumer: out of memory");
		return NULL;
	}
	bench_pin_self(run->consumer_cpu);
	wait_go(run);
	switch (cfg->kind) {
	case RING_LULL_SPSC:
		consume_loop(run, RING_LULL_SPSC, &cs);
		break;
	case RING_LULL_MPSC:
		consume_loop(run, RING_LULL_MPSC, &cs);
		break;
	case RING_CK_SPSC:
		consume_loop(run, RING_CK_SPSC, &cs);
		break;
	case RING_CK_MPMC:
		consume_loop(run, RING_CK_MPMC, &cs);
		break;
	case RING_CK_MPSC:
		consume_loop(run, RING_CK_MPSC, &cs);
		break;
	default:
		break;
	}
	account_cpu(run);
	run->received = cs.count;
	run->recv_sum = cs.sum;
	run->bad = cs.bad;
	free(cs.sink);
	return NULL;
}

/*
 * The 1-minute load average, printed before and after: the rings share the
 * machine with whatever else runs, and a busy machine explains a wide
 * min-max spread better than any ring does.
 */
static double load_average(void)
{
	double load = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = -1;
		fclose(f);
	}
	return load;
}

/*
 * Busy CPU time of the whole machine so far, in ns, from /proc/stat (all
 * but idle and iowait; steal included: time the hypervisor gave away is
 * time the rings did not get).  0 when unreadable.
 */
static uint64_t machine_busy_ns(void)
{
	unsigned long long v[10] = { 0 };
	uint64_t busy = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int i, n;

	if (!f)
		return 0;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		   &v[8], &v[9]);
	fclose(f);
	if (n < 8 || hz <= 0)
		return 0;
	/* user nice system [idle iowait] irq softirq steal; guest in user. */
	for (i = 0; i < 8; i++)
		if (i != 3 && i != 4)
			busy += v[i];
	return busy * (1000000000u / (uint64_t)hz);
}

/* Ring setup and teardown. */

static uint64_t pow2_floor(uint64_t n)
{
	uint64_t p = 1;

	while (p <= n / 2)
		p *= 2;
	return p;
}

static int attach(struct config *cfg, struct lull_producer **prodp)
{
	int r = lull_producer_attach(cfg->lring, 0, prodp);

	if (r)
		fprintf(stderr, "throughput: %s: lull_producer_attach: %s\n",
			ring_descs[cfg->kind].name, lull_strerror(r));
	return r;
}

/*
 * Fill the lull ring to -EAGAIN and drain it once, so that no timed run pays
 * for first-touch page faults.
 */
static int prefault_lull(struct config *cfg)
{
	struct consumer_state cs = {
		.mask = UINT64_MAX,
		.payload = cfg->payload,
		.handler = lull_handler(cfg->payload),
	};
	unsigned char msg[64] = { 0 };
	unsigned char *buf = cfg->payload > sizeof(msg) ?
				     calloc(1, cfg->payload) :
				     msg;
	struct lull_producer *prod;
	uint64_t written = 0;
	int r;

	cs.sink = malloc(cfg->payload + 8);
	if (!buf || !cs.sink) {
		r = -ENOMEM;
		goto out;
	}
	r = attach(cfg, &prod);
	if (r)
		goto out;
	for (;;) {
		if (cfg->kind == RING_LULL_SPSC)
			r = lull_spsc_write(prod, MSG_TYPE, buf, cfg->payload);
		else
			r = lull_mpsc_write(prod, MSG_TYPE, buf, cfg->payload);
		if (r)
			break;
		written++;
	}
	/* Read exactly what was written: no batch may lap the ring. */
	while (r == -EAGAIN && cs.count < written) {
		r = lull_ring_read(cfg->lring, cs.handler, &cs,
				   (unsigned int)(written - cs.count));
		if (r > 0)
			r = -EAGAIN;
	}
	if (r == -EAGAIN && cs.count == written)
		r = 0;
	else if (!r)
		r = -EPROTO;
	if (r)
		fprintf(stderr, "throughput: %s: pre-fault: %s\n",
			ring_descs[cfg->kind].name, lull_strerror(r));
	lull_producer_detach(prod);
out:
	if (buf != msg)
		free(buf);
	free(cs.sink);
	return r;
}

static void *alloc_zeroed(size_t size)
{
	void *p = aligned_alloc(LINE, (size + LINE - 1) & ~(size_t)(LINE - 1));

	if (p)
		memset(p, 0, size);
	return p;
}

static int config_setup(struct config *cfg, const struct options *opt)
{
	int r;

	cfg->mps = calloc(opt->runs, sizeof(double));
	cfg->nspm = calloc(opt->runs, sizeof(double));
	cfg->msgs = calloc(opt->runs, sizeof(double));
	cfg->cpus = calloc(opt->runs, sizeof(double));
	cfg->other = calloc(opt->runs, sizeof(double));
	cfg->c2c = calloc(opt->runs, sizeof(double));
	if (!cfg->mps || !cfg->nspm || !cfg->msgs || !cfg->cpus ||
	    !cfg->other || !cfg->c2c)
		return -ENOMEM;

	if (ring_descs[cfg->kind].is_lull) {
		r = lull_ring_create(&cfg->lring, opt->capacity,
				     cfg->kind == RING_LULL_SPSC ?
					     LULL_RING_SPSC :
					     LULL_RING_MPSC);
		if (r) {
			fprintf(stderr, "throughput: lull_ring_create: %s\n",
				lull_strerror(r));
			return r;
		}
		if (lull_ring_max_payload(cfg->lring) < (ssize_t)cfg->payload) {
			fprintf(stderr,
				"throughput: payload %zu above the max of %zd "
				"for capacity %zu\n",
				cfg->payload, lull_ring_max_payload(cfg->lring),
				opt->capacity);
			return -EMSGSIZE;
		}
		return prefault_lull(cfg);
	}

	if (cfg->payload <= 8) {
		cfg->stride = 0;
		cfg->ck_slots = opt->capacity / sizeof(ck_ring_buffer_t);
	} else {
		cfg->stride = (cfg->payload + 7) & ~(size_t)7;
		cfg->ck_slots = pow2_floor(opt->capacity /
					   (sizeof(ck_ring_buffer_t) +
					    cfg->stride));
		if (cfg->ck_slots < 4)
			cfg->ck_slots = 4;
		cfg->slab_count = (size_t)cfg->ck_slots + 1;
		cfg->slab = alloc_zeroed(cfg->producers * cfg->slab_count *
					 cfg->stride);
		if (!cfg->slab)
			return -ENOMEM;
	}
	cfg->ckring = alloc_zeroed(sizeof(*cfg->ckring));
	cfg->ckbuf = alloc_zeroed(cfg->ck_slots * sizeof(*cfg->ckbuf));
	if (!cfg->ckring || !cfg->ckbuf)
		return -ENOMEM;
	ck_ring_init(cfg->ckring, cfg->ck_slots);
	return 0;
}

static void config_free(struct config *cfg)
{
	if (cfg->lring)
		lull_ring_destroy(cfg->lring);
	free(cfg->ckring);
	free(cfg->ckbuf);
	free(cfg->slab);
	free(cfg->mps);
	free(cfg->nspm);
	free(cfg->msgs);
	free(cfg->cpus);
	free(cfg->other);
	free(cfg->c2c);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* One timed run of @cfg.  Returns 0, or -1 with the reason printed. */
static int run_once(struct config *cfg, const struct options *opt,
		    const int *cpus, int ncpus, int index)
{
	const char *name = ring_descs[cfg->kind].name;
	struct producer *prods;
	pthread_t *tids, ctid;
	struct run *run;
	uint64_t t_start, elapsed, busy_start, busy, sent, want_sum, cpu_ns;
	unsigned int i, started = 0;
	bool truncated = false;
	int r, ret = -1;

	/* Between the first two CPUs, where --pin puts the two sides. */
	cfg->c2c[index] = 0;
	if (ncpus >= 2)
		cfg->c2c[index] = bench_c2c_ns(cpus[0], cpus[1],
					       C2C_ROUND_TRIPS);
	run = alloc_zeroed(sizeof(*run));
	prods = alloc_zeroed(cfg->producers * sizeof(*prods));
	tids = calloc(cfg->producers, sizeof(*tids));
	if (!run || !prods || !tids) {
		fprintf(stderr, "throughput: out of memory\n");
		goto out;
	}
	run->cfg = cfg;
	run->opt = opt;
	run->mask = cfg->payload >= 8 ? UINT64_MAX :
					(1ull << (8 * cfg->payload)) - 1;
	run->consumer_cpu = opt->pin && ncpus ? cpus[0] : -1;

	for (i = 0; i < cfg->producers; i++) {
		struct producer *p = &prods[i];

		p->run = run;
		p->id = i;
		p->cpu = -1;
		if (opt->pin && ncpus)
			p->cpu = ncpus > 1 ? cpus[1 + i % (ncpus - 1)] :
					     cpus[0];
		p->quota = UINT64_MAX;
		if (opt->messages)
			p->quota = opt->messages / cfg->producers +
				   (i < opt->messages % cfg->producers);
		if (ring_descs[cfg->kind].is_lull && attach(cfg, &p->lprod))
			goto detach;
	}

	if (pthread_create(&ctid, NULL, consumer_main, run)) {
		fprintf(stderr, "throughput: pthread_create failed\n");
		goto detach;
	}
	for (started = 0; started < cfg->producers; started++) {
		if (pthread_create(&tids[started], NULL, producer_main,
				   &prods[started])) {
			fprintf(stderr, "throughput: pthread_create failed\n");
			run_fail(run, "pthread_create failed");
			atomic_store_explicit(&run->stop, 1,
					      memory_order_relaxed);
			break;
		}
	}

	busy_start = machine_busy_ns();
	t_start = bench_now_ns();
	/* Releases the run's setup to the threads' acquire in wait_go(). */
	atomic_store_explicit(&run->go, 1, memory_order_release);
	if (!opt->messages && started == cfg->producers) {
		sleep_ns((uint64_t)(opt->seconds * 1e9));
		atomic_store_explicit(&run->stop, 1, memory_order_relaxed);
	} else if (started == cfg->producers) {
		/*
		 * Message mode: a ring whose producers spin on each other
		 * (ck's in-order commit with more threads than CPUs) can
		 * crawl at a few hundred messages per second; stop it at
		 * --time-limit and measure what it delivered.
		 */
		uint64_t limit = t_start + (uint64_t)(opt->time_limit * 1e9);

		/* Relaxed: a count; the joins below order the rest. */
		while (atomic_load_explicit(&run->done, memory_order_relaxed) <
			       cfg->producers &&
		       bench_now_ns() < limit)
			sleep_ns(10000000);
		if (atomic_load_explicit(&run->done, memory_order_relaxed) <
		    cfg->producers) {
			atomic_store_explicit(&run->stop, 1,
					      memory_order_relaxed);
			truncated = true;
		}
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (started < cfg->producers) {
		/* Let the consumer see every producer done. */
		atomic_fetch_add_explicit(&run->done, cfg->producers - started,
					  memory_order_release);
	}
	pthread_join(ctid, NULL);
	busy = machine_busy_ns() - busy_start;
	if (started < cfg->producers)
		goto detach;

	/*
	 * Relaxed loads from here on: the joins ordered every thread's
	 * writes before them.
	 */
	sent = atomic_load_explicit(&run->sent, memory_order_relaxed);
	want_sum = atomic_load_explicit(&run->sent_sum, memory_order_relaxed);
	cpu_ns = atomic_load_explicit(&run->cpu_ns, memory_order_relaxed);
	if (atomic_load_explicit(&run->abort, memory_order_relaxed)) {
		fprintf(stderr, "throughput: run %d: %s\n", index + 1,
			run->err);
		goto detach;
	}
	if (run->received != sent ||
	    run->recv_sum != want_sum || run->bad) {
		fprintf(stderr,
			"throughput: run %d: %s P=%u payload=%zu: received "
			"%llu of %llu messages, sum %#llx want %#llx%s\n",
			index + 1, name, cfg->producers, cfg->payload,
			(unsigned long long)run->received,
			(unsigned long long)sent,
			(unsigned long long)run->recv_sum,
			(unsigned long long)want_sum,
			run->bad ? ", malformed records (length or type)" :
				   "");
		goto detach;
	}
	elapsed = run->t_end - t_start;
	if (!run->received || !elapsed) {
		fprintf(stderr, "throughput: run %d: %s: nothing measured\n",
			index + 1, name);
		goto detach;
	}
	cfg->msgs[index] = (double)run->received;
	cfg->mps[index] = (double)run->received * 1e9 / (double)elapsed;
	cfg->nspm[index] = (double)elapsed / (double)run->received;
	cfg->cpus[index] = (double)cpu_ns / (double)elapsed;
	cfg->other[index] =
		busy > cpu_ns ? (double)(busy - cpu_ns) / (double)elapsed : 0;
	cfg->done_runs++;
	if (truncated) {
		cfg->truncated_runs++;
		fprintf(stderr,
			"throughput: run %d of %s P=%u payload=%zu stopped at "
			"the %.0f s limit after %llu messages\n",
			index + 1, name, cfg->producers, cfg->payload,
			opt->time_limit, (unsigned long long)run->received);
	}
	if (opt->verbose)
		fprintf(stderr,
			"run %d/%d %-9s P=%u payload=%zu: %.2f M msg/s, "
			"%.2f ns/msg, %llu msgs, %.2f CPUs (others %.2f), "
			"c2c %.0f ns; full waits %llu (%llu yields), empty "
			"waits %llu (%llu yields)\n",
			index + 1, opt->runs, name, cfg->producers,
			cfg->payload, cfg->mps[index] / 1e6, cfg->nspm[index],
			(unsigned long long)run->received, cfg->cpus[index],
			cfg->other[index], cfg->c2c[index],
			(unsigned long long)atomic_load_explicit(
				&run->prod_waits, memory_order_relaxed),
			(unsigned long long)atomic_load_explicit(
				&run->prod_yields, memory_order_relaxed),
			(unsigned long long)run->cons_waits,
			(unsigned long long)run->cons_yields);
	ret = 0;

detach:
	for (i = 0; i < cfg->producers; i++) {
		if (prods[i].lprod) {
			r = lull_producer_detach(prods[i].lprod);
			if (r)
				fprintf(stderr,
					"throughput: lull_producer_detach: "
					"%s\n",
					lull_strerror(r));
		}
	}
out:
	free(run);
	free(prods);
	free(tids);
	return ret;
}

/* Output. */

struct summary {
	double mps, mps_min, mps_max, nspm, msgs, cpus, other, c2c;
};

static void summarise(const struct config *cfg, struct summary *s)
{
	double lo, hi;

	bench_stats(cfg->mps, cfg->done_runs, &s->mps, &s->mps_min,
		    &s->mps_max);
	bench_stats(cfg->nspm, cfg->done_runs, &s->nspm, &lo, &hi);
	bench_stats(cfg->msgs, cfg->done_runs, &s->msgs, &lo, &hi);
	bench_stats(cfg->cpus, cfg->done_runs, &s->cpus, &lo, &hi);
	bench_stats(cfg->other, cfg->done_runs, &s->other, &lo, &hi);
	bench_stats(cfg->c2c, cfg->done_runs, &s->c2c, &lo, &hi);
}

static void print_json(const struct config *cfg, const struct options *opt)
{
	struct summary s;

	summarise(cfg, &s);
	printf("{\"ring\":\"%s\",\"producers\":%u,\"payload\":%zu,"
	       "\"msgs_per_s\":%.0f,\"msgs_per_s_min\":%.0f,"
	       "\"msgs_per_s_max\":%.0f,\"ns_per_msg\":%.3f,"
	       "\"messages\":%.0f,\"cpus\":%.2f,\"other_cpus\":%.2f,"
	       "\"c2c_round_trip_ns\":%.0f,\"runs\":%d,\"capacity\":%zu,",
	       ring_descs[cfg->kind].name, cfg->producers, cfg->payload, s.mps,
	       s.mps_min, s.mps_max, s.nspm, s.msgs, s.cpus, s.other, s.c2c,
	       cfg->done_runs, opt->capacity);
	if (!ring_descs[cfg->kind].is_lull)
		printf("\"ck_slots\":%u,", cfg->ck_slots);
	if (opt->messages)
		printf("\"truncated_runs\":%d,", cfg->truncated_runs);
	printf("\"pinned\":%s,\"batch\":%u}\n", opt->pin ? "true" : "false",
	       opt->batch);
}

static void print_table(FILE *f, struct config *cfgs, int ncfgs,
			const struct options *opt)
{
	double busiest = 0;
	int i, j, truncated = 0;

	fprintf(f, "\n%-10s %4s %7s %9s %9s %9s %8s %5s %6s %5s %4s\n",
		"ring", "prod", "payload", "Mmsg/s", "min", "max", "ns/msg",
		"CPUs", "others", "c2c", "runs");
	for (i = 0; i < ncfgs; i++) {
		struct config *c = &cfgs[i];
		struct summary s;

		if (!c->done_runs) {
			fprintf(f, "%-10s %4u %7zu %9s\n",
				ring_descs[c->kind].name, c->producers,
				c->payload, "failed");
			continue;
		}
		summarise(c, &s);
		if (s.other > busiest)
			busiest = s.other;
		fprintf(f,
			"%-10s %4u %7zu %9.2f %9.2f %9.2f %8.2f %5.2f %6.2f "
			"%5.0f %4d%s\n",
			ring_descs[c->kind].name, c->producers, c->payload,
			s.mps / 1e6, s.mps_min / 1e6, s.mps_max / 1e6, s.nspm,
			s.cpus, s.other, s.c2c, c->done_runs,
			c->truncated_runs ? "*" : "");
		truncated += c->truncated_runs;
	}

	fprintf(f,
		"\nCPUs: CPU seconds per second used by the run's threads "
		"(about 1 means they\ntook turns on one CPU); others: the "
		"same for every other process; c2c: ns\nper cache-line round "
		"trip between the first two CPUs, measured before each run.\n");
	if (truncated)
		fprintf(f,
			"*: %d run(s) stopped at --time-limit before sending "
			"every message.\n",
			truncated);
	if (busiest > 0.1)
		fprintf(f,
			"warning: other processes used up to %.2f CPUs "
			"(median) during these runs;\nthe numbers are not "
			"clean.\n",
			busiest);
	fprintf(f, "\nlull / peer (median msg/s; > 1 means lull is faster)\n");
	for (i = 0; i < ncfgs; i++) {
		struct config *a = &cfgs[i];
		struct summary sa, sb;

		if (!ring_descs[a->kind].is_lull || !a->done_runs)
			continue;
		summarise(a, &sa);
		for (j = 0; j < ncfgs; j++) {
			struct config *b = &cfgs[j];

			if (ring_descs[b->kind].is_lull || !b->done_runs ||
			    b->producers != a->producers ||
			    b->payload != a->payload)
				continue;
			summarise(b, &sb);
			fprintf(f, "  P=%-2u payload=%-6zu %s / %s = %.2fx\n",
				a->producers, a->payload,
				ring_descs[a->kind].name,
				ring_descs[b->kind].name, sa.mps / sb.mps);
		}
	}
	(void)opt;
}

/* Options. */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: throughput [options]\n"
		"  --ring NAME       lull-spsc, lull-mpsc, ck-spsc, ck-mpmc, "
		"ck-mpsc\n"
		"                    (repeatable; default all)\n"
		"  --producers N     (repeatable; default 1 2 4 8; SPSC rings "
		"only run with 1)\n"
		"  --payload BYTES   (repeatable; default 8)\n"
		"  --seconds S       producers send for S seconds per run "
		"(default 1.0)\n"
		"  --messages M      or send M messages per run in all\n"
		"  --time-limit S    with --messages: stop a run after S "
		"seconds (default 60)\n"
		"  --runs R          repetitions; median, min, max "
		"(default 5)\n"
		"  --capacity BYTES  lull data bytes, power of two (default "
		"1 MiB);\n"
		"                    ck gets the same memory in slots\n"
		"  --batch N         lull_ring_read limit, ck dequeues per "
		"poll (default %u)\n"
		"  --pin             consumer on the first allowed CPU, "
		"producers round-robin\n"
		"                    on the others (default: no pinning)\n"
		"  --max-others F    repeat (up to twice) a run during which "
		"other processes\n"
		"                    used more than F CPUs (default: never)\n"
		"  --json            one JSON object per result on stdout; "
		"table to stderr\n"
		"  --verbose         print every run\n",
		DEFAULT_BATCH);
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-')
		return false;
	*v = x;
	return true;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_RING = 256, O_PROD, O_PAYLOAD, O_SECONDS, O_MESSAGES,
	       O_TIME_LIMIT, O_RUNS, O_CAPACITY, O_BATCH, O_MAX_OTHERS,
	       O_JSON, O_PIN, O_VERBOSE, O_HELP };
	static const struct option longopts[] = {
		{ "ring", required_argument, NULL, O_RING },
		{ "producers", required_argument, NULL, O_PROD },
		{ "payload", required_argument, NULL, O_PAYLOAD },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "messages", required_argument, NULL, O_MESSAGES },
		{ "time-limit", required_argument, NULL, O_TIME_LIMIT },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "capacity", required_argument, NULL, O_CAPACITY },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "max-others", required_argument, NULL, O_MAX_OTHERS },
		{ "json", no_argument, NULL, O_JSON },
		{ "pin", no_argument, NULL, O_PIN },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	char *end;
	int c, k;

	memset(opt, 0, sizeof(*opt));
	opt->seconds = 1.0;
	opt->time_limit = 60;
	opt->runs = 5;
	opt->capacity = DEFAULT_CAPACITY;
	opt->batch = DEFAULT_BATCH;
	opt->max_others = -1;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_RING:
			for (k = 0; k < RING_KINDS; k++)
				if (!strcmp(optarg, ring_descs[k].name))
					break;
			if (k == RING_KINDS) {
				fprintf(stderr, "throughput: unknown ring %s\n",
					optarg);
				return -1;
			}
			if (opt->nrings < RING_KINDS)
				opt->rings[opt->nrings++] = k;
			break;
		case O_PROD:
			if (!parse_u64(optarg, &v) || !v || v > 1024 ||
			    opt->nproducers == MAX_LIST) {
				fprintf(stderr,
					"throughput: bad --producers\n");
				return -1;
			}
			opt->producers[opt->nproducers++] = (unsigned int)v;
			break;
		case O_PAYLOAD:
			if (!parse_u64(optarg, &v) || v > INT32_MAX ||
			    opt->npayloads == MAX_LIST) {
				fprintf(stderr, "throughput: bad --payload\n");
				return -1;
			}
			opt->payloads[opt->npayloads++] = (size_t)v;
			break;
		case O_SECONDS:
			opt->seconds = strtod(optarg, &end);
			if (*end || !(opt->seconds > 0) ||
			    opt->seconds > 3600) {
				fprintf(stderr, "throughput: bad --seconds\n");
				return -1;
			}
			opt->messages = 0;
			break;
		case O_MESSAGES:
			if (!parse_u64(optarg, &opt->messages) ||
			    !opt->messages) {
				fprintf(stderr, "throughput: bad --messages\n");
				return -1;
			}
			break;
		case O_TIME_LIMIT:
			opt->time_limit = strtod(optarg, &end);
			if (*end || !(opt->time_limit > 0) ||
			    opt->time_limit > 86400) {
				fprintf(stderr,
					"throughput: bad --time-limit\n");
				return -1;
			}
			break;
		case O_RUNS:
			if (!parse_u64(optarg, &v) || !v || v > 1000) {
				fprintf(stderr, "throughput: bad --runs\n");
				return -1;
			}
			opt->runs = (int)v;
			break;
		case O_CAPACITY:
			if (!parse_u64(optarg, &v) ||
			    lull_ring_region_size(v) < 0) {
				fprintf(stderr,
					"throughput: bad --capacity (a power "
					"of two, %zu to %zu)\n",
					LULL_RING_MIN_CAPACITY,
					LULL_RING_MAX_CAPACITY);
				return -1;
			}
			opt->capacity = (size_t)v;
			break;
		case O_BATCH:
			if (!parse_u64(optarg, &v) || !v || v > INT_MAX) {
				fprintf(stderr, "throughput: bad --batch\n");
				return -1;
			}
			opt->batch = (unsigned int)v;
			break;
		case O_MAX_OTHERS:
			opt->max_others = strtod(optarg, &end);
			if (*end || !(opt->max_others >= 0)) {
				fprintf(stderr,
					"throughput: bad --max-others\n");
				return -1;
			}
			break;
		case O_JSON:
			opt->json = true;
			break;
		case O_PIN:
			opt->pin = true;
			break;
		case O_VERBOSE:
			opt->verbose = true;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	if (!opt->nrings)
		for (k = 0; k < RING_KINDS; k++)
			opt->rings[opt->nrings++] = k;
	if (!opt->nproducers) {
		static const unsigned int def[] = { 1, 2, 4, 8 };

		for (k = 0; k < 4; k++)
			opt->producers[opt->nproducers++] = def[k];
	}
	if (!opt->npayloads)
		opt->payloads[opt->npayloads++] = 8;
	return 0;
}

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	struct options opt;
	struct config *cfgs;
	int ncfgs = 0, ncpus, i, j, k, run, status = 0;

	if (parse_options(argc, argv, &opt))
		return 2;
	ncpus = bench_allowed_cpus(cpus);

	cfgs = calloc((size_t)opt.npayloads * opt.nproducers * opt.nrings,
		      sizeof(*cfgs));
	if (!cfgs)
		return 1;
	for (i = 0; i < opt.npayloads; i++) {
		for (j = 0; j < opt.nproducers; j++) {
			for (k = 0; k < opt.nrings; k++) {
				enum ring_kind kind = opt.rings[k];
				struct config *c = &cfgs[ncfgs];

				if (!ring_descs[kind].multi_producer &&
				    opt.producers[j] != 1)
					continue;
				c->kind = kind;
				c->producers = opt.producers[j];
				c->payload = opt.payloads[i];
				ncfgs++;
				if (config_setup(c, &opt)) {
					fprintf(stderr,
						"throughput: %s P=%u "
						"payload=%zu: setup failed\n",
						ring_descs[kind].name,
						c->producers, c->payload);
					c->failed = true;
					status = 1;
				}
			}
		}
	}
	if (!ncfgs) {
		fprintf(stderr, "throughput: nothing to run (SPSC rings need "
				"--producers 1)\n");
		return 2;
	}

	fprintf(stderr,
		"throughput: lull %s, %d config(s) x %d run(s), capacity %zu, "
		"batch %u, %d CPU(s), %s\n",
		lull_version(), ncfgs, opt.runs, opt.capacity, opt.batch,
		ncpus, opt.pin ? "pinned" : "not pinned");
	if (opt.messages)
		fprintf(stderr, "throughput: %llu messages per run\n",
			(unsigned long long)opt.messages);
	else
		fprintf(stderr, "throughput: %.3f s per run\n", opt.seconds);
	fprintf(stderr, "throughput: load average %.2f before\n",
		load_average());

	/* Round-robin: run r of every config before run r + 1 of any. */
	for (run = 0; run < opt.runs; run++) {
		for (i = 0; i < ncfgs; i++) {
			struct config *c = &cfgs[i];
			int attempt;

			for (attempt = 0; !c->failed; attempt++) {
				if (run_once(c, &opt, cpus, ncpus, run)) {
					c->failed = true;
					status = 1;
					break;
				}
				if (opt.max_others < 0 ||
				    c->other[run] <= opt.max_others ||
				    attempt == 2)
					break;
				fprintf(stderr,
					"throughput: run %d of %s P=%u "
					"payload=%zu repeated: other processes "
					"used %.2f CPUs\n",
					run + 1, ring_descs[c->kind].name,
					c->producers, c->payload,
					c->other[run]);
				c->done_runs--;
			}
		}
	}

	fprintf(stderr, "throughput: load average %.2f after\n",
		load_average());
	if (opt.json)
		for (i = 0; i < ncfgs; i++)
			if (cfgs[i].done_runs)
				print_json(&cfgs[i], &opt);
	fflush(stdout);
	print_table(opt.json ? stderr : stdout, cfgs, ncfgs, &opt);

	for (i = 0; i < ncfgs; i++)
		config_free(&cfgs[i]);
	free(cfgs);
	return status;
}
