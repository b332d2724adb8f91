/* SPDX-License-Identifier: MIT */
/*
 * peer_eventfd.c - the classic event-loop mailbox: a bounded FIFO of
 * pointer slots (as many as ck's) under a pthread mutex, plus an eventfd
 * doorbell, made anew for each run.  A producer locks, appends one message,
 * unlocks, then write(efd, 1)s; the consumer locks, takes up to 256
 * messages, unlocks, handles them, and when the FIFO is empty blocks in
 * read(efd) (not EFD_SEMAPHORE: one read takes the whole count).  A full
 * FIFO makes the producer back off (outside the lock) like the spinning
 * rings.  The mutex's own futex calls under contention are not counted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "throughput.h"

/* The mailbox: a bounded FIFO under a mutex. */
struct mqueue {
	pthread_mutex_t lock;
	uint64_t head, tail; /* under lock */
	uint64_t mask;
	void *slot[];
};

/* The run's doorbell. */
struct doorbell {
	int efd;
};

static int efd_of(struct run *run)
{
	return ((struct doorbell *)run->state)->efd;
}

/* Append one message.  Returns false when the FIFO is full. */
static inline bool mq_put(struct mqueue *mq, void *entry)
{
	bool ok = false;

	pthread_mutex_lock(&mq->lock);
	if (mq->tail - mq->head <= mq->mask) {
		mq->slot[mq->tail++ & mq->mask] = entry;
		ok = true;
	}
	pthread_mutex_unlock(&mq->lock);
	return ok;
}

/* Take up to @max messages into @out.  Returns how many. */
static inline unsigned int mq_take(struct mqueue *mq, void **out,
				   unsigned int max)
{
	unsigned int i, n;

	pthread_mutex_lock(&mq->lock);
	n = mq->tail - mq->head < max ? (unsigned int)(mq->tail - mq->head) :
					max;
	for (i = 0; i < n; i++)
		out[i] = mq->slot[(mq->head + i) & mq->mask];
	mq->head += n;
	pthread_mutex_unlock(&mq->lock);
	return n;
}

/*
 * The consumer takes a burst before it copies any of it out, freeing up to
 * MQ_BURST slots whose buffers are still to be read: the slabs have as many
 * buffers more.
 */
static int mq_setup(struct config *cfg, const struct options *opt)
{
	struct mqueue *mq;
	int r;

	r = tp_slots_setup(cfg, opt, MQ_BURST);
	if (r)
		return r;
	mq = tp_alloc_zeroed(sizeof(*mq) + cfg->slots * sizeof(mq->slot[0]));
	if (!mq)
		return -ENOMEM;
	mq->mask = cfg->slots - 1;
	r = -pthread_mutex_init(&mq->lock, NULL);
	if (r) {
		free(mq);
		return r;
	}
	cfg->state = mq;
	return 0;
}

static void mq_teardown(struct config *cfg)
{
	struct mqueue *mq = cfg->state;

	if (mq)
		pthread_mutex_destroy(&mq->lock);
	free(mq);
}

static int mq_run_open(struct run *run)
{
	struct doorbell *d = malloc(sizeof(*d));

	if (!d) {
		fprintf(stderr, "throughput: out of memory\n");
		return -1;
	}
	run->state = d;
	d->efd = eventfd(0, EFD_CLOEXEC);
	if (d->efd < 0) {
		fprintf(stderr, "throughput: eventfd: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static void mq_run_close(struct run *run)
{
	struct doorbell *d = run->state;

	if (!d)
		return;
	if (d->efd >= 0)
		close(d->efd);
	free(d);
	run->state = NULL;
}

static int mq_send(struct producer *p, struct config *cfg,
		   unsigned char *msg, uint64_t value, struct send_state *st)
{
	static const uint64_t one = 1;
	void *entry = tp_slot_entry(p, cfg, msg, value, st);
	ssize_t n;

	while (unlikely(!mq_put(cfg->state, entry))) {
		if (tp_aborted(p->run))
			return -ECANCELED;
		bench_backoff_wait(&st->bo);
	}
	do {
		n = write(efd_of(p->run), &one, sizeof(one));
		st->syscalls++;
	} while (n < 0 && errno == EINTR);
	if (n != sizeof(one))
		return n < 0 ? -errno : -EIO;
	return 0;
}

static void mq_produce(struct producer *p, unsigned char *msg)
{
	tp_produce(p, msg, mq_send);
}

/* One more ring of the doorbell: the consumer looks at the counts. */
static void mq_end_stream(struct run *run, void *handle)
{
	static const uint64_t one = 1;

	(void)handle;
	if (write(efd_of(run), &one, sizeof(one)) != sizeof(one))
		tp_run_fail(run, "eventfd write: %s", strerror(errno));
}

static int mq_pop(struct config *cfg, struct consumer_state *cs,
		  unsigned int batch)
{
	void *objs[MQ_BURST];
	unsigned int i, n;

	n = mq_take(cfg->state, objs, batch < MQ_BURST ? batch : MQ_BURST);
	for (i = 0; i < n; i++)
		tp_take_entry(cs, cfg, objs[i]);
	return (int)n;
}

/*
 * Drain the FIFO; when it is empty, block in read() of the doorbell, which
 * every append rang (and the last producer once more).
 */
static void mq_consume(struct run *run, struct consumer_state *cs)
{
	struct config *cfg = run->cfg;
	unsigned int batch = run->opt->batch;
	uint64_t rings;
	ssize_t n;

	for (;;) {
		if (mq_pop(cfg, cs, batch) > 0)
			continue;
		if (tp_all_received(run, cs) || tp_aborted(run))
			break;
		n = read(efd_of(run), &rings, sizeof(rings));
		cs->syscalls++;
		if (n < 0 && errno != EINTR) {
			tp_run_fail(run, "eventfd read: %s", strerror(errno));
			break;
		}
		run->cons_waits++;
	}
}

static void mq_json(const struct config *cfg)
{
	printf("\"slots\":%u,", cfg->slots);
}

const struct peer_ring tp_eventfd = {
	.name = "eventfd",
	.cls = CLASS_GENERAL,
	.kernel = true,
	.setup = mq_setup,
	.run_open = mq_run_open,
	.run_close = mq_run_close,
	.produce = mq_produce,
	.end_stream = mq_end_stream,
	.consume = mq_consume,
	.json = mq_json,
	.teardown = mq_teardown,
};
