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
#include "sys.h"

struct lull_loop;
struct lull_watch;
struct lull_uwait;
struct lull_beacon;

/* The consumer's private view of one lane of its region. */
struct lull_cursor {
	struct lull_lane *lane;
	unsigned char *data;
	uint64_t head;       /* equals lane->head */
	uint64_t final_tail; /* records end here (from LULL_CLOSING_DRAIN) */
	bool in_batch;       /* the last record handed out was not its
				batch's last: an immediate shutdown waits */
	uint32_t item;       /* the record at head is an array whose items
				before this one were consumed */
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
	int shm_fd;          /* shared through a descriptor: ours, or -1 */
	uint64_t map_size;   /* shm_fd's mapping, unmapped at destroy */
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
	bool peeked_notice;  /* the peeked record is a death notice */
	uint64_t peek_end;   /* where release moves the head */
	uint32_t peek_item;  /* and the array index it leaves there */
	bool peek_more;      /* the peeked record is not its batch's last */
	struct lull_record peek_rec; /* what the peek handed out */
	/* The fatal report as the region held it at the seal, checked: the
	 * fatal record points here, never into the region. */
	struct lull_fatal fatal;
	/* Corruptions found in the region: 0 or 1 (lull_ring_stats); any
	 * thread may read it. */
	_Atomic uint64_t corruptions;

	/* Consumer-side park state (park.c, park_uring.c). */
	uint64_t spin_ns;     /* or LULL_PARK_SPIN_ADAPTIVE */
	/*
	 * The park barrier's mode (LULL_REGION_ASYM_BARRIER only, see
	 * lull__park_announce()): records read since the last park, whether
	 * the region's park_fence says 1, and whether a membarrier(2) has
	 * followed that store, so that parks may fence alone.
	 */
	uint64_t records_since_park;
	bool park_fence_asked;
	bool park_fenced;
	bool streaming;       /* adaptive spin: records are streaming in */
	uint32_t slip_ns;     /* the temporal slip (ring_read.c) */
	bool slip_armed;      /* the last read was short: the next may slip */
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

	/* LULL_REGION_SHARED, consumer only: the producer processes. */
	struct lull_watch *watch;

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
	/*
	 * A word that changes when the consumer may be gone, and its value
	 * until then (beacon.c): the consumer process's beacon, the region's
	 * consumer_pid while no beacon is to be had, or, on a ring no other
	 * process shares, a word nothing writes.  Loaded by every claim and
	 * write.
	 */
	const _Atomic uint32_t *consumer_word;
	uint32_t consumer_word_ok;
	/* The longest payload lull_spsc_write()'s fast path takes: up to
	   LULL_COPY_SHORT_MAX, if a record that long fits this ring. */
	uint32_t short_max;
	uint64_t claim_retries; /* MPSC: claim CASes that lost a race */
	bool asym_barrier;   /* LULL_REGION_ASYM_BARRIER */
	int32_t pid;         /* ours: the process that attached it */
	/* LULL_PRODUCER_THREAD: the owner thread's list of bound producers */
	bool thread_bound;
	pthread_t owner;
	struct lull_producer *bound_next;

