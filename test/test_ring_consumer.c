/* SPDX-License-Identifier: MIT */
/*
 * test_ring_consumer.c - the Criterion suite of lull/ring.h: the consumer: read
 * batches, handler results, peek/release, the consumer role, and producers on
 * their own threads.
 * The fixture (struct model, struct fix, TOPO_TEST) is ring_fix.h.
 */
#include "ring_fix.h"

/* ========================================================================
 * Consumer: read batches, handler results, peek/release, role
 */

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

TOPO_TEST(read_stop_consumes_and_keep_leaves_the_record, 10)
{
	handler_results(t);
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
	cr_assert_eq(lull_ring_read_items(f.ring, unexpected_run_handler, NULL,
					  0),
		     -EINVAL);
	cr_assert_eq(lull_ring_read_items(f.ring, NULL, &f.m, 5), -EINVAL);
	model_read_expect(&f.m, f.ring, 3, 3);
	model_read_expect(&f.m, f.ring, 1, 1);
	model_read_expect(&f.m, f.ring, 5, 5);
	model_read_expect(&f.m, f.ring, UINT_MAX, 1);
	model_read_expect(&f.m, f.ring, UINT_MAX, -EAGAIN);
	model_read_expect(&f.m, f.ring, 1, -EAGAIN);
	fix_fini(&f);
}

TOPO_TEST(read_respects_limit, 10)
{
	read_limits(t);
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
	cr_assert_eq(lull_ring_read_items(f.ring, unexpected_run_handler, NULL,
					  8),
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

TOPO_TEST(peek_returns_the_same_record_until_release, 10)
{
	peek_release(t);
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
	cr_assert_eq(lull_ring_read_items(plain, unexpected_run_handler, NULL,
					  4),
		     -EPERM);
	cr_assert_eq(lull_ring_peek(plain, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(plain), -EPERM);
	fix_put(&f, BY_WRITE, 8);
	cr_assert_eq(lull_ring_read(plain, unexpected_handler, NULL, 4),
		     -EPERM);
	cr_assert_eq(lull_ring_read_items(plain, unexpected_run_handler, NULL,
					  4),
		     -EPERM);
	cr_assert_eq(lull_ring_peek(plain, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(plain), -EPERM);
	/* The consumer is unaffected. */
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	fix_fini(&f);
	region_free(&r);
}

TOPO_TEST(consumer_calls_need_the_consumer_role, 10)
{
	consumer_role(t);
}

/* ========================================================================
 * Threads: producers on their own threads, the consumer on the test's
 */

#define THREAD_PRODUCERS 4u
#define THREAD_RECORDS 20000u
#define THREAD_MAX_LEN 72u
/* How long the consumer waits for the producers, and they to end. */
#define THREAD_DEADLINE_MS 5000u

struct worker {
	pthread_t tid;
	const struct topo *t;
	struct lull_producer *prod;
	struct ledger *ledger; /* the worker notes what it wrote */
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
		ledger_sent(w->ledger, w->id, seq);
		seq++;
	}
	return NULL;
}

struct tally {
	struct ledger ledger;
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
	if (!ledger_got(&c->ledger, id, seq)) {
		snprintf(c->why, sizeof(c->why), "%s",
			 ledger_why(&c->ledger));
		return LULL_READ_STOP;
	}
	if (rec->type != (int32_t)id + 1 || rec->len != worker_len(id, seq)) {
		snprintf(c->why, sizeof(c->why),
			 "got producer %u seq %u type %d len %u", id, seq,
			 (int)rec->type, (unsigned)rec->len);
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
	uint64_t deadline;
	unsigned i;
	int ret;

	atomic_init(&stop, false);
	cr_assert_eq(ledger_init(&c.ledger, nproducers), 0);
	cr_assert_eq(lull_ring_create(&ring, 4096, t->flags), 0);
	for (i = 0; i < nproducers; i++) {
		w[i] = (struct worker){ .t = t, .ledger = &c.ledger, .id = i,
					.stop = &stop };
		cr_assert_eq(lull_producer_attach(ring, 0, &w[i].prod), 0);
	}
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main,
					    &w[i]), 0);
	deadline = now_ms() + THREAD_DEADLINE_MS;
	while (c.total < want && !c.why[0] &&
	       !atomic_load_explicit(&stop, memory_order_relaxed)) {
		cr_assert_lt(now_ms(), deadline,
			     "%s: %lu of %lu records after %u ms", t->name,
			     c.total, want, THREAD_DEADLINE_MS);
		ret = lull_ring_read(ring, tally_handler, &c, 64);
		if (ret == -EAGAIN)
			sched_yield();
		else if (ret < 0)
			snprintf(c.why, sizeof(c.why), "read = %d", ret);
	}
	atomic_store_explicit(&stop, true, memory_order_relaxed);
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(thread_join_within(w[i].tid, THREAD_DEADLINE_MS,
						NULL),
			     0, "%s: producer %u still running after %u ms",
			     t->name, i, THREAD_DEADLINE_MS);
	for (i = 0; i < nproducers; i++)
		cr_assert_eq(w[i].err, 0, "producer %u, record %u: %d", i,
			     w[i].err_seq, w[i].err);
	cr_assert_eq(c.why[0], '\0', "%s", c.why);
	cr_assert_eq(c.total, want);
	cr_assert(ledger_complete(&c.ledger), "%s", ledger_why(&c.ledger));
	ledger_fini(&c.ledger);
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
	threaded(&topo_spsc, 1);
}

Test(mpsc, producer_threads_deliver_in_order, .timeout = 10)
{
	threaded(&topo_mpsc, THREAD_PRODUCERS);
}
