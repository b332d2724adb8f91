/* SPDX-License-Identifier: MIT */
/*
 * stress_shutdown.c - randomized stress test of how rings end: graceful,
 * immediate and fatal shutdowns, the last detach, and cancelled
 * thread-bound producers, racing live producers and every way of consuming.
 *
 * A plain-main program (ThreadSanitizer cannot run Criterion).  Each round
 * draws, from the seed and its own number, a configuration: the topology
 * (SPSC and MPSC alternate), a capacity from 256 bytes to 64 KiB, 1 to 4
 * producer threads (SPSC: 1), each bound to its thread or not, some leaving
 * early, some the target of pthread_cancel(); how the consumer reads
 * (lull_ring_read batches, peek/release, lull_ring_wait, its own io_uring on
 * futex or eventfd, or a lull_loop on uring-futex, uring-eventfd or epoll);
 * and how the ring ends (graceful, immediate or fatal shutdown, called by a
 * controller thread, by the consumer, by a producer, or by a signal handler
 * interrupting a producer; the last detach; pthread_cancel of the bound
 * producers; lull_loop_stop), sometimes followed by a second act (an
 * upgrade to immediate, a late fatal report, a second stop).  Producers
 * send records by write, writev, claim + commit and claim + abort until
 * their calls fail with -EPIPE.
 *
 * Every producer notes the outcome of each record it tried (committed,
 * refused with -EPIPE, aborted, claimed when its thread was cancelled, or
 * cut short inside a call by the cancellation).  The consumer checks, as
 * records arrive, their form and content and that each producer's records
 * come in order without duplicates or gaps, but for the aborted ones
 * (test/lib's ledger); then that the fatal record comes at
 * most once, only if a report returned 0, with its code, and right before
 * the poison; that the poison comes exactly once with nothing after it and
 * -EPIPE from every later read.  After the round, every record whose call
 * returned 0 was delivered and none whose call failed or was aborted was;
 * a call cut short may go either way.  Where an immediate shutdown was
 * requested, undelivered records may be discarded: each producer's
 * delivered records must then be a prefix of its committed ones.  Finally
 * no wake-up was lost (the safety_timeouts counter, which stays 0 unless
 * LULL_SAFETY_NET_MS turns the safety net on) and the ring tears down.
 *
 * The consumers park with lull's default, no safety net: a lost wake-up
 * leaves a parked consumer asleep for good, and a watchdog (test/lib's)
 * fails the run loudly, with the round's seed, number and configuration and
 * what each thread was doing, when a round takes longer than
 * --watchdog-seconds (a hang never stalls CI; the process aborts).  The
 * output counts, per group and per backend, the park cycles (the rings'
 * parks counters) and the lost wake-ups: 0 in a run that ends at all,
 * since a lost one ends it in the watchdog.
 *
 * Rounds are grouped by topology and consumer (24 groups).  Output: a
 * header, a line per failed round, a line per group, one summary line, a
 * line per backend, and last "N passed, M failed" over the groups.  Exit
 * status 0 only when every group passed.
 *
 * Size: 10000 rounds by default.  --rounds N sets the count; --records N
 * sets it to N / 1000 (a round sends at most a few thousand records, most
 * far fewer), so that scripts/run-tests.sh's TSAN_RECORDS scales it under
 * ThreadSanitizer like the other stress programs.  --seed S --round R
 * reruns one round's configuration (not its timing).  --mode and
 * --trigger restrict the draw.  --help lists the options.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <lull.h>

#include "../lib/ledger.h"
#include "../lib/threads.h"
#include "../lib/topo.h"

#define DEFAULT_ROUNDS 10000u
#define RECORDS_PER_ROUND 1000u
#define DEFAULT_SEED 1ull
#define DEFAULT_WATCHDOG 10u
#define MAX_PRODUCERS 4
/* Records one producer may try in a round; past it, it waits for the end. */
#define MAX_TRIES 4096u
#define STAMP_SIZE 16u
#define MAX_PAYLOAD 200u
#define BATCH_MAX 8u
#define URING_TAG 0x5354u
#define GOLDEN 0x9e3779b97f4a7c15ull

/* ------------------------------------------------------------------------
 * Random numbers: splitmix64, one stream per round and per producer
 */

static uint64_t rnd_next(uint64_t *s)
{
	uint64_t z = (*s += GOLDEN);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0. */
static uint32_t rnd_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(rnd_next(s) % n);
}

static bool rnd_chance(uint64_t *s, uint32_t one_in)
{
	return rnd_below(s, one_in) == 0;
}

/* ------------------------------------------------------------------------
 * Configurations
 */

enum mode {
	MODE_READ,
	MODE_PEEK,
	MODE_WAIT,
	MODE_URING_FUTEX,
	MODE_URING_EVENTFD,
	MODE_LOOP_FUTEX,
	MODE_LOOP_EVENTFD,
	MODE_LOOP_EPOLL,
	MODES
};

static const char *const mode_names[MODES] = {
	"read", "peek", "wait", "uring-futex", "uring-eventfd",
	"loop-futex", "loop-eventfd", "loop-epoll",
};

static bool mode_is_loop(enum mode m)
{
	return m >= MODE_LOOP_FUTEX;
}

static bool mode_is_uring(enum mode m)
{
	return m == MODE_URING_FUTEX || m == MODE_URING_EVENTFD;
}

/* The backend a consumer parks on; LULL_BACKEND_AUTO: it never parks. */
static enum lull_backend mode_backend(enum mode m)
{
	switch (m) {
	case MODE_WAIT:
		return LULL_BACKEND_BLOCKING;
	case MODE_URING_FUTEX:
	case MODE_LOOP_FUTEX:
		return LULL_BACKEND_URING_FUTEX;
	case MODE_URING_EVENTFD:
	case MODE_LOOP_EVENTFD:
		return LULL_BACKEND_URING_EVENTFD;
	case MODE_LOOP_EPOLL:
		return LULL_BACKEND_EPOLL;
	default:
		return LULL_BACKEND_AUTO;
	}
}

enum trigger {
	TRIG_GRACEFUL,
	TRIG_IMMEDIATE,
	TRIG_FATAL,
	TRIG_LAST_DETACH,
	TRIG_CANCEL,
	TRIG_LOOP_STOP, /* loops only */
	TRIGGERS
};

static const char *const trigger_names[TRIGGERS] = {
	"graceful", "immediate", "fatal", "last-detach", "cancel", "loop-stop",
};

/* Who calls the shutdown (for graceful, immediate, fatal, loop-stop). */
enum source {
	SRC_CONTROLLER,
	SRC_CONSUMER,
	SRC_PRODUCER,
	SRC_SIGNAL,
	SOURCES
};

static const char *const source_names[SOURCES] = {
	"a controller thread", "the consumer", "a producer",
	"a signal handler in a producer",
};

/* A second act after the first, by the controller. */
enum extra {
	EXTRA_NONE,
	EXTRA_IMMEDIATE,
	EXTRA_FATAL,
	EXTRA_SECOND_STOP, /* loops */
};

static const char *const extra_names[] = {
	"", ", then immediate", ", then a fatal report", ", then a second stop",
};

struct producer_cfg {
	bool bound;          /* LULL_PRODUCER_THREAD */
	bool cancel_target;  /* TRIG_CANCEL cancels it */
	bool pthread_exit;   /* a bound producer's thread ends by it */
	bool detach_by_hand; /* a bound producer detached by its thread */
	uint32_t quota;      /* records to commit, UINT32_MAX: until -EPIPE */
	uint32_t act_at;     /* SRC_PRODUCER: act after this many records */
	uint32_t cancel_at;  /* TRIG_CANCEL: cancelled after this many */
	uint64_t seed;
};

struct round_cfg {
	uint32_t round;
	uint64_t seed;
	unsigned topology;
	size_t capacity;
	unsigned nprod;
	enum mode mode;
	enum trigger trigger;
	enum source source;
	enum extra extra;
	uint32_t act_after;   /* records committed (or delivered) first */
	unsigned actor;       /* SRC_PRODUCER / SRC_SIGNAL: which producer */
	struct producer_cfg prod[MAX_PRODUCERS];
	int32_t fatal_code;
	char text[400];
};

