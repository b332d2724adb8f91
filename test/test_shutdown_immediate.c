/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_immediate.c - the Criterion suite of how rings end: immediate
 * shutdown: undelivered records are discarded, a fatal is kept, a claim is not
 * waited for.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Immediate shutdown
 */

/* Undelivered records are discarded: the poison (after the fatal, if one
 * was reported) is the next thing the consumer gets. */
static void immediate_discards(const struct topo *t, bool fatal,
			       bool after_graceful)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 6);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	if (after_graceful) {
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 1),
			     1);
	}
	if (fatal)
		cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
					     test_fatal.message),
			     0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	cr_assert_eq(stamp_send(t, s.prod, 0, 50), -EPIPE);
	/* What is left of the ledger was never handed: discarded. */
	for (unsigned i = s.sink.users; i < s.ledger.n; i++)
		s.ledger.e[i].live = false;
	solo_read_all(&s);
	sink_expect(fatal ? "immediate after a fatal report"
		    : after_graceful ? "immediate after a graceful shutdown"
				     : "immediate",
		    &s.sink, &s.ledger, fatal ? &test_fatal : NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(immediate_shutdown_discards_undelivered_records, 20)
{
	immediate_discards(t, false, false);
}

TOPO_TEST(immediate_shutdown_keeps_the_fatal_before_the_poison, 20)
{
	immediate_discards(t, true, false);
}

TOPO_TEST(immediate_shutdown_upgrades_a_graceful_one, 20)
{
	immediate_discards(t, false, true);
}

/* An outstanding claim does not hold the poison back; committing it later
 * is allowed and delivers nothing. */
static void immediate_ignores_claim(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 2);
	cr_assert_eq(stamp_claim(t, s.prod, 0, 2), 0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 1,
		     "the poison must not wait for the claim");
	cr_assert_eq(t->commit(s.prod), 0);
	sink_expect("immediate with a claim", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

TOPO_TEST(immediate_shutdown_does_not_wait_for_a_claim, 20)
{
	immediate_ignores_claim(t);
}

/*
 * Once the consumer has been shown the poison of an immediate shutdown (by
 * a peek, or a wait that found it readable), a claim committed afterwards
 * does not slip in before it: a second peek shows the same poison, and a
 * read hands the poison and nothing else.
 */
Test(mpsc, immediate_poison_stays_next_when_a_claim_commits_late,
     .timeout = 20)
{
	struct lull_record rec;
	struct solo s;
	struct lull_producer *b;

	for (int by_wait = 0; by_wait < 2; by_wait++) {
		solo_init(&s, &topo_mpsc, 4096);
		cr_assert_eq(lull_producer_attach(s.ring, 0, &b), 0);
		cr_assert_eq(stamp_claim(&topo_mpsc, s.prod, 0, 0), 0);
		cr_assert_eq(stamp_send(&topo_mpsc, b, 1, 0), 0);
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_IMMEDIATE),
			     0);
		if (by_wait) {
			cr_assert_eq(lull_ring_wait(s.ring, 0), 0);
		} else {
			cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
			cr_assert_eq(rec.type, LULL_TYPE_POISON);
		}
		cr_assert_eq(topo_mpsc.commit(s.prod), 0);
		if (by_wait) {
			solo_read_all(&s);
			sink_expect("read after a wait saw the immediate "
				    "poison",
				    &s.sink, &s.ledger, NULL, false);
		} else {
			cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
			cr_assert_eq(rec.type, LULL_TYPE_POISON,
				     "a second peek handed type %d after "
				     "the poison",
				     rec.type);
			cr_assert_eq(lull_ring_release(s.ring), 0);
		}
		after_poison_everything_is_epipe(s.ring);
		cr_assert_eq(lull_producer_detach(b), 0);
		solo_fini(&s);
	}
}
