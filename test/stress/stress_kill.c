/* SPDX-License-Identifier: MIT */
/*
 * stress_kill.c - the test that kills: producer processes of a shared ring
 * (lull_ring_create_shared()) die by SIGKILL at random points, and the
 * consumer must deliver everything each had committed, nothing torn,
 * duplicated, reordered or aborted, then one LULL_TYPE_DEATH record per
 * dead producer, and keep the ring usable for new producers or close it
 * (poison, then -EPIPE) exactly when the last one is gone.
 *
 * A plain-main program (no Criterion; it also runs under ThreadSanitizer).
 * The consumer is this process's only thread: it forks the producers (a
 * fork from one thread is clean), parks in lull_ring_wait() with a bound,
 * reads with lull_ring_read(), and between reads drives the round's plan:
 * the kills, the commands, the new producers.
 *
 * Each round draws its configuration from the seed and its own number:
 *   - the topology, in turn: SPSC (one producer; a successor process is
 *     forked once it runs and spins on lull_producer_attach()'s -EBUSY,
 *     so that it takes the lane as soon as the consumer frees it: it may
 *     win the race with the close the first producer's end causes (the
 *     ring goes on with it), or lose it (-EPIPE at attach, or its writes
 *     fail with -EPIPE: the ring was closing), both as documented), MPSC
 *     (2-4 producers) and LANES(4) (2-4 producers);
 *   - on MPSC and LANES, sometimes one or two replacement producers, forked
 *     when the consumer reads the round's first death record, while an
 *     "anchor" producer keeps the ring open: their attach must succeed
 *     (LANES(4) with 4 producers: only the dead one's lane is free), and
 *     they write and end like the others;
 *   - the capacity (2 KiB to 64 KiB, or --capacity);
 *   - each producer's fate: killed after a random time (0 to 3 ms, often
 *     0), killed parked in the middle of a claim (the payload half
 *     written) or of a claim_batch (some records filled, one half), told
 *     to _exit() without detaching (a death too), or told to detach (no
 *     death record).  At least one producer per round is killed, and
 *     nobody acts before every first producer has attached (one that
 *     attached after the others were gone would find the ring closed);
 *   - sometimes the consumer stops reading for a few ms before the first
 *     kill, so that producers are caught on a full ring (spinning on
 *     -EAGAIN, or asleep in lull_producer_wait()).
 *
 * Producers write a mix: single writes and writevs, claim + commit, claim
 * + abort, write_batch, claim_batch + commit, claim_batch + abort.  A
 * record's payload (16..200 bytes) is {producer id, seq, len, flags, how,
 * checksum} then pattern bytes of (id, seq, offset); the checksum covers
 * the whole payload.  Only committed records take sequence numbers
 * (1, 2, 3, ... per producer), so the consumer must see exactly those, in
 * order; an aborted claim is marked so in its payload and must never
 * arrive.  The side channel is a MAP_SHARED | MAP_ANONYMOUS page mapped
 * before any fork, one block per producer: before a write or commit the
 * producer stores (release) how many records it may publish (inflight),
 * after the call returns 0 it adds them to committed (release), then
 * clears inflight.  When a producer's death record is read, what was
 * delivered of it must lie in [committed, committed + inflight] (the one
 * record or batch a kill between the commit and the store may add); a
 * producer that detached must have had exactly its committed records
 * delivered.  A producer killed parked in a claim must be reported with
 * skipped covering all it claimed (plus a wrap's padding in front of it),
 * in every topology: each announces a claim before writing any of it.
 *
 * After each round: one death record per dead producer (its pid, never a
 * live or detached one's, after all its records, never twice), the poison
 * once after them, then -EPIPE from lull_ring_read() and lull_ring_wait()
 * and from a new attach; lull_ring_stats()' producer_deaths equal to the
 * death records; every child reaped (a killed one by SIGKILL, the others
 * with status 0); the ring destroyed and /proc/self/fd back to its count
 * before the round.  At the end: the same count as at the start, and no
 * child left (waitpid(-1) says ECHILD).
 *
 * No hang goes unnoticed: every lull_ring_wait() is bounded, and a round
 * fails as hung when nothing moves for 5 s (no record, no producer's
 * step), when a dead producer's death record has not come (or came) 5 s
 * after its kill, or when, every producer gone, a 5 s lull_ring_wait()
 * returns only at its timeout (whatever it then finds: nothing woke it);
 * an alarm() re-armed at each round start (--watchdog-seconds, default
 * 60) prints the round and its phase, kills the children and aborts,
 * whatever the consumer is stuck in.
 *
 * Death-detection latency (from just before kill() to the consumer reading
 * the death record) is printed, median, p99 and max, per topology; it is
 * never asserted on below those 5 s (a NOTE line names a round where it
 * passed 1 s).
 *
 * The producers inherit every descriptor the consumer had at fork (its
 * pidfds of other producers, its epoll instance), as forked children do;
 * --child-close-fds makes each close them (all but the ring's memfd)
 * first thing, to tell a failure that needs them from one that does not.
 *
 * Output: a header with the seed, a FAIL line per failed round (with
 * --seed S --round R to rerun its configuration; timing differs), a line
 * per topology, the latencies, and last "N passed, M failed" over the
 * rounds.  Exit status 0 only when every round passed.
 *
 * Options: --rounds N (default 5000), --seed S (default 1), --round R (only
 * that round), --capacity N (a power of two, every round), --topology
 * spsc|mpsc|lanes (only those rounds), --watchdog-seconds S,
 * --child-close-fds, --verbose.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lull.h>

#include "../lib/threads.h"

#define DEFAULT_ROUNDS 5000u
#define DEFAULT_SEED 1ull
#define DEFAULT_WATCHDOG 60u
#define HANG_NS (5ull * 1000 * 1000 * 1000)
#define DEATH_DEADLINE_NS (5ull * 1000 * 1000 * 1000)
#define REAP_MS 5000u
#define SLOW_DEATH_NS (1000ull * 1000 * 1000) /* a note above it */
#define CHILD_LIFETIME_MS 60000u /* a child never outlives this */
#define MAX_RP 8                 /* producers in one round, all kinds */
#define REC_MIN 16u
#define REC_MAX 200u
#define BATCH_MAX 8u
#define GOLDEN 0x9e3779b97f4a7c15ull

/* ------------------------------------------------------------------------
 * Random numbers: splitmix64
 */

static uint64_t rnd_next(uint64_t *s)
{
	uint64_t z = (*s += GOLDEN);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint32_t rnd_below(uint64_t *s, uint32_t n)
{
	return (uint32_t)(rnd_next(s) % n);
}

static bool rnd_chance(uint64_t *s, uint32_t one_in)
{
	return rnd_below(s, one_in) == 0;
}

/* ------------------------------------------------------------------------
 * Records
 */

#define PL_ABORTED 1u /* written into a claim that is then aborted */

enum how {
	HOW_WRITE = 1,
	HOW_WRITEV,
	HOW_CLAIM,
	HOW_WRITE_BATCH,
	HOW_CLAIM_BATCH,
	HOWS
};

static const char *const how_names[HOWS] = {
	"?", "write", "writev", "claim+commit", "write_batch",
	"claim_batch+commit",
};

struct payload {
	uint32_t id;  /* the producer, unique in the run */
	uint32_t seq; /* 1, 2, 3, ... among its committed records */
	uint16_t len; /* of the whole payload */
	uint8_t flags;
	uint8_t how;
	uint32_t check; /* over the payload, this field as 0 */
};

static int32_t id_type(uint32_t id)
{
	return (int32_t)(1 + id % 1000);
}

static uint8_t pattern_at(uint32_t id, uint32_t seq, size_t i)
{
	uint32_t x = id * 2246822519u + seq * 3266489917u +
		     (uint32_t)i * 668265263u;

	x ^= x >> 15;
	x *= 2654435761u;
	return (uint8_t)(x >> 24);
}

static uint32_t checksum(const uint8_t *buf, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++) {
		uint8_t b = i >= offsetof(struct payload, check) &&
					    i < sizeof(struct payload)
				    ? 0
				    : buf[i];

		h = (h ^ b) * 16777619u;
	}
	return h;
}

/* Fill @len bytes at @buf: record @seq of producer @id. */
static void payload_fill(uint8_t *buf, uint32_t id, uint32_t seq, size_t len,
			 uint8_t flags, uint8_t how)
{
	struct payload pl = { id, seq, (uint16_t)len, flags, how, 0 };

	memcpy(buf, &pl, sizeof(pl));
	for (size_t i = sizeof(pl); i < len; i++)
		buf[i] = pattern_at(id, seq, i);
	pl.check = checksum(buf, len);
	memcpy(buf + offsetof(struct payload, check), &pl.check,
	       sizeof(pl.check));
}

static size_t rec_space(size_t len)
{
	return (LULL_RECORD_HEADER_SIZE + len + 7) & ~(size_t)7;
}

/* ------------------------------------------------------------------------
 * The side channel: one block per producer of the round, in a shared page
 */

enum ch_state {
	CH_FORKED = 0,
	CH_ATTACHED,
	CH_PARKED,   /* in the middle of a claim or a batch, on command */
	CH_CLOSED,   /* -EPIPE at attach or from a write: detached, exiting */
	CH_DETACHED, /* detached on command, exiting */
	CH_EXITING,  /* _exit() without detaching, on command */
	CH_ERROR,    /* an unexpected result: error[] says */
};

static const char *const ch_state_names[] = {
	"forked", "attached", "parked", "closed", "detached", "exiting",
	"error",
};

