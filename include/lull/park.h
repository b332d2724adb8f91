/* SPDX-License-Identifier: MIT */
/*
 * lull/park.h - a consumer that sleeps when its ring is empty and is woken
 * by the producer that commits the next record.
 *
 * The handshake (docs/DESIGN.md, "Parking"): the consumer announces in the
 * region's park word that it is about to sleep, issues a full barrier,
 * checks the ring once more, and only then sleeps.  A producer, after each
 * commit, issues the matching barrier and loads the park word once; only if
 * the consumer is parked does it try to clear the word, and only the
 * producer whose clear succeeds makes the wake-up system call.  So:
 *   - a producer makes no system call while the consumer is awake;
 *   - a burst of commits to a parked consumer costs one wake-up;
 *   - no wake-up is lost, so a park needs no timer: an idle consumer makes
 *     no wake-up and no system call for as long as nothing arrives.  A
 *     safety-net timeout (a diagnostic, off by default) can be switched
 *     on per ring or loop (safety_timeout_ns) or for the whole process
 *     with the environment variable LULL_SAFETY_NET_MS (milliseconds,
 *     read once); every park then ends after that long, and a park it
 *     ends with a record waiting is counted as a lost wake-up.
 *
 * How the consumer sleeps is its backend:
 *   LULL_BACKEND_URING_FUTEX    io_uring IORING_OP_FUTEX_WAIT on the park
 *                               word (Linux 6.7+); wake = futex wake
 *   LULL_BACKEND_URING_EVENTFD  io_uring read of an eventfd; wake = write
 *   LULL_BACKEND_BLOCKING       futex(2) wait in the calling thread
 *   LULL_BACKEND_EPOLL          epoll on an eventfd, for where io_uring is
 *                               disabled (sysctl, seccomp)
 * lull_backend_probe() picks the best one this kernel allows; the
 * environment variable LULL_BACKEND (uring-futex, uring-eventfd, blocking,
 * epoll) forces one.
 *
 * Processes: the futex backends (URING_FUTEX, BLOCKING) wake a consumer
 * from any process that maps the region (a region other processes may map
 * is always waited on through a process-shared futex).  An
 * eventfd belongs to the consumer's process: a producer, a detach or a
 * shutdown in another process cannot wake a consumer parked on
 * URING_EVENTFD or EPOLL (nor a loop on those), which then sleeps until
 * its own process wakes it.  A region that other processes write to must
 * be parked on through a futex backend.
 *
 * Which calls may run concurrently (same ring): lull_ring_wait(),
 * lull_ring_park_config() and the lull_uring_park_*() calls belong to the
 * consumer's thread, like lull_ring_read(); lull_producer_wait() belongs
 * to the producer's, like lull_spsc_write(); lull_ring_stats() and
 * lull_backend_*() may be called from any thread at any time.
 */
#ifndef LULL_PARK_H
#define LULL_PARK_H

#include <stdint.h>

#include <lull/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring;
struct io_uring_cqe;

enum lull_backend {
	LULL_BACKEND_AUTO = 0,
	LULL_BACKEND_URING_FUTEX = 1,
	LULL_BACKEND_URING_EVENTFD = 2,
	LULL_BACKEND_BLOCKING = 3,
	LULL_BACKEND_EPOLL = 4,
};

/*
 * spin_ns value: spin only while records stream.  lull_ring_wait() then
 * polls an empty ring for up to LULL_PARK_ADAPTIVE_SPIN_NS, but only when
 * its previous park was cancelled at the re-check (a record arrived while
 * it was announcing) or its previous spin found a record: a producer is
 * committing faster than a park and a wake-up cost.  A spin that finds
 * nothing, and any real sleep, turn it off again, so sparse traffic parks
 * at once and an idle consumer spins at most once before it sleeps.
 *
 * With it, and only with it, the reads also keep their distance from a
 * producer they caught up with (the temporal slip): after two reads in a
 * row that found records but reached the producers' end within a short
 * run (16 KiB, or a quarter of a smaller ring), the next lull_ring_read()
 * first holds back, 64 ns doubling up to 4 us while the runs stay short,
 * so that the producers are not made to win back the line they are
 * writing record after record.  A read that
 * finds nothing ends the slip: a lone record is never held back.  A fixed
 * spin_ns, or 0, turns the slip off, and a ring attached to a loop never
 * slips (a pause per ring would hold up the loop's other rings and I/O).
 */
#define LULL_PARK_SPIN_ADAPTIVE UINT64_MAX
#define LULL_PARK_ADAPTIVE_SPIN_NS (10ull * 1000)

/*
 * Defaults of struct lull_park_config.  The safety net is off by default
 * (0): an idle consumer never wakes on a timer of lull's own.
 */
#define LULL_PARK_SAFETY_TIMEOUT_DEFAULT_NS 0ull
#define LULL_PARK_SPIN_DEFAULT_NS LULL_PARK_SPIN_ADAPTIVE

