/* SPDX-License-Identifier: MIT */
/*
 * handoff_report.c - what handoff prints: the header of every setting, the
 * table (stdout, or stderr with --json), its ratios and per-mechanism
 * details, the headline of make demo (each run as it ends, then the two
 * ratio lines), and one JSON object per mechanism (fields: perf/README.md).
 */
#include "handoff.h"

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

/* The goal for lull across processes: p50 within 1.1x of the
 * same-process figure. */
#define XPROC_GOAL 1.1

/*
 * The same-process mechanism @m (PROC_MEMFD or PROC_OTHER) is compared
 * with, in its default variant with @m's spin setting when that ran, or
 * NULL.
 */
static const struct mech *same_of(const struct mech *ms, int nm,
				  const struct mech *m)
{
	enum mech_kind same = mech_descs[m->kind].same;

	if (mech_descs[m->kind].proc == PROC_LOCAL || same >= MECH_KINDS)
		return NULL;
	for (int i = 0; i < nm; i++)
		if (ms[i].kind == same && ms[i].done_runs && !ms[i].fence &&
		    !ms[i].shared && ms[i].spin_ns == m->spin_ns)
			return &ms[i];
	return find_kind(ms, nm, same);
}

/*
 * The consumer in another process: each mechanism's p50 and p99, over the
 * same-process figure (for lull, the goal: within XPROC_GOAL), and lull's
 * across processes over the kernel's ways.
 */
static void print_xproc(FILE *f, const struct mech *ms, int nm)
{
	const struct mech *lx = find_kind(ms, nm, MECH_LULL_BLOCKING_XPROC);
	const struct mech *lu = find_kind(ms, nm, MECH_LULL_URING_FUTEX_XPROC);
	bool any = false;

	for (int i = 0; i < nm; i++) {
		const struct mech *m = &ms[i], *same = same_of(ms, nm, m);
		double p = (double)p50_of(m), lo, hi, mid, r;

		if (mech_descs[m->kind].proc == PROC_LOCAL || !m->done_runs)
			continue;
		if (!any)
			fprintf(f,
				"\nacross processes (-xproc: the consumer is a "
				"forked child, on the shared\nring's memfd or "
				"the kernel's object; -memfd: a thread of this "
				"process on a\nshared ring): pooled p50 and "
				"p99 (runs: the median of the runs' p50s)\n");
		any = true;
		mid = bench_range(m->p50, m->done_runs, &lo, &hi);
		fprintf(f, "  %-24s p50 %7.2f us p99 %8.2f us (runs %.2f)",
			m->label, p / 1e3, us(hist_quantile(m->pooled, 0.99)),
			mid / 1e3);
		if (same && p50_of(same) > 0) {
			r = p / (double)p50_of(same);
			fprintf(f, "; / %s %.2fx (runs %.2fx)", same->label, r,
				bench_ratio(mid,
					    bench_median(same->p50,
							 same->done_runs)));
			if (is_lull(m->kind))
				fprintf(f, ": goal within %.1fx %s", XPROC_GOAL,
					r <= XPROC_GOAL ? "met" : "MISSED");
		}
		if (!is_lull(m->kind) && p > 0) {
			if (lx)
				fprintf(f, "; lull-blocking-xproc / it %.2fx",
					(double)p50_of(lx) / p);
			if (lu)
				fprintf(f, "%s lull-uring-futex-xproc / it "
					   "%.2fx",
					lx ? "," : ";", (double)p50_of(lu) / p);
		}
		fputc('\n', f);
	}
}

