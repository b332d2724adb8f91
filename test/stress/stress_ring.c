/* SPDX-License-Identifier: MIT */
/*
 * stress_ring.c - multi-threaded stress test of the SPSC, MPSC and LANES
 * rings.
 *
 * A plain-main program (ThreadSanitizer cannot run Criterion).  For each
 * configuration - spsc, mpsc with 1, 2, 4 and 8 producer threads, and
 * lanes with 2 and 8 (a lane each), on a small ring so that it wraps
 * constantly - producers send a deterministic stream of records of random
 * sizes through every write path (write, writev, claim + commit, claim +
 * abort which sends nothing, and batches: a write_batch, a write_array of
 * consecutive records that share a length, or a claim_batch committed or
 * aborted whole), and the consumer, on the main thread, drains it through
 * every read path (lull_ring_read and lull_ring_read_items with varying
 * limits and handlers that continue, stop or keep, and lull_ring_peek +
 * lull_ring_release).  A producer that finds the ring full either yields
 * or blocks in lull_producer_wait(), chosen at random; a wait of 450 ms or
 * more means a lost wake-up (the wait has no timer of its own: only its
 * caller's 2 s timeout ends a wait whose wake-up was lost).
 *
 * For every record the consumer checks the type (producer id + 1), that the
 * producer's records arrive in order with none lost and none repeated
 * (test/lib's ledger, fed the seq each record's stamp carries), that the
 * length is the one the producer chose for that sequence number, the
 * alignment, and every payload byte.  At the end every producer's count must
 * match, and the ring must end the way the last producer's detach ends it:
 * with exactly one poison record (by read or by peek, chosen at random),
 * then -EPIPE from read and peek.
 *
 * A watchdog (test/lib's) ends the process with a message naming the
 * configuration and its progress counters when nothing moves for
 * --watchdog-seconds: a hang fails, it never stalls CI.
 *
 * Output: one line per configuration, then "N passed, M failed".  The exit
 * status is 0 only when every configuration passed.
 *
 * The Makefile builds it as build/test/stress/stress_ring and, with
 * ThreadSanitizer, as build/test/tsan/stress_ring.  Run it with --help for
 * the options; --seed reproduces a run's record stream (not its timing).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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

#include <lull.h>

#include "../lib/ledger.h"
#include "../lib/threads.h"
#include "../lib/topo.h"

#define MAX_PRODUCERS 8
#define LINE_PAIR 128

#define DEFAULT_RECORDS 10000000ull
#define DEFAULT_CAPACITY ((size_t)64 << 10)
#define DEFAULT_SEED 1ull
#define DEFAULT_WATCHDOG 60u

/* Every record's payload starts with {u64 seq, u32 producer, u32 len}. */
#define STAMP_SIZE 16u

#define GOLDEN 0x9e3779b97f4a7c15ull

#define BATCH_MAX 16u /* records in one batch at most */

struct config {
	const char *name;
	unsigned topology;	/* LULL_RING_SPSC, _MPSC or _LANES(n) */
	unsigned producers;
	/*
	 * Lay the region out in our own memory with lull_ring_create_in(),
	 * and attach even-numbered producers through handles of their own
	 * from lull_ring_open(), as another process would.
	 */
	bool in_place;
};

static const struct config configs[] = {
	{ "spsc", LULL_RING_SPSC, 1, true },
	{ "mpsc1", LULL_RING_MPSC, 1, false },
	{ "mpsc2", LULL_RING_MPSC, 2, true },
	{ "mpsc4", LULL_RING_MPSC, 4, false },
	{ "mpsc8", LULL_RING_MPSC, 8, true },
	{ "lanes2", LULL_RING_LANES(2), 2, true },
	{ "lanes8", LULL_RING_LANES(8), 8, false },
};

#define NR_CONFIGS (sizeof(configs) / sizeof(configs[0]))

struct options {
	uint64_t records;
	uint64_t seed;
	size_t capacity;
	unsigned watchdog_seconds;
	bool selected[NR_CONFIGS];
};

/* The producer calls of one topology (test/lib/topo.h) drive both. */

enum phase {
	PHASE_SETUP,
	PHASE_RUNNING,
	PHASE_JOINING,
	PHASE_TEARDOWN,
};

static const char *const phase_names[] = {
	"setting up", "running", "joining the producers", "tearing down",
};

/* What a producer is doing, for the watchdog's message. */
enum doing {
	DOING_ATTACH,
	DOING_SEND,
	DOING_WAIT,
	DOING_CLAIM,
	DOING_DETACH,
	DOING_DONE,
};

static const char *const doing_names[] = {
	"attaching", "sending", "retrying on a full ring", "holding a claim",
	"detaching", "done",
};

enum { FAILED_NONE, FAILED_WRITING, FAILED };

struct run;

/* One producer thread; written by that thread, on lines of its own. */
struct producer {
	alignas(LINE_PAIR) struct run *run;
	unsigned id;
	uint64_t quota;		/* records to send */
	uint64_t key;		/* seeds the lengths and payloads */
	uint64_t rng;		/* method choices */
	struct lull_ring *handle; /* the handle to attach through */
	struct lull_producer *prod;
	unsigned char *buf;	/* payload staging for write and writev */
	unsigned char *batch_buf; /* BATCH_MAX payloads for write_batch */
	pthread_t thread;
	bool started;

	/* Progress for the watchdog (what it sent: the ledger's). */
	atomic_uint_fast64_t full;	/* -EAGAIN retries */
	atomic_uint_fast64_t waits;	/* of them, in lull_producer_wait() */
	atomic_uint_fast64_t slow_waits; /* waits of 450 ms or more */
	atomic_uint_fast64_t aborts;	/* claims aborted */
	atomic_int doing;		/* enum doing */
};

/* The consumer's state, written by the main thread only. */
struct consumer {
	alignas(LINE_PAIR) struct run *run;
	uint64_t rng;
	uint64_t received;

	/* Per lull_ring_read() call, for the handler. */
	unsigned limit;
	unsigned calls;
	int action;		/* LULL_READ_STOP or _KEEP at call action_at */
	unsigned action_at;
	bool kept_hit;		/* the handler returned LULL_READ_KEEP */
	bool bad;		/* a check failed: stop the batch */

	/* A record left in place, which must come back next. */
	bool kept;
	int32_t kept_type;
	uint32_t kept_len;

	bool forbid;		/* a read that must not call the handler */
	unsigned taken;		/* records consumed so far in the read */
	bool ended;		/* the handler returned STOP or KEEP */
	uint64_t empty_local;

	/* Progress for the watchdog (what it took: the ledger's). */
	atomic_uint_fast64_t empty;	/* -EAGAIN from read or peek */
};

struct run {
	const struct config *cfg;
	const struct options *opt;
	const struct topo *ops;
	struct lull_ring *ring;	/* the consumer handle */
	struct lull_ring *opened[MAX_PRODUCERS];
	void *mem;		/* region memory when in_place */
	size_t max_len;		/* largest payload we send */
	size_t max_payload;	/* lull_ring_max_payload() */
	uint64_t total;
	pthread_barrier_t start;

