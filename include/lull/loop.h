/* SPDX-License-Identifier: MIT */
/*
 * lull/loop.h - the runtime: one thread, any number of rings, io_uring SQEs.
 *
 * A loop drains the rings attached to it into their handlers, runs the
 * completion callbacks of SQEs the caller prepares (accept, recv, send,
 * read, timeouts, ...), fires timers, and turns SIGTERM/SIGINT into a
 * callback.  When nothing is ready it parks: every attached ring is told
 * (park word, one barrier for all, one re-check of all), then one
 * io_uring_enter() (or epoll_wait()) sleeps until a producer, an I/O
 * completion, a timer, a signal or lull_loop_stop() wakes it; lull arms no
 * timeout of its own (the safety net, safety_timeout_ns, is an opt-in
 * diagnostic and off by default).  So an idle loop makes no system call,
 * no wake-up and burns no CPU for as long as nothing arrives; a producer's
 * commit to a ring whose loop is awake costs one load and no system call.
 *
 * Backends (see lull/park.h): URING_FUTEX (each ring's park word has a
 * futex wait in flight; Linux 6.7+), URING_EVENTFD (producers write the
 * loop's eventfd), and EPOLL for where io_uring is disabled: the same API
 * over epoll and an eventfd, with the SQE opcodes a server needs emulated
 * (NOP, READ, WRITE, RECV, SEND, ACCEPT, POLL_ADD, TIMEOUT, ASYNC_CANCEL,
 * CLOSE; any other completes with -EOPNOTSUPP).
 *
 * Threads: lull_loop_stop() may be called from any thread and from a
 * signal handler (it is async-signal-safe).  Every other call belongs to
 * the loop's thread: the one that calls lull_loop_run(), or any single
 * thread before the first run.  On io_uring (Linux 6.1+) the first run
 * binds the loop to its thread: lull_loop_run() from another thread later
 * fails with -EEXIST when it first parks (before that it may already have
 * run handlers: run a loop on one thread only).  Callbacks run on the
 * loop's thread and may call any lull_loop_* function.
 *
 * The io_uring is created with IORING_SETUP_SINGLE_ISSUER and
 * IORING_SETUP_DEFER_TASKRUN where the kernel has them (plain otherwise),
 * and sleeps with IORING_ENTER_NO_IOWAIT where the kernel has it (6.15);
 * on older kernels a parked loop shows as iowait in top(1) although it
 * uses no CPU.
 */
#ifndef LULL_LOOP_H
#define LULL_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include <lull/park.h>
#include <lull/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

struct lull_loop;
struct lull_loop_timer;
struct io_uring_sqe;

struct lull_loop_config {
	enum lull_backend backend; /* AUTO: lull_backend_probe(); BLOCKING
				      is not a loop backend (-EINVAL) */
	unsigned entries;          /* SQ entries; 0: 256 (io_uring
				      backends; epoll has no queue) */
	uint64_t spin_ns;          /* poll the rings this long before parking;
				      0 (or LULL_PARK_SPIN_ADAPTIVE, which
				      the loop does not do): park at once */
	uint64_t safety_timeout_ns; /* opt-in diagnostic: a park lasts at
				       most this long (counted in
				       safety_timeouts); 0: none, unless the
				       environment sets LULL_SAFETY_NET_MS
				       (lull/park.h); INT64_MAX or more:
				       none */
	/*
	 * After a pass that handled records, sleep up to this long before
	 * parking, without announcing a park: producers that commit meanwhile
	 * make no wake-up call, and their records come in one batch when the
	 * window ends (or sooner, with any completion, timer, signal or
	 * stop).  Trades up to this much latency for fewer wake-ups under a
	 * steady stream, as a poll loop does, while an idle loop still parks
	 * after one empty window.  0: off, park at once (the default);
	 * INT64_MAX or more: -EINVAL from lull_loop_create().
	 */
	uint64_t coalesce_ns;
};

struct lull_loop_stats {
	uint64_t iterations; /* passes through the loop */
	uint64_t parks;      /* times it slept in the kernel */
	uint64_t park_cancels; /* parks dropped at the re-check */
	uint64_t safety_timeouts; /* parks ended by the safety net, idle or
				     not (the rings' own counters tell lost
				     wake-ups from idle re-checks) */
	uint64_t records;    /* records handed to ring handlers */
	uint64_t completions; /* user SQE callbacks run */
	uint64_t coalesce_waits; /* coalescing windows slept (coalesce_ns) */
};

