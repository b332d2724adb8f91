/* SPDX-License-Identifier: MIT */
/*
 * region.h - the ring region: everything a ring is, in one block of memory
 * with no pointers, and its record headers.  Versioned: a change of any
 * offset below bumps LULL_LAYOUT_VERSION, and the static asserts hold the
 * layout to it.
 */
#ifndef LULL_PRIVATE_REGION_H
#define LULL_PRIVATE_REGION_H

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lull.h"

/*
 * Fields written by different sides live this far apart: two 64-byte lines,
 * because x86's adjacent-line prefetcher pulls lines in pairs.
 */
#define LULL_LINE_PAIR 128

#define LULL_REGION_MAGIC 0x6c756c6cu /* "lull" */
#define LULL_LAYOUT_VERSION 6u
#define LULL_REGION_LANES_OFFSET 1024u

/*
 * The topology of a LULL_RING_LANES(n) region (region.mode), beside
 * LULL_RING_SPSC and LULL_RING_MPSC; its lane count is in region.lanes.
 */
#define LULL_MODE_LANES 3u

/*
 * A lane: one sequence of records with its own tail and head, and the
 * data area that holds them.  SPSC and MPSC regions have one lane (MPSC
 * producers share it, claiming with a CAS on its tail); a LANES region
 * has one per producer, each written like an SPSC ring and merged by the
 * consumer, so producers never touch a line another producer writes.
 */
struct lull_lane {
	/*
	 * SPSC and LANES: end of the published records, stored relaxed by
	 * the lane's producer; read only by a closing consumer (after
	 * acquiring busy) and by the lane's next producer (after owner).
	 * MPSC: end of the claimed space, advanced by producers' CAS.
	 * A free-running byte position, always a multiple of 8.
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t tail;
	/*
	 * SPSC and LANES: 1 while the lane's producer is inside a write or
	 * holds a claim, so that a closing consumer knows whether a record
	 * may still be published (lane_enter() in lane.h).  Beside tail:
	 * both are the producer's, and the consumer reads them only while
	 * closing (it finds records in band, never through tail).
	 */
	_Atomic uint32_t busy;
	/* SPSC and LANES: 1 while a producer holds the lane. */
	_Atomic uint32_t owner;
	/*
	 * SPSC and LANES: where the claim the producer holds ends (a
	 * lull_*_claim() or lull_*_claim_batch(), which begin at tail),
	 * stored relaxed before any of it is written; at or behind tail
	 * otherwise.  Read only by the consumer recovering a dead producer's
	 * lane (ring_death.c), which reports the span it skips.
	 */
	_Atomic uint64_t claim_end;

	/* Start of the records not yet consumed, stored by the consumer. */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t head;
};

static_assert(sizeof(struct lull_lane) == 2 * LULL_LINE_PAIR, "lane layout");

