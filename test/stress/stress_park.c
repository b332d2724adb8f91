/* SPDX-License-Identifier: MIT */
/*
 * stress_park.c - lost wake-up stress of the park/wake handshake, through
 * every backend.
 *
 * A plain-main program (ThreadSanitizer cannot run Criterion).  Each
 * configuration is a backend and a topology:
 *
 *   backends   blocking            lull_ring_wait() (futex(2)), parking at
 *                                  once (spin 0)
 *              blocking-adaptive   the same with the default adaptive spin
 *              own-uring-futex     lull_uring_park_*() on the consumer's
 *              own-uring-eventfd     own io_uring (LULL_BACKEND forces it)
 *              loop-uring-futex    a lull_loop on each of its backends
 *              loop-uring-eventfd
 *              loop-epoll
 *              loop-coalesce       uring-eventfd with a 50 us coalescing
 *                                  window (lull_loop_config.coalesce_ns)
 *   topologies spsc (1 producer), mpsc1, mpsc2, mpsc4, mpsc8,
 *              pingpong-spsc, pingpong-mpsc (1 producer; not on
 *              blocking-adaptive nor loop-coalesce, see below)
 *
 * fifty-two in all.  In the first five, producer threads send records whose
 * timing is made to hit the park window: single records after random busy
 * gaps (0-40 us of spinning), bursts of 2-16, sched_yield(), short
 * nanosleep()s, claims held open for a few microseconds (an MPSC consumer
 * parks in front of them), and "park hunters" that poll the ring's park
 * word and commit the moment the consumer announces a park (between its
 * announce and its re-check), 0-3 us later (between re-check and sleep) or
 * once it sleeps.  The consumer thread parks whenever the ring is empty
 * (no spin, except blocking-adaptive's short spins while records stream)
 * and now and then is slow on a record, so that commits pile up.
 *
 * The ping-pongs make every record a full park/wake cycle: the producer
 * sends each one only once the consumer has counted a new park (it took
 * the previous record, found the ring empty at its re-check and is about
 * to sleep, or sleeps), then at once, 0-2 us later or 2-12 us later.  So
 * a ping-pong of N records is N park cycles, each ended by the record's
 * wake-up, at the handshake's own pace: they are how the run reaches a
 * million park cycles per backend quickly.  blocking-adaptive would park
 * exactly as blocking does (nothing streams), and loop-coalesce would add
 * its 50 us window to every cycle, so neither runs them.
 *
 * Every record carries {producer, seq, length, commit time}; the consumer
 * checks per producer that the records arrive in order, none lost, none
 * twice (test/lib's ledger).  There is no safety net (lull's default), so a
 * lost wake-up shows as a stuck record instead of being quietly rescued: a
 * watchdog (test/lib's) fails the run (a message naming the configuration
 * and its counters; the process aborts)
 * when a committed record has been undelivered for more than 1 s
 * (--lost-ms) while the consumer is parked and no producer holds an older
 * claim open, when nothing is delivered for 30 s, and when a configuration
 * runs past its deadline (--deadline, default 600 s).  At the end of each
 * configuration safety_timeouts must be 0 and wakes at most the parks
 * announced (parks + park_cancels), with one producer the consumer's
 * parks must have run both with membarrier(2) and with a fence alone (a
 * ping-pong: mostly the latter; lib/park.h), and the ring must have
 * ended the way
 * its last producer's detach (or the loop's stop) ends it: after the last
 * record, exactly one poison record, then -EPIPE.
 *
 * --records N is the scale: records per configuration, split between its
 * producers (default 50000; K and M suffixes).  How many of them end in
 * a park and a wake-up depends on the scheduler.  --pingpong N sets the
 * ping-pong park cycles per lull backend (blocking, uring-futex,
 * uring-eventfd, epoll), split between the ways of parking on it (own
 * io_uring and loop) and the two topologies: by default 20 x --records,
 * a million; in the ThreadSanitizer build, which makes each cycle a few
 * times dearer, 1 x --records (make check passes 100000, make test a
 * quick 5000).  On two cores shared with other work the default run took
 * 125 s, the ping-pongs 10-30 us a cycle; under ThreadSanitizer --records
 * 100000 took 107 s.
 *
 * --inject-lost-wake checks the checker: in each configuration one
 * producer hides the park word from one of its commits while the consumer
 * sleeps (a lost wake-up made on purpose); the watchdog must fail the run.
 *
 * Output: one line per configuration with its park cycles (the ring's
 * parks counter: the consumer passed its re-check and went to sleep) and
 * its lost wake-ups (the safety net's count, which stays 0 with the net
 * off: with none, a lost wake-up ends the run in the watchdog instead);
 * then the same summed per lull backend; then "N passed, M failed".  The
 * exit status is 0 only when every configuration passed.  --seed reproduces the
 * producers' choices (not the timing); --config NAME runs only the named
 * configurations ("blocking/spsc", "loop-epoll/mpsc8", ...; a backend or a
 * topology alone selects all of its configurations).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include <lull.h>

/* The region layout: producers hunt the park word. */
#include "handles.h"
#include "park.h"

#include "../lib/ledger.h"
#include "../lib/threads.h"

#define NSEC_PER_USEC 1000ull
#define NSEC_PER_MSEC 1000000ull
#define NSEC_PER_SEC 1000000000ull

#define MAX_PRODUCERS 8
#define LINE_PAIR 128

#define DEFAULT_RECORDS 50000ull
/*
 * Ping-pong park cycles per lull backend, per --records: a million in the
 * default run.  Under ThreadSanitizer, which makes each cycle several times
 * dearer, as many as --records.
 */
#if defined(__SANITIZE_THREAD__)
#define PINGPONG_PER_RECORD 1u
#else
#define PINGPONG_PER_RECORD 20u
#endif
#define DEFAULT_SEED 1ull
#define DEFAULT_DEADLINE_S 600u
#define DEFAULT_LOST_MS 1000u
#define STALL_NS (30 * NSEC_PER_SEC)
#define CAPACITY ((size_t)64 << 10)
/* No safety net: lull's default, under which a lost wake-up is a hang. */
#define SAFETY_NS 0
#define WATCHDOG_TICK_MS 10u
#define HUNT_NS (50 * NSEC_PER_USEC)

#define RECORD_TYPE 1
#define PARK_UD 0x73747265737321ull

/* Every record's payload starts with this; up to MAX_EXTRA bytes follow. */
struct stamp {
	uint32_t producer;
	uint32_t len; /* the payload length, stamp included */
	uint64_t seq;
	uint64_t commit_ns;
};

