/* SPDX-License-Identifier: MIT */
/*
 * barrier.c - what the park barrier of a ring shared between processes
 * costs, both ways it could be built.  The park handshake needs a
 * StoreLoad barrier on each side (lib/park.h): the producer's between its
 * commit and its load of the park word, the consumer's between its store
 * of the park word and its last look at the ring.
 *
 *   fence       what lull does for a shared region: a seq_cst fence on
 *               both sides, so every commit pays one (and every park)
 *   membarrier  the alternative: the producer keeps a compiler barrier
 *               (free) and the consumer runs membarrier(2) on each park;
 *               across processes that is MEMBARRIER_CMD_GLOBAL_EXPEDITED,
 *               and every producer process must have registered
 *               (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) for it to
 *               reach them
 *
 * Measured here, each the median of --runs runs, consumer on the first
 * allowed CPU and the peer on the second:
 *   commit      a store, the barrier, a load of another line: with a
 *               compiler barrier, and with a seq_cst fence; their
 *               difference is the fence's price per commit.  Once on a
 *               warm line, and once with a thread on the other CPU
 *               reading the stored line, as a consumer does: then each
 *               store misses and the fence waits for it to drain
 *   park        one membarrier(2): PRIVATE_EXPEDITED (what lull's
 *               process-local rings pay per park) and GLOBAL_EXPEDITED,
 *               each with the peer idle (no CPU to interrupt) and with
 *               it spinning on the other CPU (a thread of ours for
 *               PRIVATE, a registered process for GLOBAL: the IPI is
 *               sent); and GLOBAL, the unexpedited command (an RCU grace
 *               period: no use on a park path; fewer calls)
 * and the break-even: how many commits per park make the fences cost as
 * much as one GLOBAL_EXPEDITED per park with the peer running.
 *
 * Build: make build/perf/barrier
 * Run:   build/perf/barrier [--runs 5] [--json]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lull.h>

#include "bench_common.h"

#define LINE 128
#define MAX_RUNS 101
#define COMMITS 5000000ull
#define PARKS 20000ull
#define GLOBAL_PARKS 20ull

enum peer { PEER_IDLE, PEER_THREAD, PEER_READER, PEER_PROCESS };

struct options {
	int runs;
	bool json;
};

/* The commit's line and the park word's, apart. */
static alignas(LINE) _Atomic(uint64_t) commit_line;
static alignas(LINE) _Atomic(uint64_t) park_line;
static alignas(LINE) _Atomic(int) peer_stop;

static int cpus[CPU_SETSIZE], ncpus;

static long membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

/*
 * A producer's commit and park check, @n times: the release store of the
 * record, the barrier, the relaxed load of the park word.  ns per commit.
 */
static double commit_ns(bool fence, uint64_t n)
{
	uint64_t t0 = bench_now_ns(), sink = 0;

	for (uint64_t i = 0; i < n; i++) {
		atomic_store_explicit(&commit_line, i, memory_order_release);
		if (fence)
			atomic_thread_fence(memory_order_seq_cst);
		else
			atomic_signal_fence(memory_order_seq_cst);
		sink += atomic_load_explicit(&park_line, memory_order_relaxed);
	}
	/* Keeps the loads: the park word is never written. */
	if (sink)
		fprintf(stderr, "barrier: the park word moved\n");
	return (double)(bench_now_ns() - t0) / (double)n;
}

/* ns per membarrier(@cmd), @n calls; -1 when it fails. */
static double park_ns(int cmd, uint64_t n)
{
	uint64_t t0 = bench_now_ns();

	for (uint64_t i = 0; i < n; i++)
		if (membarrier(cmd) < 0)
			return -1;
	return (double)(bench_now_ns() - t0) / (double)n;
}

/* The peer: spins on the second CPU until told to stop. */
static void spin_peer(void)
{
	while (!atomic_load_explicit(&peer_stop, memory_order_relaxed))
		ck_pr_stall();
}

static void *peer_thread(void *arg)
{
	(void)arg;
	bench_pin_self(ncpus > 1 ? cpus[1] : -1);
	spin_peer();
	return NULL;
}

/*
 * The consumer of the commits: reads the commit's line on the other CPU,
 * so that every store of the producer misses and waits in its store
 * buffer, which the fence must drain (a warm line hides that).
 */
static void *reader_thread(void *arg)
{
	uint64_t sink = 0;

	(void)arg;
	bench_pin_self(ncpus > 1 ? cpus[1] : -1);
	while (!atomic_load_explicit(&peer_stop, memory_order_relaxed))
		sink += atomic_load_explicit(&commit_line,
					     memory_order_acquire);
	return (void *)(uintptr_t)sink;
}

