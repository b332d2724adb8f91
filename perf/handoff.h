/* SPDX-License-Identifier: MIT */
/*
 * handoff.h - what the files of the handoff benchmark share: the
 * mechanisms' list, the options, one run's state, and the calls between
 * the measurement loop (handoff.c: runs, the producer, the consumer's
 * clock and checks, the watchdog), its command line (handoff_options.c),
 * its report (handoff_report.c) and the mechanisms (handoff_mechanisms.c:
 * poll, spin, yield and lull's ways of waiting; handoff_floors.c: the bare
 * kernel wake-ups underneath; handoff_msg_ring.c, handoff_uv.c and
 * handoff_moodycamel.cpp: other libraries' queues, behind struct ho_queue;
 * handoff_xproc.c: the consumer in another process, and the socket and
 * pipe between processes).
 *
 * The C++ mechanism includes this header too (g++ -std=c++23, whose
 * <stdatomic.h> maps _Atomic(T) to std::atomic<T>): the atomic members are
 * spelt _Atomic(T), and everything declared here has C linkage.
 */
#ifndef LULL_PERF_HANDOFF_H
#define LULL_PERF_HANDOFF_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>
#include <liburing.h>

#include <lull.h>

#include "bench_common.h"
#include "hist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define LINE 128
#define MSG_TYPE 1
#define RING_CAPACITY ((size_t)1 << 16)
#define READ_BATCH 64u
#define MAX_SPINS 16
#define MAX_MECHS (MECH_KINDS * 2 * MAX_SPINS)
#define STUCK_SLACK_NS (30ull * 1000000000ull)

/* IORING_OP_FUTEX_WAIT (Linux 6.7) and its flags; liburing 2.3 lacks them. */
#define OP_FUTEX_WAIT 51
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE FUTEX_PRIVATE_FLAG
#endif

enum mech_kind {
	MECH_POLL,
	MECH_SPIN,
	MECH_YIELD,
	MECH_LULL_AUTO,
	MECH_LULL_URING_FUTEX,
	MECH_LULL_URING_EVENTFD,
	MECH_LULL_EPOLL,
	MECH_LULL_BLOCKING,
	MECH_LULL_SPIN_PARK,
	MECH_FUTEX_FLOOR,
	MECH_EVENTFD_FLOOR,
	MECH_URING_FUTEX_FLOOR,
	MECH_URING_EVENTFD_FLOOR,
	MECH_EPOLL_FLOOR,
	MECH_MOODYCAMEL_BLOCKING,
	MECH_UV_ASYNC,
	MECH_MSG_RING,
	/* Rings shared between processes (handoff_xproc.c). */
	MECH_LULL_BLOCKING_MEMFD,
	MECH_LULL_BLOCKING_XPROC,
	MECH_LULL_URING_FUTEX_XPROC,
	MECH_LULL_URING_EVENTFD_XPROC,
	MECH_LULL_EPOLL_XPROC,
	MECH_FUTEX_XPROC_FLOOR,
	MECH_UNIX_XPROC,
	MECH_PIPE_XPROC,
	MECH_KINDS
};

/* Where the consumer is, and what ring it reads. */
enum proc_kind {
	PROC_LOCAL,  /* a thread of this process; a ring of this process */
	PROC_MEMFD,  /* a thread of this process on a shared ring (memfd) */
	PROC_OTHER,  /* a forked child: another process, shared memory */
};

/* How the consumer waits. */
enum style {
	STYLE_RING_POLL, /* poll, spin, yield: lull_ring_read and back off */
	STYLE_LULL_LOOP, /* lull_loop_run */
	STYLE_LULL_WAIT, /* lull_ring_wait + lull_ring_read */
	STYLE_FLOOR,     /* no ring: a count, a futex or an eventfd */
	STYLE_QUEUE,     /* another library's queue: its struct ho_queue */
};

struct run;
struct consumer;
struct msg;

/*
 * A mechanism built on another library's queue.  open and close run on
 * main's thread, before the run's threads start and after both have been
 * joined; consume on the consumer's (it waits on run->ready and takes the
 * start snapshot when it is ready for the first message, then hands each
 * message to ho_take() until c->done, counting its waits in c->iters);
 * push on the producer's, once per message.  Every failure is ho_die().
 */
struct ho_queue {
	/* Why it cannot run on this machine, or NULL. */
	const char *(*unsupported)(void);
	void (*open)(struct run *run);
	void (*consume)(struct consumer *c);
	void (*push)(struct run *run, const struct msg *m);
	void (*close)(struct run *run);
};

struct mech_desc {
	const char *name;
	enum style style;
	bool sleeps;      /* blocks in the kernel when there is nothing */
	int backend;      /* loop backend, or the one a floor needs; 0 none */
	enum mech_kind floor; /* the bare mechanism it is built on */
	/* STYLE_QUEUE: its hooks (NULL: not built), and what it needs. */
	const struct ho_queue *queue;
	const char *package;
	/* Where the consumer runs; the same-process mechanism a
	 * PROC_MEMFD or PROC_OTHER lull mechanism is compared with. */
	enum proc_kind proc;
	enum mech_kind same;
};

