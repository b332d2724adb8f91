/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_fatal.c - the Criterion suite of how rings end: fatal reports:
 * their message, alignment, once only, after a graceful shutdown, and behind a
 * claim.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Fatal reports
 */

static void fatal_message(const struct topo *t, const char *message,
			  const char *expect)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 1);
	cr_assert_eq(lull_ring_fatal(s.ring, INT32_MIN, message), 0);
	solo_read_all(&s);
	sink_expect("fatal message", &s.sink, &s.ledger,
		    &(struct fatal_want){ INT32_MIN, expect }, false);
	cr_assert_eq(s.sink.fatal.length, strlen(expect));
	cr_assert_eq(s.sink.fatal_len,
		     offsetof(struct lull_fatal, message) + strlen(expect));
	solo_fini(&s);
}

static void fatal_messages(const struct topo *t)
{
	char longer[1000], cut[LULL_FATAL_MESSAGE_MAX];

	for (size_t i = 0; i < sizeof(longer) - 1; i++)
		longer[i] = (char)('a' + i % 26);
	longer[sizeof(longer) - 1] = '\0';
	memcpy(cut, longer, sizeof(cut) - 1);
	cut[sizeof(cut) - 1] = '\0';
	fatal_message(t, longer, cut);
	cut[sizeof(cut) - 2] = '\0';
	fatal_message(t, cut, cut); /* 254 bytes: kept whole */
	fatal_message(t, NULL, "");
	fatal_message(t, "", "");
}

TOPO_TEST(fatal_message_is_truncated_and_nul_terminated, 20)
{
	fatal_messages(t);
}

/* struct lull_record promises an 8-byte aligned payload, closing records
 * included. */
static void closing_records_aligned(const struct topo *t)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_fatal(s.ring, 1, "x"), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq((uintptr_t)rec.data % LULL_RECORD_ALIGN, 0,
			     "the %s record's data is at %p",
			     rec.type == LULL_TYPE_FATAL ? "fatal" : "poison",
			     rec.data);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	}
	solo_fini(&s);
}

TOPO_TEST(fatal_and_poison_data_are_8_byte_aligned, 20)
{
	closing_records_aligned(t);
}

static void fatal_once(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_fatal(NULL, 1, "x"), -EINVAL);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(stamp_send(t, s.prod, 0, 3), -EPIPE);
	cr_assert_eq(lull_ring_fatal(s.ring, 2, "second"), -EALREADY);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_fatal(s.ring, 3, "third"), -EALREADY);
	solo_read_all(&s);
	sink_expect("one fatal", &s.sink, &s.ledger, &test_fatal, false);
	cr_assert_eq(lull_ring_fatal(s.ring, 4, "late"), -EALREADY);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(second_fatal_report_is_ealready_and_the_first_is_delivered, 20)
{
	fatal_once(t);
}

/* After a graceful shutdown, a fatal report still makes it, until the
 * consumer has taken (or peeked) the poison. */
static void fatal_after_graceful(const struct topo *t, bool peek_first)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0, "a report before the poison is taken is delivered");
	solo_read_all(&s);
	sink_expect("fatal after graceful", &s.sink, &s.ledger, &test_fatal,
		    false);
	solo_fini(&s);

	/* Too late: the poison is taken (or peeked, which decides it). */
	solo_init(&s, t, 4096);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	if (peek_first) {
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8),
			     3);
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq(rec.type, LULL_TYPE_POISON);
		cr_assert_eq(lull_ring_fatal(s.ring, 9, "late"), -EPIPE);
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq(rec.type, LULL_TYPE_POISON,
			     "the late report changed the peeked record");
		sink_take(&s.sink, &rec);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	} else {
		solo_read_all(&s);
		cr_assert_eq(lull_ring_fatal(s.ring, 9, "late"), -EPIPE);
	}
	sink_expect("fatal after the poison", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(fatal_after_graceful_arrives_until_the_poison_is_taken, 20)
{
	fatal_after_graceful(t, false);
}

TOPO_TEST(fatal_after_the_poison_was_peeked_is_epipe, 20)
{
	fatal_after_graceful(t, true);
}

/* A claim outstanding at the report still commits before the fatal. */
static void fatal_waits_for_claim(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(stamp_claim(t, s.prod, 0, 2), 0);
	ledger_add(&s.ledger, 0, 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 2);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8),
		     -EAGAIN, "the fatal record passed an open claim");
	cr_assert_eq(t->commit(s.prod), 0);
	solo_read_all(&s);
	sink_expect("fatal with a claim", &s.sink, &s.ledger, &test_fatal,
		    false);
	solo_fini(&s);
}

TOPO_TEST(fatal_follows_a_claim_committed_after_it, 20)
{
	fatal_waits_for_claim(t);
}
