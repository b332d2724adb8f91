/* SPDX-License-Identifier: MIT */
/*
 * loop.c - the lull loop: drain rings, run completions and timers, park.
 *
 * One pass: reap completions, hand each ring's next batch to its handler,
 * and when nothing was ready, park.  Parking runs the handshake of park.c
 * for every attached ring at once (announce on each, one barrier, re-check
 * each) and then sleeps in a single io_uring_enter() (or epoll_wait()),
 * which also submits whatever callbacks queued.  The epoll fallback lives
 * in loop_epoll.c.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ck_pr.h>

#include "loop_internal.h"

#define LOOP_DEFAULT_ENTRIES 256u
#define LOOP_DEFAULT_BATCH 256u
#define LOOP_CQE_BATCH 64u

static bool backend_is_uring(int backend)
{
	return backend == LULL_BACKEND_URING_FUTEX ||
	       backend == LULL_BACKEND_URING_EVENTFD;
}

/* --- setup ---------------------------------------------------------- */

static int uring_setup(struct lull_loop *loop, unsigned entries)
{
	struct io_uring_params params;
	int ret;

	memset(&params, 0, sizeof(params));
	/*
	 * SINGLE_ISSUER + DEFER_TASKRUN: completions are processed only when
	 * the loop's thread enters the kernel to wait, never by interrupting
	 * it.  R_DISABLED: the issuer becomes the thread that first runs the
	 * loop, not the one that created it.
	 */
	params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
		       IORING_SETUP_R_DISABLED | IORING_SETUP_CQSIZE;
	params.cq_entries = entries * 16;
	ret = io_uring_queue_init_params(entries, &loop->uring, &params);
	if (ret == -EINVAL) { /* before Linux 6.1 */
		memset(&params, 0, sizeof(params));
		params.flags = IORING_SETUP_CQSIZE;
		params.cq_entries = entries * 16;
		ret = io_uring_queue_init_params(entries, &loop->uring,
						 &params);
	}
	if (ret < 0)
		return ret;
	loop->has_uring = true;
	loop->uring_enabled = !(params.flags & IORING_SETUP_R_DISABLED);
	loop->no_iowait = params.features & IORING_FEAT_NO_IOWAIT;
	if (!(params.features & IORING_FEAT_EXT_ARG))
		return -EOPNOTSUPP;
	return 0;
}

LULL_EXPORT int lull_loop_create(struct lull_loop **loopp,
				 const struct lull_loop_config *cfg)
{
	struct lull_loop_config defaults = { 0 };
	struct lull_loop *loop;
	long fd;
	int backend, ret;

	if (!loopp)
		return -EINVAL;
	if (!cfg)
		cfg = &defaults;
	backend = cfg->backend;
	if (backend == LULL_BACKEND_AUTO) {
		backend = lull_backend_probe();
		if (backend < 0)
			return backend;
	} else {
		ret = lull_backend_supported(cfg->backend);
		if (ret < 0)
			return ret;
	}
	if (backend == LULL_BACKEND_BLOCKING)
		return -EINVAL;

	loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	loop->backend = backend;
	loop->epfd = -1;
	loop->sigfd = -1;
	/* The loop has no adaptive spin: LULL_PARK_SPIN_ADAPTIVE parks at once. */
	loop->spin_ns = cfg->spin_ns == LULL_PARK_SPIN_ADAPTIVE ? 0 : cfg->spin_ns;
	loop->coalesce_ns = cfg->coalesce_ns;
	/* 0: no safety net, unless LULL_SAFETY_NET_MS sets one. */
	loop->safety_ns = lull__safety_ns(cfg->safety_timeout_ns);
	if (loop->safety_ns >= LULL_NS_FOREVER)
		loop->safety_ns = 0;
	atomic_init(&loop->stop_requests, 0);
	/*
	 * Blocking: an io_uring read of a non-blocking file fails with -EAGAIN
	 * instead of waiting.  The epoll backend makes it non-blocking.
	 */
	fd = LULL_SYSCALL(eventfd(0, EFD_CLOEXEC));
	if (fd < 0) {
		free(loop);
		return (int)fd;
	}
	loop->kick_fd = (int)fd;
	if (backend_is_uring(backend))
		ret = uring_setup(loop, cfg->entries ? cfg->entries
						    : LOOP_DEFAULT_ENTRIES);
	else
		ret = lull__epoll_init(loop);
	if (ret < 0) {
		lull_loop_destroy(loop);
		return ret;
	}
	*loopp = loop;
	return 0;
}