struct options {
	char filters[400]; /* the --mode and --trigger options given */
	uint32_t rounds;
	uint32_t only_round; /* UINT32_MAX: all */
	uint64_t seed;
	unsigned watchdog_seconds;
	bool modes[MODES];
	bool triggers[TRIGGERS];
	bool verbose;
};

static bool mode_supported[MODES];

/* The topologies, in the order of the groups. */
static const char *const topology_names[] = { "spsc", "mpsc", "lanes" };

static unsigned topology_index(unsigned topology)
{
	return topology == LULL_RING_SPSC ? 0 : topology == LULL_RING_MPSC
							? 1
							: 2;
}

static void describe(struct round_cfg *c)
{
	size_t n;

	n = (size_t)snprintf(
		c->text, sizeof(c->text),
		"%s cap %zu, consumer %s, %s%s%s after %u records%s; "
		"producers:",
		topology_names[topology_index(c->topology)], c->capacity,
		mode_names[c->mode], trigger_names[c->trigger],
		c->trigger == TRIG_LAST_DETACH || c->trigger == TRIG_CANCEL
			? ""
			: " by ",
		c->trigger == TRIG_LAST_DETACH || c->trigger == TRIG_CANCEL
			? ""
			: source_names[c->source],
		c->act_after, extra_names[c->extra]);
	for (unsigned i = 0; i < c->nprod && n < sizeof(c->text); i++) {
		const struct producer_cfg *p = &c->prod[i];

		n += (size_t)snprintf(
			c->text + n, sizeof(c->text) - n, " [%u%s%s%s%s", i,
			p->bound ? " bound" : "",
			p->bound ? (p->pthread_exit ? " pthread_exit"
						    : " return")
				 : "",
			p->detach_by_hand ? " detach" : "",
			p->cancel_target ? " cancel" : "");
		if (n < sizeof(c->text) && p->quota != UINT32_MAX)
			n += (size_t)snprintf(c->text + n, sizeof(c->text) - n,
					      " quota %u", p->quota);
		if (n < sizeof(c->text))
			n += (size_t)snprintf(c->text + n, sizeof(c->text) - n,
					      "]");
	}
}

/* The configuration of round @round: a function of the seed alone. */
static void round_config(const struct options *opt, uint32_t round,
			 struct round_cfg *c)
{
	uint64_t s = opt->seed ^ (uint64_t)round * GOLDEN;
	int tries;

	memset(c, 0, sizeof(*c));
	c->round = round;
	c->seed = s;
	rnd_next(&s);
	c->capacity = (size_t)256 << rnd_below(&s, 9);
	/* SPSC, MPSC and LANES in turn; LANES with a lane per producer. */
	switch (round % 3) {
	case 0:
		c->topology = LULL_RING_SPSC;
		c->nprod = 1;
		break;
	case 1:
		c->topology = LULL_RING_MPSC;
		c->nprod = 1 + rnd_below(&s, MAX_PRODUCERS);
		break;
	default:
		c->nprod = 1 + rnd_below(&s, MAX_PRODUCERS);
		c->topology = LULL_RING_LANES(c->nprod);
		break;
	}
	for (tries = 0;; tries++) {
		c->mode = (enum mode)rnd_below(&s, MODES);
		if (opt->modes[c->mode] && mode_supported[c->mode])
			break;
		if (tries > 1000) { /* nothing selected is supported */
			c->mode = MODE_READ;
			break;
		}
	}
	for (tries = 0;; tries++) {
		c->trigger = (enum trigger)rnd_below(&s, TRIGGERS);
		if (c->trigger == TRIG_LOOP_STOP && !mode_is_loop(c->mode))
			continue;
		if (opt->triggers[c->trigger])
			break;
		if (tries > 1000) {
			c->trigger = TRIG_GRACEFUL;
			break;
		}
	}
	c->source = (enum source)rnd_below(&s, SOURCES);
	if (c->trigger == TRIG_LOOP_STOP && c->source == SRC_SIGNAL)
		c->source = SRC_CONTROLLER; /* lull_loop_stop from a handler
					       is the loop suite's */
	c->act_after = rnd_chance(&s, 8) ? 0 : rnd_below(&s, 600);
	c->actor = rnd_below(&s, c->nprod);
	if (rnd_chance(&s, 4)) {
		if (c->trigger == TRIG_LOOP_STOP)
			c->extra = rnd_chance(&s, 2) ? EXTRA_SECOND_STOP
						     : EXTRA_FATAL;
		else if (c->trigger == TRIG_GRACEFUL ||
			 c->trigger == TRIG_FATAL)
			c->extra = rnd_chance(&s, 2) ? EXTRA_IMMEDIATE
						     : EXTRA_FATAL;
		else if (c->trigger == TRIG_IMMEDIATE)
			c->extra = EXTRA_FATAL;
	}
	c->fatal_code = (int32_t)(round * 2654435761u) | 1;
	for (unsigned i = 0; i < c->nprod; i++) {
		struct producer_cfg *p = &c->prod[i];

		p->seed = rnd_next(&s);
		p->bound = rnd_chance(&s, 2);
		p->pthread_exit = rnd_chance(&s, 2);
		p->detach_by_hand = !p->bound || rnd_chance(&s, 4);
		p->quota = UINT32_MAX;
		p->act_at = rnd_below(&s, 300);
		switch (c->trigger) {
		case TRIG_LAST_DETACH:
			p->quota = rnd_below(&s, 400);
			break;
		case TRIG_CANCEL:
			/* Producer 0 at least is cancelled. */
			p->cancel_target = i == 0 || rnd_chance(&s, 2);
			if (p->cancel_target) {
				p->bound = true;
				p->detach_by_hand = false;
				p->cancel_at = rnd_below(&s, 300);
			} else {
				p->quota = rnd_below(&s, 400);
			}
			break;
		default:
			/* Some leave early (on SPSC: a last detach). */
			if (rnd_chance(&s, 6) &&
			    !(c->source == SRC_PRODUCER && i == c->actor))
				p->quota = rnd_below(&s, 200);
			break;
		}
	}
	describe(c);
}

/* ------------------------------------------------------------------------
 * Records: type 1 + producer; payload {seq, producer, len, check} + bytes
 */

struct rec_stamp {
	uint32_t seq;
	uint32_t producer;
	uint32_t len;
	uint32_t check;
};

static uint32_t rec_stamp_check(uint32_t seq, uint32_t producer, uint32_t len)
{
	return (seq * 2654435761u) ^ (producer * 40503u) ^ (len * 97u) ^
	       0xa5a5a5a5u;
}

static uint8_t rec_pattern_byte(uint32_t seq, uint32_t producer, size_t i)
{
	uint32_t x = seq * 2246822519u + producer * 3266489917u +
		     (uint32_t)i * 668265263u;

	x ^= x >> 15;
	return (uint8_t)(x * 2654435761u >> 24);
}

static void record_fill(uint8_t *buf, uint32_t seq, uint32_t producer,
			uint32_t len)
{
	struct rec_stamp st = { seq, producer, len,
			    rec_stamp_check(seq, producer, len) };

	memcpy(buf, &st, sizeof(st));
	for (size_t i = sizeof(st); i < len; i++)
		buf[i] = rec_pattern_byte(seq, producer, i);
}

/* ------------------------------------------------------------------------
 * A round
 */

/* What happened to each record a producer tried. */
enum outcome {
	OUT_NONE = 0,  /* not tried */
	OUT_INFLIGHT,  /* in a call that never returned (cancelled) */
	OUT_CLAIMED,   /* claimed; the thread died holding it */
	OUT_OK,        /* write or commit returned 0 */
	OUT_REFUSED,   /* write or claim returned -EPIPE */
	OUT_ABORTED,   /* claim aborted */
};

/* What a producer is doing, for the watchdog. */
enum doing {
	DOING_START,
	DOING_SEND,
	DOING_FULL,
	DOING_CLAIM,
	DOING_WAIT_END,
	DOING_DETACH,
	DOING_DONE,
};

