/* SPDX-License-Identifier: MIT */
/*
 * handoff_options.c - handoff's command line (--help, the options and
 * their checks), and the mechanisms' instances it asks for: one per
 * mechanism and variant (spin window, park barrier, futex kind), each
 * checked for support on this machine.
 */
#include "handoff.h"

#ifdef LULL_PARK_SPIN_ADAPTIVE
#define SPIN_USAGE                                                           \
	"                      either list may say adaptive: lull's "        \
	"LULL_PARK_SPIN_ADAPTIVE\n"
#else
#define SPIN_USAGE ""
#endif

/* A spin setting as people read it: microseconds, or "adaptive". */
const char *ho_spin_str(uint64_t ns, char *buf, size_t size)
{
	if (ns == SPIN_ADAPTIVE)
		return "adaptive";
	snprintf(buf, size, "%g", (double)ns / 1e3);
	return buf;
}

const char *const ho_pin_names[] = { "cross", "same", "none" };


/*
 * The mechanisms of "all", wrapped, each not built here marked so
 * (perf/check-peers.sh reads this list).
 */
static void usage_mechanisms(FILE *f)
{
	int k, col = 22;

	fprintf(f, "  --mechanism NAME    repeatable, or all (default):");
	col = 50;
	for (k = 0; k < MECH_KINDS; k++) {
		const struct mech_desc *d = &mech_descs[k];
		bool unbuilt = d->style == STYLE_QUEUE && !d->queue;
		int len = (int)strlen(d->name) + (unbuilt ? 12 : 0) + 2;

		if (k == MECH_LULL_AUTO)
			continue;
		if (col + len > 78) {
			fprintf(f, "\n%22s", "");
			col = 22;
		} else {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%s%s%s", d->name, unbuilt ? " (not built)" : "",
			k == MECH_KINDS - 1 ? ";" : ",");
		col += len - 1;
	}
	fprintf(f, "\n                      and lull (not in all): a loop on "
		   "the backend lull picks;\n"
		   "                      xproc: the mechanisms across processes "
		   "(-memfd, -xproc)\n"
		   "                      and the same-process ones they are "
		   "compared with\n");
}

static void usage(FILE *f)
{
	char buf[32];

	fprintf(f, "usage: handoff [options]\n");
	usage_mechanisms(f);
	fprintf(f,
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
		ho_spin_str(LULL_PARK_SPIN_DEFAULT_NS, buf, sizeof(buf)),
		(unsigned long long)(LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS /
				     1000000));
}

static const char *const barrier_names[] = { "membarrier", "fence", NULL };
static const char *const futex_names[] = { "private", "shared", NULL };

/*
 * A comma list of microseconds (or, where lull has it, "adaptive") into
 * @ns, MAX_SPINS at most; how many, or -1.
 */
static int spin_list(const char *arg, uint64_t *ns)
{
#ifdef LULL_PARK_SPIN_ADAPTIVE
	return bench_parse_list(arg, 1e3, ns, MAX_SPINS, "adaptive",
				SPIN_ADAPTIVE);
#else
	return bench_parse_list(arg, 1e3, ns, MAX_SPINS, NULL, 0);
#endif
}

/*
 * --mechanism xproc: every mechanism across processes, the same-process
 * ones they are compared with, and the floors of both.
 */
static void xproc_set(bool *want)
{
	for (int k = 0; k < MECH_KINDS; k++) {
		const struct mech_desc *d = &mech_descs[k];

		if (d->proc == PROC_LOCAL)
			continue;
		want[k] = true;
		if (d->same < MECH_KINDS)
			want[d->same] = true;
		if (d->floor < MECH_KINDS)
			want[d->floor] = true;
	}
}