	/* Set on the first failure: every thread winds down. */
	atomic_bool stop;
	/*
	 * FAILED_WRITING: the first failure claimed msg and is writing it;
	 * FAILED: msg is complete.  Main reads msg after the joins, the
	 * watchdog once it sees FAILED.
	 */
	atomic_int failed;
	char msg[1024];

	atomic_int phase;

	/* What each producer sent and the consumer took, in order. */
	struct ledger ledger;
	/* For the watchdog's report: configurations passed, and run. */
	unsigned passed_before, selected;

	struct producer prod[MAX_PRODUCERS];
	struct consumer cons;
};

/* ---------------------------------------------------------------------- */
/* Deterministic pseudo-random numbers and the record stream               */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *state)
{
	*state += GOLDEN;
	return mix64(*state);
}

/* A uniform-enough value in [lo, hi]. */
static uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(state) % (hi - lo + 1);
}

/* The key of record @seq of producer @p, which fixes its length and bytes. */
static uint64_t record_key(const struct producer *p, uint64_t seq)
{
	return mix64(p->key ^ (seq * GOLDEN));
}

/*
 * The payload length of a record: mostly 8..256 bytes, 1/16 of them 0..15
 * (shorter than the stamp), 1/64 large, 1/256 exactly the largest.
 */
static size_t record_len(uint64_t key, size_t max_len)
{
	unsigned cls = key & 255;
	uint64_t h = key >> 8;
	size_t len;

	if (cls < 16)
		len = h % 16;
	else if (cls == 16)
		len = max_len;
	else if (cls <= 20 && max_len > 256)
		len = 257 + h % (max_len - 256);
	else
		len = 8 + h % 249;
	return len < max_len ? len : max_len;
}

/*
 * The payload of a record is a prefix of an endless stream: the stamp
 * {u64 seq, u32 producer, u32 len}, then 64-bit words key + (k + 1) * GOLDEN.
 */
static void stamp(unsigned char out[STAMP_SIZE], unsigned producer,
		  uint64_t seq, size_t len)
{
	uint32_t id = producer, l = (uint32_t)len;

	memcpy(out, &seq, 8);
	memcpy(out + 8, &id, 4);
	memcpy(out + 12, &l, 4);
}

static void payload_fill(unsigned char *dst, unsigned producer, uint64_t seq,
			 uint64_t key, size_t len)
{
	unsigned char head[STAMP_SIZE];
	uint64_t w = key;
	size_t off;

	if (!len)
		return;
	stamp(head, producer, seq, len);
	memcpy(dst, head, len < STAMP_SIZE ? len : STAMP_SIZE);
	for (off = STAMP_SIZE; off < len; off += 8) {
		w += GOLDEN;
		memcpy(dst + off, &w, len - off < 8 ? len - off : 8);
	}
}

/* Offset of the first byte that differs from the stream, or @len. */
static size_t payload_check(const unsigned char *src, unsigned producer,
			    uint64_t seq, uint64_t key, size_t len)
{
	unsigned char want[STAMP_SIZE];
	uint64_t w = key;
	size_t off, i, n;

	stamp(want, producer, seq, len);
	n = len < STAMP_SIZE ? len : STAMP_SIZE;
	for (i = 0; i < n; i++)
		if (src[i] != want[i])
			return i;
	for (off = STAMP_SIZE; off < len; off += 8) {
		n = len - off < 8 ? len - off : 8;
		w += GOLDEN;
		if (memcmp(src + off, &w, n) == 0)
			continue;
		memcpy(want, &w, 8);
		for (i = 0; i < n; i++)
			if (src[off + i] != want[i])
				return off + i;
	}
	return len;
}

/* ---------------------------------------------------------------------- */
/* Failure and progress                                                    */

static bool stopped(struct run *run)
{
	/* Only a flag: what failed is read after the joins. */
	return atomic_load_explicit(&run->stop, memory_order_relaxed);
}

__attribute__((format(printf, 2, 3)))
static void fail(struct run *run, const char *fmt, ...)
{
	int expected = FAILED_NONE;
	va_list ap;

	/* The first failure owns msg; later ones are consequences. */
	if (atomic_compare_exchange_strong_explicit(&run->failed, &expected,
						    FAILED_WRITING,
						    memory_order_relaxed,
						    memory_order_relaxed)) {
		va_start(ap, fmt);
		vsnprintf(run->msg, sizeof(run->msg), fmt, ap);
		va_end(ap);
		/* Pairs with the watchdog's acquire: msg is complete. */
		atomic_store_explicit(&run->failed, FAILED,
				      memory_order_release);
	}
	atomic_store_explicit(&run->stop, true, memory_order_relaxed);
}

static void set_phase(struct run *run, enum phase phase)
{
	atomic_store_explicit(&run->phase, phase, memory_order_relaxed);
}

static void set_doing(struct producer *p, enum doing doing)
{
	atomic_store_explicit(&p->doing, doing, memory_order_relaxed);
}

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------------- */
/* Producers                                                               */

enum method { M_WRITE, M_WRITEV, M_CLAIM };

static const char *const method_names[] = { "write", "writev", "claim" };

/* A record one byte over the limit is refused before anything else. */
static void check_msgsize(struct producer *p)
{
	struct run *run = p->run;
	void *dst = NULL;
	int ret;

	ret = run->ops->claim(p->prod, (int32_t)p->id + 1,
			      run->max_payload + 1, &dst);
	if (ret != -EMSGSIZE)
		fail(run, "producer %u: claim of max_payload + 1 = %zu bytes "
		     "returned %d (%s), expected -EMSGSIZE", p->id,
		     run->max_payload + 1, ret, lull_strerror(ret));
}

/*
 * Claim the space that record @seq takes, fill it with that very record and
 * abort: if the aborted claim ever reached the consumer, it would arrive as
 * a duplicate of @seq.  Commit with nothing claimed must then be refused.
 */
static bool try_abort(struct producer *p, uint64_t seq, uint64_t key,
		      size_t len)
{
	struct run *run = p->run;
	const struct topo *ops = run->ops;
	void *dst = NULL;
	int ret;

	ret = ops->claim(p->prod, (int32_t)p->id + 1, len, &dst);
	if (ret == -EAGAIN)
		return true;	/* the ring is full: nothing to abort now */
	if (ret) {
		fail(run, "producer %u seq %" PRIu64 ": claim of %zu bytes "
		     "(to abort): %s (%d)", p->id, seq, len,
		     lull_strerror(ret), ret);
		return false;
	}
	set_doing(p, DOING_CLAIM);
	if (len)
		payload_fill(dst, p->id, seq, key, len);
	ret = ops->abort(p->prod);
	set_doing(p, DOING_SEND);
	if (ret) {
		fail(run, "producer %u seq %" PRIu64 ": abort of a %zu-byte "
		     "claim: %s (%d)", p->id, seq, len, lull_strerror(ret),
		     ret);
		return false;
	}
	atomic_fetch_add_explicit(&p->aborts, 1, memory_order_relaxed);
	ret = ops->commit(p->prod);
	if (ret != -EINVAL) {
		fail(run, "producer %u seq %" PRIu64 ": commit after abort, "
		     "with nothing claimed, returned %d (%s), expected "
		     "-EINVAL", p->id, seq, ret, lull_strerror(ret));
		return false;
	}
	return true;
}

