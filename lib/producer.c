/* SPDX-License-Identifier: MIT */
/*
 * producer.c - producers come and go: attaching a producer handle to a
 * ring (one at a time on SPSC, one per lane on LANES, any number on MPSC),
 * detaching it (the last one out shuts the ring down), and producers bound
 * to the lifetime of their thread.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handles.h"
#include "record.h"
#include "sys.h"

/*
 * Producers bound to their thread.  Each thread keeps a list of its bound
 * producers; a thread-specific key with a destructor detaches them when
 * the thread ends, however it ends (return, pthread_exit, cancellation):
 * glibc runs key destructors on every one of those paths.
 */
static pthread_key_t bound_key;
static pthread_once_t bound_once = PTHREAD_ONCE_INIT;
static int bound_key_error;
static _Thread_local struct lull_producer *bound_head;

static void bound_thread_exit(void *unused)
{
	struct lull_producer *prod;

	(void)unused;
	while ((prod = bound_head)) {
		bound_head = prod->bound_next;
		prod->thread_bound = false;
		lull_producer_detach(prod);
	}
}

static void bound_key_create(void)
{
	bound_key_error = pthread_key_create(&bound_key, bound_thread_exit);
}

static int bind_to_thread(struct lull_producer *prod)
{
	pthread_once(&bound_once, bound_key_create);
	if (bound_key_error)
		return -bound_key_error;
	/* Any non-NULL value: the destructor only runs for those. */
	if (pthread_setspecific(bound_key, &bound_head))
		return -ENOMEM;
	prod->thread_bound = true;
	prod->owner = pthread_self();
	prod->bound_next = bound_head;
	bound_head = prod;
	return 0;
}

static int unbind_from_thread(struct lull_producer *prod)
{
	struct lull_producer **link;

	if (!prod->thread_bound)
		return 0;
	if (!pthread_equal(prod->owner, pthread_self()))
		return -EPERM;
	for (link = &bound_head; *link; link = &(*link)->bound_next)
		if (*link == prod) {
			*link = prod->bound_next;
			break;
		}
	prod->thread_bound = false;
	return 0;
}

/*
 * Take a lane for a producer of an SPSC or LANES ring: the first whose
 * owner word is free.  Returns its index, or -EBUSY when every lane is
 * taken.  The lanes the handle counted when it checked the region, not
 * the header's count, which anyone sharing the region may rewrite.
 */
static int lane_take(const struct lull_ring *ring)
{
	for (uint32_t i = 0; i < ring->lanes; i++) {
		uint32_t expected = 0;

		/*
		 * Acquire pairs with the release in lane_give_back(), so this
		 * producer starts from the previous one's last tail; release
		 * orders nothing further but keeps the pair symmetric.
		 */
		if (atomic_compare_exchange_strong_explicit(
			    &ring->cursor[i].lane->owner, &expected, 1,
			    memory_order_acq_rel, memory_order_relaxed))
			return (int)i;
	}
	return -EBUSY;
}

static void lane_give_back(struct lull_producer *prod)
{
	if (prod->mode == LULL_RING_MPSC)
		return;
	/* Pairs with the acquire CAS in lane_take(): our last tail store. */
	atomic_store_explicit(&prod->lane->owner, 0, memory_order_release);
}

LULL_EXPORT int lull_producer_attach(struct lull_ring *ring, unsigned flags,
				     struct lull_producer **prodp)
{
	struct lull_region *region;
	struct lull_producer *prod;
	int lane = 0, ret;

	if (!ring || !prodp || (flags & ~LULL_PRODUCER_THREAD))
		return -EINVAL;
	region = ring->region;
	prod = aligned_alloc(LULL_LINE_PAIR, sizeof(*prod));
	if (!prod)
		return -ENOMEM;
	memset(prod, 0, sizeof(*prod));
	prod->mode = ring->mode;

	if (ring->mode != LULL_RING_MPSC) {
		lane = lane_take(ring);
		if (lane < 0) {
			free(prod);
			return lane;
		}
	}
	prod->lane = ring->cursor[lane].lane;
	/*
	 * seq_cst: ordered with the state check below and with a racing
	 * detach's decrement, as the comment there says.
	 */
	atomic_fetch_add_explicit(&region->producers, 1, memory_order_seq_cst);
	/*
	 * A ring that was shut down takes no new producers.  One attaching
	 * while the last one detaches may still get in and find the ring
	 * closed a moment later; its writes then fail with -EPIPE, as they
	 * would for any producer caught by a shutdown.
	 */
	if (atomic_load_explicit(&region->state, memory_order_seq_cst) &
	    LULL_STATE_CLOSED) {
		atomic_fetch_sub_explicit(&region->producers, 1,
					  memory_order_relaxed);
		lane_give_back(prod);
		free(prod);
		return -EPIPE;
	}
	prod->ring = ring;
	prod->region = region;
	prod->asym_barrier = ring->flags & LULL_REGION_ASYM_BARRIER;
	prod->pid = (int32_t)getpid();
	prod->consumer_pidfd = -1;
	prod->consumer_word = &lull__no_consumer_word;
	prod->consumer_word_ok = 0;
	if (ring->flags & LULL_REGION_SHARED) {
		ret = lull__slot_take(prod, ring, (uint32_t)lane);
		if (ret < 0) {
			atomic_fetch_sub_explicit(&region->producers, 1,
						  memory_order_relaxed);
			lane_give_back(prod);
			free(prod);
			return ret;
		}
	}
	if ((flags & LULL_PRODUCER_THREAD) && bind_to_thread(prod) < 0) {
		lull__slot_give(prod);
		atomic_fetch_sub_explicit(&region->producers, 1,
					  memory_order_relaxed);
		lane_give_back(prod);
		free(prod);
		return -ENOMEM;
	}
	atomic_fetch_add_explicit(&ring->attached, 1, memory_order_relaxed);

	prod->data = ring->cursor[lane].data;
	prod->mask = ring->mask;
	prod->max_record = ring->max_record;
	prod->short_max =
		ring->max_record - LULL_RECORD_HEADER_SIZE < LULL_COPY_SHORT_MAX
			? ring->max_record - LULL_RECORD_HEADER_SIZE
			: LULL_COPY_SHORT_MAX;
	/* Pairs with the consumer's release store of head. */
	prod->head_cache = atomic_load_explicit(&prod->lane->head,
						memory_order_acquire);
	*prodp = prod;
	return 0;
}

LULL_EXPORT int lull_producer_stats(const struct lull_producer *prod,
				    struct lull_producer_stats *st)
{
	if (!prod || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->claim_retries = prod->claim_retries;
	return 0;
}

LULL_EXPORT int lull_producer_detach(struct lull_producer *prod)
{
	struct lull_ring *ring;

	if (!prod)
		return -EINVAL;
	if (unbind_from_thread(prod) < 0)
		return -EPERM;
	ring = prod->ring;
	if (prod->claimed)
		(void)(prod->mode == LULL_RING_MPSC ? lull_mpsc_abort(prod)
						    : lull_spsc_abort(prod));
	lane_give_back(prod);
	lull__slot_give(prod);
	/*
	 * seq_cst keeps it ordered with the state check of a racing attach.
	 * The last one out closes the ring, as a channel closes with its
	 * last sender.
	 */
	if (atomic_fetch_sub_explicit(&prod->region->producers, 1,
				      memory_order_seq_cst) == 1)
		lull__shutdown(prod->region, prod->mode,
			       LULL_SHUTDOWN_GRACEFUL, 0);
	atomic_fetch_sub_explicit(&ring->attached, 1, memory_order_relaxed);
	free(prod);
	return 0;
}
