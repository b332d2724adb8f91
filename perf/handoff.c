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
 * The floors' io_urings are set up like lull's loop (SINGLE_ISSUER and
 * DEFER_TASKRUN where the kernel has them) but wait with no timeout.  The
 * floors' futexes are private unless --shared-futex (lull's are shared: see
 * lib/park.c).  lull rings are SPSC, made by lull_ring_create().
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
 * consumer's clock and checks, the watchdog), options and report; the
 * mechanisms are in handoff_mechanisms.c and the floors in
 * handoff_floors.c, behind handoff.h.
 *
 * Build: make build/perf/handoff
 * Run:   build/perf/handoff [--mechanism all] [--pin cross|same|none] [--json]
 *        build/perf/handoff --headline
 */
#include "handoff.h"

const struct mech_desc mech_descs[MECH_KINDS] = {
	[MECH_POLL] = { "poll", STYLE_RING_POLL, true, 0, MECH_KINDS },
	[MECH_SPIN] = { "spin", STYLE_RING_POLL, false, 0, MECH_KINDS },
	[MECH_YIELD] = { "yield", STYLE_RING_POLL, false, 0, MECH_KINDS },
	[MECH_LULL_AUTO] = { "lull", STYLE_LULL_LOOP, true, LULL_BACKEND_AUTO,
			     MECH_KINDS },
	[MECH_LULL_URING_FUTEX] = { "lull-uring-futex", STYLE_LULL_LOOP, true,
				    LULL_BACKEND_URING_FUTEX,
				    MECH_URING_FUTEX_FLOOR },
	[MECH_LULL_URING_EVENTFD] = { "lull-uring-eventfd", STYLE_LULL_LOOP,
				      true, LULL_BACKEND_URING_EVENTFD,
				      MECH_URING_EVENTFD_FLOOR },
	[MECH_LULL_EPOLL] = { "lull-epoll", STYLE_LULL_LOOP, true,
			      LULL_BACKEND_EPOLL, MECH_EVENTFD_FLOOR },
	[MECH_LULL_BLOCKING] = { "lull-blocking", STYLE_LULL_WAIT, true,
				 LULL_BACKEND_BLOCKING, MECH_FUTEX_FLOOR },
	[MECH_LULL_SPIN_PARK] = { "lull-spin-park", STYLE_LULL_WAIT, true,
				  LULL_BACKEND_BLOCKING, MECH_FUTEX_FLOOR },
	[MECH_FUTEX_FLOOR] = { "futex-floor", STYLE_FLOOR, true, 0,
			       MECH_KINDS },
	[MECH_EVENTFD_FLOOR] = { "eventfd-floor", STYLE_FLOOR, true, 0,
				 MECH_KINDS },
	[MECH_URING_FUTEX_FLOOR] = { "uring-futex-floor", STYLE_FLOOR, true,
				     LULL_BACKEND_URING_FUTEX, MECH_KINDS },
	[MECH_URING_EVENTFD_FLOOR] = { "uring-eventfd-floor", STYLE_FLOOR,
				       true, LULL_BACKEND_URING_EVENTFD,
				       MECH_KINDS },
};


#ifdef LULL_PARK_SPIN_ADAPTIVE
#define SPIN_USAGE                                                           \
	"                      either list may say adaptive: lull's "        \
	"LULL_PARK_SPIN_ADAPTIVE\n"
#else
#define SPIN_USAGE ""
#endif

/* A spin setting as people read it: microseconds, or "adaptive". */
static const char *spin_str(uint64_t ns, char *buf, size_t size)
{
	if (ns == SPIN_ADAPTIVE)
		return "adaptive";
	snprintf(buf, size, "%g", (double)ns / 1e3);
	return buf;
}

static const char *const pin_names[] = { "cross", "same", "none" };

/*
 * What lull's safety net does to an idle consumer, as a sentence: nothing
 * (off, lull's default) or so many re-checks a second.
 */
static const char *safety_note(const struct options *opt, char *buf,
			       size_t len)
{
	if (!opt->safety_ns)
		return "lull arms no safety net (its default): an idle lull "
		       "consumer makes no wake-up at all";
	snprintf(buf, len,
		 "lull's safety net is on (--safety-ms %g): an idle lull "
		 "consumer wakes %.1f times a second to re-check, counted",
		 (double)opt->safety_ns / 1e6, 1e9 / (double)opt->safety_ns);
	return buf;
}

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

