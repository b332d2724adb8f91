/* SPDX-License-Identifier: MIT */
/*
 * handoff.c - wake-up latency and idle cost of one producer thread handing
 * messages to one consumer thread: lull's ways of waiting, the naive ways,
 * and the bare kernel mechanisms underneath, side by side in one run.
 *
 * Each run: the producer sends --messages data messages with a random gap
 * between pushes, uniform in [0, --max-gap-us), then stays silent for
 * --idle-seconds, then sends one last message that ends the idle window.
 * A message carries its sequence number and a CLOCK_MONOTONIC timestamp
 * taken just before the push; its latency is the consumer's clock when the
 * consumer has it, minus that timestamp.  Every run of every mechanism uses
 * the same sequence of gaps (the generator is seeded with the run number).
 *
 * Mechanisms (--mechanism, repeatable; default all):
 *   poll                a lull ring; the consumer reads it and sleeps
 *                       --poll-interval-us (nanosleep) when it is empty
 *   spin                a lull ring, read in a loop with a PAUSE between
 *   yield               a lull ring, read in a loop with sched_yield()
 *   lull                a lull_loop on the backend lull picks by default
 *                       (lull_backend_probe(): LULL_BACKEND if set, else
 *                       the best this kernel allows); not in "all", where
 *                       it would repeat the backend it picks
 *   lull-uring-futex    a lull_loop with that backend, one ring attached
 *   lull-uring-eventfd
 *   lull-epoll
 *   lull-blocking       lull_ring_wait() (futex(2)), then lull_ring_read()
 *   lull-spin-park      the same with a spin window (--spin-us, default
 *                       50 us; a comma list runs one instance per value)
 *   futex-floor         no ring: the producer stores a message count and
 *                       always calls FUTEX_WAKE; the consumer FUTEX_WAITs
 *                       on the count
 *   eventfd-floor       no ring: the count, then an eventfd write; the
 *                       consumer blocks in read(2) of the eventfd
 *   uring-futex-floor   as futex-floor, but the consumer waits with an
 *                       io_uring IORING_OP_FUTEX_WAIT (Linux 6.7+)
 *   uring-eventfd-floor as eventfd-floor, with an io_uring read
 *   epoll-floor         as eventfd-floor, the consumer in epoll_wait() on
 *                       the eventfd, edge-triggered, never reading it
 *   moodycamel-blocking moodycamel's BlockingConcurrentQueue: the consumer
 *                       parks in wait_dequeue() on the queue's semaphore
 *   uv-async            libuv: a mutex-protected queue and uv_async_send();
 *                       the loop thread drains it in the async callback
 *   msg-ring            io_uring IORING_OP_MSG_RING from the producer's
 *                       ring into the consumer's, which waits in
 *                       io_uring_wait_cqe() (Linux 5.18+)
 * Across processes (handoff_xproc.c; --mechanism xproc picks these and
 * the same-process ones they are compared with):
 *   lull-blocking-memfd lull-blocking on a ring shared between processes
 *                       (lull_ring_create_shared), the consumer still a
 *                       thread of this process: the shared ring's price
 *   lull-blocking-xproc the same, the consumer a forked child that opened
 *                       the ring's memfd (LULL_OPEN_CONSUMER), parked in
 *                       lull_ring_wait()
 *   lull-uring-futex-xproc  the child parks in a lull_loop (uring-futex:
 *                       its futex wait is on the shared ring's park word)
 *   lull-uring-eventfd-xproc, lull-epoll-xproc  the same on the loop's
 *                       backends that sleep on its eventfd, which reach
 *                       the shared ring's futex through a bridge thread
 *   futex-xproc-floor   futex-floor with the consumer in the child: a
 *                       shared futex on a word in MAP_SHARED memory
 *   unix-xproc          a SOCK_SEQPACKET socketpair: write(2), and the
 *                       child's blocking read(2)
 *   pipe-xproc          a pipe, the same
 * Each lull one's p50 is compared with its same-process mechanism's
 * (lull-blocking, or the loop on the same backend) in the same run: the
 * goal is within 1.1x.
 * The floors' io_urings are set up like lull's loop (SINGLE_ISSUER and
 * DEFER_TASKRUN where the kernel has them) but wait with no timeout.  The
 * floors' futexes are private unless --shared-futex (lull's are shared: see
 * lib/park.c).  lull rings are SPSC, made by lull_ring_create().  The
 * other libraries' mechanisms are built where their packages are
 * (libconcurrentqueue-dev, libuv1-dev; msg-ring needs only liburing and
 * checks the kernel at run time); one that cannot run is listed as
 * skipped, with the reason.
 *
 * Idle cost is measured by the consumer thread itself: getrusage
 * (RUSAGE_THREAD) and the clock right after it handles the last data
 * message (just before it goes back to waiting), and again right after it
 * handles the message that ends the window.  Wake-ups are the voluntary
 * context switches in between, less the one that ends the window; CPU is
 * user + system time, scaled to --idle-seconds.  lull arms no safety net by
 * default, so an idle lull consumer should make 0 wake-ups; with
 * --safety-ms it also wakes when the net expires, and those count too.
 *
 * Aggregation: latency percentiles pool every run's samples into one
 * log-linear histogram (hist.h, < 0.4 % error); the idle and per-message
 * costs are the median over the runs.  Runs interleave: run 1 of every
 * mechanism, then run 2 of every mechanism, so machine noise hits all.
 *
 * Checks: the consumer must receive every message once, in order (sequence
 * numbers and count); anything else ends the program with exit status 1.
 * So does a run that makes no progress for far longer than it should take
 * (a lost wake-up with no safety net), and a lull run in which the safety
 * net ended a park with a record waiting (a lost wake-up with one).
 *
 * --headline (make demo) runs poll and lull only, prints each run as it
 * ends and, instead of the full table, the two mechanisms in the reference
 * benchmark's shape followed by two lines: how many times lower lull's p50
 * latency is than poll's, and the idle wake-ups per second of each.
 *
 * --json adds "cdf" to each object: [fraction, ns] pairs, the fraction of
 * the pooled messages delivered within ns, from the minimum (0) through a
 * fixed grid of quantiles to the maximum (1), for plotting.
 *
 * Files: this one is the measurement loop (runs, the producer, the
 * consumer's clock and checks, the watchdog, the idle and latency
 * accounting); the command line is in handoff_options.c, the table,
 * headline and JSON in handoff_report.c, the mechanisms in
 * handoff_mechanisms.c, the floors in handoff_floors.c and the consumer
 * in another process in handoff_xproc.c, behind handoff.h.
 *
 * Build: make build/perf/handoff
 * Run:   build/perf/handoff [--mechanism all] [--pin cross|same|none] [--json]
 *        build/perf/handoff --headline
 */
