/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - the Criterion suite of lull/ring.h: regions, producers of
 * both topologies, and the consumer.
 *
 * A check that applies to both topologies is written once, against struct
 * topo (the five producer calls of one family), and run by one Test() in
 * each of the suites spsc and mpsc.  Checks that do not depend on the
 * topology live in the suites region, ring and lull.
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
 * Every test has a 10 s watchdog (.timeout), so a consumer or producer that
 * never returns fails the test instead of stalling the run.
 */
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

/* ------------------------------------------------------------------------
 * The two producer families
 */

struct topo {
	unsigned flags;
	const char *name;
	int (*write)(struct lull_producer *prod, int32_t type,
		     const void *data, size_t len);
	int (*writev)(struct lull_producer *prod, int32_t type,
		      const struct iovec *iov, int iovcnt);
	int (*claim)(struct lull_producer *prod, int32_t type, size_t len,
		     void **datap);
	int (*commit)(struct lull_producer *prod);
	int (*abort)(struct lull_producer *prod);
};

static const struct topo spsc_topo = {
	.flags = LULL_RING_SPSC,
	.name = "spsc",
	.write = lull_spsc_write,
	.writev = lull_spsc_writev,
	.claim = lull_spsc_claim,
	.commit = lull_spsc_commit,
	.abort = lull_spsc_abort,
};

static const struct topo mpsc_topo = {
	.flags = LULL_RING_MPSC,
	.name = "mpsc",
	.write = lull_mpsc_write,
	.writev = lull_mpsc_writev,
	.claim = lull_mpsc_claim,
	.commit = lull_mpsc_commit,
	.abort = lull_mpsc_abort,
};

static const struct topo *other_topo(const struct topo *t)
{
	return t == &spsc_topo ? &mpsc_topo : &spsc_topo;
}

static bool is_mpsc(const struct topo *t)
{
	return t->flags == LULL_RING_MPSC;
}

/* ------------------------------------------------------------------------
 * Payload content: a byte pattern derived from a per-record seed
 */

static uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + 1u;

	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	return (uint8_t)x;
}

static void pattern_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

/* Index of the first byte that differs from the pattern, or @len. */
static size_t pattern_mismatch(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	return len;
}

/* User types 1..LULL_TYPE_MAX, the largest one included now and then. */
static int32_t type_for(uint32_t seed)
{
	if (seed % 5 == 0)
		return LULL_TYPE_MAX;
	return (int32_t)(1 + seed % 1000);
}

/* Bytes of ring a record of @len payload bytes takes. */
static size_t rec_space(size_t len)
{
	size_t align = LULL_RECORD_ALIGN;

	return LULL_RECORD_HEADER_SIZE + ((len + align - 1) & ~(align - 1));
}

/* ------------------------------------------------------------------------
 * The model of one ring
 */

#define MODEL_QUEUE 1024u

struct expect {
	uint64_t pos; /* where the record's header starts */
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
	e->type = type;
	e->len = (uint32_t)len;
	e->seed = seed;
	m->wpos = pos + rec_space(len);
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
	off = (size_t)(e->pos & (m->cap - 1));
	if (!m->base)
		m->base = data - LULL_RECORD_HEADER_SIZE - off;
	cr_assert_eq(data, m->base + off + LULL_RECORD_HEADER_SIZE,
		     "record #%llu: payload at data offset %td, expected %zu "
		     "(a record must not straddle the end; padding fills the "
		     "gap)", m->popped,
		     data - m->base, off + LULL_RECORD_HEADER_SIZE);
	bad = pattern_mismatch(data, rec->len, e->seed);
	cr_assert_eq(bad, rec->len,
		     "record #%llu (%u bytes): payload byte %zu is wrong",
		     m->popped, (unsigned)rec->len, bad);
}

static void model_pop(struct model *m)
{
	const struct expect *e = &m->q[m->qhead++ % MODEL_QUEUE];

	m->rpos = e->pos + rec_space(e->len);
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

/* lull_ring_read() must return @want, every record checked. */
static void model_read_expect(struct model *m, struct lull_ring *ring,
			      unsigned limit, int want)
{
	int ret = lull_ring_read(ring, check_handler, m, limit);

	cr_assert_eq(ret, want, "lull_ring_read(limit %u) = %d, expected %d",
		     limit, ret, want);
	model_consumer_called(m);
}

/* Read up to @limit records: all the model holds, up to the limit. */
static void model_read(struct model *m, struct lull_ring *ring,
		       unsigned limit)
{
	unsigned queued = model_queued(m);

	if (queued == 0)
		model_read_expect(m, ring, limit, -EAGAIN);
	else
		model_read_expect(m, ring, limit,
				  (int)(queued < limit ? queued : limit));
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
	struct iovec iov[4];
	void *dst = NULL;
	size_t a, b;
	int ret;

	cr_assert_leq(len, sizeof(payload_buf));
	switch (how) {
	case BY_WRITE:
		pattern_fill(payload_buf, len, seed);
		return t->write(prod, type, payload_buf, len);
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
	int32_t type = type_for(seed);
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

	ret = t->claim(f->prod, type_for(seed), len, &dst);
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
	if (is_mpsc(t))
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
	type = type_for(pc->seed);
	cr_assert(model_fits(m, len, m->rpos), "test bug: claim won't fit");
	ret = f->t->claim(prod, type, len, &pc->dst);
	cr_assert_eq(ret, 0, "claim of %zu bytes = %d", len, ret);
	cr_assert_eq((uintptr_t)pc->dst % LULL_RECORD_ALIGN, 0);
	/* Bytes a consumer must not see before the commit, if ever. */
	memset(pc->dst, 0xa5, len);
	if (fate == WILL_COMMIT)
		model_push(m, type, len, pc->seed);
	else if (is_mpsc(f->t))
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

/* ========================================================================
 * lull: version and error strings
 */

Test(lull, version_matches_header, .timeout = 10)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", LULL_VERSION_MAJOR,
		 LULL_VERSION_MINOR, LULL_VERSION_PATCH);
	cr_assert_str_eq(LULL_VERSION_STRING, want);
	cr_assert_not_null(lull_version());
	cr_assert_str_eq(lull_version(), LULL_VERSION_STRING);
}

static const struct {
	const char *name;
	int code;
} error_names[] = {
	{ "EINVAL", EINVAL },	  { "EAGAIN", EAGAIN }, { "EMSGSIZE", EMSGSIZE },
	{ "EBUSY", EBUSY },	  { "EPERM", EPERM },	{ "ENOMEM", ENOMEM },
	{ "EPROTO", EPROTO },	  { "EPIPE", EPIPE },	{ "EALREADY", EALREADY },
	{ "ENOENT", ENOENT },
};

#define NERROR_NAMES (sizeof(error_names) / sizeof(error_names[0]))

/* Append the words of @text to @out, one space between any two. */
static void append_words(char *out, size_t size, const char *text)
{
	size_t len = strlen(out);

	for (; *text; text++) {
		if (*text == ' ' || *text == '\t' || *text == '\n') {
			if (len && out[len - 1] != ' ' && len + 1 < size)
				out[len++] = ' ';
			continue;
		}
		if (len + 1 < size)
			out[len++] = *text;
	}
	out[len] = '\0';
}

/*
 * The error table in lull/ring.h, which says what each code means across
 * every header, and lull_strerror() agree word for word: the header is
 * what a caller reads, the string what a caller prints.  Every code in the
 * table is one lull gives a meaning of its own, distinct from the others.
 */
Test(lull, strerror_says_what_the_headers_document, .timeout = 10)
{
	char path[512], line[256], texts[NERROR_NAMES][512];
	bool seen[NERROR_NAMES] = { false }, in_table = false;
	const char *src = __FILE__, *slash = strrchr(src, '/');
	int current = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%.*s/../include/lull/ring.h",
		 slash ? (int)(slash - src) : 1, slash ? src : ".");
	f = fopen(path, "r");
	if (!f)
		cr_skip_test("%s: %s (run from the source tree)", path,
			     strerror(errno));
	memset(texts, 0, sizeof(texts));
	while (fgets(line, sizeof(line), f)) {
		char name[16], *rest;

		if (strstr(line, " * Errors are negative errno values")) {
			in_table = true;
			continue;
		}
		if (!in_table)
			continue;
		if (strstr(line, " * In the rings:"))
			break;
		if (sscanf(line, " *   -%15[A-Z]", name) == 1) {
			current = -1;
			for (size_t i = 0; i < NERROR_NAMES; i++)
				if (!strcmp(name, error_names[i].name))
					current = (int)i;
			cr_assert_geq(current, 0,
				      "the table documents -%s, which this "
				      "test does not know", name);
			seen[current] = true;
			rest = strchr(line, '-') + 1 + strlen(name);
			append_words(texts[current], sizeof(texts[0]), rest);
		} else if (current >= 0 && strncmp(line, " *      ", 8) == 0) {
			append_words(texts[current], sizeof(texts[0]),
				     line + 2);
		}
	}
	fclose(f);
	cr_assert(in_table, "no error table in %s", path);
	for (size_t i = 0; i < NERROR_NAMES; i++) {
		const char *s = lull_strerror(-error_names[i].code);
		char want[512];

		cr_assert(seen[i], "-%s is not in the table of %s",
			  error_names[i].name, path);
		snprintf(want, sizeof(want), "%s", texts[i]);
		/* Trim the trailing space the last line leaves. */
		if (*want && want[strlen(want) - 1] == ' ')
			want[strlen(want) - 1] = '\0';
		cr_assert_str_eq(s, want,
				 "lull_strerror(-%s) is \"%s\"; the header "
				 "documents \"%s\"",
				 error_names[i].name, s, want);
		cr_assert_str_eq(s, lull_strerror(error_names[i].code));
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(s, lull_strerror(-error_names[j].code),
					  "-%s and -%s read the same",
					  error_names[i].name,
					  error_names[j].name);
	}
	cr_assert_str_not_empty(lull_strerror(0));
}

