/* SPDX-License-Identifier: MIT */
/*
 * loop_epoll.c - the loop where io_uring is unavailable: epoll over the
 * loop's eventfd (which producers write to wake it), its signalfd, and the
 * file descriptors of emulated SQEs.
 *
 * An emulated SQE waits for readiness of its descriptor, then makes the
 * equivalent non-blocking system call and completes with what io_uring
 * would have returned.  Several SQEs may wait on one descriptor: the
 * descriptor's epoll interest is the union of theirs.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop_internal.h"

#define EPOLL_BATCH 64

/* epoll_event.data of an emulated SQE's descriptor: fd << 3 | TAG_OP. */
static uint64_t fd_key(int fd)
{
	return ((uint64_t)(unsigned)fd << 3) | TAG_OP;
}

int lull__epoll_init(struct lull_loop *loop)
{
	struct epoll_event ev = {
		.events = EPOLLIN,
		.data.u64 = loop_tag(NULL, TAG_KICK),
	};
	long fd, ret;

	fd = LULL_SYSCALL(epoll_create1(EPOLL_CLOEXEC));
	if (fd < 0)
		return (int)fd;
	loop->epfd = (int)fd;
	ret = LULL_SYSCALL(fcntl(loop->kick_fd, F_SETFL, O_NONBLOCK));
	if (ret < 0)
		return (int)ret;
	ret = LULL_SYSCALL(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->kick_fd,
				     &ev));
	return ret < 0 ? (int)ret : 0;
}

void lull__epoll_fini(struct lull_loop *loop)
{
	if (loop->epfd >= 0)
		close(loop->epfd);
	loop->epfd = -1;
}

/* What an emulated SQE waits for on its descriptor; 0 for none. */
static uint32_t op_events(const struct io_uring_sqe *sqe)
{
	switch (sqe->opcode) {
	case IORING_OP_READ:
	case IORING_OP_RECV:
	case IORING_OP_ACCEPT:
		return EPOLLIN;
	case IORING_OP_WRITE:
	case IORING_OP_SEND:
		return EPOLLOUT;
	case IORING_OP_POLL_ADD:
		return sqe->poll32_events;
	default:
		return 0;
	}
}

/*
 * Try the system call of an emulated SQE.  Returns false when it would
 * block (wait for readiness), true with *res set otherwise.
 */
static bool op_try(struct loop_op *op, bool ready, uint32_t revents,
		   int *res)
{
	const struct io_uring_sqe *sqe = &op->sqe;
	void *addr = (void *)(uintptr_t)sqe->addr;
	long ret;

	switch (sqe->opcode) {
	case IORING_OP_READ:
		if (!ready)
			return false;
		ret = -ESPIPE;
		if (sqe->off != UINT64_MAX)
			ret = LULL_SYSCALL(pread(sqe->fd, addr, sqe->len,
						 (off_t)sqe->off));
		/* io_uring ignores the offset of a stream (pipe, socket). */
		if (ret == -ESPIPE)
			ret = LULL_SYSCALL(read(sqe->fd, addr, sqe->len));
		break;
	case IORING_OP_WRITE:
		if (!ready)
			return false;
		ret = -ESPIPE;
		if (sqe->off != UINT64_MAX)
			ret = LULL_SYSCALL(pwrite(sqe->fd, addr, sqe->len,
						  (off_t)sqe->off));
		if (ret == -ESPIPE)
			ret = LULL_SYSCALL(write(sqe->fd, addr, sqe->len));
		break;
	case IORING_OP_RECV:
		ret = LULL_SYSCALL(recv(sqe->fd, addr, sqe->len,
					(int)sqe->msg_flags | MSG_DONTWAIT));
		break;
	case IORING_OP_SEND:
		ret = LULL_SYSCALL(send(sqe->fd, addr, sqe->len,
					(int)sqe->msg_flags | MSG_DONTWAIT |
						MSG_NOSIGNAL));
		break;
	case IORING_OP_ACCEPT:
		/* accept4() would block on a blocking listener. */
		if (!ready)
			return false;
		ret = LULL_SYSCALL(accept4(
			sqe->fd, addr,
			(socklen_t *)(uintptr_t)sqe->addr2,
			(int)(sqe->accept_flags | SOCK_NONBLOCK)));
		break;
	case IORING_OP_POLL_ADD:
		if (!ready)
			return false;
		ret = revents;
		break;
	default:
		ret = -EOPNOTSUPP;
		break;
	}
	if (ret == -EAGAIN)
		return false;
	*res = (int)ret;
	return true;
}

