/* SPDX-License-Identifier: MIT */
/*
 * death.c - how soon one side of a ring shared between processes learns
 * that the other was killed (kill -9), over --rounds rounds each:
 *
 *   producer  P producer processes (--producers, default 2) write to a
 *             shared ring (MPSC or LANES(P), --ring), a record then a
 *             sleep uniform in [0, --gap-us), so that the consumer, this
 *             process, is parked between records: in lull_ring_wait()
 *             (--consumer wait, the default) or in a lull_loop on the
 *             uring-futex backend (--consumer loop).  A thread of this
 *             process sleeps uniform in [1, --kill-ms] ms, stamps the
 *             clock and kill(SIGKILL)s one producer chosen at random; the
 *             latency is from that stamp to the consumer's handler having
 *             the LULL_TYPE_DEATH record that names it.  Then the others
 *             stop and detach, and the ring must close (the poison record).
 *   consumer  this process is the producer of a shared ring whose consumer
 *             is a child that never reads: the producer fills the ring
 *             and blocks in lull_producer_wait() for room; the thread
 *             kill(SIGKILL)s the consumer; the latency is from the stamp
 *             to lull_producer_wait() returning -EPIPE.
 *
 * Both stamps are CLOCK_MONOTONIC in one process.  Each round also notes
 * whether the waiting side was inside its wait when the kill came (the
 * consumer between two records, or the producer blocked), and a round
 * whose notice does not come within 5 s fails the program (exit status
 * 1), as does a death record naming another process, a second one, or a
 * ring that does not close.  Reported: median, p90, p99 and max of each
 * scenario, and the goal, every notice under 10 ms, met or missed.
 *
 * Build: make build/perf/death
 * Run:   build/perf/death [--rounds 200] [--ring mpsc,lanes]
 *        [--consumer wait,loop] [--json]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lull.h>

#include "bench_common.h"

#define LINE 128
#define MSG_TYPE 1
#define CAPACITY ((size_t)1 << 16)
#define FILL_LEN 64
#define MAX_PRODUCERS 16
#define ROUND_LIMIT_NS (5ull * 1000000000ull)
#define GOAL_NS (10ull * 1000000)

enum scenario { S_PRODUCER, S_CONSUMER };
enum ring_kind { R_MPSC, R_LANES, R_KINDS };
enum consumer_kind { C_WAIT, C_LOOP, C_KINDS };

static const char *const ring_names[] = { "mpsc", "lanes", NULL };
static const char *const consumer_names[] = { "wait", "loop", NULL };

struct options {
	int rounds;
	unsigned producers;
	uint64_t gap_ns;
	uint64_t kill_ns;
	bool rings[R_KINDS];
	bool consumers[C_KINDS];
	bool consumer_death;
	uint64_t seed;
	bool json;
	bool verbose;
};

/* What a round's processes share: a mapping made before the forks. */
struct shared {
	alignas(LINE) _Atomic(unsigned) ready;
	alignas(LINE) _Atomic(int) go;
	alignas(LINE) _Atomic(int) stop;
	uint64_t gap_ns;
	uint64_t seed;
};

/*
 * The killer thread's orders and what it saw.  After the kill it waits on
 * the victim's pidfd: the time from the kill to the pidfd reading ready
 * is the kernel's part (the victim scheduled to take the signal, then
 * torn down), the floor under any notice through a pidfd.
 */
struct killer {
	pid_t victim;
	int pidfd;
	uint64_t delay_ns;
	_Atomic(uint64_t) t_kill;     /* 0 until the kill */
	uint64_t t_exit;              /* when its pidfd read ready */
	_Atomic(int) *waiting;        /* the waiting side's "in its wait" */
	bool was_waiting;
	pthread_t tid;
};

/* One scenario's results. */
struct series {
	const char *what;     /* "producer" or "consumer" */
	const char *ring;     /* mpsc, lanes */
	const char *consumer; /* wait, loop; NULL for consumer deaths */
	uint64_t *ns;    /* kill to notice */
	uint64_t *exit_ns; /* kill to the pidfd ready (the kernel's part) */
	uint64_t *after_ns; /* the pidfd ready to the notice (lull's) */
	int n;
	int waiting; /* rounds where the waiting side was in its wait */
	int skipped; /* producer deaths that left a claim (skipped > 0) */
};

