/* SPDX-License-Identifier: MIT */
/*
 * xproc.c - messages per second from producer processes to one consumer:
 * a lull ring shared between processes against a Unix domain socket and
 * a pipe, side by side in one run.
 *
 * Each run forks P producer processes (--producers, default 1, 2, 4); the
 * consumer is this process's main thread.  Every producer sends messages
 * of --payload bytes (default 8 and 64) as fast as it can for --seconds,
 * then says it is done; the run's rate is the messages received over the
 * time from the start signal to the consumer having the last one.
 *
 * Rings (--ring, repeatable; default all):
 *   lull-mpsc   a shared MPSC ring (lull_ring_create_shared(), a memfd;
 *               --capacity of data); each producer opens the memfd it
 *               inherited (lull_ring_open_fd()), attaches, and
 *               lull_mpsc_write()s, backing off on a full ring as
 *               perf/throughput's producers do; the consumer reads in
 *               batches of --batch and parks in lull_ring_wait()
 *   lull-lanes  the same with LULL_RING_LANES(P), a lane per producer
 *               process, each --capacity / P (a power of two), so that
 *               the ring has the same memory
 *   unix        one SOCK_SEQPACKET socketpair, SO_SNDBUF --capacity (the
 *               kernel caps it at net.core.wmem_max, doubled): every
 *               producer write()s one message per call to the same end,
 *               the consumer takes up to --batch (at most 1024) per
 *               recvmmsg(MSG_WAITFORONE), blocking for the first
 *   pipe        one pipe, F_SETPIPE_SZ --capacity: one write() per
 *               message (atomic: payload <= PIPE_BUF), batched read()s
 * The ring, socket or pipe is made anew for each run (a lull ring closes
 * when its last producer detaches); the shared ring's memfd is allocated
 * (fallocate) before the fork, so no run pays for the kernel's first
 * touch of its pages.
 *
 * Each producer ends with an end record (lull: after its last message, in
 * its order) or by closing its end (unix, pipe: the consumer reads end of
 * file once all have).  Checks: producer p sends the values (p + 1) * K +
 * seq; the consumer counts and sums them, and both must match what the
 * producers counted (exit status 1 otherwise); a lull LULL_TYPE_DEATH or
 * poison record before every end record fails the run.
 *
 * Runs interleave (run 1 of every configuration, then run 2, ...); each
 * result is the median over --runs, with min and max.  Then lull's median
 * over the socket's and the pipe's, and the goal, at least 10x a Unix
 * socket, met or missed for each configuration.
 *
 * Why a tool of its own and not a mode of perf/throughput: throughput's
 * rings and harness share everything between threads (its run state, the
 * producers' handles attached once per configuration and lent to each
 * run's threads, the slabs); across processes each of those would have to
 * move into shared memory, peer by peer.  Three transports and one loop
 * are simpler here.
 *
 * Build: make build/perf/xproc
 * Run:   build/perf/xproc [--pin] [--json] [--producers 4 --payload 64]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lull.h>

#include "bench_common.h"

#define LINE 128
#define MSG_TYPE 1
#define END_TYPE 2
#define MAX_LIST 16
#define MAX_RUNS 1000
#define MAX_PRODUCERS 64
#define MAX_PAYLOAD 4096 /* PIPE_BUF: a pipe write is atomic up to it */
#define MAX_MMSG 1024u
#define VALUE_STRIDE 0x9e3779b97f4a7c15ull
#define WAIT_NS (100ll * 1000000) /* lull_ring_wait: then look at stalls */
#define STALL_NS (10ull * 1000000000ull)
#define GOAL_UNIX_RATIO 10.0

enum xring { X_LULL_MPSC, X_LULL_LANES, X_UNIX, X_PIPE, X_KINDS };

static const char *const xring_names[] = { "lull-mpsc", "lull-lanes", "unix",
					   "pipe", NULL };

static inline bool is_lull(enum xring k)
{
	return k == X_LULL_MPSC || k == X_LULL_LANES;
}

struct options {
	bool rings[X_KINDS];
	unsigned producers[MAX_LIST];
	int nproducers;
	size_t payloads[MAX_LIST];
	int npayloads;
	double seconds;
	int runs;
	size_t capacity;
	unsigned batch;
	double max_others; /* repeat runs busier than this; < 0: never */
	bool pin;
	bool json;
	bool verbose;
};

/* What one run measured. */
struct result {
	double mps, nspm, msgs, cpus, other, wpm, ppm;
};

/* One (ring, producers, payload) combination and its runs. */
struct config {
	enum xring kind;
	unsigned producers;
	size_t payload;
	int done_runs;
	bool failed;
	long bufsize; /* unix: SO_SNDBUF as the kernel set it; pipe: size */
	struct result *res;
};

