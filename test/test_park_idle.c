/* SPDX-License-Identifier: MIT */
/*
 * test_park_idle.c - the Criterion suites of an idle park through each
 * backend case: no wake-up and no CPU without a safety net, the opt-in
 * net's counted re-checks, the lost wake-up counter fed a lost wake-up on
 * purpose, and a loop stopped while it spins before parking.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

#define IDLE_NS (2 * NSEC_PER_SEC)

struct idle_marks {
	struct rusage ru[2];
	struct lull_ring_stats st; /* when record 1 arrived */
};

/* Record 0 starts the idle window, record 1 ends it. */
static void mark_idle(struct consumer *c, const struct msg *m)
{
	struct idle_marks *marks = c->arg;

	if (m->seq < 2)
		getrusage(RUSAGE_THREAD, &marks->ru[m->seq]);
	if (m->seq == 1)
		lull_ring_stats(c->ring, &marks->st);
}

/*
 * The voluntary context switches of thread @tid so far (test/lib's /proc
 * reader): readable from another thread while @tid sleeps, so the count
 * covers exactly the window the test chooses.
 */
static long thread_voluntary_switches(pid_t tid)
{
	long n = proc_thread_switches(tid, NULL);

	cr_assert_geq(n, 0, "no voluntary_ctxt_switches for thread %d",
		      (int)tid);
	return n;
}

/*
 * A consumer parked for 2 s, from just after record 0 (before it parks)
 * to just after record 1 arrives.  With no safety net (the default) it
 * sleeps through: while it is parked, 0 voluntary context switches (read
 * from /proc by this thread, so the window holds nothing but the park),
 * and 1 in all from record 0 to record 1 (the park itself), under 1 ms of
 * CPU.  With an opt-in 500 ms safety net, the net re-checks 3 or 4 times,
 * each counted as an idle timeout.  The counters are read when record 1
 * arrives, so the consumer's teardown does not count.  (perf/handoff's
 * idle windows, 10 s with --idle-s 10, measure the same at length.)
 */
