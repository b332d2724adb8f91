/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_signals.c - the Criterion suite of how rings end:
 * lull_ring_shutdown and lull_ring_fatal from signal handlers (async-signal
 * safe), interrupting a producer or a parked consumer.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * Signals: lull_ring_shutdown and lull_ring_fatal are async-signal-safe
 */

static struct lull_ring *_Atomic signal_ring;
static atomic_int signal_fatal; /* the handler reports a fatal instead */
static atomic_int signal_hits;

static void on_signal(int signo)
{
	struct lull_ring *ring =
		atomic_load_explicit(&signal_ring, memory_order_acquire);
	int ret;

	(void)signo;
	if (atomic_load_explicit(&signal_fatal, memory_order_relaxed))
		ret = lull_ring_fatal(ring, test_fatal.code,
				      test_fatal.message);
	else
		ret = lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL);
	atomic_fetch_add_explicit(&signal_hits, ret == 0 ? 1 : 1000,
				  memory_order_release);
}

static void signal_setup(struct lull_ring *ring, bool fatal)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	atomic_store(&signal_ring, ring);
	atomic_store(&signal_fatal, fatal);
	atomic_store(&signal_hits, 0);
}

struct streamer {
	const struct topo *t;
	struct lull_ring *ring;
	struct ledger ledger; /* this thread's, read after the join */
	atomic_uint sent;
	int last;
};

/* Writes (and claims) until the ring is shut down; a signal may come in
 * the middle of any call. */
static void *streamer_main(void *arg)
{
	struct streamer *s = arg;
	struct lull_producer *prod;
	uint32_t seq = 0;
	int ret;

	s->last = lull_producer_attach(s->ring, 0, &prod);
	if (s->last < 0)
		return NULL;
	for (;;) {
		/* Near the ledger's end, wait for the signal's shutdown. */
		while (s->ledger.n >= LEDGER_MAX - 1 &&
		       !atomic_load_explicit(&signal_hits,
					     memory_order_acquire))
			sched_yield();
		ret = stamp_send(s->t, prod, 0, seq);
		if (ret == 0) {
			if (s->ledger.n >= LEDGER_MAX) {
				ret = -ENOSPC; /* after the shutdown: a bug */
				break;
			}
			ledger_add(&s->ledger, 0, seq++);
			atomic_store_explicit(&s->sent, seq,
					      memory_order_release);
		} else if (ret == -EAGAIN) {
			sched_yield();
		} else {
			break;
		}
	}
	s->last = ret;
	lull_producer_detach(prod);
	return NULL;
}

/* The signal interrupts the producer, mid-stream: every record whose write
 * returned 0 arrives, and nothing else. */
static void signal_in_producer(const struct topo *t, bool fatal)
{
	struct streamer s = { .t = t };
	struct consumer c;
	pthread_t thread;
	uint64_t deadline = now_ms() + DEADLINE_MS;

	cr_assert_eq(lull_ring_create(&s.ring, 4096, t->flags), 0);
	consumer_init(&c, s.ring, WAY_WAIT, fatal ? "fatal from a signal"
						  : "shutdown from a signal");
	signal_setup(s.ring, fatal);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, streamer_main, &s), 0);
	while (atomic_load_explicit(&s.sent, memory_order_acquire) < 300)
		cr_assert_lt(now_ms(), deadline, "the producer is stuck");
	cr_assert_eq(pthread_kill(thread, SIGUSR1), 0);
	join_within(thread, DEADLINE_MS, "producer");
	cr_assert_eq(atomic_load(&signal_hits), 1, "the handler's call failed");
	cr_assert_eq(s.last, -EPIPE);
	consumer_finish(&c);
	sink_expect(c.what, &c.sink, &s.ledger, fatal ? &test_fatal : NULL,
		    false);
	consumer_fini(&c);
}

TOPO_TEST(shutdown_from_a_signal_handler_interrupting_the_producer, 20)
{
	signal_in_producer(t, false);
}

TOPO_TEST(fatal_from_a_signal_handler_interrupting_the_producer, 20)
{
	signal_in_producer(t, true);
}

/* The signal lands on the parked consumer's own thread. */
static void signal_in_parked_consumer(const struct topo *t, enum way way)
{
	struct fix f;

	fix_init(&f, t, way, 1,
		 "%s, shutdown from a signal on the parked consumer (%s)",
		 t->name, way_name[way]);
	signal_setup(f.ring, false);
	consumer_start(&f.c);
	fix_send_ok(&f, 0, 2);
	consumer_wait_handled(&f.c, 2);
	consumer_wait_parked(&f.c, 0);
	cr_assert_eq(pthread_kill(f.c.thread, SIGUSR1), 0);
	consumer_finish(&f.c);
	cr_assert_eq(atomic_load(&signal_hits), 1);
	sink_expect(f.what, &f.c.sink, &f.ledger, NULL, false);
	fix_expect_closed(&f);
	fix_fini(&f);
}

#define SIGNAL_PARKED_TESTS(suite, topo)                                    \
	Test(suite, signal_handler_shutdown_wakes_its_own_lull_ring_wait,   \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_WAIT);                 \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_uring_futex,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_URING_FUTEX);          \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_uring_eventfd,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_URING_EVENTFD);        \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_futex,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_FUTEX);           \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_eventfd,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_EVENTFD);         \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_epoll,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_EPOLL);           \
	}

SIGNAL_PARKED_TESTS(spsc, topo_spsc)
SIGNAL_PARKED_TESTS(mpsc, topo_mpsc)