static const char *const doing_names[] = {
	"starting", "sending", "retrying on a full ring", "holding a claim",
	"waiting for the end", "detaching", "done",
};

struct round;

struct producer {
	struct round *r;
	unsigned index;
	const struct producer_cfg *cfg;
	pthread_t thread;
	bool started;
	struct lull_producer *prod;
	int attach_ret;
	uint8_t outcome[MAX_TRIES];
	/* 1: record seq is not the last of the batch it was sent in */
	uint8_t batch_more[MAX_TRIES];
	uint32_t tries;
	char error[160];
	/* Read by other threads: atomics. */
	atomic_uint committed;
	atomic_int doing;
	atomic_bool done;
};

struct round {
	const struct round_cfg *cfg;
	struct lull_ring *ring;
	struct lull_loop *loop;
	struct producer prod[MAX_PRODUCERS];
	pthread_t controller;
	bool controller_started;
	pthread_barrier_t start;
	/* Set once the shutdown act happened (producers at MAX_TRIES wait). */
	atomic_bool acted;
	atomic_bool immediate; /* an immediate shutdown was requested */
	atomic_uint fatal_ok;  /* fatal reports that returned 0 */
	atomic_uint fatal_other; /* ... -EPIPE or -EALREADY */
	atomic_uint signal_acks;
	atomic_uint delivered;
	atomic_bool poisoned;
	atomic_int phase;
	/* The consumer's view. */
	struct ledger ledger; /* each producer's records: in order, once */
	uint8_t delivered_mark[MAX_PRODUCERS][MAX_TRIES];
	unsigned fatals;
	int fatal_index;
	unsigned poisons;
	unsigned records;
	struct lull_ring_stats stats; /* the ring's, at the round's end */
	uint64_t keep_at; /* the record last kept, to keep each once */
	bool kept;        /* the handler kept one in this batch */
	bool bailed;      /* a loop handler detached after a failure */
	uint64_t rng;
	char error[400];
	/* The consumer's own io_uring (MODE_URING_*). */
	struct io_uring *uring;
};

