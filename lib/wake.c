/* SPDX-License-Identifier: MIT */
/*
 * wake.c - the producer's wake-up, out of line: the wake claim and the
 * wake of the protocol in park.h (futex wake or eventfd write), the
 * eventfd a consumer publishes for it, the heavy side of the barrier
 * pairs, and the wake-up of producers waiting for room.  Shutdown uses
 * the same wake-up.  A leaf: it calls nothing else of lull's.
 */
#include <linux/membarrier.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>

#include "park.h"

void lull__space_wake(struct lull_region *region)
{
	/*
	 * Bump the word first: a producer that read it before registering
	 * and has not slept yet then finds it changed and does not sleep.
	 */
	/*
	 * Release: pairs with the waiting producer's acquire load of the
	 * word in lull_producer_wait(), which then sees the head we stored.
	 */
	atomic_fetch_add_explicit(&region->space_seq, 1, memory_order_release);
	/* An RMW: the consumer and any shutdown may both get here. */
	atomic_fetch_add_explicit(&region->space_wakes, 1,
				  memory_order_relaxed);
	lull__futex_wake(&region->space_seq, INT_MAX);
}

/*
 * Wake-ups in flight in this process that write an eventfd: between
 * reading wake_fd and writing to it.  A consumer withdrawing its eventfd
 * waits for none to be left before closing it (lull__wake_fd_set()).
 * Only producers of the consumer's own process write the eventfd (see
 * lull__wake_region()), so a count in the process sees all of them; one
 * in the region, as layout version 3 first had (wakers), could be held
 * up by any process sharing the region, and the consumer with it, for
 * good.
 */
static _Atomic uint32_t eventfd_writers;

/*
 * The eventfds this process published, by region: what a wake-up writes.
 * Never the region's wake_fd, which anyone sharing the region may point at
 * any descriptor of this process (a socket, a file, a pipe whose reader is
 * gone): a producer of another process that did so would make this one
 * write 8 bytes there, or die of SIGPIPE.  A region with no entry here has
 * no consumer parked on an eventfd in this process, and its eventfd wakes
 * are skipped, as they always were for another process's consumer.
 *
 * An open-addressing table, probed linearly from the region's hash.
 * Publishers (consumers, loops) take the lock; wakers read without it:
 * a slot's fd is stored before its region (release), and a withdrawn
 * slot keeps a tombstone so that the probes past it still find theirs.
 */
#define WAKE_FD_SLOTS 4096u
#define WAKE_FD_TOMBSTONE ((struct lull_region *)1)

struct wake_fd_slot {
	_Atomic(struct lull_region *) region;
	_Atomic int fd;
};

static struct wake_fd_slot wake_fds[WAKE_FD_SLOTS];
static pthread_mutex_t wake_fds_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t wake_fds_once = PTHREAD_ONCE_INIT;

/*
 * A child of fork() publishes nothing: the eventfds are its parent's
 * consumers', and the child may close and reuse their numbers.  Its
 * producers skip eventfd wakes, as another process's always did.  The
 * child runs alone here, so plain relaxed stores do, and the lock is made
 * anew in case a thread of the parent held it at the fork.
 */
static void wake_fds_forget(void)
{
	for (unsigned i = 0; i < WAKE_FD_SLOTS; i++) {
		atomic_store_explicit(&wake_fds[i].fd, -1,
				      memory_order_relaxed);
		atomic_store_explicit(&wake_fds[i].region, NULL,
				      memory_order_relaxed);
	}
	pthread_mutex_init(&wake_fds_lock, NULL);
}

/* Whether a child of fork() forgets the table: else nothing is entered. */
static bool wake_fds_fork_safe;

static void wake_fds_setup(void)
{
	wake_fds_fork_safe = pthread_atfork(NULL, NULL, wake_fds_forget) == 0;
}

static unsigned wake_fd_hash(const struct lull_region *region)
{
	uint64_t h = (uint64_t)(uintptr_t)region * 0x9e3779b97f4a7c15ull;

	return (unsigned)(h >> 40) & (WAKE_FD_SLOTS - 1);
}

