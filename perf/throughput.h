/* SPDX-License-Identifier: MIT */
/*
 * throughput.h - what the files of the throughput benchmark share: its
 * options, one configuration and one run, and the interface every ring
 * under test implements (struct peer_ring), with the inline loops a ring's
 * file builds its producer and consumer from.
 *
 * The hot paths stay free of dispatch: a ring's file passes its own static
 * push or pop function to tp_produce() or tp_consume_spin(), which are
 * always inlined, so each ring gets a loop of its own with the call inlined,
 * as when every ring lived in one translation unit.  The interface is only
 * called once per run per thread.
 *
 * Files: throughput.c (configurations, runs, threads, checks),
 * throughput_options.c, throughput_report.c (table, ratios, targets, JSON),
 * peers.c (the list of rings), and one file per ring: peer_lull.c,
 * peer_ck.c, peer_rte.c (DPDK), peer_urcu.c (liburcu), peer_pipe.c,
 * peer_eventfd.c, and the C++ ones, peer_boost.cpp (boost.lockfree) and
 * peer_moodycamel.cpp.
 *
 * C++ peers include this header too (g++ -std=c++23, whose <stdatomic.h>
 * maps _Atomic(T) to std::atomic<T> with the same size and alignment): the
 * atomic members are spelt _Atomic(T), and everything declared here has C
 * linkage.
 */
#ifndef LULL_PERF_THROUGHPUT_H
#define LULL_PERF_THROUGHPUT_H

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lull.h>

#include "bench_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MAX_LIST 32
#define MSG_TYPE 1
#define DEFAULT_CAPACITY ((size_t)1 << 20)
#define DEFAULT_BATCH 4096u
#define DEFAULT_SECONDS 0.5
#define DEFAULT_RUNS 3
#define STALL_NS (10ull * 1000000000ull)
#define VALUE_STRIDE 0x9e3779b97f4a7c15ull
#define LINE 128
#define RTE_BURST 256u
#define MQ_BURST 256u /* eventfd: messages taken per lock */
#define ITEM_POP 32u  /* boost, moodycamel: messages taken per pop */
#define MAX_PUSH_BATCH 1024u /* --producer-batch */

/* The rings, in the order of the table: indices into tp_rings[]. */
enum ring_kind {
	RING_LULL_SPSC,
	RING_LULL_MPSC,
	RING_LULL_LANES,
	RING_CK_SPSC,
	RING_CK_MPMC,
	RING_CK_MPSC,
	RING_RTE_SPSC,
	RING_RTE_MPSC,
	RING_URCU_WFCQ,
	RING_BOOST_SPSC,
	RING_BOOST_SPSC_BULK,
	RING_MOODYCAMEL,
	RING_PIPE,
	RING_EVENTFD,
	RING_KINDS
};

/*
 * Whom a lull ring is compared with: lull-spsc with the SPSC peers,
 * lull-mpsc with the MPSC ones, and both with the general ones (pipe,
 * eventfd: any number of producers).
 */
enum ring_class { CLASS_SPSC, CLASS_MPSC, CLASS_GENERAL };

struct options;
struct config;
struct run;
struct producer;
struct consumer_state;

/*
 * A lull ring's counters (lull_ring_stats()); a run takes the difference.
 * syscalls: the consumer's data-path system calls they stand for.
 */
struct peer_counters {
	uint64_t wakes, parks, park_cancels, safety_timeouts, syscalls;
	uint64_t claim_retries; /* MPSC claims that lost the tail's CAS */
	uint64_t claim_waits;   /* reads stopped at a claimed record */
};

/*
 * One ring under test.  Every hook but the names may be NULL where the ring
 * needs nothing; a ring whose package was missing at build time has no
 * setup (peers.c) and is listed as not built.  All hooks run on main's
 * thread except produce and end_stream (producer threads) and consume and
 * consumer_exit (the consumer thread).
 */