enum command {
	CMD_RUN = 0,
	CMD_PARK_CLAIM,
	CMD_PARK_BATCH,
	CMD_DETACH,
	CMD_EXIT,
};

enum op {
	OP_NONE = 0,
	OP_OPEN,
	OP_ATTACH,
	OP_WRITE,
	OP_WRITEV,
	OP_CLAIM_COMMIT,
	OP_CLAIM_ABORT,
	OP_WRITE_BATCH,
	OP_CLAIM_BATCH_COMMIT,
	OP_CLAIM_BATCH_ABORT,
	OP_FULL_WAIT,
	OP_FULL_YIELD,
	OP_PARK_CLAIM,
	OP_PARK_BATCH,
	OP_DETACH,
	OPS
};

static const char *const op_names[OPS] = {
	"nothing", "opening", "attaching", "write", "writev",
	"claim+commit", "claim+abort", "write_batch", "claim_batch+commit",
	"claim_batch+abort", "lull_producer_wait on a full ring",
	"retrying on a full ring", "parking in a claim",
	"parking in a batch", "detaching",
};

struct chan {
	_Atomic uint32_t state;
	_Atomic uint32_t command;
	_Atomic uint32_t op;
	_Atomic int32_t attach_ret;
	_Atomic uint64_t committed; /* records committed: seqs 1..committed */
	_Atomic uint64_t inflight;  /* records the call under way may add */
	_Atomic uint64_t aborted;   /* records claimed and aborted */
	_Atomic uint64_t full;      /* -EAGAIN results */
	_Atomic uint64_t parked_bytes; /* ring bytes of the claim parked in */
	_Atomic uint64_t attach_tries;
	char error[200];
	char pad[512 - 200 - 64];
};

static struct chan *chans; /* MAP_SHARED | MAP_ANONYMOUS, before any fork */
static pid_t parent_pid;
static bool child_close_fds; /* --child-close-fds */

/* ------------------------------------------------------------------------
 * Configuration
 */

enum topo { T_SPSC, T_MPSC, T_LANES, TOPOS };
static const char *const topo_names[TOPOS] = { "spsc", "mpsc", "lanes" };

enum fate {
	F_KILL,
	F_KILL_CLAIM,
	F_KILL_BATCH,
	F_EXIT,   /* _exit() without detaching */
	F_DETACH,
	FATES
};

static const char *const fate_names[FATES] = {
	"kill", "kill-in-claim", "kill-in-batch", "exit", "detach",
};

static bool fate_dies(enum fate f)
{
	return f != F_DETACH;
}

static bool fate_kills(enum fate f)
{
	return f <= F_KILL_BATCH;
}

enum role { R_FIRST, R_SUCCESSOR, R_REPLACEMENT };
static const char *const role_names[] = { "", " successor",
					  " replacement" };

struct pcfg {
	enum role role;
	enum fate fate;
	uint32_t delay_us; /* after it attached (the anchor: after the
			      replacements attached) */
	bool anchor;
	uint64_t seed;
};

struct options {
	uint32_t rounds, only_round;
	uint64_t seed;
	size_t capacity; /* 0: drawn */
	bool topo[TOPOS];
	char filters[80];
	unsigned watchdog;
	bool verbose;
	bool child_close_fds; /* children close what they inherited */
};

struct rcfg {
	uint32_t round;
	uint64_t seed;
	enum topo topo;
	unsigned flags;
	size_t capacity;
	unsigned nfirst; /* first producers, forked at the start */
	unsigned nprod;  /* all of them: first, successor, replacements */
	bool successor;  /* SPSC */
	unsigned nrepl;  /* MPSC, LANES */
	uint32_t stall_us; /* no reads before the first kill */
	struct pcfg p[MAX_RP];
	char text[400];
};

static enum fate draw_fate(uint64_t *s)
{
	uint32_t x = rnd_below(s, 100);

	return x < 40   ? F_KILL
	       : x < 55 ? F_KILL_CLAIM
	       : x < 70 ? F_KILL_BATCH
	       : x < 80 ? F_EXIT
			: F_DETACH;
}

static uint32_t draw_delay(uint64_t *s)
{
	return rnd_chance(s, 4) ? 0 : rnd_below(s, 3000);
}

static void describe(struct rcfg *c)
{
	size_t n = (size_t)snprintf(
		c->text, sizeof(c->text), "%s cap %zu%s%s", topo_names[c->topo],
		c->capacity, c->stall_us ? ", consumer stalls" : "",
		"; producers:");

	for (unsigned i = 0; i < c->nprod && n < sizeof(c->text); i++)
		n += (size_t)snprintf(c->text + n, sizeof(c->text) - n,
				      " [%u%s%s %s %u us]", i,
				      role_names[c->p[i].role],
				      c->p[i].anchor ? " anchor" : "",
				      fate_names[c->p[i].fate],
				      c->p[i].delay_us);
}

static void round_config(const struct options *opt, uint32_t round,
			 struct rcfg *c)
{
	uint64_t s = opt->seed ^ ((uint64_t)round + 1) * GOLDEN;
	unsigned nt = 0, which, k;
	enum topo order[TOPOS];
	bool some_kill = false;

	memset(c, 0, sizeof(*c));
	c->round = round;
	c->seed = s;
	rnd_next(&s);
	for (int t = 0; t < TOPOS; t++)
		if (opt->topo[t])
			order[nt++] = (enum topo)t;
	c->topo = order[round % nt];
	c->capacity = opt->capacity ? opt->capacity
		      : rnd_chance(&s, 8) ? (size_t)65536
					  : (size_t)2048 << rnd_below(&s, 3);
	switch (c->topo) {
	case T_SPSC:
		c->flags = LULL_RING_SPSC;
		c->nfirst = 1;
		c->successor = !rnd_chance(&s, 4);
		break;
	case T_MPSC:
		c->flags = LULL_RING_MPSC;
		c->nfirst = 2 + rnd_below(&s, 3);
		c->nrepl = rnd_chance(&s, 2) ? 1 + rnd_below(&s, 2) : 0;
		break;
	default:
		c->flags = LULL_RING_LANES(4);
		c->nrepl = rnd_chance(&s, 2) ? 1 : 0;
		/* With replacements, often every lane taken: the new one
		 * can only have the dead one's. */
		c->nfirst = c->nrepl && rnd_chance(&s, 2) ? 4
							 : 2 + rnd_below(&s, 3);
		break;
	}
	c->nprod = c->nfirst + (c->successor ? 1 : 0) + c->nrepl;
	for (unsigned i = 0; i < c->nprod; i++) {
		struct pcfg *p = &c->p[i];

		p->role = i < c->nfirst	   ? R_FIRST
			  : c->successor ? R_SUCCESSOR
					 : R_REPLACEMENT;
		p->fate = draw_fate(&s);
		p->delay_us = draw_delay(&s);
		p->seed = rnd_next(&s);
		if (p->role == R_FIRST && fate_kills(p->fate))
			some_kill = true;
	}
	if (!some_kill)
		c->p[rnd_below(&s, c->nfirst)].fate = F_KILL;
	if (c->nrepl) {
		/*
		 * The anchor keeps the ring open until the replacements are
		 * in; another first producer dies to make room for them.
		 */
		which = rnd_below(&s, c->nfirst);
		c->p[which].anchor = true;
		k = (which + 1 + rnd_below(&s, c->nfirst - 1)) % c->nfirst;
		if (!fate_dies(c->p[k].fate))
			c->p[k].fate = F_KILL;
	}
	c->stall_us = rnd_chance(&s, 5) ? 1000 + rnd_below(&s, 4000) : 0;
	describe(c);
}

/* ------------------------------------------------------------------------
 * A producer process
 */

struct child {
	const struct rcfg *cfg;
	unsigned idx;
	uint32_t id;
	struct chan *ch;
	struct lull_ring *ring;
	struct lull_producer *prod;
	uint64_t rng;
	uint64_t committed; /* the chan's, kept here too */
	size_t maxlen;      /* payload bytes, at most */
	size_t budget;      /* ring bytes a batch may take */
	uint64_t born_ms;
	bool lanes_family_mpsc; /* the family a LANES op uses */
};

static __attribute__((noreturn, format(printf, 2, 3))) void
child_fail(struct child *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->ch->error, sizeof(c->ch->error), fmt, ap);
	va_end(ap);
	atomic_store_explicit(&c->ch->state, CH_ERROR, memory_order_release);
	/* Leave as a detach would: the round reports the error. */
	if (c->prod)
		lull_producer_detach(c->prod);
	_exit(3);
}

static bool child_mpsc(struct child *c)
{
	switch (c->cfg->topo) {
	case T_SPSC:
		return false;
	case T_MPSC:
		return true;
	default:
		return rnd_chance(&c->rng, 2); /* either family on LANES */
	}
}

typedef int (*write_fn)(struct lull_producer *, int32_t, const void *,
			size_t);
typedef int (*writev_fn)(struct lull_producer *, int32_t,
			 const struct iovec *, int);
typedef int (*claim_fn)(struct lull_producer *, int32_t, size_t, void **);
typedef int (*end_fn)(struct lull_producer *);
typedef int (*claim_batch_fn)(struct lull_producer *, struct lull_claim *,
			      unsigned);
typedef int (*write_batch_fn)(struct lull_producer *,
			      const struct lull_record *, unsigned);

struct family {
	write_fn write;
	writev_fn writev;
	claim_fn claim;
	end_fn commit, abort;
	claim_batch_fn claim_batch;
	write_batch_fn write_batch;
};

