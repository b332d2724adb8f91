/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_wakes.c - the Criterion suite of how rings end: a shutdown
 * reaches a consumer wherever it is: inside its handler, parked (every way it
 * parks), or with a claim outstanding.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Shutdown reaches a running consumer
 *
 * The consumer is inside its handler, at record 0, when the shutdown
 * comes; @pending more records were committed behind it.  It must deliver
 * them, then the fatal record (for a fatal report), then the poison.
 */

static void end_running_consumer(const struct topo *t, enum way way)
{
	static const enum kind kinds[] = { KIND_GRACEFUL, KIND_FATAL };

	for (unsigned k = 0; k < 2; k++)
		for (unsigned p = 0; p < 3; p++) {
			struct fix f;
			unsigned pending = pending_counts[p];

			fix_init(&f, t, way, 1,
				 "%s, %s, running consumer (%s), %u pending",
				 t->name, kind_name[kinds[k]], way_name[way],
				 pending);
			atomic_store(&f.c.gate_seq, 0);
			consumer_start(&f.c);
			fix_send_ok(&f, 0, 1);
			cr_assert(flag_wait(&f.c.gate, 1, DEADLINE_MS),
				  "%s: handler never reached record 0",
				  f.what);
			fix_send_ok(&f, 0, pending);
			fix_end(&f, kinds[k]);
			fix_expect_closed(&f);
			flag_set(&f.c.gate, 2);
			consumer_finish(&f.c);
			sink_expect(f.what, &f.c.sink, &f.ledger,
				    kinds[k] == KIND_FATAL ? &test_fatal : NULL,
				    false);
			fix_fini(&f);
		}
}

#define RUNNING_TESTS(suite, topo)                                          \
	Test(suite, shutdown_reaches_a_consumer_inside_lull_ring_read,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_READ);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_inside_lull_ring_peek,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_PEEK);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_reading_after_a_wait,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_WAIT);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_draining_uring_futex,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_URING_FUTEX);               \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_draining_uring_eventfd,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_URING_EVENTFD);             \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_uring_futex,            \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_FUTEX);                \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_uring_eventfd,          \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_EVENTFD);              \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_epoll, .timeout = 20)   \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_EPOLL);                \
	}

RUNNING_TESTS(spsc, topo_spsc)
RUNNING_TESTS(mpsc, topo_mpsc)

/* ------------------------------------------------------------------------
 * Shutdown wakes a parked consumer
 *
 * The consumer took three records and parked.  Then @pending records are
 * committed and the ring is ended at once, by each kind of end.  For an
 * immediate shutdown the pending records may be discarded (a prefix of
 * them arrives); otherwise all of them arrive.
 */

static void end_parked_consumer(const struct topo *t, enum way way)
{
	static const enum kind kinds[] = { KIND_GRACEFUL, KIND_IMMEDIATE,
					   KIND_FATAL, KIND_LAST_DETACH };

	for (unsigned k = 0; k < 4; k++)
		for (unsigned p = 0; p < 3; p++) {
			struct lull_ring_stats st;
			struct fix f;
			unsigned pending = pending_counts[p];
			uint64_t parks;

			fix_init(&f, t, way, 1,
				 "%s, %s, parked consumer (%s), %u pending",
				 t->name, kind_name[kinds[k]], way_name[way],
				 pending);
			consumer_start(&f.c);
			fix_send_ok(&f, 0, 3);
			consumer_wait_handled(&f.c, 3);
			parks = consumer_wait_parked(&f.c, 0);
			fix_send_ok(&f, 0, pending);
			fix_end(&f, kinds[k]);
			fix_expect_closed(&f);
			consumer_finish(&f.c);
			cr_assert_eq(lull_ring_stats(f.ring, &st), 0);
			/* Every way counts a park when it starts: the one
			 * the end interrupted was counted before it. */
			cr_assert_geq(st.parks, parks, "%s: parks went back",
				      f.what);
			cr_assert_eq(st.safety_timeouts, 0,
				     "%s: a lost wake-up", f.what);
			sink_expect(f.what, &f.c.sink, &f.ledger,
				    kinds[k] == KIND_FATAL ? &test_fatal : NULL,
				    kinds[k] == KIND_IMMEDIATE);
			fix_fini(&f);
		}
}