static void ring_unhook(struct lull_loop *loop, struct loop_ring *lr)
{
	struct lull_region *region = lr->ring->region;

	if (atomic_load_explicit(&region->wake_fd, memory_order_relaxed) ==
	    loop->kick_fd)
		lull__wake_fd_set(region, -1);
	lull__park_end(lr->ring);
	lr->ring->loop = NULL;
}

LULL_EXPORT int lull_loop_destroy(struct lull_loop *loop)
{
	struct lull_loop_timer *timer, *next_timer;
	struct loop_op *op, *next_op;

	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	for (unsigned i = 0; i < loop->nrings; i++) {
		ring_unhook(loop, loop->rings[i]);
		free(loop->rings[i]);
	}
	free(loop->rings);
	/* Tearing the io_uring down cancels everything still in flight. */
	if (loop->has_uring)
		io_uring_queue_exit(&loop->uring);
	lull__epoll_fini(loop);
	for (timer = loop->timers; timer; timer = next_timer) {
		next_timer = timer->next;
		free(timer);
	}
	/* Every op the loop allocated, in flight or not, is on all_ops. */
	for (op = loop->all_ops; op; op = next_op) {
		next_op = op->all_next;
		free(op);
	}
	while (loop->detached) {
		struct loop_ring *lr = loop->detached;

		loop->detached = lr->next_detached;
		free(lr);
	}
	if (loop->sigfd >= 0)
		close(loop->sigfd);
	close(loop->kick_fd);
	free(loop);
	return 0;
}

LULL_EXPORT int lull_loop_backend(const struct lull_loop *loop)
{
	return loop ? loop->backend : -EINVAL;
}

LULL_EXPORT int lull_loop_stats(const struct lull_loop *loop,
				struct lull_loop_stats *st)
{
	if (!loop || !st)
		return -EINVAL;
	*st = loop->stats;
	return 0;
}

/* --- rings ------------------------------------------------------------ */

static void recompute_asym(struct lull_loop *loop)
{
	loop->any_asym = false;
	for (unsigned i = 0; i < loop->nrings; i++)
		if (loop->rings[i]->ring->region->flags &
		    LULL_REGION_ASYM_BARRIER)
			loop->any_asym = true;
}

LULL_EXPORT int lull_loop_attach(struct lull_loop *loop,
				 struct lull_ring *ring, lull_record_fn fn,
				 void *ctx, unsigned batch)
{
	struct loop_ring *lr, **grown;
	unsigned cap;

	if (!loop || !ring || !fn)
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	if (ring->loop || ring->uring_pending)
		return -EBUSY;
	if (loop->nrings == loop->rings_cap) {
		cap = loop->rings_cap ? loop->rings_cap * 2 : 8;
		grown = realloc(loop->rings, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		loop->rings = grown;
		loop->rings_cap = cap;
	}
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return -ENOMEM;
	lr->ring = ring;
	lr->fn = fn;
	lr->ctx = ctx;
	lr->batch = batch ? batch : LOOP_DEFAULT_BATCH;
	loop->rings[loop->nrings++] = lr;
	ring->loop = loop;
	/* Producers of this ring wake the loop through its eventfd. */
	if (loop->backend != LULL_BACKEND_URING_FUTEX)
		lull__wake_fd_set(ring->region, loop->kick_fd);
	recompute_asym(loop);
	/* A stopping loop waits for every ring's end: this one's too. */
	if (loop->stopping)
		lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL);
	return 0;
}

LULL_EXPORT int lull_loop_detach(struct lull_loop *loop,
				 struct lull_ring *ring)
{
	struct io_uring_sqe *sqe;
	struct loop_ring *lr;
	unsigned i;

	if (!loop || !ring)
		return -EINVAL;
	for (i = 0; i < loop->nrings; i++)
		if (loop->rings[i]->ring == ring)
			break;
	if (i == loop->nrings)
		return -ENOENT;
	lr = loop->rings[i];
	loop->rings[i] = loop->rings[--loop->nrings];
	ring_unhook(loop, lr);
	recompute_asym(loop);
	if (!lr->futex_armed) {
		free(lr);
		return 0;
	}
	/*
	 * Its futex wait is still in the kernel, pointing at lr through its
	 * user_data: cancel it, and free lr when its CQE arrives.
	 */
	lr->detached = true;
	lr->ring = NULL;
	lr->next_detached = loop->detached;
	loop->detached = lr;
	sqe = io_uring_get_sqe(&loop->uring);
	if (sqe) {
		io_uring_prep_cancel64(sqe, loop_tag(lr, TAG_RING), 0);
		io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
	}
	/* Without an SQE the wait ends with the loop's io_uring. */
	return 0;
}