static const struct family fam_spsc = {
	lull_spsc_write,  lull_spsc_writev,	  lull_spsc_claim,
	lull_spsc_commit, lull_spsc_abort,	  lull_spsc_claim_batch,
	lull_spsc_write_batch,
};
static const struct family fam_mpsc = {
	lull_mpsc_write,  lull_mpsc_writev,	  lull_mpsc_claim,
	lull_mpsc_commit, lull_mpsc_abort,	  lull_mpsc_claim_batch,
	lull_mpsc_write_batch,
};

static void set_op(struct child *c, enum op op)
{
	atomic_store_explicit(&c->ch->op, op, memory_order_relaxed);
}

static size_t draw_len(struct child *c)
{
	return REC_MIN + rnd_below(&c->rng, (uint32_t)(c->maxlen - REC_MIN + 1));
}

/* A batch: its count and lengths, within the ring's batch budget. */
static unsigned draw_batch(struct child *c, size_t *lens)
{
	unsigned k = 2 + rnd_below(&c->rng, BATCH_MAX - 1), n = 0;
	size_t total = 0;

	while (n < k) {
		size_t len = draw_len(c);

		if (total + rec_space(len) > c->budget)
			break;
		lens[n++] = len;
		total += rec_space(len);
	}
	if (n == 0)
		lens[n++] = REC_MIN;
	return n;
}

static void publish_inflight(struct child *c, uint64_t n)
{
	atomic_store_explicit(&c->ch->inflight, n, memory_order_release);
}

static void publish_committed(struct child *c, uint64_t n)
{
	c->committed += n;
	atomic_store_explicit(&c->ch->committed, c->committed,
			      memory_order_release);
	atomic_store_explicit(&c->ch->inflight, 0, memory_order_release);
}

/* The ring is shut down: leave as a detach does. */
static __attribute__((noreturn)) void child_closed(struct child *c)
{
	int ret;

	atomic_store_explicit(&c->ch->inflight, 0, memory_order_release);
	set_op(c, OP_DETACH);
	ret = lull_producer_detach(c->prod);
	c->prod = NULL;
	if (ret < 0)
		child_fail(c, "lull_producer_detach after -EPIPE: %d", ret);
	atomic_store_explicit(&c->ch->state, CH_CLOSED, memory_order_release);
	lull_ring_destroy(c->ring);
	_exit(0);
}

/* A call returned @ret: 0, -EAGAIN (retry later) go back; -EPIPE ends. */
static int child_check(struct child *c, int ret, const char *what)
{
	if (ret == 0 || ret == -EAGAIN)
		return ret;
	if (ret == -EPIPE)
		child_closed(c);
	child_fail(c, "%s: %d (%s), %" PRIu64 " committed", what, ret,
		   lull_strerror(ret), c->committed);
}

static void on_full(struct child *c, size_t len)
{
	int ret;

	atomic_fetch_add_explicit(&c->ch->full, 1, memory_order_relaxed);
	if (rnd_chance(&c->rng, 2)) {
		set_op(c, OP_FULL_WAIT);
		ret = lull_producer_wait(c->prod, len, 20 * 1000 * 1000);
		if (ret == -EPIPE)
			child_closed(c);
		if (ret < 0 && ret != -ETIMEDOUT)
			child_fail(c, "lull_producer_wait: %d", ret);
	} else {
		set_op(c, OP_FULL_YIELD);
		sched_yield();
	}
}

static uint8_t op_buf[BATCH_MAX][REC_MAX];

static int op_write(struct child *c, const struct family *f, bool vec)
{
	size_t len = draw_len(c);
	uint32_t seq = (uint32_t)c->committed + 1;
	struct iovec iov[2];
	int ret;

	set_op(c, vec ? OP_WRITEV : OP_WRITE);
	payload_fill(op_buf[0], c->id, seq, len, 0,
		     vec ? HOW_WRITEV : HOW_WRITE);
	publish_inflight(c, 1);
	if (vec) {
		size_t cut = rnd_below(&c->rng, (uint32_t)len + 1);

		iov[0] = (struct iovec){ op_buf[0], cut };
		iov[1] = (struct iovec){ op_buf[0] + cut, len - cut };
		ret = f->writev(c->prod, id_type(c->id), iov, 2);
	} else {
		ret = f->write(c->prod, id_type(c->id), op_buf[0], len);
	}
	if (child_check(c, ret, vec ? "writev" : "write") == 0)
		publish_committed(c, 1);
	else
		publish_inflight(c, 0);
	if (ret == -EAGAIN)
		on_full(c, len);
	return ret;
}

static int op_claim(struct child *c, const struct family *f, bool abort)
{
	size_t len = draw_len(c);
	uint32_t seq = (uint32_t)c->committed + 1;
	void *dst;
	int ret;

	set_op(c, abort ? OP_CLAIM_ABORT : OP_CLAIM_COMMIT);
	ret = f->claim(c->prod, id_type(c->id), len, &dst);
	if (child_check(c, ret, "claim") == -EAGAIN) {
		on_full(c, len);
		return ret;
	}
	payload_fill(dst, c->id, seq, len, abort ? PL_ABORTED : 0, HOW_CLAIM);
	if (abort) {
		ret = f->abort(c->prod);
		if (ret < 0)
			child_fail(c, "abort of a claim: %d", ret);
		atomic_fetch_add_explicit(&c->ch->aborted, 1,
					  memory_order_relaxed);
		return 0;
	}
	publish_inflight(c, 1);
	ret = f->commit(c->prod);
	if (ret < 0)
		child_fail(c, "commit of a claim: %d", ret);
	publish_committed(c, 1);
	return 0;
}

static int op_write_batch(struct child *c, const struct family *f)
{
	struct lull_record recs[BATCH_MAX];
	size_t lens[BATCH_MAX];
	unsigned n = draw_batch(c, lens);
	int ret;

	set_op(c, OP_WRITE_BATCH);
	for (unsigned i = 0; i < n; i++) {
		payload_fill(op_buf[i], c->id,
			     (uint32_t)(c->committed + 1 + i), lens[i], 0,
			     HOW_WRITE_BATCH);
		recs[i] = (struct lull_record){ op_buf[i], (uint32_t)lens[i],
						id_type(c->id) };
	}
	publish_inflight(c, n);
	ret = f->write_batch(c->prod, recs, n);
	if (child_check(c, ret, "write_batch") == 0) {
		publish_committed(c, n);
	} else {
		publish_inflight(c, 0);
		on_full(c, lens[0]);
	}
	return ret;
}

static int op_claim_batch(struct child *c, const struct family *f, bool abort)
{
	struct lull_claim claims[BATCH_MAX];
	size_t lens[BATCH_MAX];
	unsigned n = draw_batch(c, lens);
	int ret;

	set_op(c, abort ? OP_CLAIM_BATCH_ABORT : OP_CLAIM_BATCH_COMMIT);
	for (unsigned i = 0; i < n; i++)
		claims[i] = (struct lull_claim){ NULL, (uint32_t)lens[i],
						 id_type(c->id) };
	ret = f->claim_batch(c->prod, claims, n);
	if (child_check(c, ret, "claim_batch") == -EAGAIN) {
		on_full(c, lens[0]);
		return ret;
	}
	for (unsigned i = 0; i < n; i++)
		payload_fill(claims[i].data, c->id,
			     (uint32_t)(c->committed + 1 + i), lens[i],
			     abort ? PL_ABORTED : 0, HOW_CLAIM_BATCH);
	if (abort) {
		ret = f->abort(c->prod);
		if (ret < 0)
			child_fail(c, "abort of a claim_batch: %d", ret);
		atomic_fetch_add_explicit(&c->ch->aborted, n,
					  memory_order_relaxed);
		return 0;
	}
	publish_inflight(c, n);
	ret = f->commit(c->prod);
	if (ret < 0)
		child_fail(c, "commit of a claim_batch: %d", ret);
	publish_committed(c, n);
	return 0;
}

/* On command: a claim (or a batch) half written, held until the kill. */
static __attribute__((noreturn)) void child_park(struct child *c,
						 const struct family *f,
						 bool batch)
{
	struct lull_claim claims[BATCH_MAX];
	size_t lens[BATCH_MAX], bytes = 0;
	uint8_t full_rec[REC_MAX];
	unsigned n = 1;
	void *dst;
	int ret;

	set_op(c, batch ? OP_PARK_BATCH : OP_PARK_CLAIM);
	if (batch)
		n = draw_batch(c, lens);
	else
		lens[0] = draw_len(c);
	for (unsigned i = 0; i < n; i++)
		claims[i] = (struct lull_claim){ NULL, (uint32_t)lens[i],
						 id_type(c->id) };
	for (;;) {
		ret = batch ? f->claim_batch(c->prod, claims, n)
			    : f->claim(c->prod, id_type(c->id), lens[0],
				       &dst);
		if (child_check(c, ret, batch ? "claim_batch to park in"
					      : "claim to park in") == 0)
			break;
		atomic_fetch_add_explicit(&c->ch->full, 1,
					  memory_order_relaxed);
		sched_yield();
	}
	if (!batch)
		claims[0].data = dst;
	/* The first half of the records whole, then half of the next. */
	for (unsigned i = 0; i < n; i++) {
		size_t len = lens[i];

		bytes += rec_space(len);
		payload_fill(full_rec, c->id, (uint32_t)(c->committed + 1 + i),
			     len, 0, batch ? HOW_CLAIM_BATCH : HOW_CLAIM);
		if (i < n / 2)
			memcpy(claims[i].data, full_rec, len);
		else if (i == n / 2)
			memcpy(claims[i].data, full_rec, len / 2);
	}
	atomic_store_explicit(&c->ch->parked_bytes, bytes,
			      memory_order_relaxed);
	/* As a commit would be about to: the kill may find it either way. */
	publish_inflight(c, 0);
	atomic_store_explicit(&c->ch->state, CH_PARKED, memory_order_release);
	for (;;)
		pause();
}