static struct shared *sh;

static __attribute__((format(printf, 1, 2), noreturn)) void
die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "death: FAILED: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	/* The children go with us (PR_SET_PDEATHSIG). */
	exit(1);
}

/* splitmix64 */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t uniform(uint64_t *state, uint64_t lo, uint64_t hi)
{
	double u = (double)(rng_next(state) >> 11) * 0x1.0p-53;

	return lo + (uint64_t)(u * (double)(hi - lo));
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void *killer_main(void *arg)
{
	struct killer *k = arg;

	struct pollfd p = { .fd = k->pidfd, .events = POLLIN };

	sleep_ns(k->delay_ns);
	k->was_waiting = atomic_load_explicit(k->waiting, memory_order_relaxed);
	/* Release: pairs with the waiting side's acquire of the stamp. */
	atomic_store_explicit(&k->t_kill, bench_now_ns(),
			      memory_order_release);
	kill(k->victim, SIGKILL);
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	k->t_exit = bench_now_ns();
	return NULL;
}

static void killer_start(struct killer *k, pid_t victim, uint64_t delay_ns,
			 _Atomic(int) *waiting)
{
	k->victim = victim;
	k->pidfd = (int)syscall(SYS_pidfd_open, victim, 0);
	if (k->pidfd < 0)
		die("pidfd_open: %s", strerror(errno));
	k->delay_ns = delay_ns;
	k->waiting = waiting;
	k->was_waiting = false;
	atomic_store_explicit(&k->t_kill, 0, memory_order_relaxed);
	if (pthread_create(&k->tid, NULL, killer_main, k))
		die("pthread_create failed");
}

/* The time from the kill to @now, once the kill is known to be done. */
static uint64_t since_kill(struct killer *k, uint64_t now)
{
	uint64_t t = atomic_load_explicit(&k->t_kill, memory_order_acquire);

	if (!t)
		die("a death noticed before the kill");
	return now > t ? now - t : 0;
}

/* The killer is done: its kernel part, and lull's after it. */
static void killer_join(struct killer *k, struct series *s, uint64_t latency)
{
	uint64_t t_kill;

	pthread_join(k->tid, NULL);
	close(k->pidfd);
	t_kill = atomic_load_explicit(&k->t_kill, memory_order_relaxed);
	s->exit_ns[s->n] = k->t_exit - t_kill;
	/* The notice may come first: a process that was reaped is gone
	 * for the ring as soon as its pidfd is, and the two race. */
	s->after_ns[s->n] = latency > k->t_exit - t_kill
				    ? latency - (k->t_exit - t_kill)
				    : 0;
	s->ns[s->n++] = latency;
	s->waiting += k->was_waiting;
}

static pid_t fork_child(void)
{
	pid_t parent = getpid(), pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) ||
			 getppid() != parent))
		_exit(1);
	return pid;
}

static void reap(pid_t pid, bool killed)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		die("waitpid: %s", strerror(errno));
	if (killed ? !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		   : !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		die("a child ended unlike expected (status %#x)", status);
}

/* --- a producer dies -------------------------------------------------- */

/* A producer process: a record, then a sleep, until told to stop. */
static void producer_child(struct lull_ring *parent_ring, unsigned id)
{
	struct lull_producer *prod;
	struct lull_ring *ring;
	uint64_t state = sh->seed + id, seq;
	struct bench_backoff bo;
	int r;

	/* Sleep as long as asked: the gaps keep the consumer parking. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (lull_ring_open_fd(&ring, lull_ring_fd(parent_ring), 0) < 0 ||
	    lull_producer_attach(ring, 0, &prod) < 0)
		_exit(2);
	atomic_fetch_add_explicit(&sh->ready, 1, memory_order_release);
	/* Pairs with the consumer's release of go. */
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		sched_yield();
	bench_backoff_init(&bo);
	for (seq = 0; !atomic_load_explicit(&sh->stop, memory_order_relaxed);
	     seq++) {
		while ((r = lull_mpsc_write(prod, MSG_TYPE, &seq,
					    sizeof(seq))) == -EAGAIN)
			bench_backoff_wait(&bo);
		if (r < 0)
			_exit(3);
		sleep_ns(uniform(&state, 0, sh->gap_ns));
	}
	if (lull_producer_detach(prod) < 0)
		_exit(4);
	_exit(0);
}

