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
#include <stdint.h>

#include "lull.h"

#define LULL_EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/*
 * Fields written by different sides live this far apart: two 64-byte lines,
 * because x86's adjacent-line prefetcher pulls lines in pairs.
 */
#define LULL_LINE_PAIR 128

#define LULL_REGION_MAGIC 0x6c756c6cu /* "lull" */
#define LULL_LAYOUT_VERSION 1u
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
 *   384   roles       attach/detach bookkeeping (cold)
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
	 * SPSC: end of the committed records, stored by the producer.
	 * MPSC: end of the claimed space, advanced by producers' CAS.
	 * A free-running byte position, always a multiple of 8.
	 */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t tail;

	/* Start of the records not yet consumed, stored by the consumer. */
	alignas(LULL_LINE_PAIR) _Atomic uint64_t head;

	/* Attached producers, and whether a handle holds the consumer role. */
	alignas(LULL_LINE_PAIR) _Atomic uint32_t producers;
	_Atomic uint32_t consumer;
};

static_assert(offsetof(struct lull_region, tail) == 128, "region layout");
static_assert(offsetof(struct lull_region, head) == 256, "region layout");
static_assert(offsetof(struct lull_region, producers) == 384,
	      "region layout");
static_assert(sizeof(struct lull_region) <= LULL_REGION_DATA_OFFSET,
	      "region header overlaps the data");

/*
 * A record header in the data area.  length is the header plus the payload
 * (so never 0 for a written record); the record occupies length rounded up
 * to 8.  In an MPSC ring length is the commit flag:
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
	uint64_t tail_cache;                    /* SPSC: last tail seen */
	bool peeked;
};

/* One producer's private state, allocated on its own lines. */
struct lull_producer {
	alignas(LULL_LINE_PAIR) struct lull_ring *ring;
	struct lull_region *region;
	unsigned char *data;
	uint64_t mask;
	uint32_t mode;
	uint32_t max_record;
	uint64_t tail;       /* SPSC: next write position (MPSC: unused) */
	uint64_t head_cache; /* the consumer's head, last time we looked */

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

/* Total payload of an iovec array, or a negative errno. */
int lull__iov_length(const struct lull_producer *prod, const struct iovec *iov,
		     int iovcnt, size_t *lenp);

/* Copy an iovec array to @dst. */
void lull__iov_copy(void *dst, const struct iovec *iov, int iovcnt);

#endif /* LULL_INTERNAL_H */
