/* SPDX-License-Identifier: MIT */
/*
 * throughput_report.c - what throughput prints: the table (stdout, or
 * stderr with --json), lull's ratios over each peer, issue 5's throughput
 * targets, and one JSON object per result (fields: perf/README.md).
 */
#include <stdio.h>
#include <stdlib.h>

#include "throughput.h"

struct summary {
	double mps, mps_min, mps_max, nspm, msgs, cpus, other, c2c, wpm, spm,
		ppm, cpm, safety, rpm, clwpm;
};

/* Whether lull ring @lull is compared with peer @peer. */
static bool is_peer(enum ring_kind lull, enum ring_kind peer)
{
	return !tp_rings[peer]->is_lull &&
	       (tp_rings[peer]->cls == CLASS_GENERAL ||
		tp_rings[peer]->cls == tp_rings[lull]->cls);
}

/* Median (and min, max) of one run_result field over the done runs. */
static double field_median(const struct config *cfg, size_t off, double *min,
			   double *max)
{
	double v[1000], med, lo, hi;
	int i;

	for (i = 0; i < cfg->done_runs; i++)
		memcpy(&v[i], (const char *)&cfg->res[i] + off, sizeof(v[i]));
	bench_stats(v, (size_t)cfg->done_runs, &med, &lo, &hi);
	if (min)
		*min = lo;
	if (max)
		*max = hi;
	return med;
}

#define MEDIAN(cfg, field) \
	field_median(cfg, offsetof(struct run_result, field), NULL, NULL)

static void summarise(const struct config *cfg, struct summary *s)
{
	int i;

	s->mps = field_median(cfg, offsetof(struct run_result, mps),
			      &s->mps_min, &s->mps_max);
	s->nspm = MEDIAN(cfg, nspm);
	s->msgs = MEDIAN(cfg, msgs);
	s->cpus = MEDIAN(cfg, cpus);
	s->other = MEDIAN(cfg, other);
	s->c2c = MEDIAN(cfg, c2c);
	s->wpm = MEDIAN(cfg, wpm);
	s->spm = MEDIAN(cfg, spm);
	s->ppm = MEDIAN(cfg, ppm);
	s->cpm = MEDIAN(cfg, cpm);
	s->rpm = MEDIAN(cfg, rpm);
	s->clwpm = MEDIAN(cfg, clwpm);
	s->safety = 0;
	for (i = 0; i < cfg->done_runs; i++)
		s->safety += cfg->res[i].safety;
}

static struct config *find_config(struct config *cfgs, int ncfgs,
				  enum ring_kind kind, unsigned int producers,
				  size_t payload)
{
	int i;

	for (i = 0; i < ncfgs; i++)
		if (cfgs[i].kind == kind && cfgs[i].producers == producers &&
		    cfgs[i].payload == payload && cfgs[i].done_runs)
			return &cfgs[i];
	return NULL;
}

/* Median msg/s of lull ring @lull over that of @peer. */
static double ratio(const struct config *lull, const struct config *peer)
{
	return bench_ratio(MEDIAN(lull, mps), MEDIAN(peer, mps));
}

/*
 * The lull ring a peer's JSON lull_ratio is against: lull-spsc for the SPSC
 * peers, lull-mpsc for the others (pipe and eventfd too, at every count, so
 * that each peer's ratios form one series; the tables also give lull-spsc
 * against them at one producer).
 */
static struct config *lull_for(struct config *cfgs, int ncfgs,
			       const struct config *peer)
{
	if (peer->ring->is_lull)
		return NULL;
	if (peer->ring->cls == CLASS_SPSC)
		return find_config(cfgs, ncfgs, RING_LULL_SPSC, 1,
				   peer->payload);
	return find_config(cfgs, ncfgs, RING_LULL_MPSC, peer->producers,
			   peer->payload);
}

