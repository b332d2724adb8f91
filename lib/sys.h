/* SPDX-License-Identifier: MIT */
/*
 * sys.h - what every library file needs from the system, the lull way:
 * exported symbols, system calls that leave errno alone, the monotonic
 * clock and durations that never overflow, counters with one writer.
 */
#ifndef LULL_PRIVATE_SYS_H
#define LULL_PRIVATE_SYS_H

#include <errno.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LULL_EXPORT __attribute__((visibility("default")))

/*
 * Evaluate a libc system-call wrapper and give its result as a negative
 * errno on failure, leaving errno as it was: lull never changes errno.
 */
#define LULL_SYSCALL(expr)                                                   \
	__extension__({                                                      \
		int saved_errno_ = errno;                                    \
		long ret_ = (long)(expr);                                    \
		if (ret_ < 0)                                                \
			ret_ = -errno;                                       \
		errno = saved_errno_;                                        \
		ret_;                                                        \
	})
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * A duration this long or longer (about 292 years) is no timeout at all:
 * the waits take it as "forever" instead of converting it, so that no
 * conversion of a caller's or a config's duration can overflow.
 */
#define LULL_NS_FOREVER ((uint64_t)INT64_MAX)

/* Time now on CLOCK_MONOTONIC, in ns. */
static inline uint64_t lull__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* @now + @timeout_ns, saturated at UINT64_MAX (no deadline). */
static inline uint64_t lull__deadline_ns(uint64_t now, uint64_t timeout_ns)
{
	return timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
}

/* Relaxed increment of a counter that has a single writer. */
static inline void lull__count(_Atomic uint64_t *counter)
{
	atomic_store_explicit(counter,
			      atomic_load_explicit(counter,
						   memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/*
 * Futex wait while @word holds @expected, at most @timeout_ns;
 * LULL_NS_FOREVER or more waits without a timeout.  Shared futexes (no
 * FUTEX_PRIVATE_FLAG): a private wait armed through io_uring while the
 * process is single-threaded is lost when the first pthread_create() sets
 * up the per-process futex hash (Linux 6.16+), and a region in shared
 * memory is waited on from other processes.  syscall(), not a libc
 * wrapper: never a cancellation point.
 */
static inline long lull__futex_wait_op(_Atomic uint32_t *word, int op,
				       uint32_t expected, uint64_t timeout_ns)
{
	struct timespec ts, *tsp = NULL;

	if (timeout_ns < LULL_NS_FOREVER) {
		ts.tv_sec = (time_t)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long)(timeout_ns % 1000000000u);
		tsp = &ts;
	}
	return LULL_SYSCALL(syscall(SYS_futex, word, op, expected, tsp, NULL, 0));
}

static inline long lull__futex_wait(_Atomic uint32_t *word, uint32_t expected,
				    uint64_t timeout_ns)
{
	return lull__futex_wait_op(word, FUTEX_WAIT, expected, timeout_ns);
}

#ifndef PR_FUTEX_HASH
#define PR_FUTEX_HASH 78 /* Linux 6.16 */
#define PR_FUTEX_HASH_GET_SLOTS 2
#endif

/*
 * Whether a private futex wait armed through io_uring now will meet a
 * private wake-up later, whatever threads the process creates meanwhile.
 * Linux 6.16 gives a process a futex hash of its own when it creates its
 * first thread; from then on the hash only grows, shrinks or turns into
 * the global one, and each change moves every waiter queued in it.  The
 * waiters queued in the global hash before the first one existed are not
 * moved: those are the lost ones.  So a private wait is safe where the
 * process has its hash (PR_FUTEX_HASH_GET_SLOTS > 0) and where the kernel
 * has no such hash at all (before 6.16 the prctl fails with EINVAL, and
 * every private futex hashes globally).  0 is no hash yet, or the global
 * one chosen for good: the two cannot be told apart, and both get shared
 * waits, as does any other answer (a seccomp profile's, say).
 */
static inline bool lull__futex_private_async_safe(void)
{
	long ret = LULL_SYSCALL(prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS,
				      0, 0, 0));

	return ret > 0 || ret == -EINVAL;
}

/*
 * A private futex wait: only for memory no other process maps, and never
 * through io_uring unless lull__futex_private_async_safe() says so.
 */
static inline long lull__futex_wait_private(_Atomic uint32_t *word,
					    uint32_t expected,
					    uint64_t timeout_ns)
{
	return lull__futex_wait_op(word, FUTEX_WAIT_PRIVATE, expected,
				   timeout_ns);
}

/* Wake up to @count waiters of @word: FUTEX_WAKE or FUTEX_WAKE_PRIVATE. */
static inline void lull__futex_wake_op(_Atomic uint32_t *word, int op,
				       int count)
{
	LULL_SYSCALL(syscall(SYS_futex, word, op, count, NULL, NULL, 0));
}

static inline void lull__futex_wake(_Atomic uint32_t *word, int count)
{
	lull__futex_wake_op(word, FUTEX_WAKE, count);
}

#endif /* LULL_PRIVATE_SYS_H */
