/* SPDX-License-Identifier: MIT */
/*
 * park.c - the consumer's half of the park/wake protocol: announce,
 * barrier, re-check, and finish (with the opt-in safety net's accounting),
 * as steps that the blocking wait (ring_wait.c), the park on a caller's
 * io_uring (park_uring.c) and the loop compose; the producer's half is
 * inline in park.h, its wake-up in wake.c.  The step names match the
 * Promela model in test/model/park.pml.  Also the consumer's park
 * configuration and counters.
 */
#include <sched.h>
#include <stdlib.h>
#include <sys/eventfd.h>

#include "park.h"

/*
 * The safety net's length when the caller configured none: off, unless
 * LULL_SAFETY_NET_MS asks for one (a diagnostic: every park then ends
 * after that long, and counts a lost wake-up if a record was waiting).
 * Read once per process.
 */
static uint64_t safety_env_ns;
static pthread_once_t safety_env_once = PTHREAD_ONCE_INIT;

static void safety_env_read(void)
{
	const char *s = getenv("LULL_SAFETY_NET_MS");
	uint64_t ms = 0;

	if (!s)
		return;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (ms > (UINT64_MAX - 9) / 10) {
			ms = UINT64_MAX;
			break;
		}
		ms = ms * 10 + (uint64_t)(*s - '0');
	}
	if (*s && ms != UINT64_MAX) /* not a number: ignored */
		return;
	safety_env_ns = ms > UINT64_MAX / 1000000u ? UINT64_MAX
						     : ms * 1000000u;
}

uint64_t lull__safety_ns(uint64_t configured_ns)
{
	if (configured_ns)
		return configured_ns;
	pthread_once(&safety_env_once, safety_env_read);
	return safety_env_ns;
}

int lull__ring_eventfd(struct lull_ring *ring)
{
	long fd;

	if (ring->eventfd < 0) {
		/* Blocking: io_uring fails reads of non-blocking files. */
		fd = LULL_SYSCALL(eventfd(0, EFD_CLOEXEC));
		if (fd < 0)
			return (int)fd;
		ring->eventfd = (int)fd;
	}
	if (lull__wake_fd_of(ring->region) != ring->eventfd)
		return lull__wake_fd_set(ring->region, ring->eventfd);
	return 0;
}

enum traffic { TRAFFIC_NONE, TRAFFIC_SPARSE, TRAFFIC_DENSE };

/*
 * The records read since the last park: none (a park again after a stale
 * wake-up, or after a claim not yet committed: no news), sparse (at most
 * LULL_PARK_FENCE_RECORDS), or dense.
 */
static enum traffic traffic_since_park(struct lull_ring *ring)
{
	uint64_t records = ring->records_since_park;

	ring->records_since_park = 0;
	if (!records)
		return TRAFFIC_NONE;
	return records <= LULL_PARK_FENCE_RECORDS ? TRAFFIC_SPARSE
						  : TRAFFIC_DENSE;
}

bool lull__park_announce(struct lull_ring *ring, uint32_t how)
{
	enum traffic traffic;

	/* Relaxed: ordered before the re-check by the park barrier. */
	atomic_store_explicit(&ring->region->park, how, memory_order_relaxed);
	if (!(ring->flags & LULL_REGION_ASYM_BARRIER))
		return false; /* producers always fence */
	traffic = traffic_since_park(ring);
	if (traffic == TRAFFIC_DENSE) {
		lull__park_fence_off(ring);
		return true;
	}
	if (ring->park_fenced)
		return false; /* producers fence: a fence pairs */
	if (traffic == TRAFFIC_NONE)
		return true; /* no news: membarrier(2), as before */
	/*
	 * Ask for fences.  Relaxed: pairs with the producers' load in
	 * lull__notify_barrier(); the membarrier(2) of this park makes the
	 * store visible to every producer, and until it has, this park
	 * cannot rely on it (see the comment above lull__wake() in park.h).
	 */
	atomic_store_explicit(&ring->region->park_fence, 1,
			      memory_order_relaxed);
	ring->park_fence_asked = true;
	return true;
}

void lull__park_fence_settle(struct lull_ring *ring)
{
	if (ring->park_fence_asked)
		ring->park_fenced = true;
}

void lull__park_abandon(struct lull_ring *ring)
{
	lull__park_end(ring);
	lull__count(&ring->region->park_cancels);
}

void lull__park_sleeps(struct lull_ring *ring)
{
	lull__count(&ring->region->parks);
}

