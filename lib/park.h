/* SPDX-License-Identifier: MIT */
/*
 * park.h - THE park/wake protocol, private: the producer's half inline
 * (commit barrier, check, and the out-of-line wake claim and wake of
 * wake.c), the consumer's steps (park.c), and the room handshake of
 * lull_producer_wait() (the same protocol with the roles swapped).  Each
 * step is named as in the Promela model, test/model/park.pml.
 *
 *   consumer (park.c)                    producer (here, after a commit)
 *   announce: park = how, barrier mode   commit: record published
 *   barrier (lull__barrier_heavy)        barrier (lull__notify_barrier)
 *   recheck: readable? -> abandon        check: park != AWAKE ?
 *   sleep (futex, eventfd, io_uring)     wake_claim: CAS park -> AWAKE
 *   finish: park = AWAKE                 wake: futex wake / eventfd write
 */
#ifndef LULL_PRIVATE_PARK_H
#define LULL_PRIVATE_PARK_H

#include "handles.h"
#include "sys.h"

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
 *
 * Which of the two is cheaper depends on the traffic: membarrier(2) costs
 * some 0.4 us a park (microseconds more when it interrupts a CPU running
 * a producer), a fence little where a wake-up call follows the commit
 * anyway.  So an asymmetric region switches to fences on both sides
 * while its consumer parks every LULL_PARK_FENCE_RECORDS records or
 * fewer, and back when records stream (lull__park_announce()).  The
 * consumer asks for fences through the region's park_fence word, and
 * parks with a fence alone only after one park that stored park_fence = 1
 * and then called membarrier(2).  That is what makes a producer's stale
 * read of park_fence harmless: a producer that read 0 and so did not
 * fence made that read before its CPU's barrier in that membarrier(2)
 * (after it, the read would have returned the 1 stored before), so its
 * commit, earlier still, was visible to every recheck after that call;
 * a producer that read 1 fences, and the fence pairs with the
 * consumer's.  Going back needs no such step: a producer that still sees
 * 1 fences for nothing, and one that sees 0 is ordered by the consumer's
 * membarrier(2) as before.
 */
void lull__wake(struct lull_producer *prod, uint32_t seen);

/*
 * Wake a consumer that the park word says is parked (@seen): the
 * producers' wake-up, also used by shutdown.  An eventfd park is woken
 * only through the eventfd this process published for the region.
 */
void lull__wake_region(struct lull_region *region, uint32_t seen);

/*
 * The consumer wakes its own park (@seen), armed on an io_uring: a futex
 * wake, or a write to the handle's own eventfd, never to the region's
 * wake_fd.
 */
void lull__wake_own(struct lull_ring *ring, uint32_t seen);

/*
 * The producer's side of the SPSC busy handshake, and the first half of
 * the park's (lull__notify_barrier()): a compiler barrier where the
 * consumer uses membarrier(2) (@asym, LULL_REGION_ASYM_BARRIER), a seq_cst
 * fence where it fences too.  Pairs with lull__busy_barrier(), and with
 * the park barrier.
 */
static inline void lull__barrier_light(bool asym)
{
	if (asym)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
}

/* The same, for a producer handle. */
static inline void lull__producer_barrier(const struct lull_producer *prod)
{
	lull__barrier_light(prod->asym_barrier);
}

/*
 * The producer's barrier between a commit and its load of the park word
 * (notify_barrier in the model): a fence, or in an asymmetric region the
 * compiler's, plus a fence while the consumer asks for them (park_fence,
 * see above lull__wake()).  Pairs with the consumer's park barrier.
 */
static inline void lull__notify_barrier(struct lull_region *region,
					bool asym)
{
	/*
	 * Written out rather than as lull__barrier_light() and a test of
	 * @asym after it: that form tested @asym twice, and the SPSC write
	 * ran about 3% slower on one CPU (three interleaved pairs).
	 */
	if (!asym) {
		atomic_thread_fence(memory_order_seq_cst);
		return;
	}
	atomic_signal_fence(memory_order_seq_cst);
	/*
	 * Relaxed: pairs with the consumer's stores of park_fence in
	 * lull__park_announce() and lull__park_fence_off(), which its
	 * membarrier(2) orders; a stale 0 is harmless, a 1 is answered by
	 * the fence below (both argued above lull__wake()).  The word
	 * shares its line with the park word, loaded next anyway.
	 */
	if (atomic_load_explicit(&region->park_fence, memory_order_relaxed))
		/* Pairs with the fence of the consumer's fenced parks. */
		atomic_thread_fence(memory_order_seq_cst);
}

