/* SPDX-License-Identifier: MIT */
/*
 * handoff_mechanisms.c - the consumers that read a lull ring: poll (sleep
 * --poll-interval-us when empty), spin (PAUSE), yield (sched_yield()), and
 * lull's own ways of waiting: lull_ring_wait() (lull-blocking,
 * lull-spin-park) and a lull_loop on each backend (lull, lull-uring-futex,
 * lull-uring-eventfd, lull-epoll).  Each hands every message to ho_take(),
 * the measurement loop's clock and checks.  And the list of every
 * mechanism, the floors' and other libraries' included: its name, how it
 * waits, and the floor each lull mechanism is compared with.
 */
#include "handoff.h"

/* The Makefile defines these where it finds the packages. */
#ifdef HAVE_MOODYCAMEL
#define MOODYCAMEL_QUEUE (&ho_moodycamel_blocking)
#else
#define MOODYCAMEL_QUEUE NULL
#endif
#ifdef HAVE_UV
#define UV_QUEUE (&ho_uv_async)
#else
#define UV_QUEUE NULL
#endif

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
			      LULL_BACKEND_EPOLL, MECH_EPOLL_FLOOR },
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
	[MECH_EPOLL_FLOOR] = { "epoll-floor", STYLE_FLOOR, true, 0,
			       MECH_KINDS },
	[MECH_MOODYCAMEL_BLOCKING] = { "moodycamel-blocking", STYLE_QUEUE,
				       true, 0, MECH_KINDS,
				       MOODYCAMEL_QUEUE,
				       "libconcurrentqueue-dev" },
	[MECH_UV_ASYNC] = { "uv-async", STYLE_QUEUE, true, 0, MECH_KINDS,
			    UV_QUEUE, "libuv1-dev" },
	[MECH_MSG_RING] = { "msg-ring", STYLE_QUEUE, true, 0, MECH_KINDS,
			    &ho_msg_ring, "liburing" },
	/*
	 * Across processes (handoff_xproc.c).  lull-blocking-memfd is the
	 * step between: a consumer thread of this process, but on a shared
	 * ring, so that what the shared ring's park costs (a fence on both
	 * sides, the wait beside the producers' pidfds) and what another
	 * process costs show apart.
	 */
	[MECH_LULL_BLOCKING_MEMFD] = {
		.name = "lull-blocking-memfd", .style = STYLE_LULL_WAIT,
		.sleeps = true, .backend = LULL_BACKEND_BLOCKING,
		.floor = MECH_URING_FUTEX_FLOOR, .proc = PROC_MEMFD,
		.same = MECH_LULL_BLOCKING },
	[MECH_LULL_BLOCKING_XPROC] = {
		.name = "lull-blocking-xproc", .style = STYLE_LULL_WAIT,
		.sleeps = true, .backend = LULL_BACKEND_BLOCKING,
		.floor = MECH_FUTEX_XPROC_FLOOR, .proc = PROC_OTHER,
		.same = MECH_LULL_BLOCKING },
	[MECH_LULL_URING_FUTEX_XPROC] = {
		.name = "lull-uring-futex-xproc", .style = STYLE_LULL_LOOP,
		.sleeps = true, .backend = LULL_BACKEND_URING_FUTEX,
		.floor = MECH_FUTEX_XPROC_FLOOR, .proc = PROC_OTHER,
		.same = MECH_LULL_URING_FUTEX },
	/* The two loops that reach a shared ring through a bridge thread. */
	[MECH_LULL_URING_EVENTFD_XPROC] = {
		.name = "lull-uring-eventfd-xproc", .style = STYLE_LULL_LOOP,
		.sleeps = true, .backend = LULL_BACKEND_URING_EVENTFD,
		.floor = MECH_FUTEX_XPROC_FLOOR, .proc = PROC_OTHER,
		.same = MECH_LULL_URING_EVENTFD },
	[MECH_LULL_EPOLL_XPROC] = {
		.name = "lull-epoll-xproc", .style = STYLE_LULL_LOOP,
		.sleeps = true, .backend = LULL_BACKEND_EPOLL,
		.floor = MECH_FUTEX_XPROC_FLOOR, .proc = PROC_OTHER,
		.same = MECH_LULL_EPOLL },
	[MECH_FUTEX_XPROC_FLOOR] = {
		.name = "futex-xproc-floor", .style = STYLE_FLOOR,
		.sleeps = true, .floor = MECH_KINDS, .proc = PROC_OTHER,
		.same = MECH_FUTEX_FLOOR },
	[MECH_UNIX_XPROC] = {
		.name = "unix-xproc", .style = STYLE_QUEUE, .sleeps = true,
		.floor = MECH_KINDS, .queue = &ho_unix_xproc, .package = "-",
		.proc = PROC_OTHER, .same = MECH_KINDS },
	[MECH_PIPE_XPROC] = {
		.name = "pipe-xproc", .style = STYLE_QUEUE, .sleeps = true,
		.floor = MECH_KINDS, .queue = &ho_pipe_xproc, .package = "-",
		.proc = PROC_OTHER, .same = MECH_KINDS },
};

