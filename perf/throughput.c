/* SPDX-License-Identifier: MIT */
/*
 * throughput.c - messages per second through one consumer and P producers,
 * for lull's rings, with lull's own parked consumer, and their peers side by
 * side: Concurrency Kit's ck_ring, DPDK's rte_ring, liburcu's wfcqueue,
 * boost.lockfree's spsc_queue, moodycamel's ConcurrentQueue, a pipe and an
 * eventfd doorbell queue.
 *
 * The rings, one file each behind struct peer_ring (throughput.h):
 * peer_lull.c (lull-spsc, lull-mpsc), peer_ck.c (ck-spsc, ck-mpmc,
 * ck-mpsc), peer_rte.c (rte-spsc, rte-mpsc), peer_urcu.c (urcu-wfcq), the
 * C++ peer_boost.cpp (boost-spsc, boost-spsc-bulk) and peer_moodycamel.cpp
 * (moodycamel), peer_pipe.c and peer_eventfd.c; --ring, repeatable, picks
 * some (default every one that was built).  SPSC rings only run with one
 * producer.
 *
 * Batches.  --batch bounds what a consumer takes per read or poll.
 * --producer-batch N makes the producers of the rings that can push
 * several messages at once push N at a time (rte's burst enqueue,
 * boost-spsc-bulk's push(const T *, n), moodycamel's try_enqueue_bulk);
 * without it they push one (boost-spsc-bulk: 32), and every other ring
 * always pushes one.  The JSON's producer_batch is each ring's.
 *
 * Waiting.  The lull consumer parks (peer_lull.c).  The spinning peers (ck,
 * rte, urcu) keep their natural waiting: on an empty ring the consumer, and
 * on a full ring (or an exhausted urcu pool) the producer, back off with
 * bench_backoff_wait() (PAUSE spins, then sched_yield()), as do lull's
 * producers on a full ring, so that every ring's producers wait alike
 * (lull_producer_wait() would park them; it is not measured here).
 * pipe and eventfd block in the kernel.  --pause N makes every such back-off
 * N PAUSEs, never a yield: the spinning peers' best case with one producer
 * (perf/README.md, "How long a failed poll waits").
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
 *                 256 buffers more; an rte producer pushing batches fills
 *                 a batch's buffers first, so its slab has a batch more.
 *   by value      boost's and moodycamel's queues hold items, not
 *                 pointers: a fixed-size item per payload (8, 64 or 512
 *                 bytes, peer_items.hpp).  The producer sets the value in
 *                 its own item and the push copies the item in; the pop
 *                 copies items out into the consumer's array, and the
 *                 consumer sums their first 8 bytes.
 *
 * Equal memory.  --capacity is lull's data area in bytes (default 1 MiB).
 * The slot rings get the largest power-of-two slot count whose memory fits
 * in the same bytes: capacity / 8 slots for payload <= 8, capacity /
 * (8 + align8(payload)) rounded down to a power of two for larger payloads
 * (slot plus one slab buffer per slot; the slab is per producer, but a
 * producer's share of the traffic only ever touches its own).  rte_ring
 * holds one message less than its slots.  urcu's producers share capacity /
 * (16 + align8(max(payload, 8))) nodes (at least 256 each); the pipe gets
 * capacity bytes.  boost's queue holds the largest power-of-two count of
 * items that fits; moodycamel's producers share capacity / item size items
 * (in blocks of 32, at least 256 each).  At payload 8 lull's 16-byte
 * records hold half the messages that an 8-byte slot does: the same cache
 * footprint, not the same message count.
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
 *        rte-* are built where pkg-config finds libdpdk, urcu-wfcq where
 *        it finds liburcu; without them those rings are left out, and
 *        installing them rebuilds this program (the Makefile's peers stamp).
 * Run:   build/perf/throughput --runs 5 --seconds 1 [--pin] [--json]
 * Plot:  build/perf/throughput --json > t.json && perf/json2dat.py t.json
 *        out/ && gnuplot -e "dir='out'" perf/plot_throughput.gp
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "throughput.h"

#define C2C_ROUND_TRIPS 2000

/* Record the first failure of a run and tell every thread to stop. */
void tp_run_fail(struct run *run, const char *fmt, ...)
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

/*
 * Add the calling thread's CPU time to the run's: CPU seconds per second of
 * the run tell whether the threads really ran in parallel (about 2 on two
 * CPUs) or took turns on one CPU (about 1), which unpinned runs sometimes
 * do and which changes the result more than any ring does.  A consumer
 * that parks or blocks uses less.
 */
