/* SPDX-License-Identifier: MIT */
/*
 * test_park_calls.c - the Criterion suites park and backend: lull_ring_wait(),
 * the park configuration and counters, their argument and state errors;
 * the backend names, support and the probe with LULL_BACKEND.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * park: configuration, counters and lull_ring_wait()
 */

Test(park, config_rejects_a_null_ring_and_takes_zero_as_no_safety_net,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = { .spin_ns = 0, .safety_timeout_ns = 0 };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	cr_assert_eq(LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS, 0, "off by default");
	cr_assert_eq(ring->safety_ns, 0, "a new ring has no safety net");
	cr_assert_eq(lull_ring_park_config(NULL, NULL), -EINVAL);
	cr_assert_eq(lull_ring_park_config(NULL, &cfg), -EINVAL);
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(ring->safety_ns, 0);
	cfg.safety_timeout_ns = 1;
	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(ring->safety_ns, 1);
	cr_assert_eq(lull_ring_park_config(ring, NULL), 0);
	cr_assert_eq(ring->safety_ns, 0, "NULL restores: no safety net");
	/* With none, a park on an io_uring is its wait alone. */
	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(io_uring_sq_ready(&uring), 1);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, consumer_calls_are_eperm_without_the_consumer_role,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = {
		.safety_timeout_ns = LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS,
	};
	struct lull_loop_config epoll_cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring, *other;
	struct io_uring dummy;
	struct io_uring_cqe cqe;
	struct lull_ring_stats st;
	struct lull_loop *loop;
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size);

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096,
					 LULL_RING_SPSC),
		     0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	memset(&dummy, 0, sizeof(dummy));
	memset(&cqe, 0, sizeof(cqe));
	cqe.user_data = PARK_UD;

	cr_assert_eq(lull_ring_park_config(other, &cfg), -EPERM);
	cr_assert_eq(lull_ring_park_config(other, NULL), -EPERM);
	cr_assert_eq(lull_ring_wait(other, 0), -EPERM);
	cr_assert_eq(lull_ring_wait(other, -1), -EPERM);
	/* The role is checked before the io_uring is looked at. */
	cr_assert_eq(lull_uring_park_arm(other, &dummy, PARK_UD), -EPERM);
	cr_assert_eq(lull_uring_park_drain(other, &dummy, consume_any, NULL,
					   1),
		     -EPERM);
	cr_assert_eq(lull_uring_park_cancel(other, &dummy), -EPERM);
	cr_assert_eq(lull_uring_park_cqe(other, &cqe), 0);
	cr_assert_eq(lull_loop_create(&loop, &epoll_cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, other, consume_any, NULL, 0),
		     -EPERM);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	/* Counters are for anyone. */
	cr_assert_eq(lull_ring_stats(other, &st), 0);

	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(park, stats_reject_null_and_start_at_zero, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_ring_stats st;

	memset(&st, 0xa5, sizeof(st));
	cr_assert_eq(lull_ring_stats(NULL, &st), -EINVAL);
	cr_assert_eq(lull_ring_stats(ring, NULL), -EINVAL);
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	cr_assert_eq(st.parks, 0);
	cr_assert_eq(st.park_cancels, 0);
	cr_assert_eq(st.wakes, 0);
	cr_assert_eq(st.safety_timeouts, 0);
	cr_assert_eq(st.idle_timeouts, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, stats_are_the_regions_seen_through_any_handle, .timeout = WATCHDOG_S)
{
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size);
	struct lull_ring *ring, *other;
	struct lull_ring_stats st;

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096,
					 LULL_RING_MPSC),
		     0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, 5 * (int64_t)NSEC_PER_MSEC),
		     -ETIMEDOUT);
	cr_assert_eq(lull_ring_stats(other, &st), 0);
	cr_assert_geq(st.parks, 1, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(park, wait_rejects_null, .timeout = WATCHDOG_S)
{
	cr_assert_eq(lull_ring_wait(NULL, 0), -EINVAL);
	cr_assert_eq(lull_ring_wait(NULL, -1), -EINVAL);
}

Test(park, wait_returns_at_once_when_a_record_is_there, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_ring_stats st;
	uint64_t start;

	prod = write_one(ring, 0, 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, -1), 0);
	cr_assert_eq(lull_ring_wait(ring, 10 * (int64_t)NSEC_PER_SEC), 0);
	cr_assert_lt(now_ns() - start, NSEC_PER_SEC);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.wakes, 0, ST_FMT, ST_ARGS(st));
	/* Waiting consumes nothing. */
	cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 10), 1);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	/* The poison the last detach leaves is readable at once too. */
	cr_assert_eq(lull_producer_detach(prod), 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, -1), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_lt(now_ns() - start, NSEC_PER_SEC);
	expect_poison_then_epipe(ring);
	st = stats_of(ring);
	cr_assert_eq(st.parks, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.wakes, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * An aborted MPSC claim leaves a padding at the head: a wait with nothing
 * behind it consumes it (its room is free again) and does not return for
 * it; with a record behind it, the wait returns for the record, which the
 * read hands out.  Both answers come from one header in the common case
 * (head_state() in ring_read.c); a padding is never taken for a record.
 */
Test(park, wait_skips_an_aborted_claims_padding, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_producer *first, *second;
	struct tally t = { 0 };
	uint64_t head;
	void *data;

	cr_assert_eq(lull_producer_attach(ring, 0, &first), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &second), 0);
	head = atomic_load_explicit(&ring->cursor[0].lane->head,
				    memory_order_relaxed);
	cr_assert_eq(lull_mpsc_claim(first, 1, 100, &data), 0);
	cr_assert_eq(lull_mpsc_abort(first), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(atomic_load_explicit(&ring->cursor[0].lane->head,
					  memory_order_relaxed),
		     head + 112, "the padding was not consumed");

	/* A padding, then a record: the wait skips to the record. */
	cr_assert_eq(lull_mpsc_claim(first, 1, 100, &data), 0);
	cr_assert_eq(write_msg(second, true, 1, 1), 0);
	cr_assert_eq(lull_mpsc_abort(first), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_ring_read(ring, tally_record, &t, 16), 1);
	cr_assert_eq(t.records, 1);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	cr_assert_eq(lull_producer_detach(first), 0);
	cr_assert_eq(lull_producer_detach(second), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * The re-check of every park and every spin asks lull__ring_readable()
 * again and again (here through lull_ring_wait(), which asks it first):
 * it must be a pure query.  After a shutdown it foresees the fatal or
 * poison record without taking the step itself: no seal (so a fatal
 * report still counts), no head published.
 */
static void readable_changes_nothing(unsigned mode, unsigned how)
{
	struct lull_ring *ring = new_ring(mode, 4096);
	struct lull_producer *prod = write_one(ring, 0, 0);
	struct tally t = { 0 };
	uint64_t head;

	/* Graceful: drained, so the poison is next; immediate: discarded. */
	if (how == LULL_SHUTDOWN_GRACEFUL)
		cr_assert_eq(lull_ring_read(ring, consume_any, NULL, 10), 1);
	head = atomic_load_explicit(&ring->cursor[0].lane->head,
				    memory_order_relaxed);
	cr_assert_eq(lull_ring_shutdown(ring, how), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(ring->closing, LULL_CLOSING_OPEN);
	cr_assert_not(atomic_load_explicit(&ring->region->state,
					   memory_order_relaxed) &
		      LULL_STATE_SEALED);
	cr_assert_eq(atomic_load_explicit(&ring->cursor[0].lane->head,
					  memory_order_relaxed),
		     head, "a query published the head");
	/* Not sealed yet: a fatal report still makes it through. */
	cr_assert_eq(lull_ring_fatal(ring, 7, "late"), 0);
	cr_assert_eq(lull_ring_read(ring, tally_record, &t, 16), 1);
	cr_assert_eq(t.others, 1, "the fatal record is not next");
	expect_poison_then_epipe(ring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, readable_is_a_query_graceful_spsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_SPSC, LULL_SHUTDOWN_GRACEFUL);
}

Test(park, readable_is_a_query_graceful_mpsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_MPSC, LULL_SHUTDOWN_GRACEFUL);
}

Test(park, readable_is_a_query_immediate_mpsc, .timeout = WATCHDOG_S)
{
	readable_changes_nothing(LULL_RING_MPSC, LULL_SHUTDOWN_IMMEDIATE);
}

Test(park, wait_with_zero_timeout_is_etimedout_without_parking,
     .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_MPSC, 4096);
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	st = stats_of(ring);
	cr_assert_eq(st.parks + st.park_cancels, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* A spin longer than the caller's timeout ends at the timeout. */
Test(park, wait_spins_no_longer_than_its_timeout, .timeout = WATCHDOG_S)
{
	const struct lull_park_config cfg = { .spin_ns = 20 * NSEC_PER_SEC };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	uint64_t start, elapsed;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, (int64_t)NSEC_PER_MSEC), -ETIMEDOUT);
	elapsed = now_ns() - start;
	cr_assert_lt(elapsed, 10 * NSEC_PER_SEC,
		     "a 1 ms wait spun for %" PRIu64 " ns", elapsed);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_times_out_after_its_timeout, .timeout = WATCHDOG_S)
{
	const uint64_t timeout = 50 * NSEC_PER_MSEC;
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_ring_stats st;
	uint64_t start, elapsed;

	start = now_ns();
	cr_assert_eq(lull_ring_wait(ring, (int64_t)timeout), -ETIMEDOUT);
	elapsed = now_ns() - start;
	cr_assert_geq(elapsed, timeout, "returned after %" PRIu64 " ns",
		      elapsed);
	cr_assert_lt(elapsed, timeout + 2 * NSEC_PER_SEC);
	st = stats_of(ring);
	cr_assert_geq(st.parks, 1, ST_FMT, ST_ARGS(st));
	/* The caller's timeout is not the safety net. */
	cr_assert_eq(st.idle_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_eq(park_word(ring), LULL_PARK_AWAKE);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_rechecks_at_the_safety_net_and_counts_idle_timeouts,
     .timeout = WATCHDOG_S)
{
	struct lull_park_config cfg = {
		.safety_timeout_ns = 10 * NSEC_PER_MSEC,
	};
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_ring_stats st;

	cr_assert_eq(lull_ring_park_config(ring, &cfg), 0);
	cr_assert_eq(lull_ring_wait(ring, 200 * (int64_t)NSEC_PER_MSEC),
		     -ETIMEDOUT);
	st = stats_of(ring);
	/* At most 19 whole 10 ms slices fit before the 200 ms deadline. */
	cr_assert(st.idle_timeouts >= 1 && st.idle_timeouts <= 19, ST_FMT,
		  ST_ARGS(st));
	cr_assert_eq(st.safety_timeouts, 0, ST_FMT, ST_ARGS(st));
	cr_assert_geq(st.parks, st.idle_timeouts, ST_FMT, ST_ARGS(st));
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_is_ebusy_while_attached_to_a_loop, .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_producer *prod;
	struct lull_loop *loop;

	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_ring_wait(ring, -1), -EBUSY);
	prod = write_one(ring, 0, 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, wait_is_ebusy_while_a_uring_park_is_armed, .timeout = WATCHDOG_S)
{
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct io_uring uring;

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -EBUSY);
	cr_assert_eq(lull_ring_wait(ring, -1), -EBUSY);
	cr_assert_eq(park_teardown(ring, &uring), 0);
	cr_assert_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(park, destroy_is_ebusy_while_a_loop_or_a_uring_park_holds_the_ring,
     .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_ring *ring = new_ring(LULL_RING_SPSC, 4096);
	struct lull_loop *loop;
	struct io_uring uring;

	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(loop, ring, consume_any, NULL, 0), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(lull_loop_detach(loop, ring), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);

	own_uring_init(&uring, 8);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, PARK_UD), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(io_uring_submit(&uring), 1);
	cr_assert_eq(lull_uring_park_cancel(ring, &uring), 0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(park_reap(ring, &uring), 0);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* ------------------------------------------------------------------------
 * backend: names, support, the probe
 */

static const enum lull_backend every_backend[] = {
	LULL_BACKEND_AUTO,     LULL_BACKEND_URING_FUTEX,
	LULL_BACKEND_URING_EVENTFD, LULL_BACKEND_BLOCKING,
	LULL_BACKEND_EPOLL,
};

Test(backend, names_and_parse_round_trip, .timeout = WATCHDOG_S)
{
	static const char *const names[] = {
		"auto", "uring-futex", "uring-eventfd", "blocking", "epoll",
	};

	for (unsigned i = 0; i < ARRAY_SIZE(every_backend); i++) {
		const char *name = lull_backend_name(every_backend[i]);

		cr_assert_not_null(name);
		cr_assert_str_eq(name, names[i]);
		cr_assert_eq(lull_backend_parse(name), (int)every_backend[i]);
	}
}

Test(backend, unknown_values_and_names_are_rejected, .timeout = WATCHDOG_S)
{
	static const char *const bad[] = {
		"", "AUTO", "Epoll", "uring", "io_uring", "uring_futex",
		"uring-futex ", " blocking", "epoll\n", "eventfd", "futex",
	};

	cr_assert_null(lull_backend_name((enum lull_backend)5));
	cr_assert_null(lull_backend_name((enum lull_backend)-1));
	cr_assert_null(lull_backend_name((enum lull_backend)1000));
	cr_assert_eq(lull_backend_parse(NULL), -EINVAL);
	for (unsigned i = 0; i < ARRAY_SIZE(bad); i++)
		cr_assert_eq(lull_backend_parse(bad[i]), -EINVAL, "\"%s\"",
			     bad[i]);
}

Test(backend, supported_agrees_with_the_kernel, .timeout = WATCHDOG_S)
{
	struct io_uring_probe *probe;
	struct io_uring uring;
	int ret, futex, eventfd;

	cr_assert_eq(lull_backend_supported(LULL_BACKEND_BLOCKING), 0);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_EPOLL), 0);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_AUTO), -EINVAL);
	cr_assert_eq(lull_backend_supported((enum lull_backend)5), -EINVAL);
	cr_assert_eq(lull_backend_supported((enum lull_backend)-1), -EINVAL);

	futex = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	eventfd = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	cr_assert(futex == 0 || unavailable(futex), "uring-futex: %d", futex);
	cr_assert(eventfd == 0 || unavailable(eventfd), "uring-eventfd: %d",
		  eventfd);
	/* The answer is stable. */
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_URING_FUTEX), futex);
	cr_assert_eq(lull_backend_supported(LULL_BACKEND_URING_EVENTFD),
		     eventfd);

	ret = io_uring_queue_init(2, &uring, 0);
	if (ret < 0) {
		cr_assert_eq(eventfd, ret, "io_uring_queue_init: %d", ret);
		cr_assert_eq(futex, ret);
		return;
	}
	cr_assert_eq(eventfd, 0);
	probe = io_uring_get_probe_ring(&uring);
	cr_assert_not_null(probe);
	cr_assert_eq(futex,
		     io_uring_opcode_supported(probe, OP_FUTEX_WAIT)
			     ? 0
			     : -EOPNOTSUPP);
	io_uring_free_probe(probe);
	io_uring_queue_exit(&uring);
}

