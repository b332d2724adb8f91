/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_graceful.c - the Criterion suite of how rings end: graceful
 * shutdown on the test thread: pending records then one poison, the same code
 * (fatal, poison, -EPIPE) on every read path, and a full ring drained after
 * the shutdown.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

static void graceful_basics(const struct topo *t)
{
	struct lull_producer *other;
	struct iovec iov = { .iov_base = "ab", .iov_len = 2 };
	struct solo s;
	void *dst;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_shutdown(NULL, LULL_SHUTDOWN_GRACEFUL),
		     -EINVAL);
	cr_assert_eq(lull_ring_shutdown(s.ring, 2), -EINVAL);
	cr_assert_eq(lull_ring_shutdown(s.ring, UINT32_MAX), -EINVAL);
	solo_send(&s, 5);
	/* The consumer takes two; three are pending at the shutdown. */
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
	cr_assert_eq(t->write(s.prod, 1, "ab", 2), -EPIPE);
	cr_assert_eq(t->writev(s.prod, 1, &iov, 1), -EPIPE);
	cr_assert_eq(t->claim(s.prod, 1, 2, &dst), -EPIPE);
	cr_assert_eq(t->commit(s.prod), -EINVAL);
	cr_assert_eq(lull_producer_attach(s.ring, 0, &other),
		     topo_is_mpsc(t) ? -EPIPE : -EBUSY);
	/* Pending records first, in one batch, then the poison alone. */
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 100), 3);
	cr_assert_eq(s.sink.poisons, 0);
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0, "the poison is readable");
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 100), 1);
	sink_expect(t->name, &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	/* Shutting down again after the poison changes nothing. */
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(graceful_shutdown_delivers_pending_records_then_one_poison, 20)
{
	graceful_basics(t);
}

static void shutdown_of_unused_ring(const struct topo *t)
{
	struct lull_ring *ring;
	struct sink sink = { 0 };
	struct ledger none = { 0 };

	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 8), 1);
	sink_expect(t->name, &sink, &none, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(shutdown_of_a_ring_never_written_delivers_only_the_poison, 20)
{
	shutdown_of_unused_ring(t);
}

/* A second handle on the region (as another process would have) ends it. */
static void shutdown_from_other_handle(const struct topo *t)
{
	size_t size = (size_t)lull_ring_region_size(4096);
	struct lull_ring *ring, *other;
	struct lull_producer *prod;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	void *mem = aligned_alloc(128, size); /* size is a multiple */

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096, t->flags), 0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_producer_attach(other, 0, &prod), 0);
	for (uint32_t seq = 0; seq < 4; seq++) {
		cr_assert_eq(stamp_send(t, prod, 0, seq), 0);
		ledger_add(&ledger, 0, seq);
	}
	cr_assert_eq(lull_ring_shutdown(other, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(stamp_send(t, prod, 0, 4), -EPIPE);
	while (lull_ring_read(ring, sink_handler, &sink, 3) > 0)
		;
	sink_expect(t->name, &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

TOPO_TEST(shutdown_through_another_handle_reaches_the_consumer, 20)
{
	shutdown_from_other_handle(t);
}

/* ------------------------------------------------------------------------
 * One code everywhere: fatal, then poison, then -EPIPE, on every path
 */

struct keeper {
	struct sink sink;
	int32_t keep_type; /* keep the first record of this type once */
	unsigned kept;
};

static int keep_once_handler(const struct lull_record *rec, void *ctx)
{
	struct keeper *k = ctx;

	if (rec->type == k->keep_type && !k->kept) {
		k->kept++;
		return LULL_READ_KEEP;
	}
	sink_take(&k->sink, rec);
	return LULL_READ_CONTINUE;
}

/* lull_ring_read: records in batches, the fatal alone, the poison alone;
 * a handler that keeps either gets it again. */
static void read_path_reports_end(const struct topo *t)
{
	struct solo s;
	struct keeper k = { .keep_type = LULL_TYPE_FATAL };

	solo_init(&s, t, 4096);
	solo_send(&s, 5);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 5,
		     "the fatal record must not join a batch of records");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 0,
		     "the kept fatal record is not consumed");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 1,
		     "the fatal record comes alone");
	k.keep_type = LULL_TYPE_POISON;
	k.kept = 0;
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 0,
		     "the kept poison is not consumed");
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0,
		     "the kept poison is still readable");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 1,
		     "the poison comes alone");
	sink_expect(t->name, &k.sink, &s.ledger, &test_fatal, false);
	cr_assert_eq(k.sink.fatal_len,
		     offsetof(struct lull_fatal, message) +
			     strlen(test_fatal.message));
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(read_hands_records_then_fatal_then_poison_then_epipe, 20)
{
	read_path_reports_end(t);
}

