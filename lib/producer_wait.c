/* SPDX-License-Identifier: MIT */
/*
 * producer_wait.c - lull_producer_wait(): a producer sleeps until the
 * consumer frees room, or the ring shuts down.  The park handshake with
 * the roles swapped: the producer registers in space_waiters, barriers,
 * re-checks and sleeps on space_seq; the consumer, after publishing a new
 * head, barriers and wakes it if registered (lull__space_notify() in
 * park.h, lull__space_wake() in wake.c).
 */
#include <stdlib.h>

#include "park.h"
#include "record.h"
#include "uring_compat.h"

/*
 * The sleep of a producer of a shared region whose consumer lives in
 * another process: on the room word and that process's pidfd at once, so
 * that its death ends the wait (ring_death.c).  Elsewhere, or without an
 * io_uring futex wait here, a futex wait on the word alone.
 */
static void room_sleep(struct lull_producer *prod, uint32_t seq,
		       uint64_t slice)
{
	struct lull_region *region = prod->region;
	bool died;
	int ret = -EOPNOTSUPP;

	if (prod->slot && prod->consumer_pidfd >= 0) {
		if (!prod->uwait)
			prod->uwait = calloc(1, sizeof(*prod->uwait));
		if (prod->uwait)
			ret = lull__uwait(prod->uwait, &region->space_seq, seq,
					  prod->consumer_pidfd, slice, &died);
	}
	if (ret == -EOPNOTSUPP || ret == -ENOSYS || ret == -EPERM ||
	    ret == -ENOMEM)
		lull__futex_wait(&region->space_seq, seq, slice);
}

/*
 * Whether a record of @size bytes (header included, padded) fits now at
 * the producer's tail, padding for the wrap included.  Refreshes the head
 * the producer knows of.
 */
static bool producer_has_room(struct lull_producer *prod, uint64_t size)
{
	struct lull_lane *lane = prod->lane;
	uint64_t tail, pad;

	/* Relaxed: a lane's, our own store; MPSC, a hint the claim
	 * re-checks. */
	tail = atomic_load_explicit(&lane->tail, memory_order_relaxed) &
	       ~(uint64_t)LULL_TAIL_FLAGS;
	pad = lull__wrap_padding(tail, prod->mask, size);
	/* Pairs with the consumer's release store of head, as in a write. */
	prod->head_cache =
		atomic_load_explicit(&lane->head, memory_order_acquire);
	return tail + pad + size - prod->head_cache <= prod->mask + 1;
}

static bool producer_wait_closed(struct lull_producer *prod)
{
	return (lull__state(prod->region) & LULL_STATE_CLOSED) ||
	       lull__consumer_gone(prod);
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
			room_sleep(prod, seq, slice);
		/* Relaxed: a count; one that reads high for a moment costs
		 * the consumer one needless wake-up, never a lost one. */
		atomic_fetch_sub_explicit(&region->space_waiters, 1,
					  memory_order_relaxed);
	}
}
