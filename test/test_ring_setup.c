/* SPDX-License-Identifier: MIT */
/*
 * test_ring_setup.c - the Criterion suite of lull/ring.h: version and error
 * strings, regions (size, create, open, move), and every call's argument
 * checks.
 * The fixture (struct model, struct fix, TOPO_TEST) is ring_fix.h.
 */
#include "ring_fix.h"

/* ========================================================================
 * lull: version and error strings
 */

Test(lull, version_matches_header, .timeout = 10)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", LULL_VERSION_MAJOR,
		 LULL_VERSION_MINOR, LULL_VERSION_PATCH);
	cr_assert_str_eq(LULL_VERSION_STRING, want);
	cr_assert_not_null(lull_version());
	cr_assert_str_eq(lull_version(), LULL_VERSION_STRING);
}

static const struct {
	const char *name;
	int code;
} error_names[] = {
	{ "EINVAL", EINVAL },	  { "EAGAIN", EAGAIN }, { "EMSGSIZE", EMSGSIZE },
	{ "EBUSY", EBUSY },	  { "EPERM", EPERM },	{ "ENOMEM", ENOMEM },
	{ "EPROTO", EPROTO },	  { "EPIPE", EPIPE },	{ "EALREADY", EALREADY },
	{ "ENOENT", ENOENT },
};

#define NERROR_NAMES (sizeof(error_names) / sizeof(error_names[0]))

/* Append the words of @text to @out, one space between any two. */
static void append_words(char *out, size_t size, const char *text)
{
	size_t len = strlen(out);

	for (; *text; text++) {
		if (*text == ' ' || *text == '\t' || *text == '\n') {
			if (len && out[len - 1] != ' ' && len + 1 < size)
				out[len++] = ' ';
			continue;
		}
		if (len + 1 < size)
			out[len++] = *text;
	}
	out[len] = '\0';
}

/*
 * The error table in lull/ring.h, which says what each code means across
 * every header, and lull_strerror() agree word for word: the header is
 * what a caller reads, the string what a caller prints.  Every code in the
 * table is one lull gives a meaning of its own, distinct from the others.
 */
Test(lull, strerror_says_what_the_headers_document, .timeout = 10)
{
	char path[512], line[256], texts[NERROR_NAMES][512];
	bool seen[NERROR_NAMES] = { false }, in_table = false;
	const char *src = __FILE__, *slash = strrchr(src, '/');
	int current = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%.*s/../include/lull/ring.h",
		 slash ? (int)(slash - src) : 1, slash ? src : ".");
	f = fopen(path, "r");
	if (!f)
		cr_skip_test("%s: %s (run from the source tree)", path,
			     strerror(errno));
	memset(texts, 0, sizeof(texts));
	while (fgets(line, sizeof(line), f)) {
		char name[16], *rest;

		if (strstr(line, " * Errors are negative errno values")) {
			in_table = true;
			continue;
		}
		if (!in_table)
			continue;
		if (strstr(line, " * In the rings:"))
			break;
		if (sscanf(line, " *   -%15[A-Z]", name) == 1) {
			current = -1;
			for (size_t i = 0; i < NERROR_NAMES; i++)
				if (!strcmp(name, error_names[i].name))
					current = (int)i;
			cr_assert_geq(current, 0,
				      "the table documents -%s, which this "
				      "test does not know", name);
			seen[current] = true;
			rest = strchr(line, '-') + 1 + strlen(name);
			append_words(texts[current], sizeof(texts[0]), rest);
		} else if (current >= 0 && strncmp(line, " *      ", 8) == 0) {
			append_words(texts[current], sizeof(texts[0]),
				     line + 2);
		}
	}
	fclose(f);
	cr_assert(in_table, "no error table in %s", path);
	for (size_t i = 0; i < NERROR_NAMES; i++) {
		const char *s = lull_strerror(-error_names[i].code);
		char want[512];

		cr_assert(seen[i], "-%s is not in the table of %s",
			  error_names[i].name, path);
		snprintf(want, sizeof(want), "%s", texts[i]);
		/* Trim the trailing space the last line leaves. */
		if (*want && want[strlen(want) - 1] == ' ')
			want[strlen(want) - 1] = '\0';
		cr_assert_str_eq(s, want,
				 "lull_strerror(-%s) is \"%s\"; the header "
				 "documents \"%s\"",
				 error_names[i].name, s, want);
		cr_assert_str_eq(s, lull_strerror(error_names[i].code));
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(s, lull_strerror(-error_names[j].code),
					  "-%s and -%s read the same",
					  error_names[i].name,
					  error_names[j].name);
	}
	cr_assert_str_not_empty(lull_strerror(0));
}