/* Fill a claimed record and commit it, sometimes holding it a while. */
static bool fill_and_commit(struct producer *p, uint64_t seq, uint64_t key,
			    size_t len, void *dst, uint64_t r)
{
	struct run *run = p->run;
	const struct topo *ops = run->ops;
	int32_t type = (int32_t)p->id + 1;
	void *other = NULL;
	int ret;

	if (len && (!dst || ((uintptr_t)dst & (LULL_RECORD_ALIGN - 1)))) {
		fail(run, "producer %u seq %" PRIu64 ": claim of %zu bytes "
		     "gave payload pointer %p, not 8-byte aligned", p->id,
		     seq, len, dst);
		return false;
	}
	set_doing(p, DOING_CLAIM);
	payload_fill(dst, p->id, seq, key, len);
	if (((r >> 20) & 255) == 0) {
		/* One claim at a time per producer. */
		ret = ops->claim(p->prod, type, len, &other);
		if (ret != -EBUSY) {
			fail(run, "producer %u seq %" PRIu64 ": a second "
			     "claim with one outstanding returned %d (%s), "
			     "expected -EBUSY", p->id, seq, ret,
			     lull_strerror(ret));
			return false;
		}
	}
	/*
	 * Hold the claim across a yield now and then: the consumer must wait
	 * at it, and other producers must carry on past it.
	 */
	if (((r >> 28) & 31) == 0)
		sched_yield();
	ret = ops->commit(p->prod);
	set_doing(p, DOING_SEND);
	if (ret) {
		fail(run, "producer %u seq %" PRIu64 ": commit of %zu bytes: "
		     "%s (%d)", p->id, seq, len, lull_strerror(ret), ret);
		return false;
	}
	return true;
}

/*
 * Block in lull_producer_wait() until the ring has room for @len bytes.
 * The consumer drains all the time, so room comes within microseconds; a
 * wait of 450 ms or more means the consumer's wake-up was lost, and only
 * our 2 s timeout ended it (lull_producer_wait() has no re-check slice of
 * its own): counted, and a failure at the end.
 */
static bool wait_for_room(struct producer *p, size_t len)
{
	double start = now_seconds(), took;
	int ret;

	ret = lull_producer_wait(p->prod, len, 2000000000);
	took = now_seconds() - start;
	atomic_fetch_add_explicit(&p->waits, 1, memory_order_relaxed);
	if (took >= 0.45)
		atomic_fetch_add_explicit(&p->slow_waits, 1,
					  memory_order_relaxed);
	if (ret == 0 || ret == -ETIMEDOUT)
		return true;
	fail(p->run, "producer %u: lull_producer_wait of %zu bytes: %s (%d)",
	     p->id, len, lull_strerror(ret), ret);
	return false;
}

/* Send record @seq through a randomly chosen path; retry while full. */
static bool send_record(struct producer *p, uint64_t seq)
{
	struct run *run = p->run;
	const struct topo *ops = run->ops;
	uint64_t key = record_key(p, seq);
	size_t len = record_len(key, run->max_len);
	int32_t type = (int32_t)p->id + 1;
	uint64_t r = rng_next(&p->rng);
	enum method m = (enum method)(r % 3);
	struct iovec iov[3];
	bool waiting = false;
	int iovcnt = 0, ret;
	void *dst = NULL;

	if (m != M_CLAIM)
		payload_fill(p->buf, p->id, seq, key, len);
	if (m == M_WRITEV) {
		size_t a = rng_range(&p->rng, 0, len);
		size_t b = rng_range(&p->rng, a, len);

		/* Two or three pieces, any of them possibly empty. */
		iovcnt = (r >> 8) & 1 ? 3 : 2;
		iov[0].iov_base = p->buf;
		iov[0].iov_len = a;
		iov[1].iov_base = p->buf + a;
		iov[1].iov_len = (iovcnt == 3 ? b : len) - a;
		iov[2].iov_base = p->buf + b;
		iov[2].iov_len = len - b;
	}

	for (;;) {
		switch (m) {
		case M_WRITE:
			/* A zero-length write needs no data pointer. */
			ret = ops->write(p->prod, type, len ? p->buf : NULL,
					 len);
			break;
		case M_WRITEV:
			ret = ops->writev(p->prod, type, iov, iovcnt);
			break;
		case M_CLAIM:
		default:
			ret = ops->claim(p->prod, type, len, &dst);
			break;
		}
		if (ret != -EAGAIN)
			break;
		if (!waiting) {
			waiting = true;
			set_doing(p, DOING_WAIT);
		}
		atomic_fetch_add_explicit(&p->full, 1, memory_order_relaxed);
		if (stopped(run))
			return false;
		if (rng_next(&p->rng) & 1) {
			sched_yield();
			continue;
		}
		if (!wait_for_room(p, len))
			return false;
	}
	if (waiting)
		set_doing(p, DOING_SEND);
	if (ret) {
		fail(run, "producer %u seq %" PRIu64 ": %s of %zu bytes: "
		     "%s (%d)", p->id, seq, method_names[m], len,
		     lull_strerror(ret), ret);
		return false;
	}
	if (m == M_CLAIM)
		return fill_and_commit(p, seq, key, len, dst, r);
	return true;
}

/*
 * Send records @seq, @seq + 1, ... as one batch: a write_batch, a
 * write_array (of the records, from the first, that share its length), or
 * a claim_batch filled and committed (or first aborted whole, then claimed
 * again: an aborted batch that reached the consumer would show as
 * duplicates).  As many as fit the bound on a batch, up to BATCH_MAX and
 * the quota.  Returns how many were sent, 0 on failure.
 */