static void round_fail(struct round *r, const char *fmt, ...)
{
	va_list ap;

	if (r->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
}

static void producer_fail(struct producer *p, const char *fmt, ...)
{
	va_list ap;

	if (p->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(p->error, sizeof(p->error), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------------
 * The shutdown acts
 */

static void act_fatal(struct round *r)
{
	int ret = lull_ring_fatal(r->ring, r->cfg->fatal_code, "stress fatal");

	if (ret == 0)
		atomic_fetch_add(&r->fatal_ok, 1);
	else if (ret == -EPIPE || ret == -EALREADY)
		atomic_fetch_add(&r->fatal_other, 1);
	else
		atomic_fetch_add(&r->fatal_other, 1000);
}

/* The round's first act; any thread, and the signal handler. */
static void act_first(struct round *r)
{
	switch (r->cfg->trigger) {
	case TRIG_GRACEFUL:
		lull_ring_shutdown(r->ring, LULL_SHUTDOWN_GRACEFUL);
		break;
	case TRIG_IMMEDIATE:
		atomic_store(&r->immediate, true);
		lull_ring_shutdown(r->ring, LULL_SHUTDOWN_IMMEDIATE);
		break;
	case TRIG_FATAL:
		act_fatal(r);
		break;
	case TRIG_LOOP_STOP:
		lull_loop_stop(r->loop);
		break;
	default:
		break;
	}
	atomic_store_explicit(&r->acted, true, memory_order_release);
}

static void act_extra(struct round *r)
{
	switch (r->cfg->extra) {
	case EXTRA_IMMEDIATE:
		atomic_store(&r->immediate, true);
		lull_ring_shutdown(r->ring, LULL_SHUTDOWN_IMMEDIATE);
		break;
	case EXTRA_FATAL:
		act_fatal(r);
		break;
	case EXTRA_SECOND_STOP:
		atomic_store(&r->immediate, true);
		lull_loop_stop(r->loop);
		break;
	default:
		break;
	}
}

static struct round *_Atomic signal_round;

static void on_sigusr1(int signo)
{
	struct round *r = atomic_load(&signal_round);

	(void)signo;
	if (!r)
		return;
	act_first(r);
	atomic_fetch_add(&r->signal_acks, 1);
}

/* ------------------------------------------------------------------------
 * Producers
 */

static uint32_t payload_max(const struct round *r)
{
	uint32_t max = (uint32_t)(r->cfg->capacity / 8) - 8;

	return max < MAX_PAYLOAD ? max : MAX_PAYLOAD;
}

/*
 * A cancellation point, now and then, for the producers that will be
 * cancelled: pthread_testcancel(), or a short nanosleep(2).  Not the
 * latter under ThreadSanitizer: when a thread is cancelled inside one of
 * its interceptors (nanosleep is one), the release stores made by the TSD
 * destructors that run during the unwinding (here: the bound producer's
 * detach, which aborts its claim) are lost to it, and it reports races
 * between those and the consumer's acquires that are not there.
 */
static void maybe_cancel_point(struct producer *p, uint64_t *rng)
{
	if (!p->cfg->cancel_target)
		return;
	if (rnd_chance(rng, 4)) {
		pthread_testcancel();
#if !defined(__SANITIZE_THREAD__)
	} else if (rnd_chance(rng, 64)) {
		struct timespec ts = { 0, 1000 };

		nanosleep(&ts, NULL);
#endif
	}
}

/*
 * Send record @seq: one call, or a claim and its commit or abort.  Sets its
 * outcome.  Returns 0, -EAGAIN (nothing happened: try again), or the error
 * that ends the producer.
 */
static int send_one(struct producer *p, const struct topo *ops, uint32_t seq,
		    uint64_t *rng)
{
	uint8_t buf[MAX_PAYLOAD];
	uint32_t len = STAMP_SIZE + rnd_below(rng, payload_max(p->r) -
							   STAMP_SIZE + 1);
	int32_t type = (int32_t)(1 + p->index);
	uint32_t how = rnd_below(rng, 10);
	struct iovec iov[3];
	void *dst;
	int ret;

	record_fill(buf, seq, p->index, len);
	p->outcome[seq] = OUT_INFLIGHT;
	if (how < 6) {
		ret = ops->write(p->prod, type, buf, len);
	} else if (how < 7) {
		iov[0].iov_base = buf;
		iov[0].iov_len = 3;
		iov[1].iov_base = buf + 3;
		iov[1].iov_len = 0;
		iov[2].iov_base = buf + 3;
		iov[2].iov_len = len - 3;
		ret = ops->writev(p->prod, type, iov, 3);
	} else {
		ret = ops->claim(p->prod, type, len, &dst);
		if (ret == 0) {
			p->outcome[seq] = OUT_CLAIMED;
			atomic_store_explicit(&p->doing, DOING_CLAIM,
					      memory_order_relaxed);
			memcpy(dst, buf, len);
			maybe_cancel_point(p, rng);
			if (rnd_chance(rng, 3))
				sched_yield();
			p->outcome[seq] = OUT_INFLIGHT;
			if (how < 9) {
				ret = ops->commit(p->prod);
			} else {
				ret = ops->abort(p->prod);
				if (ret == 0) {
					p->outcome[seq] = OUT_ABORTED;
					/* Before the next record is sent. */
					ledger_sent(&p->r->ledger, p->index,
						    seq);
					ledger_drop(&p->r->ledger, p->index,
						    seq);
					atomic_store_explicit(
						&p->doing, DOING_SEND,
						memory_order_relaxed);
					return 0;
				}
			}
			atomic_store_explicit(&p->doing, DOING_SEND,
					      memory_order_relaxed);
			if (ret != 0) {
				producer_fail(p, "commit/abort of %u: %d", seq,
					      ret);
				return ret;
			}
		}
	}
	if (ret == 0) {
		p->outcome[seq] = OUT_OK;
		ledger_sent(&p->r->ledger, p->index, seq);
	} else if (ret == -EPIPE)
		p->outcome[seq] = OUT_REFUSED;
	else
		p->outcome[seq] = OUT_NONE;
	return ret;
}

/*
 * Send records @seq .. @seq + *countp - 1 as one batch (fewer when they
 * would not fit a batch): a write_batch, or a claim_batch that is filled,
 * sometimes held across a cancellation point, and committed or aborted
 * whole.  Sets every outcome the same, and *countp to how many records the
 * batch held.  Returns as send_one().
 */
static int send_batch(struct producer *p, const struct topo *ops,
		      uint32_t seq, uint32_t *countp, uint64_t *rng)
{
	struct round *r = p->r;
	uint8_t bufs[BATCH_MAX][MAX_PAYLOAD];
	struct lull_record recs[BATCH_MAX];
	struct lull_claim claims[BATCH_MAX];
	bool spsc = ops == &topo_spsc, by_claim = rnd_chance(rng, 2);
	uint32_t n = 0, total = 0, bound, len, outcome;
	int32_t type = (int32_t)(1 + p->index);
	int ret;

	/* What a batch may hold: the capacity less the largest record. */
	bound = (uint32_t)(r->cfg->capacity - r->cfg->capacity / 8);
	while (n < *countp) {
		len = STAMP_SIZE +
		      rnd_below(rng, payload_max(r) - STAMP_SIZE + 1);
		if (total + ((8 + len + 7) & ~7u) > bound)
			break;
		total += (8 + len + 7) & ~7u;
		record_fill(bufs[n], seq + n, p->index, len);
		recs[n] = (struct lull_record){ bufs[n], len, type };
		claims[n] = (struct lull_claim){ NULL, len, type };
		n++;
	}
	if (n < 2) {
		*countp = 1;
		return send_one(p, ops, seq, rng);
	}
	*countp = n;
	for (uint32_t i = 0; i < n; i++) {
		p->outcome[seq + i] = OUT_INFLIGHT;
		p->batch_more[seq + i] = i + 1 < n;
	}
	if (!by_claim) {
		ret = spsc ? lull_spsc_write_batch(p->prod, recs, n)
			   : lull_mpsc_write_batch(p->prod, recs, n);
	} else {
		ret = spsc ? lull_spsc_claim_batch(p->prod, claims, n)
			   : lull_mpsc_claim_batch(p->prod, claims, n);
		if (ret == 0) {
			for (uint32_t i = 0; i < n; i++) {
				memcpy(claims[i].data, bufs[i], claims[i].len);
				p->outcome[seq + i] = OUT_CLAIMED;
			}
			atomic_store_explicit(&p->doing, DOING_CLAIM,
					      memory_order_relaxed);
			maybe_cancel_point(p, rng);
			if (rnd_chance(rng, 3))
				sched_yield();
			for (uint32_t i = 0; i < n; i++)
				p->outcome[seq + i] = OUT_INFLIGHT;
			if (rnd_chance(rng, 5)) {
				ret = ops->abort(p->prod);
				outcome = OUT_ABORTED;
			} else {
				ret = ops->commit(p->prod);
				outcome = OUT_OK;
			}
			atomic_store_explicit(&p->doing, DOING_SEND,
					      memory_order_relaxed);
			if (ret != 0) {
				producer_fail(p, "batch commit/abort at %u: %d",
					      seq, ret);
				return ret;
			}
			for (uint32_t i = 0; i < n; i++) {
				p->outcome[seq + i] = (uint8_t)outcome;
				/* Before the next record is sent. */
				ledger_sent(&r->ledger, p->index, seq + i);
				if (outcome == OUT_ABORTED)
					ledger_drop(&r->ledger, p->index,
						    seq + i);
			}
			return 0;
		}
	}
	outcome = ret == 0 ? OUT_OK : ret == -EPIPE ? OUT_REFUSED : OUT_NONE;
	for (uint32_t i = 0; i < n; i++) {
		p->outcome[seq + i] = (uint8_t)outcome;
		if (outcome == OUT_NONE)
			p->batch_more[seq + i] = 0;
		if (outcome == OUT_OK)
			ledger_sent(&r->ledger, p->index, seq + i);
	}
	return ret;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct round *r = p->r;
	const struct producer_cfg *cfg = p->cfg;
	const struct topo *ops =
		r->cfg->topology == LULL_RING_SPSC ? &topo_spsc : &topo_mpsc;
	uint64_t rng = cfg->seed;
	uint32_t committed = 0, count;
	bool acted = false;
	int ret;

	p->attach_ret = lull_producer_attach(
		r->ring, cfg->bound ? LULL_PRODUCER_THREAD : 0, &p->prod);
	pthread_barrier_wait(&r->start);
	if (p->attach_ret < 0) {
		if (p->attach_ret != -EPIPE)
			producer_fail(p, "attach: %d", p->attach_ret);
		goto out;
	}
	atomic_store_explicit(&p->doing, DOING_SEND, memory_order_relaxed);
	while (committed < cfg->quota) {
		if (r->cfg->source == SRC_PRODUCER &&
		    r->cfg->actor == p->index && !acted &&
		    committed >= cfg->act_at &&
		    r->cfg->trigger != TRIG_LAST_DETACH &&
		    r->cfg->trigger != TRIG_CANCEL) {
			act_first(r);
			acted = true;
		}
		if (p->tries == MAX_TRIES) {
			/* Out of room in our log: stop until the end. */
			atomic_store(&p->doing, DOING_WAIT_END);
			while (!atomic_load_explicit(&r->acted,
						     memory_order_acquire)) {
				maybe_cancel_point(p, &rng);
				sched_yield();
			}
			break;
		}
		count = 1;
		if (MAX_TRIES - p->tries >= 2 && rnd_chance(&rng, 6)) {
			count = 2 + rnd_below(&rng, BATCH_MAX - 1);
			if (count > MAX_TRIES - p->tries)
				count = MAX_TRIES - p->tries;
			ret = send_batch(p, ops, p->tries, &count, &rng);
		} else {
			ret = send_one(p, ops, p->tries, &rng);
		}
		if (ret == -EAGAIN) {
			atomic_store_explicit(&p->doing, DOING_FULL,
					      memory_order_relaxed);
			maybe_cancel_point(p, &rng);
			sched_yield();
			continue;
		}
		atomic_store_explicit(&p->doing, DOING_SEND,
				      memory_order_relaxed);
		p->tries += count;
		if (ret == -EPIPE)
			break;
		if (ret < 0) {
			producer_fail(p, "record %u: %d", p->tries - 1, ret);
			break;
		}
		if (p->outcome[p->tries - 1] == OUT_OK) {
			committed += count;
			atomic_store_explicit(&p->committed, committed,
					      memory_order_release);
		}
		maybe_cancel_point(p, &rng);
	}
	atomic_store(&p->doing, DOING_DETACH);
	if (cfg->detach_by_hand) {
		ret = lull_producer_detach(p->prod);
		if (ret < 0)
			producer_fail(p, "detach: %d", ret);
	}
out:
	atomic_store(&p->doing, DOING_DONE);
	atomic_store_explicit(&p->done, true, memory_order_release);
	if (cfg->bound && cfg->pthread_exit)
		pthread_exit(NULL);
	return NULL;
}

/* A cancelled producer never marks itself done. */
static bool producer_over(struct producer *p)
{
	return atomic_load_explicit(&p->done, memory_order_acquire);
}

/* ------------------------------------------------------------------------
 * The controller
 */

static uint32_t total_committed(struct round *r)
{
	uint32_t n = 0;

	for (unsigned i = 0; i < r->cfg->nprod; i++)
		n += atomic_load_explicit(&r->prod[i].committed,
					  memory_order_acquire);
	return n;
}

static bool all_over(struct round *r)
{
	for (unsigned i = 0; i < r->cfg->nprod; i++)
		if (!producer_over(&r->prod[i]))
			return false;
	return true;
}

static void nap(long ns)
{
	struct timespec ts = { 0, ns };

	nanosleep(&ts, NULL);
}

static void spin_a_little(uint64_t *rng)
{
	uint32_t n = rnd_below(rng, 3000);

	for (volatile uint32_t i = 0; i < n; i++)
		;
}

static void *controller_main(void *arg)
{
	struct round *r = arg;
	const struct round_cfg *c = r->cfg;
	uint64_t rng = c->seed ^ 0xc0ffee;
	struct producer *p;

	pthread_barrier_wait(&r->start);
	switch (c->trigger) {
	case TRIG_LAST_DETACH:
		return NULL;
	case TRIG_CANCEL:
		for (unsigned i = 0; i < c->nprod; i++) {
			p = &r->prod[i];
			if (!p->cfg->cancel_target)
				continue;
			while (atomic_load(&p->committed) < p->cfg->cancel_at &&
			       !producer_over(p) && !atomic_load(&r->poisoned))
				nap(20000);
			spin_a_little(&rng);
			pthread_cancel(p->thread);
		}
		return NULL;
	default:
		break;
	}
	if (c->source == SRC_CONTROLLER || c->source == SRC_SIGNAL) {
		while (total_committed(r) < c->act_after && !all_over(r) &&
		       !atomic_load(&r->poisoned))
			nap(20000);
		spin_a_little(&rng);
		p = &r->prod[c->actor];
		if (c->source == SRC_SIGNAL && !producer_over(p) &&
		    pthread_kill(p->thread, SIGUSR1) == 0) {
			/* The handler may never run if the thread is ending. */
			for (int i = 0;
			     i < 2000 && !atomic_load(&r->signal_acks); i++)
				nap(100000);
		}
		if (!atomic_load(&r->signal_acks))
			act_first(r);
	} else {
		/* The consumer or a producer acts; wait for it. */
		while (!atomic_load_explicit(&r->acted, memory_order_acquire) &&
		       !atomic_load(&r->poisoned))
			nap(20000);
	}
	if (c->extra != EXTRA_NONE) {
		spin_a_little(&rng);
		if (rnd_chance(&rng, 2))
			nap(rnd_below(&rng, 200000));
		act_extra(r);
	}
	return NULL;
}

/* ------------------------------------------------------------------------
 * The consumer
 */

static void consumer_check_record(struct round *r,
				  const struct lull_record *rec)
{
	const struct round_cfg *c = r->cfg;
	struct rec_stamp st;
	const uint8_t *b = rec->data;

	if (r->poisons) {
		round_fail(r, "a record of type %d after the poison",
			   rec->type);
		return;
	}
	if (rec->type == LULL_TYPE_POISON) {
		if (rec->len != 0)
			round_fail(r, "poison of %u bytes", rec->len);
		r->poisons++;
		atomic_store(&r->poisoned, true);
		return;
	}
	if (rec->type == LULL_TYPE_FATAL) {
		const struct lull_fatal *f = rec->data;

		r->fatals++;
		r->fatal_index = (int)r->records;
		if (rec->len != 8 + strlen("stress fatal") ||
		    f->code != c->fatal_code ||
		    strcmp(f->message, "stress fatal") != 0)
			round_fail(r, "fatal record of %u bytes, code %d, '%s'",
				   rec->len, f->code, f->message);
		return;
	}
	if (r->fatals) {
		round_fail(r, "a record of type %d after the fatal record",
			   rec->type);
		return;
	}
	if (rec->type < 1 || rec->type > (int32_t)c->nprod ||
	    rec->len < STAMP_SIZE) {
		round_fail(r, "record of type %d, %u bytes", rec->type,
			   rec->len);
		return;
	}
	memcpy(&st, b, sizeof(st));
	if (st.producer != (uint32_t)rec->type - 1 || st.len != rec->len ||
	    st.check != rec_stamp_check(st.seq, st.producer, st.len) ||
	    st.seq >= MAX_TRIES) {
		round_fail(r, "record of type %d, %u bytes: bad stamp %u/%u/%u",
			   rec->type, rec->len, st.producer, st.seq, st.len);
		return;
	}
	for (size_t i = sizeof(st); i < rec->len; i++)
		if (b[i] != rec_pattern_byte(st.seq, st.producer, i)) {
			round_fail(r, "record %u of producer %u: byte %zu",
				   st.seq, st.producer, i);
			return;
		}
	if (!ledger_got(&r->ledger, st.producer, st.seq)) {
		round_fail(r, "%s", ledger_why(&r->ledger));
		return;
	}
	r->delivered_mark[st.producer][st.seq] = 1;
	r->records++;
	atomic_store_explicit(&r->delivered, r->records, memory_order_relaxed);
}

/* The consumer's act, when it is the one that shuts the ring down. */
static void consumer_maybe_act(struct round *r)
{
	const struct round_cfg *c = r->cfg;

	if (c->source != SRC_CONSUMER || c->trigger == TRIG_LAST_DETACH ||
	    c->trigger == TRIG_CANCEL ||
	    atomic_load_explicit(&r->acted, memory_order_relaxed))
		return;
	if (r->records >= c->act_after)
		act_first(r);
}

static int consumer_handler(const struct lull_record *rec, void *ctx)
{
	struct round *r = ctx;
	uint64_t id = (uint64_t)(uintptr_t)rec->data ^
		      ((uint64_t)r->records << 32);
	uint32_t pick = rnd_below(&r->rng, 64);

	/* After a failure, hand nothing more back: end every batch. */
	if (r->error[0] && !r->loop)
		return LULL_READ_KEEP;
	/* Keep a record now and then (once), to be handed it again. */
	if (pick == 0 && r->keep_at != id) {
		r->keep_at = id;
		r->kept = true;
		return LULL_READ_KEEP;
	}
	consumer_check_record(r, rec);
	consumer_maybe_act(r);
	if (r->loop && r->error[0] && !r->bailed) {
		/* Fail fast: a broken ring may never send its poison. */
		r->bailed = true;
		lull_loop_detach(r->loop, r->ring);
		lull_loop_stop(r->loop);
		return LULL_READ_STOP;
	}
	if (rec->type == LULL_TYPE_POISON && r->loop)
		lull_loop_stop(r->loop);
	return pick < 4 ? LULL_READ_STOP : LULL_READ_CONTINUE;
}

static void expect_epipe(struct round *r, int ret, const char *call)
{
	if (ret != -EPIPE)
		round_fail(r, "%s after the poison returned %d", call, ret);
}

static void consume_read(struct round *r)
{
	int ret;

	while (!r->poisons && !r->error[0]) {
		ret = lull_ring_read(r->ring, consumer_handler, r,
				     1 + rnd_below(&r->rng, 64));
		if (ret == -EAGAIN) {
			consumer_maybe_act(r);
			sched_yield();
		} else if (ret < 0) {
			round_fail(r, "lull_ring_read: %d", ret);
		}
	}
	expect_epipe(r, lull_ring_read(r->ring, consumer_handler, r, 4),
		     "lull_ring_read");
	expect_epipe(r, lull_ring_read(r->ring, consumer_handler, r, 1),
		     "lull_ring_read");
}

static void consume_peek(struct round *r)
{
	struct lull_record a, b;
	int ret;

	while (!r->poisons && !r->error[0]) {
		ret = lull_ring_peek(r->ring, &a);
		if (ret == -EAGAIN) {
			consumer_maybe_act(r);
			sched_yield();
			continue;
		}
		if (ret < 0) {
			round_fail(r, "lull_ring_peek: %d", ret);
			break;
		}
		if (rnd_chance(&r->rng, 4) &&
		    (lull_ring_peek(r->ring, &b) != 0 || a.data != b.data ||
		     a.len != b.len || a.type != b.type))
			round_fail(r, "a second peek differs");
		consumer_check_record(r, &a);
		consumer_maybe_act(r);
		if ((ret = lull_ring_release(r->ring)) != 0)
			round_fail(r, "lull_ring_release: %d", ret);
	}
	expect_epipe(r, lull_ring_peek(r->ring, &a), "lull_ring_peek");
	expect_epipe(r, lull_ring_read(r->ring, consumer_handler, r, 4),
		     "lull_ring_read");
}

static void consume_wait(struct round *r)
{
	int64_t timeout;
	int ret;

	while (!r->poisons && !r->error[0]) {
		timeout = rnd_chance(&r->rng, 2)
				  ? -1
				  : (int64_t)rnd_below(&r->rng, 2000000);
		ret = lull_ring_wait(r->ring, timeout);
		if (ret == -ETIMEDOUT && timeout >= 0) {
			consumer_maybe_act(r);
			continue;
		}
		if (ret < 0) {
			round_fail(r, "lull_ring_wait: %d", ret);
			break;
		}
		ret = lull_ring_read(r->ring, consumer_handler, r,
				     1 + rnd_below(&r->rng, 64));
		if (ret < 0 && ret != -EAGAIN)
			round_fail(r, "lull_ring_read after a wait: %d", ret);
	}
	expect_epipe(r, lull_ring_wait(r->ring, -1), "lull_ring_wait");
	expect_epipe(r, lull_ring_read(r->ring, consumer_handler, r, 4),
		     "lull_ring_read");
}

static void consume_uring(struct round *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	bool ours;
	int ret;

	setenv("LULL_BACKEND",
	       r->cfg->mode == MODE_URING_FUTEX ? "uring-futex"
						 : "uring-eventfd",
	       1);
	ret = lull_uring_park_arm(r->ring, r->uring, URING_TAG);
	while ((ret == 1 || (ret >= 0 && r->kept)) && !r->error[0]) {
		r->kept = false;
		ret = lull_uring_park_drain(r->ring, r->uring, consumer_handler,
					    r, 1 + rnd_below(&r->rng, 64));
		if (r->poisons)
			break;
	}
	if (ret < 0 && !(ret == -EPIPE && r->poisons))
		round_fail(r, "arming the park: %d", ret);
	while (!r->poisons && !r->error[0]) {
		ret = io_uring_submit_and_wait(r->uring, 1);
		if (ret < 0 && ret != -EINTR) {
			round_fail(r, "io_uring_submit_and_wait: %d", ret);
			break;
		}
		seen = 0;
		ours = false;
		io_uring_for_each_cqe(r->uring, head, cqe) {
			seen++;
			if (lull_uring_park_cqe(r->ring, cqe) == 1)
				ours = true;
		}
		io_uring_cq_advance(r->uring, seen);
		if (!ours)
			continue;
		/*
		 * A drain that ends at a kept record returns without arming
		 * the park again (and says nothing): drain again, or sleep
		 * for good.
		 */
		do {
			r->kept = false;
			ret = lull_uring_park_drain(r->ring, r->uring,
						    consumer_handler, r,
						    1 + rnd_below(&r->rng, 64));
		} while (r->kept && ret >= 0 && !r->poisons && !r->error[0]);
		if (ret < 0 && !(ret == -EPIPE && r->poisons))
			round_fail(r, "lull_uring_park_drain: %d", ret);
		consumer_maybe_act(r);
	}
	expect_epipe(r,
		     lull_uring_park_drain(r->ring, r->uring, consumer_handler,
					   r, 8),
		     "lull_uring_park_drain");
}

static void consume_loop(struct round *r)
{
	int ret = lull_loop_run(r->loop);

	if (ret != 0)
		round_fail(r, "lull_loop_run: %d", ret);
	if (!r->poisons)
		round_fail(r, "lull_loop_run returned without the poison");
	if (r->bailed)
		return;
	expect_epipe(r, lull_ring_read(r->ring, consumer_handler, r, 4),
		     "lull_ring_read after the loop");
	expect_epipe(r, lull_ring_wait(r->ring, 0),
		     "lull_ring_wait after the loop");
}

/* ------------------------------------------------------------------------
 * The watchdog
 */

enum phase {
	PHASE_SETUP,
	PHASE_CONSUMING,
	PHASE_JOINING,
	PHASE_TEARDOWN,
	PHASE_VERIFYING,
};

static const char *const phase_names[] = {
	"setting up", "consuming", "joining threads", "tearing down",
	"verifying",
};

#define GROUPS (3 * MODES)

struct group {
	uint32_t rounds;  /* scheduled */
	uint32_t run;
	uint32_t failed;
	uint64_t records;
	uint64_t parks, lost; /* park cycles; lost wake-ups counted */
	uint32_t by_trigger[TRIGGERS];
};

struct run_state {
	const struct options *opt;
	struct group groups[GROUPS];
	/* For the watchdog: the round running, since when, and a count
	 * that moves as each round begins and as it ends. */
	struct round *_Atomic current;
	_Atomic uint64_t round_started_ms;
	_Atomic uint64_t rounds_moved;
};

static unsigned group_of(const struct round_cfg *c)
{
	return topology_index(c->topology) * MODES + (unsigned)c->mode;
}

static void group_name(unsigned g, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", topology_names[g / MODES],
		 mode_names[g % MODES]);
}

static void print_groups(const struct run_state *rs, bool final,
			 unsigned hung_group)
{
	unsigned passed = 0, failed = 0;
	char name[40];

	for (unsigned g = 0; g < GROUPS; g++) {
		const struct group *gr = &rs->groups[g];
		bool ok = gr->failed == 0 && gr->run == gr->rounds &&
			  g != hung_group;

		if (!gr->rounds)
			continue;
		group_name(g, name, sizeof(name));
		printf("%-18s %5u rounds%s, %u failed, %8" PRIu64
		       " records, park cycles %7" PRIu64 ", lost wake-ups %"
		       PRIu64 "; by trigger g/i/f/d/c/s %u/%u/%u/%u/%u/%u\n",
		       name, gr->run,
		       gr->run == gr->rounds ? "" : " (not all run)",
		       gr->failed, gr->records, gr->parks, gr->lost,
		       gr->by_trigger[0],
		       gr->by_trigger[1], gr->by_trigger[2], gr->by_trigger[3],
		       gr->by_trigger[4], gr->by_trigger[5]);
		if (ok)
			passed++;
		else
			failed++;
	}
	for (enum lull_backend b = LULL_BACKEND_URING_FUTEX;
	     b <= LULL_BACKEND_EPOLL; b++) {
		uint64_t rounds = 0, parks = 0, lost = 0;

		for (unsigned g = 0; g < GROUPS; g++) {
			if (mode_backend((enum mode)(g % MODES)) != b)
				continue;
			rounds += rs->groups[g].run;
			parks += rs->groups[g].parks;
			lost += rs->groups[g].lost;
		}
		if (rounds)
			printf("backend %-13s %5" PRIu64 " rounds, park cycles "
			       "%" PRIu64 ", lost wake-ups %" PRIu64 "\n",
			       lull_backend_name(b), rounds, parks, lost);
	}
	(void)final;
	printf("%u passed, %u failed\n", passed, failed);
	fflush(stdout);
}

/* What the watchdog sees move: a round beginning or ending. */
static uint64_t rounds_moved(void *arg)
{
	struct run_state *rs = arg;

	return atomic_load(&rs->rounds_moved);
}

/* A round ran past --watchdog-seconds: how to rerun it, where it stood. */
static void watchdog_report(void *arg)
{
	struct run_state *rs = arg;
	struct round *r = atomic_load_explicit(&rs->current,
					       memory_order_acquire);
	const struct round_cfg *c;

	if (!r) {
		printf("HUNG between rounds\n");
		print_groups(rs, true, GROUPS);
		return;
	}
	c = r->cfg;
	printf("HUNG round %u (--seed %" PRIu64 " --round %u%s) after %" PRIu64
	       " ms, %s: %s\n",
	       c->round, rs->opt->seed, c->round, rs->opt->filters,
	       now_ms() - atomic_load(&rs->round_started_ms),
	       phase_names[atomic_load(&r->phase)], c->text);
	printf("  consumer: %u records, poison %s, first act %s\n",
	       atomic_load(&r->delivered),
	       atomic_load(&r->poisoned) ? "seen" : "not seen",
	       atomic_load(&r->acted) ? "done" : "not done");
	for (unsigned i = 0; i < c->nprod; i++)
		printf("  producer %u: %u committed, %s\n", i,
		       atomic_load(&r->prod[i].committed),
		       doing_names[atomic_load(&r->prod[i].doing)]);
	print_groups(rs, true, group_of(c));
}

/* ------------------------------------------------------------------------
 * Running and checking a round
 */

static void verify(struct round *r)
{
	const struct round_cfg *c = r->cfg;
	bool discard = atomic_load(&r->immediate);
	unsigned fatal_ok = atomic_load(&r->fatal_ok);

	for (unsigned i = 0; i < c->nprod; i++) {
		struct producer *p = &r->prod[i];
		uint32_t batch_start = 0, batch_got = 0;
		bool gap = false;

		if (p->error[0])
			round_fail(r, "producer %u: %s", i, p->error);
		/* A batch arrives whole or not at all, discarding included. */
		for (uint32_t seq = 0; seq < MAX_TRIES; seq++) {
			batch_got += r->delivered_mark[i][seq];
			if (p->batch_more[seq])
				continue;
			if (batch_got && batch_got != seq - batch_start + 1)
				round_fail(r, "producer %u: %u of the %u "
					      "records of the batch at %u "
					      "arrived",
					   i, batch_got,
					   seq - batch_start + 1,
					   batch_start);
			batch_start = seq + 1;
			batch_got = 0;
		}
		for (uint32_t seq = 0; seq < MAX_TRIES; seq++) {
			bool got = r->delivered_mark[i][seq];

			switch (p->outcome[seq]) {
			case OUT_OK:
				if (!got && !discard)
					round_fail(r, "producer %u: record %u "
						      "returned 0 but never "
						      "arrived",
						   i, seq);
				if (got && gap)
					round_fail(r, "producer %u: record %u "
						      "arrived after a "
						      "discarded one",
						   i, seq);
				if (!got)
					gap = true;
				break;
			case OUT_INFLIGHT:
				break;
			case OUT_NONE:
				if (got)
					round_fail(r, "producer %u: record %u "
						      "was never sent",
						   i, seq);
				break;
			default:
				if (got)
					round_fail(r, "producer %u: record %u "
						      "arrived, but its call "
						      "%s",
						   i, seq,
						   p->outcome[seq] ==
								   OUT_REFUSED
							   ? "failed"
						   : p->outcome[seq] ==
								   OUT_ABORTED
							   ? "was aborted"
							   : "was cut short "
							     "holding a claim");
				break;
			}
		}
	}
	if (r->poisons != 1)
		round_fail(r, "%u poison records", r->poisons);
	if (atomic_load(&r->fatal_other) >= 1000)
		round_fail(r, "lull_ring_fatal returned an unexpected error");
	if (fatal_ok > 1)
		round_fail(r, "%u fatal reports returned 0", fatal_ok);
	if (r->fatals != fatal_ok)
		round_fail(r, "%u fatal records for %u successful reports",
			   r->fatals, fatal_ok);
	if (r->fatals && r->fatal_index != (int)r->records)
		round_fail(r, "the fatal record is not just before the poison");
}

static int setup_consumer(struct round *r, struct io_uring *uring)
{
	const struct round_cfg *c = r->cfg;
	struct lull_loop_config cfg = { 0 };
	int ret;

	if (mode_is_uring(c->mode)) {
		r->uring = uring;
	} else if (mode_is_loop(c->mode)) {
		cfg.backend = c->mode == MODE_LOOP_FUTEX
				      ? LULL_BACKEND_URING_FUTEX
			      : c->mode == MODE_LOOP_EVENTFD
				      ? LULL_BACKEND_URING_EVENTFD
				      : LULL_BACKEND_EPOLL;
		ret = lull_loop_create(&r->loop, &cfg);
		if (ret < 0)
			return ret;
		ret = lull_loop_attach(r->loop, r->ring, consumer_handler, r,
				       1 + rnd_below(&r->rng, 64));
		if (ret < 0)
			return ret;
	}
	return 0;
}

static void teardown_consumer(struct round *r)
{
	struct io_uring_cqe *cqe;
	int ret;

	if (r->loop) {
		ret = lull_loop_destroy(r->loop);
		if (ret < 0)
			round_fail(r, "lull_loop_destroy: %d", ret);
		r->loop = NULL;
	}
	if (r->uring) {
		lull_uring_park_cancel(r->ring, r->uring);
		io_uring_submit(r->uring);
		while (lull_ring_destroy(r->ring) == -EBUSY) {
			ret = io_uring_wait_cqe(r->uring, &cqe);
			if (ret < 0) {
				round_fail(r, "waiting for the park's CQEs: %d",
					   ret);
				return;
			}
			lull_uring_park_cqe(r->ring, cqe);
			io_uring_cqe_seen(r->uring, cqe);
		}
		r->ring = NULL;
		return;
	}
	ret = lull_ring_destroy(r->ring);
	if (ret < 0)
		round_fail(r, "lull_ring_destroy: %d", ret);
	r->ring = NULL;
}

static bool run_round(struct run_state *rs, struct round *r,
		      const struct round_cfg *c, struct io_uring *uring)
{
	struct lull_ring_stats st;
	int ret;

	memset(r, 0, sizeof(*r));
	r->cfg = c;
	r->rng = c->seed ^ 0xabcdef;
	r->fatal_index = -1;
	atomic_store(&r->phase, PHASE_SETUP);
	atomic_store(&rs->round_started_ms, now_ms());
	atomic_store_explicit(&rs->current, r, memory_order_release);
	atomic_fetch_add(&rs->rounds_moved, 1);
	if (ledger_init(&r->ledger, c->nprod)) {
		fprintf(stderr, "ledger_init: out of memory\n");
		exit(2);
	}

	ret = lull_ring_create(&r->ring, c->capacity, c->topology);
	if (ret < 0) {
		round_fail(r, "lull_ring_create: %d", ret);
		return false;
	}
	ret = setup_consumer(r, uring);
	if (ret < 0) {
		round_fail(r, "setting up the consumer: %d", ret);
		return false;
	}
	atomic_store(&signal_round, r);
	pthread_barrier_init(&r->start, NULL, c->nprod + 1);
	for (unsigned i = 0; i < c->nprod; i++) {
		struct producer *p = &r->prod[i];

		p->r = r;
		p->index = i;
		p->cfg = &c->prod[i];
		if (pthread_create(&p->thread, NULL, producer_main, p) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			exit(2);
		}
		p->started = true;
	}
	if (pthread_create(&r->controller, NULL, controller_main, r) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		exit(2);
	}
	r->controller_started = true;

	atomic_store(&r->phase, PHASE_CONSUMING);
	switch (c->mode) {
	case MODE_READ:
		consume_read(r);
		break;
	case MODE_PEEK:
		consume_peek(r);
		break;
	case MODE_WAIT:
		consume_wait(r);
		break;
	case MODE_URING_FUTEX:
	case MODE_URING_EVENTFD:
		consume_uring(r);
		break;
	default:
		consume_loop(r);
		break;
	}
	/* Let any producer waiting for the act go, even after a failure. */
	atomic_store_explicit(&r->acted, true, memory_order_release);
	/*
	 * After a failure the consumer stopped reading: end the ring, so
	 * that producers retrying on a full one see -EPIPE and the round
	 * reports the failure instead of hanging until the watchdog.
	 */
	if (r->error[0])
		lull_ring_shutdown(r->ring, LULL_SHUTDOWN_IMMEDIATE);

	atomic_store(&r->phase, PHASE_JOINING);
	pthread_join(r->controller, NULL);
	for (unsigned i = 0; i < c->nprod; i++)
		pthread_join(r->prod[i].thread, NULL);
	pthread_barrier_destroy(&r->start);
	atomic_store(&signal_round, NULL);

	atomic_store(&r->phase, PHASE_TEARDOWN);
	lull_ring_stats(r->ring, &st);
	r->stats = st;
	if (st.safety_timeouts)
		round_fail(r, "%" PRIu64 " lost wake-ups", st.safety_timeouts);
	teardown_consumer(r);

	atomic_store(&r->phase, PHASE_VERIFYING);
	if (!r->error[0])
		verify(r);
	return !r->error[0];
}

/* ------------------------------------------------------------------------
 * Options and main
 */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stress_shutdown [--rounds N | --records N] [--seed S] "
		"[--round R]\n"
		"                       [--mode NAME]... [--trigger NAME]... "
		"[--watchdog-seconds S] [--verbose]\n"
		"  --rounds N            rounds to run (default %u)\n"
		"  --records N           rounds = N / %u, at least 1 (the "
		"scale of run-tests.sh's\n"
		"                        TSAN_RECORDS; a round sends at most "
		"a few thousand records)\n"
		"  --seed S              the seed of every round's "
		"configuration (default %llu)\n"
		"  --round R             run only round R of that seed\n"
		"  --mode NAME           draw consumers only from these: read, "
		"peek, wait,\n"
		"                        uring-futex, uring-eventfd, "
		"loop-futex, loop-eventfd, loop-epoll\n"
		"  --trigger NAME        draw endings only from these: "
		"graceful, immediate, fatal,\n"
		"                        last-detach, cancel, loop-stop\n"
		"  --watchdog-seconds S  fail when a round takes longer than "
		"S s (default %u)\n"
		"  --verbose             print every round's configuration\n",
		DEFAULT_ROUNDS, RECORDS_PER_ROUND,
		(unsigned long long)DEFAULT_SEED, DEFAULT_WATCHDOG);
}

static int parse_name(const char *v, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i]))
			return i;
	return -1;
}