Test(lull, strerror_handles_unknown_values, .timeout = 10)
{
	static const int unknown[] = {
		-9999, 9999, -4096, 4096, 1 << 20, INT_MAX, INT_MIN,
		INT_MIN + 1,
	};
	size_t i, j;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		const char *s = lull_strerror(unknown[i]);

		cr_assert_not_null(s, "lull_strerror(%d) is NULL", unknown[i]);
		cr_assert_str_not_empty(s, "lull_strerror(%d) is empty",
					unknown[i]);
		for (j = 0; j < NERROR_NAMES; j++)
			cr_assert_str_neq(s,
					  lull_strerror(-error_names[j].code),
					  "unknown %d reads like %d",
					  unknown[i], -error_names[j].code);
	}
}

/* ========================================================================
 * region: sizes, creation in caller memory, opening
 */

static bool capacity_is_valid(size_t c)
{
	return c >= LULL_RING_MIN_CAPACITY && c <= LULL_RING_MAX_CAPACITY &&
	       (c & (c - 1)) == 0;
}

static void check_region_size(size_t c)
{
	ssize_t r = lull_ring_region_size(c);

	if (capacity_is_valid(c))
		cr_assert_gt(r, (ssize_t)c, "lull_ring_region_size(%zu) = %zd",
			     c, r);
	else
		cr_assert_eq(r, -EINVAL, "lull_ring_region_size(%zu) = %zd, "
			     "not -EINVAL", c, r);
}

Test(region, size_rejects_every_invalid_capacity, .timeout = 10)
{
	size_t c;
	unsigned k;

	for (c = 0; c <= (size_t)1 << 17; c++)
		check_region_size(c);
	for (k = 0; k < sizeof(size_t) * CHAR_BIT; k++) {
		size_t p = (size_t)1 << k;

		check_region_size(p);
		check_region_size(p - 1);
		check_region_size(p + 1);
		check_region_size(p + p / 2);
		check_region_size(p | 8);
		check_region_size(~p);
	}
	check_region_size(SIZE_MAX);
	check_region_size((size_t)SSIZE_MAX);
	check_region_size((size_t)SSIZE_MAX + 1);
}

Test(region, size_grows_with_capacity, .timeout = 10)
{
	size_t c;

	for (c = LULL_RING_MIN_CAPACITY; c < LULL_RING_MAX_CAPACITY; c *= 2) {
		ssize_t a = lull_ring_region_size(c);
		ssize_t b = lull_ring_region_size(2 * c);

		cr_assert_gt(a, (ssize_t)c);
		cr_assert_geq(b - a, (ssize_t)c,
			      "region of %zu bytes is %zd, of %zu is %zd", c, a,
			      2 * c, b);
	}
}

static const size_t bad_capacities[] = {
	0, 1, 8, 64, 128, 255, 257, 384, 1000, 4095, 4097, 12288,
	((size_t)1 << 30) + 1, (size_t)1 << 31, (size_t)3 << 29,
	(size_t)1 << 40, SIZE_MAX,
};

#define NBAD_CAPACITIES (sizeof(bad_capacities) / sizeof(bad_capacities[0]))

Test(region, create_rejects_invalid_capacity_and_topology, .timeout = 10)
{
	static const unsigned bad_flags[] = { 0, 3, 4, 0x100, ~0u };
	struct lull_ring *ring;
	size_t i;

	for (i = 0; i < NBAD_CAPACITIES; i++) {
		cr_assert_eq(lull_ring_create(&ring, bad_capacities[i],
					      LULL_RING_SPSC), -EINVAL,
			     "SPSC capacity %zu", bad_capacities[i]);
		cr_assert_eq(lull_ring_create(&ring, bad_capacities[i],
					      LULL_RING_MPSC), -EINVAL,
			     "MPSC capacity %zu", bad_capacities[i]);
	}
	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
		cr_assert_eq(lull_ring_create(&ring, 256, bad_flags[i]),
			     -EINVAL, "flags %#x", bad_flags[i]);
}