struct peer_ring {
	const char *name;
	enum ring_class cls;
	bool is_lull;
	bool target;  /* a peer of lull's throughput targets */
	bool kernel;  /* errors are errno values, not lull's */
	/*
	 * 0: one message per push, whatever --producer-batch says.  Else
	 * the ring can push several at once: --producer-batch of them, or
	 * this many when the option is not given (config.push_batch).
	 */
	unsigned int push_batch;

	/*
	 * Once per configuration, before the first run: the ring, its
	 * memory (the same for every ring: tp_slots_setup()), pre-faulted.
	 * Returns 0 or a negative errno, having said why on stderr; may set
	 * cfg->skipped instead.
	 */
	int (*setup)(struct config *cfg, const struct options *opt);
	/* Producer @i's handle for every run (lull: attached at setup). */
	void *(*producer_attach)(struct config *cfg, unsigned int i);
	/* Before and after each run: what each run makes anew. */
	int (*run_open)(struct run *run);
	void (*run_close)(struct run *run);
	/* A producer thread's run: tp_produce() around the ring's push. */
	void (*produce)(struct producer *p, unsigned char *msg);
	/*
	 * The last producer is done (@handle: its producer_attach handle,
	 * or the first one's when main ends the stream): tell the consumer
	 * that no message follows, so that it need not poll a flag.
	 */
	void (*end_stream)(struct run *run, void *handle);
	/* The consumer thread's run: pop batches until the end. */
	void (*consume)(struct run *run, struct consumer_state *cs);
	void (*consumer_exit)(struct run *run);
	/* lull: its counters now. */
	void (*counters)(struct config *cfg, struct peer_counters *c);
	/* JSON fields of its own ("slots":N, ...), each ending with ','. */
	void (*json)(const struct config *cfg);
	void (*teardown)(struct config *cfg);
};

extern const struct peer_ring *const tp_rings[RING_KINDS];

static inline bool tp_built(enum ring_kind kind)
{
	return tp_rings[kind]->setup != NULL;
}

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
	unsigned int push_batch; /* --producer-batch; 0: each ring's own */
	double max_others; /* repeat runs busier than this; < 0: never */
	int64_t lull_spin_ns; /* < 0: lull's default */
	bool lull_read_runs;  /* --lull-read runs: lull_ring_read_items() */
	bool json;
	bool pin;
	bool verbose;
};

/* How many messages @ring's producers push at once under @opt. */
static inline unsigned int tp_push_batch(const struct peer_ring *ring,
					 const struct options *opt)
{
	if (!ring->push_batch)
		return 1;
	return opt->push_batch ? opt->push_batch : ring->push_batch;
}

/* What one timed run measured. */
struct run_result {
	double mps;   /* messages per second */
	double nspm;  /* ns per message */
	double msgs;  /* messages */
	double cpus;  /* CPU seconds per second of the run */
	double other; /* the same for everything else on the machine */
	double c2c;   /* cache-line round trip ns just before the run */
	double wpm;   /* wake-up system calls per message */
	double spm;   /* data-path system calls per message, both sides */
	double ppm;   /* lull: consumer parks (sleeps) per message */
	double cpm;   /* lull: parks cancelled at the re-check, per message */
	double safety; /* lull: parks ended by the safety net */
	double rpm;    /* lull: claim CAS retries per message */
	double clwpm;  /* lull: reads stopped at a claim, per message */
};

/* One (ring, producers, payload) combination and its results. */
struct config {
	enum ring_kind kind;
	const struct peer_ring *ring;
	unsigned int producers;
	size_t payload;
	unsigned int push_batch; /* messages per push (tp_push_batch()) */
	bool failed;
	bool skipped;

	void *state; /* the ring's own, from its setup */

	/* Equal memory (tp_slots_setup()): ck, rte, eventfd's FIFO */
	unsigned int slots;  /* also urcu's nodes */
	unsigned char *slab; /* producers * slab_count buffers */
	size_t stride;       /* align8(payload) when slabbed, else 0 */
	size_t slab_count;   /* buffers per producer */

	struct run_result *res; /* per run */
	int done_runs;
	int truncated_runs; /* message mode: stopped at --time-limit */
};