#define MAX_EXTRA 40u

/* ------------------------------------------------------------------------
 * Configurations
 */

enum via {
	VIA_WAIT,
	VIA_URING,
	VIA_LOOP,
};

struct backend_desc {
	const char *name;
	enum lull_backend backend;
	enum via via;
	uint64_t spin_ns; /* VIA_WAIT: lull_park_config.spin_ns; VIA_LOOP:
			     lull_loop_config.coalesce_ns */
	/*
	 * Runs the ping-pong topologies: the consumer parks as soon as the
	 * ring is empty.  Not blocking-adaptive (with one record per park
	 * nothing streams, so it parks exactly as blocking does) nor
	 * loop-coalesce (its window would add 50 us to every cycle).
	 */
	bool pingpong;
};

static const struct backend_desc backends[] = {
	{ "blocking", LULL_BACKEND_BLOCKING, VIA_WAIT, 0, true },
	{ "blocking-adaptive", LULL_BACKEND_BLOCKING, VIA_WAIT,
	  LULL_PARK_SPIN_ADAPTIVE, false },
	{ "own-uring-futex", LULL_BACKEND_URING_FUTEX, VIA_URING, 0, true },
	{ "own-uring-eventfd", LULL_BACKEND_URING_EVENTFD, VIA_URING, 0,
	  true },
	{ "loop-uring-futex", LULL_BACKEND_URING_FUTEX, VIA_LOOP, 0, true },
	{ "loop-uring-eventfd", LULL_BACKEND_URING_EVENTFD, VIA_LOOP, 0,
	  true },
	{ "loop-epoll", LULL_BACKEND_EPOLL, VIA_LOOP, 0, true },
	{ "loop-coalesce", LULL_BACKEND_URING_EVENTFD, VIA_LOOP,
	  50 * NSEC_PER_USEC, false },
};

struct topo_desc {
	const char *name;
	unsigned topology;
	unsigned producers;
	bool pingpong; /* one record per park: see pingpong_main() */
};

static const struct topo_desc topos[] = {
	{ "spsc", LULL_RING_SPSC, 1, false },
	{ "mpsc1", LULL_RING_MPSC, 1, false },
	{ "mpsc2", LULL_RING_MPSC, 2, false },
	{ "mpsc4", LULL_RING_MPSC, 4, false },
	{ "mpsc8", LULL_RING_MPSC, 8, false },
	{ "pingpong-spsc", LULL_RING_SPSC, 1, true },
	{ "pingpong-mpsc", LULL_RING_MPSC, 1, true },
};

#define NR_BACKENDS (sizeof(backends) / sizeof(backends[0]))
#define NR_TOPOS (sizeof(topos) / sizeof(topos[0]))
#define NR_CONFIGS (NR_BACKENDS * NR_TOPOS)

/* Whether configuration @i is one: a ping-pong only on some backends. */
static bool config_exists(unsigned i)
{
	return !topos[i % NR_TOPOS].pingpong || backends[i / NR_TOPOS].pingpong;
}

/*
 * Records of one ping-pong configuration: the backend's share of
 * --pingpong, which each lull backend gets whole, split between the ways
 * of parking on it that run ping-pongs (own io_uring and loop) and the
 * two topologies.
 */
static uint64_t pingpong_records(const struct backend_desc *be,
				 uint64_t per_backend)
{
	unsigned ways = 0;

	for (unsigned b = 0; b < NR_BACKENDS; b++)
		ways += backends[b].pingpong &&
			backends[b].backend == be->backend;
	return (per_backend + 2 * ways - 1) / (2 * ways);
}

/*
 * What each lull backend went through, over every configuration that
 * parked on it: the final summary.  Indexed by enum lull_backend.
 */
#define NR_LULL_BACKENDS (LULL_BACKEND_EPOLL + 1)

struct tally {
	unsigned passed, failed;
	uint64_t parks, wakes, park_cancels, pingpong, lost;
};

static struct tally tallies[NR_LULL_BACKENDS];

struct options {
	uint64_t records;
	uint64_t pingpong; /* park cycles per backend, both topologies */
	uint64_t seed;
	unsigned deadline_s;
	unsigned lost_ms;
	bool inject_lost_wake;
	bool pin;
	bool selected[NR_CONFIGS];
};

/* ------------------------------------------------------------------------
 * Time and randomness
 */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

static void spin_for_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;

	while (now_ns() < end)
		cpu_relax();
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / NSEC_PER_SEC),
		.tv_nsec = (long)(ns % NSEC_PER_SEC),
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static uint64_t rng_next(uint64_t *state)
{
	/* splitmix64: any seed, including 0, gives a good stream. */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *state, uint64_t n)
{
	return rng_next(state) % n;
}

/* ------------------------------------------------------------------------
 * One configuration's run
 */

struct run;

struct producer {
	alignas(LINE_PAIR) struct run *run;
	unsigned id;
	uint64_t quota;
	uint64_t rng;
	struct lull_producer *prod;
	pthread_t thread;
	int error;
	/* For the watchdog and the summary (what it committed: the
	 * ledger's); relaxed counters. */
	_Atomic uint64_t write_start;   /* ns a write began; 0 when none */
	_Atomic uint64_t hunts;         /* park hunts started */
	_Atomic uint64_t hunt_hits;     /* ... that saw the park announced */
};

struct run {
	const struct backend_desc *be;
	const struct topo_desc *topo;
	const struct options *opt;
	char name[48];
	struct lull_ring *ring;
	struct lull_loop *loop;
	bool mpsc;
	uint64_t total;
	uint64_t start_ns;
	pthread_barrier_t go;
	pthread_t consumer;
	bool consumer_started;
	struct watchdog watchdog;
	/* The watchdog's marks, one per producer (see watch_producer()). */
	struct mark {
		uint64_t seq; /* the producer had committed this many... */
		uint64_t ns;  /* ...at this time; 0: no mark */
	} marks[MAX_PRODUCERS];
	/* What each producer committed and the consumer took, in order. */
	struct ledger ledger;

	struct producer prod[MAX_PRODUCERS];

	/* The consumer's, on its own lines. */
	alignas(LINE_PAIR) uint64_t crng;
	uint64_t max_latency_ns;
	/*
	 * Records read while the consumer's parks fenced alone (its
	 * producers asked to fence, lib/park.h) and while they did not.
	 */
	uint64_t fenced_records, unfenced_records;
	unsigned poisons; /* poison records handed to on_record() */
	_Atomic uint64_t received;