static void append_filter(struct options *opt, const char *name,
			  const char *v)
{
	size_t n = strlen(opt->filters);

	snprintf(opt->filters + n, sizeof(opt->filters) - n, " %s %s", name,
		 v);
}

static void parse(int argc, char **argv, struct options *opt)
{
	bool any_mode = false, any_trigger = false;
	char *end;

	memset(opt, 0, sizeof(*opt));
	opt->rounds = DEFAULT_ROUNDS;
	opt->only_round = UINT32_MAX;
	opt->seed = DEFAULT_SEED;
	opt->watchdog_seconds = DEFAULT_WATCHDOG;
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned long long n = 0;
		int k;

		if (!strcmp(name, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(name, "--verbose")) {
			opt->verbose = true;
			continue;
		}
		if (!v) {
			usage(stderr);
			exit(2);
		}
		i++;
		if (!strcmp(name, "--mode")) {
			if ((k = parse_name(v, mode_names, MODES)) < 0) {
				usage(stderr);
				exit(2);
			}
			opt->modes[k] = any_mode = true;
			append_filter(opt, name, v);
			continue;
		}
		if (!strcmp(name, "--trigger")) {
			if ((k = parse_name(v, trigger_names, TRIGGERS)) < 0) {
				usage(stderr);
				exit(2);
			}
			opt->triggers[k] = any_trigger = true;
			append_filter(opt, name, v);
			continue;
		}
		errno = 0;
		n = strtoull(v, &end, 0);
		if (errno || *end || end == v) {
			usage(stderr);
			exit(2);
		}
		if (!strcmp(name, "--rounds") && n > 0 && n <= UINT32_MAX) {
			opt->rounds = (uint32_t)n;
		} else if (!strcmp(name, "--records")) {
			n /= RECORDS_PER_ROUND;
			opt->rounds = (uint32_t)(n < 1 ? 1
					       : n > UINT32_MAX ? UINT32_MAX
								 : n);
		} else if (!strcmp(name, "--seed")) {
			opt->seed = n;
		} else if (!strcmp(name, "--round") && n < UINT32_MAX) {
			opt->only_round = (uint32_t)n;
		} else if (!strcmp(name, "--watchdog-seconds") && n > 0 &&
			   n < 100000) {
			opt->watchdog_seconds = (unsigned)n;
		} else {
			usage(stderr);
			exit(2);
		}
	}
	for (int m = 0; m < MODES; m++)
		opt->modes[m] |= !any_mode;
	for (int t = 0; t < TRIGGERS; t++)
		opt->triggers[t] |= !any_trigger;
}