/* The shared state of one run; control flags on lines of their own. */
struct run {
	struct config *cfg;
	const struct options *opt;
	int consumer_cpu;
	uint64_t mask; /* the value bits that fit in the payload */
	void *state;   /* the ring's own, from its run_open */

	alignas(LINE) _Atomic(int) go;
	alignas(LINE) _Atomic(int) stop;
	alignas(LINE) _Atomic(int) abort;
	_Atomic(unsigned int) done;
	_Atomic(uint64_t) sent;
	_Atomic(uint64_t) sent_sum;
	_Atomic(uint64_t) prod_waits;    /* producer back-offs on a full ring */
	_Atomic(uint64_t) prod_yields;   /* of which sched_yield() */
	_Atomic(uint64_t) prod_syscalls; /* pipe and doorbell writes */
	_Atomic(uint64_t) cpu_ns;        /* CPU time of all the run's threads */

	/* Written by the consumer, read by main after the join. */
	alignas(LINE) uint64_t t_end;
	uint64_t received;
	uint64_t recv_sum;
	uint64_t bad;
	bool poisoned;
	uint64_t cons_waits;    /* consumer back-offs or parks, empty ring */
	uint64_t cons_yields;   /* of which sched_yield() */
	uint64_t cons_syscalls; /* pipe and eventfd reads */
	char err[160];
};

struct producer {
	alignas(LINE) struct run *run;
	unsigned int id;
	int cpu;
	uint64_t quota; /* messages to send, or UINT64_MAX until stop */
	void *handle;   /* lent by the config: producer_attach's */
	int err;
};

/* A producer's position in its slab or node pool, and its counts. */
struct send_state {
	struct bench_backoff bo;
	size_t slab_next; /* next slab buffer or pool node */
	uint64_t taken;   /* urcu: nodes enqueued this run */
	uint64_t freed;   /* urcu: the consumer's last published count */
	uint64_t syscalls;
};

struct consumer_state {
	uint64_t count;
	uint64_t sum;
	uint64_t bad;
	uint64_t mask;
	size_t payload;
	unsigned char *sink;
	bool end;      /* lull: the end record or the poison arrived */
	bool poisoned; /* lull: the poison record arrived */
	uint64_t syscalls;
};

/* throughput.c: the harness the rings call back. */
__attribute__((format(printf, 2, 3))) void tp_run_fail(struct run *run,
						       const char *fmt, ...);
void tp_producers_done(struct run *run, unsigned int n, void *handle);
void tp_account_cpu(struct run *run);
bool tp_stalled_check(struct run *run, uint64_t *last_count,
		      uint64_t *last_ns, uint64_t count);
int tp_slots_setup(struct config *cfg, const struct options *opt,
		   size_t extra_per_producer);
void *tp_alloc_zeroed(size_t size);

/* throughput_options.c, throughput_report.c */
int tp_parse_options(int argc, char **argv, struct options *opt);
void tp_print_json(struct config *cfgs, int ncfgs, const struct config *cfg,
		   const struct options *opt);
void tp_print_table(FILE *f, struct config *cfgs, int ncfgs,
		    const struct options *opt);

/* peer_lull.c: what the report says about lull's settings. */
bool tp_lull_membarrier_used(void);
const char *tp_lull_spin_json(int64_t spin_ns);

static inline bool tp_aborted(struct run *run)
{
	/* Relaxed: a flag, see tp_run_fail(). */
	return atomic_load_explicit(&run->abort, memory_order_relaxed);
}

/*
 * The consumers' watchdog, called now and then while they find nothing to
 * take.  A consumer that has taken nothing for STALL_NS fails the run here;
 * true tells it to stop.
 */
struct progress {
	uint64_t last_count; /* cs->count at the last call that saw it move */
	uint64_t last_ns;    /* when */
};

static inline bool tp_stalled(struct run *run, struct progress *p,
			      const struct consumer_state *cs)
{
	return tp_stalled_check(run, &p->last_count, &p->last_ns, cs->count);
}