Test(region, create_in_rejects_bad_memory_and_arguments, .timeout = 10)
{
	static const unsigned bad_flags[] = { 0, 3, 4, 0x100 };
	struct lull_ring *ring;
	struct region r;
	size_t i;

	region_alloc(&r, 4096);
	cr_assert_eq(lull_ring_create_in(NULL, r.mem, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, NULL, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	/* Aligned to 8 and to 64 bytes, but not to 128. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 8, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 64, r.size, 4096,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 1, r.size, 4096,
					 LULL_RING_MPSC), -EINVAL);
	/* Too small: by one byte, or for the capacity asked. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size - 1, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, 0, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 8192,
					 LULL_RING_MPSC), -EINVAL);
	for (i = 0; i < NBAD_CAPACITIES; i++)
		cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size,
						 bad_capacities[i],
						 LULL_RING_SPSC), -EINVAL,
			     "capacity %zu", bad_capacities[i]);
	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
		cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 4096,
						 bad_flags[i]), -EINVAL,
			     "flags %#x", bad_flags[i]);
	/* The exact size and a larger one are fine. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 4096,
					 LULL_RING_SPSC), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.alloc, 4096,
					 LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&r);
}

Test(region, create_in_overwrites_previous_content, .timeout = 10)
{
	struct lull_ring *ring = NULL;
	struct region r;
	struct fix f;

	region_alloc(&r, 256);
	memset(r.mem, 0x5a, r.alloc);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_MPSC), 0);
	fix_start(&f, &mpsc_topo, ring, 256);
	expect_nothing(ring);
	fix_put(&f, BY_WRITE, 3);
	fix_put(&f, BY_CLAIM, 17);
	fix_fini(&f);

	/* A new region over an old one with records in it starts empty. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_SPSC), 0);
	fix_start(&f, &spsc_topo, ring, 256);
	expect_nothing(ring);
	fix_put(&f, BY_WRITEV, 24);
	model_drain(&f.m, ring);
	fix_fini(&f);
	region_free(&r);
}

Test(region, open_of_zeroed_or_garbage_memory_is_eproto, .timeout = 10)
{
	struct lull_ring *ring;
	struct region r;
	size_t i;

	region_alloc(&r, 256);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, 0), -EPROTO);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, LULL_OPEN_CONSUMER),
		     -EPROTO);
	memset(r.mem, 0xa5, r.alloc);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, 0), -EPROTO);
	for (i = 0; i < r.alloc; i++)
		r.mem[i] = pattern_byte(7, i);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, LULL_OPEN_CONSUMER),
		     -EPROTO);
	region_free(&r);
}

static void open_corrupt_header(const struct topo *t)
{
	struct lull_ring *ring, *other;
	struct region a, b;
	int i;

	ring = region_create(&a, 256, t);
	region_alloc(&b, 256);
	/* An intact copy opens (the region holds no pointers)... */
	memcpy(b.mem, a.mem, a.size);
	other = region_open(&b, 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	/*
	 * ...and one with a flipped byte in the magic, which a region's
	 * header starts with, is refused.
	 */
	for (i = 0; i < 4; i++) {
		memcpy(b.mem, a.mem, a.size);
		b.mem[i] ^= 0x5a;
		cr_assert_eq(lull_ring_open(&other, b.mem, b.size, 0), -EPROTO,
			     "byte %d of the header flipped", i);
		cr_assert_eq(lull_ring_open(&other, b.mem, b.size,
					    LULL_OPEN_CONSUMER), -EPROTO,
			     "byte %d of the header flipped", i);
	}
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&a);
	region_free(&b);
}

Test(spsc, open_of_corrupt_magic_is_eproto, .timeout = 10)
{
	open_corrupt_header(&spsc_topo);
}

Test(mpsc, open_of_corrupt_magic_is_eproto, .timeout = 10)
{
	open_corrupt_header(&mpsc_topo);
}

Test(region, open_rejects_bad_arguments, .timeout = 10)
{
	struct lull_ring *ring, *other;
	struct region r;

	ring = region_create(&r, 4096, &spsc_topo);
	cr_assert_eq(lull_ring_open(NULL, r.mem, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, NULL, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, r.size - 1, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, 0, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, 64, 0), -EINVAL);
	/* A valid region image, but not 128-byte aligned. */
	cr_assert_eq(lull_ring_destroy(ring), 0);
	memmove(r.mem + 64, r.mem, r.size);
	cr_assert_eq(lull_ring_open(&other, r.mem + 64, r.size, 0), -EINVAL);
	memmove(r.mem + 8, r.mem + 64, r.size);
	cr_assert_eq(lull_ring_open(&other, r.mem + 8, r.size, 0), -EINVAL);
	/* Moved back in place it opens, with or without spare bytes. */
	memmove(r.mem, r.mem + 8, r.size);
	other = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_open(&other, r.mem, r.alloc, 0), 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	region_free(&r);
}

/* Producers on an opened handle write; the creating handle reads. */
static void opened_handle_produces(const struct topo *t)
{
	struct lull_ring *creator, *opened;
	struct lull_record rec;
	struct region r;
	struct fix f;
	int i;

	creator = region_create(&r, 4096, t);
	opened = region_open(&r, 0);
	cr_assert_eq(lull_ring_capacity(opened), 4096);
	cr_assert_eq(lull_ring_max_payload(opened), 4096 / 8 - 8);
	fix_start(&f, t, opened, 4096);
	for (i = 0; i < 12; i++)
		fix_put(&f, (enum method)(i % METHODS), (size_t)i * 11);
	/* The opened handle does not consume... */
	cr_assert_eq(lull_ring_read(opened, check_handler, &f.m, 4), -EPERM);
	cr_assert_eq(lull_ring_peek(opened, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(opened), -EPERM);
	/* ...the creator does, and gets every record. */
	model_drain_mixed(&f.m, creator, 1);
	fix_fini(&f);
	/* The detach through the opened handle ended the region's ring. */
	cr_assert(model_expect_end(&f.m, creator));
	cr_assert_eq(lull_ring_destroy(creator), 0);
	region_free(&r);
}

Test(spsc, opened_handle_producer_reaches_consumer, .timeout = 10)
{
	opened_handle_produces(&spsc_topo);
}

Test(mpsc, opened_handle_producer_reaches_consumer, .timeout = 10)
{
	opened_handle_produces(&mpsc_topo);
}

static void consumer_role_exclusive(const struct topo *t)
{
	struct lull_ring *creator, *plain, *second, *third;
	struct region r;

	creator = region_create(&r, 256, t);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	plain = region_open(&r, 0);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY,
		     "destroying a plain handle released the consumer role");
	cr_assert_eq(lull_ring_destroy(creator), 0);
	second = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_ring_open(&third, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	cr_assert_eq(lull_ring_destroy(second), 0);
	third = region_open(&r, LULL_OPEN_CONSUMER);
	expect_nothing(third);
	cr_assert_eq(lull_ring_destroy(third), 0);
	region_free(&r);
}

Test(spsc, second_consumer_is_ebusy_until_consumer_destroyed, .timeout = 10)
{
	consumer_role_exclusive(&spsc_topo);
}

Test(mpsc, second_consumer_is_ebusy_until_consumer_destroyed, .timeout = 10)
{
	consumer_role_exclusive(&mpsc_topo);
}

/* Opening a live region must not touch records or positions. */
static void open_keeps_live_records(const struct topo *t)
{
	struct lull_ring *creator, *writer, *extra, *consumer;
	struct region r;
	struct fix f;
	int i;

	creator = region_create(&r, 512, t);
	writer = region_open(&r, 0);
	fix_start(&f, t, writer, 512);
	for (i = 0; i < 8; i++)
		fix_put(&f, (enum method)(i % METHODS), (size_t)(i * 7) % 57);
	model_read(&f.m, creator, 2);
	extra = region_open(&r, 0);
	model_read(&f.m, creator, 1);
	cr_assert_eq(lull_ring_destroy(creator), 0);
	/* A new consumer resumes where the old one stopped. */
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	model_read(&f.m, consumer, 2);
	for (i = 0; i < 40; i++)
		fix_feed(&f, consumer, (enum method)(i % METHODS),
			 (size_t)(i * 5) % 57);
	model_drain(&f.m, consumer);
	fix_fini(&f);
	cr_assert_eq(lull_ring_destroy(extra), 0);
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	region_free(&r);
}

Test(spsc, open_keeps_live_records, .timeout = 10)
{
	open_keeps_live_records(&spsc_topo);
}

Test(mpsc, open_keeps_live_records, .timeout = 10)
{
	open_keeps_live_records(&mpsc_topo);
}

/*
 * A region copied elsewhere is the same ring: it holds no pointers.  The
 * records, the positions (past several wraps) and the shutdown state all
 * travel with the bytes.  The copy is taken once the producer detached,
 * which shut the ring down: a producer's handle points into the region, so
 * a live one cannot follow it.
 */
static void region_moves(const struct topo *t)
{
	struct lull_producer *late;
	struct lull_ring *ring, *moved;
	struct region a, b, c;
	struct fix f;
	int i;

	ring = region_create(&a, 256, t);
	fix_start(&f, t, ring, 256);
	for (i = 0; i < 30; i++)
		fix_feed(&f, ring, (enum method)(i % METHODS),
			 (size_t)i % 25);
	model_read(&f.m, ring, 3);
	for (i = 0; i < 2; i++)
		fix_feed(&f, ring, BY_WRITE, 20);
	cr_assert_gt(model_queued(&f.m), 3, "test bug: too few records left");
	cr_assert_gt(f.m.wpos, 2 * f.m.cap, "test bug: the ring did not wrap");
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);

	region_alloc(&b, 256);
	memcpy(b.mem, a.mem, a.size);
	memset(a.mem, 0xee, a.alloc);
	moved = region_open(&b, LULL_OPEN_CONSUMER);
	/* Shut down before the move: shut down after it. */
	cr_assert_eq(lull_producer_attach(moved, 0, &late), -EPIPE);
	f.ring = moved;
	f.m.base = NULL;
	model_read(&f.m, moved, 1);
	cr_assert(f.m.base >= b.mem && f.m.base + 256 <= b.mem + b.size,
		  "the data area is not inside the moved region");
	model_peek(&f.m, moved);
	cr_assert(model_expect_end(&f.m, moved));
	cr_assert_eq(lull_ring_destroy(moved), 0);
	region_free(&a);

	/* A copy of a region no producer used yet takes producers. */
	ring = region_create(&a, 256, t);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_alloc(&c, 256);
	memcpy(c.mem, a.mem, a.size);
	memset(a.mem, 0xee, a.alloc);
	moved = region_open(&c, LULL_OPEN_CONSUMER);
	fix_start(&f, t, moved, 256);
	for (i = 0; i < 30; i++)
		fix_feed(&f, moved, (enum method)(i % METHODS),
			 (size_t)i % 25);
	cr_assert(f.m.base >= c.mem && f.m.base + 256 <= c.mem + c.size,
		  "the data area is not inside the copied region");
	model_drain(&f.m, moved);
	fix_fini(&f);
	region_free(&a);
	region_free(&b);
	region_free(&c);
}

Test(spsc, region_can_be_moved, .timeout = 10)
{
	region_moves(&spsc_topo);
}

Test(mpsc, region_can_be_moved, .timeout = 10)
{
	region_moves(&mpsc_topo);
}

/* Every valid capacity: the right size, and usable to its largest record. */
static void create_every_capacity(const struct topo *t)
{
	struct lull_ring *ring;
	struct region r;
	struct fix f;
	size_t cap;

	for (cap = LULL_RING_MIN_CAPACITY; cap <= (size_t)1 << 24; cap *= 2) {
		fix_init(&f, t, cap);
		fix_put(&f, BY_WRITE, f.max);
		fix_put(&f, BY_CLAIM, 0);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
	for (cap = LULL_RING_MIN_CAPACITY; cap <= (size_t)1 << 16; cap *= 2) {
		ring = region_create(&r, cap, t);
		fix_start(&f, t, ring, cap);
		fix_put(&f, BY_WRITEV, f.max);
		model_drain(&f.m, ring);
		fix_fini(&f);
		region_free(&r);
	}
}

Test(spsc, create_accepts_every_valid_capacity, .timeout = 10)
{
	create_every_capacity(&spsc_topo);
}

Test(mpsc, create_accepts_every_valid_capacity, .timeout = 10)
{
	create_every_capacity(&mpsc_topo);
}

/* ========================================================================
 * ring: arguments
 */

Test(ring, null_arguments_are_einval, .timeout = 10)
{
	struct lull_ring *ring, *other;
	struct lull_record rec;
	struct region r;

	cr_assert_eq(lull_ring_create(NULL, 256, LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create(NULL, 256, LULL_RING_MPSC), -EINVAL);
	region_alloc(&r, 256);
	cr_assert_eq(lull_ring_create_in(NULL, r.mem, r.size, 256,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, NULL, r.size, 256,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_open(NULL, r.mem, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, NULL, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_destroy(NULL), -EINVAL);
	cr_assert_eq(lull_ring_capacity(NULL), -EINVAL);
	cr_assert_eq(lull_ring_max_payload(NULL), -EINVAL);
	cr_assert_eq(lull_producer_attach(NULL, 0, NULL), -EINVAL);
	cr_assert_eq(lull_producer_attach(ring, 0, NULL), -EINVAL);
	cr_assert_eq(lull_producer_detach(NULL), -EINVAL);
	cr_assert_eq(lull_spsc_write(NULL, 1, "x", 1), -EINVAL);
	cr_assert_eq(lull_spsc_writev(NULL, 1, NULL, 0), -EINVAL);
	cr_assert_eq(lull_spsc_claim(NULL, 1, 1, NULL), -EINVAL);
	cr_assert_eq(lull_spsc_commit(NULL), -EINVAL);
	cr_assert_eq(lull_spsc_abort(NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_write(NULL, 1, "x", 1), -EINVAL);
	cr_assert_eq(lull_mpsc_writev(NULL, 1, NULL, 0), -EINVAL);
	cr_assert_eq(lull_mpsc_claim(NULL, 1, 1, NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_commit(NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_abort(NULL), -EINVAL);
	cr_assert_eq(lull_ring_read(NULL, check_handler, NULL, 1), -EINVAL);
	cr_assert_eq(lull_ring_read(ring, NULL, NULL, 1), -EINVAL);
	cr_assert_eq(lull_ring_peek(NULL, &rec), -EINVAL);
	cr_assert_eq(lull_ring_peek(ring, NULL), -EINVAL);
	cr_assert_eq(lull_ring_release(NULL), -EINVAL);
	/* The ring is untouched by all of it. */
	expect_nothing(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&r);
}

/* Producer calls with NULL or bad pointers write nothing, claim nothing. */
static void producer_null_arguments(const struct topo *t)
{
	struct iovec iov = { payload_buf, 4 };
	void *dst;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(t->write(NULL, 1, payload_buf, 1), -EINVAL);
	cr_assert_eq(t->write(f.prod, 1, NULL, 1), -EINVAL);
	cr_assert_eq(t->writev(NULL, 1, &iov, 1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, NULL, 1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, &iov, -1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, &iov, INT_MIN), -EINVAL);
	cr_assert_eq(t->claim(NULL, 1, 8, &dst), -EINVAL);
	cr_assert_eq(t->claim(f.prod, 1, 8, NULL), -EINVAL);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "a claim is outstanding");
	cr_assert_eq(t->commit(NULL), -EINVAL);
	cr_assert_eq(t->abort(NULL), -EINVAL);
	expect_nothing(f.ring);
	fix_put(&f, BY_WRITE, 9);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, producer_null_arguments_are_einval, .timeout = 10)
{
	producer_null_arguments(&spsc_topo);
}

Test(mpsc, producer_null_arguments_are_einval, .timeout = 10)
{
	producer_null_arguments(&mpsc_topo);
}

/* ========================================================================
 * Producers: attach, detach, topology, destroy
 */

/*
 * The SPSC producer role is the region's, not a handle's: a second attach,
 * through any handle, is -EBUSY while the producer is attached.  Its
 * detach is the last one, so it shuts the ring down: attaching again, by
 * any handle and with any flag, is then -EPIPE (not -EBUSY: the detach
 * gave the role back), and the consumer gets the records, then the poison.
 */
Test(spsc, second_producer_is_ebusy_until_detach_then_epipe, .timeout = 10)
{
	struct lull_producer *second = NULL;
	struct lull_ring *opened;
	struct region r;
	struct fix f;

	fix_start(&f, &spsc_topo, region_create(&r, 256, &spsc_topo), 256);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, LULL_PRODUCER_THREAD,
					  &second), -EBUSY);
	opened = region_open(&r, 0);
	cr_assert_eq(lull_producer_attach(opened, 0, &second), -EBUSY);
	fix_put(&f, BY_WRITE, 5);
	model_read(&f.m, f.ring, 8);
	/* Records the consumer has not read yet outlive the producer. */
	fix_put(&f, BY_CLAIM, 6);
	fix_put(&f, BY_WRITEV, 7);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_producer_attach(opened, 0, &second), -EPIPE);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EPIPE);
	cr_assert_eq(lull_producer_attach(f.ring, LULL_PRODUCER_THREAD,
					  &second), -EPIPE);
	/* A failed attach holds nothing: both handles can be destroyed. */
	cr_assert_eq(lull_ring_destroy(opened), 0);
	cr_assert(model_expect_end(&f.m, f.ring));
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EPIPE);
	cr_assert_eq(lull_ring_destroy(f.ring), 0);
	region_free(&r);
}

Test(mpsc, many_producers_attach_and_write, .timeout = 10)
{
	struct lull_producer *p[16];
	struct fix f;
	int i, round;

	fix_init(&f, &mpsc_topo, 4096);
	for (i = 0; i < 16; i++)
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p[i]), 0,
			     "producer %d", i);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < 16; i++)
			fix_put_by(&f, p[(i * 7 + round) % 16],
				   (enum method)((i + round) % METHODS),
				   (size_t)(i * 3 + round));
		model_drain_mixed(&f.m, f.ring, (unsigned)round);
	}
	for (i = 0; i < 16; i++)
		cr_assert_eq(lull_producer_detach(p[i]), 0);
	fix_fini(&f);
}