struct pround {
	struct killer *k;
	pid_t victim;
	uint64_t latency;
	unsigned deaths;
	bool poison;
	uint64_t skipped;
	struct lull_loop *loop;
	_Atomic(int) waiting;
};

static int death_handler(const struct lull_record *rec, void *ctx)
{
	struct pround *pr = ctx;
	struct lull_death d;

	if (rec->type == LULL_TYPE_DEATH) {
		uint64_t now = bench_now_ns();

		memcpy(&d, rec->data, sizeof(d));
		if (d.pid != pr->victim)
			die("a death record names pid %d, the victim was %d",
			    (int)d.pid, (int)pr->victim);
		if (pr->deaths++)
			die("a second death record for pid %d", (int)d.pid);
		pr->latency = since_kill(pr->k, now);
		pr->skipped = d.skipped;
		/* Relaxed: a flag; the others stop, detach, the ring closes. */
		atomic_store_explicit(&sh->stop, 1, memory_order_relaxed);
	} else if (rec->type == LULL_TYPE_POISON) {
		pr->poison = true;
		if (pr->loop)
			lull_loop_stop(pr->loop);
		return LULL_READ_STOP;
	} else if (rec->type != MSG_TYPE) {
		die("an unexpected record of type %d", rec->type);
	}
	return LULL_READ_CONTINUE;
}

static void consume_wait(struct lull_ring *ring, struct pround *pr,
			 uint64_t deadline)
{
	int r;

	for (;;) {
		r = lull_ring_read(ring, death_handler, pr, 256);
		if (r == -EPIPE || pr->poison)
			return;
		if (r >= 0)
			continue;
		if (r != -EAGAIN)
			die("lull_ring_read: %s", lull_strerror(r));
		if (bench_now_ns() > deadline)
			die(pr->deaths ? "the ring did not close within 5 s "
					 "of the death record"
				       : "no death record within 5 s of the "
					 "kill");
		atomic_store_explicit(&pr->waiting, 1, memory_order_relaxed);
		r = lull_ring_wait(ring, 500 * 1000000ll);
		atomic_store_explicit(&pr->waiting, 0, memory_order_relaxed);
		if (r == -EPIPE)
			return;
		if (r < 0 && r != -ETIMEDOUT)
			die("lull_ring_wait: %s", lull_strerror(r));
	}
}

static void consume_loop(struct lull_ring *ring, struct pround *pr)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_URING_FUTEX };
	int r;

	r = lull_loop_create(&pr->loop, &cfg);
	if (r < 0)
		die("lull_loop_create: %s", lull_strerror(r));
	r = lull_loop_attach(pr->loop, ring, death_handler, pr, 256);
	if (r < 0)
		die("lull_loop_attach: %s", lull_strerror(r));
	r = lull_loop_run(pr->loop);
	if (r < 0)
		die("lull_loop_run: %s", lull_strerror(r));
	r = lull_loop_destroy(pr->loop);
	if (r < 0)
		die("lull_loop_destroy: %s", lull_strerror(r));
	pr->loop = NULL;
}

/* A watchdog for the loop, which has no deadline of its own. */
struct watchdog {
	pthread_t tid;
	_Atomic(int) done;
};

static void *watchdog_main(void *arg)
{
	struct watchdog *w = arg;
	uint64_t end = bench_now_ns() + ROUND_LIMIT_NS + 1000000000ull;

	while (!atomic_load_explicit(&w->done, memory_order_relaxed)) {
		if (bench_now_ns() > end) {
			fprintf(stderr, "death: FAILED: the loop had no death "
					"record and poison within 5 s\n");
			_exit(1);
		}
		sleep_ns(10000000);
	}
	return NULL;
}