/* Whether every producer is done and all they sent was received. */
static inline bool tp_all_received(struct run *run,
				   const struct consumer_state *cs)
{
	/*
	 * Acquire pairs with the producers' release increment of done in
	 * tp_producers_done(): their sent counts are final.
	 */
	if (atomic_load_explicit(&run->done, memory_order_acquire) !=
	    run->cfg->producers)
		return false;
	return cs->count >= atomic_load_explicit(&run->sent,
						 memory_order_relaxed);
}

/*
 * Producers.  One loop per ring, specialised by constant propagation of
 * @send through this always-inlined function, so no ring pays for a
 * dispatch.  @send writes one message of @value and returns 0, or a
 * negative error (-ECANCELED: the run was aborted).
 */
typedef int tp_send_fn(struct producer *p, struct config *cfg,
		       unsigned char *msg, uint64_t value,
		       struct send_state *st);

/*
 * A producer's run is over (@r: its last send's result): report a
 * failure, add its counts to the run's (relaxed: main reads them after
 * joining every thread), and tell the consumer when it was the last.
 */
static inline void tp_produce_end(struct producer *p, int r, uint64_t seq,
				  uint64_t sum, const struct send_state *st)
{
	struct run *run = p->run;
	struct config *cfg = run->cfg;

	if (r && r != -ECANCELED) {
		p->err = r;
		tp_run_fail(run, "%s: producer %u: write failed: %s",
			    cfg->ring->name, p->id,
			    cfg->ring->kernel ? strerror(-r) :
						lull_strerror(r));
	}
	atomic_fetch_add_explicit(&run->sent, seq, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->sent_sum, sum, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_waits, st->bo.waits,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_yields, st->bo.yields,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_syscalls, st->syscalls,
				  memory_order_relaxed);
	tp_account_cpu(run);
	tp_producers_done(run, 1, p->handle);
}

static inline __attribute__((always_inline)) void
tp_produce(struct producer *p, unsigned char *msg, tp_send_fn *send)
{
	struct run *run = p->run;
	struct config *cfg = run->cfg;
	uint64_t base = (uint64_t)(p->id + 1) * VALUE_STRIDE;
	uint64_t seq, sum = 0;
	struct send_state st;
	int r = 0;

	memset(&st, 0, sizeof(st));
	bench_backoff_init(&st.bo);
	for (seq = 0; seq < p->quota; seq++) {
		uint64_t value = (base + seq) & run->mask;

		/*
		 * Relaxed: a flag, raised once by main (time mode, or the
		 * time limit); until then its line stays shared in every
		 * cache and the load costs next to nothing.
		 */
		if (atomic_load_explicit(&run->stop, memory_order_relaxed))
			break;
		r = send(p, cfg, msg, value, &st);
		if (unlikely(r))
			break;
		bench_backoff_reset(&st.bo);
		sum += value;
	}
	tp_produce_end(p, r, seq, sum, &st);
}

/*
 * Producers that push several messages at once (config.push_batch > 1):
 * @send writes the @n messages of @values (n <= MAX_PUSH_BATCH), all of
 * them, and returns 0, or a negative error (-ECANCELED: the run was
 * aborted).  The stop flag is checked once per batch, so a producer may
 * send up to a batch more than one that pushes one at a time.
 */
typedef int tp_send_batch_fn(struct producer *p, struct config *cfg,
			     unsigned char *msg, const uint64_t *values,
			     unsigned int n, struct send_state *st);