/*
 * LULL_PRODUCER_THREAD is the only attach flag: any other bit, alone or
 * with it, is -EINVAL and attaches nothing.
 */
static void attach_flags(const struct topo *t)
{
	static const unsigned bad[] = {
		2, 4, 0x80, 0x80000000u, ~0u, LULL_PRODUCER_THREAD | 2,
		~LULL_PRODUCER_THREAD,
	};
	struct lull_producer *prod;
	struct lull_ring *ring;
	size_t i;

	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(lull_producer_attach(ring, bad[i], &prod), -EINVAL,
			     "flags %#x", bad[i]);
	/* Nothing was attached, so nothing detached: the ring is open... */
	expect_nothing(ring);
	/* ...and the SPSC role is free, for the one flag there is. */
	cr_assert_eq(lull_producer_attach(ring, LULL_PRODUCER_THREAD, &prod),
		     0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_by_peek(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(spsc, attach_with_flags_is_einval, .timeout = 10)
{
	attach_flags(&spsc_topo);
}

Test(mpsc, attach_with_flags_is_einval, .timeout = 10)
{
	attach_flags(&mpsc_topo);
}

/* The other family's calls fail and leave the ring and the claim alone. */
static void other_family_rejected(const struct topo *t)
{
	const struct topo *o = other_topo(t);
	struct iovec iov = { payload_buf, 8 };
	struct pending pc;
	void *dst = NULL;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(o->write(f.prod, 1, payload_buf, 8), -EINVAL);
	cr_assert_eq(o->write(f.prod, 1, NULL, 0), -EINVAL);
	cr_assert_eq(o->writev(f.prod, 1, &iov, 1), -EINVAL);
	cr_assert_eq(o->claim(f.prod, 1, 8, &dst), -EINVAL);
	cr_assert_eq(o->commit(f.prod), -EINVAL);
	cr_assert_eq(o->abort(f.prod), -EINVAL);
	expect_nothing(f.ring);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "the other claim counted");

	pending_claim(&f, &pc, f.prod, 24, WILL_COMMIT);
	cr_assert_eq(o->commit(f.prod), -EINVAL);
	cr_assert_eq(o->abort(f.prod), -EINVAL);
	cr_assert_eq(o->write(f.prod, 1, payload_buf, 8), -EINVAL);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, mpsc_calls_are_einval, .timeout = 10)
{
	other_family_rejected(&spsc_topo);
}

Test(mpsc, spsc_calls_are_einval, .timeout = 10)
{
	other_family_rejected(&mpsc_topo);
}

/*
 * Destroy is -EBUSY while any producer is attached through the handle,
 * even once the ring is shut down, and releases nothing.
 */
static void destroy_busy(const struct topo *t)
{
	struct lull_producer *second;
	struct fix f;

	fix_init(&f, t, 256);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	/* Nothing was released: the ring and the producer still work. */
	fix_put(&f, BY_WRITE, 10);
	model_read(&f.m, f.ring, 4);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second),
		     is_mpsc(t) ? 0 : -EBUSY);
	if (is_mpsc(t)) {
		/* Not the last producer: the ring stays open. */
		cr_assert_eq(lull_producer_detach(f.prod), 0);
		cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
		f.prod = second;
		fix_put(&f, BY_WRITEV, 12);
		model_read(&f.m, f.ring, 4);
	}
	fix_put(&f, BY_CLAIM, 11);
	model_read(&f.m, f.ring, 4);
	/* Shut down, the producer is still attached: still -EBUSY. */
	fix_put(&f, BY_WRITE, 13);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(t->write(f.prod, 1, payload_buf, 14), -EPIPE);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	fix_fini(&f);
}

Test(spsc, destroy_with_attached_producer_is_ebusy, .timeout = 10)
{
	destroy_busy(&spsc_topo);
}

Test(mpsc, destroy_with_attached_producer_is_ebusy, .timeout = 10)
{
	destroy_busy(&mpsc_topo);
}

/*
 * Only producers attached through the handle itself keep it alive.  Each
 * half on a region of its own: an SPSC producer's detach is the last one
 * and ends the ring.
 */
static void destroy_other_handle(const struct topo *t)
{
	struct lull_ring *creator, *plain, *consumer;
	struct region r;
	struct fix f;

	/* A producer of the creating handle keeps a plain one from nothing. */
	creator = region_create(&r, 256, t);
	plain = region_open(&r, 0);
	fix_start(&f, t, creator, 256);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	fix_put(&f, BY_WRITE, 1);
	model_read(&f.m, creator, 4);
	fix_put(&f, BY_CLAIM, 3);
	fix_fini(&f);
	region_free(&r);

	/* A producer of a plain handle keeps the consumers from nothing. */
	creator = region_create(&r, 256, t);
	plain = region_open(&r, 0);
	fix_start(&f, t, plain, 256);
	cr_assert_eq(lull_ring_destroy(creator), 0);
	fix_put(&f, BY_WRITEV, 2);
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	model_read(&f.m, consumer, 4);
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	cr_assert_eq(lull_ring_destroy(plain), -EBUSY);
	fix_put(&f, BY_WRITE, 4);
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	cr_assert(model_expect_end(&f.m, consumer));
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	region_free(&r);
}