/*
 * One batch from every ring.  Returns true when some ring may hold more
 * (it filled its batch, or it ended), so the loop should not park yet.  A
 * ring whose handler consumed the poison record is detached: there is
 * nothing more to read from it, and its owner may destroy it.
 */
static bool drain_rings(struct lull_loop *loop)
{
	bool more = false;
	unsigned i = 0;
	int n;

	while (i < loop->nrings) {
		struct loop_ring *lr = loop->rings[i];
		struct lull_ring *ring = lr->ring;
		unsigned batch = lr->batch;

		/* The handler may detach (and free) lr: use only copies. */
		n = lull_ring_read(ring, lr->fn, lr->ctx, batch);
		if (n > 0) {
			loop->stats.records += (unsigned)n;
			if ((unsigned)n >= batch)
				more = true;
		} else if (n == -EPIPE) {
			/*
			 * Another pass, not a park: the loop may be done.  The
			 * detach moves the last ring into slot i: look at it
			 * next.
			 */
			more = true;
			if (lull_loop_detach(loop, ring) == 0)
				continue;
		}
		i++;
	}
	return more;
}

/* Has lull_loop_stop() been called since the loop last acted on it? */
static bool stop_pending(struct lull_loop *loop)
{
	/* Pairs with the release RMW in lull_loop_stop(). */
	return atomic_load_explicit(&loop->stop_requests,
				    memory_order_acquire) != loop->stops_seen;
}

/*
 * Act on lull_loop_stop(): the first shuts every attached ring down
 * gracefully (each on its own: one ring's state never keeps the others
 * from closing), a second one immediately.  The loop then runs on until
 * every ring has delivered its poison and detached.
 */
static void stop_rings(struct lull_loop *loop)
{
	/* Pairs with the release RMW in lull_loop_stop(). */
	unsigned stops = atomic_load_explicit(&loop->stop_requests,
					      memory_order_acquire);
	unsigned how = stops - loop->stops_at_run >= 2
			       ? LULL_SHUTDOWN_IMMEDIATE
			       : LULL_SHUTDOWN_GRACEFUL;

	loop->stops_seen = stops;
	loop->stopping = true;
	for (unsigned i = 0; i < loop->nrings; i++)
		lull_ring_shutdown(loop->rings[i]->ring, how);
}

/* --- user SQEs, timers, signals --------------------------------------- */

static struct loop_op *op_alloc(struct lull_loop *loop)
{
	struct loop_op *op = loop->free_ops;

	if (op) {
		loop->free_ops = op->next;
		struct loop_op *all_next = op->all_next;

		memset(op, 0, sizeof(*op));
		op->all_next = all_next;
		return op;
	}
	op = calloc(1, sizeof(*op));
	if (op) {
		op->all_next = loop->all_ops;
		loop->all_ops = op;
	}
	return op;
}

void lull__loop_op_complete(struct lull_loop *loop, struct loop_op *op,
			    int res, uint32_t flags)
{
	bool last = !(flags & IORING_CQE_F_MORE);

	/* Before the callback, which may cancel by its ctx. */
	if (last)
		op->in_flight = false;
	if (op->fn) {
		loop->stats.completions++;
		op->fn(loop, res, flags, op->ctx);
	}
	if (!last)
		return;
	op->next = loop->free_ops;
	loop->free_ops = op;
	loop->ops_in_flight--;
}

/*
 * An SQE from the loop's io_uring, flushing the queue to the kernel once
 * if it is full.  NULL when there is still none.
 */
static struct io_uring_sqe *uring_sqe(struct lull_loop *loop)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->uring);

	if (!sqe && loop->uring_enabled) {
		io_uring_submit(&loop->uring);
		sqe = io_uring_get_sqe(&loop->uring);
	}
	return sqe;
}

LULL_EXPORT int lull_loop_sqe(struct lull_loop *loop, lull_cqe_fn fn,
			      void *ctx, struct io_uring_sqe **sqep)
{
	struct io_uring_sqe *sqe;
	struct loop_op *op;

	if (!loop || !fn || !sqep)
		return -EINVAL;
	op = op_alloc(loop);
	if (!op)
		return -ENOMEM;
	if (loop->has_uring) {
		sqe = uring_sqe(loop);
		if (!sqe) {
			op->next = loop->free_ops;
			loop->free_ops = op;
			return -EBUSY;
		}
	} else {
		sqe = &op->sqe;
		op->next = loop->pending_ops;
		loop->pending_ops = op;
	}
	op->fn = fn;
	op->ctx = ctx;
	op->in_flight = true;
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data64(sqe, loop_tag(op, TAG_OP));
	loop->ops_in_flight++;
	*sqep = sqe;
	return 0;
}