int ho_parse_options(int argc, char **argv, struct options *opt)
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
			if (!strcmp(optarg, "xproc")) {
				xproc_set(opt->want);
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
			if (!bench_parse_scaled(optarg, 1e3,
						&opt->max_gap_ns) ||
			    opt->max_gap_ns > 10000000000ull) {
				fprintf(stderr, "handoff: bad --max-gap-us\n");
				return -1;
			}
			break;
		case O_POLL:
			if (!bench_parse_scaled(optarg, 1e3, &opt->poll_ns) ||
			    !opt->poll_ns) {
				fprintf(stderr,
					"handoff: bad --poll-interval-us\n");
				return -1;
			}
			break;
		case O_IDLE:
			if (!bench_parse_double(optarg, &opt->idle_s) ||
			    !(opt->idle_s > 0) || opt->idle_s > 3600) {
				fprintf(stderr,
					"handoff: bad --idle-seconds\n");
				return -1;
			}
			break;
		case O_PIN:
			for (k = 0; k < 3; k++)
				if (!strcmp(optarg, ho_pin_names[k]))
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
			opt->nspins = spin_list(optarg, opt->spin_ns);
			if (opt->nspins < 0) {
				fprintf(stderr,
					"handoff: bad --spin-us (up to %d "
					"values)\n",
					MAX_SPINS);
				return -1;
			}
			break;
		case O_LOOP_SPIN:
			opt->nloop_spins = spin_list(optarg, opt->loop_spin_ns);
			if (opt->nloop_spins < 0) {
				fprintf(stderr,
					"handoff: bad --loop-spin-us (up to %d "
					"values)\n",
					MAX_SPINS);
				return -1;
			}
			break;
		case O_SAFETY:
			if (!bench_parse_scaled(optarg, 1e6, &opt->safety_ns)) {
				fprintf(stderr, "handoff: bad --safety-ms\n");
				return -1;
			}
			break;
		case O_FUTEX:
			if (bench_parse_names(optarg, futex_names,
					      opt->futexes)) {
				fprintf(stderr,
					"handoff: --floor-futex takes private, "
					"shared or both\n");
				return -1;
			}
			break;
		case O_BARRIER:
			if (bench_parse_names(optarg, barrier_names,
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
			if (!bench_parse_double(optarg, &opt->max_others) ||
			    !(opt->max_others >= 0)) {
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
	const struct mech_desc *d = &mech_descs[m->kind];
	int backend = d->backend, r;

	if (d->style == STYLE_QUEUE) {
		static char unbuilt[MECH_KINDS][80];

		if (!d->queue) {
			snprintf(unbuilt[m->kind], sizeof(unbuilt[0]),
				 "not built (%s was missing)", d->package);
			m->skip = unbuilt[m->kind];
		} else if (d->queue->unsupported) {
			m->skip = d->queue->unsupported();
		}
		return;
	}

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

/*
 * The instances to run, from the options, into @ms (room for @max): one
 * per mechanism and variant, each checked for support here and given room
 * for every run's results.  Returns how many.
 */
int ho_mechs_make(const struct options *opt, struct mech *ms, int max)
{
	char buf[32];
	int nm = 0, k, s;

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

		if (!opt->want[k])
			continue;
		if (k == MECH_LULL_SPIN_PARK) {
			spins = opt->spin_ns;
			nspin = opt->nspins;
		} else if (mech_descs[k].style == STYLE_LULL_LOOP) {
			spins = opt->loop_spin_ns;
			nspin = opt->nloop_spins;
		}
		/* A shared ring's barrier is a fence, always: no variant. */
		if (mech_descs[k].proc != PROC_LOCAL)
			variants = NULL;
		else if (is_lull((enum mech_kind)k))
			variants = opt->barriers;
		else if (k == MECH_FUTEX_FLOOR || k == MECH_URING_FUTEX_FLOOR)
			variants = opt->futexes;
		for (s = 0; s < nspin * 2; s++) {
			bool alt = s % 2;
			struct mech *m;
			int len;

			if (variants ? !variants[alt] : alt)
				continue;
			if (nm == max)
				ho_die(NULL, "too many mechanisms");
			m = &ms[nm++];
			m->kind = (enum mech_kind)k;
			m->spin_ns = spins ? spins[s / 2]
					   : LULL_PARK_SPIN_DEFAULT_NS;
			m->fence = (alt || mech_descs[k].proc != PROC_LOCAL) &&
				   is_lull(m->kind);
			m->shared = (alt && !is_lull(m->kind)) ||
				    k == MECH_FUTEX_XPROC_FLOOR;
			len = snprintf(m->label, sizeof(m->label), "%s",
				       mech_descs[k].name);
			if (nspin > 1)
				len += snprintf(m->label + len,
						sizeof(m->label) - (size_t)len,
						":%s%s",
						ho_spin_str(m->spin_ns, buf,
							 sizeof(buf)),
						m->spin_ns == SPIN_ADAPTIVE
							? ""
							: "us");
			if (alt)
				snprintf(m->label + len,
					 sizeof(m->label) - (size_t)len, "%s",
					 m->fence ? "+fence" : "+shared");
			check_support(m);
			if (mech_alloc(m, opt->runs))
				ho_die(NULL, "out of memory");
		}
	}
	return nm;
}