static unsigned send_batch(struct producer *p, uint64_t seq)
{
	struct run *run = p->run;
	const struct topo *ops = run->ops;
	bool spsc = ops == &topo_spsc;
	struct lull_record recs[BATCH_MAX];
	struct lull_claim claims[BATCH_MAX];
	size_t bound = run->opt->capacity - (run->max_payload + 8);
	size_t total = 0, maxlen = 0, size;
	unsigned n = 0, want = 1 + (unsigned)rng_range(&p->rng, 0,
						       BATCH_MAX - 1);
	unsigned how = (unsigned)rng_range(&p->rng, 0, 3);
	bool by_claim = how < 2, by_array = how == 3, abort_first;
	int ret;

	while (n < want && seq + n < p->quota) {
		uint64_t key = record_key(p, seq + n);
		size_t len = record_len(key, run->max_len);
		/* An array's items lie back to back and share a length. */
		unsigned char *at = p->batch_buf +
				    (size_t)n * (by_array ? len : run->max_len);

		if (by_array && n && len != recs[0].len)
			break;
		size = (8 + len + 7) & ~(size_t)7;
		if (total + size > bound)
			break;
		total += size;
		if (len > maxlen)
			maxlen = len;
		recs[n].data = at;
		recs[n].len = (uint32_t)len;
		recs[n].type = (int32_t)p->id + 1;
		claims[n].len = recs[n].len;
		claims[n].type = recs[n].type;
		if (!by_claim)
			payload_fill(at, p->id, seq + n, key, len);
		n++;
	}
	if (!n)
		return send_record(p, seq) ? 1 : 0;
	abort_first = by_claim && (rng_next(&p->rng) & 3) == 0;
	for (;;) {
		if (by_claim)
			ret = spsc ? lull_spsc_claim_batch(p->prod, claims, n)
				   : lull_mpsc_claim_batch(p->prod, claims, n);
		else if (by_array && spsc)
			ret = lull_spsc_write_array(p->prod, recs[0].type,
						    p->batch_buf, recs[0].len, n);
		else if (by_array)
			ret = lull_mpsc_write_array(p->prod, recs[0].type,
						    p->batch_buf, recs[0].len, n);
		else
			ret = spsc ? lull_spsc_write_batch(p->prod, recs, n)
				   : lull_mpsc_write_batch(p->prod, recs, n);
		if (ret == 0 && by_claim) {
			set_doing(p, DOING_CLAIM);
			for (unsigned i = 0; i < n; i++)
				payload_fill(claims[i].data, p->id, seq + i,
					     record_key(p, seq + i),
					     claims[i].len);
			if (abort_first) {
				abort_first = false;
				ret = ops->abort(p->prod);
				set_doing(p, DOING_SEND);
				atomic_fetch_add_explicit(
					&p->aborts, 1, memory_order_relaxed);
				if (ret == 0)
					continue;
			} else {
				ret = ops->commit(p->prod);
				set_doing(p, DOING_SEND);
			}
		}
		if (ret != -EAGAIN)
			break;
		atomic_fetch_add_explicit(&p->full, 1, memory_order_relaxed);
		if (stopped(run))
			return 0;
		if (rng_next(&p->rng) & 1)
			sched_yield();
		else if (!wait_for_room(p, maxlen))
			return 0;
	}
	if (ret) {
		fail(run, "producer %u seq %" PRIu64 ": batch of %u (%zu "
		     "bytes) by %s: %s (%d)", p->id, seq, n, total,
		     by_claim ? "claim" : by_array ? "array" : "write",
		     lull_strerror(ret), ret);
		return 0;
	}
	return n;
}

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	struct run *run = p->run;
	uint64_t seq;
	int ret;

	ret = lull_producer_attach(p->handle, 0, &p->prod);
	if (ret) {
		fail(run, "producer %u: lull_producer_attach: %s (%d)", p->id,
		     lull_strerror(ret), ret);
		p->prod = NULL;
	} else {
		check_msgsize(p);
	}
	pthread_barrier_wait(&run->start);
	if (!p->prod) {
		set_doing(p, DOING_DONE);
		return NULL;
	}
	set_doing(p, DOING_SEND);

	for (seq = 0; seq < p->quota && !stopped(run); seq++) {
		uint64_t key = record_key(p, seq);
		unsigned sent;

		if ((rng_next(&p->rng) & 63) == 0 &&
		    !try_abort(p, seq, key, record_len(key, run->max_len)))
			break;
		if ((rng_next(&p->rng) & 7) == 0) {
			sent = send_batch(p, seq);
			if (!sent)
				break;
			for (unsigned i = 0; i < sent; i++)
				ledger_sent(&run->ledger, p->id, seq + i);
			seq += sent - 1;
			continue;
		}
		if (!send_record(p, seq))
			break;
		ledger_sent(&run->ledger, p->id, seq);
	}

	set_doing(p, DOING_DETACH);
	ret = lull_producer_detach(p->prod);
	if (ret)
		fail(run, "producer %u: lull_producer_detach: %s (%d)", p->id,
		     lull_strerror(ret), ret);
	set_doing(p, DOING_DONE);
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* The consumer                                                            */

/* Check a record against what its producer sent next; consume nothing. */
static bool check_record(struct consumer *c, const struct lull_record *rec,
			 const char *how)
{
	struct run *run = c->run;
	const struct producer *p;
	uint64_t seq, key, stamped;
	size_t want, bad;
	unsigned id;

	if (rec->type < 1 || rec->type > (int32_t)run->cfg->producers) {
		fail(run, "%s: a record of type %" PRId32 " and length %"
		     PRIu32 ", expected type 1..%u", how, rec->type, rec->len,
		     run->cfg->producers);
		return false;
	}
	id = (unsigned)rec->type - 1;
	p = &run->prod[id];
	seq = ledger_expect(&run->ledger, id);
	if (c->kept) {
		if (rec->type != c->kept_type || rec->len != c->kept_len) {
			fail(run, "%s: the record left in place (type %" PRId32
			     ", length %" PRIu32 ") did not come back: got "
			     "type %" PRId32 " length %" PRIu32, how,
			     c->kept_type, c->kept_len, rec->type, rec->len);
			return false;
		}
		c->kept = false;
	}
	/*
	 * A record of 8 bytes or more says which one it is: one lost, repeated
	 * or out of order shows as such.  A shorter one is taken to be the
	 * next; its length and bytes would betray it.
	 */
	if (rec->len >= sizeof(stamped) && rec->data) {
		memcpy(&stamped, rec->data, sizeof(stamped));
		if (!ledger_check(&run->ledger, id, stamped)) {
			fail(run, "%s: a record of length %" PRIu32 ": %s%s",
			     how, rec->len, ledger_why(&run->ledger),
			     stamped >= p->quota ? " (past the producer's "
			     "last record)" : "");
			return false;
		}
	}
	if (seq >= p->quota) {
		fail(run, "%s: producer %u: a record (length %" PRIu32 ") "
		     "after its last one, seq %" PRIu64, how, id, rec->len,
		     p->quota - 1);
		return false;
	}
	key = record_key(p, seq);
	want = record_len(key, run->max_len);
	if (rec->len != want) {
		fail(run, "%s: producer %u seq %" PRIu64 ": length %" PRIu32
		     ", expected %zu", how, id, seq, rec->len, want);
		return false;
	}
	if (want && (!rec->data ||
		     ((uintptr_t)rec->data & (LULL_RECORD_ALIGN - 1)))) {
		fail(run, "%s: producer %u seq %" PRIu64 ": payload at %p, "
		     "not 8-byte aligned", how, id, seq, rec->data);
		return false;
	}
	bad = want ? payload_check(rec->data, id, seq, key, want) : 0;
	if (bad != want) {
		fail(run, "%s: producer %u seq %" PRIu64 " (length %zu): "
		     "payload byte %zu is wrong", how, id, seq, want, bad);
		return false;
	}
	return true;
}