#include "handoff.h"

void ho_die(const struct run *run, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (run)
		fprintf(stderr, "handoff: FAILED: %s, run %d: ",
			run->mech->label, run->index + 1);
	else
		fprintf(stderr, "handoff: FAILED: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void sleep_until(uint64_t t_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(t_ns / 1000000000u),
		.tv_nsec = (long)(t_ns % 1000000000u),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

/* splitmix64: the gaps; the same sequence for every mechanism in a run. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t next_gap(uint64_t *state, uint64_t max_gap_ns)
{
	double u = (double)(rng_next(state) >> 11) * 0x1.0p-53;

	return (uint64_t)(u * (double)max_gap_ns);
}

/* --- the consumer ---------------------------------------------------- */

/*
 * Runs on the consumer thread (in the child, for -xproc), which may be
 * inside a loop callback.
 */
void ho_snap_take(struct consumer *c, struct snap *s)
{
	struct lull_loop_stats ls;

	getrusage(RUSAGE_THREAD, &s->ru);
	s->t = bench_now_ns();
	s->iters = c->iters;
	if (c->ring)
		lull_ring_stats(c->ring, &s->rs);
	if (c->loop && lull_loop_stats(c->loop, &ls) == 0)
		s->loop_iters = ls.iterations;
}

static void *consumer_main(void *arg)
{
	struct run *run = arg;
	struct consumer *c = &run->c;

	bench_pin_self(run->consumer_cpu);
	switch (mech_descs[run->mech->kind].style) {
	case STYLE_RING_POLL:
		pthread_barrier_wait(&run->ready);
		ho_snap_take(c, &c->start);
		ho_consume_ring_poll(c);
		break;
	case STYLE_LULL_WAIT:
		ho_consume_lull_wait(c);
		break;
	case STYLE_LULL_LOOP:
		ho_consume_lull_loop(c);
		break;
	case STYLE_FLOOR:
		ho_consume_floor(c);
		break;
	case STYLE_QUEUE:
		mech_descs[run->mech->kind].queue->consume(c);
		break;
	}
	return NULL;
}

/* --- the producer ---------------------------------------------------- */

/* Push message @seq; returns the timestamp it carries. */
static uint64_t push(struct run *run, struct lull_producer *prod,
		     uint64_t seq)
{
	struct msg m = { .seq = seq };
	int r;

	m.t_push = bench_now_ns();
	if (prod) {
		while ((r = lull_spsc_write(prod, MSG_TYPE, &m, sizeof(m))) ==
		       -EAGAIN) {
			run->full_waits++;
			sched_yield();
		}
		if (r < 0)
			ho_die(run, "lull_spsc_write: %s", lull_strerror(r));
		return m.t_push;
	}
	if (mech_descs[run->mech->kind].style == STYLE_QUEUE) {
		mech_descs[run->mech->kind].queue->push(run, &m);
		return m.t_push;
	}
	run->ts[seq] = m.t_push;
	/* Pairs with the consumer's acquire load: ts[seq] is written. */
	atomic_store_explicit(&run->word, (uint32_t)(seq + 1),
			      memory_order_release);
	ho_floor_wake(run);
	return m.t_push;
}

static void *producer_main(void *arg)
{
	struct run *run = arg;
	const struct options *opt = run->opt;
	struct lull_producer *prod = NULL;
	uint64_t state = opt->seed + 0x51ed270b27a1f1d5ull *
					     (uint64_t)(run->index + 1);
	uint64_t t_next, t_last = 0, seq;
	int r;

	bench_pin_self(run->producer_cpu);
	/* Sleep as long as asked: the gaps are part of the workload. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	if (run->ring) {
		r = lull_producer_attach(run->ring, 0, &prod);
		if (r < 0)
			ho_die(run, "lull_producer_attach: %s", lull_strerror(r));
	}
	pthread_barrier_wait(&run->ready);
	t_next = bench_now_ns() + next_gap(&state, opt->max_gap_ns);
	for (seq = 0; seq < run->n; seq++) {
		sleep_until(t_next);
		t_last = push(run, prod, seq);
		run->push[seq] = bench_now_ns() - t_last;
		t_next = t_last + next_gap(&state, opt->max_gap_ns);
	}
	sleep_until(t_last + (uint64_t)(opt->idle_s * 1e9));
	push(run, prod, run->n);
	run->sent = run->n + 1;
	if (prod) {
		r = lull_producer_detach(prod);
		if (r < 0)
			ho_die(run, "lull_producer_detach: %s", lull_strerror(r));
	}
	return NULL;
}

/* --- one run --------------------------------------------------------- */

static void record_run(struct run *run, double others)
{
	struct mech *m = run->mech;
	const struct mech_desc *d = &mech_descs[m->kind];
	const struct consumer *c = &run->c;
	struct hist *h = hist_new();
	struct lull_ring_stats rs;
	double window_s, n = (double)run->n, msgs = (double)(run->n + 1);
	uint64_t nv, iters;
	int i = m->done_runs;

	if (!h)
		ho_die(run, "out of memory");
	for (uint64_t k = 0; k < run->n; k++) {
		hist_record(h, run->lat[k]);
		hist_record(m->push, run->push[k]);
	}
	m->p50[i] = (double)hist_quantile(h, 0.5);
	hist_merge(m->pooled, h);
	free(h);

	/* The window, as the consumer saw it. */
	window_s = (double)(c->idle1.t - c->idle0.t) / 1e9;
	nv = (uint64_t)(c->idle1.ru.ru_nvcsw - c->idle0.ru.ru_nvcsw);
	if (d->sleeps && nv)
		nv--; /* the wake that ended the window */
	m->idle_wakeups[i] = (double)nv;
	m->idle_wps[i] = bench_ratio((double)nv, window_s);
	m->idle_cpu_ms[i] =
		bench_ratio((double)(bench_ru_cpu_ns(&c->idle1.ru) -
				  bench_ru_cpu_ns(&c->idle0.ru)) /
				 1e6 * run->opt->idle_s,
			 window_s);
	if (d->style == STYLE_LULL_LOOP)
		iters = c->idle1.loop_iters - c->idle0.loop_iters;
	else if (d->style == STYLE_LULL_WAIT)
		iters = c->idle1.rs.parks - c->idle0.rs.parks;
	else
		iters = c->idle1.iters - c->idle0.iters;
	m->idle_iters[i] = iters ? (double)(iters - 1) : 0;
	m->idle_invol[i] =
		(double)(c->idle1.ru.ru_nivcsw - c->idle0.ru.ru_nivcsw);
	m->idle_safety[i] = (double)(c->idle1.rs.idle_timeouts -
				     c->idle0.rs.idle_timeouts);

	/* The data phase: from the start to the last data message. */
	m->act_cpu_us[i] = (double)(bench_ru_cpu_ns(&c->idle0.ru) -
				    bench_ru_cpu_ns(&c->start.ru)) /
			   1e3 / n;
	m->act_wakes[i] =
		(double)(c->idle0.ru.ru_nvcsw - c->start.ru.ru_nvcsw) / n;

	if (run->ring && is_lull(m->kind)) {
		lull_ring_stats(run->ring, &rs);
		m->wakes_pm[i] = (double)rs.wakes / msgs;
		m->parks_pm[i] = (double)rs.parks / msgs;
		m->cancels_pm[i] = (double)rs.park_cancels / msgs;
		m->lost_wakes += rs.safety_timeouts;
		if (rs.safety_timeouts)
			fprintf(stderr,
				"handoff: %s run %d: %llu park(s) ended by the "
				"safety net with a record waiting: lost "
				"wake-ups\n",
				m->label, run->index + 1,
				(unsigned long long)rs.safety_timeouts);
	}
	m->others[i] = others;
	m->full_waits += run->full_waits;
	m->clock_skew += c->clock_skew;
	m->done_runs++;
}

/*
 * With --max-others: before a run, wait until other processes have used
 * at most @max CPUs over a quarter of a second (this process is idle
 * between runs), for up to 10 minutes.
 */
static void wait_quiet(double max)
{
	static bool told;
	struct bench_others o;
	uint64_t waited = 0;
	double others;

	for (;;) {
		bench_others_start(&o);
		usleep(250000);
		others = bench_others_cpus(&o);
		if (others <= max)
			return;
		waited += bench_now_ns() - o.t;
		if (!told) {
			fprintf(stderr,
				"handoff: waiting for other processes to use "
				"at most %.2f CPUs (now %.2f)\n",
				max, others);
			told = true;
		}
		if (waited > 600ull * 1000000000u) {
			fprintf(stderr, "handoff: still busy after 10 min; "
					"running anyway\n");
			return;
		}
	}
}

/*
 * The run's ring.  lull_ring_create() allocates the region itself, and its
 * producers can only live in this process, so the park barrier is
 * asymmetric: a membarrier(2) on each park, a compiler barrier on each
 * commit.  A region in caller memory (lull_ring_create_in) may be shared
 * with other processes, so both sides use a full fence instead, as on a
 * shared ring (lull_ring_create_shared: a memfd), whose consumer is
 * another process (PROC_OTHER: this handle only produces, the child opens
 * its own) or a thread of this one (PROC_MEMFD).
 */
static int ring_make(struct run *run)
{
	enum proc_kind proc = mech_descs[run->mech->kind].proc;
	ssize_t size;

	if (proc != PROC_LOCAL)
		return lull_ring_create_shared(&run->ring, RING_CAPACITY,
					       LULL_RING_SPSC,
					       proc == PROC_OTHER
						       ? LULL_SHARE_NO_CONSUMER
						       : 0);
	if (!run->mech->fence)
		return lull_ring_create(&run->ring, RING_CAPACITY,
					LULL_RING_SPSC);
	size = lull_ring_region_size(RING_CAPACITY);
	if (size < 0)
		return (int)size;
	run->ring_mem = aligned_alloc(LINE, (size_t)size);
	if (!run->ring_mem)
		return -ENOMEM;
	return lull_ring_create_in(&run->ring, run->ring_mem, (size_t)size,
				   RING_CAPACITY, LULL_RING_SPSC);
}

/*
 * Memory of the run that the consumer writes and main reads: in a
 * MAP_SHARED mapping, made before the fork, when the consumer is another
 * process (@shared); else on the heap.  Line-aligned and zeroed either way.
 */
static void *run_mem(size_t size, bool shared)
{
	size_t rounded = (size + LINE - 1) & ~(size_t)(LINE - 1);
	void *p;

	if (shared) {
		p = mmap(NULL, rounded, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	p = aligned_alloc(LINE, rounded);
	if (p)
		memset(p, 0, rounded);
	return p;
}

static void run_mem_free(void *p, size_t size, bool shared)
{
	if (p && shared)
		munmap(p, (size + LINE - 1) & ~(size_t)(LINE - 1));
	else
		free(p);
}

/* One run; returns the CPUs other processes used meanwhile. */
static double run_once(struct mech *m, const struct options *opt,
		       const int *cpus, int ncpus, int index)
{
	const struct mech_desc *d = &mech_descs[m->kind];
	bool xproc = is_xproc(m->kind);
	pthread_barrierattr_t battr;
	struct run *run;
	pthread_t ctid, ptid;
	struct timespec deadline;
	struct bench_others o;
	uint64_t limit_ns, child_cpu_ns = 0;
	double others;
	pid_t cpid = -1;
	int r, pin;

	run = run_mem(sizeof(*run), xproc);
	if (!run)
		ho_die(NULL, "out of memory");
	run->mech = m;
	run->opt = opt;
	run->index = index;
	run->n = opt->messages;
	run->c.run = run;
	run->efd = -1;
	run->futex_private = m->shared ? 0 : FUTEX_PRIVATE_FLAG;
	atomic_init(&run->word, 0);
	atomic_init(&run->progress, 0);
	pin = opt->pin;
	run->consumer_cpu = run->producer_cpu = -1;
	if (pin != PIN_NONE && ncpus > 0) {
		run->consumer_cpu = cpus[0];
		run->producer_cpu =
			pin == PIN_CROSS && ncpus > 1 ? cpus[1] : cpus[0];
	}
	run->lat = run_mem(run->n * sizeof(*run->lat), xproc);
	run->push = calloc(run->n, sizeof(*run->push));
	if (!run->lat || !run->push)
		ho_die(run, "out of memory");
	if (d->style == STYLE_FLOOR) {
		run->ts = run_mem((run->n + 1) * sizeof(*run->ts), xproc);
		if (!run->ts)
			ho_die(run, "out of memory");
		if (m->kind == MECH_EVENTFD_FLOOR ||
		    m->kind == MECH_URING_EVENTFD_FLOOR ||
		    m->kind == MECH_EPOLL_FLOOR) {
			/* Blocking: read(2) and io_uring's read wait on it. */
			run->efd = eventfd(0, EFD_CLOEXEC);
			if (run->efd < 0)
				ho_die(run, "eventfd: %s", strerror(errno));
		}
	} else if (d->style == STYLE_QUEUE) {
		d->queue->open(run);
	} else {
		r = ring_make(run);
		if (r < 0)
			ho_die(run, "lull_ring_create: %s", lull_strerror(r));
		/* The child opens its own (ho_consumer_fork()). */
		if (!xproc)
			run->c.ring = run->ring;
	}
	pthread_barrierattr_init(&battr);
	if (xproc)
		pthread_barrierattr_setpshared(&battr, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&run->ready, &battr, 2);
	pthread_barrierattr_destroy(&battr);

	bench_others_start(&o);
	/* The fork first, while this process has no other thread. */
	if (xproc)
		cpid = ho_consumer_fork(run, consumer_main);
	else if (pthread_create(&ctid, NULL, consumer_main, run))
		ho_die(run, "pthread_create failed");
	if (pthread_create(&ptid, NULL, producer_main, run))
		ho_die(run, "pthread_create failed");

	/* The watchdog: far longer than the run can take when it works. */
	limit_ns = run->n * (opt->max_gap_ns + opt->poll_ns) +
		   (uint64_t)(opt->idle_s * 1e9) + STUCK_SLACK_NS;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += (time_t)(limit_ns / 1000000000u);
	deadline.tv_nsec += (long)(limit_ns % 1000000000u);
	if (deadline.tv_nsec >= 1000000000) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000;
	}
	if (xproc)
		r = ho_consumer_wait(run, cpid, limit_ns, &child_cpu_ns);
	else
		r = pthread_timedjoin_np(ctid, NULL, &deadline);
	if (r == ETIMEDOUT)
		ho_die(run,
		    "stuck: the consumer has %llu of %llu messages after "
		    "%.0f s (a lost wake-up?)",
		    (unsigned long long)atomic_load(&run->progress),
		    (unsigned long long)(run->n + 1), (double)limit_ns / 1e9);
	pthread_join(ptid, NULL);
	others = bench_others_cpus(&o);
	/* The consumer process is ours, not another's. */
	others -= (double)child_cpu_ns / (double)(bench_now_ns() - o.t);
	if (others < 0)
		others = 0;
	if (!run->c.done || run->c.expected != run->n + 1 ||
	    run->sent != run->n + 1)
		ho_die(run, "received %llu messages of %llu sent, %llu expected",
		    (unsigned long long)run->c.expected,
		    (unsigned long long)run->sent,
		    (unsigned long long)(run->n + 1));
	record_run(run, others);
	if (opt->verbose) {
		int i = m->done_runs - 1;

		fprintf(stderr,
			"run %d %-26s p50 %8.2f us, idle %6.1f wakeups/s "
			"%7.1f ms CPU, active %.2f us CPU/msg, others %.2f "
			"CPUs\n",
			index + 1, m->label, m->p50[i] / 1e3, m->idle_wps[i],
			m->idle_cpu_ms[i], m->act_cpu_us[i], others);
	}

	pthread_barrier_destroy(&run->ready);
	if (d->style == STYLE_QUEUE)
		d->queue->close(run);
	if (run->ring) {
		r = lull_ring_destroy(run->ring);
		if (r < 0)
			ho_die(run, "lull_ring_destroy: %s", lull_strerror(r));
		free(run->ring_mem);
	}
	if (run->efd >= 0)
		close(run->efd);
	run_mem_free(run->ts, (run->n + 1) * sizeof(*run->ts), xproc);
	run_mem_free(run->lat, run->n * sizeof(*run->lat), xproc);
	free(run->push);
	run_mem_free(run, sizeof(*run), xproc);
	return others;
}

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	static struct mech ms[MAX_MECHS];
	struct options opt;
	FILE *out;
	int nm, ncpus, r, i;
	char pin_desc[64];

	if (ho_parse_options(argc, argv, &opt))
		return 2;
	ncpus = bench_allowed_cpus(cpus);
	if (opt.pin < 0)
		opt.pin = ncpus >= 2 ? PIN_CROSS : PIN_SAME;
	if (opt.pin == PIN_CROSS && ncpus < 2) {
		fprintf(stderr,
			"handoff: --pin cross needs 2 CPUs, %d allowed\n",
			ncpus);
		return 2;
	}

	nm = ho_mechs_make(&opt, ms, MAX_MECHS);
	out = opt.json ? stderr : stdout;
	if (opt.pin == PIN_NONE)
		snprintf(pin_desc, sizeof(pin_desc), "none (not pinned)");
	else
		snprintf(pin_desc, sizeof(pin_desc),
			 "%s (consumer CPU %d, producer CPU %d)",
			 ho_pin_names[opt.pin], cpus[0],
			 opt.pin == PIN_CROSS ? cpus[1] : cpus[0]);
	if (opt.headline)
		ho_headline_intro(out, ms, nm, &opt, pin_desc);
	else
		ho_print_header(out, nm, &opt, ncpus, pin_desc);

	/* Round-robin: run r of every mechanism before run r + 1 of any. */
	for (r = 0; r < opt.runs; r++) {
		for (i = 0; i < nm; i++) {
			for (int attempt = 0; !ms[i].skip; attempt++) {
				double others;

				if (opt.max_others >= 0)
					wait_quiet(opt.max_others);
				others = run_once(&ms[i], &opt, cpus, ncpus, r);

				if (opt.max_others < 0 ||
				    others <= opt.max_others || attempt == 2)
					break;
				fprintf(stderr,
					"handoff: run %d of %s repeated: other "
					"processes used %.2f CPUs\n",
					r + 1, ms[i].label, others);
				ms[i].done_runs--;
			}
			if (opt.headline && !ms[i].skip)
				ho_headline_run(out, &ms[i], &opt);
		}
	}

	if (!opt.headline)
		fprintf(out, "handoff: load average %.2f after\n",
			bench_load_average());
	if (opt.json)
		for (i = 0; i < nm; i++)
			if (ms[i].done_runs)
				ho_print_json(ms, nm, &ms[i], &opt,
					      ho_pin_names[opt.pin]);
	fflush(stdout);
	if (opt.headline)
		ho_print_headline(out, ms, nm, &opt);
	else
		ho_print_table(out, ms, nm, &opt);
	for (i = 0; i < nm; i++)
		if (ms[i].lost_wakes) {
			fprintf(stderr,
				"handoff: FAILED: %s lost %llu wake-up(s) (the "
				"safety net found records waiting)\n",
				ms[i].label,
				(unsigned long long)ms[i].lost_wakes);
			return 1;
		}
	return 0;
}
