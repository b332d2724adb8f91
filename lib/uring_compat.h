/* SPDX-License-Identifier: MIT */
/*
 * uring_compat.h - the few io_uring pieces that Debian 12's liburing 2.3
 * lacks: the futex-wait opcode and its SQE helper (liburing 2.5, Linux
 * 6.7), the no-iowait enter flag (Linux 6.15) and a submit-and-wait that
 * can pass it, and io_uring_enable_rings(), which 2.3 declares but its
 * shared library does not export (2.4 added it to the version script).
 * Where liburing has the real helper, it is used.
 */
#ifndef LULL_URING_COMPAT_H
#define LULL_URING_COMPAT_H

#include <liburing.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LULL_IORING_OP_FUTEX_WAIT 51 /* enum io_uring_op, Linux 6.7 */

#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE FUTEX_PRIVATE_FLAG
#endif
#ifndef IORING_ENTER_NO_IOWAIT
#define IORING_ENTER_NO_IOWAIT (1U << 7)
#endif
#ifndef IORING_FEAT_NO_IOWAIT
#define IORING_FEAT_NO_IOWAIT (1U << 17)
#endif

#ifdef IO_URING_CHECK_VERSION /* liburing 2.4+ */
#define LULL_HAVE_ENABLE_RINGS 1
#if !IO_URING_CHECK_VERSION(2, 5)
#define LULL_HAVE_PREP_FUTEX_WAIT 1
#endif
#endif

/*
 * A futex wait on a 32-bit word: completes when the word is woken, or at
 * once with -EAGAIN when it no longer holds @val.  Shared, unless
 * @private_futex (which only lull__futex_private_async_safe() allows:
 * sys.h).
 */
static inline void lull__prep_futex_wait_how(struct io_uring_sqe *sqe,
					     _Atomic uint32_t *word,
					     uint32_t val, bool private_futex)
{
	const uint32_t flags =
		FUTEX2_SIZE_U32 | (private_futex ? FUTEX2_PRIVATE : 0);

#ifdef LULL_HAVE_PREP_FUTEX_WAIT
	io_uring_prep_futex_wait(sqe, (uint32_t *)word, val,
				 FUTEX_BITSET_MATCH_ANY, flags, 0);
#else
	/* The kernel's layout: fd = futex2 flags, addr = word, off = value,
	 * addr3 = mask, futex_flags (rw_flags) = 0. */
	io_uring_prep_rw(LULL_IORING_OP_FUTEX_WAIT, sqe, (int)flags,
			 (const void *)word, 0, val);
	sqe->addr3 = FUTEX_BITSET_MATCH_ANY;
#endif
}

/* A shared futex wait: see sys.h for why shared is the default. */
static inline void lull__prep_futex_wait(struct io_uring_sqe *sqe,
					 _Atomic uint32_t *word, uint32_t val)
{
	lull__prep_futex_wait_how(sqe, word, val, false);
}

/*
 * Submit what is queued, post what completed, and wait for @wait_nr
 * completions (0: do not wait), at most
 * @timeout (NULL: no limit), in one system call, without the wait counting
 * as iowait where the kernel supports that (@no_iowait).  liburing 2.3 has
 * no way to pass IORING_ENTER_NO_IOWAIT, so this publishes the SQ tail the
 * way liburing does and enters with the extended argument (Linux 5.11).
 * Returns the number submitted, or a negative errno (-ETIME on timeout).
 */
static inline int lull__uring_submit_wait(struct io_uring *ring,
					  unsigned wait_nr,
					  struct __kernel_timespec *timeout,
					  bool no_iowait)
{
	struct io_uring_sq *sq = &ring->sq;
	struct io_uring_getevents_arg arg = {
		.sigmask = 0,
		.sigmask_sz = _NSIG / 8,
		.ts = (uint64_t)(uintptr_t)timeout,
	};
	unsigned tail = sq->sqe_tail, submit, flags;
	int saved_errno = errno;
	long ret;

	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		/* Pairs with the kernel's acquire of the SQ tail. */
		io_uring_smp_store_release(sq->ktail, tail);
	}
	/* Pairs with the kernel's release of the SQ head. */
	submit = tail - io_uring_smp_load_acquire(sq->khead);
	/*
	 * GETEVENTS even with nothing to wait for: with DEFER_TASKRUN,
	 * completions are posted only when the issuer asks for events.
	 */
	flags = IORING_ENTER_EXT_ARG | IORING_ENTER_GETEVENTS;
	if (no_iowait)
		flags |= IORING_ENTER_NO_IOWAIT;
	ret = syscall(__NR_io_uring_enter, ring->ring_fd, submit, wait_nr,
		      flags, &arg, sizeof(arg));
	if (ret < 0)
		ret = -errno;
	errno = saved_errno;
	return (int)ret;
}

/*
 * Lift IORING_SETUP_R_DISABLED (Linux 5.10): the calling thread becomes the
 * ring's single issuer.  liburing's io_uring_enable_rings() where it can be
 * linked (2.4+), else the same system call.  Returns 0 or a negative errno;
 * errno is left as it was.
 */
static inline int lull__uring_enable(struct io_uring *ring)
{
	int saved_errno = errno;
	long ret;

#ifdef LULL_HAVE_ENABLE_RINGS
	ret = io_uring_enable_rings(ring);
#else
	ret = syscall(__NR_io_uring_register, ring->ring_fd,
		      IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (ret < 0)
		ret = -errno;
#endif
	errno = saved_errno;
	return (int)ret;
}

/*
 * A sleep on a futex word and a descriptor at once, on a small io_uring
 * of its own (ring_death.c): a consumer waiting for records or a producer
 * death, a producer waiting for room or the consumer's death.
 */
struct lull_uwait {
	struct io_uring uring;
	bool ready;       /* uring set up */
	bool futex_armed; /* a futex wait in flight */
	bool poll_armed;  /* a poll of poll_fd in flight */
	int poll_fd;
};

/*
 * Sleep until @word is woken (or does not hold @val), @fd (-1: none)
 * reads ready (*fd_readyp then true), or @timeout_ns passed
 * (LULL_NS_FOREVER: no limit).  Returns 0, -ETIMEDOUT, -EOPNOTSUPP (no
 * io_uring futex wait here: the caller sleeps otherwise), or an io_uring
 * setup error.
 */
int lull__uwait(struct lull_uwait *w, _Atomic uint32_t *word, uint32_t val,
		int fd, uint64_t timeout_ns, bool *fd_readyp);
void lull__uwait_fini(struct lull_uwait *w);

#endif /* LULL_URING_COMPAT_H */