Test(spsc, destroy_ignores_producers_of_other_handles, .timeout = 10)
{
	destroy_other_handle(&spsc_topo);
}

Test(mpsc, destroy_ignores_producers_of_other_handles, .timeout = 10)
{
	destroy_other_handle(&mpsc_topo);
}

/* ========================================================================
 * Records: round trips, types, sizes
 */

static void every_payload_size(const struct topo *t, enum method how)
{
	struct fix f;
	size_t len;
	unsigned tries;

	fix_init(&f, t, 4096);
	/* One at a time... */
	for (len = 0; len <= f.max; len++) {
		cr_assert_eq(fix_put(&f, how, len), 0, "%zu bytes", len);
		model_read(&f.m, f.ring, 1);
	}
	/* ...and with the ring kept full, so records of every size wrap. */
	for (len = 0; len <= f.max; len++) {
		for (tries = 0; fix_put(&f, how, len) == -EAGAIN; tries++) {
			cr_assert_lt(tries, 4096u);
			model_read(&f.m, f.ring, 1);
		}
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, write_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&spsc_topo, BY_WRITE);
}

Test(mpsc, write_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&mpsc_topo, BY_WRITE);
}

Test(spsc, writev_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&spsc_topo, BY_WRITEV);
}

Test(mpsc, writev_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&mpsc_topo, BY_WRITEV);
}

Test(spsc, claim_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&spsc_topo, BY_CLAIM);
}

Test(mpsc, claim_round_trips_every_payload_size, .timeout = 10)
{
	every_payload_size(&mpsc_topo, BY_CLAIM);
}

/* The largest record of big rings, and one byte more. */
static void largest_records(const struct topo *t)
{
	static const size_t caps[] = { 1u << 16, 1u << 20 };
	struct fix f;
	size_t i;
	int how;

	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		fix_init(&f, t, caps[i]);
		for (how = 0; how < METHODS; how++) {
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 1, 1), -EMSGSIZE,
				     "%s of max + 1 bytes", method_name[how]);
			fix_feed(&f, f.ring, (enum method)how, f.max);
			fix_feed(&f, f.ring, (enum method)how, f.max - 1);
		}
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

Test(spsc, largest_records_round_trip_on_big_rings, .timeout = 10)
{
	largest_records(&spsc_topo);
}

Test(mpsc, largest_records_round_trip_on_big_rings, .timeout = 10)
{
	largest_records(&mpsc_topo);
}

/* writev: no entries, many entries, empty entries. */
static void writev_shapes(const struct topo *t)
{
	struct iovec iov[64];
	struct model *m;
	struct fix f;
	uint32_t seed;
	int i;

	fix_init(&f, t, 4096);
	m = &f.m;
	cr_assert_eq(t->writev(f.prod, 3, iov, 0), 0, "iovcnt 0");
	model_push(m, 3, 0, 0);
	/* 64 one-byte pieces make one 64-byte record. */
	seed = ++m->seed;
	pattern_fill(payload_buf, 64, seed);
	for (i = 0; i < 64; i++)
		iov[i] = (struct iovec){ payload_buf + i, 1 };
	cr_assert_eq(t->writev(f.prod, 4, iov, 64), 0);
	model_push(m, 4, 64, seed);
	/* Empty pieces around the data. */
	seed = ++m->seed;
	pattern_fill(payload_buf, 100, seed);
	iov[0] = (struct iovec){ payload_buf, 0 };
	iov[1] = (struct iovec){ payload_buf, 100 };
	iov[2] = (struct iovec){ payload_buf + 100, 0 };
	cr_assert_eq(t->writev(f.prod, 5, iov, 3), 0);
	model_push(m, 5, 100, seed);
	model_drain(m, f.ring);
	fix_fini(&f);
}

Test(spsc, writev_gathers_any_number_of_pieces, .timeout = 10)
{
	writev_shapes(&spsc_topo);
}

Test(mpsc, writev_gathers_any_number_of_pieces, .timeout = 10)
{
	writev_shapes(&mpsc_topo);
}

/* Only @len > 0 with NULL @data is an error. */
static void null_data_of_zero_bytes(const struct topo *t)
{
	struct fix f;

	fix_init(&f, t, 256);
	cr_assert_eq(t->write(f.prod, 6, NULL, 1), -EINVAL);
	expect_nothing(f.ring);
	cr_assert_eq(t->write(f.prod, 6, NULL, 0), 0, "NULL data, 0 bytes");
	model_push(&f.m, 6, 0, 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, write_of_zero_bytes_accepts_null_data, .timeout = 10)
{
	null_data_of_zero_bytes(&spsc_topo);
}

Test(mpsc, write_of_zero_bytes_accepts_null_data, .timeout = 10)
{
	null_data_of_zero_bytes(&mpsc_topo);
}

static void reserved_types(const struct topo *t)
{
	static const int32_t bad[] = { LULL_TYPE_PADDING, -1, -2, INT32_MIN };
	struct fix f;
	size_t i;
	int how;

	fix_init(&f, t, 256);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (how = 0; how < METHODS; how++)
			cr_assert_eq(put(t, f.prod, (enum method)how, bad[i],
					 8, 1), -EINVAL, "%s of type %d",
				     method_name[how], (int)bad[i]);
	expect_nothing(f.ring);
	/* The bounds of the user range are fine. */
	for (how = 0; how < METHODS; how++) {
		f.m.seed++;
		cr_assert_eq(put(t, f.prod, (enum method)how, 1, 8, f.m.seed),
			     0);
		model_push(&f.m, 1, 8, f.m.seed);
		f.m.seed++;
		cr_assert_eq(put(t, f.prod, (enum method)how, LULL_TYPE_MAX,
				 8, f.m.seed), 0);
		model_push(&f.m, LULL_TYPE_MAX, 8, f.m.seed);
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, reserved_types_are_einval, .timeout = 10)
{
	reserved_types(&spsc_topo);
}

Test(mpsc, reserved_types_are_einval, .timeout = 10)
{
	reserved_types(&mpsc_topo);
}

static void oversized(const struct topo *t)
{
	static const size_t caps[] = { 256, 4096 };
	struct iovec iov[2];
	void *dst;
	struct fix f;
	size_t i;
	int how;

	for (i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		fix_init(&f, t, caps[i]);
		for (how = 0; how < METHODS; how++) {
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 1, 1), -EMSGSIZE);
			cr_assert_eq(put(t, f.prod, (enum method)how, 1,
					 f.max + 8, 1), -EMSGSIZE);
		}
		cr_assert_eq(t->write(f.prod, 1, payload_buf, SIZE_MAX),
			     -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, SIZE_MAX, &dst), -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, (size_t)UINT32_MAX + 1, &dst),
			     -EMSGSIZE);
		cr_assert_eq(t->claim(f.prod, 1, (size_t)INT32_MAX, &dst),
			     -EMSGSIZE);
		/* Pieces that each fit but not together. */
		iov[0] = (struct iovec){ payload_buf, f.max };
		iov[1] = (struct iovec){ payload_buf, 1 };
		cr_assert_eq(t->writev(f.prod, 1, iov, 2), -EMSGSIZE);
		/* Pieces whose sum wraps around to 0. */
		iov[0] = (struct iovec){ payload_buf, SIZE_MAX / 2 + 1 };
		iov[1] = (struct iovec){ payload_buf, SIZE_MAX / 2 + 1 };
		cr_assert_eq(t->writev(f.prod, 1, iov, 2), -EMSGSIZE);
		cr_assert_eq(t->commit(f.prod), -EINVAL);
		expect_nothing(f.ring);
		fix_put(&f, BY_WRITEV, f.max);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

Test(spsc, oversized_records_are_emsgsize, .timeout = 10)
{
	oversized(&spsc_topo);
}

Test(mpsc, oversized_records_are_emsgsize, .timeout = 10)
{
	oversized(&mpsc_topo);
}

/* ========================================================================
 * Full ring
 */