/*
 * What the processes of a run share: a MAP_SHARED mapping made before the
 * forks.  Flags and counts on lines of their own.
 */
struct shared {
	alignas(LINE) _Atomic(unsigned) ready; /* producers set to send */
	alignas(LINE) _Atomic(int) go;
	alignas(LINE) _Atomic(int) stop;
	double seconds; /* the stop timer's */
	struct {
		alignas(LINE) uint64_t sent, sum;
		int err; /* a negative errno, lull's or the system's */
	} prod[MAX_PRODUCERS];
};

/* One run's transport, made before the forks. */
struct transport {
	struct lull_ring *ring; /* lull: the consumer's handle */
	int rd, wr;             /* unix, pipe */
};

struct consumer_state {
	uint64_t count, sum, bad;
	unsigned ends;
	bool death, poison;
};

static const char *err_str(enum xring kind, int err)
{
	return is_lull(kind) ? lull_strerror(err) : strerror(-err);
}

/* --- the producers ---------------------------------------------------- */

static void wait_go(struct shared *sh)
{
	/* Pairs with main's release store of go. */
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		sched_yield();
}

static inline bool stopping(struct shared *sh)
{
	/* Relaxed: a flag, raised once; until then the line stays shared. */
	return atomic_load_explicit(&sh->stop, memory_order_relaxed);
}

/* A lull producer process: its own handle, one message per write. */
static int produce_lull(struct shared *sh, const struct config *cfg,
			const struct transport *t, unsigned id,
			unsigned char *msg)
{
	uint64_t base = (uint64_t)(id + 1) * VALUE_STRIDE, seq, sum = 0;
	struct lull_producer *prod;
	struct lull_ring *ring;
	struct bench_backoff bo;
	int r;

	r = lull_ring_open_fd(&ring, lull_ring_fd(t->ring), 0);
	if (r < 0)
		return r;
	r = lull_producer_attach(ring, 0, &prod);
	if (r < 0)
		return r;
	bench_backoff_init(&bo);
	atomic_fetch_add_explicit(&sh->ready, 1, memory_order_release);
	wait_go(sh);
	for (seq = 0; !stopping(sh); seq++) {
		uint64_t value = base + seq;

		memcpy(msg, &value, 8);
		while ((r = lull_mpsc_write(prod, MSG_TYPE, msg,
					    cfg->payload)) == -EAGAIN)
			bench_backoff_wait(&bo);
		if (r < 0)
			return r;
		bench_backoff_reset(&bo);
		sum += value;
	}
	sh->prod[id].sent = seq;
	sh->prod[id].sum = sum;
	/* After every message of ours, in our order (our lane's, LANES). */
	while ((r = lull_mpsc_write(prod, END_TYPE, &id, sizeof(id))) ==
	       -EAGAIN)
		bench_backoff_wait(&bo);
	if (r < 0)
		return r;
	r = lull_producer_detach(prod);
	return r < 0 ? r : lull_ring_destroy(ring);
}

/* A unix or pipe producer process: one write(2) per message. */
static int produce_fd(struct shared *sh, const struct config *cfg,
		      const struct transport *t, unsigned id,
		      unsigned char *msg)
{
	uint64_t base = (uint64_t)(id + 1) * VALUE_STRIDE, seq, sum = 0;
	ssize_t put;

	close(t->rd);
	atomic_fetch_add_explicit(&sh->ready, 1, memory_order_release);
	wait_go(sh);
	for (seq = 0; !stopping(sh); seq++) {
		uint64_t value = base + seq;

		memcpy(msg, &value, 8);
		do
			put = write(t->wr, msg, cfg->payload);
		while (put < 0 && errno == EINTR);
		if (put != (ssize_t)cfg->payload)
			return put < 0 ? -errno : -EIO;
		sum += value;
	}
	sh->prod[id].sent = seq;
	sh->prod[id].sum = sum;
	/* The consumer reads end of file once every producer closed. */
	close(t->wr);
	return 0;
}

static pid_t producer_fork(struct shared *sh, const struct config *cfg,
			   const struct transport *t, unsigned id, int cpu)
{
	static alignas(64) unsigned char msg[MAX_PAYLOAD];
	pid_t parent = getpid(), pid;
	int r;

	fflush(NULL);
	pid = fork();
	if (pid)
		return pid;
	/* Go with the consumer, however it ends. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(1);
	bench_pin_self(cpu);
	memset(msg, 0xa5, sizeof(msg));
	if (is_lull(cfg->kind))
		r = produce_lull(sh, cfg, t, id, msg);
	else
		r = produce_fd(sh, cfg, t, id, msg);
	sh->prod[id].err = r;
	if (r < 0) {
		/* Counted as ready, or the consumer waits for it forever. */
		atomic_fetch_add_explicit(&sh->ready, 1, memory_order_release);
		_exit(1);
	}
	_exit(0);
}