struct lull_park_config {
	/*
	 * How long the consumer keeps checking an empty ring before it parks:
	 * LULL_PARK_SPIN_ADAPTIVE (the default, above), a fixed time in ns,
	 * or 0 to park at once (not even one spin after a stream).
	 */
	uint64_t spin_ns;
	/*
	 * The safety net, an opt-in diagnostic: the longest a park may last
	 * before the consumer looks at the ring again on its own.  0 (the
	 * default): none, unless LULL_SAFETY_NET_MS sets one for the
	 * process; INT64_MAX or more: none.  A correct program never needs
	 * it: see the safety_timeouts counter.
	 */
	uint64_t safety_timeout_ns;
};

struct lull_ring_stats {
	uint64_t parks;          /* times the consumer slept */
	uint64_t park_cancels;   /* parks dropped at the re-check: a record
				    arrived between "empty" and sleeping */
	uint64_t wakes;          /* wake-up system calls made by producers */
	uint64_t safety_timeouts; /* parks ended by the safety net with a
				     record waiting: a lost wake-up; 0 in a
				     correct run */
	uint64_t idle_timeouts;  /* parks ended by the safety net with nothing
				    to read: an idle consumer re-checking */
	uint64_t room_wakes;     /* wake-up calls for producers waiting for
				    room (lull_producer_wait), by the
				    consumer or a shutdown */
	uint64_t claim_waits;    /* MPSC: reads that stopped at a record
				    claimed but not yet committed, waiting
				    behind its producer */
	uint64_t corruptions;    /* 0, or 1 once this consumer handle found
				    the region corrupt (what no producer
				    writes: the read's -EPROTO); counted in
				    the handle, where no process sharing
				    the region can change it, so 0 on any
				    other handle */
	uint64_t producer_deaths; /* shared rings: producers whose process
				     the consumer found dead (each then has
				     its LULL_TYPE_DEATH record) */
};

/*
 * The name of a backend ("uring-futex", "uring-eventfd", "blocking",
 * "epoll", "auto"), or NULL for an unknown value.  Any thread.
 */
const char *lull_backend_name(enum lull_backend backend);

/*
 * Parse a backend name as above.  Returns the backend, or -EINVAL.
 */
int lull_backend_parse(const char *name);

/*
 * Whether @backend works in this process, on this kernel: io_uring can be
 * set up (not disabled by sysctl or seccomp) and, for URING_FUTEX, the
 * kernel has IORING_OP_FUTEX_WAIT.  Any thread.  Returns 0 when it is
 * usable, -EINVAL (unknown or AUTO), -ENOSYS or -EPERM (io_uring not
 * available), -EOPNOTSUPP (the opcode is missing, or a kernel before 5.11
 * without waits that time out), each kept for the process's life; or
 * another io_uring_setup(2) error such as -EMFILE or -ENOMEM, not kept:
 * the next call asks the kernel again.
 */
int lull_backend_supported(enum lull_backend backend);

/*
 * The backend a loop should use: LULL_BACKEND from the environment when
 * set (a name as above), else the first supported of URING_FUTEX,
 * URING_EVENTFD, EPOLL (an empty LULL_BACKEND, or "auto", counts as
 * unset).  Any thread.  Returns the backend, -EINVAL when LULL_BACKEND
 * names no backend, or the error of a forced backend that is not
 * supported here.  LULL_BACKEND=blocking is returned as it is, and
 * lull_loop_create() refuses it with -EINVAL: a loop cannot block in a
 * futex wait.
 */
int lull_backend_probe(void);

/*
 * Set the consumer's spin and safety-net timeout.  NULL restores the
 * defaults.  The consumer's thread.  Returns 0, -EINVAL (NULL ring),
 * -EPERM (not the consumer handle).
 */
int lull_ring_park_config(struct lull_ring *ring,
			  const struct lull_park_config *cfg);

/*
 * Counters of the park/wake handshake.  Any thread; each field is read
 * atomically, the set is not a snapshot.  Returns 0 or -EINVAL.
 */
int lull_ring_stats(const struct lull_ring *ring, struct lull_ring_stats *st);

/*
 * Block the calling (consumer) thread until the ring has a committed
 * record, at most @timeout_ns (< 0: no limit; 0: only check; any value
 * up to INT64_MAX is honoured; an opt-in safety net's expiries are handled
 * inside and never returned).  Spins first if configured, then parks with
 * a futex wait (LULL_BACKEND_BLOCKING), with no timer unless @timeout_ns or
 * the safety net asks for one.  Returns 0 when a record (or after a
 * shutdown the fatal or poison record, or a corrupt region's -EPROTO) is
 * readable, -EPIPE once the poison was consumed, -ETIMEDOUT, -EINVAL,
 * -EPERM (not the consumer handle), -EBUSY (attached to a loop, or a park
 * on an io_uring is armed for this ring), or the error of membarrier(2)
 * should the park barrier fail (the consumer never sleeps without it).
 * A shared ring (lull_ring_create_shared()): producers in other processes
 * wake it as any, and it also watches every producer process, sleeping
 * on an io_uring of the handle's with the futex wait and a poll of
 * lull_ring_watch_fd() (in futex(2) while no producer lives in another
 * process): a producer's death ends the sleep, and its death
 * record is then readable once its records were read.  Where the kernel
 * has no io_uring futex wait (Linux < 6.7, io_uring disabled), it sleeps
 * in futex(2) and learns of a death when something else wakes it.
 */