/*
 * The region: everything a ring is, in one block of memory with no pointers,
 * so that it may later be mapped at different addresses in different
 * processes.  Offsets are fixed by the static asserts below; changing them
 * means bumping LULL_LAYOUT_VERSION.
 *
 *   0     header      written once at creation, read-only after
 *   128   consumer    the consumer's counters (lull_ring_stats)
 *   256   roles       attach/detach bookkeeping (cold)
 *   384   park        the park word, read by producers after each commit,
 *                     and the shutdown state
 *   512   fatal       the fatal report (code, message)
 *   832   space       producers waiting for room (lull_producer_wait())
 *   1024  lanes       struct lull_lane[lanes], 256 bytes each
 *   data_offset       lanes * capacity bytes of records, lane after lane
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
	uint64_t capacity; /* of each lane */
	uint64_t region_size;
	uint64_t data_offset; /* LULL_REGION_LANES_OFFSET + lanes * 256 */
	uint32_t lanes;

	/* Park counters, written by the consumer only (lull_ring_stats). */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t parks;
	_Atomic uint64_t park_cancels;
	_Atomic uint64_t safety_timeouts;
	_Atomic uint64_t idle_timeouts;
	_Atomic uint64_t claim_waits;

	/* Attached producers, and whether a handle holds the consumer role. */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t producers;
	_Atomic uint32_t consumer;
	/*
	 * LULL_REGION_SHARED only (ring_death.c): roster_gen is bumped by
	 * every attach and detach, so that the consumer watches the
	 * processes in the slot table; recovering counts the dead
	 * producers whose claim or lane the consumer has not recovered
	 * yet (producers that give up a claim then wake it); deaths counts
	 * the producers found dead.
	 */
	_Atomic uint32_t roster_gen;
	_Atomic uint32_t recovering;
	_Atomic uint64_t deaths;
	/*
	 * LULL_REGION_SHARED only: the consumer's process, and its start
	 * time (as in a slot), stored when a handle takes the consumer role
	 * and cleared when it gives it up, so that producers in other
	 * processes watch it through a pidfd (producer_death.c).
	 */
	_Atomic int32_t consumer_pid;
	_Atomic uint64_t consumer_start;
	/*
	 * LULL_REGION_SHARED only: the consumer process's beacon (beacon.c),
	 * published with consumer_pid: its descriptor number in that process
	 * plus one (0: no beacon, as in a fresh region) and the nonce
	 * the beacon holds, so that a producer can tell it opened the right
	 * file.  A word in the beacon changes when the process ends.
	 */
	_Atomic int32_t consumer_beacon_fd;
	_Atomic uint64_t consumer_beacon_nonce;

	/*
	 * The park line.  Producers load park after every commit, so nothing
	 * here is written while the consumer is awake; the other fields are
	 * written only on the wake path.
	 *   park      LULL_PARK_AWAKE, or how the consumer sleeps; the futex
	 *             word of the futex backends
	 *   wake_fd   the eventfd published for LULL_PARK_EVENTFD in process
	 *             wake_pid, -1 when none: for the record only, never
	 *             read back (wake.c keeps the process's own table)
	 *   park_fence  LULL_REGION_ASYM_BARRIER only: 1 while the consumer
	 *             asks producers to fence after each commit, so that its
	 *             parks may fence alone (lull__notify_barrier() in
	 *             park.h); written by the consumer only.  The word was
	 *             wakers until layout 5, unused since the producers
	 *             between reading wake_fd and writing to it are counted
	 *             in their process (wake.c): a shared region, which never
	 *             has the asymmetric barrier, ignores it
	 *   wakes     wake-up system calls made
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t park;
	_Atomic uint32_t state; /* LULL_STATE_*, set once, never cleared */
	_Atomic int32_t wake_fd;
	_Atomic int32_t wake_pid;
	_Atomic uint32_t park_fence;
	_Atomic uint64_t wakes;
	/*
	 * The fatal report: fatal_state 0 free, 1 taken by the first
	 * lull_ring_fatal(), whose caller then owns the fields; the shutdown
	 * that follows publishes them (the FATAL state bit, seq_cst, which
	 * the consumer acquires before it reads them).
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
/* 8u was "no consumer", which nothing read: free, never reused in v2. */
#define LULL_STATE_SEALED 16u  /* the consumer chose fatal-or-poison */

/* MPSC: the tail's low bit says closed, so a claim CAS can never pass a
 * shutdown (positions are multiples of 8). */
#define LULL_TAIL_CLOSED 1u
#define LULL_TAIL_FLAGS 7u

/* Values of the park word. */
#define LULL_PARK_AWAKE 0u
#define LULL_PARK_FUTEX 1u   /* sleeping in a futex wait on the word */
#define LULL_PARK_EVENTFD 2u /* sleeping on the eventfd in wake_fd */
/*
 * Sleeping in a futex wait on the word, as LULL_PARK_FUTEX, with a
 * private futex: lull_ring_wait() on a LULL_REGION_PRIVATE region.  The
 * kernel finds a private futex by address alone, where a shared one costs
 * it a page lookup on both the wait and the wake.  io_uring's waits stay
 * shared (see lull__futex_wait()).
 */
#define LULL_PARK_FUTEX_PRIVATE 3u

/* Region flags (lull_region.flags), fixed at creation. */
/*
 * Producers and the consumer all live in the creating process, which is
 * registered for membarrier(2): the park barrier is asymmetric (see
 * lull__notify()).  Decided once, when the region is created: without it
 * (caller memory, or a registration that failed) both sides fence, and
 * neither side ever changes mode later.
 */
#define LULL_REGION_ASYM_BARRIER 1u
/*
 * Only the creating process maps the region (lull_ring_create()'s private
 * anonymous memory): its futex waits may be private ones.
 */
#define LULL_REGION_PRIVATE 2u
/*
 * Made to be shared between processes (lull_ring_create_shared(),
 * lull_ring_create_named()): the producer slot table follows the data
 * area, and each side watches the other's processes (ring_death.c).
 * Parks on an eventfd are refused, since no other process can write it.
 */
#define LULL_REGION_SHARED 4u
#define LULL_REGION_FLAGS                                                    \
	(LULL_REGION_ASYM_BARRIER | LULL_REGION_PRIVATE | LULL_REGION_SHARED)

static_assert(offsetof(struct lull_region, parks) == 128, "region layout");
static_assert(offsetof(struct lull_region, producers) == 256,
	      "region layout");
static_assert(offsetof(struct lull_region, park) == 384, "region layout");
static_assert(offsetof(struct lull_region, fatal_state) == 512,
	      "region layout");
static_assert(offsetof(struct lull_region, space_waiters) == 832,
	      "region layout");
static_assert(sizeof(struct lull_region) <= LULL_REGION_LANES_OFFSET,
	      "region header overlaps the lanes");

