/* SPDX-License-Identifier: MIT */
/*
 * throughput.c - messages per second through one consumer and P producers,
 * for lull's rings, with lull's own parked consumer, and their peers side by
 * side: Concurrency Kit's ck_ring, DPDK's rte_ring, liburcu's wfcqueue, a
 * pipe and an eventfd doorbell queue.
 *
 * Rings (--ring, repeatable; default every one that was built):
 *   lull-spsc  lull SPSC ring: lull_spsc_write() of the payload.
 *   lull-mpsc  lull MPSC ring: each producer has its own lull_producer and
 *              calls lull_mpsc_write().
 *              The lull consumer is lull's parked consumer: lull_ring_read()
 *              with a large batch limit and, when the ring is empty,
 *              lull_ring_wait() (lull's park: a futex wait after the park
 *              handshake, spin before it per --lull-spin-ns, default 0 as in
 *              lull), so that the producers' wake-up system calls are real.
 *   ck-spsc    ck_ring_enqueue_spsc() / ck_ring_dequeue_spsc().
 *   ck-mpmc    ck_ring_enqueue_mpmc() / ck_ring_dequeue_mpmc(): ck's
 *              general ring, whose dequeue pays a CAS even with one consumer.
 *   ck-mpsc    ck_ring_enqueue_mpsc() / ck_ring_dequeue_mpsc(): the same
 *              multi-producer enqueue (a CAS on p_head, then an in-order
 *              wait for p_tail) with the single-consumer dequeue.
 *   rte-spsc   DPDK rte_ring made with RING_F_SP_ENQ | RING_F_SC_DEQ:
 *              rte_ring_sp_enqueue() of one message,
 *              rte_ring_sc_dequeue_burst() of up to 256.
 *   rte-mpsc   rte_ring made with RING_F_SC_DEQ: rte_ring_mp_enqueue() (the
 *              classic CAS on the head, then an in-order wait for the tail)
 *              and the same burst dequeue.  rte_ring_init() on memory this
 *              program allocates (rte_ring_get_memsize()): no EAL, no
 *              hugepages, no privileges.
 *   urcu-wfcq  liburcu's wait-free concurrent queue (inline LGPL build, no
 *              library to link): each producer takes a node from its own
 *              pool, fills it and cds_wfcq_enqueue()s it (one xchg); the
 *              consumer __cds_wfcq_splice_blocking()s the whole queue into a
 *              local one and walks it; where a producer has swapped the
 *              tail but not linked its node yet, it waits 10 PAUSEs and
 *              then sched_yield()s (urcu's default would sleep 10 ms).
 *              The queue is unbounded, so the pools bound it: the consumer
 *              gives a producer's nodes back by publishing how many of
 *              them it has finished, every 64 and whenever the queue is
 *              empty; a producer whose pool is all in flight backs off
 *              like a producer of a full ring.
 *   pipe       one pipe (F_SETPIPE_SZ --capacity): each producer write()s
 *              one fixed-size message (atomic, <= PIPE_BUF); the consumer
 *              read()s up to --batch messages (64 KiB at most) and takes
 *              each in place (the read was its copy-out).  Both sides block
 *              in the kernel: a full pipe blocks the writer, an empty one
 *              the reader.  The run ends when the last producer closes the
 *              write end (EOF).
 *   eventfd    the classic event-loop mailbox: a bounded FIFO of pointer
 *              slots (as many as ck's) under a pthread mutex, plus an
 *              eventfd doorbell.  A producer locks, appends one message,
 *              unlocks, then write(efd, 1)s; the consumer locks, takes up
 *              to 256 messages, unlocks, handles them, and when the FIFO is
 *              empty blocks in read(efd) (not EFD_SEMAPHORE: one read
 *              takes the whole count).  A full FIFO makes the producer back
 *              off (outside the lock) like the spinning rings.  The mutex's
 *              own futex calls under contention are not counted.
 * SPSC rings only run with one producer.
 *
 * Waiting.  The lull consumer parks (above).  The spinning peers (ck, rte,
 * urcu) keep their natural waiting: on an empty ring the consumer, and on a
 * full ring (or an exhausted urcu pool) the producer, back off with
 * bench_backoff_wait() (PAUSE spins, then sched_yield()), as do lull's
 * producers on a full ring, so that every ring's producers wait alike
 * (lull_producer_wait() would park them; it is not measured here).  pipe
 * and eventfd block in the kernel.
 *
 * wakes_per_msg: wake-up system calls made by the producers, per message.
 * lull: lull_ring_stats().wakes over the run (a producer makes one only when
 * it finds the consumer parked); pipe: every write() (1 per message; each
 * can wake the reader); eventfd: every doorbell write() (1 per message);
 * ck, rte, urcu: 0 (they never wake anyone).  syscalls_per_msg counts every
 * system call of the data path on both sides: those wakes, the consumer's
 * read()s (pipe, eventfd), the sched_yield()s of the back-offs, and for
 * lull its consumer's park attempts: each one, slept (parks) or cancelled
 * at the re-check (park_cancels), issues the park barrier, which for a ring
 * lull allocated is membarrier(PRIVATE_EXPEDITED) where the kernel has it
 * (docs/DESIGN.md: an IPI to every CPU running one of our threads, the
 * producers' included), and each one slept is also a futex wait.
 *
 * Equal work.  The slot rings (ck, rte, eventfd's FIFO) move pointers, lull
 * copies
 * records, so:
 *   payload <= 8  the slot rings carry the value itself in the pointer slot
 *                 (the fair zero-copy equivalent of a small record); lull
 *                 copies it in and the consumer reads it in place; urcu
 *                 copies it into the node.
 *   payload > 8   each slot-ring producer owns a slab of buffers; it builds
 *                 the message in a local buffer, copies it into the next
 *                 slab buffer and enqueues that buffer's address.  The lull
 *                 producer builds the same local message and lull_*_write()
 *                 copies it into the ring; the urcu producer copies it into
 *                 its node.  Every consumer copies the payload out into a
 *                 sink buffer (pipe: read() did), then sums its first 8
 *                 bytes.  A producer's slab has slots + 1 buffers, used
 *                 round-robin: by the time it writes a buffer again, its
 *                 enqueue of the message before has seen the consumer at
 *                 least slots - 2 behind the ring's end, so the consumer has
 *                 dequeued the message after the buffer's last user, hence
 *                 finished copying that user out (the consumer works in
 *                 order).  The rte and eventfd consumers take a burst
 *                 before they copy any of it out, freeing up to 256 slots
 *                 whose buffers are still to be read, so their slabs have
 *                 256 buffers more.
 *
 * Equal memory.  --capacity is lull's data area in bytes (default 1 MiB).
 * The slot rings get the largest power-of-two slot count whose memory fits
 * in the same bytes: capacity / 8 slots for payload <= 8, capacity /
 * (8 + align8(payload)) rounded down to a power of two for larger payloads
 * (slot plus one slab buffer per slot; the slab is per producer, but a
 * producer's share of the traffic only ever touches its own).  rte_ring
 * holds one message less than its slots.  urcu's producers share capacity /
 * (16 + align8(max(payload, 8))) nodes (at least 256 each); the pipe gets
 * capacity bytes.  At payload 8 lull's 16-byte records hold half the
 * messages that an 8-byte slot does: the same cache footprint, not the same
 * message count.
 *
 * Fairness.  The rings are interleaved within each repetition: run 1 of
 * every ring, then run 2 of every ring, and so on, so machine noise hits all
 * alike; each result is the median over --runs, with min and max.  Every
 * ring is created and pre-faulted once before the first run and reused (the
 * pipe and the eventfd are made anew for each run).  The lull producers are
 * attached once, before the pre-fault, and each run hands them to its
 * threads (a producer moves between threads one at a time): the last detach
 * shuts a lull ring down, so they are detached only when the ring goes.
 *
 * Checks.  Producer p sends the values (p + 1) * K + seq (cut to the
 * payload's bytes); the consumer counts the messages and sums the values,
 * so the compiler cannot drop the work, and both must match what the
 * producers sent (exit status 1 otherwise).  lull records are also checked
 * for their length and type.  The end of a run: the spinning consumers stop
 * when every producer is done and everything sent was received; the last
 * producer to finish writes an end record (lull; it wakes a parked
 * consumer), closes the pipe or rings the eventfd once more.  A lull poison
 * record (the ring was shut down) or -EPIPE fails the run.
 *
 * Diagnostics.  Each run also records the CPU time its threads got, the CPU
 * time every other process took meanwhile (--max-others repeats runs that
 * shared the machine) and the cache-line round trip between the first two
 * CPUs: on a virtual machine the latter can change several times over as
 * the host moves the virtual CPUs, and every ring's result follows it.
 * --verbose prints each run with its back-off, wake and park counts.
 *
 * Build: make build/perf/throughput (or make bench, which also runs it);
 *        rte-* need DPDK's headers and -lrte_ring (pkg-config libdpdk),
 *        urcu-wfcq liburcu's headers; without them those rings are left out.
 * Run:   build/perf/throughput --runs 5 --seconds 1 [--pin] [--json]
 * Plot:  build/perf/throughput --json > t.json && perf/json2dat.py t.json
 *        out/ && gnuplot -e "dir='out'" perf/plot_throughput.gp
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
/* liburcu's wfcqueue as inline functions: nothing to link.  Before urcu. */
#define _LGPL_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>
#include <ck_ring.h>