Test(lull, strerror_handles_unknown_values, .timeout = 10)
{
	static const int unknown[] = {
		-9999, 9999, -4096, 4096, 1 << 20, INT_MAX, INT_MIN,
		INT_MIN + 1,
	};
	size_t i, j;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		const char *s = lull_strerror(unknown[i]);

		cr_assert_not_null(s, "lull_strerror(%d) is NULL", unknown[i]);
		cr_assert_str_not_empty(s, "lull_strerror(%d) is empty",
					unknown[i]);
		for (j = 0; j < NERROR_NAMES; j++)
			cr_assert_str_neq(s,
					  lull_strerror(-error_names[j].code),
					  "unknown %d reads like %d",
					  unknown[i], -error_names[j].code);
	}
}

/* ========================================================================
 * region: sizes, creation in caller memory, opening
 */

static bool capacity_is_valid(size_t c)
{
	return c >= LULL_RING_MIN_CAPACITY && c <= LULL_RING_MAX_CAPACITY &&
	       (c & (c - 1)) == 0;
}

static void check_region_size(size_t c)
{
	ssize_t r = lull_ring_region_size(c);

	if (capacity_is_valid(c))
		cr_assert_gt(r, (ssize_t)c, "lull_ring_region_size(%zu) = %zd",
			     c, r);
	else
		cr_assert_eq(r, -EINVAL, "lull_ring_region_size(%zu) = %zd, "
			     "not -EINVAL", c, r);
}

Test(region, size_rejects_every_invalid_capacity, .timeout = 10)
{
	size_t c;
	unsigned k;

	for (c = 0; c <= (size_t)1 << 17; c++)
		check_region_size(c);
	for (k = 0; k < sizeof(size_t) * CHAR_BIT; k++) {
		size_t p = (size_t)1 << k;

		check_region_size(p);
		check_region_size(p - 1);
		check_region_size(p + 1);
		check_region_size(p + p / 2);
		check_region_size(p | 8);
		check_region_size(~p);
	}
	check_region_size(SIZE_MAX);
	check_region_size((size_t)SSIZE_MAX);
	check_region_size((size_t)SSIZE_MAX + 1);
}

Test(region, size_grows_with_capacity, .timeout = 10)
{
	size_t c;

	for (c = LULL_RING_MIN_CAPACITY; c < LULL_RING_MAX_CAPACITY; c *= 2) {
		ssize_t a = lull_ring_region_size(c);
		ssize_t b = lull_ring_region_size(2 * c);

		cr_assert_gt(a, (ssize_t)c);
		cr_assert_geq(b - a, (ssize_t)c,
			      "region of %zu bytes is %zd, of %zu is %zd", c, a,
			      2 * c, b);
	}
}

static const size_t bad_capacities[] = {
	0, 1, 8, 64, 128, 255, 257, 384, 1000, 4095, 4097, 12288,
	((size_t)1 << 30) + 1, (size_t)1 << 31, (size_t)3 << 29,
	(size_t)1 << 40, SIZE_MAX,
};

#define NBAD_CAPACITIES (sizeof(bad_capacities) / sizeof(bad_capacities[0]))

Test(region, create_rejects_invalid_capacity_and_topology, .timeout = 10)
{
	static const unsigned bad_flags[] = { 0, 3, 4, 0x100, ~0u };
	struct lull_ring *ring;
	size_t i;

	for (i = 0; i < NBAD_CAPACITIES; i++) {
		cr_assert_eq(lull_ring_create(&ring, bad_capacities[i],
					      LULL_RING_SPSC), -EINVAL,
			     "SPSC capacity %zu", bad_capacities[i]);
		cr_assert_eq(lull_ring_create(&ring, bad_capacities[i],
					      LULL_RING_MPSC), -EINVAL,
			     "MPSC capacity %zu", bad_capacities[i]);
	}
	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
		cr_assert_eq(lull_ring_create(&ring, 256, bad_flags[i]),
			     -EINVAL, "flags %#x", bad_flags[i]);
}

