/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the ring region's layout and the private state of handles,
 * shared by the library sources and never installed.
 */
#ifndef LULL_INTERNAL_H
#define LULL_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/time_types.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "lull.h"

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
 * Fields written by different sides live this far apart: two 64-byte lines,
 * because x86's adjacent-line prefetcher pulls lines in pairs.
 */
#define LULL_LINE_PAIR 128

#define LULL_REGION_MAGIC 0x6c756c6cu /* "lull" */
#define LULL_LAYOUT_VERSION 2u
#define LULL_REGION_DATA_OFFSET 1024u

/*
 * The region: everything a ring is, in one block of memory with no pointers,
 * so that it may later be mapped at different addresses in different
 * processes.  Offsets are fixed by the static asserts below; changing them
 * means bumping LULL_LAYOUT_VERSION.
 *
 *   0     header      written once at creation, read-only after
 *   128   tail        written by producers
 *   256   head        written by the consumer
 *   384   roles       attach/detach bookkeeping (cold), and the SPSC
 *                     producer's busy mark (its own, until a shutdown)
 *   512   park        the park word, read by producers after each commit,
 *                     and the shutdown state
 *   640   fatal       the fatal report (code, message)
 *   960   space       producers waiting for room (lull_producer_wait())
 *   1024  data        capacity bytes of records
 */
struct lull_region {
	/*
	 * magic is stored last, with release, by lull_ring_create_in(); an
	 * open that acquires it sees every other header field initialised.
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t magic;
	uint32_t layout_version;
	uint32_t mode;
	uint32_t flags;
	uint64_t capacity;
	uint64_t region_size;
	uint64_t data_offset;

	/*
	 * SPSC: end of the published records, stored relaxed by the
	 * producer; read only by a closing consumer (after acquiring busy)
	 * and by the next producer (after detach).
	 * MPSC: end of the claimed space, advanced by producers' CAS.
	 * A free-running byte position, always a multiple of 8.
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t tail;

	/* Start of the records not yet consumed, stored by the consumer. */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t head;
	/* Park counters, written by the consumer only (lull_ring_stats). */
	_Atomic uint64_t parks;
	_Atomic uint64_t park_cancels;
	_Atomic uint64_t safety_timeouts;
	_Atomic uint64_t idle_timeouts;

	/* Attached producers, and whether a handle holds the consumer role. */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t producers;
	_Atomic uint32_t consumer;

	/*
	 * SPSC: 1 while the producer is inside a write or holds a claim, so
	 * that a consumer closing the ring knows whether a record may still be
	 * published (spsc_enter() in ring_spsc.c).  Here with the cold role
	 * counts, away from tail: the producer stores it twice per write and
	 * the consumer reads it only while closing, so it stays in the
	 * producer's cache.  Beside tail it cost a miss whenever the consumer
	 * had just polled tail.
	 */
	_Atomic uint32_t busy;

	/*
	 * The park line.  Producers load park after every commit, so nothing
	 * here is written while the consumer is awake; the other fields are
	 * written only on the wake path.
	 *   park      LULL_PARK_AWAKE, or how the consumer sleeps; the futex
	 *             word of the futex backends
	 *   wake_fd   the eventfd to write for LULL_PARK_EVENTFD, valid in
	 *             process wake_pid; -1 when none
	 *   wakers    producers between reading wake_fd and writing to it
	 *   wakes     wake-up system calls made
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t park;
	_Atomic uint32_t state; /* LULL_STATE_*, set once, never cleared */
	_Atomic int32_t wake_fd;
	_Atomic int32_t wake_pid;
	_Atomic uint32_t wakers;
	_Atomic uint64_t wakes;

	/*
	 * The fatal report: fatal_state 0 none, 1 being written, 2 complete
	 * (stored with release after the fields; lull_ring_fatal()).
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t fatal_state;
	alignas(8) struct lull_fatal fatal; /* handed as an 8-aligned record */