static inline __attribute__((always_inline)) void
tp_produce_batch(struct producer *p, unsigned char *msg,
		 tp_send_batch_fn *send)
{
	struct run *run = p->run;
	struct config *cfg = run->cfg;
	uint64_t base = (uint64_t)(p->id + 1) * VALUE_STRIDE;
	uint64_t values[MAX_PUSH_BATCH];
	uint64_t seq = 0, sum = 0;
	unsigned int i, n = 0;
	struct send_state st;
	int r = 0;

	memset(&st, 0, sizeof(st));
	bench_backoff_init(&st.bo);
	while (seq < p->quota) {
		/* Relaxed: a flag, as in tp_produce(). */
		if (atomic_load_explicit(&run->stop, memory_order_relaxed))
			break;
		n = p->quota - seq < cfg->push_batch ?
			    (unsigned int)(p->quota - seq) :
			    cfg->push_batch;
		for (i = 0; i < n; i++)
			values[i] = (base + seq + i) & run->mask;
		r = send(p, cfg, msg, values, n, &st);
		if (unlikely(r))
			break;
		bench_backoff_reset(&st.bo);
		for (i = 0; i < n; i++)
			sum += values[i];
		seq += n;
	}
	tp_produce_end(p, r, seq, sum, &st);
}

/*
 * What a slot ring carries for @value: the value itself in the pointer
 * slot (payload <= 8), or the address of the producer's next slab buffer,
 * filled with the message built in @msg.
 */
static inline __attribute__((always_inline)) void *
tp_slot_entry(struct producer *p, struct config *cfg, unsigned char *msg,
	      uint64_t value, struct send_state *st)
{
	unsigned char *buf;

	if (!cfg->stride)
		return (void *)(uintptr_t)value;
	buf = cfg->slab + (p->id * cfg->slab_count + st->slab_next) *
				  cfg->stride;
	memcpy(msg, &value, 8);
	memcpy(buf, msg, cfg->payload);
	if (++st->slab_next == cfg->slab_count)
		st->slab_next = 0;
	return buf;
}

/*
 * Consumer.  Every ring's consumer does the same per message: copy the
 * payload out into the sink when it is larger than 8 bytes (the pipe's
 * read() did that already), take the value from its first 8 bytes, add it
 * to the sum and count the message.  The lull handlers also check the
 * record's type (a predictable branch: the end and poison records are the
 * only others) and fold its length into cs->bad: the peers have neither to
 * check.
 */
static inline __attribute__((always_inline)) void
tp_take_value(struct consumer_state *cs, uint64_t v)
{
	cs->sum += v & cs->mask;
	cs->count++;
}

static inline __attribute__((always_inline)) void
tp_take_copy(struct consumer_state *cs, const void *data, size_t len)
{
	uint64_t v;

	memcpy(cs->sink, data, len);
	memcpy(&v, cs->sink, 8);
	tp_take_value(cs, v);
}

/* A slot ring's entry: the value, or a slab buffer to copy out. */
static inline __attribute__((always_inline)) void
tp_take_entry(struct consumer_state *cs, const struct config *cfg,
	      void *entry)
{
	if (cfg->stride)
		tp_take_copy(cs, entry, cfg->payload);
	else
		tp_take_value(cs, (uint64_t)(uintptr_t)entry);
}

/*
 * The spinning consumers (ck, rte, urcu): take batches with @pop, which
 * returns how many it took (0: the ring was empty), and back off with
 * bench_backoff_wait() while there are none.
 */
typedef int tp_pop_fn(struct config *cfg, struct consumer_state *cs,
		      unsigned int batch);

static inline __attribute__((always_inline)) void
tp_consume_spin(struct run *run, struct consumer_state *cs, tp_pop_fn *pop)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	struct progress prog = { .last_count = 0,
				.last_ns = bench_now_ns() };
	unsigned int empties = 0;
	struct bench_backoff bo;
	int r;

	bench_backoff_init(&bo);
	for (;;) {
		r = pop(cfg, cs, batch);
		if (likely(r > 0)) {
			bench_backoff_reset(&bo);
			continue;
		}
		if (tp_all_received(run, cs) || tp_aborted(run))
			break;
		if (++empties % 1024 == 0 && tp_stalled(run, &prog, cs))
			break;
		bench_backoff_wait(&bo);
	}
	run->cons_waits = bo.waits;
	run->cons_yields = bo.yields;
}

#ifdef __cplusplus
}
#endif

#endif /* LULL_PERF_THROUGHPUT_H */
