/* SPDX-License-Identifier: MIT */
/*
 * bench_common.c - the helpers both benchmarks share (declared, with what
 * each returns, in bench_common.h): machine load, CPUs and pinning, the
 * cache-line round trip, order statistics, and option values.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"

unsigned int bench_backoff_pauses;

/* --- the machine ------------------------------------------------------ */

uint64_t bench_self_cpu_ns(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0 : bench_ru_cpu_ns(&ru);
}

uint64_t bench_machine_busy_ns(void)
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

void bench_others_start(struct bench_others *o)
{
	o->busy = bench_machine_busy_ns();
	o->self = bench_self_cpu_ns();
	o->t = bench_now_ns();
}

double bench_others_cpus(const struct bench_others *o)
{
	uint64_t wall = bench_now_ns() - o->t;
	uint64_t busy = bench_machine_busy_ns() - o->busy;
	uint64_t self = bench_self_cpu_ns() - o->self;

	return busy > self && wall ? (double)(busy - self) / (double)wall : 0;
}

double bench_load_average(void)
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

int bench_allowed_cpus(int *cpus)
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

int bench_pin_self(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* --- the cache-line round trip ---------------------------------------- */

struct c2c {
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
static void spin_until(_Atomic uint64_t *word, uint64_t v)
{
	unsigned int n = 0;

	while (atomic_load_explicit(word, memory_order_acquire) != v)
		if (++n % 65536 == 0)
			sched_yield();
}

static void *c2c_echo(void *arg)
{
	struct c2c *c = arg;
	uint64_t i;

	bench_pin_self(c->cpu_echo);
	for (i = 1; i <= c->iters; i++) {
		/* Acquire pairs with the release store in c2c_ping(). */
		spin_until(&c->ping, i);
		/* Pairs with the acquire load of pong in c2c_ping(). */
		atomic_store_explicit(&c->pong, i, memory_order_release);
	}
	return NULL;
}

static void *c2c_ping(void *arg)
{
	struct c2c *c = arg;
	uint64_t i, t0;

	bench_pin_self(c->cpu_ping);
	t0 = bench_now_ns();
	for (i = 1; i <= c->iters; i++) {
		atomic_store_explicit(&c->ping, i, memory_order_release);
		spin_until(&c->pong, i);
	}
	c->ns = (double)(bench_now_ns() - t0) / (double)c->iters;
	return NULL;
}

double bench_c2c_ns(int cpu_ping, int cpu_echo, uint64_t iters)
{
	struct c2c *c = aligned_alloc(128, sizeof(*c));
	pthread_t tp, te;
	double ns = -1;
	uint64_t i;

	if (!c)
		return -1;
	memset(c, 0, sizeof(*c));
	c->cpu_ping = cpu_ping;
	c->cpu_echo = cpu_echo;
	c->iters = iters;
	if (pthread_create(&te, NULL, c2c_echo, c))
		goto out;
	if (pthread_create(&tp, NULL, c2c_ping, c)) {
		/* Feed the echo thread so that it ends. */
		for (i = 1; i <= iters; i++) {
			atomic_store_explicit(&c->ping, i,
					      memory_order_release);
			spin_until(&c->pong, i);
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

/* --- order statistics ------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void bench_stats(const double *v, size_t n, double *median, double *min,
		 double *max)
{
	double *s = malloc(n * sizeof(*s));

	if (!s) {
		*median = *min = *max = v[0];
		return;
	}
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	*min = s[0];
	*max = s[n - 1];
	*median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
}

double bench_median(const double *v, int n)
{
	double med, lo, hi;

	if (n <= 0)
		return 0;
	bench_stats(v, (size_t)n, &med, &lo, &hi);
	return med;
}

double bench_range(const double *v, int n, double *lo, double *hi)
{
	double med;

	bench_stats(v, (size_t)n, &med, lo, hi);
	return med;
}

double bench_ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* --- option values ---------------------------------------------------- */

bool bench_parse_u64(const char *s, uint64_t *v)
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

bool bench_parse_scaled(const char *s, double scale, uint64_t *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(s, &end);
	if (errno || end == s || *end || !(x >= 0) || x * scale > 1e18)
		return false;
	*v = (uint64_t)llround(x * scale);
	return true;
}

bool bench_parse_double(const char *s, double *v)
{
	char *end;
	double x = strtod(s, &end);

	if (end == s || *end || isnan(x))
		return false;
	*v = x;
	return true;
}

int bench_parse_list(const char *arg, double scale, uint64_t *v, int max,
		     const char *word, uint64_t word_v)
{
	char *list = strdup(arg), *tok, *save;
	int n = 0;

	if (!list)
		return -1;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n < max && word && !strcmp(tok, word)) {
			v[n++] = word_v;
			continue;
		}
		if (n == max || !bench_parse_scaled(tok, scale, &v[n])) {
			free(list);
			return -1;
		}
		n++;
	}
	free(list);
	return n ? n : -1;
}

int bench_parse_names(const char *arg, const char *const *names, bool *set)
{
	char *list = strdup(arg), *tok, *save;
	bool any = false;
	int k;

	if (!list)
		return -1;
	for (k = 0; names[k]; k++)
		set[k] = false;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		for (k = 0; names[k] && strcmp(tok, names[k]); k++)
			;
		if (!names[k]) {
			free(list);
			return -1;
		}
		set[k] = any = true;
	}
	free(list);
	return any ? 0 : -1;
}