	/*
	 * Producers blocked in lull_producer_wait(), and the futex word they
	 * sleep on, which the consumer (or a shutdown) bumps to wake them.
	 * In the fatal block's cold tail, on a line of its own: the consumer
	 * loads space_waiters after every batch, and nothing writes here
	 * unless a producer waits for room.
	 */
	alignas(64) _Atomic uint32_t space_waiters;
	_Atomic uint32_t space_seq;
	_Atomic uint64_t space_wakes; /* lull__space_wake() calls */
};

/* Region state bits (lull_region.state). */
#define LULL_STATE_CLOSED 1u   /* shut down: no new claims */
#define LULL_STATE_DISCARD 2u  /* immediate: drop what is undelivered */
#define LULL_STATE_FATAL 4u    /* a fatal record precedes the poison */
#define LULL_STATE_NO_CONSUMER 8u /* lull_ring_close(): nobody reads */
#define LULL_STATE_SEALED 16u  /* the consumer chose fatal-or-poison */

/* MPSC: the tail's low bit says closed, so a claim CAS can never pass a
 * shutdown (positions are multiples of 8). */
#define LULL_TAIL_CLOSED 1u
#define LULL_TAIL_FLAGS 7u

/* Values of the park word. */
#define LULL_PARK_AWAKE 0u
#define LULL_PARK_FUTEX 1u   /* sleeping in a futex wait on the word */
#define LULL_PARK_EVENTFD 2u /* sleeping on the eventfd in wake_fd */

/* Region flags (lull_region.flags), fixed at creation. */
/*
 * Producers and the consumer all live in the creating process, which is
 * registered for membarrier(2): the park barrier is asymmetric (see
 * lull__notify()).  Decided once, when the region is created: without it
 * (caller memory, or a registration that failed) both sides fence, and
 * neither side ever changes mode later.
 */
#define LULL_REGION_ASYM_BARRIER 1u

static_assert(offsetof(struct lull_region, tail) == 128, "region layout");
static_assert(offsetof(struct lull_region, head) == 256, "region layout");
static_assert(offsetof(struct lull_region, producers) == 384,
	      "region layout");
static_assert(offsetof(struct lull_region, park) == 512, "region layout");
static_assert(offsetof(struct lull_region, fatal_state) == 640,
	      "region layout");
static_assert(offsetof(struct lull_region, space_waiters) == 960,
	      "region layout");
static_assert(sizeof(struct lull_region) <= LULL_REGION_DATA_OFFSET,
	      "region header overlaps the data");

/*
 * A record header in the data area.  length is the header plus the payload
 * (so never 0 for a written record); the record occupies length rounded up
 * to 8.  In both topologies length is the commit flag (only MPSC stores
 * the negative value):
 *     0   not written yet (the consumer zeroes what it consumed)
 *    <0   claimed by a producer, payload being written
 *    >0   committed: type and payload are complete
 */
struct lull_record_header {
	_Atomic int32_t length;
	int32_t type;
};

static_assert(sizeof(struct lull_record_header) == LULL_RECORD_HEADER_SIZE,
	      "record header size");

struct lull_loop;

/* The per-process view of a region. */
struct lull_ring {
	struct lull_region *region;
	unsigned char *data;
	uint64_t mask;
	uint32_t mode;
	uint32_t max_record; /* header + largest payload */
	bool owns_region;
	bool is_consumer;
	/* Producers attached through this handle, for lull_ring_destroy(). */
	_Atomic uint32_t attached;

	/*
	 * Consumer-private state, on its own lines: only the consumer thread
	 * touches it.
	 */
	alignas(LULL_LINE_PAIR) uint64_t head; /* equals region->head */
	bool peeked;

	/*
	 * Shutdown as the consumer sees it (ring_read.c): once the region is
	 * closed and the final position known, what is left to hand out.
	 */
	uint8_t closing;     /* LULL_CLOSING_* */
	uint64_t final_tail; /* records end here (from LULL_CLOSING_DRAIN) */
	bool peeked_closure; /* the peeked record is the fatal or poison */
	uint64_t peek_end;   /* where release moves the head */

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
};