struct peer_state {
	enum peer kind;
	pthread_t tid;
	pid_t pid;
};

static int peer_start(struct peer_state *p, enum peer kind)
{
	pid_t parent = getpid();

	p->kind = kind;
	atomic_store_explicit(&peer_stop, 0, memory_order_relaxed);
	if (kind == PEER_THREAD || kind == PEER_READER)
		return pthread_create(&p->tid, NULL,
				      kind == PEER_THREAD ? peer_thread
							  : reader_thread,
				      NULL)
			       ? -1
			       : 0;
	if (kind != PEER_PROCESS)
		return 0;
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		bench_pin_self(ncpus > 1 ? cpus[1] : -1);
		/* A producer process of the membarrier design. */
		if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) < 0)
			_exit(1);
		spin_peer(); /* its own copy of the flag: until killed */
		_exit(0);
	}
	/* Let it register and reach its CPU. */
	usleep(20000);
	return 0;
}

static void peer_stop_now(struct peer_state *p)
{
	atomic_store_explicit(&peer_stop, 1, memory_order_relaxed);
	if (p->kind == PEER_THREAD || p->kind == PEER_READER)
		pthread_join(p->tid, NULL);
	if (p->kind == PEER_PROCESS) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
	}
}

struct figure {
	const char *name; /* JSON field, ns */
	double v[MAX_RUNS];
	double median;
	bool failed;
};

