/* SPDX-License-Identifier: MIT */
/*
 * fuzz_region_read.c - libFuzzer target for the consumer of a region that
 * a buggy or hostile producer process writes anything into.
 *
 * The input is a script.  Its first byte picks the ring: the topology (bits
 * 0-1: SPSC, MPSC, LANES(2), LANES(3)), the capacity of a lane (bits
 * 2-3: 256, 512, 1024, 4096 bytes) and whether the region is one made to
 * be shared between processes (bit 4: with producer slots, which the
 * consumer watches and recovers from).  The harness lays the region out
 * as lull_ring_create_in() does in an allocation of exactly its size,
 * lets go of that handle, and runs the rest of the input as steps, one
 * byte naming each (its value modulo 10), most of them followed by
 * arguments:
 *
 *   0 poke     u16 offset, u8 n, n bytes: written anywhere in the region
 *   1 header   u8 lane, u16 slot, i32 length, i32 type: a record header at
 *              slot * 8 in the lane's data area
 *   2 field    u8 (field in bits 0-4, lane in 5-7), u64 value: one of the
 *              fields a producer process can write (head, tail, busy,
 *              owner, park, state, the fatal report's length and state,
 *              wake_fd, wake_pid, park_fence, space_*, the consumer role and
 *              the header words; in a shared region the first 8 slots'
 *              state, pid, lane and claim, slot in bits 5-7), stored at
 *              its width
 *   3 read     u8 (limit in bits 0-6, 0 for 1; bit 7: lull_ring_read_items
 *              instead of lull_ring_read), u8 the handler's verdicts (2 bits
 *              a call)
 *   4 peek     5 release      6 lull_ring_wait(ring, 0)
 *   7 lull__ring_readable()
 *   8 shutdown u8: graceful, immediate, or a fatal report
 *   9 reopen   destroy the consumer handle; the next step opens another
 *
 * The consumer handle is opened (lull_ring_open(), LULL_OPEN_CONSUMER) by
 * the first step that needs it, so the writes before it meet the open
 * too; an open that fails ends the input.  region_check.h checks every
 * record handed out and every result.
 *
 * Build: make build/fuzz/fuzz_region_read (clang, -fsanitize=fuzzer)
 * Run:   build/fuzz/fuzz_region_read -max_total_time=3600 -max_len=4096 \
 *            CORPUS_DIR test/fuzz/corpus/region_read
 */
#include <stdio.h>

#include "handles.h"
#include "region_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input, consumed from the front; reads past its end give zeros. */
struct input {
	const uint8_t *p;
	size_t left;
};

static uint64_t take(struct input *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		if (in->left) {
			v |= (uint64_t)*in->p << (8 * i);
			in->p++;
			in->left--;
		}
	}
	return v;
}

/* The fields a producer process can write, by number. */
static void field_store(struct lull_region *region, uint32_t lanes,
			struct lull_slot *slots, unsigned which, uint64_t v)
{
	struct lull_lane *lane = lull__lane(region, (which >> 5) % lanes);
	struct lull_slot *slot;
	unsigned char *base = (unsigned char *)region;
	size_t off;
	unsigned width = 4;

	switch (which & 31) {
	case 0: off = (unsigned char *)&lane->head - base; width = 8; break;
	case 1: off = (unsigned char *)&lane->tail - base; width = 8; break;
	case 2: off = (unsigned char *)&lane->busy - base; break;
	case 3: off = (unsigned char *)&lane->owner - base; break;
	case 4: off = offsetof(struct lull_region, park); break;
	case 5: off = offsetof(struct lull_region, state); break;
	case 6: off = offsetof(struct lull_region, fatal.length); break;
	case 7: off = offsetof(struct lull_region, fatal_state); break;
	case 8: off = offsetof(struct lull_region, fatal.code); break;
	case 9: off = offsetof(struct lull_region, wake_fd); break;
	case 10: off = offsetof(struct lull_region, wake_pid); break;
	case 11: off = offsetof(struct lull_region, park_fence); break;
	case 12: off = offsetof(struct lull_region, space_waiters); break;
	case 13: off = offsetof(struct lull_region, space_seq); break;
	case 14: off = offsetof(struct lull_region, consumer); break;
	case 15: off = offsetof(struct lull_region, producers); break;
	case 16: off = offsetof(struct lull_region, magic); break;
	case 17: off = offsetof(struct lull_region, layout_version); break;
	case 18: off = offsetof(struct lull_region, mode); break;
	case 19: off = offsetof(struct lull_region, flags); break;
	case 20: off = offsetof(struct lull_region, capacity); width = 8; break;
	case 21: off = offsetof(struct lull_region, region_size); width = 8;
		break;
	case 22: off = offsetof(struct lull_region, data_offset); width = 8;
		break;
	case 23: off = offsetof(struct lull_region, lanes); break;
	/* The head and the tail, moved by a multiple of 8 only. */
	case 24: off = (unsigned char *)&lane->head - base; width = 8;
		v = atomic_load(&lane->head) + (v << 3); break;
	case 25: off = (unsigned char *)&lane->tail - base; width = 8;
		v = atomic_load(&lane->tail) + (v << 3); break;
	default:
		if (!slots)
			return;
		slot = &slots[which >> 5];
		switch (which & 31) {
		case 26: off = (unsigned char *)&slot->state - base; break;
		case 27: off = (unsigned char *)&slot->pid - base; break;
		case 28: off = (unsigned char *)&slot->lane - base; break;
		case 29: off = (unsigned char *)&slot->claim_phase - base;
			break;
		case 30: off = (unsigned char *)&slot->claim_start - base;
			width = 8; break;
		default: off = (unsigned char *)&slot->claim_end - base;
			width = 8; break;
		}
	}
	memcpy(base + off, &v, width); /* little-endian: the low bytes */
}