static int ring_handler(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;
	struct msg m;

	/*
	 * The ring's end: the producer's detach (the last one) shuts it
	 * down, and the poison record follows every message.
	 */
	if (rec->type == LULL_TYPE_POISON)
		return LULL_READ_CONTINUE;
	if (unlikely(rec->len != sizeof(m) || rec->type != MSG_TYPE))
		ho_die(c->run, "malformed record: type %d, %u bytes", rec->type,
		    rec->len);
	memcpy(&m, rec->data, sizeof(m));
	ho_take(c, m.seq, m.t_push);
	if (!c->done)
		return LULL_READ_CONTINUE;
	if (c->loop)
		lull_loop_stop(c->loop);
	return LULL_READ_STOP;
}

/* Read what is there; false when the ring was empty. */
static inline bool ring_drain(struct consumer *c)
{
	int r = lull_ring_read(c->ring, ring_handler, c, READ_BATCH);

	if (likely(r > 0))
		return true;
	if (r != -EAGAIN)
		ho_die(c->run, "lull_ring_read: %s", lull_strerror(r));
	return false;
}

void ho_consume_ring_poll(struct consumer *c)
{
	enum mech_kind kind = c->run->mech->kind;
	struct timespec interval = {
		.tv_sec = (time_t)(c->run->opt->poll_ns / 1000000000u),
		.tv_nsec = (long)(c->run->opt->poll_ns % 1000000000u),
	};

	while (!c->done) {
		if (ring_drain(c))
			continue;
		c->iters++;
		if (kind == MECH_POLL)
			nanosleep(&interval, NULL);
		else if (kind == MECH_SPIN)
			ck_pr_stall();
		else
			sched_yield();
	}
}

void ho_consume_lull_wait(struct consumer *c)
{
	struct run *run = c->run;
	struct lull_park_config pc = {
		.spin_ns = run->mech->spin_ns,
		.safety_timeout_ns = run->opt->safety_ns,
	};
	int r;

	r = lull_ring_park_config(c->ring, &pc);
	if (r < 0)
		ho_die(run, "lull_ring_park_config: %s", lull_strerror(r));
	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	while (!c->done) {
		if (ring_drain(c))
			continue;
		c->iters++;
		r = lull_ring_wait(c->ring, -1);
		if (r < 0)
			ho_die(run, "lull_ring_wait: %s", lull_strerror(r));
	}
}

void ho_consume_lull_loop(struct consumer *c)
{
	struct run *run = c->run;
	struct lull_loop_config cfg = {
		.backend = mech_descs[run->mech->kind].backend,
		.spin_ns = run->mech->spin_ns,
		.safety_timeout_ns = run->opt->safety_ns,
	};
	int r;

	r = lull_loop_create(&c->loop, &cfg);
	if (r < 0)
		ho_die(run, "lull_loop_create: %s", lull_strerror(r));
	/* "lull" asked for AUTO: note what lull picked. */
	run->mech->backend = lull_loop_backend(c->loop);
	r = lull_loop_attach(c->loop, c->ring, ring_handler, c, 0);
	if (r < 0)
		ho_die(run, "lull_loop_attach: %s", lull_strerror(r));
	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	r = lull_loop_run(c->loop);
	if (r < 0)
		ho_die(run, "lull_loop_run: %s", lull_strerror(r));
	if (!c->done)
		ho_die(run, "lull_loop_run returned before the last message");
	r = lull_loop_destroy(c->loop);
	if (r < 0)
		ho_die(run, "lull_loop_destroy: %s", lull_strerror(r));
	c->loop = NULL;
}