/*
 * The peers from other packages are built when their headers are found:
 * DPDK's under pkg-config's -I (which also links -lrte_ring), liburcu's in
 * the system include path.
 */
#if defined(__has_include)
#if __has_include(<rte_ring.h>)
#define HAVE_RTE_RING 1
#endif
#if __has_include(<urcu/wfcqueue.h>)
#define HAVE_URCU_WFCQ 1
#endif
#endif

#ifdef HAVE_RTE_RING
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wpointer-arith"
#include <rte_ring.h>
#pragma GCC diagnostic pop
#endif
#ifdef HAVE_URCU_WFCQ
/*
 * The consumer's wait for a node whose producer has swapped the tail but
 * not linked the node yet: 10 PAUSEs, then, by default, a 10 ms sleep.
 * Through the header's documented hook it yields instead, like every other
 * back-off here (a 10 ms nap per preempted producer would measure the
 * hook, not the queue).  Counted as consumer yields.
 */
static _Thread_local uint64_t wfcq_yields;
#define CDS_WFCQ_WAIT_SLEEP(msec) ((void)(msec), wfcq_yields++, sched_yield())
#include <urcu/wfcqueue.h>
#endif

#include <lull.h>

#include "bench_common.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define MAX_LIST 32
#define MSG_TYPE 1
#define END_TYPE 2 /* lull: the last producer's end-of-run record */
#define DEFAULT_CAPACITY ((size_t)1 << 20)
#define DEFAULT_BATCH 4096u
#define DEFAULT_SECONDS 0.5
#define DEFAULT_RUNS 3
#define STALL_NS (10ull * 1000000000ull)
#define LULL_WAIT_NS (100ll * 1000000) /* then look at abort and stall */
#define VALUE_STRIDE 0x9e3779b97f4a7c15ull
#define LINE 128
#define C2C_ROUND_TRIPS 2000
#define RTE_BURST 256u
#define URCU_CREDIT_EVERY 64u /* power of two */
#define URCU_MIN_POOL 256u
#define PIPE_READ_MAX ((size_t)64 << 10)
#define MQ_BURST 256u /* eventfd: messages taken per lock */

enum ring_kind {
	RING_LULL_SPSC,
	RING_LULL_MPSC,
	RING_CK_SPSC,
	RING_CK_MPMC,
	RING_CK_MPSC,
	RING_RTE_SPSC,
	RING_RTE_MPSC,
	RING_URCU_WFCQ,
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

static const struct ring_desc {
	const char *name;
	enum ring_class cls;
	bool is_lull;
	bool built;
	bool target; /* a peer of lull's throughput targets */
} ring_descs[RING_KINDS] = {
	[RING_LULL_SPSC] = { "lull-spsc", CLASS_SPSC, true, true, false },
	[RING_LULL_MPSC] = { "lull-mpsc", CLASS_MPSC, true, true, false },
	[RING_CK_SPSC] = { "ck-spsc", CLASS_SPSC, false, true, true },
	[RING_CK_MPMC] = { "ck-mpmc", CLASS_MPSC, false, true, true },
	[RING_CK_MPSC] = { "ck-mpsc", CLASS_MPSC, false, true, false },
#ifdef HAVE_RTE_RING
	[RING_RTE_SPSC] = { "rte-spsc", CLASS_SPSC, false, true, false },
	[RING_RTE_MPSC] = { "rte-mpsc", CLASS_MPSC, false, true, true },
#else
	[RING_RTE_SPSC] = { "rte-spsc", CLASS_SPSC, false, false, false },
	[RING_RTE_MPSC] = { "rte-mpsc", CLASS_MPSC, false, false, true },
#endif
#ifdef HAVE_URCU_WFCQ
	[RING_URCU_WFCQ] = { "urcu-wfcq", CLASS_MPSC, false, true, true },
#else
	[RING_URCU_WFCQ] = { "urcu-wfcq", CLASS_MPSC, false, false, true },
#endif
	[RING_PIPE] = { "pipe", CLASS_GENERAL, false, true, false },
	[RING_EVENTFD] = { "eventfd", CLASS_GENERAL, false, true, false },
};

static bool is_multi_producer(enum ring_kind kind)
{
	return ring_descs[kind].cls != CLASS_SPSC;
}

/* Whether lull ring @lull is compared with peer @peer. */
static bool is_peer(enum ring_kind lull, enum ring_kind peer)
{
	return !ring_descs[peer].is_lull &&
	       (ring_descs[peer].cls == CLASS_GENERAL ||
		ring_descs[peer].cls == ring_descs[lull].cls);
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
	double max_others; /* repeat runs busier than this; < 0: never */
	int64_t lull_spin_ns; /* < 0: lull's default */
	bool json;
	bool pin;
	bool verbose;
};

#ifdef HAVE_URCU_WFCQ
/* A urcu-wfcq message: the queue node, its producer, the payload. */
struct wfcq_msg {
	struct cds_wfcq_node qnode;
	uint32_t producer;
	uint32_t pad;
	unsigned char data[]; /* max(payload, 8) bytes, 8-byte aligned */
};

/* How many of a producer's nodes the consumer is done with. */
struct wfcq_credit {
	alignas(LINE) _Atomic uint64_t freed;
};

/* The queue: consumer's head and producers' tail on lines of their own. */
struct wfcq {
	alignas(LINE) struct __cds_wfcq_head head;
	alignas(LINE) struct cds_wfcq_tail tail;
	struct wfcq_credit credit[]; /* one per producer */
};
#else
struct wfcq;
#endif

/* eventfd's mailbox: a bounded FIFO under a mutex. */
struct mqueue {
	pthread_mutex_t lock;
	uint64_t head, tail; /* under lock */
	uint64_t mask;
	void *slot[];
};

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
};

/* One (ring, producers, payload) combination and its results. */
struct config {
	enum ring_kind kind;
	unsigned int producers;
	size_t payload;
	bool failed;
	bool skipped;

	/* lull: the producers stay attached for the ring's life */
	struct lull_ring *lring;
	struct lull_producer **lprods;

	/* slot rings: ck, rte, eventfd's FIFO */
	struct ck_ring *ckring;
	ck_ring_buffer_t *ckbuf;
	struct rte_ring *rte;
	struct mqueue *mq;
	unsigned int slots;
	unsigned char *slab; /* producers * slab_count buffers */
	size_t stride;       /* align8(payload) when slabbed, else 0 */
	size_t slab_count;   /* buffers per producer */

	/* urcu-wfcq */
	struct wfcq *wq;
	unsigned char *nodes; /* producers * pool nodes */
	size_t node_stride;
	size_t pool; /* nodes per producer */

	/* pipe: the size F_SETPIPE_SZ gave */
	size_t pipe_size;

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
	int rfd, wfd;  /* pipe ends */
	int efd;       /* eventfd doorbell */

	alignas(LINE) _Atomic int go;
	alignas(LINE) _Atomic int stop;
	alignas(LINE) _Atomic int abort;
	_Atomic unsigned int done;
	_Atomic uint64_t sent;
	_Atomic uint64_t sent_sum;
	_Atomic uint64_t prod_waits;    /* producer back-offs on a full ring */
	_Atomic uint64_t prod_yields;   /* of which sched_yield() */
	_Atomic uint64_t prod_syscalls; /* pipe and doorbell writes */
	_Atomic uint64_t cpu_ns;        /* CPU time of all the run's threads */

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
	struct lull_producer *lprod; /* lull: lent by the config */
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
	lull_record_fn handler;
	bool end;      /* lull: the end record or the poison arrived */
	bool poisoned; /* lull: the poison record arrived */
	uint64_t syscalls;
	/* urcu: nodes finished per producer, and the count last published */
	uint64_t *done_nodes;
	uint64_t *published;
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
 * do and which changes the result more than any ring does.  A consumer
 * that parks or blocks uses less.
 */
static void account_cpu(struct run *run)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return;
	atomic_fetch_add_explicit(&run->cpu_ns, bench_ru_cpu_ns(&ru),
				  memory_order_relaxed);
}

static void wait_go(struct run *run)
{
	/* Pairs with main's release store of go: the run's setup is seen. */
	while (!atomic_load_explicit(&run->go, memory_order_acquire))
		sched_yield();
}

/* End-of-run signals. */

/*
 * lull: the end record, through @prod, after every message of the run.  A
 * parked consumer is woken for it like for any record.
 */
static void write_end(struct run *run, struct lull_producer *prod)
{
	struct bench_backoff bo;
	int r;

	bench_backoff_init(&bo);
	for (;;) {
		if (run->cfg->kind == RING_LULL_SPSC)
			r = lull_spsc_write(prod, END_TYPE, NULL, 0);
		else
			r = lull_mpsc_write(prod, END_TYPE, NULL, 0);
		if (r == 0)
			return;
		if (r != -EAGAIN) {
			run_fail(run, "end record: %s", lull_strerror(r));
			return;
		}
		if (run_aborted(run))
			return;
		bench_backoff_wait(&bo);
	}
}

