/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - what the programs in perf/ share, in bench_common.c
 * (compiled into each program once): machine load and CPU time, order
 * statistics over a few runs, CPU pinning and the cache-line round trip,
 * and the parsing of option values (numbers, comma lists of numbers or of
 * names).
 *
 * Inline here only what runs on a hot path or on every message: the clock,
 * a rusage's CPU time and the one back-off of every spinning side under
 * test.
 */
#ifndef LULL_BENCH_COMMON_H
#define LULL_BENCH_COMMON_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <ck_pr.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- inline: the clock, CPU time, the back-off ------------------------ */

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* User plus system time in @ru, in ns. */
static inline uint64_t bench_ru_cpu_ns(const struct rusage *ru)
{
	return ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) *
		       1000000000u +
	       ((uint64_t)ru->ru_utime.tv_usec +
		(uint64_t)ru->ru_stime.tv_usec) *
		       1000u;
}

/*
 * The back-off of every spinning side of every ring, so that no ring wins by
 * waiting differently (a side that parks or blocks in the kernel, like
 * lull's consumer in lull_ring_wait() or a pipe's reader, does not use it):
 * on a full (producer) or empty (consumer) ring, spin with
 * ck_pr_stall() (PAUSE on x86) for 1, 2, 4, ... 2^(BENCH_SPIN_ROUNDS - 1)
 * iterations on successive failures, then sched_yield() on every further
 * failure until an operation succeeds.  The yield matters on small machines:
 * with more threads than CPUs a spinning side would otherwise burn the time
 * slice that the other side needs to make room.
 * Unless bench_backoff_pauses is set (throughput --pause N): then every
 * failure spins that many iterations and none yields, which is only sound
 * while every thread has a CPU of its own.  How long a failed poll waits
 * moves the spinning rings a lot (perf/README.md, "How long a failed poll
 * waits").
 */
#define BENCH_SPIN_ROUNDS 6

extern unsigned int bench_backoff_pauses;

struct bench_backoff {
	unsigned int fails; /* consecutive, since the last success */
	uint64_t waits;     /* all calls to bench_backoff_wait() */
	uint64_t yields;    /* of which ended in sched_yield() */
};

static inline void bench_backoff_init(struct bench_backoff *b)
{
	memset(b, 0, sizeof(*b));
}

/* After a success: the next failure starts with the shortest spin. */
static inline void bench_backoff_reset(struct bench_backoff *b)
{
	b->fails = 0;
}

static inline void bench_backoff_wait(struct bench_backoff *b)
{
	b->waits++;
	if (bench_backoff_pauses) {
		for (unsigned int i = 0; i < bench_backoff_pauses; i++)
			ck_pr_stall();
		return;
	}
	if (b->fails < BENCH_SPIN_ROUNDS) {
		unsigned int i, n = 1u << b->fails;

		for (i = 0; i < n; i++)
			ck_pr_stall();
		b->fails++;
		return;
	}
	b->yields++;
	sched_yield();
}

/* --- the machine: load, CPU time, CPUs -------------------------------- */

/* This process's CPU time so far (user + system), in ns; 0 if unknown. */
uint64_t bench_self_cpu_ns(void);

/*
 * Busy CPU time of the whole machine so far, in ns, from /proc/stat (all
 * but idle and iowait; steal included: time the hypervisor gave away is
 * time the threads under test did not get).  0 when unreadable.  Less the
 * process's own CPU time, it tells how much else ran during a run: on a
 * small machine any other busy process moves the results more than
 * anything under test does.
 */
uint64_t bench_machine_busy_ns(void);

/*
 * How many CPUs other processes used over a stretch of time:
 * bench_others_start() at its start, bench_others_cpus() at its end (the
 * machine's busy time less this process's, over the wall time).
 */
struct bench_others {
	uint64_t busy, self, t;
};

void bench_others_start(struct bench_others *o);
double bench_others_cpus(const struct bench_others *o);

/*
 * The 1-minute load average, or -1 when unreadable.  The benchmarks print
 * it before and after: they share the machine with whatever else runs, and
 * a busy machine explains a wide min-max spread better than anything under
 * test does.
 */
double bench_load_average(void);

/*
 * The CPUs this process may run on, in increasing order, into @cpus (room
 * for CPU_SETSIZE).  Returns how many, 0 when they cannot be read.
 */
int bench_allowed_cpus(int *cpus);

/* Pin the calling thread to @cpu; a negative @cpu leaves it free. */
int bench_pin_self(int cpu);

/*
 * Cache-line round trip between two CPUs: a thread on @cpu_ping stores a
 * counter, a thread on @cpu_echo waits for it and echoes it on another
 * line, @iters times.  Returns the mean ns per round trip, or -1.  It is
 * what every message of a ring pays when producer and consumer sit on
 * different CPUs and chase each other, and on virtual machines it can vary
 * by several times from one minute to the next as the host moves the
 * virtual CPUs.
 */
double bench_c2c_ns(int cpu_ping, int cpu_echo, uint64_t iters);

/* --- order statistics, ratios ----------------------------------------- */

/*
 * Median, minimum and maximum of @n values (n >= 1).  Sorts a copy, so the
 * caller's array keeps its run order.  An even count gives the mean of the
 * two middle values.
 */
void bench_stats(const double *v, size_t n, double *median, double *min,
		 double *max);

/* The median of @n values; 0 when there are none. */
double bench_median(const double *v, int n);

/* The median of @n values (n >= 1), and their minimum and maximum. */
double bench_range(const double *v, int n, double *lo, double *hi);

/* @a / @b, or 0 unless @b is positive. */
double bench_ratio(double a, double b);

/* --- option values ----------------------------------------------------- */

/*
 * An option's unsigned number (decimal, 0x hex or 0 octal) into *@v.
 * Returns false, leaving *@v alone, unless all of @s is one such number
 * that fits.
 */
bool bench_parse_u64(const char *s, uint64_t *v);

/*
 * A non-negative decimal number (fractions allowed) times @scale, rounded,
 * into *@v; false unless all of @s is one, and the result at most 1e18.
 */
bool bench_parse_scaled(const char *s, double scale, uint64_t *v);

/* All of @s a decimal number, not NaN, into *@v; false otherwise. */
bool bench_parse_double(const char *s, double *v);

/*
 * A comma list of bench_parse_scaled() numbers into @v (room for @max);
 * the word @word (when not NULL) stands for @word_v.  Returns how many, or
 * -1 for an empty list, too many values or anything else.
 */
int bench_parse_list(const char *arg, double scale, uint64_t *v, int max,
		     const char *word, uint64_t word_v);

/*
 * A comma list of names from @names (NULL-terminated) into @set, one flag
 * per name: set[k] when names[k] is in the list, the others cleared.
 * Returns 0, or -1 for an unknown name or an empty list.
 */
int bench_parse_names(const char *arg, const char *const *names, bool *set);

#ifdef __cplusplus
}
#endif

#endif /* LULL_BENCH_COMMON_H */