/* The consumer's view of a shutdown, in order. */
#define LULL_CLOSING_OPEN 0   /* not closed, as far as it has seen */
#define LULL_CLOSING_DRAIN 1  /* closed; records up to final_tail remain */
#define LULL_CLOSING_FATAL 2  /* the fatal record is next */
#define LULL_CLOSING_POISON 3 /* the poison record is next */
#define LULL_CLOSING_DONE 4   /* poison consumed (or closed by us): -EPIPE */

/* One producer's private state, allocated on its own lines. */
struct lull_producer {
	alignas(LULL_LINE_PAIR) struct lull_ring *ring;
	struct lull_region *region;
	unsigned char *data;
	uint64_t mask;
	uint32_t mode;
	uint32_t max_record;
	uint64_t head_cache; /* the consumer's head, last time we looked */
	bool asym_barrier;   /* LULL_REGION_ASYM_BARRIER */
	int32_t pid;         /* ours, to tell whether wake_fd is usable */
	/* LULL_PRODUCER_THREAD: the owner thread's list of bound producers */
	bool thread_bound;
	pthread_t owner;
	struct lull_producer *bound_next;

	/* The outstanding claim, if any. */
	bool claimed;
	int32_t claim_type;
	uint32_t claim_length; /* header + payload */
	uint64_t claim_pos;    /* where the record header goes */
	uint64_t claim_end;    /* SPSC: the tail once committed */
};

static inline uint64_t lull__align8(uint64_t n)
{
	return (n + (LULL_RECORD_ALIGN - 1)) & ~(uint64_t)(LULL_RECORD_ALIGN - 1);
}

static inline struct lull_record_header *lull__header_at(unsigned char *data,
							  uint64_t mask,
							  uint64_t pos)
{
	return (struct lull_record_header *)(data + (pos & mask));
}

/*
 * Copy a payload of at most 16 bytes, the common small message, with at
 * most two overlapping fixed-size moves: a call into libc's memcpy costs
 * more than such a copy.  Never reads @src when @len is 0 (it may be NULL).
 */
static inline void lull__copy_small(void *dst, const void *src, size_t len)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (len == 8) {
		memcpy(d, s, 8);
	} else if (len > 8) {
		memcpy(d, s, 8);
		memcpy(d + len - 8, s + len - 8, 8);
	} else if (len >= 4) {
		memcpy(d, s, 4);
		memcpy(d + len - 4, s + len - 4, 4);
	} else if (len) {
		d[0] = s[0];
		d[len / 2] = s[len / 2];
		d[len - 1] = s[len - 1];
	}
}

/* Copy a payload of @len bytes into a record (@src may be NULL for 0). */
static inline void lull__copy_payload(void *dst, const void *src, size_t len)
{
	if (len <= 16)
		lull__copy_small(dst, src, len);
	else
		memcpy(dst, src, len);
}

/*
 * Bytes of padding needed before a record of @size at @pos so that it does
 * not straddle the end of the data area: 0, or the distance to the end.
 */
static inline uint64_t lull__wrap_padding(uint64_t pos, uint64_t mask,
					  uint64_t size)
{
	uint64_t off = pos & mask;

	return off + size > mask + 1 ? mask + 1 - off : 0;
}

/* Shared argument checks for the write paths. */
static inline int lull__check_record(const struct lull_producer *prod,
				     int32_t type, size_t len)
{
	if (unlikely(type < 1))
		return -EINVAL;
	if (unlikely(len > prod->max_record - LULL_RECORD_HEADER_SIZE))
		return -EMSGSIZE;
	return 0;
}

