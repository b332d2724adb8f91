/* SPDX-License-Identifier: MIT */
/*
 * ring_fix.h - the fixture of the ring suites (test_ring_*.c): the model of
 * one ring, record writers, the single-producer fixture, caller-memory
 * regions.  Criterion-side helpers, included by each ring suite; what is
 * not Criterion-specific (topologies, patterns, threads) is test/lib.
 *
 * struct model follows every record a test writes: its type, length, the
 * seed of its content, and the position the record format gives it (an
 * 8-byte header, the payload rounded up to 8 bytes, a padding record filling
 * the gap when a record would straddle the end of the data area).  The
 * consumer side then checks the order, the content and the address of every
 * record it is handed, and the producer side checks that a write fails with
 * -EAGAIN exactly when the record does not fit.
 *
 * A ring ends when its last producer detaches: the fixture's teardown
 * (fix_fini) checks that no producer attaches any more and that the
 * consumer then gets what is left, one poison record, and -EPIPE for good.
 *
 * A check that applies to both topologies is written once, against struct
 * topo (test/lib/topo.h), and TOPO_TEST(name, seconds) { ... t ... } makes
 * it one Test() in each of the suites spsc and mpsc.  Every test has a
 * watchdog (.timeout); threads are joined with a deadline (test/lib).
 */
#ifndef LULL_TEST_RING_FIX_H
#define LULL_TEST_RING_FIX_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <criterion/criterion.h>

#include <lull.h>

#include "lib/ledger.h"
#include "lib/threads.h"
#include "lib/topo.h"
#include "park.h" /* LULL_GIVE_BACK_MIN_LAP */
#include "topo_test.h"

/* ------------------------------------------------------------------------
 * The model of one ring
 */

#define MODEL_QUEUE 1024u

struct expect {
	uint64_t pos;  /* where the record's header starts */
	uint64_t data; /* where its payload starts */
	uint64_t end;  /* where the consumer's position goes once it is read */
	int32_t type;
	uint32_t len;
	uint32_t seed;
};

struct model {
	size_t cap;
	/* Producer position: the end of the last record claimed. */
	uint64_t wpos;
	/* Consumer position: the end of the last record consumed. */
	uint64_t rpos;
	/*
	 * How far the consumer may have gone: past padding that trails the
	 * last record (an aborted MPSC claim), which the library is free to
	 * skip when a read finds nothing after it.
	 */
	uint64_t rpos_hi;
	/* The data area's address, learnt from the first record handed. */
	const uint8_t *base;
	struct expect q[MODEL_QUEUE];
	unsigned qhead, qtail;
	uint32_t seed;
	unsigned long long popped;
	unsigned reads; /* model_read_expect() calls: which read to use */
};

static void model_init(struct model *m, size_t cap)
{
	memset(m, 0, sizeof(*m));
	m->cap = cap;
}

static unsigned model_queued(const struct model *m)
{
	return m->qtail - m->qhead;
}

/*
 * Where a record of @len payload bytes would start if written now, and in
 * *needp the bytes it takes together with the padding before it.
 */
static uint64_t model_start(const struct model *m, size_t len,
			    uint64_t *needp)
{
	size_t space = rec_space(len);
	size_t off = (size_t)(m->wpos & (m->cap - 1));
	size_t gap = off + space > m->cap ? m->cap - off : 0;

	*needp = gap + space;
	return m->wpos + gap;
}

static bool model_fits(const struct model *m, size_t len, uint64_t rpos)
{
	uint64_t need;

	model_start(m, len, &need);
	return m->wpos + need - rpos <= m->cap;
}

static void model_push(struct model *m, int32_t type, size_t len,
		       uint32_t seed)
{
	uint64_t need, pos = model_start(m, len, &need);
	struct expect *e;

	cr_assert_lt(model_queued(m), MODEL_QUEUE, "model queue overflow");
	e = &m->q[m->qtail++ % MODEL_QUEUE];
	e->pos = pos;
	e->data = pos + LULL_RECORD_HEADER_SIZE;
	e->end = pos + rec_space(len);
	e->type = type;
	e->len = (uint32_t)len;
	e->seed = seed;
	m->wpos = e->end;
}

/*
 * @n records of @type and @len written as one array packed into a record
 * (lull_*_write_array() with alike items of a multiple of 8 bytes that
 * fit one record): an 8-byte array header after the record's, then the
 * items back to back; the consumer's position stays at the record until
 * its last item is read.
 */