/* A user SQE completed: @res and @flags as in the CQE. */
typedef void (*lull_cqe_fn)(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx);
/* A timer fired. */
typedef void (*lull_timer_fn)(struct lull_loop *loop, void *ctx);
/* One of the loop's signals arrived. */
typedef void (*lull_signal_fn)(struct lull_loop *loop, int signo, void *ctx);

/*
 * Create a loop; @cfg may be NULL for the defaults.  Returns 0 and sets
 * *loopp, or -EINVAL, -ENOMEM, the error of a forced backend that is not
 * supported here (-ENOSYS, -EPERM, -EOPNOTSUPP), or an eventfd(2),
 * io_uring or epoll setup error.
 */
int lull_loop_create(struct lull_loop **loopp,
		     const struct lull_loop_config *cfg);

/*
 * Destroy a loop that is not running: detach its rings, cancel timers and
 * in-flight SQEs (their callbacks are not called), close what it opened.
 * Returns 0, -EINVAL, -EBUSY (called from inside lull_loop_run()).
 */
int lull_loop_destroy(struct lull_loop *loop);

/* The backend the loop runs on (enum lull_backend), or -EINVAL. */
int lull_loop_backend(const struct lull_loop *loop);

/*
 * Attach a ring whose consumer role @ring holds: the loop reads up to
 * @batch records per pass into @fn (0: 256).  A ring attached while the
 * loop is stopping is shut down at once, like the others.  A shared ring
 * (lull_ring_create_shared()): the loop also watches its producer
 * processes (a poll of lull_ring_watch_fd() among its own SQEs), so a
 * producer's death reaches @fn as a LULL_TYPE_DEATH record.  Producers
 * in other processes can only wake a futex: the uring-futex backend waits
 * on it, and on uring-eventfd and epoll the loop starts a bridge for the
 * ring, a thread of lull's (every signal blocked) that sleeps on the
 * ring's futex while the loop sleeps and writes the loop's eventfd when
 * woken; it costs that hop per wake-up, and ends at the detach.  Returns
 * 0, -EINVAL, -EPERM (not the consumer handle), -EBUSY (attached already,
 * or parked on an io_uring of the caller's), -ENOMEM (also: the process has
 * 4096 rings on eventfd loops already), or the error of pthread_create(3)
 * for a bridge (-EAGAIN).
 */
int lull_loop_attach(struct lull_loop *loop, struct lull_ring *ring,
		     lull_record_fn fn, void *ctx, unsigned batch);

/*
 * lull_loop_attach(), the loop reading the ring in runs as
 * lull_ring_read_items() does: an array record's items reach @fn in one
 * call, every other record (death, fatal and poison included) as a run
 * of one; @batch still counts records.  The same returns.
 */
int lull_loop_attach_items(struct lull_loop *loop, struct lull_ring *ring,
			   lull_items_fn fn, void *ctx, unsigned batch);

/*
 * Detach a ring; records still in it stay there.  Returns 0, -EINVAL,
 * -ENOENT (not attached).
 */
int lull_loop_detach(struct lull_loop *loop, struct lull_ring *ring);

/*
 * Get an SQE to prepare (with liburing's io_uring_prep_* helpers), whose
 * completion will call @fn(@ctx).  It comes prepared as a NOP with its
 * user_data set: prepare it fully, and do not change user_data (its value
 * may be used in an ASYNC_CANCEL).  It is submitted on the loop's next
 * pass.  Multishot requests call @fn once per CQE; the last one lacks
 * IORING_CQE_F_MORE.  Returns 0 and sets *sqep, or -EINVAL, -ENOMEM, or
 * -EBUSY (io_uring backends: the submission queue is full even after
 * flushing it; before the first run it cannot be flushed, so @entries
 * SQEs, timers included, is the most that can be queued then).
 */
int lull_loop_sqe(struct lull_loop *loop, lull_cqe_fn fn, void *ctx,
		  struct io_uring_sqe **sqep);