/* The probe's choice with LULL_BACKEND unset. */
static int best_backend(void)
{
	if (lull_backend_supported(LULL_BACKEND_URING_FUTEX) == 0)
		return LULL_BACKEND_URING_FUTEX;
	if (lull_backend_supported(LULL_BACKEND_URING_EVENTFD) == 0)
		return LULL_BACKEND_URING_EVENTFD;
	return LULL_BACKEND_EPOLL;
}

static int probe_with(const char *value)
{
	cr_assert_eq(setenv("LULL_BACKEND", value, 1), 0);
	return lull_backend_probe();
}

Test(backend, probe_without_lull_backend_picks_the_best_supported,
     .timeout = WATCHDOG_S)
{
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	cr_assert_eq(lull_backend_probe(), best_backend());
}

Test(backend, probe_honours_lull_backend, .timeout = WATCHDOG_S)
{
	int futex = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	int eventfd = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);

	cr_assert_eq(probe_with("blocking"), LULL_BACKEND_BLOCKING);
	cr_assert_eq(probe_with("epoll"), LULL_BACKEND_EPOLL);
	cr_assert_eq(probe_with("uring-futex"),
		     futex ? futex : LULL_BACKEND_URING_FUTEX);
	cr_assert_eq(probe_with("uring-eventfd"),
		     eventfd ? eventfd : LULL_BACKEND_URING_EVENTFD);
	cr_assert_eq(probe_with("auto"), best_backend());
	cr_assert_eq(probe_with(""), best_backend());
	cr_assert_eq(probe_with("kqueue"), -EINVAL);
	cr_assert_eq(probe_with("EPOLL"), -EINVAL);
	cr_assert_eq(unsetenv("LULL_BACKEND"), 0);
	cr_assert_eq(lull_backend_probe(), best_backend());
}