static void producer_round(const struct options *opt, enum ring_kind rk,
			   enum consumer_kind ck, uint64_t *rng,
			   struct series *s)
{
	unsigned topology = rk == R_MPSC ? LULL_RING_MPSC :
					   LULL_RING_LANES(opt->producers);
	pid_t pids[MAX_PRODUCERS];
	struct lull_ring_stats st;
	struct lull_ring *ring;
	struct pround pr = { 0 };
	struct watchdog wd = { 0 };
	struct killer k;
	unsigned victim, i;
	int r;

	memset(sh, 0, sizeof(*sh));
	sh->gap_ns = opt->gap_ns;
	sh->seed = rng_next(rng);
	r = lull_ring_create_shared(&ring, CAPACITY, topology, 0);
	if (r < 0)
		die("lull_ring_create_shared: %s", lull_strerror(r));
	for (i = 0; i < opt->producers; i++) {
		pids[i] = fork_child();
		if (!pids[i])
			producer_child(ring, i);
	}
	/* Acquire: pairs with each producer's release of ready. */
	while (atomic_load_explicit(&sh->ready, memory_order_acquire) <
	       opt->producers)
		usleep(200);
	victim = (unsigned)uniform(rng, 0, opt->producers);
	pr.k = &k;
	pr.victim = pids[victim];
	atomic_store_explicit(&sh->go, 1, memory_order_release);
	killer_start(&k, pids[victim], uniform(rng, 1000000, opt->kill_ns),
		     &pr.waiting);
	if (ck == C_WAIT) {
		consume_wait(ring, &pr,
			     bench_now_ns() + opt->kill_ns + ROUND_LIMIT_NS);
	} else {
		if (pthread_create(&wd.tid, NULL, watchdog_main, &wd))
			die("pthread_create failed");
		consume_loop(ring, &pr);
		atomic_store_explicit(&wd.done, 1, memory_order_relaxed);
		pthread_join(wd.tid, NULL);
	}
	killer_join(&k, s, pr.latency);
	for (i = 0; i < opt->producers; i++)
		reap(pids[i], i == victim);
	if (pr.deaths != 1)
		die("%u death records, 1 expected", pr.deaths);
	if (lull_ring_stats(ring, &st) == 0 && st.producer_deaths != 1)
		die("producer_deaths %llu, 1 expected",
		    (unsigned long long)st.producer_deaths);
	lull_ring_destroy(ring);
	s->skipped += pr.skipped > 0;
	if (opt->verbose)
		fprintf(stderr, "producer death, %s, %s: %.3f ms%s%s\n",
			ring_names[rk], consumer_names[ck], pr.latency / 1e6,
			k.was_waiting ? " (consumer parked)" : "",
			pr.skipped ? " (a claim skipped)" : "");
}

/* --- the consumer dies ------------------------------------------------ */

static void consumer_child(struct lull_ring *parent_ring)
{
	struct lull_ring *ring;

	if (lull_ring_open_fd(&ring, lull_ring_fd(parent_ring),
			      LULL_OPEN_CONSUMER) < 0)
		_exit(2);
	atomic_fetch_add_explicit(&sh->ready, 1, memory_order_release);
	/* A consumer that never reads: the ring fills. */
	for (;;)
		pause();
}

static void consumer_round(const struct options *opt, uint64_t *rng,
			   struct series *s)
{
	static unsigned char fill[FILL_LEN];
	struct lull_producer *prod;
	struct lull_ring *ring;
	_Atomic(int) waiting = 0;
	struct killer k;
	uint64_t latency;
	pid_t pid;
	int r;

