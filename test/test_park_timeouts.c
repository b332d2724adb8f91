/* SPDX-License-Identifier: MIT */
/*
 * test_park_timeouts.c - the Criterion suite park, at the extremes: wait
 * timeouts and safety nets of 0, 1 ns and the integer limits are
 * converted safely.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * Timeouts at their extremes, and the safety net's environment variable
 */

/*
 * lull_ring_wait() and lull_producer_wait() with 0, 1 ns, INT64_MAX: the
 * first two time out at once, the last sleeps until the other side acts
 * (a late producer, a read), never on a wrapped deadline.
 */
Test(park, wait_timeouts_of_0_1ns_and_int64_max_are_converted_safely,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	void *thread_ret;
	pthread_t thread;
	unsigned written;

	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(lull_ring_wait(ring, 1), -ETIMEDOUT);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(pthread_create(&thread, NULL, write_when_parked, prod), 0);
	cr_assert_eq(lull_ring_wait(ring, INT64_MAX), 0);
	join_or_fail(thread, 10, "the late producer");
	cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 16), 1);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);

	ring = new_ring(LULL_RING_MPSC, 4096);
	prod = fill_ring(ring, &written);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 0),
		     -ETIMEDOUT);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 1),
		     -ETIMEDOUT);
	cr_assert_eq(pthread_create(&thread, NULL, read_when_waited, ring), 0);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), INT64_MAX),
		     0);
	join_or_fail(thread, 10, "the late reader");
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	(void)thread_ret;
}

/*
 * A safety net of 1 ns, INT64_MAX and UINT64_MAX: the first ends every
 * park at once (idle re-checks), the others are no timer at all (the park
 * on an io_uring is its wait alone) and never overflow a conversion.
 */
Test(park, safety_nets_of_1ns_int64_max_and_uint64_max_are_converted_safely,
     .timeout = WATCHDOG_S)
{
	static const uint64_t nets[] = { INT64_MAX, UINT64_MAX };
	struct lull_park_config cfg = { .safety_timeout_ns = 1 };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring uring;
	pthread_t thread;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_ring_wait(ring, 20 * NSEC_PER_MSEC), -ETIMEDOUT);
	st = stats_of(ring);
	cr_assert_geq(st.idle_timeouts, 1, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	own_uring_init(&uring, 8);
	for (size_t i = 0; i < ARRAY_SIZE(nets); i++) {
		cfg.safety_timeout_ns = nets[i];
		cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
		cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
		cr_assert_eq(io_uring_sq_ready(&uring), 1,
			     "a safety net of %" PRIu64 " ns armed a timeout",
			     nets[i]);
		cr_assert_eq(park_teardown(ring, &uring), 0);
		cr_assert_eq(pthread_create(&thread, NULL, write_when_parked,
					    prod),
			     0);
		cr_assert_eq(lull_ring_wait(ring, -1), 0);
		join_or_fail(thread, 10, "the late producer");
		cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 16), 1);
	}
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