static __attribute__((noreturn)) void child_main(const struct rcfg *cfg,
						 unsigned idx, int ring_fd,
						 uint32_t id)
{
	struct child c = { .cfg = cfg, .idx = idx, .id = id,
			   .ch = &chans[idx], .rng = cfg->p[idx].seed };
	const struct family *f;
	uint32_t cmd;
	ssize_t maxp;
	int ret;

	/* Never outlive the harness, even if it aborts. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent_pid)
		_exit(9);
	signal(SIGALRM, SIG_DFL);
	if (child_close_fds) {
		/* All but stdio and the ring's memfd. */
		if (ring_fd > 3)
			close_range(3, (unsigned)ring_fd - 1, 0);
		close_range((unsigned)ring_fd + 1, ~0u, 0);
	}
	c.born_ms = now_ms();
	set_op(&c, OP_OPEN);
	ret = lull_ring_open_fd(&c.ring, ring_fd, 0);
	if (ret < 0)
		child_fail(&c, "lull_ring_open_fd: %d", ret);
	maxp = lull_ring_max_payload(c.ring);
	c.maxlen = maxp < (ssize_t)REC_MAX ? (size_t)maxp : REC_MAX;
	if (c.maxlen < REC_MIN)
		child_fail(&c, "max payload %zd is below %u", maxp, REC_MIN);
	c.budget = (size_t)lull_ring_capacity(c.ring) - (size_t)maxp - 8;
	set_op(&c, OP_ATTACH);
	for (;;) {
		atomic_fetch_add_explicit(&c.ch->attach_tries, 1,
					  memory_order_relaxed);
		ret = lull_producer_attach(c.ring, 0, &c.prod);
		/* The SPSC successor waits for the lane. */
		if (ret != -EBUSY || cfg->p[idx].role != R_SUCCESSOR)
			break;
		if (now_ms() - c.born_ms > CHILD_LIFETIME_MS)
			child_fail(&c, "attach: -EBUSY for %u ms",
				   CHILD_LIFETIME_MS);
		sched_yield();
	}
	atomic_store_explicit(&c.ch->attach_ret, ret, memory_order_relaxed);
	if (ret == -EPIPE) {
		atomic_store_explicit(&c.ch->state, CH_CLOSED,
				      memory_order_release);
		lull_ring_destroy(c.ring);
		_exit(0);
	}
	if (ret < 0)
		child_fail(&c, "lull_producer_attach: %d (%s)", ret,
			   lull_strerror(ret));
	atomic_store_explicit(&c.ch->state, CH_ATTACHED, memory_order_release);

	for (unsigned long n = 0;; n++) {
		f = child_mpsc(&c) ? &fam_mpsc : &fam_spsc;
		cmd = atomic_load_explicit(&c.ch->command,
					   memory_order_acquire);
		switch (cmd) {
		case CMD_PARK_CLAIM:
		case CMD_PARK_BATCH:
			child_park(&c, f, cmd == CMD_PARK_BATCH);
		case CMD_DETACH:
			set_op(&c, OP_DETACH);
			ret = lull_producer_detach(c.prod);
			c.prod = NULL;
			if (ret < 0)
				child_fail(&c, "lull_producer_detach: %d", ret);
			atomic_store_explicit(&c.ch->state, CH_DETACHED,
					      memory_order_release);
			ret = lull_ring_destroy(c.ring);
			if (ret < 0)
				child_fail(&c, "lull_ring_destroy: %d", ret);
			_exit(0);
		case CMD_EXIT:
			atomic_store_explicit(&c.ch->state, CH_EXITING,
					      memory_order_release);
			_exit(0);
		default:
			break;
		}
		if ((n & 255) == 0 && now_ms() - c.born_ms > CHILD_LIFETIME_MS)
			child_fail(&c, "still running after %u ms",
				   CHILD_LIFETIME_MS);
		switch (rnd_below(&c.rng, 20)) {
		case 0: case 1: case 2: case 3: case 4:
			op_write(&c, f, false);
			break;
		case 5:
			op_write(&c, f, true);
			break;
		case 6: case 7: case 8: case 9:
			op_claim(&c, f, false);
			break;
		case 10: case 11:
			op_claim(&c, f, true);
			break;
		case 12: case 13: case 14:
			op_write_batch(&c, f);
			break;
		case 15: case 16: case 17:
			op_claim_batch(&c, f, false);
			break;
		default:
			op_claim_batch(&c, f, true);
			break;
		}
	}
}

/* ------------------------------------------------------------------------
 * The consumer's view of a round
 */

enum stage {
	S_NONE,     /* not forked yet */
	S_FORKED,   /* waiting for its attach */
	S_RUNNING,  /* attached, its fate not yet acted on */
	S_PARKING,  /* told to park, waiting for it to say so */
	S_ENDING,   /* told to detach or exit, waiting */
	S_GONE,     /* killed, exited, detached or closed */
};

struct rprod {
	const struct pcfg *cfg;
	uint32_t id;
	pid_t pid;
	enum stage stage;
	uint64_t fork_ns, attach_ns, act_ns, stage_ns, kill_ns, death_ns;
	bool attached;
	bool died;     /* killed, or _exit()ed holding its slot */
	bool killed;
	bool closed;   /* saw -EPIPE: the ring closed on it */
	bool death_seen;
	bool reaped;
	int wstatus;
	uint64_t delivered; /* the last seq handed to the consumer */
	uint64_t after_kill; /* records of it read after its kill */
	uint64_t after_death; /* records of it read after its death record */
	struct lull_death death;
	uint32_t op_at_kill;
	uint64_t committed_at_kill, inflight_at_kill;
};

enum phase {
	PH_SETUP,
	PH_RUNNING,
	PH_DRAINING, /* every producer gone: death and poison records due */
	PH_REAPING,
	PH_CHECKING,
	PHASES
};

static const char *const phase_names[PHASES] = {
	"setting up", "running", "waiting for death and poison records",
	"reaping the children", "checking",
};

struct round {
	const struct rcfg *cfg;
	const struct options *opt;
	struct lull_ring *ring;
	int ring_fd;
	uint32_t base_id;
	struct rprod p[MAX_RP];
	unsigned forked;
	uint64_t start_ns, last_progress_ns;
	bool stalled;          /* the consumer's stall happened */
	bool repl_forked;
	uint64_t first_attached_ns; /* 0 until every first one attached */
	uint64_t repl_attached_ns; /* 0 until every replacement attached */
	unsigned deaths, poisons, records, fatal;
	bool poison_seen, epipe_seen;
	bool closing_race; /* SPSC: the successor got in as the ring closed */
	bool hung;
	unsigned errors;
	char error[6][400]; /* the first few failures */
};

struct run {
	const struct options *opt;
	/* death latencies in ns, per topology */
	uint64_t *lat[TOPOS];
	size_t nlat[TOPOS], caplat[TOPOS];
	uint64_t rounds[TOPOS], failed[TOPOS], records[TOPOS],
		deaths[TOPOS], kills[TOPOS];
	uint64_t succ_continued, succ_refused, succ_caught, succ_none;
	uint64_t repl_attached;
};

/* For the watchdog's signal handler. */
static volatile sig_atomic_t wd_phase;
static volatile pid_t wd_pids[MAX_RP];
static char wd_message[640];

static __attribute__((format(printf, 2, 3))) void
round_fail(struct round *r, const char *fmt, ...)
{
	va_list ap;

	if (r->errors < sizeof(r->error) / sizeof(r->error[0])) {
		va_start(ap, fmt);
		vsnprintf(r->error[r->errors], sizeof(r->error[0]), fmt, ap);
		va_end(ap);
	}
	r->errors++;
}

static void progress(struct round *r)
{
	r->last_progress_ns = now_ns();
}

static struct rprod *by_pid(struct round *r, int32_t pid)
{
	for (unsigned i = 0; i < r->forked; i++)
		if (r->p[i].pid == pid)
			return &r->p[i];
	return NULL;
}

static const char *status_text(int wstatus, char *buf, size_t size)
{
	if (WIFSIGNALED(wstatus))
		snprintf(buf, size, "killed by signal %d", WTERMSIG(wstatus));
	else if (WIFEXITED(wstatus))
		snprintf(buf, size, "exit status %d", WEXITSTATUS(wstatus));
	else
		snprintf(buf, size, "status %#x", wstatus);
	return buf;
}

/* What producer @i was and did, for a failure message. */
static void prod_text(struct round *r, unsigned i, char *buf, size_t size)
{
	struct rprod *p = &r->p[i];
	struct chan *ch = &chans[i];

	snprintf(buf, size,
		 "producer %u (pid %d%s, %s%s): %s, committed %" PRIu64
		 " inflight %" PRIu64 " delivered %" PRIu64 ", %s",
		 i, (int)p->pid, role_names[p->cfg->role],
		 fate_names[p->cfg->fate], p->cfg->anchor ? ", anchor" : "",
		 ch_state_names[atomic_load(&ch->state)],
		 atomic_load(&ch->committed), atomic_load(&ch->inflight),
		 p->delivered,
		 p->killed ? op_names[p->op_at_kill]
			   : op_names[atomic_load(&ch->op)]);
}

/* The producer's records delivered: all committed, at most the in-flight
 * call's more. */
