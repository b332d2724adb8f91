/* SPDX-License-Identifier: MIT */
/*
 * test_park_own_uring.c - the Criterion suites own_uring_futex and
 * own_uring_eventfd: the CQEs of a park on the caller's io_uring
 * (safety-net expiry, cancel, a record between CQEs, what is counted).
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * own_uring_*: the park's CQEs on the caller's io_uring
 */

/* Set up a ring and an io_uring whose parks use @bc's backend. */
static struct lull_ring *own_setup(const struct backend_case *bc,
				   struct io_uring *uring, uint64_t safety_ns)
{
	struct lull_park_config cfg = { .safety_timeout_ns = safety_ns };
	struct lull_ring *ring;

	require(bc->backend);
	own_uring_init(uring, 8);
	cr_assert_eq(setenv("LULL_BACKEND", lull_backend_name(bc->backend),
			    1),
		     0);
	ring = new_ring(LULL_RING_SPSC, 4096);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	return ring;
}

/* Wait for @n CQEs in the CQ (submitting first), at most 5 s. */
static void wait_cqes(struct io_uring *uring, unsigned n)
{
	struct __kernel_timespec ts = { .tv_sec = 5 };
	struct io_uring_cqe *cqe;
	int ret;

	ret = io_uring_submit_and_wait_timeout(uring, &cqe, n, &ts, NULL);
	cr_assert(ret >= 0 || ret == -EINTR, "waiting for %u CQEs: %s", n,
		  strerror(-ret));
	cr_assert_geq(io_uring_cq_ready(uring), n,
		      "%u CQEs in 5 s, expected %u",
		      io_uring_cq_ready(uring), n);
}

/* Take the next CQE out of the CQ and hand it to the park. */
static int next_cqe_to_park(struct lull_ring *ring, struct io_uring *uring,
			    struct io_uring_cqe *copy)
{
	struct io_uring_cqe *cqe;
	int ret;

	cr_assert_eq(io_uring_peek_cqe(uring, &cqe), 0);
	*copy = *cqe;
	ret = lull_uring_park_cqe(ring, cqe);
	io_uring_cqe_seen(uring, cqe);
	return ret;
}

/* End an own-io_uring test: the io_uring, the ring, the forced backend. */
static void own_teardown(struct lull_ring *ring, struct io_uring *uring)
{
	io_uring_queue_exit(uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	unsetenv("LULL_BACKEND");
}

static void check_safety_net_cqes(const struct backend_case *bc)
{
	const uint64_t safety = 20 * NSEC_PER_MSEC;
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, safety);
	uint64_t start;

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	for (unsigned i = 1; i <= 3; i++) {
		start = now_ns();
		wait_cqes(&uring, 2);
		cr_assert_geq(now_ns() - start, safety,
			      "park %u ended before its safety net", i);
		cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
		cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
		st = stats_of(ring);
		cr_assert_eq(st.idle_timeouts, i, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
			     ST_ARGS(st));
		cr_assert_eq(st.wakes, 0);
		/* Nothing to read; both CQEs are in, so it parks again. */
		cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any,
						   NULL, 16),
			     0);
		cr_assert_eq(io_uring_sq_ready(&uring), 2);
		cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	}
	st = stats_of(ring);
	cr_assert_eq(st.parks, 4, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(park_teardown(ring, &uring), 0);
	own_teardown(ring, &uring);
}

static void check_cancel(const struct backend_case *bc)
{
	struct io_uring_cqe cqe, fake;
	struct lull_producer *prod;
	struct io_uring_sqe *sqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, LONG_SAFETY_NS);
	unsigned ours = 0, foreign = 0;

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	/* A foreign request in the same batch. */
	sqe = io_uring_get_sqe(&uring);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, OTHER_UD);
	wait_cqes(&uring, 4);
	while (io_uring_cq_ready(&uring)) {
		if (next_cqe_to_park(ring, &uring, &cqe) == 1) {
			cr_assert_eq(cqe.user_data, PARK_UD);
			ours++;
		} else {
			cr_assert_eq(cqe.user_data, OTHER_UD);
			foreign++;
		}
	}
	cr_assert_eq(ours, 3, "%s: the wait's, the timeout's and the cancel's",
		     bc->name);
	cr_assert_eq(foreign, 1);
	/* All in: nothing armed, and the park's user_data is no longer its. */
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	memset(&fake, 0, sizeof(fake));
	fake.user_data = PARK_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &fake), 0);
	fake.user_data = OTHER_UD;
	cr_assert_eq(lull_uring_park_cqe(ring, &fake), 0);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), -ENOENT);
	/* A cancelled park stays down through a drain... */
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(io_uring_sq_ready(&uring), 0);
	/* ...until armed again. */
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_then_epipe(ring);
	own_teardown(ring, &uring);
}

