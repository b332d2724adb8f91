/* SPDX-License-Identifier: MIT */
/*
 * ring_setup.c - the cold side of rings: laying out, creating, opening
 * and destroying regions and their handles, and the consumer role.
 * Nothing here is on the data path; producers attach in producer.c.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "park.h"

static bool capacity_is_valid(size_t capacity)
{
	return capacity >= LULL_RING_MIN_CAPACITY &&
	       capacity <= LULL_RING_MAX_CAPACITY &&
	       (capacity & (capacity - 1)) == 0;
}

/*
 * Split creation flags into the topology and its lane count: SPSC and
 * MPSC have one lane, LULL_RING_LANES(n) has n.  Returns false for
 * anything else.
 */
static bool topology_parse(unsigned flags, uint32_t *modep, uint32_t *lanesp)
{
	uint32_t mode = flags & 0xffu, lanes = flags >> 8;

	*modep = 0;
	*lanesp = 0;
	if (mode == LULL_RING_SPSC || mode == LULL_RING_MPSC) {
		if (lanes)
			return false;
		lanes = 1;
	} else if (mode != LULL_MODE_LANES || lanes < 1 ||
		   lanes > LULL_RING_LANES_MAX) {
		return false;
	}
	*modep = mode;
	*lanesp = lanes;
	return true;
}

static uint64_t region_data_offset(uint32_t lanes)
{
	return LULL_REGION_LANES_OFFSET +
	       (uint64_t)lanes * sizeof(struct lull_lane);
}

/* A shared region's slot table follows its data. */
static uint64_t region_size(size_t capacity, uint32_t lanes,
			    uint32_t region_flags)
{
	return region_data_offset(lanes) + (uint64_t)lanes * capacity +
	       (region_flags & LULL_REGION_SHARED ? LULL_SLOTS_SIZE : 0);
}

ssize_t lull__region_size(size_t capacity, unsigned flags,
			  uint32_t region_flags)
{
	uint32_t mode, lanes;

	if (!capacity_is_valid(capacity) ||
	    !topology_parse(flags, &mode, &lanes))
		return -EINVAL;
	return (ssize_t)region_size(capacity, lanes, region_flags);
}

LULL_EXPORT ssize_t lull_ring_region_size_for(size_t capacity, unsigned flags)
{
	return lull__region_size(capacity, flags, 0);
}

LULL_EXPORT ssize_t lull_ring_region_size(size_t capacity)
{
	return lull_ring_region_size_for(capacity, LULL_RING_SPSC);
}

/*
 * What a region's header says, read once: every later use takes these
 * copies, never the header, which another process may rewrite at any
 * time (a check of one value followed by a use of a fresh read would let
 * a hostile writer slip a lane count or a capacity past the check).
 */
struct geometry {
	uint32_t mode;
	uint32_t lanes;
	uint32_t flags;
	uint64_t capacity;
	uint64_t size; /* of the region */
};

/*
 * Point each consumer cursor at its lane, from where the previous
 * consumer (if any) stopped.  A head is a position the consumer publishes,
 * so a multiple of 8; any other value was not written by a consumer, and
 * the region is refused (-EPROTO) rather than read from a misaligned
 * header.
 */
static int cursors_load(struct lull_ring *ring)
{
	for (uint32_t i = 0; i < ring->lanes; i++) {
		/*
		 * Pairs with the release store of head by the previous
		 * consumer: we resume exactly where it stopped, with its
		 * zeroing done.
		 */
		ring->cursor[i].head = atomic_load_explicit(
			&ring->cursor[i].lane->head, memory_order_acquire);
		if (ring->cursor[i].head & (LULL_RECORD_ALIGN - 1))
			return -EPROTO;
	}
	return 0;
}