void tp_print_json(struct config *cfgs, int ncfgs, const struct config *cfg,
		   const struct options *opt)
{
	const struct peer_ring *d = cfg->ring;
	struct config *lull;
	struct summary s;
	int i;

	summarise(cfg, &s);
	printf("{\"ring\":\"%s\",\"producers\":%u,\"payload\":%zu,"
	       "\"msgs_per_s\":%.0f,\"msgs_per_s_min\":%.0f,"
	       "\"msgs_per_s_max\":%.0f,\"ns_per_msg\":%.3f,"
	       "\"wakes_per_msg\":%.6g,\"syscalls_per_msg\":%.6g,",
	       d->name, cfg->producers, cfg->payload, s.mps, s.mps_min,
	       s.mps_max, s.nspm, s.wpm, s.spm);
	if (d->is_lull)
		printf("\"parks_per_msg\":%.6g,\"park_cancels_per_msg\":%.6g,"
		       "\"park_barrier\":\"%s\",\"safety_timeouts\":%.0f,"
		       "\"lull_spin_ns\":%s,\"lull_read\":\"%s\",",
		       s.ppm, s.cpm, tp_lull_membarrier_used() ? "membarrier" : "fence",
		       s.safety, tp_lull_spin_json(opt->lull_spin_ns),
		       opt->lull_read_runs ? "runs" : "records");
	if (d->is_lull)
		printf("\"claim_retries_per_msg\":%.6g,"
		       "\"claim_waits_per_msg\":%.6g,",
		       s.rpm, s.clwpm);
	lull = lull_for(cfgs, ncfgs, cfg);
	if (lull)
		printf("\"lull_ring\":\"%s\",\"lull_ratio\":%.4f,",
		       tp_rings[lull->kind]->name, ratio(lull, cfg));
	printf("\"runs\":%d,\"runs_msgs_per_s\":[", cfg->done_runs);
	for (i = 0; i < cfg->done_runs; i++)
		printf("%s%.0f", i ? "," : "", cfg->res[i].mps);
	printf("],\"messages\":%.0f,\"cpus\":%.2f,\"other_cpus\":%.2f,"
	       "\"c2c_round_trip_ns\":%.0f,\"capacity\":%zu,",
	       s.msgs, s.cpus, s.other, s.c2c, opt->capacity);
	if (d->json)
		d->json(cfg);
	if (opt->messages)
		printf("\"truncated_runs\":%d,", cfg->truncated_runs);
	printf("\"seconds\":%.3f,\"pinned\":%s,\"pauses\":%u,"
	       "\"batch\":%u,\"producer_batch\":%u}\n",
	       opt->messages ? 0 : opt->seconds, opt->pin ? "true" : "false",
	       bench_backoff_pauses, opt->batch, cfg->push_batch);
}

/* A ratio column's width: the peer's name, at least 9. */
static int column(enum ring_kind peer)
{
	int w = (int)strlen(tp_rings[peer]->name);

	return w > 9 ? w : 9;
}

/* lull ring @lull over each of its peers, one row per payload and count. */
static void print_ratios(FILE *f, struct config *cfgs, int ncfgs,
			 const struct options *opt, enum ring_kind lull)
{
	int peers[RING_KINDS], npeers = 0, i, j, k, rows = 0;

	for (k = 0; k < opt->nrings; k++)
		if (is_peer(lull, opt->rings[k]))
			peers[npeers++] = opt->rings[k];
	if (!npeers)
		return;
	for (i = 0; i < opt->npayloads; i++) {
		for (j = 0; j < opt->nproducers; j++) {
			unsigned int np = opt->producers[j];
			struct config *a = find_config(cfgs, ncfgs, lull, np,
						       opt->payloads[i]);

			if (!a)
				continue;
			if (!rows++) {
				fprintf(f, "\n%s / peer (median msg/s; > 1: "
					   "lull faster)\n%7s %4s",
					tp_rings[lull]->name, "payload",
					"prod");
				for (k = 0; k < npeers; k++)
					fprintf(f, " %*s", column(peers[k]),
						tp_rings[peers[k]]->name);
				fprintf(f, "\n");
			}
			fprintf(f, "%7zu %4u", opt->payloads[i], np);
			for (k = 0; k < npeers; k++) {
				struct config *b = find_config(
					cfgs, ncfgs, peers[k], np,
					opt->payloads[i]);

				if (b)
					fprintf(f, " %*.2fx",
						column(peers[k]) - 1,
						ratio(a, b));
				else
					fprintf(f, " %*s", column(peers[k]),
						"-");
			}
			fprintf(f, "\n");
		}
	}
}

/* The best median among the target peers of @cls, or NULL. */
static struct config *best_peer(struct config *cfgs, int ncfgs,
				enum ring_class cls, unsigned int np, size_t pl)
{
	struct config *best = NULL, *b;

	for (int k = 0; k < RING_KINDS; k++) {
		if (!tp_rings[k]->target || tp_rings[k]->cls != cls)
			continue;
		b = find_config(cfgs, ncfgs, k, np, pl);
		if (b && (!best || MEDIAN(b, mps) > MEDIAN(best, mps)))
			best = b;
	}
	return best;
}

/* One target line: lull ring @a at least @factor times @b. */
static void target_line(FILE *f, const char *what, struct config *a,
			struct config *b, double factor, int *met,
			int *missed)
{
	bool ok = MEDIAN(a, mps) >= factor * MEDIAN(b, mps);

	fprintf(f,
		"  %s >= %.1fx %s, payload %zu P=%u: %.2f vs %.2f M msg/s "
		"(%.2fx): %s\n",
		what, factor, tp_rings[b->kind]->name, a->payload,
		a->producers, MEDIAN(a, mps) / 1e6, MEDIAN(b, mps) / 1e6,
		ratio(a, b), ok ? "met" : "MISSED");
	ok ? (*met)++ : (*missed)++;
}

/*
 * The targets of the perf issues, for what ran.  One record per push:
 * lull-spsc at least boost-spsc and ck-spsc at 8 bytes; lull-lanes at
 * least 1.2x the best MPSC peer (moodycamel included) at every producer
 * count and payload.  With --producer-batch: lull-spsc at least 1.2x
 * rte-spsc and boost-spsc-bulk, lull-mpsc at least 1.2x rte-mpsc at 1, 2
 * and 4 producers.
 */
