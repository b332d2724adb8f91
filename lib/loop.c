/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the lull loop's core: create and destroy it, run and stop it,
 * and park it on every attached ring at once.
 *
 * One pass: the backend reaps what completed, each ring hands its next
 * batch to its handler, and the backend polls when there is more to do.
 * When nothing was ready, the loop spins (spin_ns), waits out a coalescing
 * window (coalesce_ns), or parks: it takes park.c's consumer steps for
 * every ring at once (announce on each, one barrier, re-check each, then
 * sleeps or abandon on each) and sleeps in one call of its backend's, which
 * also submits whatever callbacks queued.  loop_internal.h maps the other
 * files: the rings, the user ops and timers, the backends.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <ck_pr.h>

#include <sched.h>

#include "loop_internal.h"

LULL_EXPORT int lull_loop_create(struct lull_loop **loopp,
				 const struct lull_loop_config *cfg)
{
	struct lull_loop_config defaults = { 0 };
	const struct loop_backend *be;
	struct lull_loop *loop;
	long fd;
	int backend, ret;

	if (!loopp)
		return -EINVAL;
	if (!cfg)
		cfg = &defaults;
	backend = cfg->backend;
	if (backend == LULL_BACKEND_AUTO) {
		backend = lull_backend_probe();
		if (backend < 0)
			return backend;
	} else {
		ret = lull_backend_supported(cfg->backend);
		if (ret < 0)
			return ret;
	}
	be = lull__loop_backend(backend);
	if (!be)
		return -EINVAL;
	/*
	 * A window is a sleep with no park announced: one with no end would
	 * leave committed records unseen until some other event.
	 */
	if (cfg->coalesce_ns >= LULL_NS_FOREVER)
		return -EINVAL;

	loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	loop->be = be;
	loop->backend = backend;
	loop->sigfd = -1;
	/* No adaptive spin here: LULL_PARK_SPIN_ADAPTIVE parks at once. */
	loop->spin_ns = cfg->spin_ns == LULL_PARK_SPIN_ADAPTIVE ? 0
								: cfg->spin_ns;
	loop->coalesce_ns = cfg->coalesce_ns;
	/* 0: no safety net, unless LULL_SAFETY_NET_MS sets one. */
	loop->safety_ns = lull__safety_ns(cfg->safety_timeout_ns);
	if (loop->safety_ns >= LULL_NS_FOREVER)
		loop->safety_ns = 0;
	atomic_init(&loop->stop_requests, 0);
	/*
	 * Blocking: an io_uring read of a non-blocking file fails with -EAGAIN
	 * instead of waiting.  The epoll backend makes it non-blocking.
	 */
	fd = LULL_SYSCALL(eventfd(0, EFD_CLOEXEC));
	if (fd < 0) {
		free(loop);
		return (int)fd;
	}
	loop->kick_fd = (int)fd;
	ret = be->init(loop, cfg->entries);
	if (ret < 0) {
		close(loop->kick_fd);
		free(loop);
		return ret;
	}
	*loopp = loop;
	return 0;
}

LULL_EXPORT int lull_loop_destroy(struct lull_loop *loop)
{
	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	lull__loop_rings_free(loop);
	/* Tearing the backend down drops everything still in flight. */
	loop->be->fini(loop);
	lull__loop_ops_free(loop);
	if (loop->sigfd >= 0)
		close(loop->sigfd);
	close(loop->kick_fd);
	free(loop);
	return 0;
}

LULL_EXPORT int lull_loop_backend(const struct lull_loop *loop)
{
	return loop ? loop->backend : -EINVAL;
}

LULL_EXPORT int lull_loop_stats(const struct lull_loop *loop,
				struct lull_loop_stats *st)
{
	if (!loop || !st)
		return -EINVAL;
	*st = loop->stats;
	return 0;
}

LULL_EXPORT int lull_loop_stop(struct lull_loop *loop)
{
	if (!loop)
		return -EINVAL;
	/* Pairs with the acquire load in lull__loop_stop_pending(). */
	atomic_fetch_add_explicit(&loop->stop_requests, 1,
				  memory_order_release);
	/* Wakes a parked loop; async-signal-safe, like the store above. */
	LULL_SYSCALL(eventfd_write(loop->kick_fd, 1));
	return 0;
}

