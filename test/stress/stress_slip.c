/* SPDX-License-Identifier: MIT */
/*
 * stress_slip.c - the temporal slip of the reads (ring_read.c) under load.
 *
 * A plain-main program (ThreadSanitizer cannot run Criterion).  In each
 * configuration producer threads write 8-byte records as fast as they can
 * and one consumer, on the main thread, reads them with a handler that only
 * checks each record's producer and sequence number, with no read limit to
 * speak of, and parks in lull_ring_wait() when the ring is empty: a consumer
 * faster than its producers, which catches up with them and slips, where
 * stress_ring's consumer, checking every byte, rarely does.  The verdict:
 * every producer's records arrive in order, none lost, none repeated
 * (test/lib's ledger), then one poison record after the last detach.  How
 * many reads began with a slip (the handle's state, handles.h) is printed,
 * not checked: whether a consumer catches up depends on the machine.
 *
 * A watchdog (test/lib's) ends the process with a message naming the
 * configuration when no record arrives for 10 s or the configuration
 * outlasts --watchdog-seconds: a hang fails, it never stalls CI.
 *
 * Output: one line per configuration, then "N passed, M failed"; the exit
 * status is 0 only when every configuration passed.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lull.h>

#include "handles.h" /* the slip's state, read by the consumer's thread */
#include "../lib/ledger.h"
#include "../lib/threads.h"

#define MAX_PRODUCERS 4u
#define WAIT_NS (100ll * 1000 * 1000)

struct config {
	const char *name;
	unsigned flags;
	unsigned producers;
	size_t capacity;
};

static const struct config configs[] = {
	{ "spsc", LULL_RING_SPSC, 1, 64 * 1024 },
	/* A lane of 4 KiB: the slip's run is a quarter of it. */
	{ "spsc-4k", LULL_RING_SPSC, 1, 4096 },
	{ "lanes2", LULL_RING_LANES(2), 2, 64 * 1024 },
	{ "mpsc2", LULL_RING_MPSC, 2, 64 * 1024 },
};

struct run;

struct producer {
	struct run *run;
	struct lull_producer *prod;
	unsigned id;
	uint64_t records;
	int err; /* the first unexpected write result */
};

struct run {
	const struct config *cfg;
	struct lull_ring *ring;
	struct ledger ledger;
	struct producer producers[MAX_PRODUCERS];
	_Atomic uint64_t received;
	uint64_t slipped_reads, reads, waits;
	unsigned poisons;
	char why[256];
};

static void *producer_main(void *arg)
{
	struct producer *p = arg;
	bool spsc = p->run->cfg->flags == LULL_RING_SPSC;
	int r;

	for (uint64_t seq = 0; seq < p->records && !p->err;) {
		r = spsc ? lull_spsc_write(p->prod, (int32_t)p->id + 1, &seq,
					   sizeof(seq))
			 : lull_mpsc_write(p->prod, (int32_t)p->id + 1, &seq,
					   sizeof(seq));
		if (r == 0) {
			ledger_sent(&p->run->ledger, p->id, seq);
			seq++;
		} else if (r == -EAGAIN) {
			sched_yield();
		} else {
			p->err = r;
		}
	}
	/* The last detach ends the ring: the consumer gets the poison. */
	r = lull_producer_detach(p->prod);
	if (r && !p->err)
		p->err = r;
	return NULL;
}