/* --- the consumer ----------------------------------------------------- */

static int lull_handler(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *cs = ctx;
	uint64_t v;

	if (rec->type == MSG_TYPE) {
		memcpy(&v, rec->data, 8);
		cs->sum += v;
		cs->count++;
		return LULL_READ_CONTINUE;
	}
	if (rec->type == END_TYPE) {
		cs->ends++;
		return LULL_READ_CONTINUE;
	}
	if (rec->type == LULL_TYPE_DEATH)
		cs->death = true;
	else if (rec->type == LULL_TYPE_POISON)
		cs->poison = true;
	else
		cs->bad++;
	return LULL_READ_STOP;
}

/* Read batches, park when empty, until every producer's end record. */
static int consume_lull(const struct config *cfg, const struct options *opt,
			struct transport *t, struct consumer_state *cs)
{
	uint64_t last = 0, t_last = bench_now_ns();
	int r;

	while (cs->ends < cfg->producers) {
		r = lull_ring_read(t->ring, lull_handler, cs, opt->batch);
		if (cs->death || cs->poison || cs->bad)
			return -EPROTO;
		if (r >= 0)
			continue;
		if (r != -EAGAIN)
			return r;
		r = lull_ring_wait(t->ring, WAIT_NS);
		if (r == -ETIMEDOUT) {
			if (cs->count != last) {
				last = cs->count;
				t_last = bench_now_ns();
			} else if (bench_now_ns() - t_last > STALL_NS) {
				return -ETIMEDOUT;
			}
		} else if (r < 0) {
			return r;
		}
	}
	return 0;
}

/* Take @n bytes of whole messages from @buf. */
static void take_bytes(struct consumer_state *cs, const unsigned char *buf,
		       size_t n, size_t payload)
{
	uint64_t v;

	for (size_t at = 0; at + payload <= n; at += payload) {
		memcpy(&v, buf + at, 8);
		cs->sum += v;
		cs->count++;
	}
}