/* lull_ring_peek: each closing record is peeked again until released. */
static void peek_path_reports_end(const struct topo *t)
{
	struct lull_record a, b;
	struct solo s;
	struct sink sink = { 0 };

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(lull_ring_peek(s.ring, &a), 0);
		for (int again = 0; again < 3; again++) {
			cr_assert_eq(lull_ring_peek(s.ring, &b), 0);
			cr_assert(a.data == b.data && a.len == b.len &&
					  a.type == b.type,
				  "peek %d of record %d changed", again, i);
		}
		/* A read cannot be mixed with an outstanding peek. */
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &sink, 1),
			     -EINVAL);
		sink_take(&sink, &a);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	}
	sink_expect(t->name, &sink, &s.ledger, &test_fatal, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(peek_repeats_fatal_and_poison_until_release_then_epipe, 20)
{
	peek_path_reports_end(t);
}

/*
 * A ring that is exactly full when the consumer starts draining it after a
 * shutdown (here: held back by a claim at the head, with the rest of the
 * ring committed behind it).  Each record must come once, then the poison;
 * the read must not wrap into what was consumed on the lap before.
 */
/*
 * The seqs whose stamped records are 24 bytes (stamp_len), the size that
 * makes eight records of 8 + 24 bytes fill 256: 45, 142, 239, ...
 */
static uint32_t full_seq(uint32_t k)
{
	uint32_t seq = 45 + 97 * k;

	cr_assert_eq(stamp_len(seq), 24);
	return seq;
}

static void full_ring_drain(const struct topo *t, enum kind kind)
{
	struct lull_producer *a, *b;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	uint8_t rec[24];
	void *dst;
	int ret, reads = 0;

	/* 256 bytes: eight records of 8 + 24 bytes fill it exactly. */
	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &a), 0);
	b = a;
	if (topo_is_mpsc(t))
		cr_assert_eq(lull_producer_attach(ring, 0, &b), 0);
	/* A lap first, so that the data area holds consumed records. */
	for (uint32_t seq = 0; seq < 8; seq++) {
		stamp_fill(rec, 1, full_seq(8 + seq));
		cr_assert_eq(t->write(b, stamp_type(1), rec, sizeof(rec)), 0);
	}
	while (lull_ring_read(ring, sink_handler, &(struct sink){ 0 }, 100) >
	       0)
		;
	cr_assert_eq(t->claim(a, stamp_type(0), sizeof(rec), &dst), 0);
	stamp_fill(dst, 0, full_seq(0));
	ledger_add(&ledger, 0, full_seq(0));
	if (topo_is_mpsc(t)) {
		for (uint32_t seq = 0; seq < 7; seq++) {
			stamp_fill(rec, 1, full_seq(seq));
			cr_assert_eq(t->write(b, stamp_type(1), rec,
					      sizeof(rec)),
				     0);
			ledger_add(&ledger, 1, full_seq(seq));
		}
	}
	if (kind == KIND_FATAL)
		cr_assert_eq(lull_ring_fatal(ring, test_fatal.code,
					     test_fatal.message),
			     0);
	else
		cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL),
			     0);
	/* Held back by the claim: the consumer starts its drain. */
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EAGAIN);
	cr_assert_eq(t->commit(a), 0);
	while ((ret = lull_ring_read(ring, sink_handler, &sink, 100)) > 0 &&
	       ++reads < 20)
		;
	/* Every record is a whole stamped one: the sink checks its form. */
	cr_assert(!sink.bad[0], "%s: %s", t->name, sink.bad);
	for (unsigned i = 0; i < sink.n && i < ledger.n; i++)
		cr_assert(sink.rec[i].type <= 0 ||
				  (sink.rec[i].producer ==
					   ledger.e[i].producer &&
				   sink.rec[i].seq == ledger.e[i].seq),
			  "%s: record %u is %u/%u, expected %u/%u", t->name, i,
			  sink.rec[i].producer, sink.rec[i].seq,
			  ledger.e[i].producer, ledger.e[i].seq);
	cr_assert_eq(sink.poisons, 1,
		     "%s: %u records handed and no poison after %d reads "
		     "(the drain wraps into the previous lap)",
		     t->name, sink.n, reads);
	cr_assert_eq(sink.n, ledger.n + 1 + (kind == KIND_FATAL),
		     "%s: %u records handed for %u committed", t->name,
		     sink.n, ledger.n);
	cr_assert_eq(ret, -EPIPE);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EPIPE);
	if (topo_is_mpsc(t))
		cr_assert_eq(lull_producer_detach(b), 0);
	cr_assert_eq(lull_producer_detach(a), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(full_ring_drained_after_shutdown_hands_each_record_once, 20)
{
	full_ring_drain(t, KIND_GRACEFUL);
}

Test(mpsc, full_ring_drained_after_fatal_hands_each_record_once,
     .timeout = 20)
{
	full_ring_drain(&topo_mpsc, KIND_FATAL);
}
