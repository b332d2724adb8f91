/* SPDX-License-Identifier: MIT */
/*
 * throughput_options.c - throughput's command line: --help lists every ring
 * and says which were built (perf/check-peers.sh reads it).
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "throughput.h"

static void usage(FILE *f)
{
	int k;

	fprintf(f, "usage: throughput [options]\n"
		   "  --ring NAME       ");
	for (k = 0; k < RING_KINDS; k++)
		fprintf(f, "%s%s%s", k ? ", " : "", tp_rings[k]->name,
			tp_built(k) ? "" : " (not built)");
	fprintf(f,
		"\n                    (repeatable; default every one built)\n"
		"  --producers N     (repeatable; default 1 2 4 8; SPSC rings "
		"only run with 1)\n"
		"  --payload BYTES   (repeatable; default 8 64 512)\n"
		"  --seconds S       producers send for S seconds per run "
		"(default %.1f)\n"
		"  --messages M      or send M messages per run in all\n"
		"  --time-limit S    with --messages: stop a run after S "
		"seconds (default 60)\n"
		"  --runs R          repetitions; median, min, max "
		"(default %d)\n"
		"  --capacity BYTES  lull data bytes, power of two (default "
		"1 MiB);\n"
		"                    the peers get the same memory\n"
		"  --batch N         lull_ring_read limit, messages per poll "
		"of the others\n"
		"                    (default %u; rte bursts at most %u, boost "
		"and moodycamel\n"
		"                    pop at most %u)\n"
		"  --producer-batch N messages per push for the rings that "
		"can push several\n"
		"                    at once (lull-*, rte-*, boost-spsc-bulk,\n"
"                    "
		"moodycamel; at most %u);\n"
		"                    default 1, boost-spsc-bulk 32; the "
		"others push one\n"
		"  --lull-spin-ns N  lull consumer: spin N ns on an empty "
		"ring before parking\n"
		"                    (default: lull's, %s)\n"
		"  --lull-read HOW   lull consumer: records (lull_ring_read, "
		"a call per record,\n"
		"                    the default) or runs "
		"(lull_ring_read_items, a call per\n"
		"                    array of --producer-batch records)\n"
		"  --pin             consumer on the first allowed CPU, "
		"producers round-robin\n"
		"                    on the others (default: no pinning)\n"
		"  --pause N         a spinning side waits N PAUSEs after "
		"each failed poll and\n"
		"                    never yields: only while each thread "
		"has a CPU of its own\n"
		"                    (default: 1, 2, 4 ... 32 PAUSEs, then "
		"sched_yield())\n"
		"  --max-others F    repeat (up to twice) a run during which "
		"other processes\n"
		"                    used more than F CPUs (default: never)\n"
		"  --json            one JSON object per result on stdout; "
		"table to stderr\n"
		"  --verbose         print every run\n",
		DEFAULT_SECONDS, DEFAULT_RUNS, DEFAULT_BATCH, RTE_BURST,
		ITEM_POP, MAX_PUSH_BATCH,
		LULL_PARK_SPIN_DEFAULT_NS > (uint64_t)INT64_MAX ? "adaptive"
							       : tp_lull_spin_json(-1));
}

int tp_parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_RING = 256, O_PROD, O_PAYLOAD, O_SECONDS, O_MESSAGES,
	       O_TIME_LIMIT, O_RUNS, O_CAPACITY, O_BATCH, O_PUSH_BATCH,
	       O_MAX_OTHERS,
	       O_LULL_SPIN, O_LULL_READ, O_JSON, O_PIN, O_PAUSE, O_VERBOSE,
	       O_HELP };
	static const struct option longopts[] = {
		{ "ring", required_argument, NULL, O_RING },
		{ "producers", required_argument, NULL, O_PROD },
		{ "payload", required_argument, NULL, O_PAYLOAD },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "messages", required_argument, NULL, O_MESSAGES },
		{ "time-limit", required_argument, NULL, O_TIME_LIMIT },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "capacity", required_argument, NULL, O_CAPACITY },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "producer-batch", required_argument, NULL, O_PUSH_BATCH },
		{ "max-others", required_argument, NULL, O_MAX_OTHERS },
		{ "lull-spin-ns", required_argument, NULL, O_LULL_SPIN },
		{ "lull-read", required_argument, NULL, O_LULL_READ },
		{ "json", no_argument, NULL, O_JSON },
		{ "pin", no_argument, NULL, O_PIN },
		{ "pause", required_argument, NULL, O_PAUSE },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c, k;

	memset(opt, 0, sizeof(*opt));
	opt->seconds = DEFAULT_SECONDS;
	opt->time_limit = 60;
	opt->runs = DEFAULT_RUNS;
	opt->capacity = DEFAULT_CAPACITY;
	opt->batch = DEFAULT_BATCH;
	opt->max_others = -1;
	opt->lull_spin_ns = -1;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_RING:
			for (k = 0; k < RING_KINDS; k++)
				if (!strcmp(optarg, tp_rings[k]->name))
					break;
			if (k == RING_KINDS) {
				fprintf(stderr, "throughput: unknown ring %s\n",
					optarg);
				return -1;
			}
			if (!tp_built(k)) {
				fprintf(stderr,
					"throughput: %s was not built (its "
					"headers were missing)\n",
					optarg);
				return -1;
			}
			for (c = 0; c < opt->nrings; c++)
				if (opt->rings[c] == k)
					break;
			if (c == opt->nrings)
				opt->rings[opt->nrings++] = k;
			break;
		case O_PROD:
			if (!bench_parse_u64(optarg, &v) || !v || v > 1024 ||
			    opt->nproducers == MAX_LIST) {
				fprintf(stderr,
					"throughput: bad --producers\n");
				return -1;
			}
			opt->producers[opt->nproducers++] = (unsigned int)v;
			break;
		case O_PAYLOAD:
			if (!bench_parse_u64(optarg, &v) || v > INT32_MAX ||
			    opt->npayloads == MAX_LIST) {
				fprintf(stderr, "throughput: bad --payload\n");
				return -1;
			}
			opt->payloads[opt->npayloads++] = (size_t)v;
			break;
		case O_SECONDS:
			if (!bench_parse_double(optarg, &opt->seconds) ||
			    !(opt->seconds > 0) || opt->seconds > 3600) {
				fprintf(stderr, "throughput: bad --seconds\n");
				return -1;
			}
			opt->messages = 0;
			break;
		case O_MESSAGES:
			if (!bench_parse_u64(optarg, &opt->messages) ||
			    !opt->messages) {
				fprintf(stderr, "throughput: bad --messages\n");
				return -1;
			}
			break;
		case O_TIME_LIMIT:
			if (!bench_parse_double(optarg, &opt->time_limit) ||
			    !(opt->time_limit > 0) || opt->time_limit > 86400) {
				fprintf(stderr,
					"throughput: bad --time-limit\n");
				return -1;
			}
			break;
		case O_RUNS:
			if (!bench_parse_u64(optarg, &v) || !v || v > 1000) {
				fprintf(stderr, "throughput: bad --runs\n");
				return -1;
			}
			opt->runs = (int)v;
			break;
		case O_CAPACITY:
			if (!bench_parse_u64(optarg, &v) ||
			    lull_ring_region_size(v) < 0) {
				fprintf(stderr,
					"throughput: bad --capacity (a power "
					"of two, %zu to %zu)\n",
					LULL_RING_MIN_CAPACITY,
					LULL_RING_MAX_CAPACITY);
				return -1;
			}
			opt->capacity = (size_t)v;
			break;
		case O_BATCH:
			if (!bench_parse_u64(optarg, &v) || !v || v > INT_MAX) {
				fprintf(stderr, "throughput: bad --batch\n");
				return -1;
			}
			opt->batch = (unsigned int)v;
			break;
		case O_PUSH_BATCH:
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > MAX_PUSH_BATCH) {
				fprintf(stderr,
					"throughput: bad --producer-batch (1 "
					"to %u)\n",
					MAX_PUSH_BATCH);
				return -1;
			}
			opt->push_batch = (unsigned int)v;
			break;
		case O_MAX_OTHERS:
			if (!bench_parse_double(optarg, &opt->max_others) ||
			    !(opt->max_others >= 0)) {
				fprintf(stderr,
					"throughput: bad --max-others\n");
				return -1;
			}
			break;
		case O_LULL_SPIN:
			if (!bench_parse_u64(optarg, &v) || v > INT64_MAX) {
				fprintf(stderr,
					"throughput: bad --lull-spin-ns\n");
				return -1;
			}
			opt->lull_spin_ns = (int64_t)v;
			break;
		case O_JSON:
			opt->json = true;
			break;
		case O_LULL_READ:
			if (strcmp(optarg, "records") &&
			    strcmp(optarg, "runs")) {
				fprintf(stderr, "throughput: bad --lull-read "
						"(records or runs)\n");
				return -1;
			}
			opt->lull_read_runs = !strcmp(optarg, "runs");
			break;
		case O_PIN:
			opt->pin = true;
			break;
		case O_PAUSE:
			if (!bench_parse_u64(optarg, &v) || v < 1 ||
			    v > 1u << 20) {
				fprintf(stderr, "throughput: bad --pause "
						"(1 to 1048576)\n");
				return -1;
			}
			bench_backoff_pauses = (unsigned int)v;
			break;
		case O_VERBOSE:
			opt->verbose = true;
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	if (!opt->nrings)
		for (k = 0; k < RING_KINDS; k++)
			if (tp_built(k))
				opt->rings[opt->nrings++] = k;
	if (!opt->nproducers) {
		static const unsigned int def[] = { 1, 2, 4, 8 };

		for (k = 0; k < 4; k++)
			opt->producers[opt->nproducers++] = def[k];
	}
	if (!opt->npayloads) {
		static const size_t def[] = { 8, 64, 512 };

		for (k = 0; k < 3; k++)
			opt->payloads[opt->npayloads++] = def[k];
	}
	return 0;
}