Test(region, create_in_rejects_bad_memory_and_arguments, .timeout = 10)
{
	static const unsigned bad_flags[] = { 0, 3, 4, 0x100 };
	struct lull_ring *ring;
	struct region r;
	size_t i;

	region_alloc(&r, 4096);
	cr_assert_eq(lull_ring_create_in(NULL, r.mem, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, NULL, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	/* Aligned to 8 and to 64 bytes, but not to 128. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 8, r.size, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 64, r.size, 4096,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem + 1, r.size, 4096,
					 LULL_RING_MPSC), -EINVAL);
	/* Too small: by one byte, or for the capacity asked. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size - 1, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, 0, 4096,
					 LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 8192,
					 LULL_RING_MPSC), -EINVAL);
	for (i = 0; i < NBAD_CAPACITIES; i++)
		cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size,
						 bad_capacities[i],
						 LULL_RING_SPSC), -EINVAL,
			     "capacity %zu", bad_capacities[i]);
	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++)
		cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 4096,
						 bad_flags[i]), -EINVAL,
			     "flags %#x", bad_flags[i]);
	/* The exact size and a larger one are fine. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 4096,
					 LULL_RING_SPSC), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.alloc, 4096,
					 LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&r);
}

Test(region, create_in_overwrites_previous_content, .timeout = 10)
{
	struct lull_ring *ring = NULL;
	struct region r;
	struct fix f;

	region_alloc(&r, 256);
	memset(r.mem, 0x5a, r.alloc);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_MPSC), 0);
	fix_start(&f, &topo_mpsc, ring, 256);
	expect_nothing(ring);
	fix_put(&f, BY_WRITE, 3);
	fix_put(&f, BY_CLAIM, 17);
	fix_fini(&f);

	/* A new region over an old one with records in it starts empty. */
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_SPSC), 0);
	fix_start(&f, &topo_spsc, ring, 256);
	expect_nothing(ring);
	fix_put(&f, BY_WRITEV, 24);
	model_drain(&f.m, ring);
	fix_fini(&f);
	region_free(&r);
}

Test(region, open_of_zeroed_or_garbage_memory_is_eproto, .timeout = 10)
{
	struct lull_ring *ring;
	struct region r;
	size_t i;

	region_alloc(&r, 256);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, 0), -EPROTO);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, LULL_OPEN_CONSUMER),
		     -EPROTO);
	memset(r.mem, 0xa5, r.alloc);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, 0), -EPROTO);
	for (i = 0; i < r.alloc; i++)
		r.mem[i] = pattern_byte(7, i);
	cr_assert_eq(lull_ring_open(&ring, r.mem, r.size, LULL_OPEN_CONSUMER),
		     -EPROTO);
	region_free(&r);
}

static void open_corrupt_header(const struct topo *t)
{
	struct lull_ring *ring, *other;
	struct region a, b;
	int i;

	ring = region_create(&a, 256, t);
	region_alloc(&b, 256);
	/* An intact copy opens (the region holds no pointers)... */
	memcpy(b.mem, a.mem, a.size);
	other = region_open(&b, 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	/*
	 * ...and one with a flipped byte in the magic, which a region's
	 * header starts with, is refused.
	 */
	for (i = 0; i < 4; i++) {
		memcpy(b.mem, a.mem, a.size);
		b.mem[i] ^= 0x5a;
		cr_assert_eq(lull_ring_open(&other, b.mem, b.size, 0), -EPROTO,
			     "byte %d of the header flipped", i);
		cr_assert_eq(lull_ring_open(&other, b.mem, b.size,
					    LULL_OPEN_CONSUMER), -EPROTO,
			     "byte %d of the header flipped", i);
	}
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&a);
	region_free(&b);
}

TOPO_TEST(open_of_corrupt_magic_is_eproto, 10)
{
	open_corrupt_header(t);
}

