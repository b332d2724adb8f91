/* SPDX-License-Identifier: MIT */
/*
 * test_park_uring.c - the Criterion suite uring: lull_uring_park_*() on
 * the caller's io_uring, their argument and state errors, and which wait
 * LULL_BACKEND chooses.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * uring: the calls that park on the caller's own io_uring
 */

Test(uring, calls_reject_null_arguments, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe cqe;
	struct io_uring uring;

	memset(&uring, 0, sizeof(uring));
	memset(&cqe, 0, sizeof(cqe));
	cr_assert_eq(lull_uring_park_arm(NULL, &uring, PARK_UD), -EINVAL);
	cr_assert_eq(lull_uring_park_arm(ring, NULL, PARK_UD), -EINVAL);
	cr_assert_eq(lull_uring_park_cqe(NULL, &cqe), -EINVAL);
	cr_assert_eq(lull_uring_park_cqe(ring, NULL), -EINVAL);
	cr_assert_eq(lull_uring_park_drain(NULL, &uring, consume_any, NULL,
					   1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, NULL, consume_any, NULL, 1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, NULL, NULL, 1),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   0),
		     -EINVAL);
	cr_assert_eq(lull_uring_park_cancel(NULL, &uring), -EINVAL);
	cr_assert_eq(lull_uring_park_cancel(ring, NULL), -EINVAL);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_returns_1_and_queues_nothing_when_a_record_is_readable,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	/* Nothing is armed: the record is still there for a plain wait. */
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	/* Drained, the next arm parks. */
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(io_uring_sq_ready(&uring), 1,
		     "the drain re-arms: one SQE, no safety net by default");
	cr_assert_neq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	/* The poison is readable too: arm says 1; once it is read, -EPIPE. */
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	expect_poison_then_epipe(ring);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EPIPE);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_is_ealready_when_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 1);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EALREADY);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, OTHER_UD), -EALREADY);
	cr_assert_eq(io_uring_submit(&uring), 1);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EALREADY);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * The park needs one free SQE, two with a safety net (the wait and its
 * link timeout); without them it queues nothing and parks nothing.
 */
static void check_arm_needs_free_sqes(uint64_t safety_ns, unsigned need)
{
	struct lull_park_config cfg = { .safety_timeout_ns = safety_ns };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe *cqe;
	struct lull_ring_stats st;
	struct io_uring uring;

	own_uring_init(&uring, 2);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(io_uring_sq_space_left(&uring), 2);
	for (unsigned i = 0; i < 3 - need; i++)
		io_uring_prep_nop(io_uring_get_sqe(&uring));
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EBUSY);
	cr_assert_eq(io_uring_sq_ready(&uring), 3 - need);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	st = stats_of(ring);
	cr_assert_eq(st.parks + st.park_cancels, 0, ST_FMT, ST_ARGS(st));
	/* Nothing is armed: a plain wait is allowed. */
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(io_uring_submit_and_wait(&uring, 3 - need),
		     (int)(3 - need));
	while (io_uring_peek_cqe(&uring, &cqe) == 0)
		io_uring_cqe_seen(&uring, cqe);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), need);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, arm_is_ebusy_without_a_free_sqe, .timeout = WATCHDOG_S)
{
	check_arm_needs_free_sqes(0, 1);
}

Test(uring, arm_with_a_safety_net_is_ebusy_with_fewer_than_two_free_sqes,
     .timeout = WATCHDOG_S)
{
	check_arm_needs_free_sqes(500 * NSEC_PER_MSEC, 2);
}

Test(uring, arm_is_ebusy_while_attached_to_a_loop, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), -EBUSY);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, loop_attach_is_ebusy_while_armed, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0),
		     -EBUSY);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cqe_claims_only_the_parks_own, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring_cqe cqe;
	struct io_uring uring;

	own_uring_init(&uring, 8);
	memset(&cqe, 0, sizeof(cqe));
	cqe.user_data = PARK_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0, "nothing armed");
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cqe.user_data = OTHER_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0);
	cqe.user_data = 0;
	cr_assert_eq(lull_uring_park_cqe(ring, &cqe), 0);
	/* Still armed, untouched by the foreign CQEs. */
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_neq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cancel_is_enoent_when_nothing_is_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(uring, cancel_is_ebusy_without_a_free_sqe, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 2);
	io_uring_prep_nop(io_uring_get_sqe(&uring));
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_space_left(&uring), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -EBUSY);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* Arm a fresh ring with LULL_BACKEND=@value (NULL: unset); the opcode. */
static int armed_opcode(const char *value)
{
	const struct io_uring_sqe *wait, *timeout;
	const struct __kernel_timespec *ts;
	struct lull_park_config cfg = {
		.safety_timeout_ns = 1234 * NSEC_PER_MSEC,
	};
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;
	int opcode;

	if (value)
		cr_assert_eq(setenv("LULL_BACKEND", value, 1), 0);
	else
		cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	own_uring_init(&uring, 8);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 2);
	wait = queued_sqe(&uring, 2);
	timeout = queued_sqe(&uring, 1);
	opcode = wait->opcode;
	cr_assert(wait->flags & IOSQE_IO_LINK, "the wait links its timeout");
	cr_assert_eq(wait->user_data, PARK_UD);
	cr_assert_eq(timeout->opcode, IORING_OP_LINK_TIMEOUT);
	cr_assert_eq(timeout->user_data, PARK_UD);
	ts = (const struct __kernel_timespec *)(uintptr_t)timeout->addr;
	cr_assert_eq(ts->tv_sec, 1);
	cr_assert_eq(ts->tv_nsec, 234 * (long long)NSEC_PER_MSEC);
	if (opcode == OP_FUTEX_WAIT) {
		cr_assert_eq(wait->addr,
			     (uint64_t)(uintptr_t)&ring->region->park);
		cr_assert_eq(park_word(ring), LULL_PARK_FUTEX);
	} else {
		cr_assert_eq(opcode, IORING_OP_READ);
		cr_assert_geq(wait->fd, 0);
		cr_assert_eq(park_word(ring), LULL_PARK_EVENTFD);
	}
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	return opcode;
}

Test(uring, lull_backend_chooses_the_parks_wait, .timeout = WATCHDOG_S)
{
	int best;

	require(LULL_BACKEND_URING_EVENTFD);
	best = lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0
		       ? OP_FUTEX_WAIT
		       : IORING_OP_READ;
	cr_assert_eq(armed_opcode("uring-eventfd"), IORING_OP_READ);
	if (best == OP_FUTEX_WAIT)
		cr_assert_eq(armed_opcode("uring-futex"), OP_FUTEX_WAIT);
	/* Names that are no io_uring backend leave the choice to lull. */
	cr_assert_eq(armed_opcode(NULL), best);
	cr_assert_eq(armed_opcode("auto"), best);
	cr_assert_eq(armed_opcode("epoll"), best);
	cr_assert_eq(armed_opcode("blocking"), best);
	cr_assert_eq(armed_opcode("nonsense"), best);
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
}