/*
 * Ask for @op to be cancelled: an ASYNC_CANCEL of its user_data.  Its
 * callback runs when its last CQE comes, with -ECANCELED or whatever it
 * completed with first.  The cancel cannot hit a later op that reuses
 * @op's memory: ops are recycled only when their last CQE is reaped, and
 * an op queued after that is submitted after this cancel.  Returns 0 or
 * -EBUSY (no SQE; @op is left to be asked again) or -ENOMEM.
 */
static int op_cancel_ask(struct lull_loop *loop, struct loop_op *op)
{
	struct io_uring_sqe *sqe;
	struct loop_op *cancel;

	if (loop->has_uring) {
		sqe = uring_sqe(loop);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_cancel64(sqe, loop_tag(op, TAG_OP), 0);
		io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
	} else {
		/* An emulated ASYNC_CANCEL, queued after @op. */
		cancel = op_alloc(loop);
		if (!cancel)
			return -ENOMEM;
		io_uring_prep_cancel64(&cancel->sqe, loop_tag(op, TAG_OP), 0);
		cancel->in_flight = true;
		cancel->next = loop->pending_ops;
		loop->pending_ops = cancel;
		loop->ops_in_flight++;
	}
	op->cancel_asked = true;
	return 0;
}

/*
 * Ask every user op in flight whose ctx is @ctx (any ctx when @all) to be
 * cancelled, once each.  Returns how many were asked, or the first error.
 */
/* Whether a stop has an op in flight left to cancel (ops_cancel()). */
static bool ops_to_cancel(const struct lull_loop *loop)
{
	for (struct loop_op *op = loop->all_ops; op; op = op->all_next)
		if (op->in_flight && op->fn && !op->cancel_asked)
			return true;
	return false;
}

static int ops_cancel(struct lull_loop *loop, void *ctx, bool all)
{
	int asked = 0, ret;

	for (struct loop_op *op = loop->all_ops; op; op = op->all_next) {
		if (!op->in_flight || !op->fn || op->cancel_asked ||
		    (!all && op->ctx != ctx))
			continue;
		ret = op_cancel_ask(loop, op);
		if (ret < 0)
			return ret;
		asked++;
	}
	return asked;
}

LULL_EXPORT int lull_loop_cancel(struct lull_loop *loop, void *ctx)
{
	if (!loop)
		return -EINVAL;
	return ops_cancel(loop, ctx, false);
}

static int timer_arm(struct lull_loop *loop, struct lull_loop_timer *timer,
		     uint64_t delay_ns)
{
	struct io_uring_sqe *sqe;

	if (!loop->has_uring) {
		/* Saturated: UINT64_MAX is a deadline that never comes. */
		timer->deadline_ns = lull__deadline_ns(lull__now_ns(),
						       delay_ns);
		return 0;
	}
	sqe = uring_sqe(loop);
	if (!sqe)
		return -EBUSY;
	timer->ts.tv_sec = (int64_t)(delay_ns / 1000000000u);
	timer->ts.tv_nsec = (long long)(delay_ns % 1000000000u);
	io_uring_prep_timeout(sqe, &timer->ts, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_tag(timer, TAG_TIMER));
	timer->armed = true;
	return 0;
}

static void timer_free(struct lull_loop *loop, struct lull_loop_timer *timer)
{
	struct lull_loop_timer **link;

	for (link = &loop->timers; *link; link = &(*link)->next)
		if (*link == timer) {
			*link = timer->next;
			break;
		}
	free(timer);
}

void lull__loop_timer_fired(struct lull_loop *loop,
			    struct lull_loop_timer *timer)
{
	timer->armed = false;
	timer->firing = true;
	if (!timer->cancelled)
		timer->fn(loop, timer->ctx);
	timer->firing = false;
	if (timer->cancelled || !timer->interval_ns ||
	    timer_arm(loop, timer, timer->interval_ns) < 0)
		timer_free(loop, timer);
}