/* Take the record check_record() passed: the producer's next. */
static void consume(struct consumer *c, unsigned id)
{
	struct ledger *l = &c->run->ledger;

	if (!ledger_got(l, id, ledger_expect(l, id)))
		fail(c->run, "%s", ledger_why(l));
	c->received++;
}

static void count_empty(struct consumer *c)
{
	c->empty_local++;
	atomic_store_explicit(&c->empty, c->empty_local,
			      memory_order_relaxed);
}

static int on_record(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;
	struct run *run = c->run;
	unsigned i = c->calls++;

	if (c->bad)
		return LULL_READ_STOP;
	if (c->forbid) {
		fail(run, "read with a peek outstanding called the handler");
		c->bad = true;
		return LULL_READ_STOP;
	}
	if (c->ended || i >= c->limit) {
		fail(run, "read(limit %u) called the handler %u times%s",
		     c->limit, i + 1, c->ended ?
		     ", after it returned LULL_READ_STOP or _KEEP" : "");
		c->bad = true;
		return LULL_READ_STOP;
	}
	if (!check_record(c, rec, "read")) {
		c->bad = true;
		return LULL_READ_STOP;
	}
	if (c->action == LULL_READ_KEEP && i == c->action_at) {
		c->kept = true;
		c->kept_type = rec->type;
		c->kept_len = rec->len;
		c->kept_hit = true;
		c->ended = true;
		return LULL_READ_KEEP;
	}
	consume(c, (unsigned)rec->type - 1);
	if (c->action == LULL_READ_STOP && i == c->action_at) {
		c->ended = true;
		return LULL_READ_STOP;
	}
	return LULL_READ_CONTINUE;
}

/*
 * The handler of lull_ring_read_items(): a run's items checked one by
 * one, as on_record() checks records; it answers for the run, so STOP or
 * KEEP at call action_at ends the read after or before the whole run.
 */
static int on_run(const struct lull_items *items, void *ctx)
{
	struct consumer *c = ctx;
	struct run *run = c->run;
	struct lull_record rec = { .len = items->len, .type = items->type };
	unsigned i = c->calls++;

	if (c->bad)
		return LULL_READ_STOP;
	if (c->ended || !items->count || items->count > c->limit - c->taken) {
		fail(run, "read_items(limit %u): a run of %u after %u "
		     "records%s", c->limit, (unsigned)items->count, c->taken,
		     c->ended ? ", after LULL_READ_STOP or _KEEP" : "");
		c->bad = true;
		return LULL_READ_STOP;
	}
	for (uint32_t k = 0; k < items->count; k++) {
		rec.data = (const unsigned char *)items->data +
			   (size_t)k * items->len;
		if (!check_record(c, &rec, "read_items")) {
			c->bad = true;
			return LULL_READ_STOP;
		}
		if (k == 0 && c->action == LULL_READ_KEEP &&
		    i == c->action_at) {
			c->kept = true;
			c->kept_type = rec.type;
			c->kept_len = rec.len;
			c->kept_hit = true;
			c->ended = true;
			return LULL_READ_KEEP;
		}
		consume(c, (unsigned)rec.type - 1);
	}
	c->taken += items->count;
	if (c->action == LULL_READ_STOP && i == c->action_at) {
		c->ended = true;
		return LULL_READ_STOP;
	}
	return LULL_READ_CONTINUE;
}

/*
 * One lull_ring_read() or lull_ring_read_items() with a random limit and
 * handler behaviour.
 */
static void read_batch(struct consumer *c, uint64_t r)
{
	struct run *run = c->run;
	unsigned span, consumed, sel;
	bool runs;
	int ret;

	c->limit = (r & 15) == 0 ? UINT_MAX : 1 + (unsigned)((r >> 4) % 256);
	span = c->limit < 64 ? c->limit : 64;
	sel = (r >> 12) & 7;
	c->action = sel == 7 ? LULL_READ_KEEP :
		    sel >= 5 ? LULL_READ_STOP : LULL_READ_CONTINUE;
	c->action_at = (unsigned)((r >> 16) % span);
	c->calls = 0;
	c->kept_hit = false;
	c->ended = false;
	c->bad = false;
	c->taken = 0;

	runs = (r >> 20) & 1;
	ret = runs ? lull_ring_read_items(run->ring, on_run, c, c->limit)
		   : lull_ring_read(run->ring, on_record, c, c->limit);
	if (c->bad)
		return;
	if (ret == -EAGAIN) {
		if (c->calls)
			fail(run, "read returned -EAGAIN after %u handler "
			     "calls", c->calls);
		else if (c->kept)
			fail(run, "read returned -EAGAIN with a record left "
			     "in place by LULL_READ_KEEP");
		count_empty(c);
		sched_yield();
		return;
	}
	if (ret < 0) {
		fail(run, "read(limit %u): %s (%d)", c->limit,
		     lull_strerror(ret), ret);
		return;
	}
	consumed = runs ? c->taken : c->calls - (c->kept_hit ? 1 : 0);
	if (!c->calls || (unsigned)ret != consumed)
		fail(run, "read(limit %u) returned %d after %u handler calls "
		     "that consumed %u records%s", c->limit, ret, c->calls,
		     consumed, c->kept_hit ? " (the last one kept)" : "");
}

/* One lull_ring_peek() + lull_ring_release(), with a few extra checks. */
static void peek_one(struct consumer *c, uint64_t r)
{
	struct run *run = c->run;
	struct lull_record rec, again;
	unsigned id;
	int ret;

	ret = lull_ring_peek(run->ring, &rec);
	if (ret == -EAGAIN) {
		if (c->kept)
			fail(run, "peek returned -EAGAIN with a record left "
			     "in place by LULL_READ_KEEP");
		count_empty(c);
		sched_yield();
		return;
	}
	if (ret) {
		fail(run, "peek: %s (%d)", lull_strerror(ret), ret);
		return;
	}
	if (!check_record(c, &rec, "peek"))
		return;
	id = (unsigned)rec.type - 1;

	if ((r & 3) == 0) {
		/* Peeking again shows the same record, in the same place. */
		c->kept = true;
		c->kept_type = rec.type;
		c->kept_len = rec.len;
		ret = lull_ring_peek(run->ring, &again);
		if (ret) {
			fail(run, "a second peek: %s (%d)", lull_strerror(ret),
			     ret);
			return;
		}
		if (!check_record(c, &again, "second peek"))
			return;
		if (again.data != rec.data) {
			fail(run, "a second peek moved the record from %p to "
			     "%p", rec.data, again.data);
			return;
		}
	}
	if (((r >> 2) & 63) == 0) {
		/* A read with a peek outstanding is refused. */
		c->forbid = true;
		c->calls = 0;
		c->bad = false;
		ret = lull_ring_read(run->ring, on_record, c, 1);
		c->forbid = false;
		if (c->bad)
			return;
		if (ret != -EINVAL) {
			fail(run, "read with a peek outstanding returned %d "
			     "(%s), expected -EINVAL", ret,
			     lull_strerror(ret));
			return;
		}
	}
	ret = lull_ring_release(run->ring);
	if (ret) {
		fail(run, "release after peek: %s (%d)", lull_strerror(ret),
		     ret);
		return;
	}
	consume(c, id);
	if (((r >> 8) & 63) == 0) {
		ret = lull_ring_release(run->ring);
		if (ret != -EINVAL)
			fail(run, "release with nothing peeked returned %d "
			     "(%s), expected -EINVAL", ret,
			     lull_strerror(ret));
	}
}