/*
 * Act on lull_loop_stop(): the first shuts every attached ring down
 * gracefully, a second one (in the same run) immediately.
 */
static void stop_rings(struct lull_loop *loop)
{
	/* Pairs with the release RMW in lull_loop_stop(). */
	unsigned stops = atomic_load_explicit(&loop->stop_requests,
					      memory_order_acquire);

	loop->stops_seen = stops;
	loop->stopping = true;
	lull__loop_rings_shutdown(loop, stops - loop->stops_at_run >= 2
						? LULL_SHUTDOWN_IMMEDIATE
						: LULL_SHUTDOWN_GRACEFUL);
}

/* --- parking ---------------------------------------------------------- */

/*
 * park.c's consumer steps for every ring at once: announce on each, one
 * barrier, re-check each, then sleeps (or abandon) on each.  Returns 1
 * when the loop may sleep, 0 when it may not, or the barrier's error
 * (every ring awake again).
 */
static int park_begin(struct lull_loop *loop)
{
	bool heavy = false;
	unsigned i;
	int ret;

	for (i = 0; i < loop->nrings; i++) {
		struct loop_ring *lr = loop->rings[i];
		uint32_t how = loop->be->park_how;

		if (lr->bridge)
			how = LULL_PARK_FUTEX;
		else if (loop->be->ring_park_how)
			how = loop->be->ring_park_how(loop, lr);
		heavy |= lull__park_announce(lr->ring, how);
	}
	/*
	 * barrier: pairs with every producer's barrier in lull__notify().  A
	 * fence for rings whose producers fence too, and membarrier for those
	 * whose producers may not (it also orders this thread).
	 */
	ret = lull__barrier_heavy(heavy);
	if (ret < 0) {
		for (i = 0; i < loop->nrings; i++)
			lull__park_end(loop->rings[i]->ring);
		return ret;
	}
	for (i = 0; i < loop->nrings; i++)
		lull__park_fence_settle(loop->rings[i]->ring);
	/* recheck; a stop request counts as work */
	for (i = 0; i < loop->nrings; i++)
		if (lull__ring_readable(loop->rings[i]->ring))
			break;
	if (i == loop->nrings && !lull__loop_stop_pending(loop)) {
		for (i = 0; i < loop->nrings; i++) {
			lull__park_sleeps(loop->rings[i]->ring);
			if (loop->rings[i]->bridge)
				lull__bridge_arm(loop->rings[i]->bridge);
		}
		return 1;
	}
	for (i = 0; i < loop->nrings; i++)
		lull__park_abandon(loop->rings[i]->ring);
	loop->stats.park_cancels++;
	return 0;
}

/* The park is over: every ring awake again, the safety net accounted. */
static void park_end(struct lull_loop *loop, bool timed_out)
{
	for (unsigned i = 0; i < loop->nrings; i++)
		lull__park_finish(loop->rings[i]->ring, timed_out);
	loop->stats.parks++;
	if (timed_out)
		loop->stats.safety_timeouts++;
}

/*
 * Park, and sleep until a producer, a completion, a timer, a signal or a
 * stop wakes the loop; with no safety net (the default), no timeout of
 * lull's own ends the sleep.
 */
static int park(struct lull_loop *loop)
{
	uint64_t timeout = loop->safety_ns ? loop->safety_ns : LULL_NS_FOREVER;
	unsigned i;
	int ret;

	/*
	 * After a stream, give the CPU away once first, as lull_ring_wait()
	 * does: a producer sharing it runs on instead of paying a wake-up.
	 */
	if (loop->stats.records - loop->records_at_park >=
	    LULL_PARK_YIELD_RECORDS) {
		sched_yield();
		for (i = 0; i < loop->nrings; i++)
			if (lull__ring_readable(loop->rings[i]->ring))
				return 0;
	}
	loop->records_at_park = loop->stats.records;
	ret = park_begin(loop);
	if (ret < 0)
		return ret;
	if (!ret) {
		/*
		 * A record came during the handshake.  Let I/O in before the
		 * next pass: a stream that keeps re-checks finding records
		 * would otherwise starve it.
		 */
		ret = loop->be->poll(loop, true);
		return ret < 0 ? ret : 0;
	}
	/* sleep: the backend's one call submits everything and waits */
	ret = loop->be->wait(loop, timeout, true);
	park_end(loop, loop->safety_ns && ret == 1);
	if (ret < 0)
		return ret;
	/*
	 * Woken: the records go to their handlers before the next pass reaps
	 * the completions, so that the record that woke the loop is not kept
	 * waiting behind the reap of its own wake-up.  The pass reaps and
	 * drains as always after this.
	 */
	ret = lull__loop_drain(loop);
	return ret < 0 ? ret : 0;
}

