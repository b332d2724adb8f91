/* SPDX-License-Identifier: MIT */
/*
 * lane_fix.h - what the suites of batches and lanes (test_ring_batches.c,
 * test_ring_lanes.c) add to ring_fix.h: a LANES producer as a struct topo,
 * with either family's calls, and each family's batch calls.
 *
 * A LANES producer writes its lane as an SPSC producer writes its ring, so
 * ring_fix.h's model holds for it unchanged: records one after the other,
 * padding at the wrap, and an abort that leaves nothing (its topo is not
 * MPSC for topo_is_mpsc()).  Its rings have two lanes, so that every check
 * also sees the consumer step over a lane that stays empty.
 *
 * BATCH_TEST(name, seconds) { ... b ... } runs a check written once against
 * `const struct family *b` as one Test() in each of the suites spsc, mpsc,
 * lanes_spsc (a LANES producer calling lull_spsc_*) and lanes_mpsc (calling
 * lull_mpsc_*).
 */
#ifndef LULL_TEST_LANE_FIX_H
#define LULL_TEST_LANE_FIX_H

#include "ring_fix.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

/* The rings of the lane topologies: the fixture's producer takes lane 0. */
#define LANE_FIX_LANES 2u

static const struct topo topo_lanes_spsc = {
	.flags = LULL_RING_LANES(LANE_FIX_LANES),
	.name = "lanes/spsc",
	.write = lull_spsc_write,
	.writev = lull_spsc_writev,
	.claim = lull_spsc_claim,
	.commit = lull_spsc_commit,
	.abort = lull_spsc_abort,
};

static const struct topo topo_lanes_mpsc = {
	.flags = LULL_RING_LANES(LANE_FIX_LANES),
	.name = "lanes/mpsc",
	.write = lull_mpsc_write,
	.writev = lull_mpsc_writev,
	.claim = lull_mpsc_claim,
	.commit = lull_mpsc_commit,
	.abort = lull_mpsc_abort,
};

/* A topology with its family's batch calls. */
struct family {
	const struct topo *t;
	int (*claim_batch)(struct lull_producer *prod,
			   struct lull_claim *claims, unsigned count);
	int (*write_batch)(struct lull_producer *prod,
			   const struct lull_record *recs, unsigned count);
	/* The MPSC ring's shared lane: an abort leaves padding behind. */
	bool shared;
};

static const struct family fam_spsc = {
	&topo_spsc, lull_spsc_claim_batch, lull_spsc_write_batch, false
};
static const struct family fam_mpsc = {
	&topo_mpsc, lull_mpsc_claim_batch, lull_mpsc_write_batch, true
};
static const struct family fam_lanes_spsc = {
	&topo_lanes_spsc, lull_spsc_claim_batch, lull_spsc_write_batch, false
};
static const struct family fam_lanes_mpsc = {
	&topo_lanes_mpsc, lull_mpsc_claim_batch, lull_mpsc_write_batch, false
};

#define BATCH_TEST(name, secs)                                               \
	static void name##_each(const struct family *b);                     \
	Test(spsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_each(&fam_spsc);                                      \
	}                                                                    \
	Test(mpsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_each(&fam_mpsc);                                      \
	}                                                                    \
	Test(lanes_spsc, name, .timeout = secs)                              \
	{                                                                    \
		name##_each(&fam_lanes_spsc);                                \
	}                                                                    \
	Test(lanes_mpsc, name, .timeout = secs)                              \
	{                                                                    \
		name##_each(&fam_lanes_mpsc);                                \
	}                                                                    \
	static void name##_each(const struct family *b)

/*
 * Bytes that look like committed record headers ({16, type 77} in every
 * 8-byte slot): what a claim that is then aborted leaves in its payloads,
 * so that a consumer that took any of it for a record would be caught.
 */
#define FAKE_TYPE 77

static void fill_fake_headers(void *dst, size_t len)
{
	int32_t slot[2] = { 16, FAKE_TYPE };
	uint8_t *p = dst;
	size_t i;

	for (i = 0; i + sizeof(slot) <= len; i += sizeof(slot))
		memcpy(p + i, slot, sizeof(slot));
	memset(p + i, 0x5a, len - i);
}

#pragma GCC diagnostic pop

#endif