/*
 * Count @n producers as done.  The call that completes the count (the last
 * producer thread, or main for producers that never started) ends the
 * stream: a lull end record through @prod, the pipe's write end closed, or
 * one more ring of the doorbell.  Either way the consumer learns that no
 * message follows without having to poll a flag while it sleeps.
 */
static void producers_done(struct run *run, unsigned int n,
			   struct lull_producer *prod)
{
	static const uint64_t one = 1;
	struct config *cfg = run->cfg;
	unsigned int before;

	/*
	 * Release: publishes this producer's sent and sent_sum, and every
	 * message it wrote, to the consumer's acquire of done.  Acquire: the
	 * last one sees every other producer's writes finished before its
	 * end record, which therefore lands after all of them.
	 */
	before = atomic_fetch_add_explicit(&run->done, n,
					   memory_order_acq_rel);
	if (before + n != cfg->producers)
		return;
	switch (cfg->kind) {
	case RING_LULL_SPSC:
	case RING_LULL_MPSC:
		if (prod)
			write_end(run, prod);
		break;
	case RING_PIPE:
		close(run->wfd);
		run->wfd = -1; /* main reads it after the joins */
		break;
	case RING_EVENTFD:
		if (write(run->efd, &one, sizeof(one)) != sizeof(one))
			run_fail(run, "eventfd write: %s", strerror(errno));
		break;
	default:
		break;
	}
}

/* eventfd's FIFO: append one message.  Returns false when it is full. */
static inline bool mq_put(struct mqueue *mq, void *entry)
{
	bool ok = false;

	pthread_mutex_lock(&mq->lock);
	if (mq->tail - mq->head <= mq->mask) {
		mq->slot[mq->tail++ & mq->mask] = entry;
		ok = true;
	}
	pthread_mutex_unlock(&mq->lock);
	return ok;
}

/* Take up to @max messages into @out.  Returns how many. */
static inline unsigned int mq_take(struct mqueue *mq, void **out,
				   unsigned int max)
{
	unsigned int i, n;

	pthread_mutex_lock(&mq->lock);
	n = mq->tail - mq->head < max ? (unsigned int)(mq->tail - mq->head) :
					max;
	for (i = 0; i < n; i++)
		out[i] = mq->slot[(mq->head + i) & mq->mask];
	mq->head += n;
	pthread_mutex_unlock(&mq->lock);
	return n;
}

/*
 * Producers.  One loop per ring kind, specialised by constant propagation
 * through an always-inlined function, so no ring pays for a dispatch.
 */
static inline __attribute__((always_inline)) int
send_one(struct producer *p, struct config *cfg, const enum ring_kind kind,
	 unsigned char *msg, uint64_t value, struct send_state *st)
{
	static const uint64_t one = 1;
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
			bench_backoff_wait(&st->bo);
		}
	}

	if (kind == RING_PIPE) {
		ssize_t n;

		memcpy(msg, &value, payload < 8 ? payload : 8);
		for (;;) {
			n = write(p->run->wfd, msg, payload);
			st->syscalls++;
			if (likely(n == (ssize_t)payload))
				return 0;
			if (n < 0 && errno == EINTR)
				continue;
			return n < 0 ? -errno : -EIO;
		}
	}

#ifdef HAVE_URCU_WFCQ
	if (kind == RING_URCU_WFCQ) {
		struct wfcq_msg *m;

		while (unlikely(st->taken - st->freed >= cfg->pool)) {
			/*
			 * Acquire pairs with the consumer's release in
			 * wfcq_publish(): it has finished with the nodes it
			 * counts, so the oldest may be written again.
			 */
			st->freed = atomic_load_explicit(
				&cfg->wq->credit[p->id].freed,
				memory_order_acquire);
			if (st->taken - st->freed < cfg->pool)
				break;
			if (run_aborted(p->run))
				return -ECANCELED;
			bench_backoff_wait(&st->bo);
		}
		m = (struct wfcq_msg *)(cfg->nodes +
					((size_t)p->id * cfg->pool +
					 st->slab_next) * cfg->node_stride);
		if (++st->slab_next == cfg->pool)
			st->slab_next = 0;
		st->taken++;
		m->producer = p->id;
		if (payload > 8) {
			memcpy(msg, &value, 8);
			memcpy(m->data, msg, payload);
		} else {
			memcpy(m->data, &value, 8);
		}
		cds_wfcq_node_init(&m->qnode);
		/* A full barrier (xchg) before the node is linked. */
		cds_wfcq_enqueue(&cfg->wq->head, &cfg->wq->tail, &m->qnode);
		return 0;
	}
#endif

	if (!cfg->stride) {
		entry = (void *)(uintptr_t)value;
	} else {
		unsigned char *buf = cfg->slab +
				     (p->id * cfg->slab_count + st->slab_next) *
					     cfg->stride;

		memcpy(msg, &value, 8);
		memcpy(buf, msg, payload);
		if (++st->slab_next == cfg->slab_count)
			st->slab_next = 0;
		entry = buf;
	}
	for (;;) {
		bool ok = false;

		if (kind == RING_CK_SPSC)
			ok = ck_ring_enqueue_spsc(cfg->ckring, cfg->ckbuf,
						  entry);
		else if (kind == RING_CK_MPMC)
			ok = ck_ring_enqueue_mpmc(cfg->ckring, cfg->ckbuf,
						  entry);
		else if (kind == RING_CK_MPSC)
			ok = ck_ring_enqueue_mpsc(cfg->ckring, cfg->ckbuf,
						  entry);
		else if (kind == RING_EVENTFD)
			ok = mq_put(cfg->mq, entry);
#ifdef HAVE_RTE_RING
		else if (kind == RING_RTE_SPSC)
			ok = rte_ring_sp_enqueue(cfg->rte, entry) == 0;
		else if (kind == RING_RTE_MPSC)
			ok = rte_ring_mp_enqueue(cfg->rte, entry) == 0;
#endif
		if (likely(ok))
			break;
		if (run_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	if (kind == RING_EVENTFD) {
		ssize_t n;

		do {
			n = write(p->run->efd, &one, sizeof(one));
			st->syscalls++;
		} while (n < 0 && errno == EINTR);
		if (n != sizeof(one))
			return n < 0 ? -errno : -EIO;
	}
	return 0;
}

static inline __attribute__((always_inline)) void
produce(struct producer *p, const enum ring_kind kind, unsigned char *msg)
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
		r = send_one(p, cfg, kind, msg, value, &st);
		if (unlikely(r))
			break;
		bench_backoff_reset(&st.bo);
		sum += value;
	}
	if (r && r != -ECANCELED) {
		p->err = r;
		run_fail(run, "%s: producer %u: write failed: %s",
			 ring_descs[kind].name, p->id,
			 kind == RING_PIPE || kind == RING_EVENTFD ?
				 strerror(-r) :
				 lull_strerror(r));
	}
	atomic_fetch_add_explicit(&run->sent, seq, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->sent_sum, sum, memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_waits, st.bo.waits,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_yields, st.bo.yields,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&run->prod_syscalls, st.syscalls,
				  memory_order_relaxed);
	account_cpu(run);
	producers_done(run, 1, p->lprod);
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct run *run = p->run;
	size_t len = run->cfg->payload > 8 ? run->cfg->payload : 8;
	unsigned char *msg = aligned_alloc(64, (len + 63) & ~(size_t)63);

	if (!msg) {
		run_fail(run, "producer %u: out of memory", p->id);
		producers_done(run, 1, p->lprod);
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
#ifdef HAVE_RTE_RING
	case RING_RTE_SPSC:
		produce(p, RING_RTE_SPSC, msg);
		break;
	case RING_RTE_MPSC:
		produce(p, RING_RTE_MPSC, msg);
		break;
#endif
#ifdef HAVE_URCU_WFCQ
	case RING_URCU_WFCQ:
		produce(p, RING_URCU_WFCQ, msg);
		break;
#endif
	case RING_PIPE:
		produce(p, RING_PIPE, msg);
		break;
	case RING_EVENTFD:
		produce(p, RING_EVENTFD, msg);
		break;
	default:
		producers_done(run, 1, p->lprod);
		break;
	}
	free(msg);
	return NULL;
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
	take_value(cs, v);
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
	take_value(cs, v);
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
		take_copy(cs, rec->data, cs->payload);
	return LULL_READ_CONTINUE;
}

static lull_record_fn lull_handler(size_t payload)
{
	if (payload == 8)
		return lull_handler_8;
	return payload < 8 ? lull_handler_small : lull_handler_copy;
}

#ifdef HAVE_URCU_WFCQ
/* Give producer @p's finished nodes back. */
static inline void wfcq_publish(struct config *cfg, struct consumer_state *cs,
				unsigned int p)
{
	cs->published[p] = cs->done_nodes[p];
	/*
	 * Release: the node's payload was read before; pairs with the
	 * producer's acquire in send_one(), which then overwrites it.
	 */
	atomic_store_explicit(&cfg->wq->credit[p].freed, cs->done_nodes[p],
			      memory_order_release);
}

/* The queue is empty: give back every node not yet given back. */
static void wfcq_publish_all(struct config *cfg, struct consumer_state *cs)
{
	unsigned int p;

	for (p = 0; p < cfg->producers; p++)
		if (cs->published[p] != cs->done_nodes[p])
			wfcq_publish(cfg, cs, p);
}
#endif