/* @region's slot, or NULL; with @free_slot, the first reusable one too. */
static struct wake_fd_slot *wake_fd_find(const struct lull_region *region,
					 struct wake_fd_slot **free_slot)
{
	unsigned at = wake_fd_hash(region);
	struct lull_region *r;

	for (unsigned i = 0; i < WAKE_FD_SLOTS; i++) {
		struct wake_fd_slot *slot = &wake_fds[(at + i) &
						      (WAKE_FD_SLOTS - 1)];

		/* Pairs with the release store of a slot's region. */
		r = atomic_load_explicit(&slot->region, memory_order_acquire);
		if (r == region)
			return slot;
		if (free_slot && !*free_slot &&
		    (r == NULL || r == WAKE_FD_TOMBSTONE))
			*free_slot = slot;
		if (r == NULL)
			break; /* the end of this probe */
	}
	return NULL;
}

/* The wake claim: exactly one waker moves the park word from @seen. */
static bool wake_claim(struct lull_region *region, uint32_t seen)
{
	/*
	 * Relaxed: the CAS only decides who wakes; the record itself is
	 * ordered by its own release store, and the wake-up system call is
	 * a full barrier anyway.
	 */
	return atomic_compare_exchange_strong_explicit(
		&region->park, &seen, LULL_PARK_AWAKE, memory_order_relaxed,
		memory_order_relaxed);
}

/* A futex park's wake-up. */
static void wake_futex(struct lull_region *region, uint32_t seen)
{
	/*
	 * Every waiter, though there is normally one: a futex wait that a
	 * detached loop left in its io_uring (its cancel still on the way)
	 * sits first in the queue, and a wake of one would go to it instead
	 * of the consumer now parked.
	 */
	lull__futex_wake_op(&region->park,
			    seen == LULL_PARK_FUTEX ? FUTEX_WAKE
						    : FUTEX_WAKE_PRIVATE,
			    INT_MAX);
}

static void eventfd_write(int fd)
{
	/* syscall(), not write(): no cancellation point here. */
	LULL_SYSCALL(syscall(SYS_write, fd, &(uint64_t){ 1 },
			     sizeof(uint64_t)));
}

/*
 * Out of line: the consumer looked parked.  Several producers (and a
 * shutdown) may get here for the same park; the CAS lets exactly one of
 * them wake it.
 */
void lull__wake_region(struct lull_region *region, uint32_t seen)
{
	const bool futex =
		seen == LULL_PARK_FUTEX || seen == LULL_PARK_FUTEX_PRIVATE;
	struct wake_fd_slot *slot = futex ? NULL : wake_fd_find(region, NULL);
	int fd;

	/*
	 * An eventfd is a descriptor of the consumer's process: a producer in
	 * another process cannot write it, so it must not claim the wake-up
	 * either.  Such a consumer is woken only by its own process's
	 * producers, or by the opt-in safety net (which counts a lost
	 * wake-up): a region that other processes produce into must be
	 * parked on through its futex (the model's eventfd-other-process
	 * check shows the hang).
	 */
	if (seen == LULL_PARK_EVENTFD && !slot)
		return;
	/* wake_claim */
	if (!wake_claim(region, seen))
		return;
	/* wake */
	if (futex) {
		wake_futex(region, seen);
	} else {
		/*
		 * seq_cst, with the consumer's seq_cst store of the slot's fd
		 * and load of eventfd_writers in lull__wake_fd_set(): either
		 * the consumer sees us here and waits before closing the
		 * eventfd, or we see its -1 and write nothing.  The slot found
		 * above is read again only now: should it have been withdrawn
		 * and taken by another region since, its fd is that region's
		 * published eventfd, open until we are done, and the write is
		 * one spare wake-up there.
		 */
		atomic_fetch_add_explicit(&eventfd_writers, 1,
					  memory_order_seq_cst);
		fd = slot ? atomic_load_explicit(&slot->fd,
						 memory_order_seq_cst)
			  : -1;
		if (fd >= 0)
			eventfd_write(fd);
		/* Pairs with the seq_cst load in lull__wake_fd_set(): the
		 * write is over before the close. */
		atomic_fetch_sub_explicit(&eventfd_writers, 1,
					  memory_order_release);
	}
	atomic_fetch_add_explicit(&region->wakes, 1, memory_order_relaxed);
}