static void check_delivered(struct round *r, unsigned i, const char *when)
{
	struct rprod *p = &r->p[i];
	struct chan *ch = &chans[i];
	uint64_t committed = atomic_load_explicit(&ch->committed,
						  memory_order_acquire);
	uint64_t inflight = atomic_load_explicit(&ch->inflight,
						 memory_order_acquire);
	char text[300];

	if (p->died && !p->closed) {
		if (p->delivered < committed ||
		    p->delivered > committed + inflight) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r,
				   "%s: %" PRIu64 " records delivered, "
				   "not in [committed %" PRIu64
				   ", committed + inflight %" PRIu64 "]: %s",
				   when, p->delivered, committed,
				   committed + inflight, text);
		}
	} else if (p->delivered != committed) {
		prod_text(r, i, text, sizeof(text));
		round_fail(r,
			   "%s: %" PRIu64 " records delivered, %" PRIu64
			   " committed: %s",
			   when, p->delivered, committed, text);
	}
}

static void on_death(struct round *r, const struct lull_record *rec)
{
	const struct rcfg *c = r->cfg;
	struct lull_death d;
	struct rprod *p;
	unsigned i;
	char text[300], st[40];
	int wstatus;
	uint64_t bytes;

	r->deaths++;
	if (rec->len != sizeof(d)) {
		round_fail(r, "a death record of %u bytes", rec->len);
		return;
	}
	memcpy(&d, rec->data, sizeof(d));
	if (r->poison_seen)
		round_fail(r, "a death record (pid %d) after the poison",
			   (int)d.pid);
	p = by_pid(r, d.pid);
	if (!p) {
		round_fail(r, "a death record for pid %d, no producer of the "
			      "round",
			   (int)d.pid);
		return;
	}
	i = (unsigned)(p - r->p);
	if (p->death_seen) {
		round_fail(r, "a second death record for producer %u", i);
		return;
	}
	p->death_seen = true;
	p->death = d;
	prod_text(r, i, text, sizeof(text));
	if (!p->died && atomic_load_explicit(&chans[i].state,
					     memory_order_acquire) ==
			       CH_EXITING) {
		/* Told to exit: gone before drive() looked. */
		p->died = true;
		p->kill_ns = now_ns();
		p->stage = S_GONE;
	}
	if (!p->died) {
		/* It died unplanned: a crash? */
		if (waitpid(p->pid, &wstatus, WNOHANG) == p->pid) {
			p->reaped = true;
			p->wstatus = wstatus;
			status_text(wstatus, st, sizeof(st));
		} else {
			snprintf(st, sizeof(st), "still running");
		}
		round_fail(r, "a death record for a producer that did not "
			      "die (%s): %s",
			   st, text);
		return;
	}
	if (d.slot >= LULL_PRODUCER_SLOTS)
		round_fail(r, "death record of producer %u: slot %u", i,
			   d.slot);
	if (d.skipped % 8 || d.skipped > c->capacity)
		round_fail(r, "death record of producer %u: skipped %" PRIu64
			      " (capacity %zu)",
			   i, d.skipped, c->capacity);
	if (p->cfg->fate == F_KILL_CLAIM || p->cfg->fate == F_KILL_BATCH) {
		uint64_t lo, hi;

		bytes = atomic_load(&chans[i].parked_bytes);
		/*
		 * The bytes it claimed, plus the padding of a wrap in front
		 * of them, if any (shorter than the record, or the batch,
		 * that did not fit): the span it announced (in its slot on
		 * MPSC, in its lane otherwise; ring.h, struct lull_death).
		 */
		lo = bytes;
		hi = bytes + (bytes > rec_space(REC_MAX) ? bytes
							  : rec_space(REC_MAX)) -
		     8;
		if (d.skipped < lo || d.skipped > hi)
			round_fail(r, "death record of producer %u, killed "
				      "in a %s of %" PRIu64 " bytes: skipped "
				      "%" PRIu64 ", not in [%" PRIu64
				      ", %" PRIu64 "]: %s",
				   i,
				   p->cfg->fate == F_KILL_BATCH ? "claim_batch"
								: "claim",
				   bytes, d.skipped, lo, hi, text);
	}
	/* Everything it committed came before. */
	check_delivered(r, i, "at its death record");
	p->death_ns = now_ns();
	/* Noticed at all, but only by a timeout, or long after: a hang. */
	if (p->death_ns - p->kill_ns > DEATH_DEADLINE_NS)
		round_fail(r, "hang: the death record of producer %u came "
			      "%.1f s after it %s (%" PRIu64 " of its records "
			      "read in between): %s",
			   i, (double)(p->death_ns - p->kill_ns) / 1e9,
			   p->killed ? "was killed" : "exited", p->after_kill,
			   text);
	progress(r);
}

static int on_record(const struct lull_record *rec, void *arg)
{
	struct round *r = arg;
	uint8_t buf[REC_MAX];
	struct payload pl;
	struct rprod *p;
	uint32_t idx, want;
	char text[300];

	if (rec->type == LULL_TYPE_POISON) {
		if (r->poisons++)
			round_fail(r, "a second poison record");
		r->poison_seen = true;
		progress(r);
		return LULL_READ_CONTINUE;
	}
	if (rec->type == LULL_TYPE_DEATH) {
		on_death(r, rec);
		return LULL_READ_CONTINUE;
	}
	if (rec->type == LULL_TYPE_FATAL) {
		r->fatal++;
		round_fail(r, "a fatal record");
		return LULL_READ_CONTINUE;
	}
	r->records++;
	if (r->poison_seen)
		round_fail(r, "a record after the poison");
	if (rec->type < 1) {
		round_fail(r, "a record of reserved type %d", rec->type);
		return LULL_READ_CONTINUE;
	}
	if (rec->len < REC_MIN || rec->len > REC_MAX) {
		round_fail(r, "a record of %u bytes", rec->len);
		return LULL_READ_CONTINUE;
	}
	/* Copied first: the writer's process could still change it. */
	memcpy(buf, rec->data, rec->len);
	memcpy(&pl, buf, sizeof(pl));
	idx = pl.id - r->base_id;
	if (idx >= r->forked) {
		round_fail(r, "a record of unknown producer id %u (round's "
			      "ids %u..%u), %u bytes: torn?",
			   pl.id, r->base_id, r->base_id + r->forked - 1,
			   rec->len);
		return LULL_READ_CONTINUE;
	}
	p = &r->p[idx];
	want = (uint32_t)p->delivered + 1;
	if (pl.len != rec->len || checksum(buf, rec->len) != pl.check ||
	    rec->type != id_type(pl.id)) {
		size_t at = sizeof(pl);

		while (at < rec->len && buf[at] == pattern_at(pl.id, pl.seq, at))
			at++;
		prod_text(r, idx, text, sizeof(text));
		round_fail(r,
			   "a torn record of producer %u: seq %u (want %u), "
			   "len %u (header says %u), type %d, by %s, "
			   "pattern good up to byte %zu: %s",
			   idx, pl.seq, want, rec->len, pl.len, rec->type,
			   pl.how < HOWS ? how_names[pl.how] : "?", at, text);
		return LULL_READ_CONTINUE;
	}
	if (pl.flags & PL_ABORTED) {
		prod_text(r, idx, text, sizeof(text));
		round_fail(r, "an aborted claim arrived: producer %u seq %u "
			      "(by %s): %s",
			   idx, pl.seq, how_names[pl.how], text);
		return LULL_READ_CONTINUE;
	}
	if (p->death_seen && !p->after_death++) {
		prod_text(r, idx, text, sizeof(text));
		round_fail(r, "record %u of producer %u after its death "
			      "record (and maybe more): %s",
			   pl.seq, idx, text);
	}
	if (pl.seq != want) {
		prod_text(r, idx, text, sizeof(text));
		round_fail(r, "producer %u: seq %u arrived, %u expected (%s; "
			      "by %s): %s",
			   idx, pl.seq, want,
			   pl.seq < want ? "duplicate or reordered" : "gap",
			   how_names[pl.how], text);
		/* Resynchronise, so that one fault is reported once. */
		if (pl.seq > want)
			p->delivered = pl.seq;
		return LULL_READ_CONTINUE;
	}
	p->delivered = pl.seq;
	if (p->killed)
		p->after_kill++;
	return LULL_READ_CONTINUE;
}

/* ------------------------------------------------------------------------
 * Running a round
 */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * The first consumer role a process takes of a shared ring makes its
 * beacon, whose descriptor stays open until the process ends: take one
 * before counting descriptors, so that the count is of what rounds leave.
 */
static void beacon_warm_up(void)
{
	struct lull_ring *ring;

	if (lull_ring_create_shared(&ring, 4096, LULL_RING_MPSC, 0) < 0 ||
	    lull_ring_destroy(ring) < 0) {
		fprintf(stderr, "stress_kill: no shared ring to warm up\n");
		exit(2);
	}
}

static void fork_producer(struct round *r, unsigned i)
{
	struct rprod *p = &r->p[i];
	pid_t pid;

	memset(&chans[i], 0, sizeof(chans[i]));
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(2);
	}
	if (pid == 0)
		child_main(r->cfg, i, r->ring_fd, r->base_id + i);
	p->pid = pid;
	wd_pids[i] = pid;
	p->stage = S_FORKED;
	p->fork_ns = p->stage_ns = now_ns();
	if (i >= r->forked)
		r->forked = i + 1;
	progress(r);
}

