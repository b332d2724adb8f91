/* SPDX-License-Identifier: MIT */
/*
 * test_region.c - what creating a region costs in memory: a ring that
 * lull allocates is fresh anonymous memory, which already reads as zero,
 * so creating it commits no page of its data area (only the header's).
 * Memory is read from /proc/self/statm (resident pages), a count, not a
 * time.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lull.h>

#define WATCHDOG_S 30

/* Resident pages of this process now. */
static long resident_pages(void)
{
	long size = -1, resident = -1;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert_not_null(f, "cannot open /proc/self/statm");
	cr_assert_eq(fscanf(f, "%ld %ld", &size, &resident), 2,
		     "unreadable /proc/self/statm");
	fclose(f);
	return resident;
}

static int count_record(const struct lull_record *rec, void *ctx)
{
	(*(unsigned *)ctx) += rec->type == 1;
	return LULL_READ_CONTINUE;
}

Test(region, create_commits_no_data_page_of_a_large_ring,
     .timeout = WATCHDOG_S)
{
	const size_t capacity = (size_t)256 << 20;
	long page = sysconf(_SC_PAGESIZE), before, after;
	struct lull_producer *prod;
	struct lull_ring *ring;
	unsigned got = 0;

	before = resident_pages();
	cr_assert_eq(lull_ring_create(&ring, capacity, LULL_RING_MPSC), 0);
	after = resident_pages();
	/* 256 MiB cleared would be 65536 pages; allow the header and
	 * whatever else the process touched meanwhile. */
	cr_assert_lt((after - before) * page, 4 << 20,
		     "creating a %zu-byte ring made %ld pages resident",
		     capacity, after - before);
	/* Untouched memory reads as zero: records are found, none extra. */
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(lull_mpsc_write(prod, 1, "hi", 2), 0);
	cr_assert_eq(lull_ring_read(ring, count_record, &got, 16), 1);
	cr_assert_eq(got, 1);
	cr_assert_eq(lull_ring_read(ring, count_record, &got, 16), -EAGAIN);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* Caller memory may hold anything: lull_ring_create_in() clears it. */
Test(region, create_in_clears_dirty_caller_memory, .timeout = WATCHDOG_S)
{
	const size_t capacity = 4096;
	size_t size = (size_t)lull_ring_region_size(capacity);
	struct lull_producer *prod;
	struct lull_ring *ring;
	unsigned got = 0;
	void *mem;

	cr_assert_eq(posix_memalign(&mem, 4096, size), 0);
	memset(mem, 0x5a, size);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, capacity,
					 LULL_RING_SPSC), 0);
	cr_assert_eq(lull_ring_read(ring, count_record, &got, 16), -EAGAIN);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(lull_spsc_write(prod, 1, "hi", 2), 0);
	cr_assert_eq(lull_ring_read(ring, count_record, &got, 16), 1);
	cr_assert_eq(got, 1);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}
