/* SPDX-License-Identifier: MIT */
/*
 * own_uring.c - add a lull ring to an io_uring loop you already have.
 *
 * The service here owns its io_uring and a periodic timeout (its "own
 * work").  A worker thread feeds a lull MPSC ring; the ring's park is one
 * more request on the service's ring, with the service's user_data, so one
 * io_uring_submit_and_wait() sleeps on both.  No polling, no extra thread,
 * and no timer of lull's own: while nothing arrives the park makes no
 * wake-up.  The worker's detach ends the ring; the drain that delivers its
 * poison record returns -EPIPE, and the service stops waiting for it.
 *
 * Build against an installed lull:
 *     cc -O2 own_uring.c $(pkg-config --cflags --libs lull) -luring -pthread
 * Run: ./a.out [records]
 */
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lull.h>

#define TAG_TICK 1
#define TAG_LULL 2 /* the ring's park: every CQE of it carries this */

struct worker {
	struct lull_ring *ring;
	long records;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct timespec pause = { 0, 2 * 1000 * 1000 };
	struct lull_producer *prod;
	int ret = lull_producer_attach(w->ring, 0, &prod);

	if (ret < 0) {
		fprintf(stderr, "attach: %s\n", lull_strerror(ret));
		return NULL;
	}
	for (long i = 0; i < w->records; i++) {
		/* Full: sleep until the reader frees room. */
		while ((ret = lull_mpsc_write(prod, 1, &i, sizeof(i))) == -EAGAIN)
			if ((ret = lull_producer_wait(prod, sizeof(i), -1)) < 0)
				break;
		if (ret < 0) {
			fprintf(stderr, "write: %s\n", lull_strerror(ret));
			break;
		}
		if (i % 100 == 0)
			nanosleep(&pause, NULL); /* bursts with gaps: it parks */
	}
	/* The only producer's detach shuts the ring down (the poison). */
	ret = lull_producer_detach(prod);
	if (ret < 0)
		fprintf(stderr, "detach: %s\n", lull_strerror(ret));
	return NULL;
}

static int on_record(const struct lull_record *rec, void *ctx)
{
	long *received = ctx;

	/* The poison record (type LULL_TYPE_POISON) ends the ring: no data. */
	if (rec->type == 1)
		(*received)++;
	return LULL_READ_CONTINUE;
}

static int arm_tick(struct io_uring *uring, struct __kernel_timespec *ts)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(uring);

	if (!sqe) { /* the queue is full: hand it to the kernel, then retry */
		io_uring_submit(uring);
		sqe = io_uring_get_sqe(uring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data64(sqe, TAG_TICK);
	return 0;
}

int main(int argc, char **argv)
{
	struct __kernel_timespec tick = { 0, 100 * 1000 * 1000 };
	struct worker w = { .records = argc > 1 ? atol(argv[1]) : 10000 };
	struct lull_ring_stats st;
	struct io_uring_cqe *cqe;
	struct io_uring uring;
	long received = 0, ticks = 0;
	unsigned head, seen;
	int ended = 0;
	pthread_t thread;
	int ret;

	if ((ret = io_uring_queue_init(64, &uring, 0)) < 0 ||
	    (ret = lull_ring_create(&w.ring, 1 << 16, LULL_RING_MPSC)) < 0) {
		fprintf(stderr, "setup: %s\n", lull_strerror(ret));
		return 1;
	}
	ret = arm_tick(&uring, &tick);
	if (ret == 0)
		ret = lull_uring_park_arm(w.ring, &uring, TAG_LULL);
	if (ret < 0) {
		fprintf(stderr, "park: %s\n", lull_strerror(ret));
		return 1;
	}
	ret = pthread_create(&thread, NULL, work, &w);
	if (ret != 0) {
		fprintf(stderr, "pthread_create: %s\n", strerror(ret));
		return 1;
	}

	while (!ended) {
		ret = io_uring_submit_and_wait(&uring, 1);
		if (ret < 0 && ret != -EINTR) {
			fprintf(stderr, "wait: %s\n", lull_strerror(ret));
			return 1;
		}
		seen = 0;
		io_uring_for_each_cqe(&uring, head, cqe) {
			seen++;
			if (lull_uring_park_cqe(w.ring, cqe) > 0) {
				/* Ours: read what arrived, then park again. */
				ret = lull_uring_park_drain(w.ring, &uring,
							    on_record,
							    &received, 256);
				/* -EPIPE: everything, poison included, was
				 * delivered; nothing is armed any more. */
				if (ret == -EPIPE) {
					ended = 1;
				} else if (ret < 0) {
					fprintf(stderr, "drain: %s\n",
						lull_strerror(ret));
					return 1;
				}
			} else if (cqe->user_data == TAG_TICK) {
				ticks++;
				if (arm_tick(&uring, &tick) < 0) {
					fprintf(stderr, "tick: no SQE\n");
					return 1;
				}
			}
		}
		io_uring_cq_advance(&uring, seen);
	}
	ret = pthread_join(thread, NULL);
	if (ret == 0)
		ret = lull_ring_stats(w.ring, &st);
	if (ret != 0) {
		fprintf(stderr, "join/stats: %s\n", strerror(ret < 0 ? -ret : ret));
		return 1;
	}
	printf("received %ld records, %ld ticks; parks %llu, wake-ups %llu, "
	       "lost wake-ups %llu\n",
	       received, ticks, (unsigned long long)st.parks,
	       (unsigned long long)st.wakes,
	       (unsigned long long)st.safety_timeouts);
	/* Nothing is armed after the poison: the ring may go now. */
	ret = lull_ring_destroy(w.ring);
	if (ret < 0)
		fprintf(stderr, "destroy: %s\n", lull_strerror(ret));
	io_uring_queue_exit(&uring);
	return ret < 0 || received != w.records || st.safety_timeouts ? 1 : 0;
}