static void check_idle(const struct backend_case *bc, bool quiet)
{
	struct idle_marks marks;
	struct lull_ring_stats st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t cpu_ns, parked_cpu_ns;
	long switches, parked_switches = 0;
	clockid_t cpu_clock;
	pid_t tid;

	require(bc->backend);
	memset(&marks, 0, sizeof(marks));
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.safety_ns = quiet ? QUIET_SAFETY_NS : 500 * NSEC_PER_MSEC;
	c.expected = 2;
	c.on_record = mark_idle;
	c.arg = &marks;
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(write_msg(prod, false, 0, 0), 0);
	consumer_start(&c);
	wait_received(&c, 1);
	wait_parked(&c);
	tid = atomic_load_explicit(&c.tid, memory_order_relaxed);
	cr_assert_eq(pthread_getcpuclockid(c.thread, &cpu_clock), 0);
	parked_switches = thread_voluntary_switches(tid);
	parked_cpu_ns = clock_ns(cpu_clock);
	sleep_ns(IDLE_NS);
	parked_cpu_ns = clock_ns(cpu_clock) - parked_cpu_ns;
	parked_switches = thread_voluntary_switches(tid) - parked_switches;
	cr_assert_eq(write_msg(prod, false, 0, 1), 0);
	consumer_join(&c);
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	st = marks.st;
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	if (quiet) {
		cr_assert_eq(parked_switches, 0,
			     "%s: the parked consumer woke %ld times in a "
			     "2 s idle window with no safety net; " ST_FMT,
			     bc->name, parked_switches, ST_ARGS(st));
		switches = marks.ru[1].ru_nvcsw - marks.ru[0].ru_nvcsw;
		cpu_ns = timeval_ns(&marks.ru[1].ru_utime) +
			 timeval_ns(&marks.ru[1].ru_stime) -
			 timeval_ns(&marks.ru[0].ru_utime) -
			 timeval_ns(&marks.ru[0].ru_stime);
		cr_assert_leq(switches, 1,
			      "%s: %ld voluntary context switches in a 2 s "
			      "park (1 is the park itself); " ST_FMT,
			      bc->name, switches, ST_ARGS(st));
		/*
		 * CPU while parked, read from this thread through the
		 * consumer's CPU clock (exact, not tick-sampled): nothing
		 * but what a stray wake-up would cost.  From record 0 to
		 * record 1, which also holds the park and the wake paths
		 * (slow under sanitizers and load), only loosely bounded.
		 */
		cr_assert_lt(parked_cpu_ns, 50 * NSEC_PER_MSEC / 1000,
			     "%s: %" PRIu64 " ns of CPU while parked for 2 s",
			     bc->name, parked_cpu_ns);
		cr_assert_lt(cpu_ns, 20 * NSEC_PER_MSEC,
			     "%s: %" PRIu64 " ns of CPU from record to record "
			     "across a 2 s park", bc->name, cpu_ns);
		cr_assert_eq(st.idle_timeouts, 0, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		/* The waker counts its wake-up after making it: read it now. */
		st = stats_of(ring);
		cr_assert_eq(st.wakes, 1, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
	} else {
		cr_assert(st.idle_timeouts >= 3 && st.idle_timeouts <= 4,
			  "%s: a 500 ms safety net fired %" PRIu64
			  " counted times in a 2 s idle park, not 3 or 4; "
			  ST_FMT,
			  bc->name, st.idle_timeouts, ST_ARGS(st));
		cr_assert_geq(parked_switches, 3,
			      "%s: the safety net woke the consumer %ld times",
			      bc->name, parked_switches);
	}
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * Fake a lost wake-up: while the consumer is parked (after a normal
 * wake-up cycle, as in any busy program), hide the park word from a
 * producer, commit, and put the word back.  The record stays unannounced
 * until the safety net ends the park, which must count it as exactly the
 * lost wake-up safety_timeouts exists to reveal.
 */
static void check_injected_lost_wake(const struct backend_case *bc)
{
	const uint64_t safety = 300 * NSEC_PER_MSEC;
	struct lull_ring_stats base, st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t start, elapsed;
	uint32_t how;

	require(bc->backend);
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.safety_ns = safety;
	c.expected = 2;
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	consumer_start(&c);
	wait_parked(&c);
	cr_assert_eq(write_msg(prod, false, 0, 0), 0);
	wait_received(&c, 1);
	wait_parked(&c);
	base = stats_of(ring);
	start = now_ns();
	how = atomic_exchange_explicit(&ring->region->park, LULL_PARK_AWAKE,
				       memory_order_seq_cst);
	cr_assert_neq(how, LULL_PARK_AWAKE);
	cr_assert_eq(write_msg(prod, false, 0, 1), 0);
	atomic_store_explicit(&ring->region->park, how, memory_order_seq_cst);
	consumer_join(&c);
	elapsed = now_ns() - start;
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, base.wakes, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_gt(elapsed, safety / 2,
		     "%s: the hidden record arrived after %" PRIu64
		     " ns, before the safety net could have fired",
		     bc->name, elapsed);
	cr_assert_eq(st.safety_timeouts - base.safety_timeouts, 1,
		     "%s: the safety net ended a park with a record waiting "
		     "and no waker (a lost wake-up), %.0f ms after the commit, "
		     "but counted %" PRIu64 " lost wake-ups; " ST_FMT,
		     bc->name, elapsed / 1e6,
		     st.safety_timeouts - base.safety_timeouts, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * A loop configured to spin before it parks, stopped from a callback
 * (lull_loop_stop(): shut the rings down, return once each has delivered
 * its poison), returns at once rather than after the spin.  The producer
 * stays attached: only the stop can end the ring, and it does, producer
 * or not.
 */
static void check_stop_while_spinning(const struct backend_case *bc)
{
	const uint64_t spin = 5 * NSEC_PER_SEC;
	struct lull_ring_stats st;
	struct lull_producer *prod;
	struct consumer c;
	struct lull_ring *ring;
	uint64_t start, elapsed;

	require(bc->backend);
	ring = new_ring(LULL_RING_SPSC, 4096);
	consumer_init(&c, bc, ring);
	c.spin_ns = spin;
	c.expected = 1; /* its handler calls lull_loop_stop() */
	consumer_start(&c);
	start = now_ns();
	prod = write_one(ring, 0, 0);
	consumer_join(&c);
	elapsed = now_ns() - start;
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_lt(elapsed, NSEC_PER_SEC,
		     "%s: lull_loop_run() returned %.3f s after a callback "
		     "called lull_loop_stop(), with spin_ns %.0f s",
		     bc->name, elapsed / 1e9, spin / 1e9);
	cr_assert_eq(c.poisons, 1, "%s: the stop's poison", bc->name);
	cr_assert_eq(write_msg(prod, false, 0, 1), -EPIPE);
	cr_assert_eq(lull_producer_detach(prod), 0);
	consumer_end(&c);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

#define IDLE_TESTS(suite, bc)                                                \
	Test(suite, idle_park_makes_no_wake_up_and_costs_no_cpu,             \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_idle(&bc, true);                                       \
	}                                                                    \
	Test(suite, opt_in_safety_net_rechecks_an_idle_park_and_counts_it,   \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_idle(&bc, false);                                      \
	}                                                                    \
	Test(suite, safety_net_counts_an_injected_lost_wake,                 \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_injected_lost_wake(&bc);                               \
	}

#define LOOP_TESTS(suite, bc)                                                \
	Test(suite, stop_ends_a_spinning_loop_promptly,                      \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_stop_while_spinning(&bc);                              \
	}

IDLE_TESTS(blocking, blocking_case)
IDLE_TESTS(own_uring_futex, own_futex_case)
IDLE_TESTS(own_uring_eventfd, own_eventfd_case)
IDLE_TESTS(loop_uring_futex, loop_futex_case)
IDLE_TESTS(loop_uring_eventfd, loop_eventfd_case)
IDLE_TESTS(loop_epoll, loop_epoll_case)
LOOP_TESTS(loop_uring_futex, loop_futex_case)
LOOP_TESTS(loop_uring_eventfd, loop_eventfd_case)
LOOP_TESTS(loop_epoll, loop_epoll_case)