Test(region, open_rejects_bad_arguments, .timeout = 10)
{
	struct lull_ring *ring, *other;
	struct region r;

	ring = region_create(&r, 4096, &topo_spsc);
	cr_assert_eq(lull_ring_open(NULL, r.mem, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, NULL, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, r.size - 1, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, 0, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, r.mem, 64, 0), -EINVAL);
	/* A valid region image, but not 128-byte aligned. */
	cr_assert_eq(lull_ring_destroy(ring), 0);
	memmove(r.mem + 64, r.mem, r.size);
	cr_assert_eq(lull_ring_open(&other, r.mem + 64, r.size, 0), -EINVAL);
	memmove(r.mem + 8, r.mem + 64, r.size);
	cr_assert_eq(lull_ring_open(&other, r.mem + 8, r.size, 0), -EINVAL);
	/* Moved back in place it opens, with or without spare bytes. */
	memmove(r.mem, r.mem + 8, r.size);
	other = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_open(&other, r.mem, r.alloc, 0), 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	region_free(&r);
}

/* Producers on an opened handle write; the creating handle reads. */
static void opened_handle_produces(const struct topo *t)
{
	struct lull_ring *creator, *opened;
	struct lull_record rec;
	struct region r;
	struct fix f;
	int i;

	creator = region_create(&r, 4096, t);
	opened = region_open(&r, 0);
	cr_assert_eq(lull_ring_capacity(opened), 4096);
	cr_assert_eq(lull_ring_max_payload(opened), 4096 / 8 - 8);
	fix_start(&f, t, opened, 4096);
	for (i = 0; i < 12; i++)
		fix_put(&f, (enum method)(i % METHODS), (size_t)i * 11);
	/* The opened handle does not consume... */
	cr_assert_eq(lull_ring_read(opened, check_handler, &f.m, 4), -EPERM);
	cr_assert_eq(lull_ring_peek(opened, &rec), -EPERM);
	cr_assert_eq(lull_ring_release(opened), -EPERM);
	/* ...the creator does, and gets every record. */
	model_drain_mixed(&f.m, creator, 1);
	fix_fini(&f);
	/* The detach through the opened handle ended the region's ring. */
	cr_assert(model_expect_end(&f.m, creator));
	cr_assert_eq(lull_ring_destroy(creator), 0);
	region_free(&r);
}

TOPO_TEST(opened_handle_producer_reaches_consumer, 10)
{
	opened_handle_produces(t);
}

static void consumer_role_exclusive(const struct topo *t)
{
	struct lull_ring *creator, *plain, *second, *third;
	struct region r;

	creator = region_create(&r, 256, t);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	plain = region_open(&r, 0);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	cr_assert_eq(lull_ring_open(&second, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY,
		     "destroying a plain handle released the consumer role");
	cr_assert_eq(lull_ring_destroy(creator), 0);
	second = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_ring_open(&third, r.mem, r.size,
				    LULL_OPEN_CONSUMER), -EBUSY);
	cr_assert_eq(lull_ring_destroy(second), 0);
	third = region_open(&r, LULL_OPEN_CONSUMER);
	expect_nothing(third);
	cr_assert_eq(lull_ring_destroy(third), 0);
	region_free(&r);
}

TOPO_TEST(second_consumer_is_ebusy_until_consumer_destroyed, 10)
{
	consumer_role_exclusive(t);
}

/* Opening a live region must not touch records or positions. */
static void open_keeps_live_records(const struct topo *t)
{
	struct lull_ring *creator, *writer, *extra, *consumer;
	struct region r;
	struct fix f;
	int i;

	creator = region_create(&r, 512, t);
	writer = region_open(&r, 0);
	fix_start(&f, t, writer, 512);
	for (i = 0; i < 8; i++)
		fix_put(&f, (enum method)(i % METHODS), (size_t)(i * 7) % 57);
	model_read(&f.m, creator, 2);
	extra = region_open(&r, 0);
	model_read(&f.m, creator, 1);
	cr_assert_eq(lull_ring_destroy(creator), 0);
	/* A new consumer resumes where the old one stopped. */
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	model_read(&f.m, consumer, 2);
	for (i = 0; i < 40; i++)
		fix_feed(&f, consumer, (enum method)(i % METHODS),
			 (size_t)(i * 5) % 57);
	model_drain(&f.m, consumer);
	fix_fini(&f);
	cr_assert_eq(lull_ring_destroy(extra), 0);
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	region_free(&r);
}