static void full_ring(const struct topo *t)
{
	struct fix f;
	size_t len;
	int i, n;

	/* 32-byte records: 8 of them fill the 256 bytes exactly. */
	fix_init(&f, t, 256);
	for (i = 0; i < 8; i++)
		cr_assert_eq(fix_put(&f, (enum method)(i % METHODS), 24), 0,
			     "record %d of 8", i);
	/* No way of writing gets in, not even the smallest record. */
	for (i = 0; i < METHODS; i++) {
		cr_assert_eq(fix_put(&f, (enum method)i, 24), -EAGAIN);
		cr_assert_eq(fix_put(&f, (enum method)i, 0), -EAGAIN);
	}
	/* One read makes room for one record, no more. */
	model_read(&f.m, f.ring, 1);
	cr_assert_eq(fix_put(&f, BY_CLAIM, 24), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 0), -EAGAIN);
	/* Exactly the accepted records come out, whole. */
	model_drain(&f.m, f.ring);
	fix_fini(&f);

	/* Every size: fill a fresh ring, read one, write one more. */
	for (len = 0; len <= 24; len++) {
		fix_init(&f, t, 256);
		for (n = 0; fix_put(&f, (enum method)(n % METHODS), len) == 0;
		     n++)
			cr_assert_leq(n, 32);
		cr_assert_eq(n, (int)(256 / rec_space(len)),
			     "%d records of %zu bytes fit in 256", n, len);
		model_read(&f.m, f.ring, 1);
		cr_assert_eq(fix_put(&f, (enum method)(len % METHODS), len),
			     0, "after a read, %zu bytes", len);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
}

Test(spsc, full_ring_is_eagain_until_a_read, .timeout = 10)
{
	full_ring(&spsc_topo);
}

Test(mpsc, full_ring_is_eagain_until_a_read, .timeout = 10)
{
	full_ring(&mpsc_topo);
}

/* ========================================================================
 * Wrapping: padding at every offset
 */

/* Write and read filler records until the ring is at offset @to. */
static void advance_to(struct fix *f, size_t to)
{
	size_t left = to, chunk, most = f->m.cap / 8;

	while (left) {
		chunk = left < most ? left : most;
		cr_assert_eq(fix_put(f, BY_WRITE,
				     chunk - LULL_RECORD_HEADER_SIZE), 0);
		model_read(&f->m, f->ring, 1);
		left -= chunk;
	}
	cr_assert_eq(f->m.wpos & (f->m.cap - 1), to);
}

static const size_t wrap_sizes[] = {
	~(size_t)0, 0, 1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 40, 47, 56,
};

#define NWRAP_SIZES (sizeof(wrap_sizes) / sizeof(wrap_sizes[0]))

/* Sizes from wrap_sizes, capped at the largest payload (~0 is that). */
static size_t wrap_size(const struct fix *f, unsigned i)
{
	size_t len = wrap_sizes[i % NWRAP_SIZES];

	return len > f->max ? f->max : len;
}

/*
 * Fill the ring until a record does not fit, then try a small one; with
 * @aborts, every fourth record is a claim that is aborted.
 */
static void fill_ring(struct fix *f, unsigned salt, bool aborts)
{
	unsigned i;
	size_t len;
	int ret;

	for (i = 0;; i++) {
		cr_assert_lt(i, 1000u);
		len = wrap_size(f, i * 7 + salt);
		if (aborts && i % 4 == 3)
			ret = fix_claim_abort(f, len);
		else
			ret = fix_put(f, (enum method)((i + salt) % METHODS),
				      len);
		if (ret == -EAGAIN)
			break;
	}
	fix_put(f, BY_WRITE, 0);
}

static void wrap_everywhere(const struct topo *t, bool aborts)
{
	static const size_t caps[] = { 256, 512 };
	struct fix f;
	size_t c, to;
	unsigned round;

	for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		for (to = 0; to < caps[c]; to += LULL_RECORD_ALIGN) {
			fix_init(&f, t, caps[c]);
			advance_to(&f, to);
			/* The largest record first: near the end it wraps. */
			if (aborts)
				fix_claim_abort(&f, f.max);
			fix_put(&f, (enum method)(to / 8 % METHODS), f.max);
			for (round = 0; round < 4; round++) {
				fill_ring(&f, (unsigned)to / 8 + round, aborts);
				model_drain_mixed(&f.m, f.ring, round);
			}
			fix_fini(&f);
		}
	}
}

Test(spsc, records_wrap_with_padding_at_every_offset, .timeout = 10)
{
	wrap_everywhere(&spsc_topo, false);
}

Test(mpsc, records_wrap_with_padding_at_every_offset, .timeout = 10)
{
	wrap_everywhere(&mpsc_topo, false);
}

Test(spsc, aborts_at_every_offset_leave_nothing, .timeout = 10)
{
	wrap_everywhere(&spsc_topo, true);
}

Test(mpsc, aborts_at_every_offset_are_skipped, .timeout = 10)
{
	wrap_everywhere(&mpsc_topo, true);
}

/* One read with a large limit takes everything, and only that, once. */
static void one_read_drains_full_ring(const struct topo *t)
{
	static const size_t starts[] = { 0, 8, 100, 200, 248 };
	static const size_t lens[] = { 24, 0, 16, 5 };
	struct fix f;
	size_t i, j;

	for (i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		for (j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			fix_init(&f, t, 256);
			advance_to(&f, starts[i] & ~(size_t)7);
			while (fix_put(&f, BY_WRITE, lens[j]) == 0)
				;
			model_read_expect(&f.m, f.ring, 1000,
					  (int)model_queued(&f.m));
			model_read_expect(&f.m, f.ring, 1000, -EAGAIN);
			/* And the ring is whole: it fills and drains again. */
			while (fix_put(&f, BY_CLAIM, lens[j]) == 0)
				;
			model_read_expect(&f.m, f.ring, UINT_MAX,
					  (int)model_queued(&f.m));
			fix_fini(&f);
		}
	}
}

Test(spsc, one_read_drains_a_full_ring, .timeout = 10)
{
	one_read_drains_full_ring(&spsc_topo);
}

Test(mpsc, one_read_drains_a_full_ring, .timeout = 10)
{
	one_read_drains_full_ring(&mpsc_topo);
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* A long random mix of every producer and consumer call. */
static void random_sequence(const struct topo *t, size_t cap, uint64_t x)
{
	struct fix f;
	uint64_t r;
	size_t len;
	unsigned i;

	fix_init(&f, t, cap);
	for (i = 0; i < 40000; i++) {
		r = xorshift(&x);
		if ((r >> 8) % 8 == 0)
			len = f.max - (size_t)(r >> 16) % 9;
		else
			len = (size_t)(r >> 16) % (f.max + 1);
		switch (r % 10) {
		case 0:
		case 1:
		case 2:
		case 3:
			fix_put(&f, (enum method)((r >> 40) % METHODS), len);
			break;
		case 4:
			fix_claim_abort(&f, len);
			break;
		case 5:
			model_peek(&f.m, f.ring);
			break;
		default:
			model_read(&f.m, f.ring, (unsigned)(r >> 40) % 6 + 1);
			break;
		}
	}
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, long_random_sequence_round_trips, .timeout = 10)
{
	random_sequence(&spsc_topo, 256, 0x9e3779b97f4a7c15ull);
	random_sequence(&spsc_topo, 2048, 0x2545f4914f6cdd1dull);
}

Test(mpsc, long_random_sequence_round_trips, .timeout = 10)
{
	random_sequence(&mpsc_topo, 256, 0x9e3779b97f4a7c15ull);
	random_sequence(&mpsc_topo, 2048, 0x2545f4914f6cdd1dull);
}

/* ========================================================================
 * Claims: commit, abort, detach
 */

static void claim_invisible_until_commit(const struct topo *t)
{
	struct pending pc;
	struct fix f;

	fix_init(&f, t, 4096);
	pending_claim(&f, &pc, f.prod, 40, WILL_COMMIT);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_read(&f.m, f.ring, 8);
	/* And again behind a committed record. */
	fix_put(&f, BY_WRITE, 3);
	pending_claim(&f, &pc, f.prod, 0, WILL_COMMIT);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, claim_is_invisible_until_commit, .timeout = 10)
{
	claim_invisible_until_commit(&spsc_topo);
}

Test(mpsc, claim_is_invisible_until_commit, .timeout = 10)
{
	claim_invisible_until_commit(&mpsc_topo);
}

static void claim_misuse(const struct topo *t)
{
	struct pending pc;
	void *dst = NULL;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "commit without claim");
	cr_assert_eq(t->abort(f.prod), -EINVAL, "abort without claim");
	pending_claim(&f, &pc, f.prod, 16, WILL_COMMIT);
	cr_assert_eq(t->claim(f.prod, 1, 16, &dst), -EBUSY);
	cr_assert_eq(t->claim(f.prod, 2, 0, &dst), -EBUSY);
	/* The first claim is intact and still the one committed. */
	pending_commit(&f, &pc);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "second commit");
	cr_assert_eq(t->abort(f.prod), -EINVAL, "abort after commit");
	model_drain(&f.m, f.ring);
	/* A claim after an abort works. */
	cr_assert_eq(fix_claim_abort(&f, 8), 0);
	cr_assert_eq(fix_put(&f, BY_CLAIM, 30), 0);
	cr_assert_eq(fix_claim_abort(&f, 100), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 31), 0);
	cr_assert_eq(fix_put(&f, BY_WRITEV, 32), 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, claim_misuse_is_ebusy_or_einval, .timeout = 10)
{
	claim_misuse(&spsc_topo);
}

Test(mpsc, claim_misuse_is_ebusy_or_einval, .timeout = 10)
{
	claim_misuse(&mpsc_topo);
}