static void do_kill(struct round *r, unsigned i)
{
	struct rprod *p = &r->p[i];

	if (r->cfg->stall_us && !r->stalled) {
		/* Stop reading for a while: the ring fills up first. */
		r->stalled = true;
		nap_us(r->cfg->stall_us);
	}
	p->op_at_kill = atomic_load(&chans[i].op);
	p->kill_ns = now_ns();
	if (kill(p->pid, SIGKILL) < 0)
		round_fail(r, "kill(%d): %s", (int)p->pid, strerror(errno));
	p->killed = p->died = true;
	p->stage = S_GONE;
	progress(r);
}

/* Look at each producer's side channel, act on its fate when due. */
static void drive(struct round *r)
{
	const struct rcfg *c = r->cfg;
	uint64_t now = now_ns();
	bool all_repl = true;
	char text[300];

	for (unsigned i = 0; i < r->forked; i++) {
		struct rprod *p = &r->p[i];
		struct chan *ch = &chans[i];
		uint32_t state = atomic_load_explicit(&ch->state,
						      memory_order_acquire);

		if (p->stage == S_GONE || p->stage == S_NONE)
			continue;
		if (state == CH_ERROR) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "producer %u failed: %s (%s)", i,
				   ch->error, text);
			p->stage = S_GONE;
			progress(r);
			continue;
		}
		if (state == CH_CLOSED) {
			/* Only the SPSC successor may find the ring closed. */
			if (p->cfg->role != R_SUCCESSOR) {
				prod_text(r, i, text, sizeof(text));
				round_fail(r, "producer %u found the ring "
					      "closed (attach %d): %s",
					   i, atomic_load(&ch->attach_ret),
					   text);
			}
			/* It may have got in and closed before we looked. */
			p->attached = atomic_load(&ch->attach_ret) == 0;
			if (p->attached)
				r->closing_race = true;
			p->closed = true;
			p->stage = S_GONE;
			progress(r);
			continue;
		}
		switch (p->stage) {
		case S_FORKED:
			if (state != CH_ATTACHED)
				break;
			p->attached = true;
			p->attach_ns = now;
			p->stage = S_RUNNING;
			progress(r);
			/* The SPSC successor, once the first one runs. */
			if (c->successor && i == 0)
				fork_producer(r, 1);
			break;
		case S_RUNNING: {
			uint64_t from = p->attach_ns;

			/*
			 * Nobody acts before every first producer is in: one
			 * attaching after the others are gone would find the
			 * ring closed, as documented, and prove nothing.
			 */
			if (!r->first_attached_ns)
				break;
			if (from < r->first_attached_ns)
				from = r->first_attached_ns;
			if (p->cfg->anchor) {
				if (!r->repl_attached_ns)
					break;
				from = r->repl_attached_ns;
			}
			if (now < from + (uint64_t)p->cfg->delay_us * 1000)
				break;
			p->act_ns = now;
			switch (p->cfg->fate) {
			case F_KILL:
				do_kill(r, i);
				break;
			case F_KILL_CLAIM:
			case F_KILL_BATCH:
				atomic_store_explicit(
					&ch->command,
					p->cfg->fate == F_KILL_CLAIM
						? CMD_PARK_CLAIM
						: CMD_PARK_BATCH,
					memory_order_release);
				p->stage = S_PARKING;
				p->stage_ns = now;
				break;
			case F_EXIT:
				atomic_store_explicit(&ch->command, CMD_EXIT,
						      memory_order_release);
				p->stage = S_ENDING;
				p->stage_ns = now;
				break;
			default:
				atomic_store_explicit(&ch->command, CMD_DETACH,
						      memory_order_release);
				p->stage = S_ENDING;
				p->stage_ns = now;
				break;
			}
			progress(r);
			break;
		}
		case S_PARKING:
			if (state == CH_PARKED)
				do_kill(r, i);
			break;
		case S_ENDING:
			if (state == CH_EXITING) {
				p->died = true;
				p->kill_ns = now;
				p->stage = S_GONE;
				progress(r);
			} else if (state == CH_DETACHED) {
				p->stage = S_GONE;
				progress(r);
			}
			break;
		default:
			break;
		}
	}
	if (!r->first_attached_ns) {
		bool all = true;

		for (unsigned i = 0; i < c->nfirst; i++)
			if (!r->p[i].attached && r->p[i].stage != S_GONE)
				all = false;
		if (all)
			r->first_attached_ns = now_ns();
	}
	/* Replacements: after the first death record, while the anchor
	 * holds the ring open. */
	if (c->nrepl && !r->repl_forked && r->deaths) {
		r->repl_forked = true;
		for (unsigned i = c->nprod - c->nrepl; i < c->nprod; i++)
			fork_producer(r, i);
	}
	if (c->nrepl && r->repl_forked && !r->repl_attached_ns) {
		for (unsigned i = c->nprod - c->nrepl; i < c->nprod; i++)
			if (!r->p[i].attached && r->p[i].stage != S_GONE)
				all_repl = false;
		if (all_repl)
			r->repl_attached_ns = now_ns();
	}
}

static bool all_gone(struct round *r)
{
	for (unsigned i = 0; i < r->forked; i++)
		if (r->p[i].stage != S_GONE)
			return false;
	/* Replacements still to come (after a death record). */
	return !r->cfg->nrepl || r->repl_forked;
}

/* Nothing moved for too long, or a death went unnoticed: say what was
 * going on. */
static bool hang_check(struct round *r)
{
	uint64_t now = now_ns();
	char text[300];

	for (unsigned i = 0; i < r->forked; i++) {
		struct rprod *p = &r->p[i];

		if (p->died && !p->death_seen && !r->poison_seen &&
		    now - p->kill_ns > DEATH_DEADLINE_NS) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "hang: no death record %.1f s after "
				      "producer %u %s (%u records read "
				      "since): %s",
				   (double)(now - p->kill_ns) / 1e9, i,
				   p->killed ? "was killed" : "exited",
				   (unsigned)p->after_kill, text);
			return true;
		}
		if ((p->stage == S_PARKING || p->stage == S_ENDING ||
		     p->stage == S_FORKED) &&
		    now - p->stage_ns > HANG_NS) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "hang: producer %u %s for %.1f s: %s", i,
				   p->stage == S_FORKED ? "not attached"
				   : p->stage == S_PARKING
					   ? "not parked"
					   : "not gone",
				   (double)(now - p->stage_ns) / 1e9, text);
			return true;
		}
	}
	if (r->last_progress_ns && now - r->last_progress_ns > HANG_NS) {
		round_fail(r, "hang: nothing moved for %.1f s (%s)",
			   (double)(now - r->last_progress_ns) / 1e9,
			   phase_names[wd_phase]);
		return true;
	}
	return false;
}

/* Read what is there: a few batches, so that the plan goes on too. */
static void read_some(struct round *r)
{
	int n;

	for (int k = 0; k < 16; k++) {
		unsigned before = r->records;

		n = lull_ring_read(r->ring, on_record, r, 64);
		if (r->records != before)
			progress(r);
		if (n == -EAGAIN)
			return;
		if (n == -EPIPE) {
			if (!r->poison_seen)
				round_fail(r, "-EPIPE from a read before the "
					      "poison");
			r->epipe_seen = true;
			return;
		}
		if (n < 0) {
			round_fail(r, "lull_ring_read: %d (%s)", n,
				   lull_strerror(n));
			r->epipe_seen = true; /* give up on the ring */
			return;
		}
	}
}

/* The time lull_ring_wait() may take now. */
static int64_t wait_for(struct round *r)
{
	uint64_t now = now_ns(), next = now + 2 * 1000 * 1000;

	for (unsigned i = 0; i < r->forked; i++) {
		struct rprod *p = &r->p[i];

		if (p->stage == S_FORKED || p->stage == S_PARKING ||
		    p->stage == S_ENDING)
			return 100 * 1000; /* a step to see soon */
		if (p->stage == S_RUNNING && !p->cfg->anchor &&
		    r->first_attached_ns) {
			uint64_t at = (p->attach_ns > r->first_attached_ns
					       ? p->attach_ns
					       : r->first_attached_ns) +
				      (uint64_t)p->cfg->delay_us * 1000;

			if (at < next)
				next = at;
		}
	}
	return next > now ? (int64_t)(next - now) : 0;
}

/* Kill whatever still runs, after a hang or at the end. */
static void kill_rest(struct round *r)
{
	for (unsigned i = 0; i < r->forked; i++)
		if (!r->p[i].reaped && r->p[i].pid > 0)
			kill(r->p[i].pid, SIGKILL);
}

static void reap(struct round *r)
{
	uint64_t deadline = now_ms() + REAP_MS;
	char st[40], text[300];
	bool told = false;

	for (unsigned i = 0; i < r->forked; i++) {
		struct rprod *p = &r->p[i];
		pid_t got;

		while (!p->reaped) {
			got = waitpid(p->pid, &p->wstatus, WNOHANG);
			if (got == p->pid) {
				p->reaped = true;
				break;
			}
			if (got < 0) {
				round_fail(r, "waitpid(%d): %s", (int)p->pid,
					   strerror(errno));
				p->reaped = true;
				break;
			}
			if (now_ms() > deadline && !told) {
				prod_text(r, i, text, sizeof(text));
				round_fail(r, "producer %u still running "
					      "after the round: %s",
					   i, text);
				kill_rest(r);
				told = true;
			}
			nap_us(200);
		}
		wd_pids[i] = 0;
		if (r->hung)
			continue;
		/* The successor may have left on -EPIPE as we killed it. */
		if (p->killed && atomic_load(&chans[i].state) == CH_CLOSED) {
			p->closed = true;
			if (WIFEXITED(p->wstatus) &&
			    WEXITSTATUS(p->wstatus) == 0)
				continue;
		}
		/* Killed by us, or out by itself with status 0. */
		if (p->killed ? !(WIFSIGNALED(p->wstatus) &&
				  WTERMSIG(p->wstatus) == SIGKILL)
			      : !(WIFEXITED(p->wstatus) &&
				  WEXITSTATUS(p->wstatus) == 0)) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "producer %u ended with %s: %s", i,
				   status_text(p->wstatus, st, sizeof(st)),
				   text);
		}
	}
}