TOPO_TEST(open_keeps_live_records, 10)
{
	open_keeps_live_records(t);
}

/*
 * A region copied elsewhere is the same ring: it holds no pointers.  The
 * records, the positions (past several wraps) and the shutdown state all
 * travel with the bytes.  The copy is taken once the producer detached,
 * which shut the ring down: a producer's handle points into the region, so
 * a live one cannot follow it.
 */
static void region_moves(const struct topo *t)
{
	struct lull_producer *late;
	struct lull_ring *ring, *moved;
	struct region a, b, c;
	struct fix f;
	int i;

	ring = region_create(&a, 256, t);
	fix_start(&f, t, ring, 256);
	for (i = 0; i < 30; i++)
		fix_feed(&f, ring, (enum method)(i % METHODS),
			 (size_t)i % 25);
	model_read(&f.m, ring, 3);
	for (i = 0; i < 2; i++)
		fix_feed(&f, ring, BY_WRITE, 20);
	cr_assert_gt(model_queued(&f.m), 3, "test bug: too few records left");
	cr_assert_gt(f.m.wpos, 2 * f.m.cap, "test bug: the ring did not wrap");
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);

	region_alloc(&b, 256);
	memcpy(b.mem, a.mem, a.size);
	memset(a.mem, 0xee, a.alloc);
	moved = region_open(&b, LULL_OPEN_CONSUMER);
	/* Shut down before the move: shut down after it. */
	cr_assert_eq(lull_producer_attach(moved, 0, &late), -EPIPE);
	f.ring = moved;
	f.m.base = NULL;
	model_read(&f.m, moved, 1);
	cr_assert(f.m.base >= b.mem && f.m.base + 256 <= b.mem + b.size,
		  "the data area is not inside the moved region");
	model_peek(&f.m, moved);
	cr_assert(model_expect_end(&f.m, moved));
	cr_assert_eq(lull_ring_destroy(moved), 0);
	region_free(&a);

	/* A copy of a region no producer used yet takes producers. */
	ring = region_create(&a, 256, t);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_alloc(&c, 256);
	memcpy(c.mem, a.mem, a.size);
	memset(a.mem, 0xee, a.alloc);
	moved = region_open(&c, LULL_OPEN_CONSUMER);
	fix_start(&f, t, moved, 256);
	for (i = 0; i < 30; i++)
		fix_feed(&f, moved, (enum method)(i % METHODS),
			 (size_t)i % 25);
	cr_assert(f.m.base >= c.mem && f.m.base + 256 <= c.mem + c.size,
		  "the data area is not inside the copied region");
	model_drain(&f.m, moved);
	fix_fini(&f);
	region_free(&a);
	region_free(&b);
	region_free(&c);
}

TOPO_TEST(region_can_be_moved, 10)
{
	region_moves(t);
}

/* Every valid capacity: the right size, and usable to its largest record. */
static void create_every_capacity(const struct topo *t)
{
	struct lull_ring *ring;
	struct region r;
	struct fix f;
	size_t cap;

	for (cap = LULL_RING_MIN_CAPACITY; cap <= (size_t)1 << 24; cap *= 2) {
		fix_init(&f, t, cap);
		fix_put(&f, BY_WRITE, f.max);
		fix_put(&f, BY_CLAIM, 0);
		model_drain(&f.m, f.ring);
		fix_fini(&f);
	}
	for (cap = LULL_RING_MIN_CAPACITY; cap <= (size_t)1 << 16; cap *= 2) {
		ring = region_create(&r, cap, t);
		fix_start(&f, t, ring, cap);
		fix_put(&f, BY_WRITEV, f.max);
		model_drain(&f.m, ring);
		fix_fini(&f);
		region_free(&r);
	}
}

TOPO_TEST(create_accepts_every_valid_capacity, 10)
{
	create_every_capacity(t);
}

