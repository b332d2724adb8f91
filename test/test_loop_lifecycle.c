/* SPDX-License-Identifier: MIT */
/*
 * test_loop_lifecycle.c - the Criterion suite loop: creating a loop,
 * its backend (requested or from LULL_BACKEND), calls a callback may not
 * make, and what attach and detach refuse.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

/* ========================================================================
 * Creating, destroying, running and stopping
 */


LOOP_TEST(create_and_every_call_reject_bad_arguments, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = backend };
	struct lull_loop *loop = NULL, *other;
	struct io_uring_sqe *sqe = NULL;
	struct seq_sink ends = { 0 };
	struct lull_loop_stats st;
	struct lull_ring *ring;
	sigset_t before, after;
	int sigs[2];

	check_eq(lull_loop_create(NULL, &cfg), -EINVAL);
	cfg.backend = LULL_BACKEND_BLOCKING;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");
	cfg.backend = (enum lull_backend)99;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");
	/* A coalescing window with no end would never announce a park. */
	cfg.backend = backend;
	cfg.coalesce_ns = UINT64_MAX;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	cfg.coalesce_ns = INT64_MAX;
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");
	cfg.coalesce_ns = 0;

	check_eq(lull_loop_destroy(NULL), -EINVAL);
	check_eq(lull_loop_backend(NULL), -EINVAL);
	check_eq(lull_loop_run(NULL), -EINVAL);
	check_eq(lull_loop_stop(NULL), -EINVAL);

	other = loop_new(backend, 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	check_eq(lull_loop_stats(NULL, &st), -EINVAL);
	check_eq(lull_loop_stats(other, NULL), -EINVAL);
	check_eq(lull_loop_sqe(NULL, nop_cqe, NULL, &sqe), -EINVAL);
	check_eq(lull_loop_sqe(other, NULL, NULL, &sqe), -EINVAL);
	check_eq(lull_loop_sqe(other, nop_cqe, NULL, NULL), -EINVAL);
	check(sqe == NULL, "a failed lull_loop_sqe set an SQE");
	check_eq(lull_loop_timer(NULL, MS, 0, nop_timer, NULL, NULL),
		 -EINVAL);
	check_eq(lull_loop_timer(other, MS, 0, NULL, NULL, NULL), -EINVAL);
	check_eq(lull_loop_timer_cancel(NULL, NULL), -EINVAL);
	check_eq(lull_loop_timer_cancel(other, NULL), -EINVAL);
	check_eq(lull_loop_attach(NULL, ring, never_called, NULL, 0),
		 -EINVAL);
	check_eq(lull_loop_attach(other, NULL, never_called, NULL, 0),
		 -EINVAL);
	check_eq(lull_loop_attach(other, ring, NULL, NULL, 0), -EINVAL);
	check_eq(lull_loop_attach_items(NULL, ring, never_called_run, NULL, 0),
		 -EINVAL);
	check_eq(lull_loop_attach_items(other, NULL, never_called_run, NULL,
					0),
		 -EINVAL);
	check_eq(lull_loop_attach_items(other, ring, NULL, NULL, 0), -EINVAL);
	check_eq(lull_loop_detach(NULL, ring), -EINVAL);
	check_eq(lull_loop_detach(other, NULL), -EINVAL);

	/* Bad signal sets are refused before anything is blocked. */
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	sigs[0] = SIGUSR1;
	sigs[1] = SIGKILL;
	check_eq(lull_loop_signals(NULL, sigs, 1, nop_signal, NULL), -EINVAL);
	check_eq(lull_loop_signals(other, NULL, 1, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 0, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, -1, nop_signal, NULL),
		 -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 1, NULL, NULL), -EINVAL);
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	sigs[1] = SIGSTOP;
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	/* No signal at all: refused, and errno left alone (lull never
	 * sets it, even where libc's sigaddset() would). */
	sigs[1] = 4096;
	errno = 0;
	check_eq(lull_loop_signals(other, sigs, 2, nop_signal, NULL),
		 -EINVAL);
	check_eq(errno, 0);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	check(!sigismember(&after, SIGUSR1) || sigismember(&before, SIGUSR1),
	      "a refused lull_loop_signals blocked SIGUSR1");

	/*
	 * The refused calls left nothing behind: the loop still works.  Its
	 * stop shuts the ring down, whose handler then gets the poison, and
	 * nothing else: nothing was ever written.
	 */
	check_eq(lull_loop_attach(other, ring, seq_handler, &ends, 0), 0);
	check_eq(lull_loop_stop(other), 0);
	run_loop(other);
	check_eq(ends.poisons, 1);
	check_eq(ends.next, 0);
	check_eq(ends.errors, 0);
	check_ring_ended(other, ring, NULL, false);
	loop_free(other);
	check_eq(lull_ring_destroy(ring), 0);
}

