/* SPDX-License-Identifier: MIT */
/*
 * test_loop_ops.c - the Criterion suite loop: user SQEs (NOP, TIMEOUT,
 * pipe read and write, a TCP echo, ACCEPT, POLL_ADD, ASYNC_CANCEL, what
 * epoll does not support), chains from callbacks, a full SQ.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

/* ========================================================================
 * User SQEs
 */

LOOP_TEST(nop_completes_with_zero, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct cqe_seen nop = { .res = 1 };
	unsigned left = 1;

	nop.left = &left;
	get_sqe(loop, record_cqe, &nop);
	run_loop(loop);
	check_eq(nop.calls, 1);
	check_eq(nop.res, 0);
	check_eq(nop.flags & IORING_CQE_F_MORE, 0);
	check_eq(loop_stats(loop).completions, 1);
	loop_free(loop);
}

LOOP_TEST(timeout_sqe_completes_with_etime_after_its_time, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct __kernel_timespec ts = { .tv_nsec = (long long)(30 * MS) };
	struct cqe_seen timeout = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 1;
	uint64_t start;

	timeout.left = &left;
	sqe = get_sqe(loop, record_cqe, &timeout);
	io_uring_prep_timeout(sqe, &ts, 0, 0);
	start = now_ns();
	run_loop(loop);
	check_eq(timeout.calls, 1);
	check_eq(timeout.res, -ETIME);
	check_op(timeout.at_ns - start, >=, 30 * MS);
	loop_free(loop);
}