Test(spsc, abort_leaves_nothing, .timeout = 10)
{
	struct fix f;
	int i;

	fix_init(&f, &spsc_topo, 256);
	cr_assert_eq(fix_claim_abort(&f, f.max), 0);
	expect_nothing(f.ring);
	/* The aborted claim took no space: 8 records of 32 bytes fit. */
	for (i = 0; i < 8; i++)
		cr_assert_eq(fix_put(&f, (enum method)(i % METHODS), 24), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 0), -EAGAIN);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(mpsc, aborted_claim_is_skipped_as_padding, .timeout = 10)
{
	struct lull_producer *p2, *p3;
	struct pending a, b;
	struct fix f;

	fix_init(&f, &mpsc_topo, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p3), 0);

	/* Alone: nothing to read. */
	cr_assert_eq(fix_claim_abort(&f, 50), 0);
	expect_nothing(f.ring);
	fix_put(&f, BY_WRITE, 5);
	model_read(&f.m, f.ring, 8);

	/* Ahead of another producer's record: blocks until aborted. */
	pending_claim(&f, &a, f.prod, 60, WILL_DROP);
	fix_put_by(&f, p2, BY_WRITEV, 6);
	expect_nothing(f.ring);
	cr_assert_eq(mpsc_topo.abort(f.prod), 0);
	model_read(&f.m, f.ring, 8);

	/* Between two records. */
	pending_claim(&f, &a, f.prod, 70, WILL_COMMIT);
	pending_claim(&f, &b, p2, 80, WILL_DROP);
	fix_put_by(&f, p3, BY_CLAIM, 7);
	pending_commit(&f, &a);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	cr_assert_eq(mpsc_topo.abort(p2), 0);
	model_read(&f.m, f.ring, 8);

	/* Several in a row. */
	cr_assert_eq(fix_claim_abort(&f, 0), 0);
	cr_assert_eq(fix_claim_abort(&f, 1), 0);
	cr_assert_eq(fix_claim_abort(&f, f.max), 0);
	fix_put_by(&f, p3, BY_WRITE, 9);
	model_drain(&f.m, f.ring);

	cr_assert_eq(lull_producer_detach(p2), 0);
	cr_assert_eq(lull_producer_detach(p3), 0);
	fix_fini(&f);
}

/*
 * A detach with a claim outstanding drops the claim: the consumer gets the
 * record before it, then (the detach being the last) the poison, never
 * the claimed bytes and never a wait on them.
 */
Test(spsc, detach_drops_outstanding_claim, .timeout = 10)
{
	struct lull_producer *late;
	struct pending pc;
	struct fix f;

	fix_init(&f, &spsc_topo, 256);
	fix_put(&f, BY_WRITE, 16);
	pending_claim(&f, &pc, f.prod, 100 > f.max ? f.max : 100, WILL_DROP);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &late), -EPIPE,
		     "detach did not release the SPSC role, or did not "
		     "shut the ring down");
	cr_assert(model_expect_end(&f.m, f.ring));
	cr_assert_eq(lull_ring_destroy(f.ring), 0);

	/* The same with nothing committed before the claim. */
	fix_init(&f, &spsc_topo, 256);
	pending_claim(&f, &pc, f.prod, f.max, WILL_DROP);
	expect_nothing(f.ring);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	expect_poison_by_peek(f.ring);
	cr_assert_eq(lull_ring_destroy(f.ring), 0);
}

Test(mpsc, detach_with_claim_does_not_block_consumer, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;

	fix_init(&f, &mpsc_topo, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	fix_put(&f, BY_WRITE, 16);
	pending_claim(&f, &pc, f.prod, 100, WILL_DROP);
	fix_put_by(&f, p2, BY_WRITE, 24);
	/* The first record, then the claim blocks. */
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	model_read(&f.m, f.ring, 8);
	fix_put_by(&f, p2, BY_CLAIM, 40);
	model_read(&f.m, f.ring, 8);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &f.prod), 0);
	fix_put(&f, BY_WRITEV, 50);
	fix_put_by(&f, p2, BY_WRITE, 60);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

/* ========================================================================
 * MPSC ordering
 */

Test(mpsc, uncommitted_claim_blocks_later_records, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;

	fix_init(&f, &mpsc_topo, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	/* Nothing before the claim: read and peek find nothing. */
	pending_claim(&f, &pc, f.prod, 32, WILL_COMMIT);
	fix_put_by(&f, p2, BY_WRITE, 20);
	fix_put_by(&f, p2, BY_CLAIM, 21);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_read_expect(&f.m, f.ring, 8, 3);

	/* A record before the claim is read, then the claim blocks. */
	fix_put_by(&f, p2, BY_WRITEV, 10);
	pending_claim(&f, &pc, f.prod, 0, WILL_COMMIT);
	fix_put_by(&f, p2, BY_WRITE, 11);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

Test(mpsc, records_arrive_in_claim_order_not_commit_order, .timeout = 10)
{
	struct lull_producer *p[3];
	struct pending pc[3];
	struct fix f;
	int i;

	fix_init(&f, &mpsc_topo, 4096);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p[i]), 0);
		pending_claim(&f, &pc[i], p[i], (size_t)(i * 13), WILL_COMMIT);
	}
	pending_commit(&f, &pc[2]);
	expect_nothing(f.ring);
	pending_commit(&f, &pc[0]);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc[1]);
	model_read_expect(&f.m, f.ring, 8, 2);
	expect_nothing(f.ring);
	for (i = 0; i < 3; i++)
		cr_assert_eq(lull_producer_detach(p[i]), 0);
	fix_fini(&f);
}

Test(mpsc, pending_claim_does_not_block_other_producers, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;
	int n = 0;

	fix_init(&f, &mpsc_topo, 512);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	pending_claim(&f, &pc, f.prod, 8, WILL_COMMIT);
	/* The other producer fills the rest of the ring. */
	while (fix_put_by(&f, p2, (enum method)(n % METHODS), 16) == 0)
		n++;
	cr_assert_eq(n, (512 - 16) / 24);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

/* ========================================================================
 * Consumer: read batches, handler results, peek/release, role
 */

/* A handler that answers @action at its @at-th call, CONTINUE otherwise. */
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

static void fill_ten(struct fix *f)
{
	int i;

	for (i = 0; i < 10; i++)
		cr_assert_eq(fix_put(f, (enum method)(i % METHODS),
				     (size_t)i * 9), 0);
}

static void handler_results(const struct topo *t)
{
	static const int other_results[] = { 3, -1, 1000, INT_MIN, INT_MAX };
	struct fix f;
	size_t i;

	fix_init(&f, t, 4096);

	/* STOP consumes the record and ends the batch. */
	fill_ten(&f);
	cr_assert_eq(script_read(&f, 3, LULL_READ_STOP, 100), 3);
	model_read(&f.m, f.ring, 100);

	/* KEEP leaves it: the next read starts with it. */
	fill_ten(&f);
	cr_assert_eq(script_read(&f, 3, LULL_READ_KEEP, 100), 2);
	cr_assert_eq(script_read(&f, 1, LULL_READ_KEEP, 100), 0);
	cr_assert_eq(script_read(&f, 1, LULL_READ_KEEP, 100), 0);
	cr_assert_eq(script_read(&f, 2, LULL_READ_KEEP, 100), 1);
	model_read(&f.m, f.ring, 100);
	expect_nothing(f.ring);

	/* Any other result acts as STOP. */
	for (i = 0; i < sizeof(other_results) / sizeof(other_results[0]);
	     i++) {
		fill_ten(&f);
		cr_assert_eq(script_read(&f, 2, other_results[i], 100), 2,
			     "handler result %d", other_results[i]);
		model_read(&f.m, f.ring, 100);
	}

	/* STOP and KEEP on the last record allowed by the limit. */
	fill_ten(&f);
	cr_assert_eq(script_read(&f, 4, LULL_READ_STOP, 4), 4);
	cr_assert_eq(script_read(&f, 4, LULL_READ_KEEP, 4), 3);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, read_stop_consumes_and_keep_leaves_the_record, .timeout = 10)
{
	handler_results(&spsc_topo);
}

Test(mpsc, read_stop_consumes_and_keep_leaves_the_record, .timeout = 10)
{
	handler_results(&mpsc_topo);
}

static void read_limits(const struct topo *t)
{
	struct fix f;

	fix_init(&f, t, 4096);
	model_read(&f.m, f.ring, 1);
	fill_ten(&f);
	/* Bad arguments consume nothing. */
	cr_assert_eq(lull_ring_read(f.ring, check_handler, &f.m, 0), -EINVAL);
	cr_assert_eq(lull_ring_read(f.ring, NULL, &f.m, 5), -EINVAL);
	model_read_expect(&f.m, f.ring, 3, 3);
	model_read_expect(&f.m, f.ring, 1, 1);
	model_read_expect(&f.m, f.ring, 5, 5);
	model_read_expect(&f.m, f.ring, UINT_MAX, 1);
	model_read_expect(&f.m, f.ring, UINT_MAX, -EAGAIN);
	model_read_expect(&f.m, f.ring, 1, -EAGAIN);
	fix_fini(&f);
}

Test(spsc, read_respects_limit, .timeout = 10)
{
	read_limits(&spsc_topo);
}

Test(mpsc, read_respects_limit, .timeout = 10)
{
	read_limits(&mpsc_topo);
}

static void peek_release(const struct topo *t)
{
	struct lull_record rec, again;
	struct fix f;
	int i;

	fix_init(&f, t, 4096);
	cr_assert_eq(lull_ring_peek(f.ring, &rec), -EAGAIN);
	cr_assert_eq(lull_ring_release(f.ring), -EINVAL, "nothing peeked");
	for (i = 0; i < 3; i++)
		fix_put(&f, (enum method)i, (size_t)i * 20 + 1);
	cr_assert_eq(lull_ring_release(f.ring), -EINVAL, "nothing peeked");

	cr_assert_eq(lull_ring_peek(f.ring, &rec), 0);
	model_check(&f.m, &rec);
	/* The same record however often, and whatever producers do. */
	fix_put(&f, BY_WRITE, 4);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(lull_ring_peek(f.ring, &again), 0);
		cr_assert(again.data == rec.data && again.len == rec.len &&
			  again.type == rec.type, "peek %d moved on", i);
	}
	/* No read while a peek is outstanding; it consumes nothing. */
	cr_assert_eq(lull_ring_read(f.ring, unexpected_handler, NULL, 8),
		     -EINVAL);
	cr_assert_eq(lull_ring_peek(f.ring, &again), 0);
	cr_assert_eq(again.data, rec.data);
	cr_assert_eq(lull_ring_release(f.ring), 0);
	model_pop(&f.m);
	cr_assert_eq(lull_ring_release(f.ring), -EINVAL, "second release");

	model_peek(&f.m, f.ring);
	model_read_expect(&f.m, f.ring, 8, 2);
	model_peek(&f.m, f.ring);
	cr_assert_eq(lull_ring_release(f.ring), -EINVAL);
	fix_fini(&f);
}

