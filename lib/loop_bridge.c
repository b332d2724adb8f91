/* SPDX-License-Identifier: MIT */
/*
 * loop_bridge.c - a shared ring on a loop that sleeps on its eventfd
 * (uring-eventfd, epoll): the bridge from the ring's futex to that
 * eventfd.
 *
 * A producer in another process cannot write the loop's eventfd: a
 * descriptor is per process.  It can wake a futex in the region.  So for
 * a shared ring such a loop parks as the futex backends do (park =
 * LULL_PARK_FUTEX, so that every producer's wake is a FUTEX_WAKE of the
 * park word), and a thread of lull's, the bridge, sleeps on that word
 * and, once woken, writes the loop's eventfd.  The bridge sleeps only
 * while the loop does; between parks it waits on a word of its own,
 * which the loop bumps each time it goes to sleep with the ring parked
 * (one FUTEX_WAKE per park).  No timer, and no wake-up while idle: a
 * parked, idle loop and its bridge both sleep in the kernel.
 *
 * It costs a hop: a producer's wake reaches the loop through the bridge
 * thread's wake-up and its eventfd write.  The futex backends, which the
 * loop picks where the kernel has io_uring futex waits, need no bridge.
 */
#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include "loop_internal.h"

#define BRIDGE_STACK (64u * 1024)

/* bridge->armed: a park to watch, or the end. */
#define BRIDGE_IDLE 0u
#define BRIDGE_ARMED 1u
#define BRIDGE_STOP 2u

struct loop_bridge {
	pthread_t thread;
	struct lull_region *region;
	int kick_fd;
	_Atomic uint32_t armed;
};

static void *bridge_main(void *arg)
{
	struct loop_bridge *b = arg;
	_Atomic uint32_t *park = &b->region->park;
	uint32_t armed;

	for (;;) {
		/*
		 * Acquire: pairs with the release exchange in
		 * lull__bridge_arm(): the loop's park announce is seen.
		 */
		while ((armed = atomic_exchange_explicit(
				&b->armed, BRIDGE_IDLE,
				memory_order_acquire)) == BRIDGE_IDLE)
			lull__futex_wait_private(&b->armed, BRIDGE_IDLE,
						 LULL_NS_FOREVER);
		if (armed == BRIDGE_STOP)
			return NULL;
		/*
		 * Sleep while the loop is parked.  A producer's wake claim
		 * moves the word away from FUTEX before its FUTEX_WAKE, and
		 * so does the loop's own end of the park (a timer, an I/O):
		 * either way the wait returns, or does not start.  Relaxed:
		 * the futex compares the word itself; the eventfd write
		 * below orders nothing the loop reads but its own ring.
		 */
		while (atomic_load_explicit(park, memory_order_relaxed) ==
		       LULL_PARK_FUTEX) {
			lull__futex_wait(park, LULL_PARK_FUTEX,
					 LULL_NS_FOREVER);
			/* Relaxed: a stop that came meanwhile ends it. */
			if (atomic_load_explicit(&b->armed,
						 memory_order_relaxed) ==
			    BRIDGE_STOP)
				return NULL;
		}
		/*
		 * The loop may be awake already (its park ended some other
		 * way): then this is one spurious pass, bounded by its
		 * parks, since each park arms once.
		 */
		LULL_SYSCALL(syscall(SYS_write, b->kick_fd, &(uint64_t){ 1 },
				     sizeof(uint64_t)));
	}
}

int lull__bridge_start(struct loop_bridge **bp, struct lull_region *region,
		       int kick_fd)
{
	struct loop_bridge *b;
	pthread_attr_t attr;
	sigset_t all, old;
	int ret;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->region = region;
	b->kick_fd = kick_fd;
	atomic_init(&b->armed, BRIDGE_IDLE);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, BRIDGE_STACK);
	/* The process's signals are the loop's (its signalfd), not ours. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&b->thread, &attr, bridge_main, b);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret < 0) {
		free(b);
		return ret;
	}
	pthread_setname_np(b->thread, "lull-bridge");
	*bp = b;
	return 0;
}

void lull__bridge_arm(struct loop_bridge *b)
{
	/*
	 * Release: pairs with the bridge's acquire exchange; it then reads
	 * the park word we announced.
	 */
	if (atomic_exchange_explicit(&b->armed, BRIDGE_ARMED,
				     memory_order_release) == BRIDGE_IDLE)
		lull__futex_wake_op(&b->armed, FUTEX_WAKE_PRIVATE, 1);
}

void lull__bridge_stop(struct loop_bridge *b)
{
	if (!b)
		return;
	/*
	 * The caller ended the park first (the word is AWAKE), so a bridge
	 * about to sleep on it does not; one asleep there is woken here.
	 * Waking every waiter of the park word is allowed: a futex wait
	 * may always return early, and each waiter checks again.
	 */
	/*
	 * Relaxed: the futex wakes below and pthread_join() order it; the
	 * bridge only has to see it once it wakes.
	 */
	atomic_store_explicit(&b->armed, BRIDGE_STOP, memory_order_relaxed);
	lull__futex_wake_op(&b->armed, FUTEX_WAKE_PRIVATE, 1);
	lull__futex_wake(&b->region->park, INT_MAX);
	pthread_join(b->thread, NULL);
	free(b);
}