static void consume_all(struct run *run)
{
	struct consumer *c = &run->cons;

	while (c->received < run->total && !stopped(run)) {
		uint64_t r = rng_next(&c->rng);

		if ((r & 15) < 12)
			read_batch(c, r >> 4);
		else
			peek_one(c, r >> 4);
	}
}

/* What the handler of the end's reads was handed. */
struct end_seen {
	unsigned calls;
	int action; /* what to answer */
	int32_t type;
	uint32_t len;
};

static int on_end_record(const struct lull_record *rec, void *ctx)
{
	struct end_seen *e = ctx;

	e->calls++;
	e->type = rec->type;
	e->len = rec->len;
	return e->action;
}

/* A record of @type and @len is the poison; else fail, saying where. */
static bool is_poison(struct run *run, int32_t type, uint32_t len,
		      const char *how)
{
	if (type == LULL_TYPE_POISON && len == 0)
		return true;
	fail(run, "%s after the last record: type %" PRId32 " and length %"
	     PRIu32 ", expected the poison record (type %d, length 0)", how,
	     type, len, LULL_TYPE_POISON);
	return false;
}

/*
 * The ring's last producer has detached, every record was consumed: one
 * poison record is left, alone, by read (kept once first, sometimes) or by
 * peek + release, at random; then read and peek are -EPIPE, and stay so.
 */
static void check_poison(struct run *run)
{
	struct consumer *c = &run->cons;
	struct lull_record rec, again;
	struct end_seen e;
	uint64_t r = rng_next(&c->rng);
	int ret;

	if (r & 1) {
		if (r & 2) {
			/* Kept, it is handed again by the next read. */
			e = (struct end_seen){ .action = LULL_READ_KEEP };
			ret = lull_ring_read(run->ring, on_end_record, &e,
					     UINT_MAX);
			if (ret != 0 || e.calls != 1) {
				fail(run, "read keeping the poison returned "
				     "%d after %u handler calls, expected 0 "
				     "after 1", ret, e.calls);
				return;
			}
			if (!is_poison(run, e.type, e.len, "kept read"))
				return;
		}
		e = (struct end_seen){ .action = LULL_READ_CONTINUE };
		ret = lull_ring_read(run->ring, on_end_record, &e, UINT_MAX);
		if (ret != 1 || e.calls != 1) {
			fail(run, "read of the poison returned %d (%s) after "
			     "%u handler calls, expected 1 after 1", ret,
			     ret < 0 ? lull_strerror(ret) : "a count",
			     e.calls);
			return;
		}
		if (!is_poison(run, e.type, e.len, "read"))
			return;
	} else {
		ret = lull_ring_peek(run->ring, &rec);
		if (ret) {
			fail(run, "peek of the poison: %s (%d)",
			     lull_strerror(ret), ret);
			return;
		}
		if (!is_poison(run, rec.type, rec.len, "peek"))
			return;
		ret = lull_ring_peek(run->ring, &again);
		if (ret || !is_poison(run, again.type, again.len,
				      "second peek")) {
			if (ret)
				fail(run, "a second peek of the poison: %s "
				     "(%d)", lull_strerror(ret), ret);
			return;
		}
		ret = lull_ring_release(run->ring);
		if (ret) {
			fail(run, "release of the poison: %s (%d)",
			     lull_strerror(ret), ret);
			return;
		}
	}
	for (int i = 0; i < 2; i++) {
		e = (struct end_seen){ .action = LULL_READ_CONTINUE };
		ret = lull_ring_read(run->ring, on_end_record, &e, UINT_MAX);
		if (ret != -EPIPE || e.calls) {
			fail(run, "read after the poison returned %d (%s) "
			     "after %u handler calls, expected -EPIPE", ret,
			     lull_strerror(ret), e.calls);
			return;
		}
		ret = lull_ring_peek(run->ring, &rec);
		if (ret != -EPIPE) {
			fail(run, "peek after the poison returned %d (%s), "
			     "expected -EPIPE", ret, lull_strerror(ret));
			return;
		}
	}
}

/*
 * After the producers are gone: every count matches, and the ring holds
 * nothing but the poison its last producer's detach left.
 */
static void check_end(struct run *run)
{
	unsigned i;

	for (i = 0; i < run->cfg->producers; i++) {
		struct producer *p = &run->prod[i];
		uint64_t sent = ledger_count_sent(&run->ledger, i);
		uint64_t got = ledger_count_got(&run->ledger, i);

		if (sent != p->quota || got != p->quota) {
			fail(run, "producer %u: sent %" PRIu64 ", received %"
			     PRIu64 ", expected %" PRIu64, i, sent, got,
			     p->quota);
			return;
		}
	}
	if (!ledger_complete(&run->ledger)) {
		fail(run, "%s", ledger_why(&run->ledger));
		return;
	}
	check_poison(run);
}

/* ---------------------------------------------------------------------- */
/* The watchdog                                                            */

/* Records sent and taken, and the phase: what the watchdog sees move. */
static uint64_t progress(void *arg)
{
	struct run *run = arg;
	uint64_t sum;
	unsigned i;

	sum = (uint64_t)atomic_load_explicit(&run->phase,
					     memory_order_relaxed) << 56;
	for (i = 0; i < run->cfg->producers; i++)
		sum += ledger_count_sent(&run->ledger, i) +
		       ledger_count_got(&run->ledger, i);
	return sum;
}

/* When nothing moved for --watchdog-seconds: where everyone stands. */
static void watchdog_report(void *arg)
{
	struct run *run = arg;
	struct consumer *c = &run->cons;
	int phase = atomic_load_explicit(&run->phase, memory_order_relaxed);
	uint64_t got = 0;
	unsigned i;

	for (i = 0; i < run->cfg->producers; i++)
		got += ledger_count_got(&run->ledger, i);
	fprintf(stderr, "stress_ring: %s hung while %s: consumed %" PRIu64
		" of %" PRIu64 " records, %" PRIu64 " empty-ring retries\n",
		run->cfg->name, phase_names[phase], got, run->total,
		(uint64_t)atomic_load_explicit(&c->empty,
					       memory_order_relaxed));
	/* Pairs with the release in fail(): msg is complete. */
	if (atomic_load_explicit(&run->failed, memory_order_acquire) == FAILED)
		fprintf(stderr, "stress_ring:   after a failure: %s\n",
			run->msg);
	for (i = 0; i < run->cfg->producers; i++) {
		struct producer *p = &run->prod[i];
		int doing = atomic_load_explicit(&p->doing,
						 memory_order_relaxed);

		fprintf(stderr, "stress_ring:   producer %u: %s, sent %"
			PRIu64 " of %" PRIu64 ", consumer took %" PRIu64
			", %" PRIu64 " full-ring retries, %" PRIu64
			" aborts\n", i, doing_names[doing],
			ledger_count_sent(&run->ledger, i), p->quota,
			ledger_count_got(&run->ledger, i),
			(uint64_t)atomic_load_explicit(&p->full,
						       memory_order_relaxed),
			(uint64_t)atomic_load_explicit(&p->aborts,
						       memory_order_relaxed));
	}
	printf("%s: hung (watchdog)\n", run->cfg->name);
	printf("%u passed, %u failed\n", run->passed_before,
	       run->selected - run->passed_before);
}