	memset(sh, 0, sizeof(*sh));
	r = lull_ring_create_shared(&ring, CAPACITY, LULL_RING_MPSC,
				    LULL_SHARE_NO_CONSUMER);
	if (r < 0)
		die("lull_ring_create_shared: %s", lull_strerror(r));
	pid = fork_child();
	if (!pid)
		consumer_child(ring);
	while (!atomic_load_explicit(&sh->ready, memory_order_acquire))
		usleep(200);
	r = lull_producer_attach(ring, 0, &prod);
	if (r < 0)
		die("lull_producer_attach: %s", lull_strerror(r));
	while ((r = lull_mpsc_write(prod, MSG_TYPE, fill, sizeof(fill))) == 0)
		;
	if (r != -EAGAIN)
		die("filling the ring: %s", lull_strerror(r));
	killer_start(&k, pid, uniform(rng, 1000000, opt->kill_ns), &waiting);
	atomic_store_explicit(&waiting, 1, memory_order_relaxed);
	r = lull_producer_wait(prod, sizeof(fill),
			       (int64_t)(opt->kill_ns + ROUND_LIMIT_NS));
	latency = bench_now_ns();
	atomic_store_explicit(&waiting, 0, memory_order_relaxed);
	if (r != -EPIPE)
		die("lull_producer_wait returned %s, -EPIPE expected",
		    r ? lull_strerror(r) : "0 (room)");
	latency = since_kill(&k, latency);
	killer_join(&k, s, latency);
	reap(pid, true);
	r = lull_mpsc_write(prod, MSG_TYPE, fill, sizeof(fill));
	if (r != -EPIPE)
		die("a write after the consumer died: %s, -EPIPE expected",
		    r ? lull_strerror(r) : "0");
	lull_producer_detach(prod);
	lull_ring_destroy(ring);
	if (opt->verbose)
		fprintf(stderr, "consumer death: %.3f ms%s\n", latency / 1e6,
			k.was_waiting ? " (producer waiting)" : "");
}

/* --- the report ------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t quantile(const uint64_t *sorted, int n, double q)
{
	int i = (int)(q * (double)(n - 1) + 0.5);

	return sorted[i < n ? i : n - 1];
}

/* Sorts @v; its quantiles. */
struct spread {
	uint64_t min, p50, p90, p99, max;
};

static struct spread spread_of(uint64_t *v, int n)
{
	struct spread sp;

	qsort(v, (size_t)n, sizeof(v[0]), cmp_u64);
	sp.min = v[0];
	sp.p50 = quantile(v, n, 0.5);
	sp.p90 = quantile(v, n, 0.9);
	sp.p99 = quantile(v, n, 0.99);
	sp.max = v[n - 1];
	return sp;
}

static void report(FILE *f, struct series *s, const struct options *opt)
{
	struct spread all, kern, after;
	char name[48];
	bool met;

	if (!s->n)
		return;
	all = spread_of(s->ns, s->n);
	kern = spread_of(s->exit_ns, s->n);
	after = spread_of(s->after_ns, s->n);
	met = all.max < GOAL_NS;
	if (s->consumer)
		snprintf(name, sizeof(name), "producer killed, %s, %s",
			 s->ring, s->consumer);
	else
		snprintf(name, sizeof(name), "consumer killed, %s", s->ring);
	fprintf(f, "%-28s %4d %7.3f %7.3f %7.3f %7.3f %7.3f  %6.3f %6.3f  "
		   "%6.3f %6.3f ",
		name, s->n, all.min / 1e6, all.p50 / 1e6, all.p90 / 1e6,
		all.p99 / 1e6, all.max / 1e6, kern.p50 / 1e6, kern.max / 1e6,
		after.p50 / 1e6, after.max / 1e6);
	/* A loop's consumer has no "in its wait" we can see from here. */
	if (s->consumer && !strcmp(s->consumer, "loop"))
		fprintf(f, "%4s", "-");
	else
		fprintf(f, "%4d", s->waiting);
	fprintf(f, " %4d  %s\n", s->skipped, met ? "met" : "MISSED");
	if (!opt->json)
		return;
	printf("{\"death\":\"%s\",\"ring\":\"%s\",\"consumer\":%s%s%s,"
	       "\"rounds\":%d,\"min_ns\":%llu,\"median_ns\":%llu,"
	       "\"p90_ns\":%llu,\"p99_ns\":%llu,\"max_ns\":%llu,"
	       "\"exit_median_ns\":%llu,\"exit_max_ns\":%llu,"
	       "\"after_exit_median_ns\":%llu,\"after_exit_max_ns\":%llu,"
	       "\"waiting_at_kill\":%d,\"claims_skipped\":%d,"
	       "\"producers\":%u,\"gap_us\":%g,\"kill_ms\":%g,"
	       "\"goal_ns\":%llu,\"goal\":\"%s\"}\n",
	       s->what, s->ring, s->consumer ? "\"" : "",
	       s->consumer ? s->consumer : "null", s->consumer ? "\"" : "",
	       s->n, (unsigned long long)all.min, (unsigned long long)all.p50,
	       (unsigned long long)all.p90, (unsigned long long)all.p99,
	       (unsigned long long)all.max, (unsigned long long)kern.p50,
	       (unsigned long long)kern.max, (unsigned long long)after.p50,
	       (unsigned long long)after.max, s->waiting, s->skipped,
	       s->consumer ? opt->producers : 1, (double)opt->gap_ns / 1e3,
	       (double)opt->kill_ns / 1e6, (unsigned long long)GOAL_NS,
	       met ? "met" : "missed");
}