LOOP_TEST(backend_reports_the_requested_one, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_AUTO };
	struct lull_loop *loop;
	int probed;

	loop = loop_new(backend, 0);
	check_eq(lull_loop_backend(loop), backend);
	loop_free(loop);

	/* AUTO is lull_backend_probe(): LULL_BACKEND when it is set. */
	probed = lull_backend_probe();
	check(probed > 0, "lull_backend_probe: %d", probed);
	loop = NULL;
	check_eq(lull_loop_create(&loop, &cfg), 0);
	check_eq(lull_loop_backend(loop), probed);
	loop_free(loop);
	loop = NULL;
	check_eq(lull_loop_create(&loop, NULL), 0);
	check_eq(lull_loop_backend(loop), probed);
	loop_free(loop);
}

LOOP_TEST(auto_follows_lull_backend_from_the_environment, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_AUTO };
	const char *old = getenv("LULL_BACKEND");
	char *saved = old ? strdup(old) : NULL;
	struct lull_loop *loop = NULL;

	check_eq(setenv("LULL_BACKEND", bname, 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), 0);
	check_eq(lull_loop_backend(loop), backend);
	loop_free(loop);

	loop = NULL;
	check_eq(setenv("LULL_BACKEND", "no-such-backend", 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	/* "blocking" is a backend, but not one a loop can run on. */
	check_eq(setenv("LULL_BACKEND", "blocking", 1), 0);
	check_eq(lull_loop_create(&loop, &cfg), -EINVAL);
	check(loop == NULL, "a failed create set the loop");

	if (saved)
		setenv("LULL_BACKEND", saved, 1);
	else
		unsetenv("LULL_BACKEND");
	free(saved);
}

struct reentry {
	int destroy_ret;
	int run_ret;
	unsigned calls;
};

static void destroy_from_callback(struct lull_loop *loop, int res,
				  uint32_t flags, void *ctx)
{
	struct reentry *r = ctx;

	(void)res;
	(void)flags;
	r->calls++;
	r->destroy_ret = lull_loop_destroy(loop);
	lull_loop_stop(loop);
}

LOOP_TEST(destroy_from_a_callback_is_ebusy, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct reentry r = { .destroy_ret = 1 };
	struct lull_loop *loop = loop_new(backend, 0);

	get_sqe(loop, destroy_from_callback, &r);
	run_loop(loop);
	check_eq(r.calls, 1);
	check_eq(r.destroy_ret, -EBUSY);
	loop_free(loop);
}

static void run_from_callback(struct lull_loop *loop, int res,
			      uint32_t flags, void *ctx)
{
	struct reentry *r = ctx;

	(void)res;
	(void)flags;
	r->calls++;
	r->run_ret = lull_loop_run(loop);
	lull_loop_stop(loop);
}

LOOP_TEST(run_from_a_callback_is_ebusy, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct reentry r = { .run_ret = 1 };
	struct lull_loop *loop = loop_new(backend, 0);

	get_sqe(loop, run_from_callback, &r);
	run_loop(loop);
	check_eq(r.calls, 1);
	check_eq(r.run_ret, -EBUSY);
	loop_free(loop);
}

/* ========================================================================
 * Rings
 */

LOOP_TEST(attach_and_detach_refuse_wrong_rings, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_loop *other = loop_new(backend, 0);
	struct lull_ring *ring, *owner, *view;
	ssize_t size = lull_ring_region_size(4096);
	void *mem;

	check_op(size, >, 0);
	mem = aligned_alloc(128, (size_t)size);
	check(mem != NULL, "out of memory");
	check_eq(lull_ring_create_in(&owner, mem, (size_t)size, 4096,
				     LULL_RING_SPSC),
		 0);
	check_eq(lull_ring_open(&view, mem, (size_t)size, 0), 0);
	ring = ring_new(LULL_RING_MPSC, 4096);

	/* A handle without the consumer role cannot be drained. */
	check_eq(lull_loop_attach(loop, view, never_called, NULL, 0), -EPERM);
	check_eq(lull_loop_detach(loop, view), -ENOENT);

	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), 0);
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 4), -EBUSY);
	check_eq(lull_loop_attach(other, ring, never_called, NULL, 0),
		 -EBUSY);
	/* The loop is its consumer now, not lull_ring_wait(). */
	check_eq(lull_ring_wait(ring, 0), -EBUSY);
	check_eq(lull_ring_wait(ring, 1000), -EBUSY);
	check_eq(lull_loop_detach(other, ring), -ENOENT);
	check_eq(lull_loop_detach(loop, owner), -ENOENT);

	check_eq(lull_loop_detach(loop, ring), 0);
	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	check_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	check_eq(lull_loop_attach(other, ring, never_called, NULL, 0), 0);
	check_eq(lull_loop_attach(other, owner, never_called, NULL, 0), 0);

	loop_free(other); /* detaches both */
	check_eq(lull_ring_wait(ring, 0), -ETIMEDOUT);
	check_eq(lull_loop_attach(loop, owner, never_called, NULL, 0), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
	check_eq(lull_ring_destroy(view), 0);
	check_eq(lull_ring_destroy(owner), 0);
	free(mem);
}