/*
 * Take up to @batch messages from a spinning ring (urcu: all there are).
 * Returns how many, 0 when the ring was empty.
 */
static inline __attribute__((always_inline)) int
poll_batch(struct config *cfg, const enum ring_kind kind,
	   struct consumer_state *cs, unsigned int batch)
{
	unsigned int n;
	void *entry;

	if (kind == RING_RTE_SPSC || kind == RING_RTE_MPSC ||
	    kind == RING_EVENTFD) {
		void *objs[RTE_BURST > MQ_BURST ? RTE_BURST : MQ_BURST];
		unsigned int i;

		if (kind == RING_EVENTFD)
			n = mq_take(cfg->mq, objs,
				    batch < MQ_BURST ? batch : MQ_BURST);
#ifdef HAVE_RTE_RING
		else
			n = rte_ring_sc_dequeue_burst(
				cfg->rte, objs,
				batch < RTE_BURST ? batch : RTE_BURST, NULL);
#else
		else
			n = 0;
#endif
		for (i = 0; i < n; i++) {
			if (cfg->stride)
				take_copy(cs, objs[i], cfg->payload);
			else
				take_value(cs, (uint64_t)(uintptr_t)objs[i]);
		}
		return (int)n;
	}
#ifdef HAVE_URCU_WFCQ
	if (kind == RING_URCU_WFCQ) {
		struct __cds_wfcq_head lhead;
		struct cds_wfcq_tail ltail;
		struct cds_wfcq_node *qn, *qnext;

		(void)batch;
		__cds_wfcq_init(&lhead, &ltail);
		if (__cds_wfcq_splice_blocking(&lhead, &ltail, &cfg->wq->head,
					       &cfg->wq->tail) ==
		    CDS_WFCQ_RET_SRC_EMPTY) {
			wfcq_publish_all(cfg, cs);
			return 0;
		}
		n = 0;
		/* _safe: the next node is found before this one goes back */
		__cds_wfcq_for_each_blocking_safe(&lhead, &ltail, qn, qnext)
		{
			struct wfcq_msg *m =
				caa_container_of(qn, struct wfcq_msg, qnode);
			unsigned int p = m->producer;

			if (cfg->payload > 8) {
				take_copy(cs, m->data, cfg->payload);
			} else {
				uint64_t v;

				memcpy(&v, m->data, 8);
				take_value(cs, v);
			}
			if (!(++cs->done_nodes[p] & (URCU_CREDIT_EVERY - 1)))
				wfcq_publish(cfg, cs, p);
			n++;
		}
		return (int)n;
	}
#endif
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

/* Whether every producer is done and all they sent was received. */
static bool all_received(struct run *run, const struct consumer_state *cs)
{
	/*
	 * Acquire pairs with the producers' release increment of done in
	 * producers_done(): their sent counts are final.
	 */
	if (atomic_load_explicit(&run->done, memory_order_acquire) !=
	    run->cfg->producers)
		return false;
	return cs->count >= atomic_load_explicit(&run->sent,
						 memory_order_relaxed);
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

static bool stalled(struct run *run, struct progress *p,
		    const struct consumer_state *cs, enum ring_kind kind)
{
	uint64_t now = bench_now_ns();

	if (cs->count != p->last_count) {
		p->last_count = cs->count;
		p->last_ns = now;
		return false;
	}
	if (now - p->last_ns <= STALL_NS)
		return false;
	run_fail(run, "%s: no progress for 10 s, %llu messages received",
		 ring_descs[kind].name, (unsigned long long)cs->count);
	return true;
}

/* The spinning consumers: ck, rte, urcu. */
static inline __attribute__((always_inline)) void
consume_spin(struct run *run, const enum ring_kind kind,
	     struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	struct progress prog = { .last_ns = bench_now_ns() };
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
		if (all_received(run, cs) || run_aborted(run))
			break;
		if (++empties % 1024 == 0 && stalled(run, &prog, cs, kind))
			break;
		bench_backoff_wait(&bo);
	}
	run->cons_waits = bo.waits;
	run->cons_yields = bo.yields;
#ifdef HAVE_URCU_WFCQ
	run->cons_yields += wfcq_yields;
	wfcq_yields = 0;
#endif
}

/*
 * lull's consumer: read batches while there are records, park in
 * lull_ring_wait() when there are none, stop at the end record.  The wait's
 * timeout only bounds how long an aborted run takes to notice.
 */
static void consume_lull(struct run *run, struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	struct progress prog = { .last_ns = bench_now_ns() };
	uint64_t waits = 0;
	int r;

	while (!cs->end) {
		r = lull_ring_read(cfg->lring, cs->handler, cs, batch);
		if (likely(r >= 0))
			continue;
		if (r != -EAGAIN) {
			run_fail(run, "%s: lull_ring_read: %s",
				 ring_descs[cfg->kind].name, lull_strerror(r));
			break;
		}
		if (run_aborted(run))
			break;
		waits++;
		r = lull_ring_wait(cfg->lring, LULL_WAIT_NS);
		if (r == -ETIMEDOUT) {
			if (stalled(run, &prog, cs, cfg->kind))
				break;
		} else if (r) {
			run_fail(run, "%s: lull_ring_wait: %s",
				 ring_descs[cfg->kind].name, lull_strerror(r));
			break;
		}
	}
	if (cs->poisoned)
		run_fail(run, "%s: poison record: the ring was shut down",
			 ring_descs[cfg->kind].name);
	run->cons_waits = waits;
}

/*
 * The pipe's consumer: read() whole messages until EOF, which comes when the
 * last producer has closed the write end.  A read may end inside a message
 * only in theory (every write is one atomic message); the rest is kept.
 */
static void consume_pipe(struct run *run, struct consumer_state *cs)
{
	size_t payload = run->cfg->payload;
	size_t want = (size_t)run->opt->batch * payload;
	size_t have = 0, off;
	unsigned char *buf;
	ssize_t n;

	if (want > PIPE_READ_MAX)
		want = PIPE_READ_MAX / payload * payload;
	if (want < payload)
		want = payload;
	buf = malloc(want);
	if (!buf) {
		run_fail(run, "pipe: out of memory");
		return;
	}
	for (;;) {
		n = read(run->rfd, buf + have, want - have);
		cs->syscalls++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			run_fail(run, "pipe read: %s", strerror(errno));
			break;
		}
		if (n == 0) {
			if (have)
				cs->bad = 1;
			break;
		}
		have += (size_t)n;
		for (off = 0; off + payload <= have; off += payload) {
			uint64_t v = 0;

			memcpy(&v, buf + off, payload < 8 ? payload : 8);
			take_value(cs, v);
		}
		if (off < have)
			memmove(buf, buf + off, have - off);
		have -= off;
		if (run_aborted(run))
			break;
	}
	free(buf);
}

/*
 * The eventfd mailbox's consumer: drain the FIFO; when it is empty, block
 * in read() of the doorbell, which every append rang (and the last
 * producer once more).
 */
static void consume_eventfd(struct run *run, struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	uint64_t rings;
	ssize_t n;

	for (;;) {
		if (poll_batch(cfg, RING_EVENTFD, cs, batch) > 0)
			continue;
		if (all_received(run, cs) || run_aborted(run))
			break;
		n = read(run->efd, &rings, sizeof(rings));
		cs->syscalls++;
		if (n < 0 && errno != EINTR) {
			run_fail(run, "eventfd read: %s", strerror(errno));
			break;
		}
		run->cons_waits++;
	}
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
	if (cfg->kind == RING_URCU_WFCQ) {
		cs.done_nodes = calloc(cfg->producers, sizeof(uint64_t));
		cs.published = calloc(cfg->producers, sizeof(uint64_t));
	}
	if (!cs.sink || (cfg->kind == RING_URCU_WFCQ &&
			 (!cs.done_nodes || !cs.published))) {
		run_fail(run, "consumer: out of memory");
		goto out;
	}
	bench_pin_self(run->consumer_cpu);
	wait_go(run);
	switch (cfg->kind) {
	case RING_LULL_SPSC:
	case RING_LULL_MPSC:
		consume_lull(run, &cs);
		break;
	case RING_CK_SPSC:
		consume_spin(run, RING_CK_SPSC, &cs);
		break;
	case RING_CK_MPMC:
		consume_spin(run, RING_CK_MPMC, &cs);
		break;
	case RING_CK_MPSC:
		consume_spin(run, RING_CK_MPSC, &cs);
		break;
#ifdef HAVE_RTE_RING
	case RING_RTE_SPSC:
		consume_spin(run, RING_RTE_SPSC, &cs);
		break;
	case RING_RTE_MPSC:
		consume_spin(run, RING_RTE_MPSC, &cs);
		break;
#endif
#ifdef HAVE_URCU_WFCQ
	case RING_URCU_WFCQ:
		consume_spin(run, RING_URCU_WFCQ, &cs);
		break;
#endif
	case RING_PIPE:
		consume_pipe(run, &cs);
		break;
	case RING_EVENTFD:
		consume_eventfd(run, &cs);
		break;
	default:
		break;
	}
	run->t_end = bench_now_ns();
	account_cpu(run);
out:
	if (cfg->kind == RING_PIPE) {
		/* A failed consumer makes blocked writers fail, not hang. */
		close(run->rfd);
		run->rfd = -1;
	}
	run->received = cs.count;
	run->recv_sum = cs.sum;
	run->bad = cs.bad;
	run->poisoned = cs.poisoned;
	run->cons_syscalls = cs.syscalls;
	free(cs.sink);
	free(cs.done_nodes);
	free(cs.published);
	return NULL;
}

