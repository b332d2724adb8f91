/* SPDX-License-Identifier: MIT */
/*
 * park.c - the park/wake handshake: the consumer's announce, barrier and
 * re-check, the producers' wake-up, and the blocking (futex) backend.
 * The step names match the Promela model in test/model/park.pml.
 *
 * Futexes here are shared (no FUTEX_PRIVATE_FLAG): a private futex wait
 * armed through io_uring while the process is single-threaded is lost when
 * the first pthread_create() sets up the per-process futex hash (Linux
 * 6.16+); shared futexes always hash globally.  It also lets a region in
 * shared memory be parked on from another process later.
 */
#include <ck_pr.h>
#include <limits.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t lull__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t lull__deadline_ns(uint64_t now, uint64_t timeout_ns)
{
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

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

/*
 * Wait while the word holds @expected, at most @timeout_ns; LULL_NS_FOREVER
 * or more waits without a timeout (so no conversion can overflow).
 */
static long futex_wait(_Atomic uint32_t *word, uint32_t expected,
		       uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns < LULL_NS_FOREVER) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long)(timeout_ns % 1000000000u);
		tsp = &ts;
	}
	return LULL_SYSCALL(syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp,
				    NULL, 0));
}

static void futex_wake_one(_Atomic uint32_t *word)
{
	LULL_SYSCALL(syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0));
}

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
	LULL_SYSCALL(syscall(SYS_futex, &region->space_seq, FUTEX_WAKE,
			     INT_MAX, NULL, NULL, 0));
}

/*
 * Out of line: the consumer looked parked.  Several producers (and a
 * shutdown) may get here for the same park; the CAS lets exactly one of
 * them wake it.
 */
void lull__wake_region(struct lull_region *region, uint32_t seen,
		       int32_t pid)
{
	int fd;

	/*
	 * An eventfd is a descriptor of the consumer's process: a producer in
	 * another process cannot write it, so it must not claim the wake-up
	 * either.  The consumer's safety net then finds the record and counts
	 * it as a lost wake-up, which is what it is.
	 */
	if (seen == LULL_PARK_EVENTFD &&
	    atomic_load_explicit(&region->wake_pid, memory_order_relaxed) !=
		    pid)
		return;
	/*
	 * wake_claim.  Relaxed: the CAS only decides who wakes; the record
	 * itself is ordered by its own release store, and the wake-up system
	 * call is a full barrier anyway.
	 */
	if (!atomic_compare_exchange_strong_explicit(
		    &region->park, &seen, LULL_PARK_AWAKE,
		    memory_order_relaxed, memory_order_relaxed))
		return;
	/* wake */
	if (seen == LULL_PARK_FUTEX) {
		futex_wake_one(&region->park);
	} else {
		/*
		 * seq_cst, with the consumer's seq_cst store of wake_fd and
		 * load of wakers in lull__wake_fd_set(): either the consumer
		 * sees us here and waits before closing the eventfd, or we see
		 * its -1 and write nothing.
		 */
		atomic_fetch_add_explicit(&region->wakers, 1,
					  memory_order_seq_cst);
		fd = atomic_load_explicit(&region->wake_fd,
					  memory_order_seq_cst);
		/* syscall(), not write(): no cancellation point here. */
		if (fd >= 0)
			LULL_SYSCALL(syscall(SYS_write, fd, &(uint64_t){ 1 },
					     sizeof(uint64_t)));
		/* Pairs with the seq_cst load of wakers in
		 * lull__wake_fd_set(): the write is over before the close. */
		atomic_fetch_sub_explicit(&region->wakers, 1,
					  memory_order_release);
	}
	atomic_fetch_add_explicit(&region->wakes, 1, memory_order_relaxed);
}

void lull__wake(struct lull_producer *prod, uint32_t seen)
{
	lull__wake_region(prod->region, seen, prod->pid);
}