/* Runs on the consumer thread, which may be inside a loop callback. */
void ho_snap_take(struct consumer *c, struct snap *s)
{
	struct run *run = c->run;
	struct lull_loop_stats ls;

	getrusage(RUSAGE_THREAD, &s->ru);
	s->t = bench_now_ns();
	s->iters = c->iters;
	if (run->ring)
		lull_ring_stats(run->ring, &s->rs);
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

static uint64_t self_cpu_ns(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0 : bench_ru_cpu_ns(&ru);
}

static double safe_div(double a, double b)
{
	return b > 0 ? a / b : 0;
}

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
	m->idle_wps[i] = safe_div((double)nv, window_s);
	m->idle_cpu_ms[i] =
		safe_div((double)(bench_ru_cpu_ns(&c->idle1.ru) -
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
	uint64_t waited = 0, busy0, self0, t0, busy, self, wall;
	double others;

	for (;;) {
		busy0 = bench_machine_busy_ns();
		self0 = self_cpu_ns();
		t0 = bench_now_ns();
		usleep(250000);
		wall = bench_now_ns() - t0;
		busy = bench_machine_busy_ns() - busy0;
		self = self_cpu_ns() - self0;
		others = busy > self ? (double)(busy - self) / (double)wall : 0;
		if (others <= max)
			return;
		waited += wall;
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
 * with other processes, so both sides use a full fence instead.
 */
static int ring_make(struct run *run)
{
	ssize_t size;

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

/* One run; returns the CPUs other processes used meanwhile. */
static double run_once(struct mech *m, const struct options *opt,
		       const int *cpus, int ncpus, int index)
{
	const struct mech_desc *d = &mech_descs[m->kind];
	struct run *run;
	pthread_t ctid, ptid;
	struct timespec deadline;
	uint64_t limit_ns, busy0, self0, t0, busy, self, wall;
	double others;
	int r, pin;

	run = aligned_alloc(LINE, (sizeof(*run) + LINE - 1) &
					  ~(size_t)(LINE - 1));
	if (!run)
		ho_die(NULL, "out of memory");
	memset(run, 0, sizeof(*run));
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
	run->lat = calloc(run->n, sizeof(*run->lat));
	run->push = calloc(run->n, sizeof(*run->push));
	if (!run->lat || !run->push)
		ho_die(run, "out of memory");
	if (d->style == STYLE_FLOOR) {
		run->ts = calloc(run->n + 1, sizeof(*run->ts));
		if (!run->ts)
			ho_die(run, "out of memory");
		if (m->kind == MECH_EVENTFD_FLOOR ||
		    m->kind == MECH_URING_EVENTFD_FLOOR) {
			/* Blocking: read(2) and io_uring's read wait on it. */
			run->efd = eventfd(0, EFD_CLOEXEC);
			if (run->efd < 0)
				ho_die(run, "eventfd: %s", strerror(errno));
		}
	} else {
		r = ring_make(run);
		if (r < 0)
			ho_die(run, "lull_ring_create: %s", lull_strerror(r));
	}
	pthread_barrier_init(&run->ready, NULL, 2);

	busy0 = bench_machine_busy_ns();
	self0 = self_cpu_ns();
	t0 = bench_now_ns();
	if (pthread_create(&ctid, NULL, consumer_main, run) ||
	    pthread_create(&ptid, NULL, producer_main, run))
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
	r = pthread_timedjoin_np(ctid, NULL, &deadline);
	if (r == ETIMEDOUT)
		ho_die(run,
		    "stuck: the consumer has %llu of %llu messages after "
		    "%.0f s (a lost wake-up?)",
		    (unsigned long long)atomic_load(&run->progress),
		    (unsigned long long)(run->n + 1), (double)limit_ns / 1e9);
	pthread_join(ptid, NULL);
	wall = bench_now_ns() - t0;
	busy = bench_machine_busy_ns() - busy0;
	self = self_cpu_ns() - self0;
	others = busy > self ? (double)(busy - self) / (double)wall : 0;
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
	if (run->ring) {
		r = lull_ring_destroy(run->ring);
		if (r < 0)
			ho_die(run, "lull_ring_destroy: %s", lull_strerror(r));
		free(run->ring_mem);
	}
	if (run->efd >= 0)
		close(run->efd);
	free(run->ts);
	free(run->lat);
	free(run->push);
	free(run);
	return others;
}

/* --- output ---------------------------------------------------------- */

static double median(const double *v, int n)
{
	double med, lo, hi;

	if (n <= 0)
		return 0;
	bench_stats(v, (size_t)n, &med, &lo, &hi);
	return med;
}

static double range_of(const double *v, int n, double *lo, double *hi)
{
	double med;

	bench_stats(v, (size_t)n, &med, lo, hi);
	return med;
}

static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

static const struct mech *find_kind(const struct mech *ms, int nm,
				    enum mech_kind kind)
{
	for (int i = 0; i < nm; i++)
		if (ms[i].kind == kind && ms[i].done_runs)
			return &ms[i];
	return NULL;
}

static uint64_t p50_of(const struct mech *m)
{
	return hist_quantile(m->pooled, 0.5);
}

static void print_table(FILE *f, const struct mech *ms, int nm,
			const struct options *opt)
{
	char note[192];
	const struct mech *ff = find_kind(ms, nm, MECH_FUTEX_FLOOR);
	const struct mech *poll = find_kind(ms, nm, MECH_POLL);
	double busiest = 0;
	int i;

	fputc('\n', f);
	for (i = 0; i < nm; i++) {
		const struct mech *m = &ms[i];
		const struct hist *h = m->pooled;

		if (m->skip) {
			fprintf(f, "%-26s: skipped: %s\n", m->label, m->skip);
			continue;
		}
		if (!m->done_runs)
			continue;
		fprintf(f,
			"%-26s: mean=%8.2fus p50=%8.2fus p99=%8.2fus "
			"p99.9=%8.2fus max=%8.2fus   idle: %6.1f wakeups/s, "
			"%7.1f ms CPU per %g s\n",
			m->label, hist_mean(h) / 1e3, us(hist_quantile(h, 0.5)),
			us(hist_quantile(h, 0.99)), us(hist_quantile(h, 0.999)),
			us(h->max), median(m->idle_wps, m->done_runs),
			median(m->idle_cpu_ms, m->done_runs), opt->idle_s);
	}

	fprintf(f, "\np50 ratios (same pinning, same runs):\n");
	for (i = 0; i < nm; i++) {
		const struct mech *m = &ms[i], *own;
		double p = (double)p50_of(m);

		own = find_kind(ms, nm, mech_descs[m->kind].floor);
		if (!is_lull(m->kind) || !m->done_runs || p <= 0 ||
		    (!ff && !own && !poll))
			continue;
		fprintf(f, "  %-26s:", m->label);
		if (ff)
			fprintf(f, " %6.2fx futex-floor",
				p / (double)p50_of(ff));
		if (own && own != ff)
			fprintf(f, "%s %6.2fx %s", ff ? "," : "",
				p / (double)p50_of(own), own->label);
		if (poll)
			fprintf(f, "%s poll / it = %6.1fx",
				ff || own ? "; " : "", (double)p50_of(poll) / p);
		fputc('\n', f);
	}

	fprintf(f,
		"\nper mechanism: the p50 of each run (median, min..max); how "
		"long the producer's\npush took (the wake-up call included); "
		"consumer CPU and voluntary switches\nper data message; in the "
		"idle window: waits that did not end it, involuntary\nswitches, "
		"safety-net wakes; lull: producer wake-up calls, parks and "
		"parks\ncancelled at the re-check, per message (medians over "
		"runs)\n");
	for (i = 0; i < nm; i++) {
		const struct mech *m = &ms[i];
		double lo, hi, mid;

		if (!m->done_runs)
			continue;
		mid = range_of(m->p50, m->done_runs, &lo, &hi);
		fprintf(f,
			"  %-26s p50 %.2f (%.2f..%.2f) us; push p50 %.2f p99 "
			"%.2f us; active %.2f us CPU, %.2f switches/msg; idle "
			"%.0f waits, %.0f invol",
			m->label, mid / 1e3, lo / 1e3, hi / 1e3,
			us(hist_quantile(m->push, 0.5)),
			us(hist_quantile(m->push, 0.99)),
			median(m->act_cpu_us, m->done_runs),
			median(m->act_wakes, m->done_runs),
			median(m->idle_iters, m->done_runs),
			median(m->idle_invol, m->done_runs));
		if (is_lull(m->kind))
			fprintf(f,
				", %.0f safety; wakes %.3f parks %.3f "
				"cancels %.3f /msg",
				median(m->idle_safety, m->done_runs),
				median(m->wakes_pm, m->done_runs),
				median(m->parks_pm, m->done_runs),
				median(m->cancels_pm, m->done_runs));
		if (m->full_waits)
			fprintf(f, "; ring full %llu times",
				(unsigned long long)m->full_waits);
		if (m->clock_skew)
			fprintf(f, "; %llu receive times before push times",
				(unsigned long long)m->clock_skew);
		fputc('\n', f);
	}
	fprintf(f,
		"\nnotes: spin and yield never sleep, so their idle cost is "
		"CPU, not wake-ups.\n%s.\n",
		safety_note(opt, note, sizeof(note)));
	for (i = 0; i < nm; i++) {
		double lo, hi;

		if (!ms[i].done_runs)
			continue;
		range_of(ms[i].others, ms[i].done_runs, &lo, &hi);
		if (hi > busiest)
			busiest = hi;
	}
	if (busiest > 0.05)
		fprintf(f,
			"warning: other processes used up to %.2f CPUs during "
			"a run; these numbers\nare not clean (see "
			"--max-others).\n",
			busiest);
}

/* The full run's header: every setting that shapes the numbers. */
static void print_header(FILE *f, int nm, const struct options *opt,
			 int ncpus, const char *pin_desc)
{
	char note[192];
	char buf[32];
	int s;

	fprintf(f,
		"handoff: lull %s, %d CPU(s), pin %s\n"
		"handoff: %d mechanism(s) x %d run(s), interleaved; %llu "
		"messages per run,\n"
		"  gap uniform in [0, %g) us, then a %g s idle window; poll "
		"interval %g us\n"
		"handoff: %s\n"
		"handoff: latency = CLOCK_MONOTONIC before the push to the "
		"consumer having it;\n"
		"  percentiles pool all runs' samples (log-linear histogram, "
		"< 0.4%% error);\n"
		"  idle and per-message costs are medians over runs\n"
		"handoff: lull park barrier: %s%s%s\n"
		"handoff: floors' futexes: %s%s%s; load average %.2f\n",
		lull_version(), ncpus, pin_desc, nm, opt->runs,
		(unsigned long long)opt->messages,
		(double)opt->max_gap_ns / 1e3, opt->idle_s,
		(double)opt->poll_ns / 1e3,
		safety_note(opt, note, sizeof(note)),
		opt->barriers[0] ? "membarrier (lull_ring_create)" : "",
		opt->barriers[0] && opt->barriers[1] ? ", " : "",
		opt->barriers[1] ? "fence (lull_ring_create_in, +fence)" : "",
		opt->futexes[0] ? "private" : "",
		opt->futexes[0] && opt->futexes[1] ? ", " : "",
		opt->futexes[1] ? "shared (+shared)" : "",
		bench_load_average());
	/* The spin lists, printed apart: they are variable length. */
	fprintf(f, "handoff: spin before parking (us): lull-spin-park");
	for (s = 0; s < opt->nspins; s++)
		fprintf(f, " %s", spin_str(opt->spin_ns[s], buf, sizeof(buf)));
	fprintf(f, "; lull loops");
	for (s = 0; s < opt->nloop_spins; s++)
		fprintf(f, " %s",
			spin_str(opt->loop_spin_ns[s], buf, sizeof(buf)));
	fputc('\n', f);
	fflush(f);
}

/* --- the headline (make demo) ---------------------------------------- */

/* The first lull mechanism that can run: the headline's lull. */
static const struct mech *headline_lull(const struct mech *ms, int nm)
{
	for (int i = 0; i < nm; i++)
		if (is_lull(ms[i].kind) && !ms[i].skip)
			return &ms[i];
	return NULL;
}

/* "poll (1 ms)", "lull (uring-futex)": the headline's names. */
static const char *headline_name(const struct mech *m,
				 const struct options *opt)
{
	static char buf[2][64];
	char *b = buf[m->kind == MECH_POLL];

	if (m->kind == MECH_POLL)
		snprintf(b, sizeof(buf[0]), "poll (%g ms)",
			 (double)opt->poll_ns / 1e6);
	else if (m->kind == MECH_LULL_AUTO)
		snprintf(b, sizeof(buf[0]), "lull (%s)",
			 lull_backend_name(m->backend));
	else
		snprintf(b, sizeof(buf[0]), "%s", m->label);
	return b;
}

static void headline_intro(FILE *f, const struct mech *ms, int nm,
			   const struct options *opt, const char *pin_desc)
{
	char note[192];
	const struct mech *lull = headline_lull(ms, nm);
	double per_run = (double)opt->messages * (double)opt->max_gap_ns /
				 2e9 +
			 opt->idle_s;

	fprintf(f,
		"lull %s: waking a consumer thread, polling against parking\n"
		"  A producer thread sends %llu messages, a random 0-%g ms "
		"apart, then is quiet\n"
		"  for %g s; latency is from just before the push to the "
		"consumer having it.\n"
		"  poll: the consumer reads the ring and sleeps %g ms when it "
		"is empty.\n",
		lull_version(), (unsigned long long)opt->messages,
		(double)opt->max_gap_ns / 1e6, opt->idle_s,
		(double)opt->poll_ns / 1e6);
	if (!lull)
		;
	else if (mech_descs[lull->kind].style == STYLE_LULL_WAIT)
		fprintf(f, "  %s: the consumer parks in lull_ring_wait() "
			   "until a commit wakes it.\n",
			lull->label);
	else
		fprintf(f,
			"  lull: the consumer parks in a lull_loop until the "
			"producer's commit wakes it;\n"
			"        backend %s (%s).\n",
			lull_backend_name(lull->backend),
			lull->kind == MECH_LULL_AUTO
				? "lull's own choice on this kernel"
				: "forced by --mechanism");
	fprintf(f,
		"  %s.\n"
		"  %d run(s) of each, interleaved; pin %s;\n"
		"  about %.0f s.\n\n",
		safety_note(opt, note, sizeof(note)), opt->runs, pin_desc,
		per_run * opt->runs * nm);
	fflush(f);
}

/* Run @i of @m has ended. */
static void headline_run(FILE *f, const struct mech *m,
			 const struct options *opt)
{
	int i = m->done_runs - 1;

	fprintf(f,
		"  run %d/%d  %-20s p50 %8.1f us   idle %6.1f wakeups/s, "
		"%6.2f ms CPU\n",
		i + 1, opt->runs, headline_name(m, opt), m->p50[i] / 1e3,
		m->idle_wps[i], m->idle_cpu_ms[i]);
	fflush(f);
}

/*
 * The reference benchmark's two lines for poll and lull, then the two
 * ratio lines that end the output.
 */
static void print_headline(FILE *f, const struct mech *ms, int nm,
			   const struct options *opt)
{
	const struct mech *poll = find_kind(ms, nm, MECH_POLL);
	const struct mech *lull = headline_lull(ms, nm);
	const struct mech *both[2] = { poll, lull };
	double busiest = 0, lo, hi, p_poll, p_lull, w_poll, w_lull;
	int i;

	if (!poll || !lull || !lull->done_runs) {
		fprintf(f, "\nhandoff: no lull result to compare (%s)\n",
			lull && lull->skip ? lull->skip : "not run");
		return;
	}
	fprintf(f, "\nall runs pooled (idle: median of the runs, per %g s "
		   "window):\n", opt->idle_s);
	for (i = 0; i < 2; i++) {
		const struct mech *m = both[i];
		const struct hist *h = m->pooled;

		fprintf(f,
			"%-20s: mean=%8.2fus p50=%8.2fus p99=%8.2fus "
			"max=%8.2fus   idle: %6.1f wakeups/s, %6.2f ms CPU\n",
			headline_name(m, opt), hist_mean(h) / 1e3,
			us(hist_quantile(h, 0.5)), us(hist_quantile(h, 0.99)),
			us(h->max), median(m->idle_wps, m->done_runs),
			median(m->idle_cpu_ms, m->done_runs));
		range_of(m->others, m->done_runs, &lo, &hi);
		if (hi > busiest)
			busiest = hi;
	}
	if (busiest > 0.05)
		fprintf(f,
			"note: other processes used up to %.2f CPUs during a "
			"run, which adds noise\n",
			busiest);
	fputc('\n', f);

	p_poll = (double)p50_of(poll);
	p_lull = (double)p50_of(lull);
	w_poll = median(poll->idle_wps, poll->done_runs);
	w_lull = median(lull->idle_wps, lull->done_runs);
	fprintf(f,
		"p50 latency: %.1fx lower with lull (%.1f us) than with a %g "
		"ms poll (%.1f us)\n",
		p_lull > 0 ? p_poll / p_lull : 0, p_lull / 1e3,
		(double)opt->poll_ns / 1e6, p_poll / 1e3);
	fprintf(f, "idle wake-ups per second: poll %.1f, lull %.1f",
		w_poll, w_lull);
	if (w_lull > 0 && opt->safety_ns)
		fprintf(f, " (%.0fx fewer; lull's are its %g ms safety net)\n",
			w_poll / w_lull, (double)opt->safety_ns / 1e6);
	else if (w_lull > 0)
		fprintf(f, " (%.0fx fewer; lull arms no timer: these are "
			   "stray wake-ups)\n",
			w_poll / w_lull);
	else
		fprintf(f, " (lull parks with no timer of its own)\n");
}

/*
 * The pooled latency distribution for plots: [fraction, ns] pairs, the
 * minimum at 0, a quantile every 0.5 % with finer steps in both tails, the
 * maximum at 1.
 */
static void print_cdf(const struct hist *h)
{
	static const double tails[] = { 0.001, 0.0025, 0.996, 0.997, 0.998,
					0.999, 0.9995, 0.9999 };
	double q;
	int i;

	printf("\"cdf\":[[0,%llu]", (unsigned long long)h->min);
	for (i = 0; i < 2; i++)
		printf(",[%g,%llu]", tails[i],
		       (unsigned long long)hist_quantile(h, tails[i]));
	for (i = 1; i < 200; i++) {
		q = i / 200.0;
		printf(",[%g,%llu]", q, (unsigned long long)hist_quantile(h, q));
	}
	for (i = 2; i < (int)(sizeof(tails) / sizeof(tails[0])); i++)
		printf(",[%g,%llu]", tails[i],
		       (unsigned long long)hist_quantile(h, tails[i]));
	printf(",[1,%llu]],", (unsigned long long)h->max);
}

static void print_json(const struct mech *m, const struct options *opt,
		       const char *pin)
{
	const struct mech_desc *d = &mech_descs[m->kind];
	const struct hist *h = m->pooled;
	int n = m->done_runs;
	double lo, hi, mid;

	mid = range_of(m->p50, n, &lo, &hi);
	printf("{\"mechanism\":\"%s\",\"label\":\"%s\",\"pin\":\"%s\","
	       "\"runs\":%d,\"messages\":%llu,\"max_gap_us\":%.3f,"
	       "\"samples\":%llu,\"latency\":\"pooled\","
	       "\"mean_ns\":%.1f,\"min_ns\":%llu,\"p50_ns\":%llu,"
	       "\"p90_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
	       "\"max_ns\":%llu,\"p50_run_min_ns\":%.0f,"
	       "\"p50_run_median_ns\":%.0f,"
	       "\"p50_run_max_ns\":%.0f,\"idle\":\"median\","
	       "\"idle_seconds\":%g,\"idle_wakeups\":%.1f,"
	       "\"idle_wakeups_per_s\":%.2f,\"idle_cpu_ms\":%.3f,"
	       "\"idle_iterations\":%.0f,\"idle_involuntary\":%.0f,"
	       "\"active_cpu_us_per_msg\":%.3f,"
	       "\"active_switches_per_msg\":%.3f,\"push_p50_ns\":%llu,"
	       "\"push_p99_ns\":%llu,",
	       d->name, m->label, pin, n, (unsigned long long)opt->messages,
	       (double)opt->max_gap_ns / 1e3, (unsigned long long)h->n,
	       hist_mean(h), (unsigned long long)h->min,
	       (unsigned long long)hist_quantile(h, 0.5),
	       (unsigned long long)hist_quantile(h, 0.9),
	       (unsigned long long)hist_quantile(h, 0.99),
	       (unsigned long long)hist_quantile(h, 0.999),
	       (unsigned long long)h->max, lo, mid, hi, opt->idle_s,
	       median(m->idle_wakeups, n), median(m->idle_wps, n),
	       median(m->idle_cpu_ms, n), median(m->idle_iters, n),
	       median(m->idle_invol, n), median(m->act_cpu_us, n),
	       median(m->act_wakes, n),
	       (unsigned long long)hist_quantile(m->push, 0.5),
	       (unsigned long long)hist_quantile(m->push, 0.99));
	if (is_lull(m->kind) && m->spin_ns == SPIN_ADAPTIVE)
		printf("\"spin_us\":\"adaptive\",");
	else if (is_lull(m->kind))
		printf("\"spin_us\":%g,", (double)m->spin_ns / 1e3);
	if (is_lull(m->kind))
		printf("\"backend\":\"%s\",\"safety_timeout_ms\":%g,"
		       "\"idle_safety_wakes\":%.0f,"
		       "\"wakes_per_msg\":%.4f,\"parks_per_msg\":%.4f,"
		       "\"park_cancels_per_msg\":%.4f,\"lost_wakeups\":%llu,",
		       lull_backend_name(m->backend),
		       (double)opt->safety_ns / 1e6, median(m->idle_safety, n), median(m->wakes_pm, n),
		       median(m->parks_pm, n), median(m->cancels_pm, n),
		       (unsigned long long)m->lost_wakes);
	else
		printf("\"safety_timeout_ms\":null,\"spin_us\":null,");
	if (is_lull(m->kind))
		printf("\"park_barrier\":\"%s\",",
		       m->fence ? "fence" : "membarrier");
	if (m->kind == MECH_POLL)
		printf("\"poll_interval_us\":%g,", (double)opt->poll_ns / 1e3);
	if (m->kind == MECH_FUTEX_FLOOR || m->kind == MECH_URING_FUTEX_FLOOR)
		printf("\"futex\":\"%s\",",
		       m->shared ? "shared" : "private");
	print_cdf(h);
	printf("\"other_cpus\":%.3f,\"ring_full_waits\":%llu}\n",
	       median(m->others, n), (unsigned long long)m->full_waits);
}

/* --- options --------------------------------------------------------- */

static void usage(FILE *f)
{
	char buf[32];

	fprintf(f,
		"usage: handoff [options]\n"
		"  --mechanism NAME    repeatable, or all (default): poll, "
		"spin, yield,\n"
		"                      lull-uring-futex, lull-uring-eventfd, "
		"lull-epoll,\n"
		"                      lull-blocking, lull-spin-park, "
		"futex-floor,\n"
		"                      eventfd-floor, uring-futex-floor, "
		"uring-eventfd-floor;\n"
		"                      and lull (not in all): a loop on the "
		"backend lull picks\n"
		"  --headline          poll against lull (unless --mechanism "
		"says otherwise),\n"
		"                      each run as it ends, then a short table "
		"and two ratio\n"
		"                      lines (make demo)\n"
		"  --messages N        data messages per run (default 3000)\n"
		"  --runs R            runs of each mechanism, interleaved "
		"(default 3)\n"
		"  --max-gap-us G      gap between pushes uniform in [0, G) "
		"(default 2000)\n"
		"  --poll-interval-us  poll's sleep when empty (default 1000)\n"
		"  --idle-seconds S    the idle window (default 2)\n"
		"  --pin MODE          same, cross or none: consumer and "
		"producer on one CPU\n"
		"                      or two (default cross with >= 2 CPUs, "
		"else same)\n"
		"  --spin-us LIST      lull-spin-park's spin window, e.g. "
		"0,5,20,50 (default 50)\n"
		"  --loop-spin-us LIST the lull loops' spin_ns, likewise "
		"(default lull's: %s)\n"
		SPIN_USAGE
		"  --safety-ms MS      lull's safety-net timeout, an opt-in "
		"diagnostic (default\n"
		"                      lull's: %llu, none)\n"
		"  --floor-futex LIST  private (default), shared (as lull's), "
		"or both: the\n"
		"                      futex floors' futexes\n"
		"  --barrier LIST      membarrier (default), fence, or both: "
		"fence runs lull\n"
		"                      on rings in caller memory "
		"(lull_ring_create_in), whose\n"
		"                      park barrier is a fence on both "
		"sides, not membarrier(2)\n"
		"  --seed N            seed of the gaps (default 1)\n"
		"  --max-others F      wait before each run until other "
		"processes use at most\n"
		"                      F CPUs, and repeat (up to twice) a run "
		"during which they\n"
		"                      used more (default: never)\n"
		"  --json              one JSON object per mechanism on "
		"stdout, with a \"cdf\"\n"
		"                      array for plots; table to stderr\n"
		"  --verbose           print every run on stderr\n",
		spin_str(LULL_PARK_SPIN_DEFAULT_NS, buf, sizeof(buf)),
		(unsigned long long)(LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS /
				     1000000));
}

/* A non-negative decimal number, scaled by @scale into *v. */
static bool parse_scaled(const char *s, double scale, uint64_t *v)
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

static const char *const barrier_names[] = { "membarrier", "fence", NULL };
static const char *const futex_names[] = { "private", "shared", NULL };

/* A comma list of @names (two) into @set; 0, or -1 for anything else. */
static int parse_names(const char *arg, const char *const *names,
		       bool *set)
{
	char *list = strdup(arg), *tok, *save;
	int k;

	if (!list)
		return -1;
	set[0] = set[1] = false;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		for (k = 0; names[k] && strcmp(tok, names[k]); k++)
			;
		if (!names[k]) {
			free(list);
			return -1;
		}
		set[k] = true;
	}
	free(list);
	return set[0] || set[1] ? 0 : -1;
}

/* A comma list of microseconds into @ns (MAX_SPINS at most); 0 or -1. */
static int parse_us_list(const char *arg, uint64_t *ns, int *count)
{
	char *list = strdup(arg), *tok, *save;
	uint64_t v;
	int n = 0;

	if (!list)
		return -1;
	for (tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
#ifdef LULL_PARK_SPIN_ADAPTIVE
		if (n < MAX_SPINS && !strcmp(tok, "adaptive")) {
			ns[n++] = SPIN_ADAPTIVE;
			continue;
		}
#endif
		if (n == MAX_SPINS || !parse_scaled(tok, 1e3, &v)) {
			free(list);
			return -1;
		}
		ns[n++] = v;
	}
	free(list);
	*count = n;
	return n ? 0 : -1;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
	enum { O_MECH = 256, O_MESSAGES, O_RUNS, O_GAP, O_POLL, O_IDLE,
	       O_PIN, O_SPIN, O_LOOP_SPIN, O_SAFETY, O_FUTEX, O_SEED,
	       O_MAX_OTHERS, O_BARRIER, O_JSON, O_VERBOSE, O_HEADLINE,
	       O_HELP };
	static const struct option longopts[] = {
		{ "mechanism", required_argument, NULL, O_MECH },
		{ "messages", required_argument, NULL, O_MESSAGES },
		{ "runs", required_argument, NULL, O_RUNS },
		{ "max-gap-us", required_argument, NULL, O_GAP },
		{ "poll-interval-us", required_argument, NULL, O_POLL },
		{ "idle-seconds", required_argument, NULL, O_IDLE },
		{ "pin", required_argument, NULL, O_PIN },
		{ "spin-us", required_argument, NULL, O_SPIN },
		{ "loop-spin-us", required_argument, NULL, O_LOOP_SPIN },
		{ "safety-ms", required_argument, NULL, O_SAFETY },
		{ "floor-futex", required_argument, NULL, O_FUTEX },
		{ "barrier", required_argument, NULL, O_BARRIER },
		{ "seed", required_argument, NULL, O_SEED },
		{ "max-others", required_argument, NULL, O_MAX_OTHERS },
		{ "json", no_argument, NULL, O_JSON },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ "headline", no_argument, NULL, O_HEADLINE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	bool any = false;
	uint64_t v;
	char *end;
	int c, k;

	memset(opt, 0, sizeof(*opt));
	opt->messages = 3000;
	opt->runs = 3;
	opt->max_gap_ns = 2000000;
	opt->poll_ns = 1000000;
	opt->idle_s = 2;
	opt->pin = -1;
	opt->safety_ns = LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS;
	opt->seed = 1;
	opt->max_others = -1;
	opt->barriers[0] = true;
	opt->futexes[0] = true;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_MECH:
			any = true;
			if (!strcmp(optarg, "all")) {
				for (k = 0; k < MECH_KINDS; k++)
					opt->want[k] = k != MECH_LULL_AUTO;
				break;
			}
			for (k = 0; k < MECH_KINDS; k++)
				if (!strcmp(optarg, mech_descs[k].name))
					break;
			if (k == MECH_KINDS) {
				fprintf(stderr,
					"handoff: unknown mechanism %s\n",
					optarg);
				return -1;
			}
			opt->want[k] = true;
			break;
		case O_MESSAGES:
			if (!bench_parse_u64(optarg, &opt->messages) ||
			    !opt->messages || opt->messages >= UINT32_MAX) {
				fprintf(stderr, "handoff: bad --messages\n");
				return -1;
			}
			break;
		case O_RUNS:
			if (!bench_parse_u64(optarg, &v) || !v || v > 1000) {
				fprintf(stderr, "handoff: bad --runs\n");
				return -1;
			}
			opt->runs = (int)v;
			break;
		case O_GAP:
			if (!parse_scaled(optarg, 1e3, &opt->max_gap_ns) ||
			    opt->max_gap_ns > 10000000000ull) {
				fprintf(stderr, "handoff: bad --max-gap-us\n");
				return -1;
			}
			break;
		case O_POLL:
			if (!parse_scaled(optarg, 1e3, &opt->poll_ns) ||
			    !opt->poll_ns) {
				fprintf(stderr,
					"handoff: bad --poll-interval-us\n");
				return -1;
			}
			break;
		case O_IDLE:
			opt->idle_s = strtod(optarg, &end);
			if (*end || !(opt->idle_s > 0) || opt->idle_s > 3600) {
				fprintf(stderr,
					"handoff: bad --idle-seconds\n");
				return -1;
			}
			break;
		case O_PIN:
			for (k = 0; k < 3; k++)
				if (!strcmp(optarg, pin_names[k]))
					break;
			if (k == 3) {
				fprintf(stderr,
					"handoff: --pin takes same, cross or "
					"none\n");
				return -1;
			}
			opt->pin = k;
			break;
		case O_SPIN:
			if (parse_us_list(optarg, opt->spin_ns,
					  &opt->nspins)) {
				fprintf(stderr,
					"handoff: bad --spin-us (up to %d "
					"values)\n",
					MAX_SPINS);
				return -1;
			}
			break;
		case O_LOOP_SPIN:
			if (parse_us_list(optarg, opt->loop_spin_ns,
					  &opt->nloop_spins)) {
				fprintf(stderr,
					"handoff: bad --loop-spin-us (up to %d "
					"values)\n",
					MAX_SPINS);
				return -1;
			}
			break;
		case O_SAFETY:
			if (!parse_scaled(optarg, 1e6, &opt->safety_ns)) {
				fprintf(stderr, "handoff: bad --safety-ms\n");
				return -1;
			}
			break;
		case O_FUTEX:
			if (parse_names(optarg, futex_names, opt->futexes)) {
				fprintf(stderr,
					"handoff: --floor-futex takes private, "
					"shared or both\n");
				return -1;
			}
			break;
		case O_BARRIER:
			if (parse_names(optarg, barrier_names,
					opt->barriers)) {
				fprintf(stderr,
					"handoff: --barrier takes membarrier, "
					"fence or both\n");
				return -1;
			}
			break;
		case O_SEED:
			if (!bench_parse_u64(optarg, &opt->seed)) {
				fprintf(stderr, "handoff: bad --seed\n");
				return -1;
			}
			break;
		case O_MAX_OTHERS:
			opt->max_others = strtod(optarg, &end);
			if (*end || !(opt->max_others >= 0)) {
				fprintf(stderr, "handoff: bad --max-others\n");
				return -1;
			}
			break;
		case O_JSON:
			opt->json = true;
			break;
		case O_VERBOSE:
			opt->verbose = true;
			break;
		case O_HEADLINE:
			opt->headline = true;
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
	if (!any && opt->headline)
		opt->want[MECH_POLL] = opt->want[MECH_LULL_AUTO] = true;
	else if (!any)
		for (k = 0; k < MECH_KINDS; k++)
			opt->want[k] = k != MECH_LULL_AUTO;
	if (opt->headline) {
		for (k = 0; k < MECH_KINDS && !(opt->want[k] && is_lull(k));
		     k++)
			;
		if (!opt->want[MECH_POLL] || k == MECH_KINDS) {
			fprintf(stderr, "handoff: --headline compares poll "
					"with a lull mechanism\n");
			return -1;
		}
	}
	if (!opt->nspins)
		opt->spin_ns[opt->nspins++] = 50000;
	if (!opt->nloop_spins)
		opt->loop_spin_ns[opt->nloop_spins++] =
			LULL_PARK_SPIN_DEFAULT_NS;
	return 0;
}

/*
 * Whether @m can run in this process; sets m->skip when not, and for lull
 * mechanisms m->backend: for "lull", the one lull_loop_create() will pick.
 */
static void check_support(struct mech *m)
{
	int backend = mech_descs[m->kind].backend, r;

	if (m->kind == MECH_LULL_AUTO) {
		r = lull_backend_probe();
		if (r < 0)
			m->skip = "LULL_BACKEND names no backend usable here";
		else if (r == LULL_BACKEND_BLOCKING)
			m->skip = "LULL_BACKEND=blocking is not a loop backend";
		else
			m->backend = r;
		return;
	}
	m->backend = backend;
	if (!backend || backend == LULL_BACKEND_BLOCKING)
		return;
	r = lull_backend_supported(backend);
	if (r < 0)
		m->skip = r == -EOPNOTSUPP
				  ? "io_uring has no FUTEX_WAIT (Linux < 6.7)"
				  : r == -EPERM ? "io_uring is not permitted"
						: "io_uring is not available";
}

static int mech_alloc(struct mech *m, int runs)
{
	double **arrays[] = {
		&m->p50,         &m->idle_wakeups, &m->idle_wps,
		&m->idle_cpu_ms, &m->idle_iters,   &m->idle_invol,
		&m->idle_safety, &m->act_cpu_us,   &m->act_wakes,
		&m->wakes_pm,    &m->parks_pm,     &m->cancels_pm,
		&m->others,
	};

	m->pooled = hist_new();
	m->push = hist_new();
	if (!m->pooled || !m->push)
		return -1;
	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		*arrays[i] = calloc((size_t)runs, sizeof(double));
		if (!*arrays[i])
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static int cpus[CPU_SETSIZE];
	static struct mech ms[MAX_MECHS];
	struct options opt;
	FILE *out;
	int nm = 0, ncpus, k, s, r, i;
	char pin_desc[64], buf[32];

	if (parse_options(argc, argv, &opt))
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

	/*
	 * One instance per mechanism and variant: spin window (lull-spin-park,
	 * loops), park barrier (lull), futex kind (futex floors).  Labels
	 * carry ":N us" when there are several windows, "+fence" and
	 * "+shared" for the variants that are not the default.
	 */
	for (k = 0; k < MECH_KINDS; k++) {
		const uint64_t *spins = NULL;
		const bool *variants = NULL;
		int nspin = 1;

		if (!opt.want[k])
			continue;
		if (k == MECH_LULL_SPIN_PARK) {
			spins = opt.spin_ns;
			nspin = opt.nspins;
		} else if (mech_descs[k].style == STYLE_LULL_LOOP) {
			spins = opt.loop_spin_ns;
			nspin = opt.nloop_spins;
		}
		if (is_lull((enum mech_kind)k))
			variants = opt.barriers;
		else if (k == MECH_FUTEX_FLOOR || k == MECH_URING_FUTEX_FLOOR)
			variants = opt.futexes;
		for (s = 0; s < nspin * 2; s++) {
			bool alt = s % 2;
			struct mech *m;
			int len;

			if (variants ? !variants[alt] : alt)
				continue;
			if (nm == MAX_MECHS)
				ho_die(NULL, "too many mechanisms");
			m = &ms[nm++];
			m->kind = (enum mech_kind)k;
			m->spin_ns = spins ? spins[s / 2]
					   : LULL_PARK_SPIN_DEFAULT_NS;
			m->fence = alt && is_lull(m->kind);
			m->shared = alt && !is_lull(m->kind);
			len = snprintf(m->label, sizeof(m->label), "%s",
				       mech_descs[k].name);
			if (nspin > 1)
				len += snprintf(m->label + len,
						sizeof(m->label) - (size_t)len,
						":%s%s",
						spin_str(m->spin_ns, buf,
							 sizeof(buf)),
						m->spin_ns == SPIN_ADAPTIVE
							? ""
							: "us");
			if (alt)
				snprintf(m->label + len,
					 sizeof(m->label) - (size_t)len, "%s",
					 m->fence ? "+fence" : "+shared");
			check_support(m);
			if (mech_alloc(m, opt.runs))
				ho_die(NULL, "out of memory");
		}
	}

	out = opt.json ? stderr : stdout;
	if (opt.pin == PIN_NONE)
		snprintf(pin_desc, sizeof(pin_desc), "none (not pinned)");
	else
		snprintf(pin_desc, sizeof(pin_desc),
			 "%s (consumer CPU %d, producer CPU %d)",
			 pin_names[opt.pin], cpus[0],
			 opt.pin == PIN_CROSS ? cpus[1] : cpus[0]);
	if (opt.headline)
		headline_intro(out, ms, nm, &opt, pin_desc);
	else
		print_header(out, nm, &opt, ncpus, pin_desc);

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
				headline_run(out, &ms[i], &opt);
		}
	}

	if (!opt.headline)
		fprintf(out, "handoff: load average %.2f after\n",
			bench_load_average());
	if (opt.json)
		for (i = 0; i < nm; i++)
			if (ms[i].done_runs)
				print_json(&ms[i], &opt, pin_names[opt.pin]);
	fflush(stdout);
	if (opt.headline)
		print_headline(out, ms, nm, &opt);
	else
		print_table(out, ms, nm, &opt);
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