void lull__wake_own(struct lull_ring *ring, uint32_t seen)
{
	struct lull_region *region = ring->region;

	if (seen == LULL_PARK_EVENTFD && ring->eventfd < 0)
		return; /* not a park of ours: nothing to claim */
	if (!wake_claim(region, seen))
		return;
	if (seen == LULL_PARK_FUTEX || seen == LULL_PARK_FUTEX_PRIVATE)
		wake_futex(region, seen);
	else if (seen == LULL_PARK_EVENTFD)
		/* Ours, on our own thread: no close can race with it. */
		eventfd_write(ring->eventfd);
	atomic_fetch_add_explicit(&region->wakes, 1, memory_order_relaxed);
}

void lull__wake(struct lull_producer *prod, uint32_t seen)
{
	lull__wake_region(prod->region, seen);
}

int lull__wake_fd_set(struct lull_region *region, int fd)
{
	struct wake_fd_slot *slot, *free_slot = NULL;

	pthread_once(&wake_fds_once, wake_fds_setup);
	pthread_mutex_lock(&wake_fds_lock);
	slot = wake_fd_find(region, &free_slot);
	if (!slot && fd >= 0) {
		if (!free_slot || !wake_fds_fork_safe) {
			/* The table is full (or pthread_atfork(3) had no
			 * memory): out of memory, of a kind. */
			pthread_mutex_unlock(&wake_fds_lock);
			return -ENOMEM;
		}
		slot = free_slot;
		/* Relaxed: published by the release store of region. */
		atomic_store_explicit(&slot->fd, fd, memory_order_relaxed);
		/* Pairs with the acquire load in wake_fd_find(). */
		atomic_store_explicit(&slot->region, region,
				      memory_order_release);
	} else if (slot) {
		/* Pairs with the seq_cst RMW and load in lull__wake_region(). */
		atomic_store_explicit(&slot->fd, fd, memory_order_seq_cst);
		if (fd < 0)
			/* Relaxed: wakers that still match read fd -1. */
			atomic_store_explicit(&slot->region, WAKE_FD_TOMBSTONE,
					      memory_order_relaxed);
	}
	pthread_mutex_unlock(&wake_fds_lock);
	/* For the record only: nothing of lull's reads these back. */
	atomic_store_explicit(&region->wake_pid, (int32_t)getpid(),
			      memory_order_relaxed);
	atomic_store_explicit(&region->wake_fd, fd, memory_order_relaxed);
	if (fd >= 0)
		return 0;
	/*
	 * Withdrawn: a producer that read the old descriptor may still be
	 * writing to it.  Wake-ups are one system call long, so waiting for
	 * them is short; after this the caller may close the eventfd.
	 */
	while (atomic_load_explicit(&eventfd_writers, memory_order_seq_cst))
		sched_yield();
	return 0;
}

int lull__wake_fd_of(const struct lull_region *region)
{
	struct wake_fd_slot *slot = wake_fd_find(region, NULL);

	/* Relaxed: the publisher's own question, under its own updates. */
	return slot ? atomic_load_explicit(&slot->fd, memory_order_relaxed)
		    : -1;
}

int lull__barrier_heavy(bool asym)
{
	/*
	 * Symmetric: the other side fences too, so a fence here completes
	 * the pair (C11 fence-to-fence ordering).
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (!asym)
		return 0;
	/*
	 * Asymmetric: the other side has only a compiler barrier, so a fence
	 * here orders nothing of theirs; only membarrier(2), which runs a
	 * full barrier on every CPU running one of our threads, restores the
	 * handshake.  The mode was fixed when the region was created, after
	 * the registration succeeded, so this cannot fail in a sane process;
	 * if it ever does (a seccomp filter installed later), no barrier on
	 * this side would be correct, and the caller must not sleep: the
	 * error goes to whoever asked to park.
	 */
	return (int)LULL_SYSCALL(syscall(SYS_membarrier,
					 MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
					 0));
}