/* --- options ---------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: death [options]\n"
		"  --rounds N        rounds of each scenario (default 200)\n"
		"  --producers P     producer processes in a producer round "
		"(default 2, at most %d)\n"
		"  --gap-us G        a producer sleeps uniform in [0, G) us "
		"after each record\n"
		"                    (default 1000)\n"
		"  --kill-ms M       the kill comes uniform in [1, M] ms "
		"into the round (default 10)\n"
		"  --ring LIST       mpsc, lanes or both (default both): the "
		"ring of a producer round\n"
		"  --consumer LIST   wait (lull_ring_wait), loop (a lull_loop "
		"on uring-futex) or\n"
		"                    both (default wait): the parked consumer "
		"of a producer round\n"
		"  --no-consumer-death  leave out the rounds that kill the "
		"consumer\n"
		"  --seed N          seed of the delays and the victims "
		"(default 1)\n"
		"  --json            one JSON object per scenario on stdout; "
		"table to stderr\n"
		"  --verbose         every round on stderr\n",
		MAX_PRODUCERS);
}

static int parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_ROUNDS = 256, O_PROD, O_GAP, O_KILL, O_RING, O_CONSUMER,
	       O_NO_CDEATH, O_SEED, O_JSON, O_VERBOSE, O_HELP };
	static const struct option longopts[] = {
		{ "rounds", required_argument, NULL, O_ROUNDS },
		{ "producers", required_argument, NULL, O_PROD },
		{ "gap-us", required_argument, NULL, O_GAP },
		{ "kill-ms", required_argument, NULL, O_KILL },
		{ "ring", required_argument, NULL, O_RING },
		{ "consumer", required_argument, NULL, O_CONSUMER },
		{ "no-consumer-death", no_argument, NULL, O_NO_CDEATH },
		{ "seed", required_argument, NULL, O_SEED },
		{ "json", no_argument, NULL, O_JSON },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c;

	memset(opt, 0, sizeof(*opt));
	opt->rounds = 200;
	opt->producers = 2;
	opt->gap_ns = 1000000;
	opt->kill_ns = 10000000;
	opt->rings[R_MPSC] = opt->rings[R_LANES] = true;
	opt->consumers[C_WAIT] = true;
	opt->consumer_death = true;
	opt->seed = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_ROUNDS:
			if (!bench_parse_u64(optarg, &v) || !v || v > 100000) {
				fprintf(stderr, "death: bad --rounds\n");
				return -1;
			}
			opt->rounds = (int)v;
			break;
		case O_PROD:
			if (!bench_parse_u64(optarg, &v) || !v ||
			    v > MAX_PRODUCERS) {
				fprintf(stderr, "death: bad --producers\n");
				return -1;
			}
			opt->producers = (unsigned)v;
			break;
		case O_GAP:
			if (!bench_parse_scaled(optarg, 1e3, &opt->gap_ns) ||
			    opt->gap_ns > 1000000000ull) {
				fprintf(stderr, "death: bad --gap-us\n");
				return -1;
			}
			break;
		case O_KILL:
			if (!bench_parse_scaled(optarg, 1e6, &opt->kill_ns) ||
			    opt->kill_ns < 1000000 ||
			    opt->kill_ns > 10000000000ull) {
				fprintf(stderr, "death: bad --kill-ms (1 to "
						"10000)\n");
				return -1;
			}
			break;
		case O_RING:
			if (bench_parse_names(optarg, ring_names, opt->rings)) {
				fprintf(stderr, "death: --ring takes mpsc, "
						"lanes or both\n");
				return -1;
			}
			break;
		case O_CONSUMER:
			if (bench_parse_names(optarg, consumer_names,
					      opt->consumers)) {
				fprintf(stderr, "death: --consumer takes wait, "
						"loop or both\n");
				return -1;
			}
			break;
		case O_NO_CDEATH:
			opt->consumer_death = false;
			break;
		case O_SEED:
			if (!bench_parse_u64(optarg, &opt->seed)) {
				fprintf(stderr, "death: bad --seed\n");
				return -1;
			}
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
	return 0;
}

int main(int argc, char **argv)
{
	struct series ss[R_KINDS * C_KINDS + 1];
	struct options opt;
	uint64_t rng, t0;
	int ns = 0, r, i;
	FILE *out;

	if (parse_options(argc, argv, &opt))
		return 2;
	if (opt.consumers[C_LOOP] &&
	    (r = lull_backend_supported(LULL_BACKEND_URING_FUTEX)) < 0) {
		fprintf(stderr, "death: --consumer loop needs the uring-futex "
				"backend: %s\n",
			lull_strerror(r));
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	memset(ss, 0, sizeof(ss));
	for (int rk = 0; rk < R_KINDS; rk++)
		for (int ck = 0; ck < C_KINDS; ck++)
			if (opt.rings[rk] && opt.consumers[ck]) {
				ss[ns].what = "producer";
				ss[ns].ring = ring_names[rk];
				ss[ns].consumer = consumer_names[ck];
				ns++;
			}
	if (opt.consumer_death) {
		ss[ns].what = "consumer";
		ss[ns].ring = "mpsc";
		ns++;
	}
	for (i = 0; i < ns; i++) {
		ss[i].ns = calloc((size_t)opt.rounds, sizeof(uint64_t));
		ss[i].exit_ns = calloc((size_t)opt.rounds, sizeof(uint64_t));
		ss[i].after_ns = calloc((size_t)opt.rounds, sizeof(uint64_t));
		if (!ss[i].ns || !ss[i].exit_ns || !ss[i].after_ns)
			die("out of memory");
	}
	out = opt.json ? stderr : stdout;
	fprintf(stderr,
		"death: lull %s, %d round(s) of %d scenario(s); producer "
		"rounds: %u producer processes, a record every 0-%g us; the "
		"kill 1-%g ms in\ndeath: load average %.2f before\n",
		lull_version(), opt.rounds, ns, opt.producers,
		(double)opt.gap_ns / 1e3, (double)opt.kill_ns / 1e6,
		bench_load_average());
	rng = opt.seed;
	t0 = bench_now_ns();
	/* Interleaved: round r of every scenario before round r + 1. */
	for (r = 0; r < opt.rounds; r++) {
		i = 0;
		for (int rk = 0; rk < R_KINDS; rk++)
			for (int ck = 0; ck < C_KINDS; ck++)
				if (opt.rings[rk] && opt.consumers[ck])
					producer_round(&opt, rk, ck, &rng,
						       &ss[i++]);
		if (opt.consumer_death)
			consumer_round(&opt, &rng, &ss[i]);
	}
	fprintf(stderr, "death: load average %.2f after, %.1f s in all\n",
		bench_load_average(), (double)(bench_now_ns() - t0) / 1e9);
	fprintf(out,
		"\nfrom just before kill(SIGKILL) to the notice, ms: a "
		"producer killed, the\nconsumer's handler has its "
		"LULL_TYPE_DEATH record; the consumer killed, the\nproducer's "
		"lull_producer_wait() returns -EPIPE.  exit: kill to the "
		"victim's pidfd\nreading ready (the kernel's part); after: "
		"from then to the notice (lull's).\nwait: rounds where the "
		"other side was in its wait at the kill; skip: deaths\nthat "
		"left a claim open\n\n"
		"%-28s %4s %7s %7s %7s %7s %7s  %6s %6s  %6s %6s %4s %4s  %s\n",
		"scenario", "n", "min", "median", "p90", "p99", "max", "exit50",
		"exitmx", "aftr50", "aftrmx", "wait", "skip", "max < 10 ms");
	for (i = 0; i < ns; i++)
		report(out, &ss[i], &opt);
	return 0;
}