#define PARKED_TESTS(suite, topo)                                           \
	Test(suite, end_wakes_a_consumer_parked_in_lull_ring_wait,          \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_WAIT);                       \
	}                                                                   \
	Test(suite, end_wakes_a_consumer_parked_on_uring_futex,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_URING_FUTEX);                \
	}                                                                   \
	Test(suite, end_wakes_a_consumer_parked_on_uring_eventfd,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_URING_EVENTFD);              \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_uring_futex, .timeout = 20)     \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_FUTEX);                 \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_uring_eventfd, .timeout = 20)   \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_EVENTFD);               \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_epoll, .timeout = 20)           \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_EPOLL);                 \
	}

PARKED_TESTS(spsc, topo_spsc)
PARKED_TESTS(mpsc, topo_mpsc)

/* ------------------------------------------------------------------------
 * A claim taken before the shutdown
 *
 * Producer 0 holds a claim when the ring shuts down (on MPSC producer 1
 * has committed two records behind it).  The consumer must wait for the
 * claim (a parking consumer wakes for the shutdown and parks again,
 * without the poison); the claim then commits, and arrives, or aborts, and
 * does not.
 */

static void claim_across_shutdown(const struct topo *t, enum way way,
				  bool commit)
{
	struct fix f;
	uint64_t parks = 0;

	fix_init(&f, t, way, topo_is_mpsc(t) ? 2 : 1,
		 "%s, claim %s after a graceful shutdown, consumer (%s)",
		 t->name, commit ? "committed" : "aborted", way_name[way]);
	consumer_start(&f.c);
	fix_send_ok(&f, 0, 2);
	consumer_wait_handled(&f.c, 2);
	fix_claim(&f, 0);
	if (topo_is_mpsc(t))
		fix_send_ok(&f, 1, 2);
	if (way_parks(way))
		parks = consumer_wait_parked(&f.c, 0);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	if (topo_is_mpsc(t)) {
		cr_assert_eq(stamp_send(t, f.prod[1], 1, 99), -EPIPE,
			     "%s: write after the shutdown", f.what);
	}
	cr_assert_eq(lull_producer_attach(f.ring, 0, &f.prod[3]),
		     topo_is_mpsc(t) ? -EPIPE : -EBUSY);
	if (way_parks(way)) {
		/* Woken by the shutdown, it met the claim and parked again. */
		consumer_wait_parked(&f.c, parks);
		if (way_is_loop(way)) {
			struct lull_ring_stats st;

			lull_ring_stats(f.ring, &st);
			cr_assert_gt(st.parks, parks,
				     "%s: the loop slept through the shutdown",
				     f.what);
		}
	}
	cr_assert_eq(consumer_poisoned(&f.c), 0,
		     "%s: poison before the claim ended", f.what);
	cr_assert_eq(atomic_load(&f.c.handled), 2,
		     "%s: a record past the claim was handed", f.what);
	if (commit) {
		cr_assert_eq(t->commit(f.prod[0]), 0);
	} else {
		cr_assert_eq(t->abort(f.prod[0]), 0);
		ledger_drop(&f.ledger, 0, 2);
	}
	consumer_finish(&f.c);
	sink_expect(f.what, &f.c.sink, &f.ledger, NULL, false);
	fix_expect_closed(&f);
	fix_fini(&f);
}

#define CLAIM_TESTS(suite, topo, name, way)                                 \
	Test(suite, claim_before_shutdown_commits_##name, .timeout = 20)    \
	{                                                                   \
		claim_across_shutdown(&topo, way, true);                    \
	}                                                                   \
	Test(suite, claim_before_shutdown_aborts_##name, .timeout = 20)     \
	{                                                                   \
		claim_across_shutdown(&topo, way, false);                   \
	}

#define CLAIM_TESTS_ALL(suite, topo)                                        \
	CLAIM_TESTS(suite, topo, to_lull_ring_read, WAY_READ)               \
	CLAIM_TESTS(suite, topo, to_lull_ring_peek, WAY_PEEK)               \
	CLAIM_TESTS(suite, topo, to_lull_ring_wait, WAY_WAIT)               \
	CLAIM_TESTS(suite, topo, to_uring_futex, WAY_URING_FUTEX)           \
	CLAIM_TESTS(suite, topo, to_uring_eventfd, WAY_URING_EVENTFD)       \
	CLAIM_TESTS(suite, topo, to_loop_uring_futex, WAY_LOOP_FUTEX)       \
	CLAIM_TESTS(suite, topo, to_loop_uring_eventfd, WAY_LOOP_EVENTFD)   \
	CLAIM_TESTS(suite, topo, to_loop_epoll, WAY_LOOP_EPOLL)

CLAIM_TESTS_ALL(spsc, topo_spsc)
CLAIM_TESTS_ALL(mpsc, topo_mpsc)