static void model_push_array(struct model *m, int32_t type, size_t len,
			     const uint32_t *seeds, unsigned n)
{
	size_t bytes = 8 + n * len;
	uint64_t need, pos = model_start(m, bytes, &need);
	struct expect *e;

	for (unsigned i = 0; i < n; i++) {
		cr_assert_lt(model_queued(m), MODEL_QUEUE,
			     "model queue overflow");
		e = &m->q[m->qtail++ % MODEL_QUEUE];
		e->pos = pos;
		e->data = pos + LULL_RECORD_HEADER_SIZE + 8 + i * len;
		e->end = i + 1 < n ? pos : pos + rec_space(bytes);
		e->type = type;
		e->len = (uint32_t)len;
		e->seed = seeds[i];
	}
	m->wpos = pos + rec_space(bytes);
}

/* A claim that will never be delivered and stays as padding (MPSC). */
static void model_skip(struct model *m, size_t len)
{
	uint64_t need, pos = model_start(m, len, &need);

	m->wpos = pos + rec_space(len);
}

/* Check @rec against the next expected record, without consuming it. */
static void model_check(struct model *m, const struct lull_record *rec)
{
	const uint8_t *data = rec->data;
	const struct expect *e;
	size_t off, bad;

	cr_assert_neq(rec->type, LULL_TYPE_PADDING,
		      "record #%llu: a padding record reached the consumer",
		      m->popped);
	cr_assert_gt(model_queued(m), 0,
		     "record #%llu (type %d, %u bytes) was handed but none "
		     "is expected", m->popped, (int)rec->type,
		     (unsigned)rec->len);
	e = &m->q[m->qhead % MODEL_QUEUE];
	cr_assert_eq(rec->type, e->type, "record #%llu: type %d, expected %d",
		     m->popped, (int)rec->type, (int)e->type);
	cr_assert_eq(rec->len, e->len, "record #%llu: %u bytes, expected %u",
		     m->popped, (unsigned)rec->len, (unsigned)e->len);
	cr_assert_not_null(data, "record #%llu: NULL data", m->popped);
	cr_assert_eq((uintptr_t)data % LULL_RECORD_ALIGN, 0,
		     "record #%llu: payload at %p is not 8-byte aligned",
		     m->popped, rec->data);
	/* From the header: an empty record's payload may be the end. */
	off = (size_t)(e->pos & (m->cap - 1)) + (size_t)(e->data - e->pos);
	if (!m->base)
		m->base = data - off;
	cr_assert_eq(data, m->base + off,
		     "record #%llu: payload at data offset %td, expected %zu "
		     "(a record must not straddle the end; padding fills the "
		     "gap)", m->popped, data - m->base, off);
	bad = pattern_mismatch(data, rec->len, e->seed);
	cr_assert_eq(bad, rec->len,
		     "record #%llu (%u bytes): payload byte %zu is wrong",
		     m->popped, (unsigned)rec->len, bad);
}

static void model_pop(struct model *m)
{
	const struct expect *e = &m->q[m->qhead++ % MODEL_QUEUE];

	m->rpos = e->end;
	if (m->rpos_hi < m->rpos)
		m->rpos_hi = m->rpos;
	m->popped++;
}

/* After a consumer call: with nothing left, trailing padding may be gone. */
static void model_consumer_called(struct model *m)
{
	if (model_queued(m) == 0)
		m->rpos_hi = m->wpos;
}

static int check_handler(const struct lull_record *rec, void *ctx)
{
	struct model *m = ctx;

	model_check(m, rec);
	model_pop(m);
	return LULL_READ_CONTINUE;
}

static int unexpected_handler(const struct lull_record *rec, void *ctx)
{
	(void)ctx;
	cr_assert_fail("handler called for a record of type %d and %u bytes",
		       (int)rec->type, (unsigned)rec->len);
	return LULL_READ_STOP;
}

static int unexpected_run_handler(const struct lull_items *run, void *ctx)
{
	(void)ctx;
	cr_assert_fail("handler called for a run of %u of type %d",
		       (unsigned)run->count, (int)run->type);
	return LULL_READ_STOP;
}

/*
 * The run lull_ring_read_items() must hand out next, with @room records
 * left to the read's limit: the items of one array record the model holds
 * at its head (alike expectations sharing the record's position), cut to
 * the room; any other record alone.
 */