/* ---------------------------------------------------------------------- */
/* One configuration                                                       */

static void die(const char *what, int err)
{
	fprintf(stderr, "stress_ring: %s: %s\n", what, strerror(err));
	exit(1);
}

/* Create the ring and the handles the producers attach through. */
static bool ring_setup(struct run *run)
{
	const struct config *cfg = run->cfg;
	size_t cap = run->opt->capacity;
	ssize_t size, n;
	unsigned i;
	int ret;

	if (cfg->in_place) {
		size = lull_ring_region_size_for(cap, cfg->topology);
		if (size < 0) {
			fail(run, "lull_ring_region_size(%zu): %s (%zd)", cap,
			     lull_strerror((int)size), size);
			return false;
		}
		run->mem = aligned_alloc(LINE_PAIR,
					 ((size_t)size + LINE_PAIR - 1) &
					 ~(size_t)(LINE_PAIR - 1));
		if (!run->mem)
			die("aligned_alloc", ENOMEM);
		ret = lull_ring_create_in(&run->ring, run->mem, (size_t)size,
					  cap, cfg->topology);
		if (ret) {
			run->ring = NULL;
			fail(run, "lull_ring_create_in(%zu): %s (%d)", cap,
			     lull_strerror(ret), ret);
			return false;
		}
		for (i = 0; i < cfg->producers; i += 2) {
			ret = lull_ring_open(&run->opened[i], run->mem,
					     (size_t)size, 0);
			if (ret) {
				run->opened[i] = NULL;
				fail(run, "lull_ring_open: %s (%d)",
				     lull_strerror(ret), ret);
				return false;
			}
		}
	} else {
		ret = lull_ring_create(&run->ring, cap, cfg->topology);
		if (ret) {
			run->ring = NULL;
			fail(run, "lull_ring_create(%zu): %s (%d)", cap,
			     lull_strerror(ret), ret);
			return false;
		}
	}

	n = lull_ring_capacity(run->ring);
	if (n < 0 || (size_t)n != cap) {
		fail(run, "lull_ring_capacity returned %zd, expected %zu", n,
		     cap);
		return false;
	}
	n = lull_ring_max_payload(run->ring);
	if (n < 0 || (size_t)n != cap / 8 - LULL_RECORD_HEADER_SIZE) {
		fail(run, "lull_ring_max_payload returned %zd, expected %zu",
		     n, cap / 8 - LULL_RECORD_HEADER_SIZE);
		return false;
	}
	run->max_payload = (size_t)n;
	run->max_len = (size_t)n;
	for (i = 0; i < cfg->producers; i++)
		run->prod[i].handle = run->opened[i] ? run->opened[i] :
				      run->ring;
	return true;
}

static void ring_teardown(struct run *run)
{
	unsigned i;
	int ret;

	for (i = 0; i < MAX_PRODUCERS; i++) {
		if (!run->opened[i])
			continue;
		ret = lull_ring_destroy(run->opened[i]);
		if (ret)
			fail(run, "lull_ring_destroy of producer %u's handle: "
			     "%s (%d)", i, lull_strerror(ret), ret);
	}
	if (run->ring) {
		ret = lull_ring_destroy(run->ring);
		if (ret)
			fail(run, "lull_ring_destroy: %s (%d)",
			     lull_strerror(ret), ret);
	}
	free(run->mem);
}

static struct run *run_create(const struct config *cfg,
			      const struct options *opt, unsigned index,
			      unsigned passed_before, unsigned selected)
{
	size_t size = (sizeof(struct run) + LINE_PAIR - 1) &
		      ~(size_t)(LINE_PAIR - 1);
	uint64_t seed = mix64(opt->seed + GOLDEN * (index + 1));
	struct run *run;
	unsigned i;

	run = aligned_alloc(LINE_PAIR, size);
	if (!run)
		die("aligned_alloc", ENOMEM);
	memset(run, 0, size);
	run->cfg = cfg;
	run->opt = opt;
	run->ops = cfg->topology == LULL_RING_SPSC ? &topo_spsc : &topo_mpsc;
	run->total = opt->records;
	atomic_init(&run->stop, false);
	atomic_init(&run->failed, FAILED_NONE);
	atomic_init(&run->phase, PHASE_SETUP);
	if (ledger_init(&run->ledger, cfg->producers))
		die("ledger_init", ENOMEM);
	run->passed_before = passed_before;
	run->selected = selected;
	for (i = 0; i < MAX_PRODUCERS; i++) {
		struct producer *p = &run->prod[i];

		p->run = run;
		p->id = i;
		p->quota = opt->records / cfg->producers +
			   (i < opt->records % cfg->producers);
		p->key = mix64(seed ^ mix64(i + 1));
		p->rng = mix64(p->key + 1);
		atomic_init(&p->full, 0);
		atomic_init(&p->waits, 0);
		atomic_init(&p->slow_waits, 0);
		atomic_init(&p->aborts, 0);
		atomic_init(&p->doing, DOING_ATTACH);
	}
	run->cons.run = run;
	run->cons.rng = mix64(seed + 2);
	atomic_init(&run->cons.empty, 0);
	return run;
}