	/*
	 * --inject-lost-wake: producers pause until producer 0's record
	 * hold - 1 is delivered; 0 when not holding.
	 */
	_Atomic uint64_t hold;
	_Atomic int failed;                  /* 0, 1 writing msg, 2 */
	char msg[512];

	/* The summary, for the watchdog's message and the final line. */
	unsigned passed_before, selected;
};

__attribute__((format(printf, 2, 3))) static void fail(struct run *run,
							const char *fmt, ...)
{
	int expected = 0;
	va_list ap;

	if (!atomic_compare_exchange_strong_explicit(&run->failed, &expected,
						     1, memory_order_relaxed,
						     memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(run->msg, sizeof(run->msg), fmt, ap);
	va_end(ap);
	/* Pairs with the acquire in failed(): msg is complete. */
	atomic_store_explicit(&run->failed, 2, memory_order_release);
	if (run->loop)
		lull_loop_stop(run->loop);
}

static bool failed(struct run *run)
{
	return atomic_load_explicit(&run->failed, memory_order_acquire) != 0;
}

static uint32_t park_word(const struct run *run)
{
	return atomic_load_explicit(&run->ring->region->park,
				    memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Producers
 */

/* While an injected lost wake-up is pending, producers stay quiet. */
static void wait_while_held(struct run *run)
{
	uint64_t hold;

	for (;;) {
		hold = atomic_load_explicit(&run->hold, memory_order_relaxed);
		if (!hold || failed(run) ||
		    ledger_count_got(&run->ledger, 0) >= hold)
			return;
		sleep_ns(NSEC_PER_MSEC);
	}
}

static int write_record(struct producer *p, uint64_t seq, bool hold_claim)
{
	struct run *run = p->run;
	unsigned char buf[sizeof(struct stamp) + MAX_EXTRA];
	struct stamp st = {
		.producer = p->id,
		.seq = seq,
	};
	uint32_t len;
	void *data;
	int ret;

	if (run->opt->inject_lost_wake &&
	    (p->id || atomic_load_explicit(&run->hold, memory_order_relaxed) !=
			      seq + 1))
		wait_while_held(run);
	len = (uint32_t)sizeof(st) + (uint32_t)rng_below(&p->rng,
							  MAX_EXTRA + 1);
	st.len = len;
	for (;;) {
		atomic_store_explicit(&p->write_start, now_ns(),
				      memory_order_relaxed);
		if (hold_claim) {
			ret = run->mpsc ? lull_mpsc_claim(p->prod, RECORD_TYPE,
							  len, &data)
					: lull_spsc_claim(p->prod, RECORD_TYPE,
							  len, &data);
			if (ret == 0) {
				/* The consumer may park in front of it. */
				spin_for_ns(rng_below(&p->rng, 5000));
				st.commit_ns = now_ns();
				memcpy(data, &st, sizeof(st));
				memset((char *)data + sizeof(st), 0x5a,
				       len - sizeof(st));
				ret = run->mpsc ? lull_mpsc_commit(p->prod)
						: lull_spsc_commit(p->prod);
			}
		} else {
			st.commit_ns = now_ns();
			memcpy(buf, &st, sizeof(st));
			memset(buf + sizeof(st), 0x5a, len - sizeof(st));
			ret = run->mpsc ? lull_mpsc_write(p->prod, RECORD_TYPE,
							  buf, len)
					: lull_spsc_write(p->prod, RECORD_TYPE,
							  buf, len);
		}
		atomic_store_explicit(&p->write_start, 0,
				      memory_order_relaxed);
		if (ret != -EAGAIN)
			break;
		if (failed(run))
			return -ECANCELED;
		sched_yield();
	}
	if (ret < 0)
		return ret;
	ledger_sent(&run->ledger, p->id, seq);
	return 0;
}

/*
 * Poll the park word for the consumer's announce, a few microseconds at
 * most: the record that follows lands between its announce and its sleep.
 */
static void hunt_park(struct producer *p)
{
	uint64_t give_up = now_ns() + HUNT_NS;

	atomic_fetch_add_explicit(&p->hunts, 1, memory_order_relaxed);
	while (park_word(p->run) == LULL_PARK_AWAKE) {
		if (now_ns() > give_up)
			return;
		cpu_relax();
	}
	atomic_fetch_add_explicit(&p->hunt_hits, 1, memory_order_relaxed);
	/*
	 * Commit at once (the consumer is between announce and re-check), a
	 * little later (between re-check and sleep), or once it sleeps.
	 */
	switch (rng_below(&p->rng, 3)) {
	case 1:
		spin_for_ns(rng_below(&p->rng, 3 * NSEC_PER_USEC));
		break;
	case 2:
		spin_for_ns(3 * NSEC_PER_USEC +
			    rng_below(&p->rng, 30 * NSEC_PER_USEC));
		break;
	}
}

/*
 * --inject-lost-wake: check the watchdog itself.  Once the consumer has
 * been parked for a while, hide the park word from our own commit (as a
 * producer that missed it would), put it back, and hold every producer
 * until the record is delivered: only the safety net (5 s) can deliver it,
 * and the watchdog must fail the run after --lost-ms.
 */
static int inject_lost_wake(struct producer *p, uint64_t seq)
{
	struct run *run = p->run;
	_Atomic uint32_t *word = &run->ring->region->park;
	uint64_t give_up = now_ns() + NSEC_PER_SEC;
	uint32_t how;
	int ret;

	atomic_store_explicit(&run->hold, seq + 1, memory_order_relaxed);
	while (now_ns() < give_up) {
		if (atomic_load_explicit(word, memory_order_relaxed) ==
		    LULL_PARK_AWAKE) {
			sched_yield();
			continue;
		}
		sleep_ns(2 * NSEC_PER_MSEC); /* asleep by now, not announcing */
		how = atomic_exchange_explicit(word, LULL_PARK_AWAKE,
					       memory_order_seq_cst);
		if (how == LULL_PARK_AWAKE)
			continue;
		ret = write_record(p, seq, false);
		atomic_store_explicit(word, how, memory_order_seq_cst);
		fprintf(stderr, "stress_park: %s: injected a lost wake-up at "
			"producer %u's record %" PRIu64 "\n", run->name, p->id,
			seq);
		return ret;
	}
	atomic_store_explicit(&run->hold, 0, memory_order_relaxed);
	return write_record(p, seq, false);
}


/*
 * --pin: on two or more CPUs the consumer gets CPU 0 and the producers the
 * others, so that the two sides always run in parallel.  Not the default:
 * left to the scheduler the run mixes parallel and shared-CPU phases, and
 * parks and wakes several times as often.
 */
static void pin(bool consumer)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	if (n < 2)
		return;
	CPU_ZERO(&set);
	if (consumer)
		CPU_SET(0, &set);
	else
		for (long cpu = 1; cpu < n && cpu < CPU_SETSIZE; cpu++)
			CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static uint64_t parks_counted(const struct run *run)
{
	/* Relaxed: a counter the consumer stores after its re-check. */
	return atomic_load_explicit(&run->ring->region->parks,
				    memory_order_relaxed);
}

/*
 * Ping-pong: every record is a park/wake cycle.  Before each record the
 * producer waits until the consumer has counted a park beyond the one the
 * previous record was sent to: the consumer took that record, found the
 * ring empty at its re-check and is about to sleep, or sleeps.  Then it
 * commits at once (the consumer between its count and its sleep system
 * call), a moment later, or once it surely sleeps; so every record must
 * be delivered by a wake-up, and a lost one leaves it stuck (the
 * watchdog's).  The park count is read before the commit: read after, the
 * consumer could already have taken the record and parked again, and we
 * would wait for a park that never comes.
 */
static int pingpong_main(struct producer *p)
{
	struct run *run = p->run;
	uint64_t seq = 0, parks = 0, spins;
	int ret = 0;

	while (seq < p->quota && !failed(run)) {
		if (run->opt->inject_lost_wake && seq == p->quota / 2) {
			ret = inject_lost_wake(p, seq++);
			if (ret < 0)
				break;
			wait_while_held(run);
			parks = parks_counted(run);
			continue;
		}
		for (spins = 0; parks_counted(run) <= parks; spins++) {
			if (failed(run))
				return -ECANCELED;
			if (spins < 256)
				cpu_relax();
			else
				sched_yield();
		}
		switch (rng_below(&p->rng, 8)) {
		case 0:
		case 1:
		case 2:
		case 3:
			break;
		case 7:
			spin_for_ns(2 * NSEC_PER_USEC +
				    rng_below(&p->rng, 10 * NSEC_PER_USEC));
			break;
		default:
			spin_for_ns(rng_below(&p->rng, 2 * NSEC_PER_USEC));
			break;
		}
		parks = parks_counted(run);
		ret = write_record(p, seq++, false);
		if (ret < 0)
			break;
	}
	return ret;
}

/*
 * The mixed timings: records after random gaps, in bursts, hunting the
 * park word, and claims held open.  Returns 0 or the write's error.
 */
static int mixed_main(struct producer *p)
{
	struct run *run = p->run;
	uint64_t seq = 0, burst, r;
	bool injected = false;
	int ret = 0;

	while (seq < p->quota && !failed(run)) {
		if (run->opt->inject_lost_wake) {
			if (p->id == 0 && !injected && seq >= p->quota / 2) {
				injected = true;
				ret = inject_lost_wake(p, seq++);
				if (ret < 0)
					break;
			}
			wait_while_held(run);
			if (seq >= p->quota)
				break;
		}
		/*
		 *  0..9   a burst of 2..16 records
		 * 10..44  hunt the park, then one record
		 * 45..64  one record, then spin 0..40 us
		 * 65..74  one record, then sched_yield()
		 * 75..79  one record, then nanosleep 1..50 us
		 * 80..89  one record, then the next at once
		 * 90..99  one claim held open 0..5 us, then committed
		 */
		r = rng_below(&p->rng, 100);
		burst = 1;
		if (r < 10)
			burst = 2 + rng_below(&p->rng, 15);
		else if (r < 45)
			hunt_park(p);
		for (; burst && seq < p->quota; burst--, seq++) {
			ret = write_record(p, seq, r >= 90);
			if (ret < 0)
				break;
		}
		if (ret < 0)
			break;
		if (r >= 45 && r < 65)
			spin_for_ns(rng_below(&p->rng, 40 * NSEC_PER_USEC));
		else if (r >= 65 && r < 75)
			sched_yield();
		else if (r >= 75 && r < 80)
			sleep_ns(1 + rng_below(&p->rng, 50 * NSEC_PER_USEC));
	}
	return ret;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct run *run = p->run;
	int ret;

	if (run->opt->pin)
		pin(false);
	ret = lull_producer_attach(run->ring, 0, &p->prod);
	pthread_barrier_wait(&run->go);
	if (ret < 0) {
		p->error = ret;
		fail(run, "producer %u: attach: %s", p->id, lull_strerror(ret));
		return NULL;
	}
	ret = run->topo->pingpong ? pingpong_main(p) : mixed_main(p);
	if (ret < 0 && ret != -ECANCELED) {
		p->error = ret;
		fail(run, "producer %u: write of record %" PRIu64 ": %s", p->id,
		     ledger_count_sent(&run->ledger, p->id),
		     lull_strerror(ret));
	}
	lull_producer_detach(p->prod);
	p->prod = NULL;
	return NULL;
}

/* ------------------------------------------------------------------------
 * The consumer
 */

static int on_record(const struct lull_record *rec, void *ctx)
{
	struct run *run = ctx;
	struct stamp st;
	uint64_t n, latency;

	/*
	 * The ring ends (its last producer detached, or the loop stopped)
	 * with one poison record, after every record; or, after a failure,
	 * sooner (failed() already: fail() keeps the first message).
	 */
	if (rec->type == LULL_TYPE_POISON) {
		n = atomic_load_explicit(&run->received, memory_order_relaxed);
		if (rec->len || run->poisons || n != run->total)
			fail(run, "poison record #%u (%u bytes) after %" PRIu64
			     " of %" PRIu64 " records", run->poisons + 1,
			     rec->len, n, run->total);
		run->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (rec->type != RECORD_TYPE || rec->len < sizeof(st)) {
		fail(run, "a record of type %d and %u bytes", rec->type,
		     rec->len);
		return LULL_READ_STOP;
	}
	memcpy(&st, rec->data, sizeof(st));
	if (st.producer >= run->topo->producers || st.len != rec->len) {
		fail(run, "a record from producer %u of %u bytes (%u stamped)",
		     st.producer, rec->len, st.len);
		return LULL_READ_STOP;
	}
	if (!ledger_got(&run->ledger, st.producer, st.seq)) {
		fail(run, "%s", ledger_why(&run->ledger));
		return LULL_READ_STOP;
	}
	latency = now_ns() - st.commit_ns;
	if (latency > run->max_latency_ns)
		run->max_latency_ns = latency;
	/* The consumer's own state, on the consumer's thread. */
	if (run->ring->park_fenced)
		run->fenced_records++;
	else
		run->unfenced_records++;
	/* Now and then a slow record, so that commits pile up meanwhile. */
	if (rng_below(&run->crng, 128) == 0)
		spin_for_ns(rng_below(&run->crng, 20 * NSEC_PER_USEC));
	n = atomic_load_explicit(&run->received, memory_order_relaxed) + 1;
	atomic_store_explicit(&run->received, n, memory_order_relaxed);
	if (run->loop && n == run->total)
		lull_loop_stop(run->loop);
	return LULL_READ_CONTINUE;
}

static bool consumer_finished(struct run *run)
{
	return failed(run) ||
	       atomic_load_explicit(&run->received, memory_order_relaxed) >=
		       run->total;
}

static void consume_wait(struct run *run)
{
	int ret;

	while (!consumer_finished(run)) {
		ret = lull_ring_wait(run->ring, -1);
		if (ret < 0) {
			fail(run, "lull_ring_wait: %s", lull_strerror(ret));
			return;
		}
		ret = lull_ring_read(run->ring, on_record, run,
				     1 + (unsigned)rng_below(&run->crng, 256));
		if (ret < 0 && ret != -EAGAIN) {
			fail(run, "lull_ring_read: %s", lull_strerror(ret));
			return;
		}
	}
}

/* Hand every CQE to the park; true when one was the park's. */
static bool reap(struct run *run, struct io_uring *uring)
{
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	bool ours = false;

	io_uring_for_each_cqe(uring, head, cqe) {
		if (lull_uring_park_cqe(run->ring, cqe) == 1)
			ours = true;
		else
			fail(run, "a CQE that is not the park's (user_data "
			     "%llx, res %d)",
			     (unsigned long long)cqe->user_data, cqe->res);
		n++;
	}
	io_uring_cq_advance(uring, n);
	return ours;
}

static void consume_own_uring(struct run *run)
{
	struct __kernel_timespec ts = { .tv_sec = 10 };
	struct io_uring_cqe *cqe;
	struct io_uring uring;
	int ret;

	ret = io_uring_queue_init(8, &uring, 0);
	if (ret < 0) {
		fail(run, "io_uring_queue_init: %s", strerror(-ret));
		return;
	}
	ret = lull_uring_park_arm(run->ring, &uring, PARK_UD);
	if (ret == 1)
		ret = lull_uring_park_drain(run->ring, &uring, on_record, run,
					    64);
	if (ret < 0 && ret != -EPIPE)
		fail(run, "lull_uring_park_arm: %s", lull_strerror(ret));
	while (!consumer_finished(run)) {
		ret = io_uring_submit_and_wait(&uring, 1);
		if (ret < 0 && ret != -EINTR) {
			fail(run, "io_uring_submit_and_wait: %s",
			     strerror(-ret));
			break;
		}
		if (!reap(run, &uring))
			continue;
		ret = lull_uring_park_drain(
			run->ring, &uring, on_record, run,
			1 + (unsigned)rng_below(&run->crng, 256));
		/*
		 * -EPIPE: this drain delivered the poison (the last
		 * producer's detach); nothing is armed, no CQE will come.
		 */
		if (ret == -EPIPE)
			break;
		if (ret < 0)
			fail(run, "lull_uring_park_drain: %s",
			     lull_strerror(ret));
	}
	/* Cancel the park armed after the last record; take its CQEs. */
	ret = lull_uring_park_cancel(run->ring, &uring);
	if (ret < 0 && ret != -ENOENT)
		fail(run, "lull_uring_park_cancel: %s", lull_strerror(ret));
	while (lull_ring_wait(run->ring, 0) == -EBUSY) {
		ret = io_uring_submit_and_wait_timeout(&uring, &cqe, 1, &ts,
						       NULL);
		if (ret < 0 && ret != -EINTR) {
			fail(run, "the cancelled park's CQEs: %s",
			     strerror(-ret));
			break;
		}
		reap(run, &uring);
	}
	io_uring_queue_exit(&uring);
}

static void *consumer_main(void *arg)
{
	struct run *run = arg;
	struct lull_park_config cfg = { .spin_ns = run->be->spin_ns,
					.safety_timeout_ns = SAFETY_NS };
	int ret;

	if (run->opt->pin)
		pin(true);
	pthread_barrier_wait(&run->go);
	if (run->be->via == VIA_LOOP) {
		ret = lull_loop_run(run->loop);
		if (ret < 0)
			fail(run, "lull_loop_run: %s", lull_strerror(ret));
	} else {
		ret = lull_ring_park_config(run->ring, &cfg);
		if (ret < 0)
			fail(run, "lull_ring_park_config: %s",
			     lull_strerror(ret));
		else if (run->be->via == VIA_WAIT)
			consume_wait(run);
		else
			consume_own_uring(run);
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * The watchdog
 */

static void print_state(struct run *run, FILE *f)
{
	struct lull_ring_stats st;

	lull_ring_stats(run->ring, &st);
	fprintf(f, "  %s: park word %u, received %" PRIu64 " of %" PRIu64
		", parks %" PRIu64 ", park_cancels %" PRIu64 ", wakes %" PRIu64
		", safety_timeouts %" PRIu64 ", idle_timeouts %" PRIu64 "\n",
		run->name, park_word(run),
		atomic_load_explicit(&run->received, memory_order_relaxed),
		run->total, st.parks, st.park_cancels, st.wakes,
		st.safety_timeouts, st.idle_timeouts);
	for (unsigned i = 0; i < run->topo->producers; i++) {
		struct producer *p = &run->prod[i];
		uint64_t ws = atomic_load_explicit(&p->write_start,
						   memory_order_relaxed);

		fprintf(f, "  producer %u: committed %" PRIu64 " of %" PRIu64
			", delivered %" PRIu64 ", %s\n",
			i, ledger_count_sent(&run->ledger, i), p->quota,
			ledger_count_got(&run->ledger, i),
			ws ? "writing" : "not writing");
	}
}

/* When the watchdog fires, after its message. */
static void watchdog_report(void *arg)
{
	struct run *run = arg;

	print_state(run, stderr);
	printf("FAIL %-32s watchdog (see above)\n", run->name);
	printf("%u passed, %u failed\n", run->passed_before,
	       run->selected - run->passed_before);
}

/*
 * Every tick, per producer: remember how many records it had committed
 * (a mark, with the time).  When the consumer has delivered them all the
 * mark is cleared; when it has not after --lost-ms, the consumer is parked
 * (park word set) and no producer holds a write open that began before
 * the mark (an MPSC claim the consumer must wait for), a committed record
 * is stuck behind a lost wake-up.
 */

/* Whether a producer's write that began by @ns is still open. */
static bool write_open_since(struct run *run, uint64_t ns)
{
	for (unsigned j = 0; j < run->topo->producers; j++) {
		uint64_t ws = atomic_load_explicit(&run->prod[j].write_start,
						   memory_order_relaxed);

		if (ws && ws <= ns)
			return true;
	}
	return false;
}

/* False, with why, when producer @i's records are stuck. */
static bool watch_producer(struct run *run, unsigned i, uint64_t now,
			   char *why, size_t size)
{
	const uint64_t lost_ns = run->opt->lost_ms * NSEC_PER_MSEC;
	struct mark *m = &run->marks[i];
	uint64_t committed, delivered, age;

	/* The ledger's counts: acquire loads of what each side noted. */
	committed = ledger_count_sent(&run->ledger, i);
	delivered = ledger_count_got(&run->ledger, i);
	if (m->ns && delivered >= m->seq)
		m->ns = 0;
	if (!m->ns) {
		if (committed > delivered) {
			m->seq = committed;
			m->ns = now;
		}
		return true;
	}
	age = now - m->ns;
	if (age > STALL_NS) {
		snprintf(why, size, "producer %u: record %" PRIu64
			 " undelivered for %.1f s", i, m->seq - 1, age / 1e9);
		return false;
	}
	if (age > lost_ns && park_word(run) != LULL_PARK_AWAKE &&
	    !failed(run) && !write_open_since(run, m->ns)) {
		snprintf(why, size, "LOST WAKE-UP: producer %u's record %"
			 PRIu64 " was committed over %.3f s ago and is not "
			 "delivered, while the consumer is parked", i,
			 m->seq - 1, age / 1e9);
		return false;
	}
	return true;
}

/* The watchdog's check, every tick: no producer's records are stuck. */
static bool watch_producers(void *arg, char *why, size_t size)
{
	struct run *run = arg;
	uint64_t now = now_ns();

	for (unsigned i = 0; i < run->topo->producers; i++)
		if (!watch_producer(run, i, now, why, size))
			return false;
	return true;
}

/* ------------------------------------------------------------------------
 * Running a configuration
 */

/*
 * After a failure: wake a consumer that waits for records to come.  The
 * producers have detached, which shut the ring down and woke it already;
 * a second stop, or an immediate shutdown, also drops what is left.
 */
static void kick_consumer(struct run *run)
{
	if (run->loop)
		lull_loop_stop(run->loop);
	lull_ring_shutdown(run->ring, LULL_SHUTDOWN_IMMEDIATE);
}

static int setup(struct run *run)
{
	struct lull_loop_config cfg = {
		.backend = run->be->backend,
		.safety_timeout_ns = SAFETY_NS,
		.coalesce_ns = run->be->spin_ns,
	};
	int ret;

	ret = lull_backend_supported(run->be->backend);
	if (ret < 0)
		return ret;
	ret = lull_ring_create(&run->ring, CAPACITY, run->topo->topology);
	if (ret < 0) {
		fail(run, "lull_ring_create: %s", lull_strerror(ret));
		return ret;
	}
	if (run->be->via == VIA_URING &&
	    setenv("LULL_BACKEND", lull_backend_name(run->be->backend), 1)) {
		fail(run, "setenv failed");
		return -ENOMEM;
	}
	if (run->be->via == VIA_LOOP) {
		ret = lull_loop_create(&run->loop, &cfg);
		if (ret == 0)
			ret = lull_loop_attach(run->loop, run->ring, on_record,
					       run, 64);
		if (ret < 0) {
			fail(run, "lull_loop_create/attach: %s",
			     lull_strerror(ret));
			return ret;
		}
	}
	return 0;
}

static void check_end(struct run *run, struct lull_ring_stats *st)
{
	int ret;

	for (unsigned i = 0; i < run->topo->producers; i++) {
		struct producer *p = &run->prod[i];
		uint64_t got = ledger_count_got(&run->ledger, i);

		if (got != p->quota)
			fail(run, "producer %u: %" PRIu64 " of %" PRIu64
			     " records delivered", i, got, p->quota);
	}
	if (!ledger_complete(&run->ledger))
		fail(run, "%s", ledger_why(&run->ledger));
	/*
	 * Every producer detached: after the last record, the poison, which
	 * a loop hands to its handler before its run returns (the stop, or
	 * the last detach, shut the ring down), and which a consumer of its
	 * own may have stopped short of; then -EPIPE.
	 */
	if (run->loop && run->poisons != 1)
		fail(run, "the loop returned after %u poison records",
		     run->poisons);
	if (!run->poisons) {
		ret = lull_ring_read(run->ring, on_record, run, 16);
		if (ret != 1 || run->poisons != 1)
			fail(run, "the read after the last record returned %d "
			     "(%s) with %u poison records, expected the "
			     "poison", ret, ret < 0 ? lull_strerror(ret) : "",
			     run->poisons);
	}
	ret = lull_ring_read(run->ring, on_record, run, 16);
	if (ret != -EPIPE)
		fail(run, "a read after the poison returned %d (%s), expected "
		     "-EPIPE", ret, lull_strerror(ret));
	lull_ring_stats(run->ring, st);
	if (st->safety_timeouts)
		fail(run, "%" PRIu64 " lost wake-ups counted by the safety "
		     "net", st->safety_timeouts);
	if (st->wakes > st->parks + st->park_cancels)
		fail(run, "%" PRIu64 " wake-ups for %" PRIu64 " parks "
		     "announced", st->wakes, st->parks + st->park_cancels);
	/*
	 * Each ping-pong record went to a consumer that had counted its park:
	 * unless something else woke it first (rare), its producer woke it.
	 */
	if (run->topo->pingpong && st->wakes < run->total - run->total / 10)
		fail(run, "a ping-pong of %" PRIu64 " records made only %"
		     PRIu64 " wake-ups: its records did not each end a park",
		     run->total, st->wakes);
	/*
	 * An asymmetric ring's parks switch between membarrier(2) and a
	 * fence alone with the traffic (lib/park.h): a ping-pong's one
	 * record a park keeps them fenced, and one mixed producer's single
	 * records and bursts of up to 16 make them switch both ways, which
	 * is what this run must have exercised.  With more producers their
	 * records may gather into parks of more than 4 records for a whole
	 * run (under ThreadSanitizer, 4 producers to a loop did), and a
	 * coalescing window gathers many windows' records into one park:
	 * those only print what they saw.
	 */
	if (!(run->ring->flags & LULL_REGION_ASYM_BARRIER) ||
	    (run->be->via == VIA_LOOP && run->be->spin_ns))
		return;
	if (run->topo->pingpong && run->fenced_records < run->total / 2)
		fail(run, "a ping-pong of %" PRIu64 " records read only %"
		     PRIu64 " while its parks fenced alone", run->total,
		     run->fenced_records);
	if (!run->topo->pingpong && run->topo->producers == 1 &&
	    (!run->fenced_records || !run->unfenced_records))
		fail(run, "the parks never switched: %" PRIu64 " records read "
		     "while they fenced alone, %" PRIu64 " while not",
		     run->fenced_records, run->unfenced_records);
}

/* Add a configuration to its lull backend's summary. */
static void tally(const struct run *run, const struct lull_ring_stats *st,
		  bool ok)
{
	struct tally *t = &tallies[run->be->backend];

	if (!ok) {
		t->failed++;
		return;
	}
	t->passed++;
	t->parks += st->parks;
	t->wakes += st->wakes;
	t->park_cancels += st->park_cancels;
	t->lost += st->safety_timeouts;
	if (run->topo->pingpong)
		t->pingpong += st->parks;
}

/*
 * Returns 1 when the configuration passed, 0 when it failed, -1 when its
 * backend is not available here (skipped).
 */
static int run_config(unsigned index, const struct options *opt,
		      unsigned passed_before, unsigned selected)
{
	struct run *run;
	struct lull_ring_stats st = { 0 };
	struct watchdog_watch watch = {
		.check = watch_producers,
		.report = watchdog_report,
		.tick_ms = WATCHDOG_TICK_MS,
	};
	uint64_t hunts = 0, hits = 0, elapsed;
	unsigned n, started = 0;
	char what[80];
	bool ok;
	int ret;

	run = aligned_alloc(LINE_PAIR, (sizeof(*run) + LINE_PAIR - 1) &
					       ~(size_t)(LINE_PAIR - 1));
	if (!run) {
		perror("stress_park");
		exit(2);
	}
	memset(run, 0, sizeof(*run));
	run->be = &backends[index / NR_TOPOS];
	run->topo = &topos[index % NR_TOPOS];
	run->opt = opt;
	run->mpsc = run->topo->topology == LULL_RING_MPSC;
	run->total = run->topo->pingpong
			     ? pingpong_records(run->be, opt->pingpong)
			     : opt->records;
	run->passed_before = passed_before;
	run->selected = selected;
	run->crng = opt->seed * 31 + index;
	n = run->topo->producers;
	snprintf(run->name, sizeof(run->name), "%s/%s", run->be->name,
		 run->topo->name);
	if (ledger_init(&run->ledger, n)) {
		perror("stress_park");
		exit(2);
	}

	ret = setup(run);
	if (ret < 0 && !failed(run)) {
		/* The backend is not available here: nothing to stress. */
		printf("SKIP %-32s %s\n", run->name, lull_strerror(ret));
		fflush(stdout);
		ledger_fini(&run->ledger);
		free(run);
		return -1;
	}
	if (!failed(run)) {
		pthread_barrier_init(&run->go, NULL, n + 1);
		for (unsigned i = 0; i < n; i++) {
			struct producer *p = &run->prod[i];

			p->run = run;
			p->id = i;
			p->quota = run->total / n + (i < run->total % n);
			p->rng = opt->seed ^ (0x51ed27ull * (index + 1)) ^
				 ((uint64_t)(i + 1) << 40);
		}
		run->start_ns = now_ns();
		/*
		 * The configuration's deadline, and every tick the producers'
		 * records: none stuck behind a lost wake-up.
		 */
		watch.ctx = run;
		snprintf(what, sizeof(what), "stress_park %s", run->name);
		ret = watchdog_watch(&run->watchdog, opt->deadline_s, what,
				     &watch);
		if (pthread_create(&run->consumer, NULL, consumer_main, run) ==
		    0) {
			run->consumer_started = true;
			started = 1;
		}
		for (unsigned i = 0; started && i < n; i++) {
			if (pthread_create(&run->prod[i].thread, NULL,
					   producer_main, &run->prod[i]))
				break;
			started++;
		}
		if (ret || started != n + 1) {
			fprintf(stderr, "stress_park: pthread_create failed\n");
			exit(2);
		}
		for (unsigned i = 0; i < n; i++)
			pthread_join(run->prod[i].thread, NULL);
		if (failed(run))
			kick_consumer(run);
		pthread_join(run->consumer, NULL);
		watchdog_stop(&run->watchdog);
		pthread_barrier_destroy(&run->go);
	}
	elapsed = now_ns() - run->start_ns;
	if (!failed(run))
		check_end(run, &st);
	ok = !failed(run);

	for (unsigned i = 0; i < n; i++) {
		hunts += atomic_load_explicit(&run->prod[i].hunts,
					      memory_order_relaxed);
		hits += atomic_load_explicit(&run->prod[i].hunt_hits,
					     memory_order_relaxed);
	}
	if (ok)
		printf("PASS %-32s %" PRIu64 " records, %u producer%s, %.2f s: "
		       "park cycles %" PRIu64 ", lost wake-ups %" PRIu64
		       "; wakes %" PRIu64 ", park_cancels %" PRIu64
		       ", idle_timeouts %" PRIu64 "; %" PRIu64 "/%" PRIu64
		       " park hunts hit; max latency %.2f ms; records read "
		       "while parks fenced %" PRIu64 ", not %" PRIu64 "\n",
		       run->name, run->total, n, n == 1 ? "" : "s",
		       elapsed / 1e9, st.parks, st.safety_timeouts, st.wakes,
		       st.park_cancels, st.idle_timeouts, hits, hunts,
		       run->max_latency_ns / 1e6, run->fenced_records,
		       run->unfenced_records);
	else
		printf("FAIL %-32s %s\n", run->name, run->msg);
	tally(run, &st, ok);
	if (!ok)
		print_state(run, stdout);
	fflush(stdout);

	if (run->loop)
		lull_loop_destroy(run->loop);
	if (run->ring)
		lull_ring_destroy(run->ring);
	unsetenv("LULL_BACKEND");
	ledger_fini(&run->ledger);
	free(run);
	return ok ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * Options
 */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stress_park [--records N] [--pingpong N] "
		"[--config NAME]... [--seed S]\n"
		"                   [--deadline SECONDS] [--lost-ms MS] "
		"[--pin]\n"
		"                   [--inject-lost-wake]\n"
		"  --records N     records per configuration, across its "
		"producers\n"
		"                  (default %llu; K and M suffixes)\n"
		"  --pingpong N    ping-pong park cycles per lull backend "
		"(default %u x\n"
		"                  --records)\n"
		"  --config NAME   BACKEND/TOPOLOGY, BACKEND or TOPOLOGY; "
		"repeatable\n"
		"                  backends: blocking, blocking-adaptive, "
		"own-uring-futex,\n"
		"                  own-uring-eventfd, loop-uring-futex, "
		"loop-uring-eventfd,\n"
		"                  loop-epoll, loop-coalesce\n"
		"                  topologies: spsc, mpsc1, mpsc2, mpsc4, "
		"mpsc8,\n"
		"                  pingpong-spsc, pingpong-mpsc\n"
		"  --seed S        seed of the producers' choices (default "
		"%llu)\n"
		"  --deadline S    fail a configuration that runs longer "
		"(default %u)\n"
		"  --lost-ms MS    a record undelivered this long while the "
		"consumer is\n"
		"                  parked is a lost wake-up (default %u)\n"
		"  --inject-lost-wake  check the watchdog: fake one lost "
		"wake-up per\n"
		"                  configuration; the run must fail\n"
		"  --pin           consumer on CPU 0, producers on the "
		"others\n",
		DEFAULT_RECORDS, PINGPONG_PER_RECORD, DEFAULT_SEED,
		DEFAULT_DEADLINE_S, DEFAULT_LOST_MS);
}

static bool parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	if (*end == 'k' || *end == 'K') {
		shift = 10;
		end++;
	} else if (*end == 'm' || *end == 'M') {
		shift = 20;
		end++;
	}
	if (*end || (shift && v > UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static _Noreturn void bad_usage(const char *what, const char *val)
{
	fprintf(stderr, "stress_park: bad %s '%s'\n", what, val ? val : "");
	usage(stderr);
	exit(2);
}

/* Select the configurations @val names; false when it names none. */
static bool select_configs(struct options *opt, const char *val)
{
	bool any = false;

	for (unsigned i = 0; i < NR_CONFIGS; i++) {
		char full[64];
		const char *b = backends[i / NR_TOPOS].name;
		const char *t = topos[i % NR_TOPOS].name;

		snprintf(full, sizeof(full), "%s/%s", b, t);
		if (!config_exists(i))
			continue;
		if (!strcmp(val, full) || !strcmp(val, b) || !strcmp(val, t)) {
			opt->selected[i] = true;
			any = true;
		}
	}
	return any;
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	bool any = false;
	uint64_t v;

	opt->records = DEFAULT_RECORDS;
	opt->seed = DEFAULT_SEED;
	opt->deadline_s = DEFAULT_DEADLINE_S;
	opt->lost_ms = DEFAULT_LOST_MS;
	for (int a = 1; a < argc; a++) {
		const char *name = argv[a], *val;
		char *eq = strchr(argv[a], '=');

		if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(name, "--inject-lost-wake")) {
			opt->inject_lost_wake = true;
			continue;
		}
		if (!strcmp(name, "--pin")) {
			opt->pin = true;
			continue;
		}
		if (eq) {
			*eq = '\0';
			val = eq + 1;
		} else {
			val = a + 1 < argc ? argv[++a] : NULL;
		}
		if (!strcmp(name, "--records")) {
			if (!parse_u64(val, &v) || !v)
				bad_usage(name, val);
			opt->records = v;
		} else if (!strcmp(name, "--pingpong")) {
			if (!parse_u64(val, &v) || !v)
				bad_usage(name, val);
			opt->pingpong = v;
		} else if (!strcmp(name, "--seed")) {
			if (!parse_u64(val, &v))
				bad_usage(name, val);
			opt->seed = v;
		} else if (!strcmp(name, "--deadline")) {
			if (!parse_u64(val, &v) || !v || v > 86400)
				bad_usage(name, val);
			opt->deadline_s = (unsigned)v;
		} else if (!strcmp(name, "--lost-ms")) {
			if (!parse_u64(val, &v) || !v || v > 600000)
				bad_usage(name, val);
			opt->lost_ms = (unsigned)v;
		} else if (!strcmp(name, "--config")) {
			if (!val || !select_configs(opt, val))
				bad_usage(name, val);
			any = true;
		} else {
			bad_usage("option", name);
		}
	}
	if (!any)
		for (unsigned i = 0; i < NR_CONFIGS; i++)
			opt->selected[i] = config_exists(i);
	if (!opt->pingpong)
		opt->pingpong = PINGPONG_PER_RECORD * opt->records;
}

int main(int argc, char **argv)
{
	struct options opt;
	unsigned passed = 0, failed_count = 0, selected = 0;
	int ret;
	uint64_t start = now_ns();

	memset(&opt, 0, sizeof(opt));
	parse_options(argc, argv, &opt);
	for (unsigned i = 0; i < NR_CONFIGS; i++)
		selected += opt.selected[i];
	printf("stress_park: lull %s, %" PRIu64 " records per configuration, "
	       "%" PRIu64 " ping-pong park cycles per backend, seed %" PRIu64
	       ", no safety net, lost wake-up after %u ms parked\n",
	       lull_version(), opt.records, opt.pingpong, opt.seed,
	       opt.lost_ms);
	fflush(stdout);
	for (unsigned i = 0; i < NR_CONFIGS; i++) {
		if (!opt.selected[i])
			continue;
		ret = run_config(i, &opt, passed, selected);
		if (ret > 0)
			passed++;
		else if (ret == 0)
			failed_count++;
	}
	for (unsigned b = 1; b < NR_LULL_BACKENDS; b++) {
		const struct tally *t = &tallies[b];

		if (!t->passed && !t->failed)
			continue;
		printf("backend %-13s %2u passed, %u failed: park cycles %"
		       PRIu64 " (%" PRIu64 " in ping-pong), lost wake-ups %"
		       PRIu64 "; wakes %" PRIu64 ", park_cancels %" PRIu64
		       "\n",
		       lull_backend_name((enum lull_backend)b), t->passed,
		       t->failed, t->parks, t->pingpong, t->lost, t->wakes,
		       t->park_cancels);
	}
	printf("stress_park: %.1f s in all\n", (now_ns() - start) / 1e9);
	printf("%u passed, %u failed\n", passed, failed_count);
	return failed_count ? 1 : 0;
}