/* After the poison: everything as documented. */
static void check_end(struct round *r, struct run *run)
{
	const struct rcfg *c = r->cfg;
	struct lull_ring_stats st;
	struct lull_producer *prod;
	unsigned expected = 0;
	char text[300];
	int ret;

	ret = lull_ring_read(r->ring, on_record, r, 64);
	if (ret != -EPIPE)
		round_fail(r, "a read after the poison: %d", ret);
	ret = lull_ring_wait(r->ring, 0);
	if (ret != -EPIPE)
		round_fail(r, "lull_ring_wait after the poison: %d", ret);
	ret = lull_producer_attach(r->ring, 0, &prod);
	if (ret != -EPIPE) {
		round_fail(r, "an attach after the poison: %d", ret);
		if (ret == 0)
			lull_producer_detach(prod);
	}
	for (unsigned i = 0; i < r->forked; i++) {
		struct rprod *p = &r->p[i];
		bool successor = p->cfg->role == R_SUCCESSOR;

		if (p->cfg->role == R_REPLACEMENT &&
		    atomic_load(&chans[i].attach_ret) != 0) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "replacement producer %u: attach %d "
				      "while the anchor held the ring open: %s",
				   i, atomic_load(&chans[i].attach_ret), text);
		}
		/* A close drive() did not see before the round ended. */
		if (!p->closed && !successor &&
		    atomic_load(&chans[i].state) == CH_CLOSED) {
			prod_text(r, i, text, sizeof(text));
			round_fail(r, "producer %u found the ring closed "
				      "(attach %d): %s",
				   i, atomic_load(&chans[i].attach_ret), text);
		}
		if (!p->attached)
			continue;
		if (p->died && !p->closed && !p->death_seen) {
			/*
			 * The successor that got in as the ring closed: the
			 * poison may come before its death is noticed.
			 */
			if (successor && r->poisons) {
				r->closing_race = true;
			} else {
				prod_text(r, i, text, sizeof(text));
				round_fail(r, "no death record for producer "
					      "%u: %s",
					   i, text);
			}
		}
		if (p->died && !p->closed)
			expected++;
		if (!p->death_seen || !p->died)
			check_delivered(r, i, "at the end");
		if (p->killed && p->death_seen && p->death_ns > p->kill_ns) {
			enum topo t = c->topo;

			if (run->nlat[t] == run->caplat[t]) {
				run->caplat[t] = run->caplat[t] * 2 + 64;
				run->lat[t] = realloc(run->lat[t],
						      run->caplat[t] *
							      sizeof(uint64_t));
				if (!run->lat[t]) {
					fprintf(stderr, "out of memory\n");
					exit(2);
				}
			}
			run->lat[t][run->nlat[t]++] = p->death_ns - p->kill_ns;
			/* Not a failure, but worth a look. */
			if (p->death_ns - p->kill_ns > SLOW_DEATH_NS)
				printf("NOTE round %u (--seed %" PRIu64
				       " --round %u%s): the death record of "
				       "producer %u came %.1f ms after its "
				       "kill (%s, %" PRIu64 " of its records "
				       "read in between)\n",
				       c->round, r->opt->seed, c->round,
				       r->opt->filters, i,
				       (double)(p->death_ns - p->kill_ns) / 1e6,
				       op_names[p->op_at_kill], p->after_kill);
		}
	}
	if (r->poisons != 1)
		round_fail(r, "%u poison records", r->poisons);
	lull_ring_stats(r->ring, &st);
	if (st.producer_deaths != r->deaths &&
	    !(r->closing_race && st.producer_deaths > r->deaths))
		round_fail(r, "producer_deaths %" PRIu64 ", %u death records",
			   st.producer_deaths, r->deaths);
	if (r->deaths > expected)
		round_fail(r, "%u death records for %u dead producers",
			   r->deaths, expected);
	if (c->successor && r->forked > 1) {
		struct rprod *s = &r->p[1];

		if (!s->attached)
			run->succ_refused++;
		else if (r->closing_race)
			run->succ_caught++;
		else
			run->succ_continued++;
	} else if (c->successor) {
		run->succ_none++;
	}
	for (unsigned i = 0; i < r->forked; i++)
		if (r->p[i].cfg->role == R_REPLACEMENT && r->p[i].attached)
			run->repl_attached++;
}

static bool run_round(struct run *run, struct round *r, const struct rcfg *c)
{
	const struct options *opt = run->opt;
	int fds_before, fds_after, ret;
	uint64_t waited;
	int64_t tmo;

	memset(r, 0, sizeof(*r));
	r->cfg = c;
	r->opt = opt;
	r->base_id = c->round * 16u;
	for (unsigned i = 0; i < MAX_RP; i++)
		r->p[i].cfg = &c->p[i];
	wd_phase = PH_SETUP;
	snprintf(wd_message, sizeof(wd_message),
		 "stress_kill: watchdog: round %u (--seed %" PRIu64
		 " --round %u%s) ran past %u s: %s; phase: ",
		 c->round, opt->seed, c->round, opt->filters, opt->watchdog,
		 c->text);
	alarm(opt->watchdog);
	fds_before = count_fds();

	ret = lull_ring_create_shared(&r->ring, c->capacity, c->flags, 0);
	if (ret < 0) {
		round_fail(r, "lull_ring_create_shared: %d (%s)", ret,
			   lull_strerror(ret));
		return false;
	}
	r->ring_fd = lull_ring_fd(r->ring);
	if (r->ring_fd < 0) {
		round_fail(r, "lull_ring_fd: %d", r->ring_fd);
		lull_ring_destroy(r->ring);
		return false;
	}
	r->start_ns = now_ns();
	for (unsigned i = 0; i < c->nfirst; i++)
		fork_producer(r, i);

	wd_phase = PH_RUNNING;
	while (!r->epipe_seen) {
		drive(r);
		if (all_gone(r) && wd_phase == PH_RUNNING)
			wd_phase = PH_DRAINING;
		if (hang_check(r)) {
			r->hung = true;
			break;
		}
		/* Every producer gone: only the ring's own watch is left to
		 * wake us, bounded as a whole. */
		tmo = wd_phase == PH_DRAINING ? (int64_t)HANG_NS : wait_for(r);
		waited = now_ns();
		ret = lull_ring_wait(r->ring, tmo);
		waited = now_ns() - waited;
		/* Only its timeout ended it, whatever it then found. */
		if (wd_phase == PH_DRAINING && waited >= HANG_NS && ret == 0) {
			round_fail(r, "hang: lull_ring_wait slept its whole "
				      "%.0f s with every producer gone, then "
				      "found work (%u death records, %s)",
				   (double)HANG_NS / 1e9, r->deaths,
				   r->poison_seen ? "poison seen"
						  : "no poison");
			r->last_progress_ns = now_ns();
		}
		if (ret == -ETIMEDOUT) {
			if (wd_phase == PH_DRAINING) {
				round_fail(r, "hang: lull_ring_wait timed out "
					      "after %.0f s with every "
					      "producer gone (%u death records, "
					      "%s)",
					   (double)HANG_NS / 1e9, r->deaths,
					   r->poison_seen ? "poison seen"
							  : "no poison");
				r->hung = true;
				break;
			}
			continue;
		}
		if (ret == -EPIPE) {
			if (!r->poison_seen)
				round_fail(r, "lull_ring_wait: -EPIPE before "
					      "the poison");
			break;
		}
		if (ret < 0) {
			round_fail(r, "lull_ring_wait: %d (%s)", ret,
				   lull_strerror(ret));
			r->hung = true;
			break;
		}
		read_some(r);
		/* After the poison, anyone still running leaves. */
		if (r->poison_seen)
			for (unsigned i = 0; i < r->forked; i++)
				if (r->p[i].stage != S_GONE &&
				    r->p[i].stage != S_NONE)
					atomic_store(&chans[i].command,
						     CMD_DETACH);
	}
	if (r->hung) {
		char text[300];

		for (unsigned i = 0; i < r->forked; i++) {
			prod_text(r, i, text, sizeof(text));
			printf("  round %u hung: %s\n", c->round, text);
		}
		kill_rest(r);
	}

	wd_phase = PH_REAPING;
	/* Children that saw the poison (the successor) leave by themselves. */
	for (unsigned i = 0; i < r->forked; i++)
		if (!r->p[i].killed && r->p[i].stage != S_GONE)
			atomic_store(&chans[i].command, CMD_DETACH);
	reap(r);

	wd_phase = PH_CHECKING;
	if (!r->hung)
		check_end(r, run);
	else
		lull_ring_shutdown(r->ring, LULL_SHUTDOWN_IMMEDIATE);
	ret = lull_ring_destroy(r->ring);
	if (ret < 0)
		round_fail(r, "lull_ring_destroy: %d", ret);
	fds_after = count_fds();
	if (fds_after != fds_before)
		round_fail(r, "%d descriptors open before the round, %d after",
			   fds_before, fds_after);
	alarm(0);
	return r->errors == 0;
}

/* ------------------------------------------------------------------------
 * The watchdog, options, main
 */