/*
 * The safety net ends a park with nothing to read; the caller handles the
 * first of its CQEs (the park is over, the word is awake again), a
 * producer commits (and rightly makes no wake-up: nobody is parked), and
 * then the second CQE comes through.  Nothing was lost: this is an idle
 * timeout, not a safety timeout.
 */
static void check_record_between_cqes(const struct backend_case *bc)
{
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, 20 * NSEC_PER_MSEC);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	wait_cqes(&uring, 2);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	st = stats_of(ring);
	cr_assert_eq(st.wakes, 0, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0,
		     "%s: a record committed after the park ended (between "
		     "its two CQEs) was counted as a lost wake-up; " ST_FMT,
		     bc->name, ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 1, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(lull_uring_park_drain(ring, &uring, consume_any, NULL,
					   16),
		     1);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_then_epipe(ring);
	own_teardown(ring, &uring);
}

/* A park ended by lull_uring_park_cancel() is no safety-net expiry. */
static void check_cancel_not_counted(const struct backend_case *bc)
{
	struct lull_ring_stats st;
	struct io_uring uring;
	struct lull_ring *ring = own_setup(bc, &uring, LONG_SAFETY_NS);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_submit(&uring), 2);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	cr_assert_eq(park_reap(ring, &uring), 0);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 1, "%s: " ST_FMT, bc->name, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, "%s: " ST_FMT, bc->name,
		     ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 0,
		     "%s: a cancelled park (the safety net is 10 s) was "
		     "counted as a safety-net expiry; " ST_FMT,
		     bc->name, ST_ARGS(st));
	own_teardown(ring, &uring);
}

#define OWN_URING_TESTS(suite, bc)                                           \
	Test(suite, safety_net_cqes_are_recognised_and_counted_as_idle,      \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_safety_net_cqes(&bc);                                  \
	}                                                                    \
	Test(suite, cancel_ends_the_park_and_every_cqe_is_recognised,        \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_cancel(&bc);                                           \
	}                                                                    \
	Test(suite, record_committed_between_the_park_cqes_is_no_lost_wake,  \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_record_between_cqes(&bc);                              \
	}                                                                    \
	Test(suite, cancelled_park_is_not_counted_as_a_safety_net_expiry,    \
	     .timeout = WATCHDOG_S)                                          \
	{                                                                    \
		check_cancel_not_counted(&bc);                               \
	}

OWN_URING_TESTS(own_uring_futex, own_futex_case)
OWN_URING_TESTS(own_uring_eventfd, own_eventfd_case)

/*
 * A producer that claims a wake-up the consumer turned out not to need (it
 * found the record at its re-check) leaves a count in the eventfd, which
 * ends the next park at once.  DESIGN.md: a stale wake-up "counts
 * nothing"; above all it is no safety-net expiry (the net here is 10 s).
 * The count is written here directly, as that producer's write would be.
 */
Test(own_uring_eventfd, stale_wake_up_is_not_counted_as_a_safety_net_expiry,
     .timeout = WATCHDOG_S)
{
	struct lull_ring_stats st;
	struct io_uring_cqe cqe;
	struct io_uring uring;
	struct lull_ring *ring =
		own_setup(&own_eventfd_case, &uring, LONG_SAFETY_NS);

	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(queued_sqe(&uring, 2)->opcode, IORING_OP_READ);
	cr_assert_geq(ring->eventfd, 0);
	cr_assert_eq(eventfd_write(ring->eventfd, 1), 0);
	wait_cqes(&uring, 2);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	cr_assert_eq(next_cqe_to_park(ring, &uring, &cqe), 1);
	st = stats_of(ring);
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.idle_timeouts, 0,
		     "a park ended by a stale eventfd count at once (the "
		     "safety net is 10 s) was counted as a safety-net expiry; "
		     ST_FMT,
		     ST_ARGS(st));
	cr_assert_eq(park_teardown(ring, &uring), 0);
	own_teardown(ring, &uring);
}