	/*
	 * LULL_REGION_SHARED: our slot, where MPSC claims are announced,
	 * and a pidfd of the consumer's process (-1: none yet, or ours).
	 */
	struct lull_slot *slot;
	int consumer_pidfd;
	int32_t consumer_pid;
	struct lull_beacon *beacon; /* mapped read-only, or NULL */
	int32_t beacon_pid;         /* whose, and its start time */
	uint64_t beacon_start;
	struct lull_uwait *uwait; /* lull_producer_wait()'s sleep */

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
 * for producers.  Nothing is handed out.  True when it found a record (or
 * a corrupt header) at a head: lull__ring_readable() would say true as
 * well; false says nothing, so ask it.
 */
bool lull__ring_skip_padding(struct lull_ring *ring);

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

/*
 * ring_setup.c, for ring_share.c: lay out a region of @size bytes at @mem
 * (@region_flags LULL_REGION_*; @fresh: memory known to read zero) and
 * make its handle, holding the consumer role when @consumer; and open a
 * region laid out before (@flags LULL_OPEN_*), which must be shared when
 * @shared.  Return 0 or a negative errno, as the public calls.
 */
int lull__ring_make(struct lull_ring **ringp, void *mem, size_t size,
		    size_t capacity, unsigned flags, uint32_t region_flags,
		    bool fresh, bool consumer);
int lull__ring_open(struct lull_ring **ringp, void *mem, size_t size,
		    unsigned flags, bool shared);
/* Bytes a region of that topology and those LULL_REGION_* flags takes,
 * or -EINVAL. */
ssize_t lull__region_size(size_t capacity, unsigned flags,
			  uint32_t region_flags);

/* The slot table of a LULL_REGION_SHARED region, after the data. */
static inline struct lull_slot *lull__slots(const struct lull_ring *ring)
{
	return (struct lull_slot *)((unsigned char *)ring->region +
				    ring->region_size - LULL_SLOTS_SIZE);
}

/*
 * Producer of a shared region, on a slow path (a full ring, a wait): has
 * the consumer's process died?  Then the region is shut down, and true
 * (ring_death.c).
 */
bool lull__consumer_gone(struct lull_producer *prod);

/*
 * The consumer's beacon (beacon.c).  The consumer's process publishes it
 * in the region when it takes the consumer role (with consumer_pid, whose
 * release store publishes it).  A producer starts watching at attach and
 * stops at detach; recheck, when its word changed, returns true when the
 * consumer's process has ended (the region is then shut down), and
 * beacon_lives says whether the beacon of consumer @pid is watched and
 * says it lives (then no pidfd needs asking).
 */
extern const _Atomic uint32_t lull__no_consumer_word;
void lull__beacon_publish(struct lull_region *region);
void lull__consumer_watch_start(struct lull_producer *prod);
void lull__consumer_watch_stop(struct lull_producer *prod);
bool lull__consumer_recheck(struct lull_producer *prod);
bool lull__consumer_beacon_lives(const struct lull_producer *prod,
				 int32_t pid);

/*
 * Before every claim or write: has the consumer's process ended?  One
 * load of the watched word; only a change goes further.  True: the
 * region is shut down, -EPIPE.
 */
static inline bool lull__consumer_lost(struct lull_producer *prod)
{
	/*
	 * Relaxed: the word orders nothing; the kernel stores it when the
	 * consumer's process ends, and the shutdown that follows has its
	 * own orders.
	 */
	return unlikely(atomic_load_explicit(prod->consumer_word,
					     memory_order_relaxed) !=
			prod->consumer_word_ok) &&
	       lull__consumer_recheck(prod);
}

/*
 * A producer of a shared region takes a slot (holding @lane) at attach,
 * and gives it back at detach.  Take returns 0 or -EBUSY (every slot
 * taken), or the error of reading /proc.
 */
int lull__slot_take(struct lull_producer *prod, const struct lull_ring *ring,
		    uint32_t lane);
void lull__slot_give(struct lull_producer *prod);

/* A process's start time, field 22 of /proc/@pid/stat. */
int lull__proc_start(int32_t pid, uint64_t *startp);

/*
 * Consumer (shutdown.c): the region holds what no producer writes; the
 * ring is fatal from here on (-EPROTO once, then the poison).
 */
void lull__ring_corrupt(struct lull_ring *ring);

/*
 * A full ring: -EAGAIN, or -EPIPE when the ring is shared and its
 * consumer's process is gone (then shut down).
 */
static inline int lull__full(struct lull_producer *prod)
{
	return unlikely(prod->slot != NULL) && lull__consumer_gone(prod)
		       ? -EPIPE
		       : -EAGAIN;
}

/*
 * MPSC claims in a shared region, announced in the producer's slot
 * (region.h, struct lull_slot) so that the consumer can tell a dead
 * producer's claim from a live one's.  No-ops elsewhere.
 *
 * try: before each CAS of the shared tail, the span it would claim.  The
 * release fence pairs with the consumer's acquire load of tail: a
 * consumer that sees the tail this CAS (or any later one) stored sees
 * the announcement too.
 */
static inline void lull__claim_try(struct lull_producer *prod, uint64_t start,
				   uint64_t end)
{
	struct lull_slot *slot = prod->slot;

	if (likely(!slot))
		return;
	atomic_store_explicit(&slot->claim_start, start, memory_order_relaxed);
	atomic_store_explicit(&slot->claim_end, end, memory_order_relaxed);
	atomic_store_explicit(&slot->claim_phase, LULL_CLAIM_TRYING,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

/*
 * won: the CAS took the span; said before anything is written into it.
 * The fence pairs with the consumer's acquire load of a header there:
 * one that sees anything of the claim sees it owned.
 */
static inline void lull__claim_won(struct lull_producer *prod)
{
	if (likely(!prod->slot))
		return;
	atomic_store_explicit(&prod->slot->claim_phase, LULL_CLAIM_OWNED,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

/*
 * done: committed or aborted (after its release store).  Release pairs
 * with the consumer's acquire of the phase: NONE means the commit shows.
 */
static inline void lull__claim_done(struct lull_producer *prod)
{
	if (likely(!prod->slot))
		return;
	atomic_store_explicit(&prod->slot->claim_phase, LULL_CLAIM_NONE,
			      memory_order_release);
}

/*
 * given up (a full or closed ring) after a try: no claim.  A consumer
 * recovering a dead producer's claim may be waiting for exactly this
 * (our try held the position it is stuck at): ring_death.c tells it.
 */
void lull__claim_given_up_shared(struct lull_producer *prod);

static inline void lull__claim_given_up(struct lull_producer *prod)
{
	if (unlikely(prod->slot != NULL))
		lull__claim_given_up_shared(prod);
}

/* A handle takes (@taken) or gives up the consumer role of a shared
 * region: its process is published for producers to watch, or cleared. */
void lull__consumer_announce(struct lull_ring *ring, bool taken);

/*
 * Consumer of a shared region: take note of producers attached or gone,
 * and with @reap of the processes that died (a system call), then recover
 * what dead ones held (ring_death.c).  Cheap when nothing changed.
 */
void lull__watch_sync(struct lull_ring *ring, bool reap);
/*
 * Consumer of a shared region: sleep on the park word (holding @how) for
 * at most @slice ns, or until a watched producer process dies.  Returns
 * as lull__futex_wait().
 */
int lull__watch_sleep(struct lull_ring *ring, uint32_t how, uint64_t slice);
/* Is anything for the watch to do (a roster change, a death notice due,
 * a recovery that may progress)? */
bool lull__watch_pending(const struct lull_ring *ring);
/* Is a dead producer's claim or lane still to recover? */
bool lull__watch_recovering(const struct lull_ring *ring);
/* Is a death notice queued, due or not?  The end waits for it. */
bool lull__watch_notice_queued(const struct lull_ring *ring);
/* Hand out a due death notice as a record: 1, or 0 when none is due. */
int lull__watch_notice(struct lull_ring *ring, struct lull_record *rec);
/* The notice handed out by lull__watch_notice() was consumed. */
void lull__watch_notice_consume(struct lull_ring *ring);
/* The consumer's per-process watch state, freed with the handle. */
void lull__watch_free(struct lull_ring *ring);

/* The region's state word, for producers' fast checks. */
static inline uint32_t lull__state(const struct lull_region *region)
{
	return atomic_load_explicit(&region->state, memory_order_relaxed);
}

#endif /* LULL_PRIVATE_HANDLES_H */