LULL_EXPORT int lull_loop_timer(struct lull_loop *loop, uint64_t delay_ns,
				uint64_t interval_ns, lull_timer_fn fn,
				void *ctx, struct lull_loop_timer **timerp)
{
	struct lull_loop_timer *timer;
	int ret;

	if (!loop || !fn)
		return -EINVAL;
	timer = calloc(1, sizeof(*timer));
	if (!timer)
		return -ENOMEM;
	timer->loop = loop;
	timer->fn = fn;
	timer->ctx = ctx;
	timer->interval_ns = interval_ns;
	ret = timer_arm(loop, timer, delay_ns);
	if (ret < 0) {
		free(timer);
		return ret;
	}
	timer->next = loop->timers;
	loop->timers = timer;
	if (timerp)
		*timerp = timer;
	return 0;
}

LULL_EXPORT int lull_loop_timer_cancel(struct lull_loop *loop,
				       struct lull_loop_timer *timer)
{
	struct lull_loop_timer *t;
	struct io_uring_sqe *sqe;

	if (!loop || !timer)
		return -EINVAL;
	for (t = loop->timers; t && t != timer; t = t->next)
		;
	if (!t || t->cancelled)
		return -ENOENT;
	t->cancelled = true;
	if (!loop->has_uring) {
		if (!t->firing) /* else freed when its callback returns */
			timer_free(loop, t);
		return 0;
	}
	if (!t->armed)
		return 0; /* inside its own callback: freed on return */
	sqe = uring_sqe(loop);
	if (!sqe)
		return 0; /* it fires once more, silently, then is freed */
	io_uring_prep_timeout_remove(sqe, loop_tag(t, TAG_TIMER), 0);
	io_uring_sqe_set_data64(sqe, loop_tag(NULL, TAG_IGNORE));
	return 0;
}

LULL_EXPORT int lull_loop_signals(struct lull_loop *loop, const int *signos,
				  int count, lull_signal_fn fn, void *ctx)
{
	sigset_t set;
	long fd;

	if (!loop || !signos || count <= 0 || !fn)
		return -EINVAL;
	if (loop->sigfd >= 0)
		return -EBUSY;
	sigemptyset(&set);
	for (int i = 0; i < count; i++)
		if (signos[i] == SIGKILL || signos[i] == SIGSTOP ||
		    sigaddset(&set, signos[i]) != 0)
			return -EINVAL;
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* Blocking for an io_uring read, non-blocking for epoll's. */
	fd = LULL_SYSCALL(signalfd(-1, &set,
				   SFD_CLOEXEC |
					   (loop->has_uring ? 0 : SFD_NONBLOCK)));
	if (fd < 0)
		return (int)fd;
	loop->sigfd = (int)fd;
	loop->sigfn = fn;
	loop->sigctx = ctx;
	if (!loop->has_uring) {
		struct epoll_event ev = {
			.events = EPOLLIN,
			.data.u64 = loop_tag(NULL, TAG_SIGNAL),
		};
		long ret = LULL_SYSCALL(epoll_ctl(loop->epfd, EPOLL_CTL_ADD,
						  loop->sigfd, &ev));
		if (ret < 0)
			return (int)ret;
	}
	return 0;
}

LULL_EXPORT int lull_loop_stop(struct lull_loop *loop)
{
	if (!loop)
		return -EINVAL;
	/* Pairs with the acquire load in stop_pending(). */
	atomic_fetch_add_explicit(&loop->stop_requests, 1,
				  memory_order_release);
	/* Wakes a parked loop; async-signal-safe, like the store above. */
	LULL_SYSCALL(eventfd_write(loop->kick_fd, 1));
	return 0;
}

/* --- the io_uring backends -------------------------------------------- */

static void uring_dispatch(struct lull_loop *loop, uint64_t user_data,
			   int res, uint32_t flags)
{
	void *ptr = (void *)(uintptr_t)(user_data & ~(uint64_t)TAG_MASK);

	switch (user_data & TAG_MASK) {
	case TAG_OP:
		lull__loop_op_complete(loop, ptr, res, flags);
		break;
	case TAG_RING: {
		struct loop_ring *lr = ptr;

		lr->futex_armed = false;
		if (lr->detached) {
			struct loop_ring **link = &loop->detached;

			while (*link != lr)
				link = &(*link)->next_detached;
			*link = lr->next_detached;
			free(lr);
		}
		break;
	}
	case TAG_KICK:
		loop->kick_armed = false;
		break;
	case TAG_TIMER: {
		struct lull_loop_timer *timer = ptr;

		if (res == -ETIME) {
			lull__loop_timer_fired(loop, timer);
		} else {
			timer->armed = false;
			timer_free(loop, timer); /* removed */
		}
		break;
	}
	case TAG_SIGNAL:
		loop->sig_armed = false;
		if (res == (int)sizeof(loop->sigbuf))
			loop->sigfn(loop, (int)loop->sigbuf.ssi_signo,
				    loop->sigctx);
		break;
	default:
		break;
	}
}