extern const struct mech_desc mech_descs[MECH_KINDS];

static inline bool is_lull(enum mech_kind k)
{
	return mech_descs[k].style == STYLE_LULL_LOOP ||
	       mech_descs[k].style == STYLE_LULL_WAIT;
}

/* The consumer is another process: the run lives in shared memory. */
static inline bool is_xproc(enum mech_kind k)
{
	return mech_descs[k].proc == PROC_OTHER;
}

/*
 * lull's adaptive spin (spin only while records stream) is a spin_ns value
 * of its own; without it in lull.h, no setting here can be that value.
 */
#ifdef LULL_PARK_SPIN_ADAPTIVE
#define SPIN_ADAPTIVE LULL_PARK_SPIN_ADAPTIVE
#else
#define SPIN_ADAPTIVE UINT64_MAX
#endif

enum pin_mode { PIN_CROSS, PIN_SAME, PIN_NONE };

struct options {
	bool want[MECH_KINDS];
	uint64_t messages;
	int runs;
	uint64_t max_gap_ns;
	uint64_t poll_ns;
	double idle_s;
	int pin; /* enum pin_mode, or -1: cross when >= 2 CPUs */
	uint64_t spin_ns[MAX_SPINS];      /* lull-spin-park, one per value */
	int nspins;
	uint64_t loop_spin_ns[MAX_SPINS]; /* lull loops, one per value */
	int nloop_spins;
	uint64_t safety_ns;
	bool barriers[2];  /* lull park barriers to run: membarrier, fence */
	bool futexes[2];   /* floors' futexes to run: private, shared */
	uint64_t seed;
	double max_others; /* repeat runs busier than this; < 0: never */
	bool json;
	bool verbose;
	bool headline;     /* poll against lull, the demo's summary */
};


/* One mechanism (one spin window, for lull-spin-park) and its results. */
struct mech {
	enum mech_kind kind;
	char label[40];
	uint64_t spin_ns; /* lull-spin-park: its window; loops: the loop's */
	bool fence;       /* lull: ring in caller memory, fence barrier */
	bool shared;      /* futex floors: a shared futex, like lull's */
	int backend;      /* lull: the backend it parks with */
	const char *skip; /* why it cannot run here */
	struct hist *pooled;
	struct hist *push;  /* producer: how long each push took */
	int done_runs;

	/* Per run. */
	double *p50;           /* ns */
	double *idle_wakeups;  /* voluntary switches, less the ending wake */
	double *idle_wps;      /* the same per second */
	double *idle_cpu_ms;   /* scaled to --idle-seconds */
	double *idle_iters;    /* waits in the window, less the ending one */
	double *idle_invol;    /* involuntary switches in the window */
	double *idle_safety;   /* lull: parks the safety net ended */
	double *act_cpu_us;    /* consumer CPU per data message */
	double *act_wakes;     /* consumer voluntary switches per message */
	/* lull counters per message, whole runs (data + the window) */
	double *wakes_pm;      /* producer wake-up system calls */
	double *parks_pm;      /* consumer sleeps */
	double *cancels_pm;    /* parks dropped at the re-check */
	double *others;        /* CPUs other processes used during the run */

	uint64_t lost_wakes;   /* lull safety_timeouts: must stay 0 */
	uint64_t full_waits;   /* producer retries on a full ring */
	uint64_t clock_skew;   /* receive time before push time */
};

struct msg {
	uint64_t seq;
	uint64_t t_push;
};

/* What the consumer notes at the start, and at both ends of the window. */
struct snap {
	uint64_t t;
	struct rusage ru;
	uint64_t iters;
	uint64_t loop_iters;
	struct lull_ring_stats rs;
};

struct consumer {
	struct run *run;
	/* The consumer's handle: run->ring, or (PROC_OTHER) the child's
	 * own, opened from the ring's memfd. */
	struct lull_ring *ring;
	uint64_t expected; /* the next sequence number */
	uint64_t iters;    /* times it waited (slept, yielded, paused) */
	uint64_t clock_skew; /* receive time before push time */
	bool done;
	struct lull_loop *loop;
	struct snap start, idle0, idle1;
};

/*
 * The shared state of one run; sides on lines of their own.  When the
 * consumer is another process (PROC_OTHER) the run, lat[] and ts[] are in
 * a MAP_SHARED mapping made before the fork, and ready is process-shared.
 */
struct run {
	struct mech *mech;
	const struct options *opt;
	int index;
	int consumer_cpu, producer_cpu;
	uint64_t n;     /* data messages; message n ends the idle window */
	uint64_t *lat;  /* latency of each data message, by the consumer */
	uint64_t *push; /* duration of each push (wake-up included) */
	uint64_t *ts;   /* floors: push time of each message */
	struct lull_ring *ring;
	void *ring_mem; /* --fence-barrier: the region, ours to free */
	int efd;
	int futex_private; /* FUTEX_PRIVATE_FLAG or 0 */
	pthread_barrier_t ready;