/* WRITE then READ through a pipe, both with file offset @offset. */
static void pipe_round_trip(enum lull_backend backend, uint64_t offset)
{
	static const char out[] = "through the pipe";
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen wr = { .res = 1 }, rd = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 2;
	bool stalled;
	char in[64];
	int fds[2];

	make_pipe(fds);
	memset(in, 0, sizeof(in));
	wr.left = &left;
	rd.left = &left;
	sqe = get_sqe(loop, record_cqe, &rd);
	io_uring_prep_read(sqe, fds[0], in, sizeof(in), offset);
	sqe = get_sqe(loop, record_cqe, &wr);
	io_uring_prep_write(sqe, fds[1], out, sizeof(out), offset);
	arm_watchdog(loop, 2 * SEC, &stalled);
	run_loop(loop);
	check_eq(wr.calls, 1);
	check(wr.res == (int)sizeof(out), "write: %d (%s)", wr.res,
	      wr.res < 0 ? strerror(-wr.res) : "short");
	check(!stalled, "the read never completed");
	check_eq(rd.calls, 1);
	check(rd.res == (int)sizeof(out), "read: %d (%s)", rd.res,
	      rd.res < 0 ? strerror(-rd.res) : "short");
	check(memcmp(in, out, sizeof(out)) == 0, "read %.64s", in);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

LOOP_TEST(read_and_write_on_a_pipe, .timeout = 10)
{
	pipe_round_trip(use_backend(backendp), (uint64_t)-1);
}

/*
 * io_uring_prep_read(3): "On files that are not capable of seeking, the
 * offset must be 0 or -1."  0 is what most io_uring code passes for pipes
 * and sockets (lull itself does, for its eventfd).
 */
LOOP_TEST(read_and_write_on_a_pipe_with_offset_zero, .timeout = 10)
{
	pipe_round_trip(use_backend(backendp), 0);
}

/* --- a TCP echo exchange on loopback ---------------------------------- */

static int tcp_listener(uint16_t *port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	socklen_t len = sizeof(addr);
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check(fd >= 0, "socket: %s", strerror(errno));
	check_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	check_eq(listen(fd, 16), 0);
	check_eq(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
	*port = ntohs(addr.sin_port);
	return fd;
}

/* A blocking connect: loopback completes it from the listen backlog. */
static int tcp_connect(uint16_t port)
{
	struct sockaddr_in addr = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

struct echo {
	struct lull_loop *loop;
	int lfd, cfd, sfd;
	char cbuf[32], sbuf[32];
	int accept_res, srecv_res, ssend_res, csend_res, crecv_res;
	unsigned done;
};

#define ECHO_MSG "ping through lull"

static void echo_step_done(struct echo *e)
{
	if (++e->done == 5)
		lull_loop_stop(e->loop);
}

static void echo_server_sent(struct lull_loop *loop, int res, uint32_t flags,
			     void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->ssend_res = res;
	echo_step_done(e);
}

static void echo_server_received(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct echo *e = ctx;
	struct io_uring_sqe *sqe;

	(void)flags;
	e->srecv_res = res;
	if (res > 0) {
		sqe = get_sqe(loop, echo_server_sent, e);
		io_uring_prep_send(sqe, e->sfd, e->sbuf, (size_t)res, 0);
	}
	echo_step_done(e);
}

static void echo_accepted(struct lull_loop *loop, int res, uint32_t flags,
			  void *ctx)
{
	struct echo *e = ctx;
	struct io_uring_sqe *sqe;

	(void)flags;
	e->accept_res = res;
	e->sfd = res;
	if (res >= 0) {
		sqe = get_sqe(loop, echo_server_received, e);
		io_uring_prep_recv(sqe, e->sfd, e->sbuf, sizeof(e->sbuf), 0);
	}
	echo_step_done(e);
}

static void echo_client_sent(struct lull_loop *loop, int res, uint32_t flags,
			     void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->csend_res = res;
	echo_step_done(e);
}

static void echo_client_received(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct echo *e = ctx;

	(void)loop;
	(void)flags;
	e->crecv_res = res;
	echo_step_done(e);
}

LOOP_TEST(tcp_echo_through_accept_recv_and_send, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct echo e = { .sfd = -1, .accept_res = 1 };
	struct io_uring_sqe *sqe;
	bool stalled;
	uint16_t port;

	e.loop = loop_new(backend, 20 * MS);
	e.lfd = tcp_listener(&port);
	e.cfd = tcp_connect(port);
	check(e.cfd >= 0, "connect: %s", strerror(errno));
	memset(e.cbuf, 0, sizeof(e.cbuf));

	sqe = get_sqe(e.loop, echo_accepted, &e);
	io_uring_prep_accept(sqe, e.lfd, NULL, NULL, 0);
	sqe = get_sqe(e.loop, echo_client_sent, &e);
	io_uring_prep_send(sqe, e.cfd, ECHO_MSG, sizeof(ECHO_MSG), 0);
	sqe = get_sqe(e.loop, echo_client_received, &e);
	io_uring_prep_recv(sqe, e.cfd, e.cbuf, sizeof(e.cbuf), 0);
	arm_watchdog(e.loop, 5 * SEC, &stalled);
	run_loop(e.loop);

	check(!stalled, "the exchange stalled after %u of 5 steps", e.done);
	check(e.accept_res >= 0, "accept: %s", strerror(-e.accept_res));
	check_eq(e.csend_res, sizeof(ECHO_MSG));
	check_eq(e.srecv_res, sizeof(ECHO_MSG));
	check_eq(e.ssend_res, sizeof(ECHO_MSG));
	check_eq(e.crecv_res, sizeof(ECHO_MSG));
	check(strcmp(e.cbuf, ECHO_MSG) == 0, "echoed %.32s", e.cbuf);
	check_eq(loop_stats(e.loop).completions, 5);
	loop_free(e.loop);
	close(e.sfd);
	close(e.cfd);
	close(e.lfd);
}

/* --- ACCEPT must wait for a connection without blocking the loop -------- */

struct accept_wait {
	uint16_t port;
	int cfd, rescue_fd;
	int accept_res;
	unsigned done;
	_Atomic unsigned nop_ran;
	bool rescued;
	pthread_t thread;
};

static void accept_wait_done(struct lull_loop *loop, struct accept_wait *a)
{
	if (++a->done == 2)
		lull_loop_stop(loop);
}

static void accept_wait_accepted(struct lull_loop *loop, int res,
				 uint32_t flags, void *ctx)
{
	struct accept_wait *a = ctx;

	(void)flags;
	a->accept_res = res;
	accept_wait_done(loop, a);
}

/* Runs after the ACCEPT was started: only now does a client connect. */
static void accept_wait_connect(struct lull_loop *loop, int res,
				uint32_t flags, void *ctx)
{
	struct accept_wait *a = ctx;

	(void)res;
	(void)flags;
	a->cfd = tcp_connect(a->port);
	atomic_store(&a->nop_ran, 1);
	accept_wait_done(loop, a);
}

/*
 * If the NOP has not run after 2 s, the loop's thread is stuck in the
 * ACCEPT: connect from here to free it, and say so.
 */
static void *accept_wait_rescue(void *arg)
{
	const struct timespec pause = { .tv_nsec = (long)MS };
	struct accept_wait *a = arg;
	uint64_t deadline = now_ns() + 2 * SEC;

	while (!atomic_load(&a->nop_ran)) {
		if (now_ns() > deadline) {
			a->rescued = true;
			a->rescue_fd = tcp_connect(a->port);
			break;
		}
		nanosleep(&pause, NULL);
	}
	return NULL;
}

LOOP_TEST(accept_waits_for_a_connection_without_blocking_the_loop,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct accept_wait a = { .cfd = -1, .rescue_fd = -1, .accept_res = 1 };
	struct io_uring_sqe *sqe;
	int lfd = tcp_listener(&a.port);

	/* A blocking listening socket, as io_uring users have them. */
	sqe = get_sqe(loop, accept_wait_accepted, &a);
	io_uring_prep_accept(sqe, lfd, NULL, NULL, 0);
	get_sqe(loop, accept_wait_connect, &a);
	check_eq(pthread_create(&a.thread, NULL, accept_wait_rescue, &a), 0);
	run_loop(loop);
	join_within(a.thread, 8000, "the rescuing thread");
	check(!a.rescued,
	      "the loop's thread blocked in ACCEPT: nothing else ran until "
	      "a connection came");
	check(a.accept_res >= 0, "accept: %s", strerror(-a.accept_res));
	check(a.cfd >= 0, "connect failed");
	loop_free(loop);
	close(a.accept_res);
	close(a.cfd);
	if (a.rescue_fd >= 0)
		close(a.rescue_fd);
	close(lfd);
}

struct poll_wait {
	int fds[2];
	struct cqe_seen poll, nop;
	unsigned left;
};

static void poll_wait_write(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	struct poll_wait *p = ctx;

	(void)loop;
	(void)res;
	(void)flags;
	p->nop.calls++;
	/* The poll must still be waiting: nothing was readable before. */
	check_eq(p->poll.calls, 0);
	check_eq(write(p->fds[1], "x", 1), 1);
}

LOOP_TEST(poll_add_completes_when_the_file_becomes_ready, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct poll_wait p = { .left = 1 };
	struct io_uring_sqe *sqe;

	make_pipe(p.fds);
	p.poll.left = &p.left;
	sqe = get_sqe(loop, record_cqe, &p.poll);
	io_uring_prep_poll_add(sqe, p.fds[0], POLLIN);
	get_sqe(loop, poll_wait_write, &p);
	run_loop(loop);
	check_eq(p.nop.calls, 1);
	check_eq(p.poll.calls, 1);
	check(p.poll.res > 0 && (p.poll.res & POLLIN),
	      "poll completed with %d", p.poll.res);
	loop_free(loop);
	close(p.fds[0]);
	close(p.fds[1]);
}

LOOP_TEST(async_cancel_ends_a_pending_read_with_ecanceled, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen rd = { .res = 1 }, cancel = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 2;
	uint64_t user_data;
	char buf[16];
	int fds[2];

	make_pipe(fds);
	rd.left = &left;
	cancel.left = &left;
	sqe = get_sqe(loop, record_cqe, &rd);
	io_uring_prep_read(sqe, fds[0], buf, sizeof(buf), (uint64_t)-1);
	user_data = sqe->user_data;
	sqe = get_sqe(loop, record_cqe, &cancel);
	io_uring_prep_cancel64(sqe, user_data, 0);
	run_loop(loop);
	check_eq(rd.calls, 1);
	check_eq(cancel.calls, 1);
	check_eq(rd.res, -ECANCELED);
	check_eq(cancel.res, 0);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

LOOP_TEST(unsupported_opcode_completes_with_eopnotsupp_on_epoll,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 20 * MS);
	struct cqe_seen op = { .res = 1 };
	struct io_uring_sqe *sqe;
	unsigned left = 1;
	int fds[2];

	make_pipe(fds);
	op.left = &left;
	sqe = get_sqe(loop, record_cqe, &op);
	io_uring_prep_fsync(sqe, fds[1], 0);
	run_loop(loop);
	check_eq(op.calls, 1);
	/* io_uring runs it (an fsync of a pipe is -EINVAL there). */
	if (backend == LULL_BACKEND_EPOLL)
		check_eq(op.res, -EOPNOTSUPP);
	loop_free(loop);
	close(fds[0]);
	close(fds[1]);
}

#define CHAIN_LENGTH 100u

static void chain_next(struct lull_loop *loop, int res, uint32_t flags,
		       void *ctx)
{
	unsigned *count = ctx;

	(void)flags;
	check_eq(res, 0);
	if (++*count == CHAIN_LENGTH)
		lull_loop_stop(loop);
	else
		get_sqe(loop, chain_next, count);
}

LOOP_TEST(callbacks_submit_a_chain_of_nops_without_delay, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	/* The default safety net: a stalled SQE would wait for it. */
	struct lull_loop *loop = loop_new(backend, 0);
	unsigned count = 0;
	bool stalled;

	get_sqe(loop, chain_next, &count);
	arm_watchdog(loop, 2 * SEC, &stalled);
	run_loop(loop);
	check(!stalled,
	      "only %u of %u NOPs completed in 2 s: an SQE queued by a "
	      "callback waited for something else to wake the loop",
	      count, CHAIN_LENGTH);
	check_eq(count, CHAIN_LENGTH);
	check_eq(loop_stats(loop).completions, CHAIN_LENGTH);
	loop_free(loop);
}

#define FLUSH_SQES 50u

static void submit_many(struct lull_loop *loop, int res, uint32_t flags,
			void *ctx)
{
	struct cqe_seen *c = ctx;

	(void)res;
	(void)flags;
	/* Far more than the 4 entries of the queue: it is flushed. */
	for (unsigned i = 0; i < FLUSH_SQES; i++)
		get_sqe(loop, record_cqe, c);
}

LOOP_TEST(sqe_flushes_a_full_queue_while_running_and_is_ebusy_before,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop_config cfg = {
		.backend = backend,
		.entries = 4,
		.safety_timeout_ns = 20 * MS,
	};
	struct lull_loop *loop = loop_new_cfg(&cfg);
	struct cqe_seen first = { 0 }, many = { 0 };
	struct io_uring_sqe *sqe;
	unsigned prepared = 1, left;
	int ret = 0;

	/*
	 * Before the first run nothing can be flushed: io_uring's queue of 4
	 * fills up (epoll's has no limit).
	 */
	get_sqe(loop, submit_many, &many);
	while (prepared < 8) {
		ret = lull_loop_sqe(loop, record_cqe, &first, &sqe);
		if (ret < 0)
			break;
		prepared++;
	}
	if (backend == LULL_BACKEND_EPOLL) {
		check_eq(ret, 0);
	} else {
		check_eq(ret, -EBUSY);
		check_eq(prepared, 4);
	}
	left = prepared - 1 + FLUSH_SQES;
	first.left = &left;
	many.left = &left;
	run_loop(loop);
	check_eq(first.calls, prepared - 1);
	check_eq(many.calls, FLUSH_SQES);
	check_eq(loop_stats(loop).completions, prepared + FLUSH_SQES);
	loop_free(loop);
}