static int handle_new(struct lull_ring **ringp, struct lull_region *region,
		      const struct geometry *g)
{
	struct lull_ring *ring;
	size_t size = sizeof(*ring) + g->lanes * sizeof(ring->cursor[0]);
	uint64_t data_offset = region_data_offset(g->lanes);

	/* aligned_alloc wants a multiple of the alignment. */
	size = (size + LULL_LINE_PAIR - 1) & ~(size_t)(LULL_LINE_PAIR - 1);
	ring = aligned_alloc(LULL_LINE_PAIR, size);
	if (!ring)
		return -ENOMEM;
	memset(ring, 0, size);
	ring->region = region;
	ring->mask = g->capacity - 1;
	ring->mode = g->mode;
	ring->lanes = g->lanes;
	ring->flags = g->flags;
	ring->region_size = g->size;
	ring->max_record = (uint32_t)(g->capacity / 8);
	atomic_init(&ring->attached, 0);
	for (uint32_t i = 0; i < ring->lanes; i++) {
		ring->cursor[i].lane = lull__lane(region, i);
		ring->cursor[i].data = (unsigned char *)region + data_offset +
				       (uint64_t)i * g->capacity;
	}
	ring->spin_ns = LULL_PARK_SPIN_DEFAULT_NS;
	ring->safety_ns = lull__safety_ns(0);
	ring->eventfd = -1;
	ring->shm_fd = -1;
	*ringp = ring;
	return 0;
}

/*
 * Whether this process can use the asymmetric park barrier: registered for
 * private expedited membarrier(2) (idempotent, and cheap after the first).
 */
static bool asym_barrier_available(void)
{
	return LULL_SYSCALL(syscall(SYS_membarrier,
				    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
				    0, 0)) == 0;
}

static void consumer_role_drop(struct lull_ring *ring)
{
	if (!ring->is_consumer)
		return;
	if (ring->flags & LULL_REGION_SHARED)
		lull__consumer_announce(ring, false);
	ring->is_consumer = false;
	/* Pairs with the acquire CAS in consumer_role_take(). */
	atomic_store_explicit(&ring->region->consumer, 0,
			      memory_order_release);
}

/* Take the region's single consumer role for @ring. */
static int consumer_role_take(struct lull_ring *ring)
{
	uint32_t expected = 0;

	/*
	 * acq_rel: acquire pairs with the release in consumer_role_drop(), so
	 * the previous consumer's last head store is visible to us; release
	 * is not needed by anyone but keeps the pairing symmetric.
	 */
	if (!atomic_compare_exchange_strong_explicit(&ring->region->consumer,
						     &expected, 1,
						     memory_order_acq_rel,
						     memory_order_relaxed))
		return -EBUSY;
	ring->is_consumer = true;
	if (cursors_load(ring) < 0) {
		consumer_role_drop(ring);
		return -EPROTO;
	}
	if (ring->flags & LULL_REGION_SHARED)
		lull__consumer_announce(ring, true);
	return 0;
}

static void region_format(struct lull_region *region, size_t size,
			  size_t capacity, uint32_t mode, uint32_t lanes,
			  uint32_t flags, bool fresh)
{
	struct lull_lane *lane;

	/*
	 * The data area must read as zero: a zero length is how the consumer
	 * knows a record is not written yet, and an MPSC producer's first
	 * record may go anywhere in the first lap (a lane producer's goes at
	 * its start, and clears the length past it itself, region.h).
	 * Fresh anonymous memory already does, untouched: clearing it would
	 * commit every page of a large ring before its first record (a
	 * 1 GiB ring took seconds to create).
	 */
	if (!fresh)
		memset(region, 0, size);
	region->layout_version = LULL_LAYOUT_VERSION;
	region->mode = mode;
	region->flags = flags;
	region->capacity = capacity;
	region->lanes = lanes;
	region->region_size = region_size(capacity, lanes, flags);
	region->data_offset = region_data_offset(lanes);
	for (uint32_t i = 0; i < lanes; i++) {
		lane = lull__lane(region, i);
		atomic_init(&lane->tail, 0);
		atomic_init(&lane->head, 0);
		atomic_init(&lane->busy, 0);
		atomic_init(&lane->owner, 0);
		atomic_init(&lane->claim_end, 0);
	}
	atomic_init(&region->producers, 0);
	atomic_init(&region->consumer, 0);
	atomic_init(&region->park, LULL_PARK_AWAKE);
	atomic_init(&region->state, 0);
	atomic_init(&region->fatal_state, 0);
	atomic_init(&region->wake_fd, -1);
	atomic_init(&region->wake_pid, 0);
	atomic_init(&region->park_fence, 0);
	atomic_init(&region->space_waiters, 0);
	atomic_init(&region->space_seq, 0);
	atomic_init(&region->space_wakes, 0);
	atomic_init(&region->roster_gen, 0);
	atomic_init(&region->recovering, 0);
	atomic_init(&region->deaths, 0);
	atomic_init(&region->consumer_pid, 0);
	atomic_init(&region->consumer_start, 0);
	/*
	 * Pairs with the acquire load of magic in lull_ring_open(): a handle
	 * that sees the magic sees every field above.
	 */
	atomic_store_explicit(&region->magic, LULL_REGION_MAGIC,
			      memory_order_release);
}