static unsigned model_run_expected(const struct model *m, unsigned room)
{
	uint64_t pos = m->q[m->qhead % MODEL_QUEUE].pos;
	unsigned n = 1;

	while (n < room && n < model_queued(m) &&
	       m->q[(m->qhead + n) % MODEL_QUEUE].pos == pos)
		n++;
	return n;
}

/* A run reader's state: the model and what the read may still take. */
struct run_check {
	struct model *m;
	unsigned room;
};

/* Each run whole (model_run_expected()), each of its items checked. */
static int run_check_handler(const struct lull_items *run, void *ctx)
{
	struct run_check *rc = ctx;
	struct lull_record rec;
	unsigned want;

	cr_assert_gt(model_queued(rc->m), 0,
		     "a run of %u (type %d) was handed but none is expected",
		     (unsigned)run->count, (int)run->type);
	want = model_run_expected(rc->m, rc->room);
	cr_assert_eq(run->count, want, "record #%llu: a run of %u, expected %u",
		     rc->m->popped, (unsigned)run->count, want);
	for (uint32_t i = 0; i < run->count; i++) {
		rec.data = (const uint8_t *)run->data + (size_t)i * run->len;
		rec.len = run->len;
		rec.type = run->type;
		model_check(rc->m, &rec);
		model_pop(rc->m);
	}
	rc->room -= run->count;
	return LULL_READ_CONTINUE;
}

/*
 * A read of up to @limit records must return from @lo to @hi, every record
 * checked.  Reads take turns: lull_ring_read() on even calls,
 * lull_ring_read_items() on odd ones, so every check of the reads holds
 * for both.
 */
static void model_read_expect_between(struct model *m, struct lull_ring *ring,
				      unsigned limit, int lo, int hi)
{
	struct run_check rc = { .m = m, .room = limit };
	bool runs = m->reads++ % 2;
	int ret = runs ? lull_ring_read_items(ring, run_check_handler, &rc,
					      limit)
		       : lull_ring_read(ring, check_handler, m, limit);

	cr_assert(ret >= lo && ret <= hi, "%s(limit %u) = %d, expected %d (to %d)",
		  runs ? "lull_ring_read_items" : "lull_ring_read", limit, ret,
		  lo, hi);
	model_consumer_called(m);
}

/* A read of up to @limit records must return @want. */
static void model_read_expect(struct model *m, struct lull_ring *ring,
			      unsigned limit, int want)
{
	model_read_expect_between(m, ring, limit, want, want);
}

/*
 * How many of the queued records a read of up to @limit hands out from
 * the consumer's position @head: all of them, up to the limit, but in a
 * lap of LULL_GIVE_BACK_MIN_LAP or more the read ends after the record
 * that reaches a quarter lap past @head (gives_back() in ring_read.c).
 * An array's items are one record: the read ends after its last.
 */
static unsigned model_read_count(const struct model *m, unsigned limit,
				 uint64_t head)
{
	unsigned n, queued = model_queued(m);
	const struct expect *e, *prev = NULL;

	for (n = 0; n < queued && n < limit; n++) {
		e = &m->q[(m->qhead + n) % MODEL_QUEUE];
		if (prev && e->pos != prev->pos &&
		    m->cap >= LULL_GIVE_BACK_MIN_LAP &&
		    prev->end - head >= m->cap / 4)
			break;
		prev = e;
	}
	return n;
}

/*
 * Read up to @limit records: all the model holds, up to the limit and to
 * the first quarter lap.  The consumer's position is somewhere from rpos
 * to rpos_hi (past a trailing padding or not), and so is the quarter.
 */
static void model_read(struct model *m, struct lull_ring *ring,
		       unsigned limit)
{
	if (model_queued(m) == 0)
		model_read_expect(m, ring, limit, -EAGAIN);
	else
		model_read_expect_between(
			m, ring, limit, (int)model_read_count(m, limit, m->rpos),
			(int)model_read_count(m, limit, m->rpos_hi));
}

/* Peek the next record twice (the same one), then release it. */
static void model_peek(struct model *m, struct lull_ring *ring)
{
	struct lull_record rec, again;
	int ret = lull_ring_peek(ring, &rec);

	if (model_queued(m) == 0) {
		cr_assert_eq(ret, -EAGAIN, "peek of an empty ring = %d", ret);
		model_consumer_called(m);
		return;
	}
	cr_assert_eq(ret, 0, "lull_ring_peek() = %d", ret);
	model_check(m, &rec);
	cr_assert_eq(lull_ring_peek(ring, &again), 0);
	cr_assert(again.data == rec.data && again.len == rec.len &&
		  again.type == rec.type,
		  "a second peek returned another record");
	cr_assert_eq(lull_ring_release(ring), 0);
	model_pop(m);
	model_consumer_called(m);
}