Test(spsc, peek_returns_the_same_record_until_release, .timeout = 10)
{
	peek_release(&spsc_topo);
}

Test(mpsc, peek_returns_the_same_record_until_release, .timeout = 10)
{
	peek_release(&mpsc_topo);
}

static void consumer_role(const struct topo *t)
{
	struct lull_ring *plain;
	struct lull_record rec;
	struct region r;
	struct fix f;

	fix_start(&f, t, region_create(&r, 256, t), 256);
	plain = region_open(&r, 0);
	cr_assert_eq(lull_ring_read(plain, unexpected_handler, NULL, 4),
		     -EPERM, "read of an empty ring, no consumer role");
	cr_assert_eq(lull_ring_peek(plain, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(plain), -EPERM);
	fix_put(&f, BY_WRITE, 8);
	cr_assert_eq(lull_ring_read(plain, unexpected_handler, NULL, 4),
		     -EPERM);
	cr_assert_eq(lull_ring_peek(plain, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(plain), -EPERM);
	/* The consumer is unaffected. */
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	fix_fini(&f);
	region_free(&r);
}

Test(spsc, consumer_calls_need_the_consumer_role, .timeout = 10)
{
	consumer_role(&spsc_topo);
}

Test(mpsc, consumer_calls_need_the_consumer_role, .timeout = 10)
{
	consumer_role(&mpsc_topo);
}

/* ========================================================================
 * Threads: producers on their own threads, the consumer on the test's
 */

#define THREAD_PRODUCERS 4u
#define THREAD_RECORDS 20000u
#define THREAD_MAX_LEN 72u

struct worker {
	pthread_t tid;
	const struct topo *t;
	struct lull_producer *prod;
	uint32_t id;
	int err;
	uint32_t err_seq;
	atomic_bool *stop;
};

static size_t worker_len(uint32_t id, uint32_t seq)
{
	return 8 + (id * 7 + seq * 13) % (THREAD_MAX_LEN - 8 + 1);
}

static uint32_t worker_seed(uint32_t id, uint32_t seq)
{
	return id << 24 ^ seq;
}

/* The payload: id, sequence number, then pattern bytes. */
static void worker_payload(uint8_t *buf, uint32_t id, uint32_t seq,
			   size_t len)
{
	memcpy(buf, &id, 4);
	memcpy(buf + 4, &seq, 4);
	pattern_fill(buf + 8, len - 8, worker_seed(id, seq));
}

/* 0, -EAGAIN (try again) or another error.  No asserts off the test thread. */
static int worker_put(struct worker *w, uint32_t seq)
{
	const struct topo *t = w->t;
	size_t len = worker_len(w->id, seq);
	int32_t type = (int32_t)w->id + 1;
	uint8_t buf[THREAD_MAX_LEN];
	struct iovec iov[2];
	void *dst;
	int ret;

	switch (seq % 4) {
	case 0:
		worker_payload(buf, w->id, seq, len);
		return t->write(w->prod, type, buf, len);
	case 1:
		worker_payload(buf, w->id, seq, len);
		iov[0] = (struct iovec){ buf, 5 };
		iov[1] = (struct iovec){ buf + 5, len - 5 };
		return t->writev(w->prod, type, iov, 2);
	case 2:
		ret = t->claim(w->prod, type, len, &dst);
		if (ret)
			return ret;
		worker_payload(dst, w->id, seq, len);
		return t->commit(w->prod) ? -EFAULT : 0;
	default:
		/* A claim that is aborted, then the record by write. */
		ret = t->claim(w->prod, type, len, &dst);
		if (ret)
			return ret;
		memset(dst, 0xee, len);
		if (t->abort(w->prod))
			return -EFAULT;
		worker_payload(buf, w->id, seq, len);
		return t->write(w->prod, type, buf, len);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint32_t seq = 0;
	int ret;

	while (seq < THREAD_RECORDS) {
		/* Relaxed: a late look at the flag only costs a retry. */
		if (atomic_load_explicit(w->stop, memory_order_relaxed))
			break;
		ret = worker_put(w, seq);
		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret) {
			w->err = ret;
			w->err_seq = seq;
			atomic_store_explicit(w->stop, true,
					      memory_order_relaxed);
			break;
		}
		seq++;
	}
	return NULL;
}

struct tally {
	uint32_t next[THREAD_PRODUCERS];
	unsigned nproducers;
	unsigned long total;
	char why[200];
};

static int tally_handler(const struct lull_record *rec, void *ctx)
{
	struct tally *c = ctx;
	uint32_t id, seq;
	size_t bad;

	if (rec->len < 8) {
		snprintf(c->why, sizeof(c->why), "record of %u bytes",
			 (unsigned)rec->len);
		return LULL_READ_STOP;
	}
	memcpy(&id, rec->data, 4);
	memcpy(&seq, (const uint8_t *)rec->data + 4, 4);
	if (id >= c->nproducers || rec->type != (int32_t)id + 1 ||
	    seq != c->next[id] || rec->len != worker_len(id, seq)) {
		snprintf(c->why, sizeof(c->why),
			 "got producer %u seq %u type %d len %u; expected seq "
			 "%u", id, seq, (int)rec->type, (unsigned)rec->len,
			 id < c->nproducers ? c->next[id] : 0);
		return LULL_READ_STOP;
	}
	bad = pattern_mismatch((const uint8_t *)rec->data + 8, rec->len - 8,
			       worker_seed(id, seq));
	if (bad != rec->len - 8) {
		snprintf(c->why, sizeof(c->why),
			 "producer %u seq %u: byte %zu is wrong", id, seq,
			 bad + 8);
		return LULL_READ_STOP;
	}
	c->next[id]++;
	c->total++;
	return LULL_READ_CONTINUE;
}

static void threaded(const struct topo *t, unsigned nproducers)
{
	struct worker w[THREAD_PRODUCERS];
	struct tally c = { .nproducers = nproducers };
	unsigned long want = (unsigned long)nproducers * THREAD_RECORDS;
	struct lull_ring *ring;
	atomic_bool stop;
	unsigned i;
	int ret;

	atomic_init(&stop, false);
	cr_assert_eq(lull_ring_create(&ring, 4096, t->flags), 0);
	for (i = 0; i < nproducers; i++) {
		w[i] = (struct worker){ .t = t, .id = i, .stop = &stop };
		cr_assert_eq(lull_producer_attach(ring, 0, &w[i].prod), 0);
	}
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main,
					    &w[i]), 0);
	while (c.total < want && !c.why[0] &&
	       !atomic_load_explicit(&stop, memory_order_relaxed)) {
		ret = lull_ring_read(ring, tally_handler, &c, 64);
		if (ret == -EAGAIN)
			sched_yield();
		else if (ret < 0)
			snprintf(c.why, sizeof(c.why), "read = %d", ret);
	}
	atomic_store_explicit(&stop, true, memory_order_relaxed);
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(pthread_join(w[i].tid, NULL), 0);
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(w[i].err, 0, "producer %u, record %u: %d", i,
			     w[i].err_seq, w[i].err);
	cr_assert_eq(c.why[0], '\0', "%s", c.why);
	cr_assert_eq(c.total, want);
	expect_nothing(ring);
	for (i = 0; i < nproducers; i++) {
		cr_assert_eq(lull_producer_detach(w[i].prod), 0);
		if (i + 1 < nproducers)
			expect_nothing(ring);
	}
	/* The last detach ends the ring. */
	expect_poison_by_peek(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(spsc, producer_thread_delivers_in_order, .timeout = 10)
{
	threaded(&spsc_topo, 1);
}

Test(mpsc, producer_threads_deliver_in_order, .timeout = 10)
{
	threaded(&mpsc_topo, THREAD_PRODUCERS);
}