/* ========================================================================
 * ring: arguments
 */

Test(ring, null_arguments_are_einval, .timeout = 10)
{
	struct lull_ring *ring, *other;
	struct lull_record rec;
	struct region r;

	cr_assert_eq(lull_ring_create(NULL, 256, LULL_RING_SPSC), -EINVAL);
	cr_assert_eq(lull_ring_create(NULL, 256, LULL_RING_MPSC), -EINVAL);
	region_alloc(&r, 256);
	cr_assert_eq(lull_ring_create_in(NULL, r.mem, r.size, 256,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, NULL, r.size, 256,
					 LULL_RING_MPSC), -EINVAL);
	cr_assert_eq(lull_ring_create_in(&ring, r.mem, r.size, 256,
					 LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_open(NULL, r.mem, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_open(&other, NULL, r.size, 0), -EINVAL);
	cr_assert_eq(lull_ring_destroy(NULL), -EINVAL);
	cr_assert_eq(lull_ring_capacity(NULL), -EINVAL);
	cr_assert_eq(lull_ring_max_payload(NULL), -EINVAL);
	cr_assert_eq(lull_producer_attach(NULL, 0, NULL), -EINVAL);
	cr_assert_eq(lull_producer_attach(ring, 0, NULL), -EINVAL);
	cr_assert_eq(lull_producer_detach(NULL), -EINVAL);
	cr_assert_eq(lull_spsc_write(NULL, 1, "x", 1), -EINVAL);
	cr_assert_eq(lull_spsc_writev(NULL, 1, NULL, 0), -EINVAL);
	cr_assert_eq(lull_spsc_claim(NULL, 1, 1, NULL), -EINVAL);
	cr_assert_eq(lull_spsc_commit(NULL), -EINVAL);
	cr_assert_eq(lull_spsc_abort(NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_write(NULL, 1, "x", 1), -EINVAL);
	cr_assert_eq(lull_mpsc_writev(NULL, 1, NULL, 0), -EINVAL);
	cr_assert_eq(lull_mpsc_claim(NULL, 1, 1, NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_commit(NULL), -EINVAL);
	cr_assert_eq(lull_mpsc_abort(NULL), -EINVAL);
	cr_assert_eq(lull_ring_read(NULL, check_handler, NULL, 1), -EINVAL);
	cr_assert_eq(lull_ring_read(ring, NULL, NULL, 1), -EINVAL);
	cr_assert_eq(lull_ring_read_items(NULL, unexpected_run_handler, NULL,
					  1),
		     -EINVAL);
	cr_assert_eq(lull_ring_read_items(ring, NULL, NULL, 1), -EINVAL);
	cr_assert_eq(lull_ring_peek(NULL, &rec), -EINVAL);
	cr_assert_eq(lull_ring_peek(ring, NULL), -EINVAL);
	cr_assert_eq(lull_ring_release(NULL), -EINVAL);
	/* The ring is untouched by all of it. */
	expect_nothing(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	region_free(&r);
}

/* Producer calls with NULL or bad pointers write nothing, claim nothing. */
static void producer_null_arguments(const struct topo *t)
{
	struct iovec iov = { payload_buf, 4 };
	void *dst;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(t->write(NULL, 1, payload_buf, 1), -EINVAL);
	cr_assert_eq(t->write(f.prod, 1, NULL, 1), -EINVAL);
	cr_assert_eq(t->writev(NULL, 1, &iov, 1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, NULL, 1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, &iov, -1), -EINVAL);
	cr_assert_eq(t->writev(f.prod, 1, &iov, INT_MIN), -EINVAL);
	cr_assert_eq(t->claim(NULL, 1, 8, &dst), -EINVAL);
	cr_assert_eq(t->claim(f.prod, 1, 8, NULL), -EINVAL);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "a claim is outstanding");
	cr_assert_eq(t->commit(NULL), -EINVAL);
	cr_assert_eq(t->abort(NULL), -EINVAL);
	expect_nothing(f.ring);
	fix_put(&f, BY_WRITE, 9);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(producer_null_arguments_are_einval, 10)
{
	producer_null_arguments(t);
}