/*
 * The producer's half of the park handshake, after every commit: a barrier
 * that pairs with the consumer's park barrier, then one load of the park
 * word.  The wake-up itself is out of line.
 *
 * Why a barrier at all: the commit is a store and the park check a load,
 * and without a StoreLoad barrier the CPU may perform the load before the
 * store is visible.  The consumer does the mirror image (store the park
 * word, barrier, load the ring).  With both barriers, at least one side
 * sees the other's store: either the consumer sees the record and does not
 * sleep, or the producer sees the park word and wakes it.  Without them,
 * both can miss each other and the consumer sleeps on a committed record.
 *
 * Symmetric mode: both barriers are seq_cst fences (C11 fence-to-fence
 * ordering).  Asymmetric mode: the consumer's barrier is
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which runs a full barrier
 * on every CPU currently running one of our threads (and a thread not
 * running has passed through a context switch, itself a full barrier), so
 * the producer only needs its compiler to keep the load after the store.
 * That moves the cost of the StoreLoad from every commit to every park.
 * It is only valid when every producer lives in the consumer's process.
 */
void lull__wake(struct lull_producer *prod, uint32_t seen);

/*
 * Wake a consumer that the park word says is parked (@seen), on behalf of
 * process @pid: the producers' wake-up, also used by shutdown.
 */
void lull__wake_region(struct lull_region *region, uint32_t seen,
		       int32_t pid);

/*
 * The producer's side of the park barrier (and of the SPSC busy
 * handshake): a compiler barrier where the consumer uses membarrier(2), a
 * seq_cst fence where it fences too.  Pairs with lull__park_barrier().
 */
static inline void lull__producer_barrier(const struct lull_producer *prod)
{
	if (prod->asym_barrier)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
}

/* After a commit: the barrier, then the park word as this producer sees it. */
static inline uint32_t lull__park_seen(const struct lull_producer *prod)
{
	lull__producer_barrier(prod);
	/* Relaxed: ordered by the barrier above; the CAS in lull__wake()
	 * decides. */
	return atomic_load_explicit(&prod->region->park, memory_order_relaxed);
}

static inline void lull__notify(struct lull_producer *prod)
{
	uint32_t seen = lull__park_seen(prod);

	if (unlikely(seen != LULL_PARK_AWAKE))
		lull__wake(prod, seen);
}

/*
 * Consumer: is there something to hand out right now: a committed record,
 * or after a shutdown the fatal or poison record, or -EPIPE?
 */
bool lull__ring_readable(struct lull_ring *ring);

/* Consumer: is this ring past its poison (or closed by its consumer)? */
static inline bool lull__ring_done(const struct lull_ring *ring)
{
	return ring->closing == LULL_CLOSING_DONE;
}

/*
 * Shut a region down; @how is LULL_SHUTDOWN_*, @extra more state bits to
 * set with it.  Returns the state before.  Any thread, signal-safe.
 */
uint32_t lull__shutdown(struct lull_region *region, unsigned how,
			uint32_t extra);

/* LULL_PRODUCER_THREAD: tie @prod to the calling thread, or untie it
 * (-EPERM from another thread). */
int lull__bind_to_thread(struct lull_producer *prod);
int lull__unbind_from_thread(struct lull_producer *prod);

/* The region's state word, for producers' fast checks. */
static inline uint32_t lull__state(const struct lull_region *region)
{
	return atomic_load_explicit(&region->state, memory_order_relaxed);
}

/* Wake every producer waiting for room (lull_producer_wait()). */
void lull__space_wake(struct lull_region *region);

/*
 * Consumer, after publishing a new head: wake producers waiting for room.
 * The barrier pairs with the waiting producer's, as in the park handshake
 * with the roles swapped (here the consumer is the frequent side): either
 * the producer's re-check sees the new head, or this load sees it waiting.
 * In an asymmetric region the producer's barrier is membarrier(2), so
 * this one is the compiler's only.
 */
static inline void lull__space_notify(struct lull_region *region)
{
	if (region->flags & LULL_REGION_ASYM_BARRIER)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	/* Relaxed: ordered by the barrier above. */
	if (unlikely(atomic_load_explicit(&region->space_waiters,
					  memory_order_relaxed)))
		lull__space_wake(region);
}

/*
 * The heavy side of a barrier pair: a seq_cst fence, and where @asym (the
 * other side has only a compiler barrier) membarrier(2) as well.  Returns
 * 0, or membarrier's error: then the pair is broken and the caller must
 * not sleep on it (never a silent fall back to the fence alone, which
 * pairs with nothing on the other side).
 */