/* Consume everything the model holds, with various read limits. */
static void model_drain(struct model *m, struct lull_ring *ring)
{
	unsigned limit = 1;

	while (model_queued(m)) {
		model_read(m, ring, limit);
		limit = limit % 5 + 1;
	}
	model_read(m, ring, 8);
}

/* The same, mixing lull_ring_read() with lull_ring_peek()/release(). */
static void model_drain_mixed(struct model *m, struct lull_ring *ring,
			      unsigned salt)
{
	unsigned i;

	for (i = salt; model_queued(m); i++) {
		if (i % 3 == 0)
			model_peek(m, ring);
		else
			model_read(m, ring, i % 4 + 1);
	}
	model_read(m, ring, 1);
	model_peek(m, ring);
}

/*
 * A handler that answers @action at its @at-th call, CONTINUE otherwise,
 * checking each record against the model.
 */
struct script {
	struct model *m;
	unsigned calls;
	unsigned at;
	int action;
};

static int script_handler(const struct lull_record *rec, void *ctx)
{
	struct script *s = ctx;

	model_check(s->m, rec);
	if (++s->calls == s->at) {
		if (s->action != LULL_READ_KEEP)
			model_pop(s->m);
		return s->action;
	}
	model_pop(s->m);
	return LULL_READ_CONTINUE;
}


/* Nothing can be consumed now: read and peek say -EAGAIN. */
static void expect_nothing(struct lull_ring *ring)
{
	struct lull_record rec;

	cr_assert_eq(lull_ring_read(ring, unexpected_handler, NULL, 16),
		     -EAGAIN, "read found a record");
	cr_assert_eq(lull_ring_peek(ring, &rec), -EAGAIN,
		     "peek found a record");
}

/*
 * The end of a ring, as the last producer's detach (or a shutdown) makes
 * it: every record still committed, then exactly one poison record, alone
 * in its batch and with no payload, then -EPIPE for every read and peek.
 */
struct ending {
	struct model *m;
	unsigned calls;   /* handler calls in the current read */
	unsigned poisons; /* poison records handed so far */
};

static int ending_handler(const struct lull_record *rec, void *ctx)
{
	struct ending *e = ctx;

	e->calls++;
	cr_assert_eq(e->poisons, 0,
		     "a record of type %d and %u bytes after the poison",
		     (int)rec->type, (unsigned)rec->len);
	if (rec->type == LULL_TYPE_POISON) {
		cr_assert_eq(rec->len, 0, "a poison record of %u bytes",
			     (unsigned)rec->len);
		cr_assert_eq(model_queued(e->m), 0,
			     "the poison came before %u committed records",
			     model_queued(e->m));
		e->poisons++;
		return LULL_READ_CONTINUE;
	}
	model_check(e->m, rec);
	model_pop(e->m);
	return LULL_READ_CONTINUE;
}

/* The ring is done: read and peek say -EPIPE, every time, handing nothing. */
static void expect_epipe(struct lull_ring *ring)
{
	struct lull_record rec;
	int i, ret;

	for (i = 0; i < 3; i++) {
		ret = lull_ring_read(ring, unexpected_handler, NULL, 16);
		cr_assert_eq(ret, -EPIPE, "read #%d after the poison = %d, "
			     "not -EPIPE", i, ret);
		ret = lull_ring_peek(ring, &rec);
		cr_assert_eq(ret, -EPIPE, "peek #%d after the poison = %d, "
			     "not -EPIPE", i, ret);
	}
}

/*
 * Read @ring, a ring that was shut down, to its end: what @m still holds,
 * in order, then the poison, then -EPIPE.  Returns false, having read
 * nothing, when @ring does not hold the consumer role.
 */
