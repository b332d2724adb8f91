/* SPDX-License-Identifier: MIT */
/*
 * handles.h - the per-process handles on a region (the ring, and each
 * producer's private state), and what the ring's files share about them:
 * the consumer's readability query, shutdown, thread-bound producers.
 */
#ifndef LULL_PRIVATE_HANDLES_H
#define LULL_PRIVATE_HANDLES_H

#include <linux/time_types.h>
#include <pthread.h>
#include <stdbool.h>

#include "region.h"

struct lull_loop;

/* The consumer's private view of one lane of its region. */
struct lull_cursor {
	struct lull_lane *lane;
	unsigned char *data;
	uint64_t head;       /* equals lane->head */
	uint64_t final_tail; /* records end here (from LULL_CLOSING_DRAIN) */
	bool in_batch;       /* the last record handed out was not its
				batch's last: an immediate shutdown waits */
};

/*
 * The per-process view of a region.  The geometry (mask, mode, lanes,
 * flags, size, and each cursor's lane and data pointers) is read from the
 * header once, when the handle is made and checked, and never again: a
 * process sharing the region may rewrite the header at any time.
 */
struct lull_ring {
	struct lull_region *region;
	uint64_t mask; /* of each lane's data area */
	uint32_t mode;
	uint32_t lanes;
	uint32_t max_record; /* header + largest payload */
	uint32_t flags;      /* LULL_REGION_*, as the region was opened */
	uint64_t region_size;
	bool owns_region;
	bool is_consumer;
	/* Producers attached through this handle, for lull_ring_destroy(). */
	_Atomic uint32_t attached;

	/*
	 * Consumer-private state, on its own lines: only the consumer thread
	 * touches it.
	 */
	alignas(LULL_LINE_PAIR) bool peeked;
	uint32_t peek_lane;  /* the lane of the peeked record */
	uint32_t next_lane;  /* LANES: where the next read starts */
	uint64_t records_since_wait; /* read since lull_ring_wait() last
					began: a stream or a trickle */

	/*
	 * Shutdown as the consumer sees it (ring_read.c): once the region is
	 * closed and the final position known, what is left to hand out.
	 */
	uint8_t closing;     /* LULL_CLOSING_* */
	bool peeked_closure; /* the peeked record is the fatal or poison */
	uint64_t peek_end;   /* where release moves the head */
	struct lull_record peek_rec; /* what the peek handed out */
	/* The fatal report as the region held it at the seal, checked: the
	 * fatal record points here, never into the region. */
	struct lull_fatal fatal;
	/* Corruptions found in the region: 0 or 1 (lull_ring_stats); any
	 * thread may read it. */
	_Atomic uint64_t corruptions;

	/* Consumer-side park state (park.c, park_uring.c). */
	uint64_t spin_ns;     /* or LULL_PARK_SPIN_ADAPTIVE */
	bool streaming;       /* adaptive spin: records are streaming in */
	uint64_t safety_ns;
	int eventfd;          /* own eventfd for URING_EVENTFD, or -1 */
	uint64_t eventfd_buf; /* where an io_uring read of it lands */
	/* An armed park on a caller's io_uring. */
	uint64_t uring_user_data;
	unsigned uring_pending; /* its CQEs still to come */
	bool uring_armed_once;  /* uring_user_data is the caller's */
	bool uring_sleeping;    /* armed, and none of its CQEs seen yet */
	uint64_t uring_armed_ns; /* when it was armed */
	bool uring_cancelled;   /* lull_uring_park_cancel(): do not re-arm */
	int uring_backend;      /* URING_FUTEX or URING_EVENTFD, 0 unset */
	struct lull_loop *loop; /* the loop it is attached to, if any */
	/* The link timeout's duration: the kernel reads it at submission. */
	struct __kernel_timespec uring_timeout;

	/* One per lane of the region. */
	struct lull_cursor cursor[];
};

/*
 * The consumer's view of a shutdown, in order.  From CORRUPT on nothing
 * of the region's data is read any more.
 */
#define LULL_CLOSING_OPEN 0    /* not closed, as far as it has seen */
#define LULL_CLOSING_DRAIN 1   /* closed; records up to each lane's
				  final_tail remain */
#define LULL_CLOSING_CORRUPT 2 /* the region is corrupt: -EPROTO is next
				  (the read that found it handed out
				  records before it), then the poison */
#define LULL_CLOSING_FATAL 3   /* the fatal record is next */
#define LULL_CLOSING_POISON 4  /* the poison record is next */
#define LULL_CLOSING_DONE 5    /* poison consumed (or closed by us): -EPIPE */

/* One producer's private state, allocated on its own lines. */
struct lull_producer {
	alignas(LULL_LINE_PAIR) struct lull_ring *ring;
	struct lull_region *region;
	struct lull_lane *lane; /* the lane it writes (MPSC: the shared one) */
	unsigned char *data;    /* that lane's records */
	uint64_t mask;
	uint32_t mode;
	uint32_t max_record;
	uint64_t head_cache; /* the consumer's head, last time we looked */
	uint64_t claim_retries; /* MPSC: claim CASes that lost a race */
	bool asym_barrier;   /* LULL_REGION_ASYM_BARRIER */
	int32_t pid;         /* ours, to tell whether wake_fd is usable */
	/* LULL_PRODUCER_THREAD: the owner thread's list of bound producers */
	bool thread_bound;
	pthread_t owner;
	struct lull_producer *bound_next;

	/* The outstanding claim, if any. */
	bool claimed;
	int32_t claim_type;
	uint32_t claim_length; /* header + payload, of the first record */
	uint64_t claim_pos;    /* where the first record's header goes */
	uint64_t claim_start;  /* the tail before the claim (SPSC, LANES) or
				  the claimed space's start (MPSC): the
				  gate header, published last */
	uint64_t claim_end;    /* where the claimed space ends */
};

/*
 * Consumer: is there something to do right now: a committed record to
 * hand out, padding to skip, or after a shutdown the fatal or poison
 * record, or -EPIPE?  A query: it changes nothing (the shutdown steps it
 * foresees are taken by the read that follows).
 */
bool lull__ring_readable(const struct lull_ring *ring);

/*
 * Consumer: consume the padding at the head of each lane, as a read
 * would before its first record, so that the room an abort left is free
 * for producers.  Nothing is handed out.
 */
void lull__ring_skip_padding(struct lull_ring *ring);

/* Consumer: is this ring past its poison (or closed by its consumer)? */
static inline bool lull__ring_done(const struct lull_ring *ring)
{
	return ring->closing == LULL_CLOSING_DONE;
}

/*
 * Shut a region down; @mode is its topology as a handle checked it (the
 * header's word may say anything), @how LULL_SHUTDOWN_*, @extra more
 * state bits to set with it.  Returns the state before.  Any thread,
 * signal-safe.
 */
uint32_t lull__shutdown(struct lull_region *region, uint32_t mode,
			unsigned how, uint32_t extra);

/*
 * The same, by the consumer on its own thread (lull_ring_close(), a
 * corrupt region): it wakes producers waiting for room, and a park of
 * its own still armed on an io_uring through its own eventfd, never
 * through the region's wake_fd, which anyone sharing the region may
 * point at any descriptor of this process.
 */
void lull__shutdown_by_consumer(struct lull_ring *ring, unsigned how,
				uint32_t extra);

/* The region's state word, for producers' fast checks. */
static inline uint32_t lull__state(const struct lull_region *region)
{
	return atomic_load_explicit(&region->state, memory_order_relaxed);
}

#endif /* LULL_PRIVATE_HANDLES_H */