/* Ring setup and teardown. */

static uint64_t pow2_floor(uint64_t n)
{
	uint64_t p = 1;

	while (p <= n / 2)
		p *= 2;
	return p;
}

/*
 * Fill the lull ring to -EAGAIN through the first producer and drain it
 * once, so that no timed run pays for first-touch page faults.  The
 * producer stays attached: detaching the last one would shut the ring down.
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
	struct lull_producer *prod = cfg->lprods[0];
	uint64_t written = 0;
	int r;

	cs.sink = malloc(cfg->payload + 8);
	if (!buf || !cs.sink) {
		r = -ENOMEM;
		goto out;
	}
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
	while (r == -EAGAIN && cs.count < written && !cs.end) {
		r = lull_ring_read(cfg->lring, cs.handler, &cs,
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
			ring_descs[cfg->kind].name, lull_strerror(r));
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

static int setup_lull(struct config *cfg, const struct options *opt)
{
	struct lull_park_config pc = {
		.spin_ns = LULL_PARK_SPIN_DEFAULT_NS,
		.safety_timeout_ns = LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS,
	};
	unsigned int i;
	int r;

	r = lull_ring_create(&cfg->lring, opt->capacity,
			     cfg->kind == RING_LULL_SPSC ? LULL_RING_SPSC :
							   LULL_RING_MPSC);
	if (r) {
		fprintf(stderr, "throughput: lull_ring_create: %s\n",
			lull_strerror(r));
		return r;
	}
	if (lull_ring_max_payload(cfg->lring) < (ssize_t)cfg->payload) {
		fprintf(stderr,
			"throughput: payload %zu above the max of %zd for "
			"capacity %zu\n",
			cfg->payload, lull_ring_max_payload(cfg->lring),
			opt->capacity);
		return -EMSGSIZE;
	}
	if (opt->lull_spin_ns >= 0) {
		pc.spin_ns = (uint64_t)opt->lull_spin_ns;
		r = lull_ring_park_config(cfg->lring, &pc);
		if (r) {
			fprintf(stderr,
				"throughput: lull_ring_park_config: %s\n",
				lull_strerror(r));
			return r;
		}
	}
	cfg->lprods = calloc(cfg->producers, sizeof(*cfg->lprods));
	if (!cfg->lprods)
		return -ENOMEM;
	for (i = 0; i < cfg->producers; i++) {
		r = lull_producer_attach(cfg->lring, 0, &cfg->lprods[i]);
		if (r) {
			fprintf(stderr,
				"throughput: %s: lull_producer_attach: %s\n",
				ring_descs[cfg->kind].name, lull_strerror(r));
			return r;
		}
	}
	return prefault_lull(cfg);
}

/*
 * ck, rte and eventfd's FIFO: slots, and the slabs for payloads above 8
 * bytes.
 */
static int setup_slots(struct config *cfg, const struct options *opt)
{
	if (cfg->payload <= 8) {
		cfg->stride = 0;
		cfg->slots = opt->capacity / sizeof(void *);
	} else {
		cfg->stride = (cfg->payload + 7) & ~(size_t)7;
		cfg->slots = pow2_floor(opt->capacity /
					(sizeof(void *) + cfg->stride));
		if (cfg->slots < 4)
			cfg->slots = 4;
		cfg->slab_count = (size_t)cfg->slots + 1;
		if (cfg->kind == RING_RTE_SPSC || cfg->kind == RING_RTE_MPSC)
			cfg->slab_count += RTE_BURST;
		if (cfg->kind == RING_EVENTFD)
			cfg->slab_count += MQ_BURST;
		cfg->slab = alloc_zeroed(cfg->producers * cfg->slab_count *
					 cfg->stride);
		if (!cfg->slab)
			return -ENOMEM;
	}
	if (cfg->kind == RING_RTE_SPSC || cfg->kind == RING_RTE_MPSC) {
#ifdef HAVE_RTE_RING
		unsigned int flags = RING_F_SC_DEQ;
		ssize_t size = rte_ring_get_memsize(cfg->slots);
		int r;

		if (cfg->kind == RING_RTE_SPSC)
			flags |= RING_F_SP_ENQ;
		if (size < 0)
			return (int)size;
		cfg->rte = alloc_zeroed((size_t)size);
		if (!cfg->rte)
			return -ENOMEM;
		r = rte_ring_init(cfg->rte, ring_descs[cfg->kind].name,
				  cfg->slots, flags);
		if (r) {
			fprintf(stderr, "throughput: rte_ring_init: %s\n",
				strerror(-r));
			return r;
		}
		return 0;
#else
		return -EOPNOTSUPP;
#endif
	}
	if (cfg->kind == RING_EVENTFD) {
		cfg->mq = alloc_zeroed(sizeof(*cfg->mq) +
				       cfg->slots * sizeof(cfg->mq->slot[0]));
		if (!cfg->mq)
			return -ENOMEM;
		cfg->mq->mask = cfg->slots - 1;
		return -pthread_mutex_init(&cfg->mq->lock, NULL);
	}
	cfg->ckring = alloc_zeroed(sizeof(*cfg->ckring));
	cfg->ckbuf = alloc_zeroed(cfg->slots * sizeof(*cfg->ckbuf));
	if (!cfg->ckring || !cfg->ckbuf)
		return -ENOMEM;
	ck_ring_init(cfg->ckring, cfg->slots);
	return 0;
}

static int setup_wfcq(struct config *cfg, const struct options *opt)
{
#ifdef HAVE_URCU_WFCQ
	size_t data = cfg->payload > 8 ? (cfg->payload + 7) & ~(size_t)7 : 8;
	size_t nodes;

	cfg->node_stride = sizeof(struct wfcq_msg) + data;
	cfg->pool = opt->capacity / cfg->node_stride / cfg->producers;
	if (cfg->pool < URCU_MIN_POOL)
		cfg->pool = URCU_MIN_POOL;
	nodes = cfg->pool * cfg->producers;
	cfg->slots = (unsigned int)nodes;
	cfg->nodes = alloc_zeroed(nodes * cfg->node_stride);
	cfg->wq = alloc_zeroed(sizeof(*cfg->wq) +
			       cfg->producers * sizeof(cfg->wq->credit[0]));
	if (!cfg->nodes || !cfg->wq)
		return -ENOMEM;
	__cds_wfcq_init(&cfg->wq->head, &cfg->wq->tail);
	return 0;
#else
	(void)cfg;
	(void)opt;
	return -EOPNOTSUPP;
#endif
}

static int config_setup(struct config *cfg, const struct options *opt)
{
	cfg->res = calloc(opt->runs, sizeof(*cfg->res));
	if (!cfg->res)
		return -ENOMEM;
	switch (cfg->kind) {
	case RING_LULL_SPSC:
	case RING_LULL_MPSC:
		return setup_lull(cfg, opt);
	case RING_URCU_WFCQ:
		return setup_wfcq(cfg, opt);
	case RING_PIPE:
		if (!cfg->payload ||
		    (cfg->producers > 1 && cfg->payload > PIPE_BUF)) {
			fprintf(stderr,
				"throughput: pipe P=%u payload=%zu skipped: "
				"messages must be 1 to PIPE_BUF bytes to stay "
				"whole\n",
				cfg->producers, cfg->payload);
			cfg->skipped = true;
		}
		return 0;
	case RING_EVENTFD:
	default:
		return setup_slots(cfg, opt);
	}
}