static int on_record(const struct lull_record *rec, void *ctx)
{
	struct run *run = ctx;
	unsigned id = (unsigned)rec->type - 1;
	uint64_t seq;

	if (rec->type == LULL_TYPE_POISON && rec->len == 0) {
		run->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (run->why[0])
		return LULL_READ_STOP;
	if (rec->type < 1 || id >= run->cfg->producers ||
	    rec->len != sizeof(seq)) {
		snprintf(run->why, sizeof(run->why),
			 "a record of type %d and %u bytes", rec->type,
			 rec->len);
		return LULL_READ_STOP;
	}
	memcpy(&seq, rec->data, sizeof(seq));
	if (!ledger_got(&run->ledger, id, seq)) {
		snprintf(run->why, sizeof(run->why), "%s",
			 ledger_why(&run->ledger));
		return LULL_READ_STOP;
	}
	/* Relaxed: a count for the watchdog's thread, ordering nothing. */
	atomic_fetch_add_explicit(&run->received, 1, memory_order_relaxed);
	return LULL_READ_CONTINUE;
}

/* Read until the poison, parking when the ring is empty. */
static void consume(struct run *run)
{
	int r;

	while (!run->why[0]) {
		if (run->ring->slip_ns)
			run->slipped_reads++;
		run->reads++;
		r = lull_ring_read(run->ring, on_record, run, 1u << 20);
		if (r >= 0)
			continue;
		if (r == -EPIPE)
			return;
		if (r != -EAGAIN) {
			snprintf(run->why, sizeof(run->why), "read: %d", r);
			return;
		}
		run->waits++;
		r = lull_ring_wait(run->ring, WAIT_NS);
		if (r && r != -ETIMEDOUT && r != -EPIPE) {
			snprintf(run->why, sizeof(run->why), "wait: %d", r);
			return;
		}
	}
}

static uint64_t progress(void *arg)
{
	struct run *run = arg;

	return atomic_load_explicit(&run->received, memory_order_relaxed);
}

static bool run_config(const struct config *cfg, uint64_t records,
		       unsigned watchdog_s)
{
	struct run *run = calloc(1, sizeof(*run));
	struct watchdog_watch watch = { .progress = progress, .stall_s = 10 };
	pthread_t threads[MAX_PRODUCERS];
	struct watchdog wd;
	char what[96];
	double t0 = (double)now_ns();
	bool ok;
	int r;

	if (!run || ledger_init(&run->ledger, cfg->producers)) {
		fprintf(stderr, "stress_slip: out of memory\n");
		exit(1);
	}
	run->cfg = cfg;
	watch.ctx = run;
	snprintf(what, sizeof(what), "stress_slip %s", cfg->name);
	if (watchdog_watch(&wd, watchdog_s, what, &watch)) {
		fprintf(stderr, "stress_slip: no watchdog\n");
		exit(1);
	}
	r = lull_ring_create(&run->ring, cfg->capacity, cfg->flags);
	if (r) {
		fprintf(stderr, "stress_slip: %s: create: %d\n", cfg->name, r);
		exit(1);
	}
	for (unsigned i = 0; i < cfg->producers; i++) {
		struct producer *p = &run->producers[i];

		p->run = run;
		p->id = i;
		p->records = records / cfg->producers;
		r = lull_producer_attach(run->ring, 0, &p->prod);
		if (r || thread_start(&threads[i], producer_main, p)) {
			fprintf(stderr, "stress_slip: %s: producer %u: %d\n",
				cfg->name, i, r);
			exit(1);
		}
	}
	consume(run);
	for (unsigned i = 0; i < cfg->producers; i++) {
		if (run->why[0])
			/* The consumer gave up: let blocked producers end. */
			lull_ring_shutdown(run->ring, LULL_SHUTDOWN_IMMEDIATE);
		thread_join_or_fail(threads[i], 10 * 1000, "a producer");
		if (run->producers[i].err && !run->why[0])
			snprintf(run->why, sizeof(run->why),
				 "producer %u: write or detach: %d", i,
				 run->producers[i].err);
	}
	watchdog_stop(&wd);
	if (!run->why[0] && !ledger_complete(&run->ledger))
		snprintf(run->why, sizeof(run->why), "%s",
			 ledger_why(&run->ledger));
	if (!run->why[0] && run->poisons != 1)
		snprintf(run->why, sizeof(run->why), "%u poison records",
			 run->poisons);
	ok = !run->why[0];
	printf("%-8s %u producer(s) %10" PRIu64 " records %7.3f s, %" PRIu64
	       " reads (%" PRIu64 " began with a slip), %" PRIu64
	       " waits: %s%s\n",
	       cfg->name, cfg->producers, progress(run),
	       ((double)now_ns() - t0) / 1e9, run->reads, run->slipped_reads,
	       run->waits, ok ? "ok" : "FAILED: ", run->why);
	lull_ring_destroy(run->ring);
	ledger_fini(&run->ledger);
	free(run);
	return ok;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stress_slip [--records N] [--watchdog-seconds S]\n"
		   "  --records N           per configuration (default 20M; "
		   "K and M suffixes)\n"
		   "  --watchdog-seconds S  fail a configuration that "
		   "outlasts S (default 120)\n");
}

static bool parse_count(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	if (*end == 'K')
		v *= 1000, end++;
	else if (*end == 'M')
		v *= 1000 * 1000, end++;
	if (*end || !v)
		return false;
	*out = v;
	return true;
}

int main(int argc, char **argv)
{
	uint64_t records = 20 * 1000 * 1000, watchdog_s = 120;
	unsigned passed = 0, failed = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		}
		if (i + 1 < argc && !strcmp(argv[i], "--records") &&
		    parse_count(argv[i + 1], &records)) {
			i++;
		} else if (i + 1 < argc &&
			   !strcmp(argv[i], "--watchdog-seconds") &&
			   parse_count(argv[i + 1], &watchdog_s) &&
			   watchdog_s <= UINT_MAX) {
			i++;
		} else {
			usage(stderr);
			return 2;
		}
	}
	for (size_t c = 0; c < sizeof(configs) / sizeof(*configs); c++) {
		if (run_config(&configs[c], records, (unsigned)watchdog_s))
			passed++;
		else
			failed++;
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
