/* SPDX-License-Identifier: MIT */
/*
 * test/lib/topo.h - the two ring topologies as data, and record patterns.
 *
 * struct topo holds the five producer calls of one family, so that a check
 * written once against a `const struct topo *` runs for SPSC and MPSC:
 *
 *	static void full_ring(const struct topo *t)
 *	{
 *		... lull_ring_create(&ring, cap, t->flags) ...
 *		... t->write(prod, type, buf, len) ...
 *	}
 *	Test(spsc, full_ring_is_eagain) { full_ring(&topo_spsc); }
 *	Test(mpsc, full_ring_is_eagain) { full_ring(&topo_mpsc); }
 *
 * Two record patterns:
 *  - seeded: a payload of pattern bytes derived from a 32-bit seed
 *    (pattern_fill / pattern_mismatch), a type from the seed (pattern_type)
 *    and the ring space a record takes (rec_space);
 *  - stamped: a record that says who sent it, {producer, seq} then pattern
 *    bytes (stamp_fill / stamp_check), sent by write, writev or
 *    claim+commit depending on the seq (stamp_send), so that a consumer
 *    can feed a struct ledger (ledger.h).
 * Nothing here asserts: calls return the library's result or a mismatch.
 */
#ifndef LULL_TEST_LIB_TOPO_H
#define LULL_TEST_LIB_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <lull.h>

struct topo {
	unsigned flags; /* LULL_RING_SPSC or LULL_RING_MPSC */
	const char *name; /* "spsc" or "mpsc" */
	int (*write)(struct lull_producer *prod, int32_t type,
		     const void *data, size_t len);
	int (*writev)(struct lull_producer *prod, int32_t type,
		      const struct iovec *iov, int iovcnt);
	int (*claim)(struct lull_producer *prod, int32_t type, size_t len,
		     void **datap);
	int (*commit)(struct lull_producer *prod);
	int (*abort)(struct lull_producer *prod);
};

extern const struct topo topo_spsc, topo_mpsc;

/* The topology of ring flags @flags (LULL_RING_SPSC or LULL_RING_MPSC). */
const struct topo *topo_of(unsigned flags);
/* The other one: for checks that one family's calls reject the other. */
const struct topo *topo_other(const struct topo *t);
bool topo_is_mpsc(const struct topo *t);

/* --- seeded payloads ---------------------------------------------------- */

uint8_t pattern_byte(uint32_t seed, size_t i);
void pattern_fill(void *buf, size_t len, uint32_t seed);
/* Index of the first byte that differs from the pattern, or @len. */
size_t pattern_mismatch(const void *buf, size_t len, uint32_t seed);
/* User types 1..1000, and LULL_TYPE_MAX for one seed in five. */
int32_t pattern_type(uint32_t seed);
/* Bytes of ring a record of @len payload bytes takes (header included). */
size_t rec_space(size_t len);

/* --- stamped records ----------------------------------------------------- */

struct stamp {
	uint32_t producer;
	uint32_t seq;
};

/* The longest stamped record. */
#define STAMP_MAX_LEN (sizeof(struct stamp) + 96u)

/* Length (8..104 bytes) of record @seq, and the type of @producer's. */
size_t stamp_len(uint32_t seq);
int32_t stamp_type(uint32_t producer);
uint8_t stamp_byte(uint32_t producer, uint32_t seq, size_t i);
/* Fill stamp_len(@seq) bytes at @buf. */
void stamp_fill(void *buf, uint32_t producer, uint32_t seq);
/*
 * Check a record handed to the consumer: 0 with *@st filled when it is a
 * well-formed stamped record of a producer below @nproducers; else
 * -EBADMSG, with what is wrong in @why (@whysize bytes).
 */
int stamp_check(const struct lull_record *rec, unsigned nproducers,
		struct stamp *st, char *why, size_t whysize);
/*
 * Send record @seq of @producer by one of three paths, chosen by the seq:
 * write, writev in two pieces, or claim + commit.  Returns what the call
 * that decides returned (the write, or the claim).
 */
int stamp_send(const struct topo *t, struct lull_producer *prod,
	       uint32_t producer, uint32_t seq);
/* Claim record @seq and fill it; the caller commits or aborts. */
int stamp_claim(const struct topo *t, struct lull_producer *prod,
		uint32_t producer, uint32_t seq);

#endif
