/* SPDX-License-Identifier: MIT */
/*
 * producer.c - producers come and go: attaching a producer handle to a
 * ring (one at a time on SPSC, any number on MPSC), detaching it (the last
 * one out shuts the ring down), and producers bound to the lifetime of
 * their thread.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handles.h"
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

LULL_EXPORT int lull_producer_attach(struct lull_ring *ring, unsigned flags,
				     struct lull_producer **prodp)
{
	struct lull_region *region;
	struct lull_producer *prod;

	if (!ring || !prodp || (flags & ~LULL_PRODUCER_THREAD))
		return -EINVAL;
	region = ring->region;
	prod = aligned_alloc(LULL_LINE_PAIR, sizeof(*prod));
	if (!prod)
		return -ENOMEM;
	memset(prod, 0, sizeof(*prod));

	if (ring->mode == LULL_RING_SPSC) {
		uint32_t expected = 0;

		/*
		 * acq_rel: acquire pairs with the release in detach, so this
		 * producer starts from the previous one's last tail; release
		 * orders nothing further but keeps the pair symmetric.
		 */
		if (!atomic_compare_exchange_strong_explicit(
			    &region->producers, &expected, 1,
			    memory_order_acq_rel, memory_order_relaxed)) {
			free(prod);
			return -EBUSY;
		}
	} else {
		atomic_fetch_add_explicit(&region->producers, 1,
					  memory_order_relaxed);
	}
	/*
	 * A ring that was shut down takes no new producers.  One attaching
	 * while the last one detaches may still get in and find the ring
	 * closed a moment later; its writes then fail with -EPIPE, as they
	 * would for any producer caught by a shutdown.
	 */
	if (atomic_load_explicit(&region->state, memory_order_seq_cst) &
	    LULL_STATE_CLOSED) {
		/* Undo the count; release pairs with the acquire CAS of the
		 * next SPSC attach, as in lull_producer_detach(). */
		atomic_fetch_sub_explicit(&region->producers, 1,
					  memory_order_release);
		free(prod);
		return -EPIPE;
	}
	if ((flags & LULL_PRODUCER_THREAD) && bind_to_thread(prod) < 0) {
		/* Undo the count, paired as above. */
		atomic_fetch_sub_explicit(&region->producers, 1,
					  memory_order_release);
		free(prod);
		return -ENOMEM;
	}
	atomic_fetch_add_explicit(&ring->attached, 1, memory_order_relaxed);

	prod->ring = ring;
	prod->region = region;
	prod->data = ring->data;
	prod->mask = ring->mask;
	prod->mode = ring->mode;
	prod->max_record = ring->max_record;
	prod->asym_barrier = region->flags & LULL_REGION_ASYM_BARRIER;
	prod->pid = (int32_t)getpid();
	/* Pairs with the consumer's release store of head. */
	prod->head_cache = atomic_load_explicit(&region->head,
						memory_order_acquire);
	*prodp = prod;
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
		(void)(prod->mode == LULL_RING_SPSC ? lull_spsc_abort(prod)
						    : lull_mpsc_abort(prod));
	/*
	 * Release pairs with the acquire CAS in lull_producer_attach(): the
	 * next SPSC producer sees our last tail store.  seq_cst keeps it
	 * ordered with the state check of a racing attach.  The last one out
	 * closes the ring, as a channel closes with its last sender.
	 */
	if (atomic_fetch_sub_explicit(&prod->region->producers, 1,
				      memory_order_seq_cst) == 1)
		lull__shutdown(prod->region, LULL_SHUTDOWN_GRACEFUL, 0);
	atomic_fetch_sub_explicit(&ring->attached, 1, memory_order_relaxed);
	free(prod);
	return 0;
}