void tp_account_cpu(struct run *run)
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

/*
 * Count @n producers as done.  The call that completes the count (the last
 * producer thread, or main for producers that never started) ends the
 * stream through the ring's end_stream: a lull end record through @handle,
 * the pipe's write end closed, or one more ring of the doorbell.  Either
 * way the consumer learns that no message follows without having to poll a
 * flag while it sleeps.
 */
void tp_producers_done(struct run *run, unsigned int n, void *handle)
{
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
	if (cfg->ring->end_stream)
		cfg->ring->end_stream(run, handle);
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct run *run = p->run;
	size_t len = run->cfg->payload > 8 ? run->cfg->payload : 8;
	unsigned int batch = run->cfg->push_batch ? run->cfg->push_batch : 1;
	/* Room for a batch of messages, even 8-aligned each (peer_lull.c). */
	size_t bytes = ((len + 7) & ~(size_t)7) * batch;
	unsigned char *msg = aligned_alloc(64, (bytes + 63) & ~(size_t)63);

	if (!msg) {
		tp_run_fail(run, "producer %u: out of memory", p->id);
		tp_producers_done(run, 1, p->handle);
		return NULL;
	}
	memset(msg, 0xa5, bytes);
	bench_pin_self(p->cpu);
	wait_go(run);
	run->cfg->ring->produce(p, msg);
	free(msg);
	return NULL;
}

bool tp_stalled_check(struct run *run, uint64_t *last_count,
		      uint64_t *last_ns, uint64_t count)
{
	uint64_t now = bench_now_ns();

	if (count != *last_count) {
		*last_count = count;
		*last_ns = now;
		return false;
	}
	if (now - *last_ns <= STALL_NS)
		return false;
	tp_run_fail(run, "%s: no progress for 10 s, %llu messages received",
		    run->cfg->ring->name, (unsigned long long)count);
	return true;
}

