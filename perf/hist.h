/* SPDX-License-Identifier: MIT */
/*
 * hist.h - a log-linear latency histogram for the programs in perf/, in the
 * manner of HdrHistogram: exact below 128 ns, then every power of two split
 * into 128 equal buckets, so a bucket is never wider than 1/128 (0.8 %) of
 * the values in it.  Percentiles report the bucket's midpoint (error below
 * 0.4 %), clamped to the exact minimum and maximum, which are kept apart
 * together with the exact sum (for the mean).
 *
 * Range: 0 ns to 2^34 - 1 ns (17.2 s) in 3584 buckets (28 KiB); larger
 * values land in the top bucket, and count as such in the percentiles, but
 * the maximum and the mean stay exact.
 *
 * Header-only and static: only handoff uses it.  Not thread-safe: one writer,
 * or merge per-thread histograms with hist_merge().
 */
#ifndef LULL_PERF_HIST_H
#define LULL_PERF_HIST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS) /* buckets per power of two */
#define HIST_TOP_EXP 33                /* highest power of two kept */
#define HIST_BUCKETS ((HIST_TOP_EXP - HIST_SUB_BITS + 2) * HIST_SUB)

struct hist {
	uint64_t counts[HIST_BUCKETS];
	uint64_t n;
	uint64_t sum; /* ns; 2^64 ns is 584 years of samples */
	uint64_t min;
	uint64_t max;
};

static inline void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

static inline struct hist *hist_new(void)
{
	/* The cast: C++ mechanisms include this through handoff.h. */
	struct hist *h = (struct hist *)malloc(sizeof(*h));

	if (h)
		hist_reset(h);
	return h;
}

/*
 * The bucket of @v: v itself below HIST_SUB; above, the power of two e of
 * v's top bit picks a group of HIST_SUB buckets and the HIST_SUB_BITS bits
 * below the top bit pick one in it.  Group e starts at (e - 6) * HIST_SUB,
 * which makes the two schemes meet seamlessly at v = HIST_SUB.
 */
static inline unsigned hist_index(uint64_t v)
{
	unsigned e;

	if (v < HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	if (e > HIST_TOP_EXP)
		return HIST_BUCKETS - 1;
	return (e - HIST_SUB_BITS + 1) * HIST_SUB +
	       (unsigned)((v >> (e - HIST_SUB_BITS)) - HIST_SUB);
}

/* The lowest value of bucket @i and its width. */
static inline uint64_t hist_bucket_low(unsigned i, uint64_t *width)
{
	unsigned group = i / HIST_SUB, sub = i % HIST_SUB;

	if (group == 0) {
		*width = 1;
		return i;
	}
	*width = (uint64_t)1 << (group - 1);
	return (uint64_t)(HIST_SUB + sub) << (group - 1);
}

static inline void hist_record(struct hist *h, uint64_t v)
{
	h->counts[hist_index(v)]++;
	h->n++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
}

static inline void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->counts[i] += src->counts[i];
	dst->n += src->n;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

static inline double hist_mean(const struct hist *h)
{
	return h->n ? (double)h->sum / (double)h->n : 0;
}

/*
 * The @q quantile (0 < q <= 1): the value of the sample of rank
 * ceil(q * n) in increasing order, as its bucket's midpoint clamped to
 * [min, max].  q = 1 gives the exact maximum.  0 for an empty histogram.
 */
static inline uint64_t hist_quantile(const struct hist *h, double q)
{
	uint64_t rank, seen = 0, low, width, mid;
	double r;

	if (!h->n)
		return 0;
	if (q >= 1)
		return h->max;
	r = q * (double)h->n;
	rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank < 1)
		rank = 1;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->counts[i];
		if (seen < rank)
			continue;
		low = hist_bucket_low(i, &width);
		mid = low + (width - 1) / 2;
		if (mid < h->min)
			mid = h->min;
		if (mid > h->max)
			mid = h->max;
		return mid;
	}
	return h->max;
}

#endif /* LULL_PERF_HIST_H */
