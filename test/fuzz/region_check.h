/* SPDX-License-Identifier: MIT */
/*
 * region_check.h - what the region fuzzers (fuzz_region_read.c,
 * fuzz_region_open.c) check of a consumer reading a region that anyone
 * may have written anything into: every record it hands out lies within
 * a lane's data area and within the limits of the record format, and
 * after a corruption it reports (-EPROTO, once) it hands out nothing but
 * the poison record, then -EPIPE.  A failed promise is a crash, which
 * libFuzzer reports with the input; AddressSanitizer and UBSan catch any
 * access outside the region, whose allocation is exactly its size.
 *
 * The geometry is the harness's own (what it created, or what the input
 * header says), never the library's handle.
 */
#ifndef LULL_FUZZ_REGION_CHECK_H
#define LULL_FUZZ_REGION_CHECK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lull.h>

#define require(cond) ((cond) ? (void)0 : abort())

/* Where the records may lie, and what one consumer handle did so far. */
struct consumer_check {
	const unsigned char *data; /* lane 0's data area */
	uint64_t capacity;         /* of each lane */
	uint32_t lanes;
	uint32_t max_payload;      /* capacity / 8 - 8 */
	unsigned eproto;           /* -EPROTO reports seen */
	unsigned poisons;          /* poison records consumed */
	unsigned fatals;           /* fatal records consumed */
	bool done;                 /* a read or peek returned -EPIPE */
	bool peeked;               /* a peek is outstanding */
	struct lull_record peek;   /* what it handed out */
	unsigned char verdicts;    /* the handler's next verdicts, 2 bits each */
	unsigned room;             /* a run read: records its limit has left */
	unsigned long sum;         /* every byte handed out, read */
};

static void check_init(struct consumer_check *c, const void *region,
		       uint64_t capacity, uint32_t lanes)
{
	memset(c, 0, sizeof(*c));
	c->data = (const unsigned char *)region + 1024 + 256 * (uint64_t)lanes;
	c->capacity = capacity;
	c->lanes = lanes;
	c->max_payload = (uint32_t)(capacity / 8 - 8);
}

/* Read every byte of [p, p + n): ASan checks each access. */
static void touch(struct consumer_check *c, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		c->sum += b[i];
}

/* A record the consumer hands out, by a read or a peek. */
static void check_record(struct consumer_check *c,
			 const struct lull_record *rec)
{
	const unsigned char *p = rec->data, *end;
	const struct lull_fatal *fatal;
	size_t text;
	uint64_t off;

	require(!c->done);
	require(p != NULL);
	require(((uintptr_t)p & 7) == 0);
	if (rec->type >= 1) {
		/* Nothing after a corruption was reported, or the poison. */
		require(!c->eproto && !c->poisons);
		require(rec->len <= c->max_payload);
		require(p >= c->data + 8);
		/*
		 * By its header, which lies in the data area: an empty
		 * record in a lane's last 8 bytes has its payload pointer at
		 * the lane's end, which is the next lane's start or the end
		 * of the data area (and it reads nothing there).
		 */
		off = (uint64_t)(p - c->data) - 8;
		require(off < c->lanes * c->capacity);
		/* Within one lane: never across the end of its data. */
		end = c->data + (off / c->capacity + 1) * c->capacity;
		require(rec->len <= (size_t)(end - p));
		touch(c, p, rec->len);
	} else if (rec->type == LULL_TYPE_FATAL) {
		require(!c->eproto && !c->poisons);
		/* Never from the data area, where anyone writes anything. */
		require(p + sizeof(struct lull_fatal) <= c->data ||
			p >= c->data + c->lanes * c->capacity);
		require(rec->len >= offsetof(struct lull_fatal, message));
		require(rec->len < sizeof(struct lull_fatal));
		fatal = rec->data;
		text = rec->len - offsetof(struct lull_fatal, message);
		touch(c, p, rec->len + 1);
		require(fatal->length == text);
		require(fatal->message[text] == '\0');
		require(c->fatals == 0);
	} else if (rec->type == LULL_TYPE_DEATH) {
		/* The consumer's own notice, never from the data area. */
		require(!c->eproto && !c->poisons);
		require(rec->len == sizeof(struct lull_death));
		require(p + sizeof(struct lull_death) <= c->data ||
			p >= c->data + c->lanes * c->capacity);
		require(((const struct lull_death *)p)->slot <
			LULL_PRODUCER_SLOTS);
		touch(c, p, rec->len);
	} else {
		require(rec->type == LULL_TYPE_POISON);
		require(rec->len == 0);
		require(c->poisons == 0);
	}
}