static bool run_config(const struct config *cfg, const struct options *opt,
		       unsigned index, unsigned passed_before,
		       unsigned selected)
{
	struct run *run = run_create(cfg, opt, index, passed_before,
				     selected);
	struct watchdog_watch watch = {
		.progress = progress,
		.stall_s = opt->watchdog_seconds,
		.report = watchdog_report,
		.ctx = run,
		.tick_ms = 1000,
	};
	struct watchdog wd;
	char what[64];
	uint64_t full = 0, aborts = 0, waits = 0, slow_waits = 0;
	double start = 0, secs = 0;
	bool ok, ran = false;
	unsigned i;
	int ret;

	snprintf(what, sizeof(what), "stress_ring %s", cfg->name);
	ret = watchdog_watch(&wd, 0, what, &watch);
	if (ret)
		die("pthread_create (watchdog)", ret);

	if (ring_setup(run)) {
		ran = true;
		ret = pthread_barrier_init(&run->start, NULL,
					   cfg->producers + 1);
		if (ret)
			die("pthread_barrier_init", ret);
		for (i = 0; i < cfg->producers; i++) {
			struct producer *p = &run->prod[i];

			p->buf = malloc(run->max_len ? run->max_len : 1);
			p->batch_buf = malloc(BATCH_MAX *
					      (run->max_len ? run->max_len : 1));
			if (!p->buf || !p->batch_buf)
				die("malloc", ENOMEM);
			ret = pthread_create(&p->thread, NULL, producer_main,
					     p);
			if (ret)
				die("pthread_create (producer)", ret);
		}
		pthread_barrier_wait(&run->start);
		set_phase(run, PHASE_RUNNING);
		start = now_seconds();
		consume_all(run);
		set_phase(run, PHASE_JOINING);
		for (i = 0; i < cfg->producers; i++)
			pthread_join(run->prod[i].thread, NULL);
		secs = now_seconds() - start;
		/* The joins publish every producer's failure message. */
		if (!atomic_load_explicit(&run->failed, memory_order_relaxed))
			check_end(run);
		pthread_barrier_destroy(&run->start);
	}
	set_phase(run, PHASE_TEARDOWN);
	ring_teardown(run);
	watchdog_stop(&wd);

	for (i = 0; i < cfg->producers; i++) {
		full += atomic_load_explicit(&run->prod[i].full,
					     memory_order_relaxed);
		aborts += atomic_load_explicit(&run->prod[i].aborts,
					       memory_order_relaxed);
		waits += atomic_load_explicit(&run->prod[i].waits,
					      memory_order_relaxed);
		slow_waits += atomic_load_explicit(&run->prod[i].slow_waits,
						   memory_order_relaxed);
		free(run->prod[i].buf);
		free(run->prod[i].batch_buf);
	}
	/*
	 * More than one slow wait: a lost room wake-up (one alone may be a
	 * consumer descheduled for half a second on a loaded machine).
	 */
	if (slow_waits > 1)
		fail(run, "%" PRIu64 " of %" PRIu64 " waits for room lasted "
		     "450 ms or more: the consumer's wake-up was lost",
		     slow_waits, waits);
	ok = !atomic_load_explicit(&run->failed, memory_order_relaxed);
	printf("%-5s: %" PRIu64 " records, %u producer%s, %.3f s, %.0f "
	       "records/s, %" PRIu64 " full-ring (%" PRIu64 " waits) and %"
	       PRIu64 " empty-ring retries, %" PRIu64 " aborts: %s%s%s\n",
	       cfg->name, run->cons.received, cfg->producers,
	       cfg->producers == 1 ? "" : "s", secs,
	       ran && secs > 0 ? run->cons.received / secs : 0.0, full, waits,
	       run->cons.empty_local, aborts, ok ? "ok" : "FAILED: ",
	       ok ? "" : run->msg, ok || ran ? "" : " (before starting)");
	fflush(stdout);
	ledger_fini(&run->ledger);
	free(run);
	return ok;
}

/* ---------------------------------------------------------------------- */
/* Options                                                                 */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stress_ring [--records N] [--config NAME]... "
		"[--seed S]\n"
		"                   [--capacity BYTES] "
		"[--watchdog-seconds S]\n"
		"  --records N           records per configuration, across "
		"its producers\n"
		"                        (default %llu; K, M, G suffixes)\n"
		"  --config NAME         spsc, mpsc1, mpsc2, mpsc4 or mpsc8; "
		"repeatable\n"
		"                        (default: all)\n"
		"  --seed S              seed of the record stream "
		"(default %llu)\n"
		"  --capacity BYTES      ring capacity, a power of two "
		"(default %zu)\n"
		"  --watchdog-seconds S  fail when nothing moves for S "
		"seconds (default %u)\n",
		DEFAULT_RECORDS, DEFAULT_SEED, DEFAULT_CAPACITY,
		DEFAULT_WATCHDOG);
}

/* Parse an unsigned number with an optional K, M or G suffix (1024s). */
static bool parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'k': case 'K':
		shift = 10;
		end++;
		break;
	case 'm': case 'M':
		shift = 20;
		end++;
		break;
	case 'g': case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || (shift && v > UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static _Noreturn void bad_option(const char *opt, const char *val)
{
	fprintf(stderr, "stress_ring: bad value for %s: '%s'\n", opt,
		val ? val : "(missing)");
	usage(stderr);
	exit(2);
}

static void parse_options(int argc, char **argv, struct options *opt)
{
	bool any = false;
	unsigned i;
	int a;

	opt->records = DEFAULT_RECORDS;
	opt->seed = DEFAULT_SEED;
	opt->capacity = DEFAULT_CAPACITY;
	opt->watchdog_seconds = DEFAULT_WATCHDOG;

	for (a = 1; a < argc; a++) {
		const char *name = argv[a], *val;
		char *eq = strchr(argv[a], '=');
		uint64_t v;

		if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (strncmp(name, "--", 2)) {
			fprintf(stderr, "stress_ring: unexpected argument "
				"'%s'\n", name);
			usage(stderr);
			exit(2);
		}
		if (eq) {
			*eq = '\0';
			val = eq + 1;
		} else {
			val = a + 1 < argc ? argv[++a] : NULL;
		}
		if (!strcmp(name, "--records")) {
			if (!val || !parse_u64(val, &v) || !v)
				bad_option(name, val);
			opt->records = v;
		} else if (!strcmp(name, "--seed")) {
			if (!val || !parse_u64(val, &v))
				bad_option(name, val);
			opt->seed = v;
		} else if (!strcmp(name, "--capacity")) {
			if (!val || !parse_u64(val, &v) || v > SIZE_MAX)
				bad_option(name, val);
			opt->capacity = (size_t)v;
		} else if (!strcmp(name, "--watchdog-seconds")) {
			if (!val || !parse_u64(val, &v) || !v || v > 86400)
				bad_option(name, val);
			opt->watchdog_seconds = (unsigned)v;
		} else if (!strcmp(name, "--config")) {
			for (i = 0; val && i < NR_CONFIGS; i++)
				if (!strcmp(val, configs[i].name))
					break;
			if (!val || i == NR_CONFIGS)
				bad_option(name, val);
			opt->selected[i] = true;
			any = true;
		} else {
			fprintf(stderr, "stress_ring: unknown option '%s'\n",
				name);
			usage(stderr);
			exit(2);
		}
	}
	if (!any)
		for (i = 0; i < NR_CONFIGS; i++)
			opt->selected[i] = true;
}

int main(int argc, char **argv)
{
	struct options opt = { 0 };
	unsigned i, passed = 0, failed = 0, selected = 0;

	parse_options(argc, argv, &opt);
	for (i = 0; i < NR_CONFIGS; i++)
		selected += opt.selected[i];

	printf("stress_ring: lull %s, %" PRIu64 " records per configuration, "
	       "capacity %zu, seed %" PRIu64 ", watchdog %u s\n",
	       lull_version(), opt.records, opt.capacity, opt.seed,
	       opt.watchdog_seconds);
	fflush(stdout);

	for (i = 0; i < NR_CONFIGS; i++) {
		if (!opt.selected[i])
			continue;
		if (run_config(&configs[i], &opt, i, passed, selected))
			passed++;
		else
			failed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
