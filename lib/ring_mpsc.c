/* SPDX-License-Identifier: MIT */
/*
 * ring_mpsc.c - the multi-producer write calls, lull_mpsc_write() and
 * lull_mpsc_writev(), on the claim and commit of mpsc.h.  Producers never
 * wait for each other; the consumer alone waits, at a record that is
 * claimed and not yet committed.  Claims and batches are in ring_batch.c.
 * A LANES producer may call these too: its own lane is written as an SPSC
 * ring's (ring_spsc.c).
 */
#include <string.h>

#include "mpsc.h"

/* lull_mpsc_write() on the shared MPSC lane. */
static int __attribute__((noinline))
mpsc_write(struct lull_producer *prod, int32_t type, const void *data,
	   size_t len)
{
	uint32_t length;
	uint64_t pos;
	int ret;

	ret = mpsc_check(prod);
	if (unlikely(ret < 0))
		return ret;
	if (unlikely(len && !data))
		return -EINVAL;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = mpsc_reserve(prod, length, &pos);
	if (unlikely(ret < 0))
		return ret;
	lull__copy_payload(lull__header_at(prod->data, prod->mask, pos) + 1,
			   data, len);
	mpsc_commit_at(prod, pos, length, type);
	return 0;
}

/*
 * A LANES producer goes to its lane's write before anything else.  The
 * MPSC write is a function of its own because its prologue saves six
 * registers that a lane's write never needs: ahead of the mode check, it
 * took a fifth of a LANES producer's time at one record per call.  Both
 * calls are tail calls.
 */
LULL_EXPORT int lull_mpsc_write(struct lull_producer *prod, int32_t type,
				const void *data, size_t len)
{
	if (unlikely(prod && prod->mode == LULL_MODE_LANES))
		return lull_spsc_write(prod, type, data, len);
	return mpsc_write(prod, type, data, len);
}

/* lull_mpsc_writev() on the shared MPSC lane. */
static int __attribute__((noinline))
mpsc_writev(struct lull_producer *prod, int32_t type, const struct iovec *iov,
	    int iovcnt)
{
	uint32_t length;
	uint64_t pos;
	size_t len;
	int ret;

	ret = mpsc_check(prod);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__iov_length(prod, iov, iovcnt, &len);
	if (unlikely(ret < 0))
		return ret;
	ret = lull__check_record(prod, type, len);
	if (unlikely(ret < 0))
		return ret;
	length = (uint32_t)(LULL_RECORD_HEADER_SIZE + len);
	ret = mpsc_reserve(prod, length, &pos);
	if (unlikely(ret < 0))
		return ret;
	lull__iov_copy(lull__header_at(prod->data, prod->mask, pos) + 1, iov,
		       iovcnt);
	mpsc_commit_at(prod, pos, length, type);
	return 0;
}

/* As lull_mpsc_write(): a LANES producer first, both tail calls. */
LULL_EXPORT int lull_mpsc_writev(struct lull_producer *prod, int32_t type,
				 const struct iovec *iov, int iovcnt)
{
	if (unlikely(prod && prod->mode == LULL_MODE_LANES))
		return lull_spsc_writev(prod, type, iov, iovcnt);
	return mpsc_writev(prod, type, iov, iovcnt);
}