/* The handler: each record checked, then a verdict from the input. */
static int check_handler(const struct lull_record *rec, void *ctx)
{
	struct consumer_check *c = ctx;
	int verdict = c->verdicts & 3;

	check_record(c, rec);
	c->verdicts = (unsigned char)(c->verdicts >> 2 | verdict << 6);
	if (verdict == LULL_READ_KEEP)
		return LULL_READ_KEEP;
	if (rec->type == LULL_TYPE_POISON)
		c->poisons++;
	if (rec->type == LULL_TYPE_FATAL)
		c->fatals++;
	return verdict == 3 ? LULL_READ_CONTINUE : verdict;
}

/*
 * The handler of lull_ring_read_items(): a run within the read's limit;
 * one of several records is a packed array's items, alike user records
 * back to back that lie within one lane as one record does, checked as
 * such; then a verdict from the input for the whole run.
 */
static int check_run_handler(const struct lull_items *run, void *ctx)
{
	struct consumer_check *c = ctx;
	struct lull_record rec = { .data = run->data, .type = run->type };
	int verdict = c->verdicts & 3;

	require(run->count >= 1 && run->count <= c->room);
	if (run->count > 1) {
		require(run->type >= 1 && run->len && (run->len & 7) == 0);
		require(run->len <= c->max_payload / run->count);
	}
	rec.len = run->len * run->count;
	check_record(c, &rec);
	c->verdicts = (unsigned char)(c->verdicts >> 2 | verdict << 6);
	if (verdict == LULL_READ_KEEP)
		return LULL_READ_KEEP;
	c->room -= run->count;
	if (run->type == LULL_TYPE_POISON)
		c->poisons++;
	if (run->type == LULL_TYPE_FATAL)
		c->fatals++;
	return verdict == 3 ? LULL_READ_CONTINUE : verdict;
}

/*
 * After a read or peek: its result, against what came before (@poisoned:
 * whether the poison had been consumed before the call).
 */
static void check_result(struct consumer_check *c, int ret, bool poisoned)
{
	/* After the poison, -EPIPE for good. */
	require(!poisoned || ret == -EPIPE);
	if (ret == -EPROTO) {
		require(!c->done && !c->poisons);
		require(++c->eproto == 1);
	} else if (ret == -EPIPE) {
		c->done = true;
	} else {
		/* Once -EPIPE, always -EPIPE. */
		require(!c->done);
	}
}

/* A read of up to @limit records, in runs (@runs) or one by one. */
static void check_read(struct consumer_check *c, struct lull_ring *ring,
		       unsigned limit, unsigned char verdicts, bool runs)
{
	bool poisoned = c->poisons;
	int ret;

	c->verdicts = verdicts;
	c->room = limit;
	ret = runs ? lull_ring_read_items(ring, check_run_handler, c, limit)
		   : lull_ring_read(ring, check_handler, c, limit);
	if (c->peeked) {
		require(ret == -EINVAL);
		return;
	}
	require(ret == -EAGAIN || ret == -EPIPE || ret == -EPROTO ||
		(ret >= 0 && (unsigned)ret <= limit));
	/* A run read returns the records of the runs it consumed. */
	require(!runs || ret < 0 || (unsigned)ret == limit - c->room);
	check_result(c, ret, poisoned);
}

static void check_peek(struct consumer_check *c, struct lull_ring *ring)
{
	bool poisoned = c->poisons;
	struct lull_record rec;
	int ret = lull_ring_peek(ring, &rec);

	require(ret == 0 || ret == -EAGAIN || ret == -EPIPE ||
		ret == -EPROTO);
	if (ret == 0) {
		/* The same record until its release. */
		if (c->peeked) {
			require(rec.data == c->peek.data &&
				rec.len == c->peek.len &&
				rec.type == c->peek.type);
		} else {
			check_record(c, &rec);
			c->peek = rec;
			c->peeked = true;
		}
	} else {
		require(!c->peeked);
	}
	check_result(c, ret, poisoned);
}

static void check_release(struct consumer_check *c, struct lull_ring *ring)
{
	int ret = lull_ring_release(ring);

	require(ret == (c->peeked ? 0 : -EINVAL));
	if (c->peeked && c->peek.type == LULL_TYPE_POISON)
		c->poisons++;
	if (c->peeked && c->peek.type == LULL_TYPE_FATAL)
		c->fatals++;
	c->peeked = false;
}

static void check_wait(struct consumer_check *c, struct lull_ring *ring)
{
	int ret = lull_ring_wait(ring, 0);

	/* -EPERM: a region whose flags claim membarrier(2) for a process
	 * that never registered for it; the park's barrier fails. */
	require(ret == 0 || ret == -ETIMEDOUT || ret == -EPIPE ||
		ret == -EPERM);
	require(ret != -EPIPE || c->done || c->poisons);
}

/* What the consumer's counter says, against the reports seen. */
static void check_stats(struct consumer_check *c, struct lull_ring *ring)
{
	struct lull_ring_stats st;

	require(lull_ring_stats(ring, &st) == 0);
	require(st.corruptions <= 1);
	require(c->eproto <= st.corruptions);
}

#endif /* LULL_FUZZ_REGION_CHECK_H */