/*
 * Set @fd's epoll interest to the union of its waiting SQEs'.  Returns 0,
 * or epoll's error (-EPERM: a regular file, which cannot be polled).
 */
static int fd_sync(struct lull_loop *loop, int fd)
{
	struct epoll_event ev = { .data.u64 = fd_key(fd) };
	struct loop_op *op;
	uint32_t events = 0;
	long ret;

	for (op = loop->waiting_ops; op; op = op->next)
		if (op->sqe.fd == fd && !op->deadline_ns)
			events |= op_events(&op->sqe);
	ev.events = events;
	if (!events) {
		LULL_SYSCALL(epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL));
		return 0;
	}
	ret = LULL_SYSCALL(epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev));
	if (ret == -ENOENT)
		ret = LULL_SYSCALL(epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd,
					     &ev));
	return (int)ret;
}

static void op_wait(struct lull_loop *loop, struct loop_op *op)
{
	op->next = loop->waiting_ops;
	loop->waiting_ops = op;
}

static bool op_unlink(struct lull_loop *loop, struct loop_op *op)
{
	for (struct loop_op **link = &loop->waiting_ops; *link;
	     link = &(*link)->next)
		if (*link == op) {
			*link = op->next;
			return true;
		}
	return false;
}

static int op_cancel(struct lull_loop *loop, uint64_t user_data)
{
	for (struct loop_op *op = loop->waiting_ops; op; op = op->next) {
		if (loop_tag(op, TAG_OP) != user_data)
			continue;
		op_unlink(loop, op);
		if (!op->deadline_ns)
			fd_sync(loop, op->sqe.fd);
		lull__loop_op_complete(loop, op, -ECANCELED, 0);
		return 0;
	}
	return -ENOENT;
}

/* Start one queued SQE: complete it now, or make it wait. */
static void op_start(struct lull_loop *loop, struct loop_op *op)
{
	const struct io_uring_sqe *sqe = &op->sqe;
	const struct __kernel_timespec *ts;
	int res;

	switch (sqe->opcode) {
	case IORING_OP_NOP:
		lull__loop_op_complete(loop, op, 0, 0);
		return;
	case IORING_OP_CLOSE:
		lull__loop_op_complete(loop, op,
				       (int)LULL_SYSCALL(close(sqe->fd)), 0);
		return;
	case IORING_OP_ASYNC_CANCEL:
		lull__loop_op_complete(loop, op, op_cancel(loop, sqe->addr), 0);
		return;
	case IORING_OP_TIMEOUT:
		ts = (const struct __kernel_timespec *)(uintptr_t)sqe->addr;
		/* Saturated: a huge timeout is one that never fires. */
		op->deadline_ns =
			ts->tv_sec < 0 ? 0
			: (uint64_t)ts->tv_sec >= UINT64_MAX / 1000000000u
				? UINT64_MAX
				: lull__deadline_ns((uint64_t)ts->tv_sec *
							    1000000000u,
						    (uint64_t)ts->tv_nsec);
		if (!(sqe->timeout_flags & IORING_TIMEOUT_ABS))
			op->deadline_ns = lull__deadline_ns(lull__now_ns(),
							    op->deadline_ns);
		if (!op->deadline_ns)
			op->deadline_ns = 1;
		op_wait(loop, op);
		return;
	default:
		break;
	}
	if (!op_events(sqe)) {
		lull__loop_op_complete(loop, op, -EOPNOTSUPP, 0);
		return;
	}
	if (op_try(op, false, 0, &res)) {
		lull__loop_op_complete(loop, op, res, 0);
		return;
	}
	op_wait(loop, op);
	if (fd_sync(loop, sqe->fd) == -EPERM) {
		/* A regular file cannot be polled: it is always ready. */
		op_unlink(loop, op);
		op_try(op, true, 0, &res);
		lull__loop_op_complete(loop, op, res, 0);
	}
}