void lull__wake_fd_set(struct lull_region *region, int fd)
{
	atomic_store_explicit(&region->wake_pid, (int32_t)getpid(),
			      memory_order_relaxed);
	/* Pairs with the seq_cst RMW and load in lull__wake(). */
	atomic_store_explicit(&region->wake_fd, fd, memory_order_seq_cst);
	if (fd >= 0)
		return;
	/*
	 * Withdrawn: a producer that read the old descriptor may still be
	 * writing to it.  Wake-ups are one system call long, so waiting for
	 * them is short; after this the caller may close the eventfd.
	 */
	while (atomic_load_explicit(&region->wakers, memory_order_seq_cst))
		sched_yield();
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
	if (atomic_load_explicit(&ring->region->wake_fd,
				 memory_order_relaxed) != ring->eventfd)
		lull__wake_fd_set(ring->region, ring->eventfd);
	return 0;
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

int lull__park_barrier(struct lull_ring *ring)
{
	return lull__barrier_heavy(ring->region->flags &
				   LULL_REGION_ASYM_BARRIER);
}

void lull__park_announce(struct lull_ring *ring, uint32_t how)
{
	/* Relaxed: ordered before the re-check by the park barrier. */
	atomic_store_explicit(&ring->region->park, how, memory_order_relaxed);
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
	int ret;

	lull__park_announce(ring, how);
	/*
	 * barrier: pairs with the producers' barrier in lull__notify().  Our
	 * store above and a producer's commit cannot both be missed: see the
	 * comment there.
	 */
	ret = lull__park_barrier(ring);
	if (ret < 0) {
		lull__park_end(ring);
		return ret;
	}
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
	/*
	 * Relaxed: we only need to know whether a producer's CAS got here
	 * first; our reads of the ring after this are ordered by their own
	 * acquires.
	 */
	return atomic_exchange_explicit(&ring->region->park, LULL_PARK_AWAKE,
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
	return 0;
}

bool lull__spin_for_record(struct lull_ring *ring)
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

LULL_EXPORT int lull_ring_wait(struct lull_ring *ring, int64_t timeout_ns)
{
	uint64_t deadline = UINT64_MAX, slice, now;
	bool timed_out, safety_slice;
	long ret;

	if (!ring)
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	if (ring->uring_pending || ring->loop)
		return -EBUSY;
	if (lull__ring_done(ring))
		return -EPIPE;
	if (lull__ring_readable(ring))
		return 0;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	if (timeout_ns > 0)
		deadline = lull__deadline_ns(lull__now_ns(),
					     (uint64_t)timeout_ns);
	if (lull__spin_for_record(ring))
		return 0;
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
		ret = lull__park_begin(ring, LULL_PARK_FUTEX);
		if (ret < 0)
			return (int)ret;
		if (!ret) {
			/* A record came while we announced: a stream. */
			ring->streaming = true;
			return 0;
		}
		/* sleep: returns at once if a producer already reset the word */
		ret = futex_wait(&ring->region->park, LULL_PARK_FUTEX, slice);
		timed_out = ret == -ETIMEDOUT;
		lull__park_finish(ring, timed_out && safety_slice);
		if (lull__ring_readable(ring))
			return 0;
		/* Woken with nothing to read (a stale wake, EINTR): again. */
	}
}

/*
 * Whether a record of @size bytes (header included, padded) fits now at
 * the producer's tail, padding for the wrap included.  Refreshes the head
 * the producer knows of.
 */
static bool producer_has_room(struct lull_producer *prod, uint64_t size)
{
	struct lull_region *region = prod->region;
	uint64_t tail, pad;

	/* Relaxed: SPSC, our own store; MPSC, a hint the claim re-checks. */
	tail = atomic_load_explicit(&region->tail, memory_order_relaxed) &
	       ~(uint64_t)LULL_TAIL_FLAGS;
	pad = lull__wrap_padding(tail, prod->mask, size);
	/* Pairs with the consumer's release store of head, as in a write. */
	prod->head_cache =
		atomic_load_explicit(&region->head, memory_order_acquire);
	return tail + pad + size - prod->head_cache <= prod->mask + 1;
}

static bool producer_wait_closed(const struct lull_producer *prod)
{
	return lull__state(prod->region) & LULL_STATE_CLOSED;
}

LULL_EXPORT int lull_producer_wait(struct lull_producer *prod, size_t len,
				   int64_t timeout_ns)
{
	struct lull_region *region;
	uint64_t size, deadline = UINT64_MAX, slice, now;
	uint32_t seq;
	int ret;

	if (!prod)
		return -EINVAL;
	if (len > prod->max_record - LULL_RECORD_HEADER_SIZE)
		return -EMSGSIZE;
	if (prod->claimed)
		return -EBUSY;
	region = prod->region;
	size = lull__align8(LULL_RECORD_HEADER_SIZE + len);
	if (timeout_ns > 0)
		deadline = lull__deadline_ns(lull__now_ns(),
					     (uint64_t)timeout_ns);
	for (;;) {
		if (producer_wait_closed(prod))
			return -EPIPE;
		if (producer_has_room(prod, size))
			return 0;
		if (timeout_ns == 0)
			return -ETIMEDOUT;
		/*
		 * No slice of our own: the consumer's read and a shutdown
		 * both wake us (the handshake below), so only the caller's
		 * timeout bounds the sleep.
		 */
		slice = LULL_NS_FOREVER;
		if (deadline != UINT64_MAX) {
			now = lull__now_ns();
			if (now >= deadline)
				return -ETIMEDOUT;
			slice = deadline - now;
		}
		/* Acquire: pairs with the release bump in lull__space_wake(). */
		seq = atomic_load_explicit(&region->space_seq,
					   memory_order_acquire);
		/*
		 * Register, barrier, re-check: the mirror of the consumer's
		 * store of head, barrier, load of space_waiters in
		 * lull__space_notify(), and of a shutdown's state RMW and
		 * load.  In an asymmetric region the consumer's barrier is
		 * the compiler's only, so ours is membarrier(2), which also
		 * runs a full barrier on the consumer's CPU.
		 */
		atomic_fetch_add_explicit(&region->space_waiters, 1,
					  memory_order_seq_cst);
		ret = lull__barrier_heavy(prod->asym_barrier);
		if (ret < 0) {
			/* No barrier: sleeping could miss the consumer. */
			atomic_fetch_sub_explicit(&region->space_waiters, 1,
						  memory_order_relaxed);
			return ret;
		}
		if (!producer_wait_closed(prod) &&
		    !producer_has_room(prod, size))
			/* Returns at once if the word moved since we read it. */
			futex_wait(&region->space_seq, seq, slice);
		/* Relaxed: a count; one that reads high for a moment costs
		 * the consumer one needless wake-up, never a lost one. */
		atomic_fetch_sub_explicit(&region->space_waiters, 1,
					  memory_order_relaxed);
	}
}