static void probe_modes(void)
{
	for (int m = 0; m < MODES; m++)
		mode_supported[m] = true;
	if (lull_backend_supported(LULL_BACKEND_URING_FUTEX) < 0)
		mode_supported[MODE_URING_FUTEX] =
			mode_supported[MODE_LOOP_FUTEX] = false;
	if (lull_backend_supported(LULL_BACKEND_URING_EVENTFD) < 0)
		mode_supported[MODE_URING_EVENTFD] =
			mode_supported[MODE_LOOP_EVENTFD] = false;
}

int main(int argc, char **argv)
{
	static struct round round_state; /* large: not on the stack */
	struct run_state rs = { 0 };
	struct watchdog_watch watch = {
		.progress = rounds_moved,
		.report = watchdog_report,
		.ctx = &rs,
	};
	struct watchdog wd;
	struct options opt;
	struct round_cfg cfg;
	struct io_uring uring;
	struct sigaction sa;
	bool have_uring;
	uint32_t first, last, failed_rounds = 0, shown = 0;
	uint64_t start = now_ms(), records = 0;
	unsigned groups_failed = 0;

	parse(argc, argv, &opt);
	rs.opt = &opt;
	probe_modes();
	have_uring = io_uring_queue_init(8, &uring, 0) == 0;
	if (!have_uring)
		mode_supported[MODE_URING_FUTEX] =
			mode_supported[MODE_URING_EVENTFD] = false;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	first = opt.only_round == UINT32_MAX ? 0 : opt.only_round;
	last = opt.only_round == UINT32_MAX ? opt.rounds : opt.only_round + 1;
	for (uint32_t n = first; n < last; n++) {
		round_config(&opt, n, &cfg);
		rs.groups[group_of(&cfg)].rounds++;
	}
	printf("stress_shutdown: lull %s, rounds %u..%u, seed %" PRIu64
	       ", watchdog %u s%s%s\n",
	       lull_version(), first, last - 1, opt.seed,
	       opt.watchdog_seconds,
	       mode_supported[MODE_URING_FUTEX] ? ""
						 : "; no io_uring futex here",
	       mode_supported[MODE_URING_EVENTFD] ? "" : "; no io_uring here");
	fflush(stdout);
	/* A round that runs past --watchdog-seconds is hung. */
	watch.stall_s = opt.watchdog_seconds;
	if (watchdog_watch(&wd, 0, "stress_shutdown", &watch) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 2;
	}
	for (uint32_t n = first; n < last; n++) {
		struct group *g;
		bool ok;

		round_config(&opt, n, &cfg);
		if (opt.verbose) {
			printf("round %u: %s\n", n, cfg.text);
			fflush(stdout);
		}
		ok = run_round(&rs, &round_state, &cfg,
			       have_uring ? &uring : NULL);
		atomic_store_explicit(&rs.current, NULL, memory_order_release);
		atomic_fetch_add(&rs.rounds_moved, 1);
		ledger_fini(&round_state.ledger);
		g = &rs.groups[group_of(&cfg)];
		g->run++;
		g->records += round_state.records;
		g->parks += round_state.stats.parks;
		g->lost += round_state.stats.safety_timeouts;
		g->by_trigger[cfg.trigger]++;
		records += round_state.records;
		if (!ok) {
			g->failed++;
			failed_rounds++;
			if (shown++ < 20)
				printf("FAIL round %u (--seed %" PRIu64
				       " --round %u%s): %s: %s\n",
				       n, opt.seed, n, opt.filters, cfg.text,
				       round_state.error);
			fflush(stdout);
		}
	}
	watchdog_stop(&wd);
	for (unsigned g = 0; g < GROUPS; g++)
		groups_failed += rs.groups[g].failed != 0;
	printf("stress_shutdown: %u rounds in %.1f s, %" PRIu64
	       " records delivered, %u rounds failed in %u groups\n",
	       last - first, (double)(now_ms() - start) / 1000, records,
	       failed_rounds, groups_failed);
	print_groups(&rs, true, GROUPS);
	if (have_uring)
		io_uring_queue_exit(&uring);
	return failed_rounds ? 1 : 0;
}