/*
 * Poll the rings for up to spin_ns; true as soon as one has a record or a
 * stop is requested.
 */
static bool spin_for_records(struct lull_loop *loop)
{
	uint64_t deadline = lull__deadline_ns(lull__now_ns(), loop->spin_ns);

	do {
		if (lull__loop_stop_pending(loop))
			return true;
		for (int k = 0; k < 64; k++) {
			for (unsigned i = 0; i < loop->nrings; i++)
				if (lull__ring_readable(loop->rings[i]->ring))
					return true;
			ck_pr_stall();
		}
	} while (lull__now_ns() < deadline);
	return false;
}

/*
 * coalesce_ns: sleep up to the window without announcing a park, so that
 * producers keep committing without wake-up calls; completions, timers,
 * signals and a stop still end it early.
 */
static int coalesce_wait(struct lull_loop *loop)
{
	int ret;

	loop->stats.coalesce_waits++;
	ret = loop->be->wait(loop, loop->coalesce_ns, false);
	return ret < 0 ? ret : 0;
}

/*
 * A stopping loop with no rings left: the user's SQEs are done once each
 * has been cancelled and its callback has run.  Those that callbacks
 * queue meanwhile are cancelled on the next pass; without an SQE for a
 * cancel now, it is asked for again then.  Returns true when the run is
 * over (*retp: its result).
 */
static bool stop_ops(struct lull_loop *loop, int *retp)
{
	int ret;

	if (!loop->ops_in_flight)
		return true;
	ret = lull__loop_ops_cancel(loop, NULL, true);
	if (ret == -ENOMEM) {
		*retp = ret;
		return true;
	}
	return false;
}

LULL_EXPORT int lull_loop_run(struct lull_loop *loop)
{
	const struct loop_backend *be;
	bool busy;
	int ret;

	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	be = loop->be;
	ret = be->start(loop);
	if (ret < 0)
		return ret;
	loop->running = true;
	loop->stops_at_run = loop->stops_seen;
	lull__loop_watch_arm(loop);
	for (;;) {
		if (lull__loop_stop_pending(loop))
			stop_rings(loop);
		if (loop->stopping && !loop->nrings && stop_ops(loop, &ret))
			break;
		loop->stats.iterations++;
		busy = be->reap(loop);
		ret = lull__loop_drain(loop);
		if (ret < 0)
			break;
		busy |= ret > 0;
		/* Do not starve I/O while rings keep us busy. */
		ret = be->poll(loop, busy);
		if (ret < 0)
			break;
		if (ret > 0)
			continue;
		/*
		 * A stopping loop with no rings left never parks on what a
		 * pass just ended: with its last op done it returns, and ops
		 * that callbacks queued meanwhile it cancels first (nothing
		 * else would end them, with no timer of lull's own).
		 */
		if (loop->stopping && !loop->nrings &&
		    (!loop->ops_in_flight || lull__loop_ops_to_cancel(loop)))
			continue;
		if (loop->spin_ns && spin_for_records(loop))
			continue;
		/*
		 * Records since the last rest (park or window): a stream may
		 * go on; wait, then take what came in one batch.
		 */
		if (loop->coalesce_ns &&
		    loop->stats.records != loop->records_at_rest &&
		    !loop->stopping && !lull__loop_stop_pending(loop)) {
			loop->records_at_rest = loop->stats.records;
			ret = coalesce_wait(loop);
		} else {
			loop->records_at_rest = loop->stats.records;
			ret = park(loop);
		}
		if (ret < 0)
			break;
	}
	loop->running = false;
	loop->stopping = false;
	/* Stops that came while stopping are spent with this run. */
	/* Pairs with the release RMW in lull_loop_stop(). */
	loop->stops_seen = atomic_load_explicit(&loop->stop_requests,
						memory_order_acquire);
	return ret < 0 ? ret : 0;
}
