/* SPDX-License-Identifier: MIT */
/*
 * loop_epoll_sqe.c - the SQEs the epoll backend emulates: a server's
 * opcodes (loop.h lists them) and TIMEOUT, done with the equivalent
 * non-blocking system calls.
 *
 * An emulated SQE waits for readiness of its descriptor, then makes the
 * equivalent non-blocking system call and completes with what io_uring
 * would have returned.  Several SQEs may wait on one descriptor: the
 * descriptor's epoll interest is the union of theirs.  A TIMEOUT waits for
 * its deadline instead, which bounds the backend's sleep.
 */
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop_internal.h"

/* epoll_event.data of an emulated SQE's descriptor: fd << 3 | TAG_OP. */
static uint64_t fd_key(int fd)
{
	return ((uint64_t)(unsigned)fd << 3) | TAG_OP;
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
static int fd_sync(struct loop_epoll *e, int fd)
{
	struct epoll_event ev = { .data.u64 = fd_key(fd) };
	struct loop_op *op;
	uint32_t events = 0;
	long ret;

	for (op = e->waiting; op; op = op->next)
		if (op->sqe.fd == fd && !op->deadline_ns)
			events |= op_events(&op->sqe);
	ev.events = events;
	if (!events) {
		LULL_SYSCALL(epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL));
		return 0;
	}
	ret = LULL_SYSCALL(epoll_ctl(e->epfd, EPOLL_CTL_MOD, fd, &ev));
	if (ret == -ENOENT)
		ret = LULL_SYSCALL(epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd,
					     &ev));
	return (int)ret;
}

static void op_wait(struct loop_epoll *e, struct loop_op *op)
{
	op->next = e->waiting;
	e->waiting = op;
}

static bool op_unlink(struct loop_epoll *e, struct loop_op *op)
{
	for (struct loop_op **link = &e->waiting; *link;
	     link = &(*link)->next)
		if (*link == op) {
			*link = op->next;
			return true;
		}
	return false;
}

/* An emulated ASYNC_CANCEL of @user_data. */
static int op_cancel(struct lull_loop *loop, uint64_t user_data)
{
	struct loop_epoll *e = loop_epoll_of(loop);

	for (struct loop_op *op = e->waiting; op; op = op->next) {
		if (loop_tag(op, TAG_OP) != user_data)
			continue;
		op_unlink(e, op);
		if (!op->deadline_ns)
			fd_sync(e, op->sqe.fd);
		lull__loop_op_complete(loop, op, -ECANCELED, 0);
		return 0;
	}
	return -ENOENT;
}

void lull__epoll_op_start(struct lull_loop *loop, struct loop_op *op)
{
	struct loop_epoll *e = loop_epoll_of(loop);
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
		op_wait(e, op);
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
	op_wait(e, op);
	if (fd_sync(e, sqe->fd) == -EPERM) {
		/* A regular file cannot be polled: it is always ready. */
		op_unlink(e, op);
		op_try(op, true, 0, &res);
		lull__loop_op_complete(loop, op, res, 0);
	}
}

void lull__epoll_fd_ready(struct lull_loop *loop, int fd, uint32_t revents)
{
	struct loop_epoll *e = loop_epoll_of(loop);
	struct loop_op *op, *next;
	int res;

	for (op = e->waiting; op; op = next) {
		next = op->next;
		if (op->sqe.fd != fd || op->deadline_ns)
			continue;
		if (!(revents & (op_events(&op->sqe) | EPOLLERR | EPOLLHUP)))
			continue;
		if (!op_try(op, true, revents, &res))
			continue;
		op_unlink(e, op);
		lull__loop_op_complete(loop, op, res, 0);
		/* The callback may have changed the list: start over. */
		next = e->waiting;
	}
	fd_sync(e, fd);
}

void lull__epoll_fire_due(struct lull_loop *loop)
{
	struct loop_epoll *e = loop_epoll_of(loop);
	struct lull_loop_timer *timer;
	struct loop_op *op;
	bool again = true;
	uint64_t now;

	/*
	 * Nothing with a deadline: no clock read, which would sit between a
	 * wake-up and the rings being drained.
	 */
	if (!e->waiting && !loop->timers)
		return;
	now = lull__now_ns();
	while (again) {
		again = false;
		for (op = e->waiting; op; op = op->next) {
			if (!op->deadline_ns || op->deadline_ns > now)
				continue;
			op_unlink(e, op);
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
