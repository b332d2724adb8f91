/* SPDX-License-Identifier: MIT */
/*
 * bench_common.h - small helpers shared by the programs in perf/: a
 * monotonic clock, CPU time and machine load, order statistics over a few
 * runs, the one back-off of every spinning side under test, CPU pinning
 * and option parsing.
 *
 * Header-only and static: each benchmark is a single translation unit.
 * Include it after defining _GNU_SOURCE (pinning needs the CPU_* macros).
 */
#ifndef LULL_BENCH_COMMON_H
#define LULL_BENCH_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>

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
 * Busy CPU time of the whole machine so far, in ns, from /proc/stat (all
 * but idle and iowait; steal included: time the hypervisor gave away is
 * time the threads under test did not get).  0 when unreadable.  Less the
 * process's own CPU time, it tells how much else ran during a run: on a
 * small machine any other busy process moves the results more than
 * anything under test does.
 */
static inline uint64_t bench_machine_busy_ns(void)
{
	unsigned long long v[10] = { 0 };
	uint64_t busy = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");
	int i, n;

	if (!f)
		return 0;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		   &v[8], &v[9]);
	fclose(f);
	if (n < 8 || hz <= 0)
		return 0;
	/* user nice system [idle iowait] irq softirq steal; guest in user. */
	for (i = 0; i < 8; i++)
		if (i != 3 && i != 4)
			busy += v[i];
	return busy * (1000000000u / (uint64_t)hz);
}

/*
 * The 1-minute load average, or -1 when unreadable.  The benchmarks print
 * it before and after: they share the machine with whatever else runs, and
 * a busy machine explains a wide min-max spread better than anything under
 * test does.
 */
static inline double bench_load_average(void)
{
	double load = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &load) != 1)
			load = -1;
		fclose(f);
	}
	return load;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Median, minimum and maximum of @n values (n >= 1).  Sorts a copy, so the
 * caller's array keeps its run order.  An even count gives the mean of the
 * two middle values.
 */
static inline void bench_stats(const double *v, size_t n, double *median,
			       double *min, double *max)
{
	double *s = malloc(n * sizeof(*s));

	if (!s) {
		*median = *min = *max = v[0];
		return;
	}
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), bench_cmp_double);
	*min = s[0];
	*max = s[n - 1];
	*median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
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
 */
#define BENCH_SPIN_ROUNDS 6

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

/*
 * The CPUs this process may run on, in increasing order, into @cpus (room
 * for CPU_SETSIZE).  Returns how many, 0 when they cannot be read.
 */
static inline int bench_allowed_cpus(int *cpus)
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n;
}

/* Pin the calling thread to @cpu; a negative @cpu leaves it free. */
static inline int bench_pin_self(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/*
 * Cache-line round trip between two CPUs: thread A on @cpu_a stores a
 * counter, thread B on @cpu_b waits for it and echoes it on another line,
 * @iters times.  Returns the mean ns per round trip, or -1.  It is what
 * every message of a ring pays when producer and consumer sit on different
 * CPUs and chase each other, and on virtual machines it can vary by several
 * times from one minute to the next as the host moves the virtual CPUs.
 */
struct bench_c2c {
	alignas(128) _Atomic uint64_t ping;
	alignas(128) _Atomic uint64_t pong;
	alignas(128) int cpu_ping, cpu_echo;
	uint64_t iters;
	double ns;
};

/*
 * Acquire-spin until *@word == @v; yield now and then, so that two threads
 * that ended up on one CPU still finish.
 */
static inline void bench_spin_until(_Atomic uint64_t *word, uint64_t v)
{
	unsigned int n = 0;

	while (atomic_load_explicit(word, memory_order_acquire) != v)
		if (++n % 65536 == 0)
			sched_yield();
}

static inline void *bench_c2c_echo(void *arg)
{
	struct bench_c2c *c = arg;
	uint64_t i;

	bench_pin_self(c->cpu_echo);
	for (i = 1; i <= c->iters; i++) {
		/* Acquire pairs with the release store in bench_c2c_ping(). */
		bench_spin_until(&c->ping, i);
		/* Pairs with the acquire load of pong in bench_c2c_ping(). */
		atomic_store_explicit(&c->pong, i, memory_order_release);
	}
	return NULL;
}

static inline void *bench_c2c_ping(void *arg)
{
	struct bench_c2c *c = arg;
	uint64_t i, t0;

	bench_pin_self(c->cpu_ping);
	t0 = bench_now_ns();
	for (i = 1; i <= c->iters; i++) {
		atomic_store_explicit(&c->ping, i, memory_order_release);
		bench_spin_until(&c->pong, i);
	}
	c->ns = (double)(bench_now_ns() - t0) / (double)c->iters;
	return NULL;
}

static inline double bench_c2c_ns(int cpu_ping, int cpu_echo, uint64_t iters)
{
	struct bench_c2c *c = aligned_alloc(128, sizeof(*c));
	pthread_t tp, te;
	double ns = -1;
	uint64_t i;

	if (!c)
		return -1;
	memset(c, 0, sizeof(*c));
	c->cpu_ping = cpu_ping;
	c->cpu_echo = cpu_echo;
	c->iters = iters;
	if (pthread_create(&te, NULL, bench_c2c_echo, c))
		goto out;
	if (pthread_create(&tp, NULL, bench_c2c_ping, c)) {
		/* Feed the echo thread so that it ends. */
		for (i = 1; i <= iters; i++) {
			atomic_store_explicit(&c->ping, i,
					      memory_order_release);
			bench_spin_until(&c->pong, i);
		}
		pthread_join(te, NULL);
		goto out;
	}
	pthread_join(tp, NULL);
	pthread_join(te, NULL);
	ns = c->ns;
out:
	free(c);
	return ns;
}

/*
 * An option's unsigned number (decimal, 0x hex or 0 octal) into *@v.
 * Returns false, leaving *@v alone, unless all of @s is one such number
 * that fits.
 */
static inline bool bench_parse_u64(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-')
		return false;
	*v = x;
	return true;
}

#endif /* LULL_BENCH_COMMON_H */