static void *consumer_main(void *arg)
{
	struct run *run = arg;
	struct config *cfg = run->cfg;
	struct consumer_state cs = {
		.mask = run->mask,
		.payload = cfg->payload,
	};

	/* Room for ITEM_POP messages: lull_run_any() copies a run out so. */
	cs.sink = aligned_alloc(64,
				(ITEM_POP * cfg->payload + 64) & ~(size_t)63);
	if (!cs.sink) {
		tp_run_fail(run, "consumer: out of memory");
		goto out;
	}
	bench_pin_self(run->consumer_cpu);
	wait_go(run);
	cfg->ring->consume(run, &cs);
	run->t_end = bench_now_ns();
	tp_account_cpu(run);
out:
	if (cfg->ring->consumer_exit)
		cfg->ring->consumer_exit(run);
	run->received = cs.count;
	run->recv_sum = cs.sum;
	run->bad = cs.bad;
	run->poisoned = cs.poisoned;
	run->cons_syscalls = cs.syscalls;
	free(cs.sink);
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

void *tp_alloc_zeroed(size_t size)
{
	void *p = aligned_alloc(LINE, (size + LINE - 1) & ~(size_t)(LINE - 1));

	if (p)
		memset(p, 0, size);
	return p;
}

/*
 * Equal memory for the slot rings (ck, rte, eventfd's FIFO): the largest
 * power-of-two slot count whose memory fits in --capacity, and for
 * payloads above 8 bytes each producer's slab of slots + 1 + @extra
 * buffers (a consumer that takes a burst before it copies any of it out
 * frees up to @extra slots whose buffers are still to be read).
 */
int tp_slots_setup(struct config *cfg, const struct options *opt,
		   size_t extra)
{
	if (cfg->payload <= 8) {
		cfg->stride = 0;
		cfg->slots = opt->capacity / sizeof(void *);
		return 0;
	}
	cfg->stride = (cfg->payload + 7) & ~(size_t)7;
	cfg->slots = pow2_floor(opt->capacity /
				(sizeof(void *) + cfg->stride));
	if (cfg->slots < 4)
		cfg->slots = 4;
	cfg->slab_count = (size_t)cfg->slots + 1 + extra;
	cfg->slab = tp_alloc_zeroed(cfg->producers * cfg->slab_count *
				    cfg->stride);
	return cfg->slab ? 0 : -ENOMEM;
}

static int config_setup(struct config *cfg, const struct options *opt)
{
	cfg->res = calloc(opt->runs, sizeof(*cfg->res));
	if (!cfg->res)
		return -ENOMEM;
	return cfg->ring->setup(cfg, opt);
}

static void config_free(struct config *cfg)
{
	if (cfg->ring->teardown)
		cfg->ring->teardown(cfg);
	free(cfg->slab);
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

/* One timed run of @cfg.  Returns 0, or -1 with the reason printed. */
static int run_once(struct config *cfg, const struct options *opt,
		    const int *cpus, int ncpus, int index)
{
	const struct peer_ring *ring = cfg->ring;
	const char *name = ring->name;
	struct peer_counters st0 = { 0 }, st1 = { 0 };
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
	run = tp_alloc_zeroed(sizeof(*run));
	prods = tp_alloc_zeroed(cfg->producers * sizeof(*prods));
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
	if (ring->run_open && ring->run_open(run))
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
		if (ring->producer_attach)
			p->handle = ring->producer_attach(cfg, i);
	}
	if (ring->counters)
		ring->counters(cfg, &st0);

	if (pthread_create(&ctid, NULL, consumer_main, run)) {
		fprintf(stderr, "throughput: pthread_create failed\n");
		goto out;
	}
	for (started = 0; started < cfg->producers; started++) {
		if (pthread_create(&tids[started], NULL, producer_main,
				   &prods[started])) {
			fprintf(stderr, "throughput: pthread_create failed\n");
			tp_run_fail(run, "pthread_create failed");
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
		tp_producers_done(run, cfg->producers - started,
				  prods[0].handle);
	pthread_join(ctid, NULL);
	busy = bench_machine_busy_ns() - busy_start;
	if (ring->counters)
		ring->counters(cfg, &st1);
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
	if (ring->counters)
		wakes = st1.wakes - st0.wakes;
	else
		wakes = atomic_load_explicit(&run->prod_syscalls,
					     memory_order_relaxed);
	syscalls = wakes + run->cons_syscalls + prod_yields + run->cons_yields;
	syscalls += st1.syscalls - st0.syscalls;
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
	res->rpm = (double)(st1.claim_retries - st0.claim_retries) / res->msgs;
	res->clwpm = (double)(st1.claim_waits - st0.claim_waits) / res->msgs;
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
	if (run && ring->run_close)
		ring->run_close(run);
	free(run);
	free(prods);
	free(tids);
	return ret;
}

/* Output. */

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	struct options opt;
	struct config *cfgs;
	int ncfgs = 0, ncpus, i, j, k, run, status = 0;
	char push_batch[48];
	uint64_t t0;

	if (tp_parse_options(argc, argv, &opt))
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

				if (tp_rings[kind]->cls == CLASS_SPSC &&
				    opt.producers[j] != 1)
					continue;
				c->kind = kind;
				c->ring = tp_rings[kind];
				c->producers = opt.producers[j];
				c->payload = opt.payloads[i];
				c->push_batch = tp_push_batch(c->ring, &opt);
				ncfgs++;
				if (config_setup(c, &opt)) {
					fprintf(stderr,
						"throughput: %s P=%u "
						"payload=%zu: setup failed\n",
						c->ring->name,
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

	if (opt.push_batch)
		snprintf(push_batch, sizeof(push_batch), "%u", opt.push_batch);
	else
		snprintf(push_batch, sizeof(push_batch),
			 "1 (boost-spsc-bulk 32)");
	fprintf(stderr,
		"throughput: lull %s, %d config(s) x %d run(s), capacity %zu, "
		"batch %u, producer batch %s, lull reads %s, %d CPU(s), %s\n",
		lull_version(), ncfgs, opt.runs, opt.capacity, opt.batch,
		push_batch, opt.lull_read_runs ? "runs" : "records", ncpus,
		opt.pin ? "pinned" : "not pinned");
	if (bench_backoff_pauses)
		fprintf(stderr, "throughput: a failed poll waits %u PAUSEs, "
				"never a yield\n", bench_backoff_pauses);
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
					run + 1, c->ring->name,
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
				tp_print_json(cfgs, ncfgs, &cfgs[i], &opt);
	fflush(stdout);
	tp_print_table(opt.json ? stderr : stdout, cfgs, ncfgs, &opt);

	for (i = 0; i < ncfgs; i++)
		config_free(&cfgs[i]);
	free(cfgs);
	return status;
}