int lull_ring_wait(struct lull_ring *ring, int64_t timeout_ns);

/*
 * Block a producer until the ring has room for a record of @len payload
 * bytes, at most @timeout_ns (< 0: no limit; 0: only check): the
 * back-pressure wait for a write that returned -EAGAIN, instead of a
 * sleep-and-retry loop.  The producer sleeps in futex(2); the consumer
 * wakes waiting producers when it frees space, at the cost of a barrier
 * (the compiler's only in a lull_ring_create() region, a fence otherwise)
 * and one load per batch it reads while nobody waits.  Room is a hint for
 * MPSC producers (another may take it first: write, and wait again on
 * -EAGAIN).  The producer's thread.  Returns 0
 * (room now), -EPIPE (the ring is shut down), -ETIMEDOUT, -EINVAL,
 * -EMSGSIZE (@len never fits), -EBUSY (the producer holds a claim), or the
 * error of membarrier(2) should its barrier fail.  Without a timeout it
 * sleeps until the consumer frees room or the ring shuts down: no
 * periodic re-check.  A shared ring whose consumer is another process:
 * the sleep is also a poll of that process's pidfd (on an io_uring of the
 * producer's, where the kernel has the futex wait), and -EPIPE comes as
 * soon as the consumer's process is gone.  Without an io_uring futex wait
 * (Linux < 6.7, io_uring disabled) it sleeps in futex(2) alone and learns
 * of that death only when its timeout ends: give it one there.
 */
int lull_producer_wait(struct lull_producer *prod, size_t len,
		       int64_t timeout_ns);

/*
 * Parking on the caller's own io_uring.  The consumer thread owns @uring
 * and submits it.  Backend URING_FUTEX when the kernel has it, else
 * URING_EVENTFD (LULL_BACKEND may force either).
 *
 * lull_uring_park_arm: run the handshake and queue the park without
 *   submitting: one SQE, the wait, with @user_data; two when a safety net
 *   is on (the wait and its link timeout, both with @user_data).  Returns
 *   0 (armed), 1 (a record is readable now: nothing was queued; drain,
 *   then arm again), -EPIPE (the poison record was consumed: nothing will
 *   come, or lull_ring_close() was called), -EALREADY (a park, or its
 *   cancel, still has CQEs to come), -EBUSY (too few free SQEs, or the
 *   ring is attached to a loop), -EINVAL, -EPERM, an error from setting
 *   up the eventfd (-ENOMEM also when the process has 4096 eventfd parks
 *   already), or the error of membarrier(2) should the park barrier
 *   fail.  A shared ring: -EOPNOTSUPP with the eventfd backend (another
 *   process cannot write it); with the futex backend, producer processes
 *   are not watched here: poll lull_ring_watch_fd() beside the park and
 *   call lull_ring_watch() when it is ready.
 *
 * lull_uring_park_cqe: whether @cqe belongs to this ring's park (it has
 *   the park's user_data).  Returns 0 when not ours, 1 when ours: the park
 *   has ended or is ending; the caller then calls lull_uring_park_drain(),
 *   which reads what arrived and re-arms.  -EINVAL for a NULL ring or
 *   @cqe.
 *
 * lull_uring_park_drain: read every readable record into @fn (batches of
 *   @limit), then re-arm the park once all of its CQEs are in (not after
 *   lull_uring_park_cancel(), nor when no park was ever armed).  A handler
 *   that keeps a record (LULL_READ_KEEP) ends the drain without re-arming:
 *   call it again when ready, or nothing will wake the consumer.  Returns
 *   the number of records read (>= 0: the park is armed, or will be by
 *   the drain after its last CQE), -EPIPE once the poison record was
 *   consumed, also by the drain that delivered it and whatever records
 *   came before it (every one of them went to @fn: stop waiting for this
 *   park; only CQEs of it still in flight remain to pass to
 *   lull_uring_park_cqe()), or another negative error from reading or
 *   arming: then nothing is armed (records may have reached @fn before
 *   it), and the caller arms again with lull_uring_park_arm() once the
 *   cause is gone (-EBUSY: free SQEs).
 *
 * lull_uring_park_cancel: queue a cancel of an armed park (its CQEs still
 *   arrive and must go through lull_uring_park_cqe before the ring handle
 *   is destroyed).  Returns 0 (a cancel was queued; another call queues
 *   another), -ENOENT (no CQE of a park is to come), -EBUSY (no SQE),
 *   -EINVAL (NULL), -EPERM (not the consumer handle).
 */
int lull_uring_park_arm(struct lull_ring *ring, struct io_uring *uring,
			uint64_t user_data);
int lull_uring_park_cqe(struct lull_ring *ring,
			const struct io_uring_cqe *cqe);
int lull_uring_park_drain(struct lull_ring *ring, struct io_uring *uring,
			  lull_record_fn fn, void *ctx, unsigned limit);
int lull_uring_park_cancel(struct lull_ring *ring, struct io_uring *uring);

#ifdef __cplusplus
}
#endif

#endif /* LULL_PARK_H */