static int consume_unix(const struct config *cfg, const struct options *opt,
			struct transport *t, struct consumer_state *cs,
			unsigned char *buf)
{
	static struct mmsghdr mm[MAX_MMSG];
	static struct iovec iov[MAX_MMSG];
	unsigned vlen = opt->batch < MAX_MMSG ? opt->batch : MAX_MMSG;
	int n;

	for (unsigned i = 0; i < vlen; i++) {
		iov[i].iov_base = buf + i * cfg->payload;
		iov[i].iov_len = cfg->payload;
		memset(&mm[i].msg_hdr, 0, sizeof(mm[i].msg_hdr));
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		n = recvmmsg(t->rd, mm, vlen, MSG_WAITFORONE, NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (int i = 0; i < n; i++) {
			/* No producer sends an empty message: end of file. */
			if (mm[i].msg_len == 0)
				return 0;
			if (mm[i].msg_len != cfg->payload) {
				cs->bad++;
				continue;
			}
			take_bytes(cs, iov[i].iov_base, cfg->payload,
				   cfg->payload);
		}
		if (n == 0)
			return 0;
	}
}

static int consume_pipe(const struct config *cfg, const struct options *opt,
			struct transport *t, struct consumer_state *cs,
			unsigned char *buf)
{
	size_t room = (size_t)opt->batch * cfg->payload, have = 0, whole;
	ssize_t got;

	for (;;) {
		got = read(t->rd, buf + have, room - have);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return have ? -EPROTO : 0;
		have += (size_t)got;
		whole = have - have % cfg->payload;
		take_bytes(cs, buf, whole, cfg->payload);
		/* Writes are atomic, so this stays empty; kept for safety. */
		memmove(buf, buf + whole, have - whole);
		have -= whole;
	}
}

/* --- one run ---------------------------------------------------------- */

static int transport_open(struct config *cfg, const struct options *opt,
			  struct transport *t)
{
	size_t lane = opt->capacity;
	unsigned topology = LULL_RING_MPSC;
	struct stat st;
	int fds[2], r, size;
	socklen_t len = sizeof(size);

	t->ring = NULL;
	t->rd = t->wr = -1;
	if (is_lull(cfg->kind)) {
		if (cfg->kind == X_LULL_LANES) {
			while (lane / 2 >= LULL_RING_MIN_CAPACITY &&
			       lane * cfg->producers > opt->capacity)
				lane /= 2;
			topology = LULL_RING_LANES(cfg->producers);
		}
		r = lull_ring_create_shared(&t->ring, lane, topology, 0);
		if (r < 0)
			return r;
		if (lull_ring_max_payload(t->ring) < (ssize_t)cfg->payload)
			return -EMSGSIZE;
		/* The pages now, not at the producers' first touch. */
		if (fstat(lull_ring_fd(t->ring), &st) == 0)
			(void)fallocate(lull_ring_fd(t->ring), 0, 0,
					st.st_size);
		return 0;
	}
	if (cfg->kind == X_UNIX)
		r = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
	else
		r = pipe2(fds, O_CLOEXEC);
	if (r < 0)
		return -errno;
	t->rd = fds[0];
	t->wr = fds[1];
	size = opt->capacity > INT32_MAX ? INT32_MAX : (int)opt->capacity;
	if (cfg->kind == X_UNIX) {
		(void)setsockopt(t->wr, SOL_SOCKET, SO_SNDBUF, &size,
				 sizeof(size));
		if (getsockopt(t->wr, SOL_SOCKET, SO_SNDBUF, &size, &len) == 0)
			cfg->bufsize = size;
	} else {
		(void)fcntl(t->wr, F_SETPIPE_SZ, size);
		cfg->bufsize = fcntl(t->wr, F_GETPIPE_SZ);
	}
	return 0;
}

static void transport_close(struct transport *t)
{
	if (t->ring)
		lull_ring_destroy(t->ring);
	if (t->rd >= 0)
		close(t->rd);
	if (t->wr >= 0)
		close(t->wr);
}

static void *stop_timer(void *arg)
{
	struct shared *sh = arg;
	uint64_t ns = (uint64_t)(sh->seconds * 1e9);
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
	return NULL;
}

/* One timed run of @cfg.  Returns 0, or -1 with the reason printed. */
static int run_once(struct config *cfg, const struct options *opt,
		    const int *cpus, int ncpus, int index)
{
	const char *name = xring_names[cfg->kind];
	size_t map = sizeof(struct shared);
	struct consumer_state cs = { 0 };
	struct result *res = &cfg->res[index];
	struct lull_ring_stats st = { 0 };
	struct transport t;
	struct shared *sh;
	struct bench_others o;
	struct rusage ru0, ru1, ru;
	pid_t pids[MAX_PRODUCERS];
	unsigned i, started = 0;
	uint64_t t_go = 0, t_end = 0, sent = 0, sum = 0, kids_ns = 0;
	unsigned char *buf = NULL;
	pthread_t timer;
	bool timer_on = false;
	int r, status, ret = -1;

	memset(res, 0, sizeof(*res));
	sh = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (sh == MAP_FAILED) {
		fprintf(stderr, "xproc: mmap: %s\n", strerror(errno));
		return -1;
	}
	sh->seconds = opt->seconds;
	buf = malloc((size_t)opt->batch * cfg->payload + cfg->payload);
	r = buf ? transport_open(cfg, opt, &t) : -ENOMEM;
	if (r < 0) {
		fprintf(stderr, "xproc: %s P=%u payload=%zu: setup: %s\n", name,
			cfg->producers, cfg->payload, err_str(cfg->kind, r));
		free(buf);
		munmap(sh, map);
		return -1;
	}
	bench_pin_self(opt->pin && ncpus ? cpus[0] : -1);
	for (i = 0; i < cfg->producers; i++) {
		int cpu = -1;

		if (opt->pin && ncpus)
			cpu = ncpus > 1 ? cpus[1 + i % (ncpus - 1)] : cpus[0];
		pids[i] = producer_fork(sh, cfg, &t, i, cpu);
		if (pids[i] < 0) {
			fprintf(stderr, "xproc: fork: %s\n", strerror(errno));
			goto out;
		}
		started++;
	}
	/* Only the producers hold the writing end now: end of file. */
	if (t.wr >= 0) {
		close(t.wr);
		t.wr = -1;
	}
	/* Acquire: pairs with each producer's release of ready. */
	while (atomic_load_explicit(&sh->ready, memory_order_acquire) <
	       cfg->producers)
		usleep(1000);
	for (i = 0; i < cfg->producers; i++)
		if (sh->prod[i].err) {
			fprintf(stderr, "xproc: %s: producer %u: %s\n", name, i,
				err_str(cfg->kind, sh->prod[i].err));
			goto out;
		}

	bench_others_start(&o);
	getrusage(RUSAGE_THREAD, &ru0);
	t_go = bench_now_ns();
	/* Releases the setup to the producers' acquire in wait_go(). */
	atomic_store_explicit(&sh->go, 1, memory_order_release);
	timer_on = !pthread_create(&timer, NULL, stop_timer, sh);
	if (!timer_on)
		atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
	if (is_lull(cfg->kind))
		r = consume_lull(cfg, opt, &t, &cs);
	else if (cfg->kind == X_UNIX)
		r = consume_unix(cfg, opt, &t, &cs, buf);
	else
		r = consume_pipe(cfg, opt, &t, &cs, buf);
	t_end = bench_now_ns();
	getrusage(RUSAGE_THREAD, &ru1);
	if (t.ring)
		lull_ring_stats(t.ring, &st);
	if (r < 0) {
		fprintf(stderr, "xproc: run %d: %s P=%u payload=%zu: %s%s\n",
			index + 1, name, cfg->producers, cfg->payload,
			cs.death ? "a producer died" :
			cs.poison ? "the ring closed early" :
			cs.bad ? "a malformed record" : "",
			cs.death || cs.poison || cs.bad ?
				"" : err_str(cfg->kind, r));
		atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
		goto out;
	}
	ret = 0;

out:
	if (timer_on)
		pthread_join(timer, NULL);
	for (i = 0; i < started; i++) {
		if (ret < 0)
			kill(pids[i], SIGKILL);
		if (wait4(pids[i], &status, 0, &ru) != pids[i]) {
			ret = -1;
			continue;
		}
		kids_ns += bench_ru_cpu_ns(&ru);
		if (ret == 0 && (!WIFEXITED(status) || WEXITSTATUS(status))) {
			fprintf(stderr,
				"xproc: run %d: %s: producer %u failed: %s\n",
				index + 1, name, i,
				sh->prod[i].err ?
					err_str(cfg->kind, sh->prod[i].err) :
					"killed");
			ret = -1;
		}
		sent += sh->prod[i].sent;
		sum += sh->prod[i].sum;
	}
	if (ret == 0 && (cs.count != sent || cs.sum != sum || cs.bad)) {
		fprintf(stderr,
			"xproc: run %d: %s P=%u payload=%zu: received %llu of "
			"%llu messages, sum %#llx want %#llx\n",
			index + 1, name, cfg->producers, cfg->payload,
			(unsigned long long)cs.count, (unsigned long long)sent,
			(unsigned long long)cs.sum, (unsigned long long)sum);
		ret = -1;
	}
	if (ret == 0 && (!cs.count || t_end <= t_go)) {
		fprintf(stderr, "xproc: run %d: %s: nothing measured\n",
			index + 1, name);
		ret = -1;
	}
	if (ret == 0) {
		double elapsed = (double)(t_end - t_go), cpu_ns;

		/* The producers' CPU is theirs: not another process's. */
		res->other = bench_others_cpus(&o) - (double)kids_ns / elapsed;
		if (res->other < 0)
			res->other = 0;
		cpu_ns = (double)(bench_ru_cpu_ns(&ru1) -
				  bench_ru_cpu_ns(&ru0)) +
			 (double)kids_ns;
		res->msgs = (double)cs.count;
		res->mps = res->msgs * 1e9 / elapsed;
		res->nspm = elapsed / res->msgs;
		res->cpus = cpu_ns / elapsed;
		/* lull: producers' wake-up calls; unix, pipe: every write. */
		res->wpm = is_lull(cfg->kind) ? (double)st.wakes / res->msgs
					      : 1;
		res->ppm = (double)st.parks / res->msgs;
		cfg->done_runs++;
		if (opt->verbose)
			fprintf(stderr,
				"run %d/%d %-10s P=%u payload=%zu: %.2f M "
				"msg/s, %.1f ns/msg, %llu msgs, %.2f CPUs "
				"(others %.2f); wakes %llu, parks %llu\n",
				index + 1, opt->runs, name, cfg->producers,
				cfg->payload, res->mps / 1e6, res->nspm,
				(unsigned long long)cs.count, res->cpus,
				res->other, (unsigned long long)st.wakes,
				(unsigned long long)st.parks);
	}
	transport_close(&t);
	free(buf);
	munmap(sh, map);
	return ret;
}

/* --- the report ------------------------------------------------------- */

static double median_mps(const struct config *c, double *lo, double *hi)
{
	double v[MAX_RUNS];

	for (int i = 0; i < c->done_runs; i++)
		v[i] = c->res[i].mps;
	return bench_range(v, c->done_runs, lo, hi);
}

static double median_of(const struct config *c, size_t offset)
{
	double v[MAX_RUNS];

	for (int i = 0; i < c->done_runs; i++)
		v[i] = *(const double *)(const void *)((const char *)&c->res[i]
						       + offset);
	return bench_median(v, c->done_runs);
}

#define MEDIAN(c, field) median_of((c), offsetof(struct result, field))

static const struct config *find(const struct config *cfgs, int n,
				 enum xring kind, const struct config *like)
{
	for (int i = 0; i < n; i++)
		if (cfgs[i].kind == kind &&
		    cfgs[i].producers == like->producers &&
		    cfgs[i].payload == like->payload && cfgs[i].done_runs)
			return &cfgs[i];
	return NULL;
}

static double ratio_to(const struct config *cfgs, int n,
		       const struct config *c, enum xring kind)
{
	const struct config *peer = find(cfgs, n, kind, c);
	double lo, hi;

	if (!peer || !c->done_runs)
		return 0;
	return bench_ratio(median_mps(c, &lo, &hi), median_mps(peer, &lo, &hi));
}

static void print_table(FILE *f, const struct config *cfgs, int n,
			const struct options *opt)
{
	int met = 0, missed = 0;
	double lo, hi, mid;

	fprintf(f, "\n%-10s %4s %7s %8s %8s %8s %8s %9s %5s %6s\n", "ring",
		"prod", "payload", "Mmsg/s", "min", "max", "ns/msg",
		"wakes/msg", "CPUs", "others");
	for (int i = 0; i < n; i++) {
		const struct config *c = &cfgs[i];

		if (!c->done_runs) {
			fprintf(f, "%-10s %4u %7zu   failed\n",
				xring_names[c->kind], c->producers, c->payload);
			continue;
		}
		mid = median_mps(c, &lo, &hi);
		fprintf(f, "%-10s %4u %7zu %8.2f %8.2f %8.2f %8.1f %9.2g "
			   "%5.2f %6.2f\n",
			xring_names[c->kind], c->producers, c->payload,
			mid / 1e6, lo / 1e6, hi / 1e6, MEDIAN(c, nspm),
			MEDIAN(c, wpm), MEDIAN(c, cpus), MEDIAN(c, other));
	}
	fprintf(f, "\nlull / peer (medians of %d runs; goal: at least %.0fx a "
		   "Unix socket):\n",
		opt->runs, GOAL_UNIX_RATIO);
	for (int i = 0; i < n; i++) {
		const struct config *c = &cfgs[i];
		double ru = ratio_to(cfgs, n, c, X_UNIX);
		double rp = ratio_to(cfgs, n, c, X_PIPE);

		if (!is_lull(c->kind) || !c->done_runs || (!ru && !rp))
			continue;
		fprintf(f, "  %-10s P=%u payload=%-4zu", xring_names[c->kind],
			c->producers, c->payload);
		if (ru)
			fprintf(f, " %6.2fx unix", ru);
		if (rp)
			fprintf(f, " %6.2fx pipe", rp);
		if (ru) {
			fprintf(f, "  goal %s", ru >= GOAL_UNIX_RATIO ? "met" :
								 "MISSED");
			if (ru >= GOAL_UNIX_RATIO)
				met++;
			else
				missed++;
		}
		fputc('\n', f);
	}
	if (met + missed)
		fprintf(f, "goal (lull at least %.0fx unix): met in %d, missed "
			   "in %d of %d\n",
			GOAL_UNIX_RATIO, met, missed, met + missed);
}

static void print_json(const struct config *cfgs, int n,
		       const struct config *c, const struct options *opt)
{
	double lo, hi, mid = median_mps(c, &lo, &hi);
	double ru = ratio_to(cfgs, n, c, X_UNIX);
	double rp = ratio_to(cfgs, n, c, X_PIPE);

	printf("{\"xproc_ring\":\"%s\",\"producers\":%u,\"payload\":%zu,"
	       "\"producer_processes\":%u,\"runs\":%d,\"msgs_per_s\":%.0f,"
	       "\"msgs_per_s_min\":%.0f,\"msgs_per_s_max\":%.0f,"
	       "\"runs_msgs_per_s\":[",
	       xring_names[c->kind], c->producers, c->payload, c->producers,
	       c->done_runs, mid, lo, hi);
	for (int i = 0; i < c->done_runs; i++)
		printf("%s%.0f", i ? "," : "", c->res[i].mps);
	printf("],\"ns_per_msg\":%.2f,\"wakes_per_msg\":%.3g,\"cpus\":%.3f,"
	       "\"other_cpus\":%.3f,\"messages\":%.0f,\"seconds\":%g,"
	       "\"capacity\":%zu,\"batch\":%u,\"pinned\":%s,",
	       MEDIAN(c, nspm), MEDIAN(c, wpm), MEDIAN(c, cpus),
	       MEDIAN(c, other), MEDIAN(c, msgs), opt->seconds, opt->capacity,
	       opt->batch, opt->pin ? "true" : "false");
	if (is_lull(c->kind))
		printf("\"parks_per_msg\":%.3g,", MEDIAN(c, ppm));
	if (c->kind == X_UNIX)
		printf("\"sndbuf\":%ld,", c->bufsize);
	if (c->kind == X_PIPE)
		printf("\"pipe_size\":%ld,", c->bufsize);
	if (is_lull(c->kind) && ru)
		printf("\"unix_ratio\":%.3f,\"goal_unix_ratio\":%.0f,"
		       "\"goal\":\"%s\",",
		       ru, GOAL_UNIX_RATIO,
		       ru >= GOAL_UNIX_RATIO ? "met" : "missed");
	if (is_lull(c->kind) && rp)
		printf("\"pipe_ratio\":%.3f,", rp);
	printf("\"lull\":\"%s\"}\n", lull_version());
}

/* --- options ---------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xproc [options]\n"
		"  --ring LIST       lull-mpsc, lull-lanes, unix, pipe (comma "
		"list; default all)\n"
		"  --producers N     producer processes (repeatable; default "
		"1 2 4; at most %d)\n"
		"  --payload BYTES   8 to %d (repeatable; default 8 64)\n"
		"  --seconds S       producers send for S seconds per run "
		"(default 0.5)\n"
		"  --runs R          repetitions, interleaved; median, min, "
		"max (default 3)\n"
		"  --capacity BYTES  lull data bytes, power of two (default 1 "
		"MiB); the socket's\n"
		"                    SO_SNDBUF and the pipe's size ask for the "
		"same\n"
		"  --batch N         lull_ring_read limit, messages per read "
		"of the others\n"
		"                    (default 4096; recvmmsg at most %u)\n"
		"  --pin             consumer on the first allowed CPU, "
		"producers round-robin\n"
		"                    on the others (default: no pinning)\n"
		"  --max-others F    repeat (up to twice) a run during which "
		"other processes\n"
		"                    used more than F CPUs (default: never)\n"
		"  --json            one JSON object per result on stdout; "
		"table to stderr\n"
		"  --verbose         print every run\n",
		MAX_PRODUCERS, MAX_PAYLOAD, MAX_MMSG);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_RING = 256, O_PROD, O_PAYLOAD, O_SECONDS, O_RUNS,
	       O_CAPACITY, O_BATCH, O_MAX_OTHERS, O_PIN, O_JSON, O_VERBOSE,
	       O_HELP };
	static const struct option longopts[] = {
		{ "ring", required_argument, NULL, O_RING },
		{ "producers", required_argument, NULL, O_PROD },
		{ "payload", required_argument, NULL, O_PAYLOAD },
		{ "seconds", required_argument, NULL, O_SECONDS },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "capacity", required_argument, NULL, O_CAPACITY },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "max-others", required_argument, NULL, O_MAX_OTHERS },
		{ "pin", no_argument, NULL, O_PIN },
		{ "json", no_argument, NULL, O_JSON },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	bool rings[X_KINDS], any = false;
	uint64_t v;
	int c;

	memset(opt, 0, sizeof(*opt));
	opt->seconds = 0.5;
	opt->runs = 3;
	opt->capacity = (size_t)1 << 20;
	opt->batch = 4096;
	opt->max_others = -1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_RING:
			if (bench_parse_names(optarg, xring_names, rings)) {
				fprintf(stderr, "xproc: --ring takes "
						"lull-mpsc, lull-lanes, unix, "
						"pipe\n");
				return -1;
			}
			for (int k = 0; k < X_KINDS; k++)
				opt->rings[k] |= rings[k];
			any = true;
			break;
		case O_PROD:
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > MAX_PRODUCERS || opt->nproducers == MAX_LIST) {
				fprintf(stderr, "xproc: bad --producers\n");
				return -1;
			}
			opt->producers[opt->nproducers++] = (unsigned)v;
			break;
		case O_PAYLOAD:
			if (!bench_parse_u64(optarg, &v) || v < 8 ||
			    v > MAX_PAYLOAD || opt->npayloads == MAX_LIST) {
				fprintf(stderr, "xproc: bad --payload (8 to "
						"%d)\n",
					MAX_PAYLOAD);
				return -1;
			}
			opt->payloads[opt->npayloads++] = (size_t)v;
			break;
		case O_SECONDS:
			if (!bench_parse_double(optarg, &opt->seconds) ||
			    !(opt->seconds > 0) || opt->seconds > 3600) {
				fprintf(stderr, "xproc: bad --seconds\n");
				return -1;
			}
			break;
		case O_RUNS:
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > MAX_RUNS) {
				fprintf(stderr, "xproc: bad --runs\n");
				return -1;
			}
			opt->runs = (int)v;
			break;
		case O_CAPACITY:
			if (!bench_parse_u64(optarg, &v) ||
			    v < LULL_RING_MIN_CAPACITY ||
			    v > LULL_RING_MAX_CAPACITY || (v & (v - 1))) {
				fprintf(stderr, "xproc: bad --capacity (a "
						"power of two)\n");
				return -1;
			}
			opt->capacity = (size_t)v;
			break;
		case O_BATCH:
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > 1u << 20) {
				fprintf(stderr, "xproc: bad --batch\n");
				return -1;
			}
			opt->batch = (unsigned)v;
			break;
		case O_MAX_OTHERS:
			if (!bench_parse_double(optarg, &opt->max_others) ||
			    !(opt->max_others >= 0)) {
				fprintf(stderr, "xproc: bad --max-others\n");
				return -1;
			}
			break;
		case O_PIN:
			opt->pin = true;
			break;
		case O_JSON:
			opt->json = true;
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
	if (!any)
		for (int k = 0; k < X_KINDS; k++)
			opt->rings[k] = true;
	if (!opt->nproducers) {
		opt->producers[0] = 1;
		opt->producers[1] = 2;
		opt->producers[2] = 4;
		opt->nproducers = 3;
	}
	if (!opt->npayloads) {
		opt->payloads[0] = 8;
		opt->payloads[1] = 64;
		opt->npayloads = 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	struct options opt;
	struct config *cfgs;
	int ncfgs = 0, ncpus, status = 0;
	uint64_t t0;

	if (parse_options(argc, argv, &opt))
		return 2;
	ncpus = bench_allowed_cpus(cpus);
	/* A reader that failed must fail its writers, not kill them. */
	signal(SIGPIPE, SIG_IGN);
	cfgs = calloc((size_t)opt.npayloads * opt.nproducers * X_KINDS,
		      sizeof(*cfgs));
	if (!cfgs)
		return 1;
	for (int i = 0; i < opt.npayloads; i++)
		for (int j = 0; j < opt.nproducers; j++)
			for (int k = 0; k < X_KINDS; k++) {
				struct config *c = &cfgs[ncfgs];

				if (!opt.rings[k])
					continue;
				c->kind = (enum xring)k;
				c->producers = opt.producers[j];
				c->payload = opt.payloads[i];
				c->res = calloc((size_t)opt.runs,
						sizeof(*c->res));
				if (!c->res)
					return 1;
				ncfgs++;
			}
	fprintf(stderr,
		"xproc: lull %s, %d config(s) x %d run(s), %.3f s each, "
		"capacity %zu, batch %u, %d CPU(s), %s; producers are "
		"processes, the consumer is this one\n"
		"xproc: load average %.2f before\n",
		lull_version(), ncfgs, opt.runs, opt.seconds, opt.capacity,
		opt.batch, ncpus, opt.pin ? "pinned" : "not pinned",
		bench_load_average());
	t0 = bench_now_ns();
	/* Round-robin: run r of every config before run r + 1 of any. */
	for (int r = 0; r < opt.runs; r++)
		for (int i = 0; i < ncfgs; i++) {
			struct config *c = &cfgs[i];

			for (int attempt = 0; !c->failed; attempt++) {
				if (run_once(c, &opt, cpus, ncpus,
					     c->done_runs)) {
					c->failed = true;
					status = 1;
					break;
				}
				if (opt.max_others < 0 ||
				    c->res[c->done_runs - 1].other <=
					    opt.max_others ||
				    attempt == 2)
					break;
				fprintf(stderr,
					"xproc: run %d of %s P=%u payload=%zu "
					"repeated: other processes used %.2f "
					"CPUs\n",
					r + 1, xring_names[c->kind],
					c->producers, c->payload,
					c->res[c->done_runs - 1].other);
				c->done_runs--;
			}
		}
	fprintf(stderr, "xproc: load average %.2f after, %.0f s in all\n",
		bench_load_average(), (double)(bench_now_ns() - t0) / 1e9);
	if (opt.json)
		for (int i = 0; i < ncfgs; i++)
			if (cfgs[i].done_runs)
				print_json(cfgs, ncfgs, &cfgs[i], &opt);
	fflush(stdout);
	print_table(opt.json ? stderr : stdout, cfgs, ncfgs, &opt);
	for (int i = 0; i < ncfgs; i++)
		free(cfgs[i].res);
	free(cfgs);
	return status;
}