int lull__park_begin(struct lull_ring *ring, uint32_t how)
{
	bool heavy;
	int ret;

	heavy = lull__park_announce(ring, how);
	/*
	 * barrier: pairs with the producers' barrier in lull__notify().  Our
	 * store above and a producer's commit cannot both be missed: see the
	 * comment above lull__wake() in park.h.
	 */
	ret = lull__barrier_heavy(heavy);
	if (ret < 0) {
		lull__park_end(ring);
		return ret;
	}
	lull__park_fence_settle(ring);
	/* recheck */
	if (lull__ring_readable(ring)) {
		lull__park_abandon(ring);
		return 0;
	}
	lull__park_sleeps(ring);
	return 1;
}

bool lull__park_end(struct lull_ring *ring)
{
	_Atomic(uint32_t) *park = &ring->region->park;

	/*
	 * Relaxed, both: we only need to know whether a producer's CAS got
	 * here first; our reads of the ring after this are ordered by their
	 * own acquires.  A producer that woke us left the word AWAKE, and
	 * only we change it from AWAKE, so then the load says it all and the
	 * exchange, a locked instruction, is skipped.  The load cannot see
	 * AWAKE while our own announce is still unwritten: it would read
	 * that store, so skipping leaves nothing of ours undrained.
	 */
	if (atomic_load_explicit(park, memory_order_relaxed) ==
	    LULL_PARK_AWAKE)
		return false;
	return atomic_exchange_explicit(park, LULL_PARK_AWAKE,
					memory_order_relaxed) !=
	       LULL_PARK_AWAKE;
}

bool lull__park_finish(struct lull_ring *ring, bool timed_out)
{
	struct lull_region *region = ring->region;
	uint64_t deadline;
	bool readable, cleared_self;

	if (!timed_out)
		return lull__park_end(ring);
	/*
	 * unpark after the (opt-in) safety net fired.  Readability is read
	 * before the exchange: a record committed after it was announced to
	 * an awake consumer, not lost.  A producer may also be between its
	 * commit and its wake_claim right now; give it a moment to claim the
	 * wake-up before calling this a lost one (the Promela model shows
	 * both windows).  This grace only keeps the diagnostic count honest:
	 * without a safety net no park ends on a timer of lull's own, and
	 * such a producer's late claim finds the consumer awake (its CAS
	 * fails) or parked again (a spare wake-up), never a record left
	 * behind, since the consumer re-checks after every park.
	 */
	readable = lull__ring_readable(ring);
	if (readable) {
		deadline = lull__now_ns() + LULL_PARK_CLAIM_GRACE_NS;
		while (atomic_load_explicit(&region->park,
					    memory_order_relaxed) !=
			       LULL_PARK_AWAKE &&
		       lull__now_ns() < deadline)
			sched_yield();
	}
	cleared_self = lull__park_end(ring);
	/*
	 * account.  A record waiting while no producer took the wake-up is a
	 * lost wake-up; anything else is an idle consumer looking around.
	 */
	if (cleared_self && readable)
		lull__count(&region->safety_timeouts);
	else if (cleared_self)
		lull__count(&region->idle_timeouts);
	return cleared_self;
}

LULL_EXPORT int lull_ring_park_config(struct lull_ring *ring,
				      const struct lull_park_config *cfg)
{
	if (!ring)
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	ring->spin_ns = cfg ? cfg->spin_ns : LULL_PARK_SPIN_DEFAULT_NS;
	ring->streaming = false;
	ring->slip_ns = 0;
	ring->slip_armed = false;
	ring->safety_ns = lull__safety_ns(cfg ? cfg->safety_timeout_ns : 0);
	return 0;
}

LULL_EXPORT int lull_ring_stats(const struct lull_ring *ring,
				struct lull_ring_stats *st)
{
	const struct lull_region *region;

	if (!ring || !st)
		return -EINVAL;
	region = ring->region;
	st->parks = atomic_load_explicit(&region->parks, memory_order_relaxed);
	st->park_cancels = atomic_load_explicit(&region->park_cancels,
						memory_order_relaxed);
	st->wakes = atomic_load_explicit(&region->wakes, memory_order_relaxed);
	st->safety_timeouts = atomic_load_explicit(&region->safety_timeouts,
						   memory_order_relaxed);
	st->idle_timeouts = atomic_load_explicit(&region->idle_timeouts,
						 memory_order_relaxed);
	st->room_wakes = atomic_load_explicit(&region->space_wakes,
					      memory_order_relaxed);
	st->claim_waits = atomic_load_explicit(&region->claim_waits,
					       memory_order_relaxed);
	st->corruptions = atomic_load_explicit(&ring->corruptions,
					       memory_order_relaxed);
	st->producer_deaths = atomic_load_explicit(&region->deaths,
						   memory_order_relaxed);
	return 0;
}