static bool model_expect_end(struct model *m, struct lull_ring *ring)
{
	struct ending e = { .m = m };
	unsigned limit = 1, reads = 0;
	int ret;

	for (;;) {
		e.calls = 0;
		ret = lull_ring_read(ring, ending_handler, &e, limit);
		if (ret == -EPERM && reads == 0)
			return false;
		if (ret == -EPIPE)
			break;
		cr_assert_gt(ret, 0, "read of a shut-down ring with %u "
			     "records left = %d", model_queued(m), ret);
		cr_assert_eq(e.calls, (unsigned)ret,
			     "%u handler calls for a read of %d", e.calls, ret);
		if (e.poisons)
			cr_assert_eq(ret, 1, "the poison shared a batch of %d",
				     ret);
		cr_assert_lt(++reads, 100000u, "the ring never ends");
		limit = limit % 5 + 1;
	}
	cr_assert_eq(e.poisons, 1, "%u poison records before -EPIPE",
		     e.poisons);
	cr_assert_eq(model_queued(m), 0, "-EPIPE with %u records undelivered",
		     model_queued(m));
	model_consumer_called(m);
	expect_epipe(ring);
	return true;
}

/* Only the poison is left: peek it (twice, the same), release it, done. */
static void expect_poison_by_peek(struct lull_ring *ring)
{
	struct lull_record rec, again;

	cr_assert_eq(lull_ring_peek(ring, &rec), 0, "no poison to peek");
	cr_assert_eq(rec.type, LULL_TYPE_POISON, "peeked type %d, not the "
		     "poison", (int)rec.type);
	cr_assert_eq(rec.len, 0);
	cr_assert_eq(lull_ring_peek(ring, &again), 0);
	cr_assert_eq(again.type, LULL_TYPE_POISON, "a second peek moved on");
	cr_assert_eq(lull_ring_read(ring, unexpected_handler, NULL, 4),
		     -EINVAL, "read with the poison peeked");
	cr_assert_eq(lull_ring_release(ring), 0);
	cr_assert_eq(lull_ring_release(ring), -EINVAL, "second release");
	expect_epipe(ring);
}

/* ------------------------------------------------------------------------
 * Writing records
 */

enum method { BY_WRITE, BY_WRITEV, BY_CLAIM, METHODS };

static const char *const method_name[METHODS] = {
	[BY_WRITE] = "write",
	[BY_WRITEV] = "writev",
	[BY_CLAIM] = "claim+commit",
};

/* Large enough for one more byte than the largest payload tested. */
static uint8_t payload_buf[(1u << 24) / 8 + 64];

/*
 * Write one record of @len pattern bytes by @how; returns the call's result.
 * A claim that fails must leave no claim behind.
 */
static int put(const struct topo *t, struct lull_producer *prod,
	       enum method how, int32_t type, size_t len, uint32_t seed)
{
	/*
	 * Writes copy from every alignment in turn: lull's copy of a large
	 * payload aligns its stores, not its loads (lib/copy.c).
	 */
	uint8_t *src = payload_buf + seed % 64;
	struct iovec iov[4];
	void *dst = NULL;
	size_t a, b;
	int ret;

	cr_assert_leq(len + 64, sizeof(payload_buf));
	switch (how) {
	case BY_WRITE:
		pattern_fill(src, len, seed);
		return t->write(prod, type, src, len);
	case BY_WRITEV:
		pattern_fill(payload_buf, len, seed);
		/* Uneven pieces, one of them empty. */
		a = len ? seed % (len + 1) : 0;
		b = a + (len - a) / 2;
		iov[0] = (struct iovec){ payload_buf, a };
		iov[1] = (struct iovec){ payload_buf + a, 0 };
		iov[2] = (struct iovec){ payload_buf + a, b - a };
		iov[3] = (struct iovec){ payload_buf + b, len - b };
		return t->writev(prod, type, iov, 4);
	default:
		ret = t->claim(prod, type, len, &dst);
		if (ret) {
			cr_assert_eq(t->commit(prod), -EINVAL,
				     "a claim that failed with %d left a "
				     "claim outstanding", ret);
			return ret;
		}
		cr_assert(len == 0 || dst, "claim gave a NULL payload");
		cr_assert_eq((uintptr_t)dst % LULL_RECORD_ALIGN, 0,
			     "claimed payload %p is not 8-byte aligned", dst);
		pattern_fill(dst, len, seed);
		ret = t->commit(prod);
		cr_assert_eq(ret, 0, "commit = %d", ret);
		return 0;
	}
}

/* A ring, one producer attached, and the model of what is in it. */
struct fix {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	size_t max;
	struct model m;
};