void lull__epoll_submit(struct lull_loop *loop)
{
	struct loop_op *list = loop->pending_ops, *op, *reversed = NULL;

	/* Queued newest first; start them in the order they were queued. */
	loop->pending_ops = NULL;
	while (list) {
		op = list;
		list = op->next;
		op->next = reversed;
		reversed = op;
	}
	while (reversed) {
		op = reversed;
		reversed = op->next;
		op_start(loop, op);
	}
}

uint64_t lull__epoll_next_deadline(struct lull_loop *loop)
{
	uint64_t next = UINT64_MAX;

	for (struct loop_op *op = loop->waiting_ops; op; op = op->next)
		if (op->deadline_ns && op->deadline_ns < next)
			next = op->deadline_ns;
	for (struct lull_loop_timer *t = loop->timers; t; t = t->next)
		if (!t->cancelled && t->deadline_ns < next)
			next = t->deadline_ns;
	return next;
}

/* Descriptor @fd is ready with @revents: run the SQEs waiting on it. */
static void fd_ready(struct lull_loop *loop, int fd, uint32_t revents)
{
	struct loop_op *op, *next;
	int res;

	for (op = loop->waiting_ops; op; op = next) {
		next = op->next;
		if (op->sqe.fd != fd || op->deadline_ns)
			continue;
		if (!(revents & (op_events(&op->sqe) | EPOLLERR | EPOLLHUP)))
			continue;
		if (!op_try(op, true, revents, &res))
			continue;
		op_unlink(loop, op);
		lull__loop_op_complete(loop, op, res, 0);
		/* The callback may have changed the list: start over. */
		next = loop->waiting_ops;
	}
	fd_sync(loop, fd);
}

static void fire_due(struct lull_loop *loop)
{
	uint64_t now = lull__now_ns();
	struct lull_loop_timer *timer;
	struct loop_op *op;
	bool again = true;

	while (again) {
		again = false;
		for (op = loop->waiting_ops; op; op = op->next) {
			if (!op->deadline_ns || op->deadline_ns > now)
				continue;
			op_unlink(loop, op);
			lull__loop_op_complete(loop, op, -ETIME, 0);
			again = true;
			break;
		}
		for (timer = loop->timers; timer; timer = timer->next) {
			if (timer->cancelled || timer->deadline_ns > now)
				continue;
			lull__loop_timer_fired(loop, timer); /* may free it */
			again = true;
			break;
		}
	}
}

int lull__epoll_wait(struct lull_loop *loop, uint64_t timeout_ns)
{
	struct epoll_event events[EPOLL_BATCH];
	/*
	 * Rounded up to whole ms without overflow: a wait is never shorter
	 * than asked (0 stays a poll); UINT64_MAX waits without a timeout.
	 */
	uint64_t timeout_ms = timeout_ns / 1000000 + !!(timeout_ns % 1000000);
	uint64_t drain;
	long n;

	n = LULL_SYSCALL(epoll_wait(loop->epfd, events, EPOLL_BATCH,
				    timeout_ns == UINT64_MAX ? -1
				    : timeout_ms > INT_MAX   ? INT_MAX
							     : (int)timeout_ms));
	if (n < 0)
		return (int)n; /* -EINTR: a signal, not the safety net */
	for (long i = 0; i < n; i++) {
		uint64_t key = events[i].data.u64;

		switch (key & TAG_MASK) {
		case TAG_KICK:
			/*
			 * One read: a (non-semaphore) eventfd read returns
			 * the whole count and resets it, so a second read
			 * could only fail with EAGAIN, a wasted system call
			 * per wake-up.
			 */
			(void)LULL_SYSCALL(read(loop->kick_fd, &drain,
						sizeof(drain)));
			break;
		case TAG_SIGNAL:
			while (LULL_SYSCALL(read(loop->sigfd, &loop->sigbuf,
						 sizeof(loop->sigbuf))) ==
			       (long)sizeof(loop->sigbuf))
				loop->sigfn(loop, (int)loop->sigbuf.ssi_signo,
					    loop->sigctx);
			break;
		default:
			fd_ready(loop, (int)(key >> 3), events[i].events);
			break;
		}
	}
	fire_due(loop);
	return (int)n;
}