/*
 * Reap every CQE there is.  They are copied out and the CQ advanced before
 * any callback runs, since a callback may submit, and an SQE that
 * completes inline posts its CQE right away.
 */
static unsigned uring_reap(struct lull_loop *loop)
{
	struct io_uring_cqe *cqes[LOOP_CQE_BATCH];
	struct {
		uint64_t user_data;
		int res;
		uint32_t flags;
	} done[LOOP_CQE_BATCH];
	unsigned n, total = 0;

	do {
		n = io_uring_peek_batch_cqe(&loop->uring, cqes,
					    LOOP_CQE_BATCH);
		for (unsigned i = 0; i < n; i++) {
			done[i].user_data = cqes[i]->user_data;
			done[i].res = cqes[i]->res;
			done[i].flags = cqes[i]->flags;
		}
		io_uring_cq_advance(&loop->uring, n);
		for (unsigned i = 0; i < n; i++)
			uring_dispatch(loop, done[i].user_data, done[i].res,
				       done[i].flags);
		total += n;
	} while (n == LOOP_CQE_BATCH);
	return total;
}

/* Keep one read of @fd in flight into @buf, tagged @tag. */
static void uring_arm_read(struct lull_loop *loop, bool *armed, int fd,
			   void *buf, unsigned len, enum loop_tag tag)
{
	struct io_uring_sqe *sqe;

	if (*armed || fd < 0)
		return;
	sqe = uring_sqe(loop);
	if (!sqe)
		return;
	io_uring_prep_read(sqe, fd, buf, len, 0);
	io_uring_sqe_set_data64(sqe, loop_tag(NULL, tag));
	*armed = true;
}

/*
 * Make sure every ring's park word has a futex wait in flight.  Returns
 * false when one could not be armed (no SQE even after a submit): the
 * loop must not sleep on that ring then.
 */
static bool uring_arm_futexes(struct lull_loop *loop)
{
	struct io_uring_sqe *sqe;

	for (unsigned i = 0; i < loop->nrings; i++) {
		struct loop_ring *lr = loop->rings[i];

		if (lr->futex_armed)
			continue;
		sqe = uring_sqe(loop);
		if (!sqe)
			return false;
		lull__prep_futex_wait(sqe, &lr->ring->region->park,
				      LULL_PARK_FUTEX);
		io_uring_sqe_set_data64(sqe, loop_tag(lr, TAG_RING));
		lr->futex_armed = true;
	}
	return true;
}

/* While busy: submit what callbacks queued and reap what completed. */
static void uring_poll(struct lull_loop *loop)
{
	uring_arm_read(loop, &loop->sig_armed, loop->sigfd, &loop->sigbuf,
		       sizeof(loop->sigbuf), TAG_SIGNAL);
	/*
	 * GETEVENTS with no minimum: with DEFER_TASKRUN, completions are
	 * only posted when the loop's thread asks for events.
	 */
	if (loop->ops_in_flight || loop->timers || loop->sigfd >= 0 ||
	    io_uring_sq_ready(&loop->uring))
		lull__uring_submit_wait(&loop->uring, 0, NULL, false);
}

/* --- parking ---------------------------------------------------------- */

/*
 * The park handshake of park.c for every ring at once: announce on each,
 * one barrier, re-check each.  Returns 1 when the loop may sleep, 0 when
 * it may not, or the barrier's error (every ring awake again).
 */
static int park_begin(struct lull_loop *loop, uint32_t how)
{
	unsigned i;
	int ret;

	for (i = 0; i < loop->nrings; i++)
		lull__park_announce(loop->rings[i]->ring, how);
	/*
	 * barrier: pairs with every producer's barrier in lull__notify().  A
	 * fence for rings whose producers fence too, and membarrier for those
	 * whose producers rely on it (it also orders this thread).
	 */
	ret = lull__barrier_heavy(loop->any_asym);
	if (ret < 0) {
		for (i = 0; i < loop->nrings; i++)
			lull__park_end(loop->rings[i]->ring);
		return ret;
	}
	/* recheck; a stop request counts as work */
	for (i = 0; i < loop->nrings; i++)
		if (lull__ring_readable(loop->rings[i]->ring))
			break;
	if (i == loop->nrings && !stop_pending(loop)) {
		for (i = 0; i < loop->nrings; i++)
			lull__park_sleeps(loop->rings[i]->ring);
		return 1;
	}
	for (i = 0; i < loop->nrings; i++)
		lull__park_abandon(loop->rings[i]->ring);
	loop->stats.park_cancels++;
	return 0;
}