/* A read with a struct script handler; its calls checked against the result. */
static int script_read(struct fix *f, unsigned at, int action,
		       unsigned limit)
{
	struct script s = { .m = &f->m, .at = at, .action = action };
	int ret = lull_ring_read(f->ring, script_handler, &s, limit);

	if (ret >= 0)
		cr_assert_eq(s.calls, ret + (action == LULL_READ_KEEP &&
					     s.calls == at),
			     "%u handler calls for a read of %d", s.calls, ret);
	return ret;
}

static void fix_start(struct fix *f, const struct topo *t,
		      struct lull_ring *ring, size_t cap)
{
	ssize_t c = lull_ring_capacity(ring);
	ssize_t mp = lull_ring_max_payload(ring);
	int ret;

	cr_assert_eq(c, (ssize_t)cap, "capacity %zd, expected %zu", c, cap);
	cr_assert_eq(mp, (ssize_t)(cap / 8 - LULL_RECORD_HEADER_SIZE),
		     "max payload %zd for capacity %zu", mp, cap);
	f->t = t;
	f->ring = ring;
	f->max = (size_t)mp;
	ret = lull_producer_attach(ring, 0, &f->prod);
	cr_assert_eq(ret, 0, "lull_producer_attach() = %d", ret);
	model_init(&f->m, cap);
}

static void fix_init(struct fix *f, const struct topo *t, size_t cap)
{
	struct lull_ring *ring = NULL;
	int ret = lull_ring_create(&ring, cap, t->flags);

	cr_assert_eq(ret, 0, "lull_ring_create(%zu, %s) = %d", cap, t->name,
		     ret);
	fix_start(f, t, ring, cap);
}

/*
 * Detach the fixture's producer, the ring's last, and destroy the ring.
 * That detach shuts the ring down gracefully: no producer attaches any
 * more, and when f->ring is the consumer it reads what is left, the
 * poison, then -EPIPE.
 */
static void fix_fini(struct fix *f)
{
	struct lull_producer *late = NULL;
	int ret;

	cr_assert_eq(lull_producer_detach(f->prod), 0);
	ret = lull_producer_attach(f->ring, 0, &late);
	cr_assert_eq(ret, -EPIPE, "attach after the last detach = %d", ret);
	model_expect_end(&f->m, f->ring);
	cr_assert_eq(lull_ring_destroy(f->ring), 0);
}

/* Assert the result the model predicts for a write of @len bytes. */
static void model_expect_put(struct model *m, size_t len, int ret,
			     const char *what)
{
	bool must = model_fits(m, len, m->rpos);
	bool may = model_fits(m, len, m->rpos_hi);
	unsigned long long used = m->wpos - m->rpos;

	if (must)
		cr_assert_eq(ret, 0, "%s of %zu bytes with %llu of %zu bytes "
			     "used (at offset %zu) = %d", what, len, used,
			     m->cap, (size_t)(m->wpos & (m->cap - 1)), ret);
	else if (!may)
		cr_assert_eq(ret, -EAGAIN, "%s of %zu bytes with %llu of %zu "
			     "bytes used (at offset %zu) = %d, not -EAGAIN",
			     what, len, used, m->cap,
			     (size_t)(m->wpos & (m->cap - 1)), ret);
	else
		cr_assert(ret == 0 || ret == -EAGAIN, "%s = %d", what, ret);
	if (ret == 0 && !must)
		m->rpos = m->rpos_hi;
}

/* Write a record of @len bytes by @how through @prod, model-checked. */
static int fix_put_by(struct fix *f, struct lull_producer *prod,
		      enum method how, size_t len)
{
	struct model *m = &f->m;
	uint32_t seed = ++m->seed;
	int32_t type = pattern_type(seed);
	int ret;

	ret = put(f->t, prod, how, type, len, seed);
	model_expect_put(m, len, ret, method_name[how]);
	if (ret == 0)
		model_push(m, type, len, seed);
	return ret;
}

static int fix_put(struct fix *f, enum method how, size_t len)
{
	return fix_put_by(f, f->prod, how, len);
}

/* Write a record, reading through @consumer while the ring is full. */
static void fix_feed(struct fix *f, struct lull_ring *consumer,
		     enum method how, size_t len)
{
	unsigned tries = 0;

	while (fix_put(f, how, len) == -EAGAIN) {
		cr_assert_lt(tries++, f->m.cap, "no room for %zu bytes", len);
		model_read(&f->m, consumer, 2);
	}
}