static void config_free(struct config *cfg)
{
	unsigned int i;

	/*
	 * The last detach shuts the ring down; its poison record is never
	 * read, and need not be before the destroy.
	 */
	if (cfg->lprods)
		for (i = 0; i < cfg->producers; i++)
			if (cfg->lprods[i])
				lull_producer_detach(cfg->lprods[i]);
	if (cfg->lring)
		lull_ring_destroy(cfg->lring);
	free(cfg->lprods);
	free(cfg->ckring);
	free(cfg->ckbuf);
	free(cfg->rte);
	if (cfg->mq)
		pthread_mutex_destroy(&cfg->mq->lock);
	free(cfg->mq);
	free(cfg->slab);
	free(cfg->wq);
	free(cfg->nodes);
	free(cfg->res);
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

/*
 * Whether lull's park barrier is membarrier(MEMBARRIER_CMD_PRIVATE_
 * EXPEDITED) here: lull uses it for the rings it allocates when the kernel
 * offers it (docs/DESIGN.md); only used to count system calls.
 */
static bool membarrier_used(void)
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

/* The pipe and the eventfd are made for each run; the rest exists. */
static int run_open(struct run *run, struct config *cfg,
		    const struct options *opt)
{
	int fds[2], size;

	if (cfg->kind == RING_PIPE) {
		if (pipe2(fds, O_CLOEXEC)) {
			fprintf(stderr, "throughput: pipe2: %s\n",
				strerror(errno));
			return -1;
		}
		run->rfd = fds[0];
		run->wfd = fds[1];
		size = opt->capacity > INT_MAX ? INT_MAX : (int)opt->capacity;
		size = fcntl(run->wfd, F_SETPIPE_SZ, size);
		if (size < 0)
			size = fcntl(run->wfd, F_GETPIPE_SZ);
		cfg->pipe_size = size > 0 ? (size_t)size : 0;
	}
	if (cfg->kind == RING_EVENTFD) {
		run->efd = eventfd(0, EFD_CLOEXEC);
		if (run->efd < 0) {
			fprintf(stderr, "throughput: eventfd: %s\n",
				strerror(errno));
			return -1;
		}
	}
#ifdef HAVE_URCU_WFCQ
	if (cfg->kind == RING_URCU_WFCQ) {
		unsigned int i;

		/* The last run took every node back: all are free again. */
		for (i = 0; i < cfg->producers; i++)
			atomic_store_explicit(&cfg->wq->credit[i].freed, 0,
					      memory_order_relaxed);
	}
#endif
	return 0;
}

static void run_close(struct run *run)
{
	if (run->rfd >= 0)
		close(run->rfd);
	if (run->wfd >= 0)
		close(run->wfd);
	if (run->efd >= 0)
		close(run->efd);
}

/* One timed run of @cfg.  Returns 0, or -1 with the reason printed. */
static int run_once(struct config *cfg, const struct options *opt,
		    const int *cpus, int ncpus, int index)
{
	const char *name = ring_descs[cfg->kind].name;
	bool is_lull = ring_descs[cfg->kind].is_lull;
	struct lull_ring_stats st0 = { 0 }, st1 = { 0 };
	struct run_result *res = &cfg->res[index];
	struct producer *prods;
	pthread_t *tids, ctid;
	struct run *run;
	uint64_t t_start, elapsed, busy_start, busy, sent, want_sum, cpu_ns;
	uint64_t wakes, syscalls, prod_yields;
	unsigned int i, started = 0;
	bool truncated = false;
	int ret = -1;

	/* Between the first two CPUs, where --pin puts the two sides. */
	memset(res, 0, sizeof(*res));
	if (ncpus >= 2)
		res->c2c = bench_c2c_ns(cpus[0], cpus[1], C2C_ROUND_TRIPS);
	run = alloc_zeroed(sizeof(*run));
	prods = alloc_zeroed(cfg->producers * sizeof(*prods));
	tids = calloc(cfg->producers, sizeof(*tids));
	if (!run || !prods || !tids) {
		fprintf(stderr, "throughput: out of memory\n");
		goto out;
	}
	run->cfg = cfg;
	run->opt = opt;
	run->rfd = run->wfd = run->efd = -1;
	run->mask = cfg->payload >= 8 ? UINT64_MAX :
					(1ull << (8 * cfg->payload)) - 1;
	run->consumer_cpu = opt->pin && ncpus ? cpus[0] : -1;
	if (run_open(run, cfg, opt))
		goto out;

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
		if (is_lull)
			p->lprod = cfg->lprods[i];
	}
	if (is_lull)
		lull_ring_stats(cfg->lring, &st0);

	if (pthread_create(&ctid, NULL, consumer_main, run)) {
		fprintf(stderr, "throughput: pthread_create failed\n");
		goto out;
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

	busy_start = bench_machine_busy_ns();
	t_start = bench_now_ns();
	/* Releases the run's setup to the threads' acquire in wait_go(). */
	atomic_store_explicit(&run->go, 1, memory_order_release);
	if (!opt->messages && started == cfg->producers) {
		sleep_ns((uint64_t)(opt->seconds * 1e9));
		atomic_store_explicit(&run->stop, 1, memory_order_relaxed);
	} else if (started == cfg->producers) {
		/*
		 * Message mode: a ring whose producers spin on each other
		 * (an in-order commit with more threads than CPUs) can crawl
		 * at a few hundred messages per second; stop it at
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
	/* The joined threads no longer use their producers: main may. */
	if (started < cfg->producers)
		producers_done(run, cfg->producers - started,
			       is_lull ? cfg->lprods[0] : NULL);
	pthread_join(ctid, NULL);
	busy = bench_machine_busy_ns() - busy_start;
	if (is_lull)
		lull_ring_stats(cfg->lring, &st1);
	if (started < cfg->producers)
		goto out;

	/*
	 * Relaxed loads from here on: the joins ordered every thread's
	 * writes before them.
	 */
	sent = atomic_load_explicit(&run->sent, memory_order_relaxed);
	want_sum = atomic_load_explicit(&run->sent_sum, memory_order_relaxed);
	cpu_ns = atomic_load_explicit(&run->cpu_ns, memory_order_relaxed);
	prod_yields = atomic_load_explicit(&run->prod_yields,
					   memory_order_relaxed);
	if (atomic_load_explicit(&run->abort, memory_order_relaxed)) {
		fprintf(stderr, "throughput: run %d: %s P=%u payload=%zu: %s\n",
			index + 1, name, cfg->producers, cfg->payload,
			run->err);
		goto out;
	}
	if (run->received != sent || run->recv_sum != want_sum || run->bad) {
		fprintf(stderr,
			"throughput: run %d: %s P=%u payload=%zu: received "
			"%llu of %llu messages, sum %#llx want %#llx%s\n",
			index + 1, name, cfg->producers, cfg->payload,
			(unsigned long long)run->received,
			(unsigned long long)sent,
			(unsigned long long)run->recv_sum,
			(unsigned long long)want_sum,
			run->bad ? ", malformed messages" : "");
		goto out;
	}
	elapsed = run->t_end - t_start;
	if (!run->received || !elapsed) {
		fprintf(stderr, "throughput: run %d: %s: nothing measured\n",
			index + 1, name);
		goto out;
	}
	if (is_lull)
		wakes = st1.wakes - st0.wakes;
	else
		wakes = atomic_load_explicit(&run->prod_syscalls,
					     memory_order_relaxed);
	syscalls = wakes + run->cons_syscalls + prod_yields + run->cons_yields;
	if (is_lull)
		syscalls += (st1.parks - st0.parks) +
			    (membarrier_used() ?
				     (st1.parks - st0.parks) +
					     (st1.park_cancels -
					      st0.park_cancels) :
				     0);
	res->msgs = (double)run->received;
	res->mps = (double)run->received * 1e9 / (double)elapsed;
	res->nspm = (double)elapsed / (double)run->received;
	res->cpus = (double)cpu_ns / (double)elapsed;
	res->other =
		busy > cpu_ns ? (double)(busy - cpu_ns) / (double)elapsed : 0;
	res->wpm = (double)wakes / res->msgs;
	res->spm = (double)syscalls / res->msgs;
	res->ppm = (double)(st1.parks - st0.parks) / res->msgs;
	res->cpm = (double)(st1.park_cancels - st0.park_cancels) / res->msgs;
	res->safety = (double)(st1.safety_timeouts - st0.safety_timeouts);
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
			"waits %llu (%llu yields); wakes %llu, parks %llu "
			"(cancelled %llu), syscalls %llu\n",
			index + 1, opt->runs, name, cfg->producers,
			cfg->payload, res->mps / 1e6, res->nspm,
			(unsigned long long)run->received, res->cpus,
			res->other, res->c2c,
			(unsigned long long)atomic_load_explicit(
				&run->prod_waits, memory_order_relaxed),
			(unsigned long long)prod_yields,
			(unsigned long long)run->cons_waits,
			(unsigned long long)run->cons_yields,
			(unsigned long long)wakes,
			(unsigned long long)(st1.parks - st0.parks),
			(unsigned long long)(st1.park_cancels -
					     st0.park_cancels),
			(unsigned long long)syscalls);
	ret = 0;

out:
	if (run)
		run_close(run);
	free(run);
	free(prods);
	free(tids);
	return ret;
}

/* Output. */

struct summary {
	double mps, mps_min, mps_max, nspm, msgs, cpus, other, c2c, wpm, spm,
		ppm, cpm, safety;
};

/* Median (and min, max) of one run_result field over the done runs. */
static double field_median(const struct config *cfg, size_t off, double *min,
			   double *max)
{
	double v[1000], med, lo, hi;
	int i;

	for (i = 0; i < cfg->done_runs; i++)
		memcpy(&v[i], (const char *)&cfg->res[i] + off, sizeof(v[i]));
	bench_stats(v, (size_t)cfg->done_runs, &med, &lo, &hi);
	if (min)
		*min = lo;
	if (max)
		*max = hi;
	return med;
}

#define MEDIAN(cfg, field) \
	field_median(cfg, offsetof(struct run_result, field), NULL, NULL)

static void summarise(const struct config *cfg, struct summary *s)
{
	int i;

	s->mps = field_median(cfg, offsetof(struct run_result, mps),
			      &s->mps_min, &s->mps_max);
	s->nspm = MEDIAN(cfg, nspm);
	s->msgs = MEDIAN(cfg, msgs);
	s->cpus = MEDIAN(cfg, cpus);
	s->other = MEDIAN(cfg, other);
	s->c2c = MEDIAN(cfg, c2c);
	s->wpm = MEDIAN(cfg, wpm);
	s->spm = MEDIAN(cfg, spm);
	s->ppm = MEDIAN(cfg, ppm);
	s->cpm = MEDIAN(cfg, cpm);
	s->safety = 0;
	for (i = 0; i < cfg->done_runs; i++)
		s->safety += cfg->res[i].safety;
}

static struct config *find_config(struct config *cfgs, int ncfgs,
				  enum ring_kind kind, unsigned int producers,
				  size_t payload)
{
	int i;

	for (i = 0; i < ncfgs; i++)
		if (cfgs[i].kind == kind && cfgs[i].producers == producers &&
		    cfgs[i].payload == payload && cfgs[i].done_runs)
			return &cfgs[i];
	return NULL;
}

/* Median msg/s of lull ring @lull over that of @peer. */
static double ratio(const struct config *lull, const struct config *peer)
{
	double a = MEDIAN(lull, mps), b = MEDIAN(peer, mps);

	return b > 0 ? a / b : 0;
}

/*
 * The lull ring a peer's JSON lull_ratio is against: lull-spsc for the SPSC
 * peers, lull-mpsc for the others (pipe and eventfd too, at every count, so
 * that each peer's ratios form one series; the tables also give lull-spsc
 * against them at one producer).
 */
static struct config *lull_for(struct config *cfgs, int ncfgs,
			       const struct config *peer)
{
	if (ring_descs[peer->kind].is_lull)
		return NULL;
	if (ring_descs[peer->kind].cls == CLASS_SPSC)
		return find_config(cfgs, ncfgs, RING_LULL_SPSC, 1,
				   peer->payload);
	return find_config(cfgs, ncfgs, RING_LULL_MPSC, peer->producers,
			   peer->payload);
}

/*
 * The consumer's spin as JSON: ns, or "adaptive" for lull's default when
 * that is LULL_PARK_SPIN_ADAPTIVE (a value no int64_t holds).
 */
static const char *spin_json(int64_t spin_ns)
{
	static char buf[32];

	if (spin_ns < 0 && LULL_PARK_SPIN_DEFAULT_NS > (uint64_t)INT64_MAX)
		return "\"adaptive\"";
	snprintf(buf, sizeof(buf), "%llu",
		 spin_ns >= 0 ? (unsigned long long)spin_ns
			      : (unsigned long long)LULL_PARK_SPIN_DEFAULT_NS);
	return buf;
}

static void print_json(struct config *cfgs, int ncfgs, const struct config *cfg,
		       const struct options *opt)
{
	const struct ring_desc *d = &ring_descs[cfg->kind];
	struct config *lull;
	struct summary s;
	int i;

	summarise(cfg, &s);
	printf("{\"ring\":\"%s\",\"producers\":%u,\"payload\":%zu,"
	       "\"msgs_per_s\":%.0f,\"msgs_per_s_min\":%.0f,"
	       "\"msgs_per_s_max\":%.0f,\"ns_per_msg\":%.3f,"
	       "\"wakes_per_msg\":%.6g,\"syscalls_per_msg\":%.6g,",
	       d->name, cfg->producers, cfg->payload, s.mps, s.mps_min,
	       s.mps_max, s.nspm, s.wpm, s.spm);
	if (d->is_lull)
		printf("\"parks_per_msg\":%.6g,\"park_cancels_per_msg\":%.6g,"
		       "\"park_barrier\":\"%s\",\"safety_timeouts\":%.0f,"
		       "\"lull_spin_ns\":%s,",
		       s.ppm, s.cpm, membarrier_used() ? "membarrier" : "fence",
		       s.safety, spin_json(opt->lull_spin_ns));
	lull = lull_for(cfgs, ncfgs, cfg);
	if (lull)
		printf("\"lull_ring\":\"%s\",\"lull_ratio\":%.4f,",
		       ring_descs[lull->kind].name, ratio(lull, cfg));
	printf("\"runs\":%d,\"runs_msgs_per_s\":[", cfg->done_runs);
	for (i = 0; i < cfg->done_runs; i++)
		printf("%s%.0f", i ? "," : "", cfg->res[i].mps);
	printf("],\"messages\":%.0f,\"cpus\":%.2f,\"other_cpus\":%.2f,"
	       "\"c2c_round_trip_ns\":%.0f,\"capacity\":%zu,",
	       s.msgs, s.cpus, s.other, s.c2c, opt->capacity);
	if (cfg->kind == RING_PIPE)
		printf("\"pipe_size\":%zu,", cfg->pipe_size);
	else if (cfg->kind == RING_URCU_WFCQ)
		printf("\"nodes\":%u,", cfg->slots);
	else if (!d->is_lull)
		printf("\"slots\":%u,", cfg->slots);
	if (opt->messages)
		printf("\"truncated_runs\":%d,", cfg->truncated_runs);
	printf("\"seconds\":%.3f,\"pinned\":%s,\"batch\":%u}\n",
	       opt->messages ? 0 : opt->seconds, opt->pin ? "true" : "false",
	       opt->batch);
}

/* lull ring @lull over each of its peers, one row per payload and count. */
static void print_ratios(FILE *f, struct config *cfgs, int ncfgs,
			 const struct options *opt, enum ring_kind lull)
{
	int peers[RING_KINDS], npeers = 0, i, j, k, rows = 0;

	for (k = 0; k < opt->nrings; k++)
		if (is_peer(lull, opt->rings[k]))
			peers[npeers++] = opt->rings[k];
	if (!npeers)
		return;
	for (i = 0; i < opt->npayloads; i++) {
		for (j = 0; j < opt->nproducers; j++) {
			unsigned int np = opt->producers[j];
			struct config *a = find_config(cfgs, ncfgs, lull, np,
						       opt->payloads[i]);

			if (!a)
				continue;
			if (!rows++) {
				fprintf(f, "\n%s / peer (median msg/s; > 1: "
					   "lull faster)\n%7s %4s",
					ring_descs[lull].name, "payload",
					"prod");
				for (k = 0; k < npeers; k++)
					fprintf(f, " %9s",
						ring_descs[peers[k]].name);
				fprintf(f, "\n");
			}
			fprintf(f, "%7zu %4u", opt->payloads[i], np);
			for (k = 0; k < npeers; k++) {
				struct config *b = find_config(
					cfgs, ncfgs, peers[k], np,
					opt->payloads[i]);

				if (b)
					fprintf(f, " %8.2fx", ratio(a, b));
				else
					fprintf(f, " %9s", "-");
			}
			fprintf(f, "\n");
		}
	}
}

/*
 * The targets: lull-spsc at least ck-spsc on 8-byte messages; lull-mpsc at
 * least the best of rte-mpsc, ck-mpmc and urcu-wfcq at every producer count
 * (and, here, every payload).
 */
static void print_targets(FILE *f, struct config *cfgs, int ncfgs,
			  const struct options *opt)
{
	int i, j, k, met = 0, missed = 0;
	struct config *a, *b;

	fprintf(f, "\ntargets\n");
	a = find_config(cfgs, ncfgs, RING_LULL_SPSC, 1, 8);
	b = find_config(cfgs, ncfgs, RING_CK_SPSC, 1, 8);
	if (a && b) {
		bool ok = MEDIAN(a, mps) >= MEDIAN(b, mps);

		fprintf(f,
			"  lull-spsc >= ck-spsc, payload 8: %.2f vs %.2f M "
			"msg/s (%.2fx): %s\n",
			MEDIAN(a, mps) / 1e6, MEDIAN(b, mps) / 1e6, ratio(a, b),
			ok ? "met" : "MISSED");
		ok ? met++ : missed++;
	} else {
		fprintf(f, "  lull-spsc vs ck-spsc, payload 8: not run\n");
	}
	for (i = 0; i < opt->npayloads; i++) {
		for (j = 0; j < opt->nproducers; j++) {
			unsigned int np = opt->producers[j];
			size_t pl = opt->payloads[i];
			struct config *best = NULL;

			a = find_config(cfgs, ncfgs, RING_LULL_MPSC, np, pl);
			if (!a)
				continue;
			for (k = 0; k < RING_KINDS; k++) {
				if (!ring_descs[k].target ||
				    ring_descs[k].cls != CLASS_MPSC)
					continue;
				b = find_config(cfgs, ncfgs, k, np, pl);
				if (b && (!best ||
					  MEDIAN(b, mps) > MEDIAN(best, mps)))
					best = b;
			}
			if (!best)
				continue;
			fprintf(f,
				"  lull-mpsc >= best MPSC peer, payload %zu "
				"P=%u: %.2f vs %.2f (%s) M msg/s (%.2fx): %s\n",
				pl, np, MEDIAN(a, mps) / 1e6,
				MEDIAN(best, mps) / 1e6,
				ring_descs[best->kind].name, ratio(a, best),
				MEDIAN(a, mps) >= MEDIAN(best, mps) ?
					"met" :
					"MISSED");
			MEDIAN(a, mps) >= MEDIAN(best, mps) ? met++ :
							       missed++;
		}
	}
	fprintf(f, "  %d met, %d missed\n", met, missed);
}

static void print_table(FILE *f, struct config *cfgs, int ncfgs,
			const struct options *opt)
{
	double busiest = 0;
	int i, truncated = 0;

	fprintf(f,
		"\n%-10s %4s %7s %8s %8s %8s %8s %9s %8s %5s %6s %5s %4s\n",
		"ring", "prod", "payload", "Mmsg/s", "min", "max", "ns/msg",
		"wakes/msg", "sys/msg", "CPUs", "others", "c2c", "runs");
	for (i = 0; i < ncfgs; i++) {
		struct config *c = &cfgs[i];
		struct summary s;

		if (!c->done_runs) {
			fprintf(f, "%-10s %4u %7zu %8s\n",
				ring_descs[c->kind].name, c->producers,
				c->payload, c->skipped ? "skipped" : "failed");
			continue;
		}
		summarise(c, &s);
		if (s.other > busiest)
			busiest = s.other;
		fprintf(f,
			"%-10s %4u %7zu %8.2f %8.2f %8.2f %8.2f %9.2g %8.2g "
			"%5.2f %6.2f %5.0f %4d%s\n",
			ring_descs[c->kind].name, c->producers, c->payload,
			s.mps / 1e6, s.mps_min / 1e6, s.mps_max / 1e6, s.nspm,
			s.wpm, s.spm, s.cpus, s.other, s.c2c, c->done_runs,
			c->truncated_runs ? "*" : "");
		truncated += c->truncated_runs;
	}

	fprintf(f,
		"\nwakes/msg: wake-up system calls by the producers per "
		"message (lull: its wakes\ncounter; pipe, eventfd: one "
		"write per message); sys/msg: every data-path\nsystem call "
		"of both sides per message (wakes, parks or reads, "
		"yields).\nCPUs: CPU seconds per second used by the run's "
		"threads (about 1 means they\ntook turns on one CPU); "
		"others: the same for every other process; c2c: ns\nper "
		"cache-line round trip between the first two CPUs, measured "
		"before each run.\n");
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
	print_ratios(f, cfgs, ncfgs, opt, RING_LULL_SPSC);
	print_ratios(f, cfgs, ncfgs, opt, RING_LULL_MPSC);
	print_targets(f, cfgs, ncfgs, opt);
}

/* Options. */

static void usage(FILE *f)
{
	int k;

	fprintf(f, "usage: throughput [options]\n"
		   "  --ring NAME       ");
	for (k = 0; k < RING_KINDS; k++)
		fprintf(f, "%s%s%s", k ? ", " : "", ring_descs[k].name,
			ring_descs[k].built ? "" : " (not built)");
	fprintf(f,
		"\n                    (repeatable; default every one built)\n"
		"  --producers N     (repeatable; default 1 2 4 8; SPSC rings "
		"only run with 1)\n"
		"  --payload BYTES   (repeatable; default 8 64 512)\n"
		"  --seconds S       producers send for S seconds per run "
		"(default %.1f)\n"
		"  --messages M      or send M messages per run in all\n"
		"  --time-limit S    with --messages: stop a run after S "
		"seconds (default 60)\n"
		"  --runs R          repetitions; median, min, max "
		"(default %d)\n"
		"  --capacity BYTES  lull data bytes, power of two (default "
		"1 MiB);\n"
		"                    the peers get the same memory\n"
		"  --batch N         lull_ring_read limit, messages per poll "
		"of the others\n"
		"                    (default %u; rte bursts at most %u)\n"
		"  --lull-spin-ns N  lull consumer: spin N ns on an empty "
		"ring before parking\n"
		"                    (default: lull's, %s)\n"
		"  --pin             consumer on the first allowed CPU, "
		"producers round-robin\n"
		"                    on the others (default: no pinning)\n"
		"  --max-others F    repeat (up to twice) a run during which "
		"other processes\n"
		"                    used more than F CPUs (default: never)\n"
		"  --json            one JSON object per result on stdout; "
		"table to stderr\n"
		"  --verbose         print every run\n",
		DEFAULT_SECONDS, DEFAULT_RUNS, DEFAULT_BATCH, RTE_BURST,
		LULL_PARK_SPIN_DEFAULT_NS > (uint64_t)INT64_MAX ? "adaptive"
							       : spin_json(-1));
}

static int parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_RING = 256, O_PROD, O_PAYLOAD, O_SECONDS, O_MESSAGES,
	       O_TIME_LIMIT, O_RUNS, O_CAPACITY, O_BATCH, O_MAX_OTHERS,
	       O_LULL_SPIN, O_JSON, O_PIN, O_VERBOSE, O_HELP };
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
		{ "lull-spin-ns", required_argument, NULL, O_LULL_SPIN },
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
	opt->seconds = DEFAULT_SECONDS;
	opt->time_limit = 60;
	opt->runs = DEFAULT_RUNS;
	opt->capacity = DEFAULT_CAPACITY;
	opt->batch = DEFAULT_BATCH;
	opt->max_others = -1;
	opt->lull_spin_ns = -1;

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
			if (!ring_descs[k].built) {
				fprintf(stderr,
					"throughput: %s was not built (its "
					"headers were missing)\n",
					optarg);
				return -1;
			}
			for (c = 0; c < opt->nrings; c++)
				if (opt->rings[c] == k)
					break;
			if (c == opt->nrings)
				opt->rings[opt->nrings++] = k;
			break;
		case O_PROD:
			if (!bench_parse_u64(optarg, &v) || !v || v > 1024 ||
			    opt->nproducers == MAX_LIST) {
				fprintf(stderr,
					"throughput: bad --producers\n");
				return -1;
			}
			opt->producers[opt->nproducers++] = (unsigned int)v;
			break;
		case O_PAYLOAD:
			if (!bench_parse_u64(optarg, &v) || v > INT32_MAX ||
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
			if (!bench_parse_u64(optarg, &opt->messages) ||
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
			if (!bench_parse_u64(optarg, &v) || !v || v > 1000) {
				fprintf(stderr, "throughput: bad --runs\n");
				return -1;
			}
			opt->runs = (int)v;
			break;
		case O_CAPACITY:
			if (!bench_parse_u64(optarg, &v) ||
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
			if (!bench_parse_u64(optarg, &v) || !v || v > INT_MAX) {
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
		case O_LULL_SPIN:
			if (!bench_parse_u64(optarg, &v) || v > INT64_MAX) {
				fprintf(stderr,
					"throughput: bad --lull-spin-ns\n");
				return -1;
			}
			opt->lull_spin_ns = (int64_t)v;
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
			if (ring_descs[k].built)
				opt->rings[opt->nrings++] = k;
	if (!opt->nproducers) {
		static const unsigned int def[] = { 1, 2, 4, 8 };

		for (k = 0; k < 4; k++)
			opt->producers[opt->nproducers++] = def[k];
	}
	if (!opt->npayloads) {
		static const size_t def[] = { 8, 64, 512 };

		for (k = 0; k < 3; k++)
			opt->payloads[opt->npayloads++] = def[k];
	}
	return 0;
}

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	struct options opt;
	struct config *cfgs;
	int ncfgs = 0, ncpus, i, j, k, run, status = 0;
	uint64_t t0;

	if (parse_options(argc, argv, &opt))
		return 2;
	ncpus = bench_allowed_cpus(cpus);
	/* A pipe whose reader failed must fail its writers, not kill us. */
	signal(SIGPIPE, SIG_IGN);

	cfgs = calloc((size_t)opt.npayloads * opt.nproducers * opt.nrings,
		      sizeof(*cfgs));
	if (!cfgs)
		return 1;
	for (i = 0; i < opt.npayloads; i++) {
		for (j = 0; j < opt.nproducers; j++) {
			for (k = 0; k < opt.nrings; k++) {
				enum ring_kind kind = opt.rings[k];
				struct config *c = &cfgs[ncfgs];

				if (!is_multi_producer(kind) &&
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
		bench_load_average());
	t0 = bench_now_ns();

	/* Round-robin: run r of every config before run r + 1 of any. */
	for (run = 0; run < opt.runs; run++) {
		for (i = 0; i < ncfgs; i++) {
			struct config *c = &cfgs[i];
			int attempt;

			for (attempt = 0; !c->failed && !c->skipped;
			     attempt++) {
				if (run_once(c, &opt, cpus, ncpus,
					     c->done_runs)) {
					c->failed = true;
					status = 1;
					break;
				}
				if (opt.max_others < 0 ||
				    c->res[c->done_runs - 1].other <=
					    opt.max_others ||
				    attempt == 2)
					break;
				fprintf(stderr,
					"throughput: run %d of %s P=%u "
					"payload=%zu repeated: other processes "
					"used %.2f CPUs\n",
					run + 1, ring_descs[c->kind].name,
					c->producers, c->payload,
					c->res[c->done_runs - 1].other);
				c->done_runs--;
			}
		}
	}

	fprintf(stderr, "throughput: load average %.2f after, %.0f s in all\n",
		bench_load_average(), (double)(bench_now_ns() - t0) / 1e9);
	if (opt.json)
		for (i = 0; i < ncfgs; i++)
			if (cfgs[i].done_runs)
				print_json(cfgs, ncfgs, &cfgs[i], &opt);
	fflush(stdout);
	print_table(opt.json ? stderr : stdout, cfgs, ncfgs, &opt);

	for (i = 0; i < ncfgs; i++)
		config_free(&cfgs[i]);
	free(cfgs);
	return status;
}
