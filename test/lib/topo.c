/* SPDX-License-Identifier: MIT */
/* test/lib/topo.c - see topo.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "topo.h"

const struct topo topo_spsc = {
	.flags = LULL_RING_SPSC,
	.name = "spsc",
	.write = lull_spsc_write,
	.writev = lull_spsc_writev,
	.claim = lull_spsc_claim,
	.commit = lull_spsc_commit,
	.abort = lull_spsc_abort,
};

const struct topo topo_mpsc = {
	.flags = LULL_RING_MPSC,
	.name = "mpsc",
	.write = lull_mpsc_write,
	.writev = lull_mpsc_writev,
	.claim = lull_mpsc_claim,
	.commit = lull_mpsc_commit,
	.abort = lull_mpsc_abort,
};

const struct topo *topo_of(unsigned flags)
{
	return flags == LULL_RING_MPSC ? &topo_mpsc : &topo_spsc;
}

const struct topo *topo_other(const struct topo *t)
{
	return t == &topo_spsc ? &topo_mpsc : &topo_spsc;
}

bool topo_is_mpsc(const struct topo *t)
{
	return t->flags == LULL_RING_MPSC;
}

uint8_t pattern_byte(uint32_t seed, size_t i)
{
	uint32_t x = seed * 2654435761u + (uint32_t)i * 40503u + 1u;

	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	return (uint8_t)x;
}

void pattern_fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

size_t pattern_mismatch(const void *buf, size_t len, uint32_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return i;
	return len;
}

int32_t pattern_type(uint32_t seed)
{
	if (seed % 5 == 0)
		return LULL_TYPE_MAX;
	return (int32_t)(1 + seed % 1000);
}

size_t rec_space(size_t len)
{
	size_t align = LULL_RECORD_ALIGN;

	return LULL_RECORD_HEADER_SIZE + ((len + align - 1) & ~(align - 1));
}

size_t stamp_len(uint32_t seq)
{
	return sizeof(struct stamp) + (seq * 37u) % 97u;
}

int32_t stamp_type(uint32_t producer)
{
	return (int32_t)(1 + producer);
}

uint8_t stamp_byte(uint32_t producer, uint32_t seq, size_t i)
{
	uint32_t x = (producer + 1) * 2654435761u ^ seq * 40503u ^
		     (uint32_t)i * 2246822519u;

	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	return (uint8_t)x;
}

void stamp_fill(void *buf, uint32_t producer, uint32_t seq)
{
	struct stamp st = { producer, seq };
	uint8_t *p = buf;
	size_t len = stamp_len(seq);

	memcpy(p, &st, sizeof(st));
	for (size_t i = sizeof(st); i < len; i++)
		p[i] = stamp_byte(producer, seq, i);
}

int stamp_check(const struct lull_record *rec, unsigned nproducers,
		struct stamp *st, char *why, size_t whysize)
{
	const uint8_t *p = rec->data;

	if (rec->len < sizeof(*st)) {
		snprintf(why, whysize, "a record of type %d has %u bytes",
			 (int)rec->type, (unsigned)rec->len);
		return -EBADMSG;
	}
	memcpy(st, p, sizeof(*st));
	if (st->producer >= nproducers ||
	    rec->type != stamp_type(st->producer) ||
	    rec->len != stamp_len(st->seq)) {
		snprintf(why, whysize, "type %d, %u bytes, stamp %u/%u",
			 (int)rec->type, (unsigned)rec->len, st->producer,
			 st->seq);
		return -EBADMSG;
	}
	for (size_t i = sizeof(*st); i < rec->len; i++)
		if (p[i] != stamp_byte(st->producer, st->seq, i)) {
			snprintf(why, whysize, "record %u/%u: byte %zu differs",
				 st->producer, st->seq, i);
			return -EBADMSG;
		}
	return 0;
}

int stamp_send(const struct topo *t, struct lull_producer *prod,
	       uint32_t producer, uint32_t seq)
{
	uint8_t buf[STAMP_MAX_LEN];
	size_t len = stamp_len(seq);
	struct iovec iov[2];
	void *dst;
	int ret;

	stamp_fill(buf, producer, seq);
	switch (seq % 3) {
	case 0:
		return t->write(prod, stamp_type(producer), buf, len);
	case 1:
		iov[0].iov_base = buf;
		iov[0].iov_len = 5;
		iov[1].iov_base = buf + 5;
		iov[1].iov_len = len - 5;
		return t->writev(prod, stamp_type(producer), iov, 2);
	default:
		ret = t->claim(prod, stamp_type(producer), len, &dst);
		if (ret < 0)
			return ret;
		memcpy(dst, buf, len);
		return t->commit(prod);
	}
}

int stamp_claim(const struct topo *t, struct lull_producer *prod,
		uint32_t producer, uint32_t seq)
{
	void *dst;
	int ret;

	ret = t->claim(prod, stamp_type(producer), stamp_len(seq), &dst);
	if (ret == 0)
		stamp_fill(dst, producer, seq);
	return ret;
}
