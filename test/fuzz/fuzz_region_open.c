/* SPDX-License-Identifier: MIT */
/*
 * fuzz_region_open.c - libFuzzer target for lull_ring_open() on memory
 * that anyone may have written: the input is the region, byte for byte,
 * in an allocation of exactly its size.  The open must refuse it (-EPROTO,
 * -EINVAL, -EBUSY) or return a consumer handle that then reads it safely:
 * a few rounds of read, peek and release, lull_ring_wait(ring, 0) and the
 * readability query, each record and result checked as region_check.h
 * says, against the geometry the input's own header gives.  A handle that
 * is not the consumer is opened too, and its answers checked.
 *
 * Build: make build/fuzz/fuzz_region_open (clang, -fsanitize=fuzzer)
 * Run:   build/fuzz/fuzz_region_open -max_total_time=3600 -max_len=20000 \
 *            CORPUS_DIR test/fuzz/corpus/region_open
 */
#include "handles.h"
#include "region_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void consume(struct lull_ring *ring, const unsigned char *mem)
{
	const struct lull_region *region = (const void *)mem;
	struct consumer_check c;
	uint32_t lanes = region->mode == LULL_MODE_LANES ? region->lanes : 1;

	check_init(&c, mem, region->capacity, lanes);
	require(lull_ring_capacity(ring) == (ssize_t)region->capacity);
	require(lull_ring_max_payload(ring) == (ssize_t)c.max_payload);
	for (int round = 0; round < 3; round++) {
		(void)lull__ring_readable(ring);
		check_wait(&c, ring);
		check_peek(&c, ring);
		check_peek(&c, ring);
		check_release(&c, ring);
		check_read(&c, ring, 1, 0x1b, false); /* CONTINUE, STOP, KEEP */
		check_read(&c, ring, 1000, 0, false);
		check_read(&c, ring, 2, 0x1b, true);
		check_read(&c, ring, 1000, 0, true);
		check_stats(&c, ring);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lull_ring *ring = NULL;
	unsigned char *mem;
	int ret;

	/* Exactly the input: ASan reports any access past its end. */
	if (posix_memalign((void **)&mem, 128, size ? size : 1))
		return 0;
	memcpy(mem, data, size);
	ret = lull_ring_open(&ring, mem, size, 0);
	require(ret == 0 || ret == -EPROTO || ret == -EINVAL);
	if (ret == 0) {
		require(lull_ring_read(ring, check_handler, NULL, 1) ==
			-EPERM);
		require(lull_ring_destroy(ring) == 0);
	}
	ret = lull_ring_open(&ring, mem, size, LULL_OPEN_CONSUMER);
	require(ret == 0 || ret == -EPROTO || ret == -EINVAL ||
		ret == -EBUSY);
	if (ret == 0) {
		consume(ring, mem);
		require(lull_ring_destroy(ring) == 0);
	}
	free(mem);
	return 0;
}