int lull__ring_make(struct lull_ring **ringp, void *mem, size_t size,
		    size_t capacity, unsigned flags, uint32_t region_flags,
		    bool fresh, bool consumer)
{
	struct lull_ring *ring;
	struct geometry g = { .capacity = capacity, .size = size,
			      .flags = region_flags };
	int ret;

	(void)topology_parse(flags, &g.mode, &g.lanes); /* checked by callers */
	region_format(mem, size, capacity, g.mode, g.lanes, g.flags, fresh);
	ret = handle_new(&ring, mem, &g);
	if (ret < 0)
		return ret;
	if (consumer) {
		ret = consumer_role_take(ring);
		if (ret < 0) {
			free(ring);
			return ret;
		}
	}
	*ringp = ring;
	return 0;
}

static int create_in(struct lull_ring **ringp, void *mem, size_t size,
		     size_t capacity, unsigned flags, bool owns_region)
{
	/*
	 * A region lull allocates privately can only have producers in this
	 * process, so the asymmetric barrier applies, and private futexes.
	 * Caller memory may be shared with other processes, which membarrier
	 * does not reach, and whose waits a private futex would not meet.
	 */
	uint32_t region_flags = (owns_region ? LULL_REGION_PRIVATE : 0) |
				(owns_region && asym_barrier_available()
					 ? LULL_REGION_ASYM_BARRIER
					 : 0);
	int ret = lull__ring_make(ringp, mem, size, capacity, flags,
				  region_flags, owns_region, true);

	if (ret == 0)
		(*ringp)->owns_region = owns_region;
	return ret;
}

LULL_EXPORT int lull_ring_create_in(struct lull_ring **ringp, void *mem,
				    size_t size, size_t capacity,
				    unsigned flags)
{
	ssize_t need = lull_ring_region_size_for(capacity, flags);

	if (!ringp || !mem || need < 0)
		return -EINVAL;
	if ((uintptr_t)mem % LULL_LINE_PAIR || size < (size_t)need)
		return -EINVAL;
	return create_in(ringp, mem, (size_t)need, capacity, flags, false);
}

LULL_EXPORT int lull_ring_create(struct lull_ring **ringp, size_t capacity,
				 unsigned flags)
{
	ssize_t need = lull_ring_region_size_for(capacity, flags);
	int ret, saved_errno;
	void *mem;

	if (!ringp || need < 0)
		return -EINVAL;
	/*
	 * mmap: page aligned, and large rings are committed lazily.  errno is
	 * restored: lull reports errors only through its return values.
	 */
	saved_errno = errno;
	mem = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	errno = saved_errno;
	if (mem == MAP_FAILED)
		return -ENOMEM;
	ret = create_in(ringp, mem, (size_t)need, capacity, flags, true);
	if (ret < 0)
		munmap(mem, (size_t)need);
	return ret;
}

/*
 * Read a region's header once into *g and check it: the magic, the
 * version, a topology lull makes, a lane count that matches it, known
 * flags, a valid capacity, and offsets and a size that follow from them.
 * Returns 0, or -EPROTO.
 */
