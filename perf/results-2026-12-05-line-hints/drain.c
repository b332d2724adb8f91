/* Fill a ring from one thread, then drain it from another: the drain's
 * speed in isolation, by capacity. */
#define _GNU_SOURCE
#include <lull/ring.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct lull_ring *ring;
static struct lull_producer *prod;
static _Atomic int phase; /* 0 fill, 1 drain, 2 done */
static size_t payload;
static unsigned char sink[4096];

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

static int handler(const struct lull_record *rec, void *ctx)
{
	(void)ctx;
	memcpy(sink, rec->data, rec->len);
	return LULL_READ_CONTINUE;
}

static int rounds;
static uint64_t fill_ns, drain_ns, recs;

static void *producer(void *arg)
{
	unsigned char msg[4096] = { 1 };
	(void)arg;
	pin(1);
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&phase) != 0)
			;
		uint64_t t0 = now();
		unsigned n = 0;
		while (lull_spsc_write(prod, 1, msg, payload) == 0)
			n++;
		fill_ns += now() - t0;
		recs += n;
		atomic_store(&phase, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	size_t cap = strtoull(argv[1], 0, 0);
	payload = strtoull(argv[2], 0, 0);
	rounds = atoi(argv[3]);
	
	pthread_t t;

	if (lull_ring_create(&ring, cap, LULL_RING_SPSC) < 0 ||
	    lull_producer_attach(ring, 0, &prod) < 0) {
		fprintf(stderr, "setup\n");
		return 1;
	}
	
	pin(0);
	pthread_create(&t, NULL, producer, NULL);
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&phase) != 1)
			;
		uint64_t t0 = now();
		while (lull_ring_read(ring, handler, NULL, 1u << 20) > 0)
			;
		drain_ns += now() - t0;
		atomic_store(&phase, 0);
	}
	pthread_join(t, NULL);
	printf("cap %zu payload %zu: fill %.1f ns/rec, drain %.1f ns/rec (%llu recs)\n",
	       cap, payload, (double)fill_ns / recs, (double)drain_ns / recs,
	       (unsigned long long)recs);
	return 0;
}