/*
 * Claim a record of @len bytes, scribble on it and abort it, model-checked:
 * an SPSC abort leaves nothing, an MPSC one leaves padding.
 */
static int fix_claim_abort(struct fix *f, size_t len)
{
	const struct topo *t = f->t;
	struct model *m = &f->m;
	uint32_t seed = ++m->seed;
	void *dst = NULL;
	int ret;

	ret = t->claim(f->prod, pattern_type(seed), len, &dst);
	model_expect_put(m, len, ret, "claim");
	if (ret) {
		cr_assert_eq(t->commit(f->prod), -EINVAL,
			     "a failed claim left a claim outstanding");
		return ret;
	}
	pattern_fill(dst, len, seed);
	cr_assert_eq(t->abort(f->prod), 0, "abort of a claim failed");
	cr_assert_eq(t->commit(f->prod), -EINVAL, "commit after abort");
	cr_assert_eq(t->abort(f->prod), -EINVAL, "abort after abort");
	if (topo_is_mpsc(t))
		model_skip(m, len);
	return 0;
}

/*
 * An outstanding claim, entered into the model at its claimed position:
 * as a record when it will be committed, else as what a dropped claim
 * leaves (padding for MPSC, nothing for SPSC).
 */
struct pending {
	struct lull_producer *prod;
	void *dst;
	size_t len;
	uint32_t seed;
};

enum fate { WILL_COMMIT, WILL_DROP };

static void pending_claim(struct fix *f, struct pending *pc,
			  struct lull_producer *prod, size_t len,
			  enum fate fate)
{
	struct model *m = &f->m;
	int32_t type;
	int ret;

	pc->prod = prod;
	pc->len = len;
	pc->seed = ++m->seed;
	type = pattern_type(pc->seed);
	cr_assert(model_fits(m, len, m->rpos), "test bug: claim won't fit");
	ret = f->t->claim(prod, type, len, &pc->dst);
	cr_assert_eq(ret, 0, "claim of %zu bytes = %d", len, ret);
	cr_assert_eq((uintptr_t)pc->dst % LULL_RECORD_ALIGN, 0);
	/* Bytes a consumer must not see before the commit, if ever. */
	memset(pc->dst, 0xa5, len);
	if (fate == WILL_COMMIT)
		model_push(m, type, len, pc->seed);
	else if (topo_is_mpsc(f->t))
		model_skip(m, len);
}

static void pending_commit(struct fix *f, struct pending *pc)
{
	pattern_fill(pc->dst, pc->len, pc->seed);
	cr_assert_eq(f->t->commit(pc->prod), 0, "commit failed");
}

/* ------------------------------------------------------------------------
 * Regions in caller memory
 */

#define REGION_ALIGN 128u
/* Spare bytes after the region, so that it can be moved to mem + 64. */
#define REGION_SLACK 128u

struct region {
	uint8_t *mem;
	size_t size;  /* lull_ring_region_size() */
	size_t alloc; /* bytes at mem */
};

static void region_alloc(struct region *r, size_t cap)
{
	ssize_t size = lull_ring_region_size(cap);

	cr_assert_gt(size, 0, "lull_ring_region_size(%zu) = %zd", cap, size);
	r->size = (size_t)size;
	r->alloc = (r->size + REGION_SLACK + REGION_ALIGN - 1) &
		   ~(size_t)(REGION_ALIGN - 1);
	r->mem = aligned_alloc(REGION_ALIGN, r->alloc);
	cr_assert_not_null(r->mem);
	memset(r->mem, 0, r->alloc);
}

static void region_free(struct region *r)
{
	free(r->mem);
	r->mem = NULL;
}

static struct lull_ring *region_create(struct region *r, size_t cap,
				       const struct topo *t)
{
	struct lull_ring *ring = NULL;
	int ret;

	region_alloc(r, cap);
	ret = lull_ring_create_in(&ring, r->mem, r->size, cap, t->flags);
	cr_assert_eq(ret, 0, "lull_ring_create_in(%zu, %s) = %d", cap,
		     t->name, ret);
	return ring;
}

static struct lull_ring *region_open(struct region *r, unsigned flags)
{
	struct lull_ring *ring = NULL;
	int ret = lull_ring_open(&ring, r->mem, r->size, flags);

	cr_assert_eq(ret, 0, "lull_ring_open(flags %u) = %d", flags, ret);
	return ring;
}


#pragma GCC diagnostic pop

#endif