/* The park is over: every ring awake again, the safety net accounted. */
static void park_end(struct lull_loop *loop, bool timed_out)
{
	for (unsigned i = 0; i < loop->nrings; i++)
		lull__park_finish(loop->rings[i]->ring, timed_out);
	loop->stats.parks++;
	if (timed_out)
		loop->stats.safety_timeouts++;
}

static int park_uring(struct lull_loop *loop)
{
	struct __kernel_timespec ts = {
		.tv_sec = (int64_t)(loop->safety_ns / 1000000000u),
		.tv_nsec = (long long)(loop->safety_ns % 1000000000u),
	};
	/* No safety net (the default): the wait has no timeout at all. */
	struct __kernel_timespec *tsp = loop->safety_ns ? &ts : NULL;
	bool futex = loop->backend == LULL_BACKEND_URING_FUTEX;
	unsigned wait_nr = 1;
	int ret;

	ret = park_begin(loop, futex ? LULL_PARK_FUTEX : LULL_PARK_EVENTFD);
	if (ret <= 0)
		return ret;
	/*
	 * A ring without its futex wait would sleep unwatched: submit and
	 * reap instead of sleeping, and park again on the next pass.
	 */
	if (futex && !uring_arm_futexes(loop))
		wait_nr = 0;
	uring_arm_read(loop, &loop->kick_armed, loop->kick_fd, &loop->kick_buf,
		       sizeof(loop->kick_buf), TAG_KICK);
	uring_arm_read(loop, &loop->sig_armed, loop->sigfd, &loop->sigbuf,
		       sizeof(loop->sigbuf), TAG_SIGNAL);
	/* sleep: one system call submits everything and waits */
	ret = lull__uring_submit_wait(&loop->uring, wait_nr, tsp,
				      loop->no_iowait);
	/*
	 * An enter that also submitted returns the count submitted, not
	 * -ETIME, when its wait times out: an empty completion queue after
	 * it is the timeout too.
	 */
	park_end(loop, tsp && wait_nr &&
			       (ret == -ETIME ||
				(ret >= 0 && !io_uring_cq_ready(&loop->uring))));
	if (ret == -ETIME || ret == -EINTR || ret == -EBUSY || ret >= 0)
		return 0;
	return ret;
}

static int park_epoll(struct lull_loop *loop)
{
	/* No safety net (the default): no timeout but the loop's own. */
	uint64_t timeout = loop->safety_ns ? loop->safety_ns : UINT64_MAX;
	uint64_t next, now;
	bool safety = loop->safety_ns != 0;
	int ret;

	next = lull__epoll_next_deadline(loop);
	if (next != UINT64_MAX) {
		now = lull__now_ns();
		if (next <= now) {
			ret = lull__epoll_wait(loop, 0);
			return ret < 0 && ret != -EINTR ? ret : 0;
		}
		if (next - now < timeout) {
			timeout = next - now;
			safety = false;
		}
	}
	ret = park_begin(loop, LULL_PARK_EVENTFD);
	if (ret < 0)
		return ret;
	if (!ret) {
		ret = lull__epoll_wait(loop, 0);
		return ret < 0 && ret != -EINTR ? ret : 0;
	}
	ret = lull__epoll_wait(loop, timeout);
	park_end(loop, safety && ret == 0);
	return ret < 0 && ret != -EINTR ? ret : 0;
}

/*
 * Poll the rings for up to spin_ns; true as soon as one has a record or a
 * stop is requested.
 */
static bool spin_for_records(struct lull_loop *loop)
{
	uint64_t deadline = lull__deadline_ns(lull__now_ns(), loop->spin_ns);

	do {
		if (stop_pending(loop))
			return true;
		for (int k = 0; k < 64; k++) {
			for (unsigned i = 0; i < loop->nrings; i++)
				if (lull__ring_readable(loop->rings[i]->ring))
					return true;
			ck_pr_stall();
		}
	} while (lull__now_ns() < deadline);
	return false;
}