/*
 * Cancel every SQE from lull_loop_sqe() still in flight whose callback
 * context is @ctx (say, everything a connection has outstanding before it
 * is freed).  Each callback still runs, once its last CQE comes: with
 * -ECANCELED, or with the result the request completed with first.  A
 * request asked once is not asked again.  Returns how many requests were
 * asked (0: none in flight), -EINVAL, -EBUSY (the submission queue is
 * full: the rest are asked on a later call), -ENOMEM (epoll backend).
 */
int lull_loop_cancel(struct lull_loop *loop, void *ctx);

/*
 * Start a timer that fires after @delay_ns, then every @interval_ns when
 * that is non-zero; a delay of INT64_MAX ns (some 292 years) or more
 * never comes, and converts without overflow.  A periodic timer that
 * finds no SQE to re-arm (a full submission queue) stops.  Returns 0 and
 * sets *timerp (may be NULL for a timer that is never cancelled), or
 * -EINVAL, -ENOMEM, -EBUSY (no SQE for it, as lull_loop_sqe()).
 */
int lull_loop_timer(struct lull_loop *loop, uint64_t delay_ns,
		    uint64_t interval_ns, lull_timer_fn fn, void *ctx,
		    struct lull_loop_timer **timerp);

/*
 * Cancel a timer; its callback does not run again.  The timer is freed by
 * the loop; a timer may cancel itself from its callback.  Returns 0,
 * -EINVAL, -ENOENT (a one-shot that fired already, or cancelled already).
 */
int lull_loop_timer_cancel(struct lull_loop *loop,
			   struct lull_loop_timer *timer);

/*
 * Deliver @signos (@count of them) to @fn on the loop's thread instead of
 * their default action: they are blocked in the calling thread and read
 * through a signalfd.  Block them in every other thread too (threads
 * created afterwards inherit the mask), or the kernel may deliver them
 * there.  Call once per loop.  Returns 0, -EINVAL (also a number that is
 * no signal, SIGKILL or SIGSTOP), -EBUSY (already set), or a signalfd
 * error (or, on epoll, an fcntl() or epoll_ctl() error); on an error the
 * thread's signal mask is left as it was.
 */
int lull_loop_signals(struct lull_loop *loop, const int *signos, int count,
		      lull_signal_fn fn, void *ctx);

/*
 * Run until lull_loop_stop().  A stop shuts every attached ring down; once
 * each has delivered its poison record to its handler and been detached,
 * the loop cancels every SQE from lull_loop_sqe() still in flight (as
 * lull_loop_cancel() does, so each callback runs, mostly with -ECANCELED)
 * and returns when all of them have completed: nothing of the caller's is
 * left in flight, and every context it handed out may be freed.  SQEs
 * that callbacks queue meanwhile are cancelled too, so a callback should
 * not re-arm on -ECANCELED.  Timers stay armed for a later run.  A stop
 * requested before the call counts.  A ring whose region turns out
 * corrupt (lull_ring_read()'s -EPROTO) ends on its own: its handler gets
 * the poison record, the ring is detached, and the run goes on with the
 * others (lull_ring_stats() counts the corruption).  Returns 0 when
 * stopped, -EINVAL, -EBUSY (already running), -EEXIST (io_uring: another
 * thread ran this loop first, reported when it parks), the error of
 * membarrier(2) should the park barrier fail, -ENOMEM (epoll: a cancel
 * could not be queued, so SQEs may still be in flight), or an
 * unrecoverable io_uring or epoll error.
 */
int lull_loop_run(struct lull_loop *loop);

/*
 * Stop the loop: on its next pass it shuts down every ring attached to it,
 * each on its own (gracefully: their handlers still receive what was
 * committed, then the poison record), and lull_loop_run() returns when all
 * of them are done.  A second stop during that makes the shutdowns
 * immediate.  Any thread, callbacks, signal handlers (async-signal-safe).
 * Returns 0 or -EINVAL.
 */
int lull_loop_stop(struct lull_loop *loop);

/* Counters; the loop's thread.  Returns 0 or -EINVAL. */
int lull_loop_stats(const struct lull_loop *loop, struct lull_loop_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* LULL_LOOP_H */