static int region_check(const struct lull_region *region, struct geometry *g)
{
	uint32_t version, mode, flags, lanes, parsed_mode, parsed_lanes;
	uint64_t capacity, size, data_offset;

	/* Pairs with the release store of magic in region_format(). */
	if (atomic_load_explicit(&region->magic, memory_order_acquire) !=
	    LULL_REGION_MAGIC)
		return -EPROTO;
	version = region->layout_version;
	mode = region->mode;
	flags = region->flags;
	lanes = region->lanes;
	capacity = region->capacity;
	size = region->region_size;
	data_offset = region->data_offset;
	/*
	 * The mode word is one of the three lull stores, exactly: parsing
	 * it as creation flags would take 0x303 for LANES(3).
	 */
	if (version != LULL_LAYOUT_VERSION ||
	    (mode != LULL_RING_SPSC && mode != LULL_RING_MPSC &&
	     mode != LULL_MODE_LANES) ||
	    (mode == LULL_MODE_LANES && lanes > LULL_RING_LANES_MAX) ||
	    !topology_parse(mode == LULL_MODE_LANES ? LULL_RING_LANES(lanes)
						    : mode,
			    &parsed_mode, &parsed_lanes) ||
	    parsed_lanes != lanes || (flags & ~LULL_REGION_FLAGS) ||
	    /* Shared: never one process's barrier or futexes. */
	    ((flags & LULL_REGION_SHARED) &&
	     (flags & (LULL_REGION_ASYM_BARRIER | LULL_REGION_PRIVATE))) ||
	    !capacity_is_valid(capacity) ||
	    data_offset != region_data_offset(lanes) ||
	    size != region_size(capacity, lanes, flags))
		return -EPROTO;
	*g = (struct geometry){ .mode = parsed_mode, .lanes = parsed_lanes,
				.flags = flags, .capacity = capacity,
				.size = size };
	return 0;
}

LULL_EXPORT int lull_ring_open(struct lull_ring **ringp, void *mem,
			       size_t size, unsigned flags)
{
	return lull__ring_open(ringp, mem, size, flags, false);
}

int lull__ring_open(struct lull_ring **ringp, void *mem, size_t size,
		    unsigned flags, bool shared)
{
	struct lull_region *region = mem;
	struct lull_ring *ring;
	struct geometry g;
	int ret;

	if (!ringp || !mem || (uintptr_t)mem % LULL_LINE_PAIR ||
	    (flags & ~LULL_OPEN_CONSUMER) || size < LULL_REGION_LANES_OFFSET)
		return -EINVAL;
	ret = region_check(region, &g);
	if (ret < 0)
		return ret;
	if (shared && !(g.flags & LULL_REGION_SHARED))
		return -EPROTO;
	if (size < g.size)
		return -EINVAL;
	ret = handle_new(&ring, region, &g);
	if (ret < 0)
		return ret;
	if (flags & LULL_OPEN_CONSUMER) {
		ret = consumer_role_take(ring);
		if (ret < 0) {
			free(ring);
			return ret;
		}
	}
	*ringp = ring;
	return 0;
}

LULL_EXPORT int lull_ring_destroy(struct lull_ring *ring)
{
	if (!ring)
		return -EINVAL;
	/*
	 * Busy while producers use this handle, while a loop reads it, and
	 * while an io_uring still holds a park that points into it.
	 */
	if (atomic_load_explicit(&ring->attached, memory_order_relaxed) ||
	    ring->loop || ring->uring_pending)
		return -EBUSY;
	if (ring->eventfd >= 0) {
		if (lull__wake_fd_of(ring->region) == ring->eventfd)
			lull__wake_fd_set(ring->region, -1);
		close(ring->eventfd);
	}
	lull__watch_free(ring);
	consumer_role_drop(ring);
	if (ring->owns_region)
		munmap(ring->region, ring->region_size);
	if (ring->shm_fd >= 0) {
		munmap(ring->region, ring->map_size);
		LULL_SYSCALL(close(ring->shm_fd));
	}
	free(ring);
	return 0;
}

LULL_EXPORT ssize_t lull_ring_capacity(const struct lull_ring *ring)
{
	if (!ring)
		return -EINVAL;
	return (ssize_t)(ring->mask + 1);
}

LULL_EXPORT ssize_t lull_ring_max_payload(const struct lull_ring *ring)
{
	if (!ring)
		return -EINVAL;
	return (ssize_t)(ring->max_record - LULL_RECORD_HEADER_SIZE);
}
