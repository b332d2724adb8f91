/* SPDX-License-Identifier: MIT */
/*
 * record.h - the record helpers of the write paths, inline: alignment,
 * addressing, copies of small payloads and of iovec arrays, wrap padding,
 * argument checks.
 */
#ifndef LULL_PRIVATE_RECORD_H
#define LULL_PRIVATE_RECORD_H

#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#include "handles.h"
#include "sys.h"

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
 * Publish the header at @pos: the type, then the length with release.
 * The consumer finds records in band (ring_read.c): a header whose length
 * reads positive is committed.  Pairs with its acquire load of the
 * length: the type, and the payload and any header written before, are
 * visible once the length is.
 */
static inline void lull__header_publish(unsigned char *data, uint64_t mask,
					uint64_t pos, int32_t length,
					int32_t type)
{
	struct lull_record_header *hdr = lull__header_at(data, mask, pos);

	hdr->type = type;
	atomic_store_explicit(&hdr->length, length, memory_order_release);
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

/*
 * Copy a payload of at most LULL_COPY_SHORT_MAX bytes inline: above 16,
 * two or four 16-byte moves from both ends, overlapping.  A call to libc's
 * memcpy costs a return address and the caller's saved registers, each
 * one more store waiting in the store buffer behind the record's stores,
 * which wait for their lines to come back from the consumer: inline, the
 * single-record write of 24 to 64 bytes ran 1.6x to 1.9x faster
 * (perf/README.md, "Short payloads without a call").  8 bytes, the most
 * common, first: tested after 16, it cost that case 4% to 7%.
 */
#define LULL_COPY_SHORT_MAX 64u

static inline void lull__copy_short(void *dst, const void *src, size_t len)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (likely(len == 8)) {
		memcpy(d, s, 8);
	} else if (len <= 16) {
		lull__copy_small(dst, src, len);
	} else if (len <= 32) {
		memcpy(d, s, 16);
		memcpy(d + len - 16, s + len - 16, 16);
	} else {
		memcpy(d, s, 16);
		memcpy(d + 16, s + 16, 16);
		memcpy(d + len - 32, s + len - 32, 16);
		memcpy(d + len - 16, s + len - 16, 16);
	}
}

/*
 * Copy a payload of more than 64 and at most LULL_COPY_MEDIUM_MAX bytes
 * inline: four 16-byte moves from each end, overlapping.  On the general
 * write path (which saves its registers anyway) this spares libc's call
 * and its size dispatch: 1.07x to 1.27x at 72 to 128 bytes.  A loop of
 * such moves gained less from 192 bytes and lost 3% at 248 (perf/README.md,
 * "Short payloads without a call").
 */
#define LULL_COPY_MEDIUM_MAX 128u

static inline void lull__copy_medium(void *dst, const void *src, size_t len)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	memcpy(d, s, 16);
	memcpy(d + 16, s + 16, 16);
	memcpy(d + 32, s + 32, 16);
	memcpy(d + 48, s + 48, 16);
	memcpy(d + len - 64, s + len - 64, 16);
	memcpy(d + len - 48, s + len - 48, 16);
	memcpy(d + len - 32, s + len - 32, 16);
	memcpy(d + len - 16, s + len - 16, 16);
}

/*
 * Payloads from LULL_COPY_LINES_MIN to LULL_COPY_LINES_MAX bytes are copied
 * by whole aligned lines where the CPU can (copy.c): the range where that
 * measured faster than libc's memcpy.  At 4 KiB the shared-tail ring lost
 * a sixth with it (perf/README.md, "Large payloads by whole lines").
 */
#define LULL_COPY_LINES_MIN 256u
#define LULL_COPY_LINES_MAX 2048u

void lull__copy_lines(void *dst, const void *src, size_t len);

/* Copy a payload of @len bytes into a record (@src may be NULL for 0). */
static inline void lull__copy_payload(void *dst, const void *src, size_t len)
{
	if (len <= LULL_COPY_SHORT_MAX)
		lull__copy_short(dst, src, len);
	else if (len <= LULL_COPY_MEDIUM_MAX)
		lull__copy_medium(dst, src, len);
	else if (len >= LULL_COPY_LINES_MIN && len <= LULL_COPY_LINES_MAX)
		lull__copy_lines(dst, src, len);
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

/*
 * Zero the length of the header at @pos: "not written yet" (region.h says
 * who does, and when).  Relaxed: whoever clears it publishes something
 * with a release store after, which orders it.
 */
static inline void lull__length_clear(unsigned char *data, uint64_t mask,
				      uint64_t pos)
{
	atomic_store_explicit(&lull__header_at(data, mask, pos)->length, 0,
			      memory_order_relaxed);
}

/*
 * Zero [from, to) of a lane's data area @data (positions free-running,
 * @mask the capacity - 1), which may wrap: what the consumer of the
 * shared MPSC lane consumed, so that a header nobody wrote yet reads 0 on
 * the next lap.
 */
static inline void lull__zero_span(unsigned char *data, uint64_t mask,
				   uint64_t from, uint64_t to)
{
	uint64_t off = from & mask;
	uint64_t len = to - from;
	uint64_t first = mask + 1 - off;

	if (first > len)
		first = len;
	memset(data + off, 0, first);
	if (len > first)
		memset(data, 0, len - first);
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
static inline int lull__iov_length(const struct lull_producer *prod,
				   const struct iovec *iov, int iovcnt,
				   size_t *lenp)
{
	size_t max = prod->max_record - LULL_RECORD_HEADER_SIZE;
	size_t len = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EINVAL;
		if (iov[i].iov_len > max || len + iov[i].iov_len > max)
			return -EMSGSIZE;
		len += iov[i].iov_len;
	}
	*lenp = len;
	return 0;
}

/* Copy an iovec array to @dst. */
static inline void lull__iov_copy(void *dst, const struct iovec *iov,
				  int iovcnt)
{
	unsigned char *p = dst;

	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
}

#endif /* LULL_PRIVATE_RECORD_H */