/* One line of the table; @extra, when not 0, over the line above it. */
static void row(FILE *f, const char *what, double ns, double extra)
{
	fprintf(f, "  %-52s %11.2f", what, ns);
	if (extra)
		fprintf(f, "  (%+.2f)", extra);
	fputc('\n', f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: barrier [--runs R (default 5)] [--json]\n");
}

int main(int argc, char **argv)
{
	enum { F_COMPILER, F_FENCE, F_COMPILER_READ, F_FENCE_READ,
	       F_PRIV_IDLE, F_PRIV_PEER, F_GLOB_IDLE, F_GLOB_PEER, F_GLOBAL,
	       F_KINDS };
	static struct figure fig[F_KINDS] = {
		[F_COMPILER] = { .name = "commit_compiler_barrier_ns" },
		[F_FENCE] = { .name = "commit_seq_cst_fence_ns" },
		[F_COMPILER_READ] = { .name =
					  "commit_compiler_barrier_read_ns" },
		[F_FENCE_READ] = { .name = "commit_seq_cst_fence_read_ns" },
		[F_PRIV_IDLE] = { .name = "membarrier_private_expedited_ns" },
		[F_PRIV_PEER] = { .name =
				       "membarrier_private_expedited_peer_ns" },
		[F_GLOB_IDLE] = { .name = "membarrier_global_expedited_ns" },
		[F_GLOB_PEER] = { .name =
				       "membarrier_global_expedited_peer_ns" },
		[F_GLOBAL] = { .name = "membarrier_global_ns" },
	};
	static const struct option longopts[] = {
		{ "runs", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options opt = { .runs = 5 };
	struct peer_state peer;
	double fence_extra, read_extra, lo, hi;
	uint64_t v;
	long cmds;
	int c, r, k;
	FILE *out;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > MAX_RUNS) {
				fprintf(stderr, "barrier: bad --runs\n");
				return 2;
			}
			opt.runs = (int)v;
			break;
		case 'j':
			opt.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	out = opt.json ? stderr : stdout;
	ncpus = bench_allowed_cpus(cpus);
	bench_pin_self(ncpus ? cpus[0] : -1);
	cmds = membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds < 0 ||
	    !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
	    !(cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) ||
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) < 0 ||
	    membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) < 0) {
		fprintf(stderr, "barrier: membarrier(2) lacks the expedited "
				"commands here\n");
		return 1;
	}
	fprintf(stderr,
		"barrier: lull %s, %d CPU(s); %d run(s) of %llu commits, "
		"%llu parks (%llu for GLOBAL); load average %.2f\n",
		lull_version(), ncpus, opt.runs, (unsigned long long)COMMITS,
		(unsigned long long)PARKS, (unsigned long long)GLOBAL_PARKS,
		bench_load_average());

	/* Interleaved, as everywhere in perf/: run r of each, then r + 1. */
	for (r = 0; r < opt.runs; r++) {
		fig[F_COMPILER].v[r] = commit_ns(false, COMMITS);
		fig[F_FENCE].v[r] = commit_ns(true, COMMITS);
		if (peer_start(&peer, PEER_READER) == 0) {
			fig[F_COMPILER_READ].v[r] = commit_ns(false, COMMITS);
			fig[F_FENCE_READ].v[r] = commit_ns(true, COMMITS);
			peer_stop_now(&peer);
		} else {
			fig[F_COMPILER_READ].v[r] = fig[F_FENCE_READ].v[r] = -1;
		}
		fig[F_PRIV_IDLE].v[r] =
			park_ns(MEMBARRIER_CMD_PRIVATE_EXPEDITED, PARKS);
		fig[F_GLOB_IDLE].v[r] =
			park_ns(MEMBARRIER_CMD_GLOBAL_EXPEDITED, PARKS);
		if (peer_start(&peer, PEER_THREAD) == 0) {
			fig[F_PRIV_PEER].v[r] = park_ns(
				MEMBARRIER_CMD_PRIVATE_EXPEDITED, PARKS);
			peer_stop_now(&peer);
		} else {
			fig[F_PRIV_PEER].v[r] = -1;
		}
		if (peer_start(&peer, PEER_PROCESS) == 0) {
			fig[F_GLOB_PEER].v[r] = park_ns(
				MEMBARRIER_CMD_GLOBAL_EXPEDITED, PARKS);
			peer_stop_now(&peer);
		} else {
			fig[F_GLOB_PEER].v[r] = -1;
		}
		fig[F_GLOBAL].v[r] = park_ns(MEMBARRIER_CMD_GLOBAL,
					     GLOBAL_PARKS);
	}
	for (k = 0; k < F_KINDS; k++) {
		for (r = 0; r < opt.runs; r++)
			fig[k].failed |= fig[k].v[r] < 0;
		fig[k].median = bench_range(fig[k].v, opt.runs, &lo, &hi);
	}
	fence_extra = fig[F_FENCE].median - fig[F_COMPILER].median;
	read_extra = fig[F_FENCE_READ].median - fig[F_COMPILER_READ].median;

	fprintf(out, "\nper commit (the producer: store, barrier, load), ns, "
		     "median of %d runs:\n",
		opt.runs);
	row(out, "compiler barrier (a process-local ring)",
	    fig[F_COMPILER].median, 0);
	row(out, "seq_cst fence (a shared ring: lull's)", fig[F_FENCE].median,
	    fence_extra);
	row(out, "compiler barrier, the line read on the other CPU",
	    fig[F_COMPILER_READ].median, 0);
	row(out, "seq_cst fence, the line read on the other CPU",
	    fig[F_FENCE_READ].median, read_extra);
	fprintf(out, "per park (the consumer: one membarrier(2)), ns:\n");
	row(out, "PRIVATE_EXPEDITED, the other CPU idle",
	    fig[F_PRIV_IDLE].median, 0);
	row(out, "PRIVATE_EXPEDITED, a thread of ours spinning there",
	    fig[F_PRIV_PEER].median, 0);
	row(out, "GLOBAL_EXPEDITED, the other CPU idle",
	    fig[F_GLOB_IDLE].median, 0);
	row(out, "GLOBAL_EXPEDITED, a registered process spinning",
	    fig[F_GLOB_PEER].median, 0);
	row(out, "GLOBAL (not expedited: an RCU grace period)",
	    fig[F_GLOBAL].median, 0);
	for (k = 0; k < F_KINDS; k++)
		if (fig[k].failed)
			fprintf(out, "  (%s: a call failed)\n", fig[k].name);
	if (fence_extra > 0 && read_extra > 0)
		fprintf(out,
			"break-even: one GLOBAL_EXPEDITED per park (peer "
			"running) costs what the fence\ncosts on %.0f commits "
			"(%.0f with the line read on the other CPU); with\n"
			"fewer commits per park the fence is cheaper\n",
			fig[F_GLOB_PEER].median / fence_extra,
			fig[F_GLOB_PEER].median / read_extra);
	if (opt.json) {
		printf("{\"barrier\":\"park\",\"runs\":%d,\"cpus\":%d,",
		       opt.runs, ncpus);
		for (k = 0; k < F_KINDS; k++)
			printf("\"%s\":%.2f,", fig[k].name, fig[k].median);
		printf("\"fence_extra_per_commit_ns\":%.2f,"
		       "\"fence_extra_per_commit_read_ns\":%.2f,"
		       "\"break_even_commits_per_park\":%.0f,"
		       "\"break_even_commits_per_park_read\":%.0f}\n",
		       fence_extra, read_extra,
		       fence_extra > 0 ? fig[F_GLOB_PEER].median / fence_extra
				       : 0,
		       read_extra > 0 ? fig[F_GLOB_PEER].median / read_extra
				      : 0);
	}
	return 0;
}
