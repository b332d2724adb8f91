/* SPDX-License-Identifier: MIT */
/*
 * ring_tour.c - push records through an SPSC and an MPSC ring and print
 * what it measured.
 *
 * Shows: creating a ring, attaching producers on their own threads, the
 * three ways to write (copy, gather, zero-copy claim/commit), and batch
 * reads on the consumer.  The consumer here retries with sched_yield() when
 * the ring is empty; parking comes with lull/park.h.
 *
 * Build against an installed lull:
 *     cc -O2 ring_tour.c $(pkg-config --cflags --libs lull) -pthread
 * Run: ./a.out [records-per-ring]
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lull.h>

struct message {
	uint32_t producer;
	uint32_t pad;
	uint64_t seq;
};

struct producer_arg {
	struct lull_ring *ring;
	unsigned mode;
	uint32_t id;
	uint64_t count;
	int err;
};

struct consumer_state {
	uint64_t next_seq[8];
	uint64_t received;
	uint64_t bad;
};

static double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One record in three of each kind: copy, gather, claim/commit. */
static int write_one(struct lull_producer *prod, unsigned mode,
		     const struct message *msg)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)msg, .iov_len = 8 },
		{ .iov_base = (char *)msg + 8, .iov_len = 8 },
	};
	void *dst;
	int ret;

	switch (msg->seq % 3) {
	case 0:
		return mode == LULL_RING_SPSC
			       ? lull_spsc_write(prod, 1, msg, sizeof(*msg))
			       : lull_mpsc_write(prod, 1, msg, sizeof(*msg));
	case 1:
		return mode == LULL_RING_SPSC ? lull_spsc_writev(prod, 1, iov, 2)
					      : lull_mpsc_writev(prod, 1, iov, 2);
	default:
		ret = mode == LULL_RING_SPSC
			      ? lull_spsc_claim(prod, 1, sizeof(*msg), &dst)
			      : lull_mpsc_claim(prod, 1, sizeof(*msg), &dst);
		if (ret < 0)
			return ret;
		memcpy(dst, msg, sizeof(*msg));
		return mode == LULL_RING_SPSC ? lull_spsc_commit(prod)
					      : lull_mpsc_commit(prod);
	}
}

static void *produce(void *p)
{
	struct producer_arg *arg = p;
	struct lull_producer *prod;
	struct message msg = { .producer = arg->id };
	int ret;

	ret = lull_producer_attach(arg->ring, 0, &prod);
	if (ret < 0) {
		arg->err = ret;
		return NULL;
	}
	for (msg.seq = 0; msg.seq < arg->count;) {
		ret = write_one(prod, arg->mode, &msg);
		if (ret == -EAGAIN) {
			sched_yield(); /* full: let the consumer run */
			continue;
		}
		if (ret < 0) {
			arg->err = ret;
			break;
		}
		msg.seq++;
	}
	lull_producer_detach(prod);
	return NULL;
}

static int consume(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *st = ctx;
	struct message msg;

	memcpy(&msg, rec->data, sizeof(msg));
	if (rec->len != sizeof(msg) || msg.producer >= 8 ||
	    msg.seq != st->next_seq[msg.producer])
		st->bad++;
	else
		st->next_seq[msg.producer]++;
	st->received++;
	return LULL_READ_CONTINUE;
}

static int run(const char *name, unsigned mode, unsigned producers,
	       uint64_t per_producer)
{
	struct consumer_state st = { 0 };
	struct producer_arg args[8];
	pthread_t threads[8];
	struct lull_ring *ring;
	uint64_t total = per_producer * producers;
	double start, secs;
	int ret;

	ret = lull_ring_create(&ring, 1 << 20, mode);
	if (ret < 0) {
		fprintf(stderr, "lull_ring_create: %s\n", lull_strerror(ret));
		return 1;
	}
	start = now_seconds();
	for (unsigned i = 0; i < producers; i++) {
		args[i] = (struct producer_arg){ ring, mode, i, per_producer, 0 };
		if (pthread_create(&threads[i], NULL, produce, &args[i]) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
	while (st.received < total) {
		ret = lull_ring_read(ring, consume, &st, 4096);
		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret < 0) {
			fprintf(stderr, "lull_ring_read: %s\n",
				lull_strerror(ret));
			return 1;
		}
	}
	secs = now_seconds() - start;
	for (unsigned i = 0; i < producers; i++) {
		pthread_join(threads[i], NULL);
		if (args[i].err < 0) {
			fprintf(stderr, "producer %u: %s\n", i,
				lull_strerror(args[i].err));
			return 1;
		}
	}
	ret = lull_ring_destroy(ring);
	if (ret < 0) {
		fprintf(stderr, "lull_ring_destroy: %s\n", lull_strerror(ret));
		return 1;
	}
	printf("%-5s %u producer%s  %10" PRIu64 " records  %6.3f s  "
	       "%6.2f M records/s  %6.1f ns/record  %s\n",
	       name, producers, producers == 1 ? " " : "s", st.received, secs,
	       (double)st.received / secs / 1e6,
	       secs * 1e9 / (double)st.received,
	       st.bad ? "OUT OF ORDER" : "in order, intact");
	return st.bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t records = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
	int failed = 0;

	if (records == 0) {
		fprintf(stderr, "usage: %s [records-per-ring]\n", argv[0]);
		return 2;
	}
	printf("lull %s: 16-byte records, 1 MiB rings, consumer batch reads\n",
	       lull_version());
	failed |= run("spsc", LULL_RING_SPSC, 1, records);
	failed |= run("mpsc", LULL_RING_MPSC, 1, records);
	failed |= run("mpsc", LULL_RING_MPSC, 2, records / 2);
	failed |= run("mpsc", LULL_RING_MPSC, 4, records / 4);
	return failed;
}