static void on_alarm(int sig)
{
	static const char nl[] = "\n";
	const char *ph = (unsigned)wd_phase < PHASES ? phase_names[wd_phase]
						     : "?";

	(void)sig;
	if (write(1, wd_message, strlen(wd_message)) < 0 ||
	    write(1, ph, strlen(ph)) < 0 || write(1, nl, 1) < 0) {
		/* nothing to do */
	}
	for (unsigned i = 0; i < MAX_RP; i++)
		if (wd_pids[i] > 0)
			kill(wd_pids[i], SIGKILL);
	abort();
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stress_kill [--rounds N] [--seed S] [--round R] "
		"[--capacity N]\n"
		"                   [--topology spsc|mpsc|lanes]... "
		"[--watchdog-seconds S] [--verbose]\n"
		"  --rounds N            rounds to run (default %u)\n"
		"  --seed S              the seed of every round's "
		"configuration (default %llu)\n"
		"  --round R             run only round R of that seed\n"
		"  --capacity N          the ring's capacity, a power of two "
		"(default: drawn,\n"
		"                        2 KiB to 64 KiB)\n"
		"  --topology T          only rounds of these topologies\n"
		"  --watchdog-seconds S  abort when a round takes longer than "
		"S s (default %u)\n"
		"  --verbose             print every round's configuration\n"
		"  --child-close-fds     each producer closes the descriptors it "
		"inherited\n"
		"                        (but the ring's) first thing after "
		"fork\n",
		DEFAULT_ROUNDS, (unsigned long long)DEFAULT_SEED,
		DEFAULT_WATCHDOG);
}

static void parse(int argc, char **argv, struct options *opt)
{
	bool any_topo = false;
	char *end;

	memset(opt, 0, sizeof(*opt));
	opt->rounds = DEFAULT_ROUNDS;
	opt->only_round = UINT32_MAX;
	opt->seed = DEFAULT_SEED;
	opt->watchdog = DEFAULT_WATCHDOG;
	for (int i = 1; i < argc; i++) {
		const char *name = argv[i], *v = i + 1 < argc ? argv[i + 1]
							      : NULL;
		unsigned long long n;

		if (!strcmp(name, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(name, "--verbose")) {
			opt->verbose = true;
			continue;
		}
		if (!strcmp(name, "--child-close-fds")) {
			opt->child_close_fds = true;
			n = strlen(opt->filters);
			snprintf(opt->filters + n, sizeof(opt->filters) - n,
				 " --child-close-fds");
			continue;
		}
		if (!v) {
			usage(stderr);
			exit(2);
		}
		i++;
		if (!strcmp(name, "--topology")) {
			int t;

			for (t = 0; t < TOPOS; t++)
				if (!strcmp(v, topo_names[t]))
					break;
			if (t == TOPOS) {
				usage(stderr);
				exit(2);
			}
			opt->topo[t] = any_topo = true;
			n = strlen(opt->filters);
			snprintf(opt->filters + n, sizeof(opt->filters) - n,
				 " --topology %s", v);
			continue;
		}
		errno = 0;
		n = strtoull(v, &end, 0);
		if (errno || *end || end == v) {
			usage(stderr);
			exit(2);
		}
		if (!strcmp(name, "--rounds") && n > 0 && n < (1u << 27)) {
			opt->rounds = (uint32_t)n;
		} else if (!strcmp(name, "--seed")) {
			opt->seed = n;
		} else if (!strcmp(name, "--round") && n < (1u << 27)) {
			opt->only_round = (uint32_t)n;
		} else if (!strcmp(name, "--capacity") &&
			   n >= LULL_RING_MIN_CAPACITY &&
			   n <= ((size_t)1 << 24) && !(n & (n - 1))) {
			opt->capacity = (size_t)n;
		} else if (!strcmp(name, "--watchdog-seconds") && n > 0 &&
			   n < 100000) {
			opt->watchdog = (unsigned)n;
		} else {
			usage(stderr);
			exit(2);
		}
	}
	for (int t = 0; t < TOPOS; t++)
		opt->topo[t] |= !any_topo;
	if (opt->capacity) {
		/* Records of 16 bytes at least must fit. */
		if (opt->capacity / 8 < REC_MIN + 8) {
			fprintf(stderr, "--capacity: at least %u\n",
				(REC_MIN + 8) * 8);
			exit(2);
		}
		size_t at = strlen(opt->filters);

		snprintf(opt->filters + at, sizeof(opt->filters) - at,
			 " --capacity %zu", opt->capacity);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void print_latency(struct run *run)
{
	uint64_t *all = NULL;
	size_t nall = 0;

	for (int t = 0; t <= TOPOS; t++) {
		uint64_t *v = t < TOPOS ? run->lat[t] : all;
		size_t n = t < TOPOS ? run->nlat[t] : nall;

		if (t < TOPOS && n) {
			all = realloc(all, (nall + n) * sizeof(*all));
			if (!all)
				exit(2);
			memcpy(all + nall, v, n * sizeof(*v));
			nall += n;
		}
		if (!n)
			continue;
		qsort(v, n, sizeof(*v), cmp_u64);
		printf("death latency %-5s %6zu kills: median %8.1f us, "
		       "p99 %8.1f us, max %8.1f us\n",
		       t < TOPOS ? topo_names[t] : "all", n,
		       (double)v[n / 2] / 1e3, (double)v[n * 99 / 100] / 1e3,
		       (double)v[n - 1] / 1e3);
	}
	free(all);
}

int main(int argc, char **argv)
{
	static struct round round_state;
	struct options opt;
	struct run run = { 0 };
	struct rcfg cfg;
	struct sigaction sa;
	uint32_t first, last, passed = 0, failed = 0, shown = 0;
	uint64_t start = now_ms();
	int fds_start, fds_end, status;
	bool end_ok = true;

	parse(argc, argv, &opt);
	run.opt = &opt;
	child_close_fds = opt.child_close_fds;
	parent_pid = getpid();
	chans = mmap(NULL, sizeof(struct chan) * MAX_RP,
		     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (chans == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	beacon_warm_up();
	fds_start = count_fds();

	first = opt.only_round == UINT32_MAX ? 0 : opt.only_round;
	last = opt.only_round == UINT32_MAX ? opt.rounds : opt.only_round + 1;
	printf("stress_kill: lull %s, rounds %u..%u, seed %" PRIu64
	       "%s, watchdog %u s a round, uring-futex %s\n",
	       lull_version(), first, last - 1, opt.seed, opt.filters,
	       opt.watchdog,
	       lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0
		       ? "yes"
		       : "no (deaths are noticed only when something else "
			 "wakes the consumer)");
	fflush(stdout);

	for (uint32_t n = first; n < last; n++) {
		bool ok;

		round_config(&opt, n, &cfg);
		if (opt.verbose) {
			printf("round %u: %s\n", n, cfg.text);
			fflush(stdout);
		}
		ok = run_round(&run, &round_state, &cfg);
		run.rounds[cfg.topo]++;
		run.records[cfg.topo] += round_state.records;
		run.deaths[cfg.topo] += round_state.deaths;
		for (unsigned i = 0; i < round_state.forked; i++)
			run.kills[cfg.topo] += round_state.p[i].killed;
		if (ok) {
			passed++;
		} else {
			failed++;
			run.failed[cfg.topo]++;
			if (shown++ < 100) {
				printf("FAIL round %u (--seed %" PRIu64
				       " --round %u%s): %s\n",
				       n, opt.seed, n, opt.filters, cfg.text);
				for (unsigned e = 0; e < round_state.errors &&
						     e < 6;
				     e++)
					printf("  - %s\n", round_state.error[e]);
				if (round_state.errors > 6)
					printf("  - and %u more\n",
					       round_state.errors - 6);
			}
			fflush(stdout);
		}
	}

	/* Nothing left behind: descriptors, children. */
	fds_end = count_fds();
	if (fds_end != fds_start) {
		printf("FAIL at the end: %d descriptors open at the start, %d "
		       "now\n",
		       fds_start, fds_end);
		end_ok = false;
	}
	if (waitpid(-1, &status, WNOHANG) != -1 || errno != ECHILD) {
		printf("FAIL at the end: a child process is left\n");
		end_ok = false;
	}
	if (!end_ok && passed) {
		/* Counted against the last round. */
		passed--;
		failed++;
	}

	printf("stress_kill: %u rounds in %.1f s, seed %" PRIu64 "\n",
	       last - first, (double)(now_ms() - start) / 1000, opt.seed);
	for (int t = 0; t < TOPOS; t++)
		if (run.rounds[t])
			printf("  %-5s %6" PRIu64 " rounds, %6" PRIu64
			       " failed, %9" PRIu64 " records, %6" PRIu64
			       " kills, %6" PRIu64 " death records\n",
			       topo_names[t], run.rounds[t], run.failed[t],
			       run.records[t], run.kills[t], run.deaths[t]);
	if (run.rounds[T_SPSC])
		printf("  spsc successor: went on with the ring %" PRIu64
		       ", refused (-EPIPE at attach) %" PRIu64
		       ", caught in the close %" PRIu64 "\n",
		       run.succ_continued, run.succ_refused, run.succ_caught);
	if (run.rounds[T_MPSC] || run.rounds[T_LANES])
		printf("  replacements attached after a death: %" PRIu64 "\n",
		       run.repl_attached);
	print_latency(&run);
	for (int t = 0; t < TOPOS; t++)
		free(run.lat[t]);
	printf("%u passed, %u failed\n", passed, failed);
	fflush(stdout);
	return failed ? 1 : 0;
}