static void print_targets(FILE *f, struct config *cfgs, int ncfgs,
			  const struct options *opt)
{
	static const enum ring_kind spsc_peers[] = {
		RING_BOOST_SPSC, RING_CK_SPSC, RING_RTE_SPSC,
		RING_BOOST_SPSC_BULK,
	};
	bool batched = opt->push_batch > 1;
	int i, j, met = 0, missed = 0;
	struct config *a, *b;

	fprintf(f, "\ntargets (%s)\n",
		batched ? "producer batches" : "one record per push");
	a = find_config(cfgs, ncfgs, RING_LULL_SPSC, 1, 8);
	for (i = 0; a && i < (int)(sizeof(spsc_peers) / sizeof(spsc_peers[0]));
	     i++) {
		bool bulk = spsc_peers[i] == RING_RTE_SPSC ||
			    spsc_peers[i] == RING_BOOST_SPSC_BULK;

		if (bulk != batched)
			continue;
		b = find_config(cfgs, ncfgs, spsc_peers[i], 1, 8);
		if (b)
			target_line(f, "lull-spsc", a, b, batched ? 1.2 : 1.0,
				    &met, &missed);
	}
	for (i = 0; i < opt->npayloads; i++) {
		for (j = 0; j < opt->nproducers; j++) {
			unsigned int np = opt->producers[j];
			size_t pl = opt->payloads[i];

			a = find_config(cfgs, ncfgs, RING_LULL_LANES, np, pl);
			b = best_peer(cfgs, ncfgs, CLASS_MPSC, np, pl);
			if (a && b && !batched)
				target_line(f, "lull-lanes", a, b, 1.2, &met,
					    &missed);
			a = find_config(cfgs, ncfgs, RING_LULL_MPSC, np, pl);
			b = find_config(cfgs, ncfgs, RING_RTE_MPSC, np, pl);
			if (a && b && batched && np <= 4)
				target_line(f, "lull-mpsc", a, b, 1.2, &met,
					    &missed);
		}
	}
	fprintf(f, "  %d met, %d missed\n", met, missed);
}

void tp_print_table(FILE *f, struct config *cfgs, int ncfgs,
		    const struct options *opt)
{
	double busiest = 0;
	int i, truncated = 0, batched = 0;

	fprintf(f,
		"\n%-15s %4s %7s %8s %8s %8s %8s %9s %8s %5s %6s %5s %4s\n",
		"ring", "prod", "payload", "Mmsg/s", "min", "max", "ns/msg",
		"wakes/msg", "sys/msg", "CPUs", "others", "c2c", "runs");
	for (i = 0; i < ncfgs; i++) {
		struct config *c = &cfgs[i];
		struct summary s;

		if (!c->done_runs) {
			fprintf(f, "%-15s %4u %7zu %8s\n",
				tp_rings[c->kind]->name, c->producers,
				c->payload, c->skipped ? "skipped" : "failed");
			continue;
		}
		summarise(c, &s);
		if (s.other > busiest)
			busiest = s.other;
		fprintf(f,
			"%-15s %4u %7zu %8.2f %8.2f %8.2f %8.2f %9.2g %8.2g "
			"%5.2f %6.2f %5.0f %4d%s%s\n",
			tp_rings[c->kind]->name, c->producers, c->payload,
			s.mps / 1e6, s.mps_min / 1e6, s.mps_max / 1e6, s.nspm,
			s.wpm, s.spm, s.cpus, s.other, s.c2c, c->done_runs,
			c->truncated_runs ? "*" : "",
			c->push_batch > 1 ? "+" : "");
		truncated += c->truncated_runs;
		if (c->push_batch > 1)
			batched = (int)c->push_batch;
	}

	fprintf(f,
		"\nwakes/msg: wake-up system calls by the producers per "
		"message (lull: its wakes\ncounter; pipe, eventfd: one "
		"write per message); sys/msg: every data-path\nsystem call "
		"of both sides per message (wakes, parks or reads, "
		"yields).\nCPUs: CPU seconds per second used by the run's "
		"threads (about 1 means they\ntook turns on one CPU); "
		"others: the same for every other process; c2c: ns\nper "
		"cache-line round trip between the first two CPUs, measured "
		"before each run.\n");
	if (truncated)
		fprintf(f,
			"*: %d run(s) stopped at --time-limit before sending "
			"every message.\n",
			truncated);
	if (batched)
		fprintf(f,
			"+: its producers pushed %d messages at a time "
			"(--producer-batch); the others\none at a time.\n",
			batched);
	if (busiest > 0.1)
		fprintf(f,
			"warning: other processes used up to %.2f CPUs "
			"(median) during these runs;\nthe numbers are not "
			"clean.\n",
			busiest);
	print_ratios(f, cfgs, ncfgs, opt, RING_LULL_SPSC);
	print_ratios(f, cfgs, ncfgs, opt, RING_LULL_MPSC);
	print_ratios(f, cfgs, ncfgs, opt, RING_LULL_LANES);
	print_targets(f, cfgs, ncfgs, opt);
}

/* Options. */