LOOP_TEST(attach_is_ebusy_while_the_ring_is_parked_on_a_callers_uring,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct __kernel_timespec wait = { .tv_sec = 2 };
	struct lull_loop *loop = loop_new(backend, 0);
	struct io_uring_cqe *cqe;
	struct lull_ring *ring;
	struct io_uring uring;
	int ret, seen = 0;

	ret = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	if (ret < 0) {
		loop_free(loop);
		cr_skip_test("no io_uring here: %s", strerror(-ret));
	}
	check_eq(io_uring_queue_init(8, &uring, 0), 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	check_eq(lull_uring_park_arm(ring, &uring, 42), 0);
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), -EBUSY);

	/*
	 * Cancel the park; its two CQEs (the wait, the cancel: no safety
	 * net's timeout by default) end it.
	 */
	check_eq(lull_uring_park_cancel(ring, &uring), 0);
	check_op(io_uring_submit(&uring), >=, 1);
	while (seen < 2) {
		ret = io_uring_wait_cqe_timeout(&uring, &cqe, &wait);
		check(ret == 0, "park CQE %d missing: %s", seen, strerror(-ret));
		check_eq(lull_uring_park_cqe(ring, cqe), 1);
		io_uring_cqe_seen(&uring, cqe);
		seen++;
	}
	check_eq(lull_loop_attach(loop, ring, never_called, NULL, 0), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
	io_uring_queue_exit(&uring);
}


/* What a ring's handler saw, and the loop to stop once it has it all. */
struct corrupt_sink {
	struct lull_loop *loop;
	unsigned records;
	unsigned poisons;
	bool stop_on_record;
};

static int corrupt_sink_fn(const struct lull_record *rec, void *ctx)
{
	struct corrupt_sink *s = ctx;

	if (rec->type == LULL_TYPE_POISON) {
		s->poisons++;
	} else {
		s->records++;
		if (s->stop_on_record)
			lull_loop_stop(s->loop);
	}
	return LULL_READ_CONTINUE;
}

/*
 * A region whose next record header is corrupt (a length no writer makes)
 * makes that ring fatal, not the loop: its handler gets the poison and it
 * is detached, while a healthy ring beside it is read on until the stop.
 * (Until the consumer treated a corrupt ring as fatal, the run ended with
 * -EPROTO, taking every other ring with it.)
 */
LOOP_TEST(a_corrupt_ring_ends_alone_with_its_poison, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	const size_t capacity = 4096;
	size_t size = (size_t)lull_ring_region_size(capacity);
	struct lull_loop *loop = loop_new(backend, 0);
	struct corrupt_sink bad = { .loop = loop }, good = { .loop = loop };
	struct lull_ring *ring, *healthy;
	struct lull_producer *prod;
	struct lull_ring_stats st;
	int32_t bogus = 3; /* shorter than a record header */
	void *mem;

	check_eq(posix_memalign(&mem, 4096, size), 0);
	check_eq(lull_ring_create_in(&ring, mem, size, capacity,
				     LULL_RING_MPSC), 0);
	/* The first record's length, at the start of the data area. */
	memcpy((char *)mem + size - capacity, &bogus, sizeof(bogus));
	healthy = ring_new(LULL_RING_SPSC, 4096);
	check_eq(lull_producer_attach(healthy, 0, &prod), 0);
	check_eq(lull_spsc_write(prod, 1, "x", 1), 0);
	good.stop_on_record = true;
	check_eq(lull_loop_attach(loop, ring, corrupt_sink_fn, &bad, 0), 0);
	check_eq(lull_loop_attach(loop, healthy, corrupt_sink_fn, &good, 0),
		 0);
	check_eq(lull_loop_run(loop), 0);
	check_eq(bad.records, 0);
	check_eq(bad.poisons, 1);
	check_eq(good.records, 1);
	check_eq(good.poisons, 1);
	/* Both ended and were detached; the corrupt one says why. */
	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	check_eq(lull_loop_detach(loop, healthy), -ENOENT);
	check_eq(lull_ring_stats(ring, &st), 0);
	check_eq(st.corruptions, 1);
	check_eq(lull_ring_stats(healthy, &st), 0);
	check_eq(st.corruptions, 0);
	check_eq(lull_producer_detach(prod), 0);
	check_eq(lull_ring_destroy(healthy), 0);
	check_eq(lull_ring_destroy(ring), 0);
	loop_free(loop);
	free(mem);
}