/* After a commit: the barrier, then the park word as this producer sees it. */
static inline uint32_t lull__park_seen(const struct lull_producer *prod)
{
	lull__notify_barrier(prod->region, prod->asym_barrier);
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
static inline void lull__space_notify(const struct lull_ring *ring)
{
	struct lull_region *region = ring->region;

	if (ring->flags & LULL_REGION_ASYM_BARRIER)
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
 * Consumer: the barrier that pairs with lane_enter()'s, whatever mode the
 * parks are in (a producer marks itself busy with the compiler's barrier
 * alone in an asymmetric region).  Returns 0 or a negative errno, as
 * lull__barrier_heavy().
 */
static inline int lull__busy_barrier(const struct lull_ring *ring)
{
	return lull__barrier_heavy(ring->flags & LULL_REGION_ASYM_BARRIER);
}

/*
 * When an asymmetric region's parks switch to fences: the consumer read
 * at most LULL_PARK_FENCE_RECORDS records since its last park.  Then
 * nearly every commit is followed by its producer's wake-up call, a
 * full barrier of its own, so the fence before it costs next to nothing,
 * where membarrier(2) costs the consumer 0.4 to 2.5 us a park
 * (perf/README.md).  More records a park, and the commits between two
 * wake-ups pay their fences in full: with the consumer reading right
 * behind them each waits for the line just read, a cache-line round trip
 * rather than 5 ns, which slows the producers until the consumer parks
 * more often still (4 producers to one MPSC ring, across CPUs, ran at
 * 0.5x to 0.8x when every park of fewer than 256 records asked).  A park
 * with no record read since the last one (after a stale wake-up, or a
 * claim not committed yet) changes nothing, and a read past
 * LULL_PARK_STREAM_RECORDS without a park takes the request back at once
 * (a stream).
 */
#define LULL_PARK_FENCE_RECORDS 4u
#define LULL_PARK_STREAM_RECORDS 256u

/*
 * Consumer: producers need not fence any more (records stream, or the
 * parks are about to use membarrier(2) again).
 */
static inline void lull__park_fence_off(struct lull_ring *ring)
{
	if (!ring->park_fence_asked)
		return;
	/*
	 * Relaxed: pairs with the producers' load in lull__notify_barrier().
	 * One that still reads 1 fences for nothing; one that reads 0 is
	 * ordered by the next park's membarrier(2).
	 */
	atomic_store_explicit(&ring->region->park_fence, 0,
			      memory_order_relaxed);
	ring->park_fence_asked = false;
	ring->park_fenced = false;
}

/*
 * The consumer's steps, named as in test/model/park.pml.  A consumer of
 * one ring takes them through lull__park_begin(); the loop takes them for
 * all its rings at once: announce on each, one barrier
 * (lull__barrier_heavy() for any asymmetric region among them), re-check
 * each (lull__ring_readable()), then on every ring either abandon (a
 * re-check found work) or sleeps, and after the sleep lull__park_finish().
 */
/*
 * announce: store how the consumer will sleep (LULL_PARK_FUTEX, ...), and
 * choose the barrier's mode.  Returns whether the barrier that follows
 * must be membarrier(2) (lull__barrier_heavy(true)); false for a
 * symmetric region, or once producers fence (then the fence pairs).
 */
bool lull__park_announce(struct lull_ring *ring, uint32_t how);
/*
 * After the barrier that followed the announce succeeded: an asked-for
 * park_fence is now seen by every producer, and parks may fence alone.
 */
void lull__park_fence_settle(struct lull_ring *ring);
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
 * Records a consumer reads between two waits that make it yield the CPU
 * once before it parks (lull_ring_wait(), the loop): a stream, whose
 * producer may be waiting for our CPU.
 */
#define LULL_PARK_YIELD_RECORDS 32u

/*
 * The temporal slip of the reads (ring_read.c), with the adaptive spin
 * only: after two reads in a row that found records but reached the
 * producers' end within LULL_SLIP_RUN_BYTES (a quarter of a smaller lane)
 * of where they began, the next read first holds back, from
 * LULL_SLIP_MIN_NS doubling up to LULL_SLIP_MAX_NS, the most it delays a
 * record.  16 KiB: a run whose last line still costs a round trip or two
 * must be long for them to vanish in it (perf/README.md).
 */
#define LULL_SLIP_RUN_BYTES (16u * 1024)
#define LULL_SLIP_MIN_NS 64u
#define LULL_SLIP_MAX_NS 4096u

/*
 * The smallest lap in which a read of a one-lane ring ends a quarter lap
 * past the head, to give the producer its space back (gives_back() in
 * ring_read.c): four of the slip's long reads.
 */
#define LULL_GIVE_BACK_MIN_LAP (4 * LULL_SLIP_RUN_BYTES)

/*
 * How long a consumer whose opt-in safety net fired lets an in-flight
 * producer claim the wake-up before counting a lost one.
 */
#define LULL_PARK_CLAIM_GRACE_NS (200u * 1000u)

/*
 * The safety net a consumer uses: @configured_ns when not 0, else the
 * process default: off (0) unless the environment variable
 * LULL_SAFETY_NET_MS sets one (read once).
 */
uint64_t lull__safety_ns(uint64_t configured_ns);

/* Consumer: make sure ring->eventfd exists and is published (wake.c). */
int lull__ring_eventfd(struct lull_ring *ring);

/*
 * Consumer: publish @fd as this region's eventfd in this process, or
 * withdraw it (-1: then no wake-up writes it any more, and it may be
 * closed).  Returns 0, or -ENOMEM when the process has too many published
 * already (wake.c).  Wake-ups write only what was published here, never
 * the region's wake_fd.
 */
int lull__wake_fd_set(struct lull_region *region, int fd);

/* The eventfd this process published for @region, or -1. */
int lull__wake_fd_of(const struct lull_region *region);

#endif /* LULL_PRIVATE_PARK_H */