void ho_print_table(FILE *f, const struct mech *ms, int nm,
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
			us(h->max), bench_median(m->idle_wps, m->done_runs),
			bench_median(m->idle_cpu_ms, m->done_runs), opt->idle_s);
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

	print_xproc(f, ms, nm);

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
		mid = bench_range(m->p50, m->done_runs, &lo, &hi);
		fprintf(f,
			"  %-26s p50 %.2f (%.2f..%.2f) us; push p50 %.2f p99 "
			"%.2f us; active %.2f us CPU, %.2f switches/msg; idle "
			"%.0f waits, %.0f invol",
			m->label, mid / 1e3, lo / 1e3, hi / 1e3,
			us(hist_quantile(m->push, 0.5)),
			us(hist_quantile(m->push, 0.99)),
			bench_median(m->act_cpu_us, m->done_runs),
			bench_median(m->act_wakes, m->done_runs),
			bench_median(m->idle_iters, m->done_runs),
			bench_median(m->idle_invol, m->done_runs));
		if (is_lull(m->kind))
			fprintf(f,
				", %.0f safety; wakes %.3f parks %.3f "
				"cancels %.3f /msg",
				bench_median(m->idle_safety, m->done_runs),
				bench_median(m->wakes_pm, m->done_runs),
				bench_median(m->parks_pm, m->done_runs),
				bench_median(m->cancels_pm, m->done_runs));
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
		bench_range(ms[i].others, ms[i].done_runs, &lo, &hi);
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
void ho_print_header(FILE *f, int nm, const struct options *opt,
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
		fprintf(f, " %s", ho_spin_str(opt->spin_ns[s], buf, sizeof(buf)));
	fprintf(f, "; lull loops");
	for (s = 0; s < opt->nloop_spins; s++)
		fprintf(f, " %s",
			ho_spin_str(opt->loop_spin_ns[s], buf, sizeof(buf)));
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

void ho_headline_intro(FILE *f, const struct mech *ms, int nm,
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
void ho_headline_run(FILE *f, const struct mech *m,
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
void ho_print_headline(FILE *f, const struct mech *ms, int nm,
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
			us(h->max), bench_median(m->idle_wps, m->done_runs),
			bench_median(m->idle_cpu_ms, m->done_runs));
		bench_range(m->others, m->done_runs, &lo, &hi);
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
	w_poll = bench_median(poll->idle_wps, poll->done_runs);
	w_lull = bench_median(lull->idle_wps, lull->done_runs);
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

void ho_print_json(const struct mech *ms, int nm, const struct mech *m,
		   const struct options *opt, const char *pin)
{
	const struct mech_desc *d = &mech_descs[m->kind];
	const struct mech *same = same_of(ms, nm, m);
	const struct hist *h = m->pooled;
	int n = m->done_runs;
	double lo, hi, mid;

	mid = bench_range(m->p50, n, &lo, &hi);
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
	       bench_median(m->idle_wakeups, n), bench_median(m->idle_wps, n),
	       bench_median(m->idle_cpu_ms, n), bench_median(m->idle_iters, n),
	       bench_median(m->idle_invol, n), bench_median(m->act_cpu_us, n),
	       bench_median(m->act_wakes, n),
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
		       (double)opt->safety_ns / 1e6,
		       bench_median(m->idle_safety, n),
		       bench_median(m->wakes_pm, n),
		       bench_median(m->parks_pm, n),
		       bench_median(m->cancels_pm, n),
		       (unsigned long long)m->lost_wakes);
	else
		printf("\"safety_timeout_ms\":null,\"spin_us\":null,");
	if (is_lull(m->kind))
		printf("\"park_barrier\":\"%s\",",
		       m->fence ? "fence" : "membarrier");
	if (m->kind == MECH_POLL)
		printf("\"poll_interval_us\":%g,", (double)opt->poll_ns / 1e3);
	if (m->kind == MECH_FUTEX_FLOOR || m->kind == MECH_URING_FUTEX_FLOOR ||
	    m->kind == MECH_FUTEX_XPROC_FLOOR)
		printf("\"futex\":\"%s\",",
		       m->shared ? "shared" : "private");
	printf("\"consumer_process\":\"%s\",",
	       d->proc == PROC_OTHER ? "other" : "same");
	if (is_lull(m->kind))
		printf("\"shared_ring\":%s,",
		       d->proc != PROC_LOCAL ? "true" : "false");
	if (same && p50_of(same) > 0) {
		double r = (double)p50_of(m) / (double)p50_of(same);

		printf("\"same_process\":\"%s\",\"same_process_p50_ratio\":"
		       "%.3f,",
		       same->label, r);
		if (is_lull(m->kind))
			printf("\"goal_p50_ratio\":%.1f,\"goal\":\"%s\",",
			       XPROC_GOAL, r <= XPROC_GOAL ? "met" : "missed");
	}
	print_cdf(h);
	printf("\"other_cpus\":%.3f,\"ring_full_waits\":%llu}\n",
	       bench_median(m->others, n), (unsigned long long)m->full_waits);
}