/*
 * coalesce_ns: sleep up to the window without announcing a park, so that
 * producers keep committing without wake-up calls; completions, timers,
 * signals and a stop still end it early (the kick read is armed).
 */
static int coalesce_wait(struct lull_loop *loop)
{
	uint64_t timeout = loop->coalesce_ns, next, now;
	struct __kernel_timespec ts;
	int ret;

	loop->stats.coalesce_waits++;
	if (!loop->has_uring) {
		next = lull__epoll_next_deadline(loop);
		if (next != UINT64_MAX) {
			now = lull__now_ns();
			if (next <= now)
				timeout = 0;
			else if (next - now < timeout)
				timeout = next - now;
		}
		ret = lull__epoll_wait(loop, timeout);
		return ret < 0 && ret != -EINTR ? ret : 0;
	}
	uring_arm_read(loop, &loop->kick_armed, loop->kick_fd, &loop->kick_buf,
		       sizeof(loop->kick_buf), TAG_KICK);
	uring_arm_read(loop, &loop->sig_armed, loop->sigfd, &loop->sigbuf,
		       sizeof(loop->sigbuf), TAG_SIGNAL);
	ts.tv_sec = (int64_t)(timeout / 1000000000u);
	ts.tv_nsec = (long long)(timeout % 1000000000u);
	ret = lull__uring_submit_wait(&loop->uring, 1, &ts, loop->no_iowait);
	if (ret == -ETIME || ret == -EINTR || ret == -EBUSY || ret >= 0)
		return 0;
	return ret;
}

LULL_EXPORT int lull_loop_run(struct lull_loop *loop)
{
	bool busy;
	int ret = 0;

	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	if (loop->has_uring && !loop->uring_enabled) {
		ret = lull__uring_enable(&loop->uring);
		if (ret < 0)
			return ret;
		loop->uring_enabled = true;
	}
	loop->running = true;
	loop->stops_at_run = loop->stops_seen;
	for (;;) {
		if (stop_pending(loop))
			stop_rings(loop);
		if (loop->stopping && !loop->nrings) {
			/*
			 * The rings are done; so are the user's SQEs once
			 * each has been cancelled and its callback has run.
			 * Those that callbacks queue meanwhile are cancelled
			 * on the next pass; without an SQE for a cancel now,
			 * it is asked for again then.
			 */
			if (!loop->ops_in_flight)
				break;
			ret = ops_cancel(loop, NULL, true);
			if (ret == -ENOMEM)
				break;
			ret = 0;
		}
		loop->stats.iterations++;
		busy = false;
		if (loop->has_uring)
			busy = uring_reap(loop) > 0;
		else
			lull__epoll_submit(loop);
		busy |= drain_rings(loop);
		/* SQEs that callbacks queued start on the next pass. */
		if (!loop->has_uring && loop->pending_ops)
			busy = true;
		if (busy) {
			/* Do not starve I/O while rings keep us busy. */
			if (loop->has_uring)
				uring_poll(loop);
			else if (loop->ops_in_flight || loop->timers ||
				 loop->sigfd >= 0)
				ret = lull__epoll_wait(loop, 0);
			if (ret == -EINTR)
				ret = 0;
			if (ret < 0)
				break;
			continue;
		}
		/*
		 * A stopping loop with no rings left never parks on what a
		 * pass just ended: with its last op done it returns, and ops
		 * that callbacks queued meanwhile it cancels first (nothing
		 * else would end them, with no timer of lull's own).
		 */
		if (loop->stopping && !loop->nrings &&
		    (!loop->ops_in_flight || ops_to_cancel(loop)))
			continue;
		if (loop->spin_ns && spin_for_records(loop))
			continue;
		/*
		 * Records since the last rest (park or window): a stream may
		 * go on; wait, then take what came in one batch.
		 */
		if (loop->coalesce_ns &&
		    loop->stats.records != loop->records_at_rest &&
		    !loop->stopping && !stop_pending(loop)) {
			loop->records_at_rest = loop->stats.records;
			ret = coalesce_wait(loop);
			if (ret < 0)
				break;
			continue;
		}
		loop->records_at_rest = loop->stats.records;
		ret = loop->has_uring ? park_uring(loop) : park_epoll(loop);
		if (ret < 0)
			break;
	}
	loop->running = false;
	loop->stopping = false;
	/* Stops that came while stopping are spent with this run. */
	/* Pairs with the release RMW in lull_loop_stop(). */
	loop->stops_seen = atomic_load_explicit(&loop->stop_requests,
						memory_order_acquire);
	return ret < 0 ? ret : 0;
}
