/* SPDX-License-Identifier: MIT */
/*
 * ring_wait.c - the blocking backend: lull_ring_wait() parks the calling
 * consumer thread in a futex wait on the park word, after an optional
 * spin (fixed, or adaptive while records stream in).
 */
#include <ck_pr.h>
#include <sched.h>

#include "park.h"

/*
 * Spin on the ring for up to ring->spin_ns (adaptive: see
 * LULL_PARK_SPIN_ADAPTIVE), and never past @wait_deadline, the caller's;
 * true if readable.
 */
static bool spin_for_record(struct lull_ring *ring, uint64_t wait_deadline)
{
	uint64_t window = ring->spin_ns, deadline;
	unsigned pauses = 1;

	if (window == LULL_PARK_SPIN_ADAPTIVE) {
		if (!ring->streaming)
			return false;
		window = LULL_PARK_ADAPTIVE_SPIN_NS;
	}
	if (!window)
		return false;
	deadline = lull__deadline_ns(lull__now_ns(), window);
	if (deadline > wait_deadline)
		deadline = wait_deadline;
	for (;;) {
		/* Read the clock only every 8 polls: it costs more than one. */
		for (int i = 0; i < 8; i++) {
			if (lull__ring_readable(ring))
				return true;
			/*
			 * Back off, up to 32 pauses a poll: every poll of a
			 * line the producer is writing costs it a cache miss,
			 * and letting it run ahead makes the next batch longer.
			 */
			for (unsigned k = 0; k < pauses; k++)
				ck_pr_stall();
			if (pauses < 32)
				pauses <<= 1;
		}
		if (lull__now_ns() >= deadline) {
			ring->streaming = false;
			return false;
		}
	}
}

/*
 * A shared region: watch the producers that came, recover those that
 * died, so that neither is taken for a record below.
 */
static void shared_sync(struct lull_ring *ring, bool reap)
{
	if (ring->flags & LULL_REGION_SHARED)
		lull__watch_sync(ring, reap);
}

LULL_EXPORT int lull_ring_wait(struct lull_ring *ring, int64_t timeout_ns)
{
	uint64_t deadline = UINT64_MAX, slice, now;
	bool timed_out, safety_slice;
	uint32_t how;
	long ret;

	if (!ring)
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	if (ring->uring_pending || ring->loop)
		return -EBUSY;
	if (lull__ring_done(ring))
		return -EPIPE;
	shared_sync(ring, false);
	/* Padding is no reason to return: skip it here, freeing its room. */
	if (lull__ring_skip_padding(ring) || lull__ring_readable(ring))
		return 0;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	if (timeout_ns > 0)
		deadline = lull__deadline_ns(lull__now_ns(),
					     (uint64_t)timeout_ns);
	if (spin_for_record(ring, deadline))
		return 0;
	/*
	 * After a stream of records, give the CPU away once before parking:
	 * a producer that shares it with us (more threads than CPUs) then
	 * runs on at once and fills the ring, where a park would have made
	 * it pay a wake-up for its next record and us a membarrier(2) and
	 * two context switches.  Not after a lone record: the yield costs
	 * a system call, and the scheduler counts the CPU it used against
	 * our next wake-up's chance to run at once.  An idle consumer still
	 * parks and never wakes on its own.
	 */
	if (ring->records_since_wait >= LULL_PARK_YIELD_RECORDS) {
		ring->records_since_wait = 0;
		sched_yield();
		if (lull__ring_readable(ring))
			return 0;
	}
	ring->records_since_wait = 0;
	how = ring->flags & LULL_REGION_PRIVATE
		      ? LULL_PARK_FUTEX_PRIVATE
		      : LULL_PARK_FUTEX;
	for (;;) {
		/*
		 * The sleep lasts until a producer wakes us, unless the
		 * caller's deadline or the opt-in safety net ends it sooner:
		 * with neither, no timer at all.
		 */
		slice = ring->safety_ns ? ring->safety_ns : LULL_NS_FOREVER;
		safety_slice = ring->safety_ns != 0;
		if (deadline != UINT64_MAX) {
			now = lull__now_ns();
			if (now >= deadline)
				return -ETIMEDOUT;
			if (deadline - now <= slice) {
				slice = deadline - now;
				safety_slice = false;
			}
		}
		ret = lull__park_begin(ring, how);
		if (ret < 0)
			return (int)ret;
		if (!ret) {
			/* Work came while we announced: a record (a stream),
			 * or only padding to skip (then park again). */
			shared_sync(ring, false);
			if (!lull__ring_skip_padding(ring) &&
			    !lull__ring_readable(ring))
				continue;
			ring->streaming = true;
			return 0;
		}
		/* sleep: returns at once if a producer already reset the word */
		if (ring->flags & LULL_REGION_SHARED)
			ret = lull__watch_sleep(ring, how, slice);
		else if (how == LULL_PARK_FUTEX_PRIVATE)
			ret = lull__futex_wait_private(&ring->region->park,
						       how, slice);
		else
			ret = lull__futex_wait(&ring->region->park, how,
					       slice);
		timed_out = ret == -ETIMEDOUT;
		lull__park_finish(ring, timed_out && safety_slice);
		shared_sync(ring, false);
		if (lull__ring_skip_padding(ring) ||
		    lull__ring_readable(ring))
			return 0;
		/* Woken with nothing to read (a stale wake, EINTR): again. */
	}
}