static const unsigned topologies[4] = {
	LULL_RING_SPSC, LULL_RING_MPSC, LULL_RING_LANES(2), LULL_RING_LANES(3),
};
static const uint64_t capacities[4] = { 256, 512, 1024, 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct consumer_check c;
	struct lull_ring *ring = NULL;
	struct lull_region *region;
	uint64_t capacity, off, n, slot;
	uint32_t lanes;
	unsigned topology, lane;
	size_t region_size;
	unsigned char *mem;
	struct lull_slot *slots;
	bool shared;
	uint8_t g;
	int32_t hdr[2];

	if (!size)
		return 0;
	g = (uint8_t)take(&in, 1);
	topology = topologies[g & 3];
	lanes = (g & 3) < 2 ? 1 : (g & 3);
	capacity = capacities[(g >> 2) & 3];
	shared = g & 16;
	region_size = (size_t)lull__region_size(
		capacity, topology, shared ? LULL_REGION_SHARED : 0);
	/* Exactly the region: ASan reports any access past its end. */
	require(posix_memalign((void **)&mem, 128, region_size) == 0);
	memset(mem, 0, region_size);
	require(lull__ring_make(&ring, mem, region_size, capacity, topology,
				shared ? LULL_REGION_SHARED : 0, true,
				true) == 0);
	slots = shared ? lull__slots(ring) : NULL;
	require(lull_ring_destroy(ring) == 0);
	ring = NULL;
	region = (struct lull_region *)mem;
	check_init(&c, mem, capacity, lanes);

	while (in.left) {
		unsigned step = (unsigned)take(&in, 1) % 10;

		switch (step) {
		case 0:
			off = take(&in, 2) % region_size;
			n = take(&in, 1);
			if (n > region_size - off)
				n = region_size - off;
			for (uint64_t i = 0; i < n; i++)
				mem[off + i] = (unsigned char)take(&in, 1);
			continue;
		case 1:
			lane = (unsigned)take(&in, 1) % lanes;
			slot = take(&in, 2) * 8 % capacity;
			hdr[0] = (int32_t)take(&in, 4);
			hdr[1] = (int32_t)take(&in, 4);
			memcpy(mem + 1024 + 256 * lanes + lane * capacity +
				       slot,
			       hdr, 8);
			continue;
		case 2:
			field_store(region, lanes, slots,
				    (unsigned)take(&in, 1), take(&in, 8));
			continue;
		default:
			break;
		}
		/* The steps of the consumer: open it first. */
		if (step == 9) {
			if (ring) {
				require(lull_ring_destroy(ring) == 0);
				ring = NULL;
			}
			continue;
		}
		if (!ring) {
			int ret = lull_ring_open(&ring, mem, region_size,
						 LULL_OPEN_CONSUMER);

			require(ret == 0 || ret == -EPROTO || ret == -EINVAL ||
				ret == -EBUSY);
			if (ret < 0) {
				ring = NULL;
				break;
			}
			check_init(&c, mem, capacity, lanes);
		}
		switch (step) {
		case 3:
			n = take(&in, 1);
			check_read(&c, ring, n & 0x7f ? (unsigned)n & 0x7f : 1,
				   (unsigned char)take(&in, 1), n & 0x80);
			break;
		case 4:
			check_peek(&c, ring);
			break;
		case 5:
			check_release(&c, ring);
			break;
		case 6:
			check_wait(&c, ring);
			break;
		case 7:
			(void)lull__ring_readable(ring);
			break;
		case 8:
			n = take(&in, 1) % 3;
			if (n < 2)
				require(lull_ring_shutdown(ring, (unsigned)n) ==
					0);
			else
				(void)lull_ring_fatal(ring, 7, "fuzz");
			break;
		}
		check_stats(&c, ring);
	}
	if (ring) {
		/* What is left to read, as a consumer would drain it. */
		for (int i = 0; i < 4; i++) {
			check_read(&c, ring, 64, 0, i % 2);
			check_stats(&c, ring);
		}
		require(lull_ring_destroy(ring) == 0);
	}
	free(mem);
	return 0;
}