/*
 * The lanes of a region.  Lane @i's records are at data_offset + @i *
 * capacity: a handle computes that once, from the header it checked
 * (ring_setup.c), and never reads those fields again.
 */
static inline struct lull_lane *lull__lane(struct lull_region *region,
					   uint32_t i)
{
	return (struct lull_lane *)((unsigned char *)region +
				    LULL_REGION_LANES_OFFSET) +
	       i;
}

/*
 * A producer slot of a LULL_REGION_SHARED region: one per attached
 * producer, in a table of LULL_PRODUCER_SLOTS after the data area.  The
 * producer's process fills it at attach; the consumer watches that process
 * (a pidfd) and, when it dies, recovers what the slot says it held.
 *
 *   state        FREE, TAKEN (being filled), LIVE, DEAD (found dead by
 *                the consumer, not recovered yet)
 *   pid, start   the producer's process, and its start time in clock
 *                ticks since boot (/proc/PID/stat), so that a pid reused
 *                by another process is not taken for it
 *   lane         SPSC and LANES: the lane it holds
 *   claim_*      MPSC: the claim it is trying or holding.  Before every
 *                CAS of the shared tail it stores [claim_start,
 *                claim_end) and claim_phase CLAIM_TRYING; after a CAS
 *                that won, CLAIM_OWNED, before it writes anything into
 *                the claim; after the commit or abort, CLAIM_NONE.  So a
 *                consumer stuck at a record nobody commits can tell a
 *                dead producer's claim from a live one's (ring_death.c).
 */
#define LULL_SLOT_FREE 0u
#define LULL_SLOT_TAKEN 1u
#define LULL_SLOT_LIVE 2u
#define LULL_SLOT_DEAD 3u

#define LULL_CLAIM_NONE 0u
#define LULL_CLAIM_TRYING 1u
#define LULL_CLAIM_OWNED 2u

struct lull_slot {
	alignas(64) _Atomic uint32_t state;
	_Atomic int32_t pid;
	_Atomic uint64_t start;
	_Atomic uint32_t lane;
	_Atomic uint32_t claim_phase;
	_Atomic uint64_t claim_start;
	_Atomic uint64_t claim_end;
};

static_assert(sizeof(struct lull_slot) == 64, "slot layout");
#define LULL_SLOTS_SIZE \
	((uint64_t)LULL_PRODUCER_SLOTS * sizeof(struct lull_slot))

/*
 * A record header in the data area.  length is the header plus the payload
 * (so never 0 for a written record); the record occupies length rounded up
 * to 8.  In every topology length is the commit flag (only MPSC stores
 * the negative value):
 *     0   not written yet
 *    <0   claimed by a producer, payload being written
 *    >0   committed: type and payload are complete
 * (A committed record of type LULL_TYPE_ARRAY holds packed items; see
 * struct lull_array_header below.)
 * A committed length may carry LULL_LENGTH_BATCH_MORE: the record is not
 * the last of a batch (ring_batch.c), so an immediate shutdown, which
 * discards what is undelivered, never cuts a batch the consumer began.
 * What keeps a length that nobody wrote yet at 0, in each topology:
 *   MPSC  the consumer zeroes all it consumed: producers write their
 *         records in any order, so any 8-byte word of the data area may
 *         be the next one's header.
 *   SPSC, LANES  a lane's one producer writes in order, so only the
 *         length at its tail matters, and only to the consumer: the
 *         producer zeroes the length at its records' end before it
 *         publishes them (lane_clear_next() in lane.h), and the consumer
 *         the one at each head it moves past (consume.h), for the one
 *         case the producer must leave it: a lane exactly full, where
 *         that length is the header of the record at the head.  The rest
 *         of the free space holds whatever earlier laps left there, and
 *         nobody reads it.
 * Lengths and paddings stay below 2^30 (a record is at most capacity / 8,
 * a padding less than the capacity), so the bit is free.
 */
#define LULL_LENGTH_BATCH_MORE 0x40000000
#define LULL_LENGTH_MASK 0x3fffffff

struct lull_record_header {
	_Atomic int32_t length;
	int32_t type;
};

static_assert(sizeof(struct lull_record_header) == LULL_RECORD_HEADER_SIZE,
	      "record header size");

/*
 * A record of type LULL_TYPE_ARRAY holds the records of one write_array()
 * packed (ring_batch.c): this header, then items of item_len bytes each,
 * back to back, as many as fill the rest of the payload.  The consumer
 * hands out each item as a record of item_type (ring_read.c) and never the
 * array itself.  Packed only when item_len is a multiple of 8, so that
 * each item is 8-byte aligned as a record's payload is.
 */
#define LULL_TYPE_ARRAY (-8)

struct lull_array_header {
	int32_t item_type;
	uint32_t item_len;
};

static_assert(sizeof(struct lull_array_header) == 8, "array header size");

#endif /* LULL_PRIVATE_REGION_H */