int lull__barrier_heavy(bool asym);

/*
 * Consumer: the park barrier, the mirror of lull__notify()'s.  Returns 0
 * or a negative errno, as lull__barrier_heavy().
 */
int lull__park_barrier(struct lull_ring *ring);

/*
 * The consumer's steps, named as in test/model/park.pml.  A consumer of
 * one ring takes them through lull__park_begin(); the loop takes them for
 * all its rings at once: announce on each, one barrier
 * (lull__barrier_heavy() for any asymmetric region among them), re-check
 * each (lull__ring_readable()), then on every ring either abandon (a
 * re-check found work) or sleeps, and after the sleep lull__park_finish().
 */
/* announce: store how the consumer will sleep (LULL_PARK_FUTEX, ...). */
void lull__park_announce(struct lull_ring *ring, uint32_t how);
/* The re-check found work (or the barrier failed): awake, counted. */
void lull__park_abandon(struct lull_ring *ring);
/* The consumer goes to sleep on this ring: counted. */
void lull__park_sleeps(struct lull_ring *ring);

/*
 * Consumer: announce a park of kind @how, barrier, re-check.  Returns 1
 * when the consumer may sleep; 0 (park word reset) when a record arrived
 * meanwhile; a negative errno (park word reset) when the barrier failed.
 */
int lull__park_begin(struct lull_ring *ring, uint32_t how);

/*
 * Consumer: the park is over.  Returns true when the consumer reset the
 * word itself (no producer took the wake-up), false when a producer did.
 */
bool lull__park_end(struct lull_ring *ring);

/*
 * Consumer: the park is over; @timed_out when its safety net fired (or
 * when the caller cannot tell a fired safety net from a stale wake-up).
 * Resets the word and counts a lost wake-up or an idle timeout.  Returns
 * true when the consumer reset the word itself.
 */
bool lull__park_finish(struct lull_ring *ring, bool timed_out);

/*
 * How long a consumer whose opt-in safety net fired lets an in-flight
 * producer claim the wake-up before counting a lost one.
 */
#define LULL_PARK_CLAIM_GRACE_NS (200u * 1000u)

/*
 * A duration this long or longer (about 292 years) is no timeout at all:
 * the waits take it as "forever" instead of converting it, so that no
 * conversion of a caller's or a config's duration can overflow.
 */
#define LULL_NS_FOREVER ((uint64_t)INT64_MAX)

/* Time now on CLOCK_MONOTONIC, in ns. */
uint64_t lull__now_ns(void);

/* @now + @timeout_ns, saturated at UINT64_MAX (no deadline). */
uint64_t lull__deadline_ns(uint64_t now, uint64_t timeout_ns);

/*
 * The safety net a consumer uses: @configured_ns when not 0, else the
 * process default: off (0) unless the environment variable
 * LULL_SAFETY_NET_MS sets one (read once).
 */
uint64_t lull__safety_ns(uint64_t configured_ns);

/*
 * Consumer: spin on the ring for up to ring->spin_ns (adaptive: see
 * LULL_PARK_SPIN_ADAPTIVE); true if readable.
 */
bool lull__spin_for_record(struct lull_ring *ring);

/* Consumer: make sure ring->eventfd exists and is the region's wake_fd. */
int lull__ring_eventfd(struct lull_ring *ring);

/* Consumer: publish @fd as this region's eventfd, or withdraw it (-1). */
void lull__wake_fd_set(struct lull_region *region, int fd);

/* Relaxed increment of a counter that has a single writer. */
static inline void lull__count(_Atomic uint64_t *counter)
{
	atomic_store_explicit(counter,
			      atomic_load_explicit(counter,
						   memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* Total payload of an iovec array, or a negative errno. */
int lull__iov_length(const struct lull_producer *prod, const struct iovec *iov,
		     int iovcnt, size_t *lenp);

/* Copy an iovec array to @dst. */
void lull__iov_copy(void *dst, const struct iovec *iov, int iovcnt);

#endif /* LULL_INTERNAL_H */