	void *queue;    /* STYLE_QUEUE: the mechanism's own */

	/* Floors: messages published so far; the futex word. */
	alignas(LINE) _Atomic(uint32_t) word;

	/* Consumer progress, for the watchdog's message. */
	alignas(LINE) _Atomic(uint64_t) progress;

	alignas(LINE) struct consumer c;

	alignas(LINE) uint64_t sent;
	uint64_t full_waits;
};


/* handoff.c: the measurement loop's side. */
__attribute__((format(printf, 2, 3), noreturn)) void
ho_die(const struct run *run, const char *fmt, ...);
void ho_snap_take(struct consumer *c, struct snap *s);

static inline long futex_op(_Atomic(uint32_t) *word, int op, uint32_t val)
{
	return syscall(SYS_futex, word, op, val, NULL, NULL, 0);
}

/* The consumer has message @seq, pushed at @t_push. */
static inline void ho_take(struct consumer *c, uint64_t seq, uint64_t t_push)
{
	uint64_t now = bench_now_ns();
	struct run *run = c->run;

	if (unlikely(seq != c->expected))
		ho_die(run,
		    "message %llu arrived when %llu was due (lost, repeated "
		    "or reordered)",
		    (unsigned long long)seq, (unsigned long long)c->expected);
	c->expected = seq + 1;
	atomic_store_explicit(&run->progress, c->expected,
			      memory_order_relaxed);
	if (likely(seq < run->n)) {
		if (unlikely(now < t_push)) {
			c->clock_skew++;
			now = t_push;
		}
		run->lat[seq] = now - t_push;
		/* The last data message: the idle window starts here. */
		if (unlikely(seq == run->n - 1))
			ho_snap_take(c, &c->idle0);
		return;
	}
	ho_snap_take(c, &c->idle1);
	c->done = true;
}

/* handoff_options.c: the command line and the instances it asks for. */
extern const char *const ho_pin_names[]; /* by enum pin_mode */
/* A spin setting as people read it: microseconds, or "adaptive". */
const char *ho_spin_str(uint64_t ns, char *buf, size_t size);
/* 0, or -1 with the reason printed; --help prints and exits. */
int ho_parse_options(int argc, char **argv, struct options *opt);
int ho_mechs_make(const struct options *opt, struct mech *ms, int max);

/*
 * handoff_report.c: the header or the headline's introduction before the
 * runs, each run as it ends (headline), then the JSON objects and the
 * table or the headline's summary.
 */
void ho_print_header(FILE *f, int nm, const struct options *opt, int ncpus,
		     const char *pin_desc);
void ho_headline_intro(FILE *f, const struct mech *ms, int nm,
		       const struct options *opt, const char *pin_desc);
void ho_headline_run(FILE *f, const struct mech *m,
		     const struct options *opt);
void ho_print_json(const struct mech *ms, int nm, const struct mech *m,
		   const struct options *opt, const char *pin);
void ho_print_table(FILE *f, const struct mech *ms, int nm,
		    const struct options *opt);
void ho_print_headline(FILE *f, const struct mech *ms, int nm,
		       const struct options *opt);

/*
 * handoff_mechanisms.c: mech_descs[], and the consumers that read a lull
 * ring.
 */
void ho_consume_ring_poll(struct consumer *c);
void ho_consume_lull_wait(struct consumer *c);
void ho_consume_lull_loop(struct consumer *c);

/* handoff_floors.c: no ring, a count and a bare wake-up. */
void ho_consume_floor(struct consumer *c);
void ho_floor_wake(struct run *run);

/*
 * Other libraries' queues: handoff_msg_ring.c (io_uring, always built),
 * handoff_uv.c (libuv) and handoff_moodycamel.cpp (moodycamel), the last
 * two where the Makefile finds their packages (HAVE_UV, HAVE_MOODYCAMEL).
 */
extern const struct ho_queue ho_msg_ring;
extern const struct ho_queue ho_uv_async;
extern const struct ho_queue ho_moodycamel_blocking;

/*
 * handoff_xproc.c: the kernel's ways between processes, unix-xproc (a
 * SOCK_SEQPACKET socketpair) and pipe-xproc, and the consumer's process:
 * the fork, the child's handle on the shared ring, and the wait for it.
 */
extern const struct ho_queue ho_unix_xproc;
extern const struct ho_queue ho_pipe_xproc;
pid_t ho_consumer_fork(struct run *run, void *(*consumer)(void *));
/* 0 once the child exited well (its CPU time in *cpu_ns), ETIMEDOUT
 * (killed: it was stuck); any failure of the child is ho_die(). */
int ho_consumer_wait(struct run *run, pid_t pid, uint64_t limit_ns,
		     uint64_t *cpu_ns);

#ifdef __cplusplus
}
#endif

#endif /* LULL_PERF_HANDOFF_H */
