/* SPDX-License-Identifier: MIT */
/*
 * ring_tour.c - push records through an SPSC and an MPSC ring and print
 * what it measured.
 *
 * Shows: creating a ring, producers attached up front and run on threads, the
 * three ways to write (copy, gather, zero-copy claim/commit), batch reads
 * on the consumer, and the waits on both sides: a consumer with nothing to
 * read parks in lull_ring_wait(), a producer facing a full ring in
 * lull_producer_wait().  The last producer to detach shuts the ring down,
 * so the consumer reads until the poison record instead of counting.
 *
 * Build against an installed lull:
 *     cc -O2 ring_tour.c $(pkg-config --cflags --libs lull) -pthread
 * Run: ./a.out [records-per-ring]
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
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
	struct lull_producer *prod;
	unsigned mode;
	uint32_t id;
	uint64_t count;
	int err;
};

#define MESSAGE_TYPE 1

struct consumer_state {
	uint64_t next_seq[8];
	uint64_t received;
	uint64_t bad;
	bool done; /* the poison record arrived: every producer is gone */
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
			       ? lull_spsc_write(prod, MESSAGE_TYPE, msg,
						 sizeof(*msg))
			       : lull_mpsc_write(prod, MESSAGE_TYPE, msg,
						 sizeof(*msg));
	case 1:
		return mode == LULL_RING_SPSC
			       ? lull_spsc_writev(prod, MESSAGE_TYPE, iov, 2)
			       : lull_mpsc_writev(prod, MESSAGE_TYPE, iov, 2);
	default:
		ret = mode == LULL_RING_SPSC
			      ? lull_spsc_claim(prod, MESSAGE_TYPE,
						sizeof(*msg), &dst)
			      : lull_mpsc_claim(prod, MESSAGE_TYPE,
						sizeof(*msg), &dst);
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
	struct lull_producer *prod = arg->prod;
	struct message msg = { .producer = arg->id };
	int ret;

	for (msg.seq = 0; msg.seq < arg->count;) {
		ret = write_one(prod, arg->mode, &msg);
		if (ret == -EAGAIN) /* full: sleep until the consumer reads */
			ret = lull_producer_wait(prod, sizeof(msg), -1);
		else if (ret == 0)
			msg.seq++;
		if (ret < 0) {
			arg->err = ret;
			break;
		}
	}
	/* The last producer out shuts the ring down: the consumer gets the
	 * poison record after everything written. */
	ret = lull_producer_detach(prod);
	if (ret < 0 && !arg->err)
		arg->err = ret;
	return NULL;
}

static int consume(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *st = ctx;
	struct message msg;

	/* Look at the type and length before touching the payload. */
	if (rec->type == LULL_TYPE_POISON) {
		st->done = true;
		return LULL_READ_STOP;
	}
	st->received++;
	if (rec->type != MESSAGE_TYPE || rec->len != sizeof(msg)) {
		st->bad++; /* a fatal record, or not ours */
		return LULL_READ_CONTINUE;
	}
	memcpy(&msg, rec->data, sizeof(msg));
	if (msg.producer >= 8 || msg.seq != st->next_seq[msg.producer])
		st->bad++;
	else
		st->next_seq[msg.producer]++;
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
	unsigned started;
	double start, secs;
	int ret, failed = 0;

	ret = lull_ring_create(&ring, 1 << 20, mode);
	if (ret < 0) {
		fprintf(stderr, "lull_ring_create: %s\n", lull_strerror(ret));
		return 1;
	}
	/*
	 * Attach every producer before any starts: the last one to detach
	 * shuts the ring down, so a producer that finished before another
	 * attached would close the ring under it.
	 */
	for (unsigned i = 0; i < producers; i++) {
		args[i] = (struct producer_arg){ NULL, mode, i, per_producer,
						 0 };
		ret = lull_producer_attach(ring, 0, &args[i].prod);
		if (ret < 0) {
			fprintf(stderr, "lull_producer_attach: %s\n",
				lull_strerror(ret));
			return 1;
		}
	}
	start = now_seconds();
	for (started = 0; started < producers; started++) {
		ret = pthread_create(&threads[started], NULL, produce,
				     &args[started]);
		if (ret != 0) {
			fprintf(stderr, "pthread_create: %s\n", strerror(ret));
			/* The producers already running end on -EPIPE; the
			 * ones never started detach here. */
			lull_ring_shutdown(ring, LULL_SHUTDOWN_IMMEDIATE);
			for (unsigned i = started; i < producers; i++)
				lull_producer_detach(args[i].prod);
			failed = 1;
			break;
		}
	}
	/* Read until the poison: every producer has detached by then. */
	while (!st.done) {
		ret = lull_ring_read(ring, consume, &st, 4096);
		if (ret == -EAGAIN) /* empty: park until a producer commits */
			ret = lull_ring_wait(ring, -1);
		if (ret < 0 && ret != -EPIPE) {
			fprintf(stderr, "lull_ring_read/wait: %s\n",
				lull_strerror(ret));
			failed = 1;
		}
		if (ret < 0) /* -EPIPE: a shutdown's poison was read */
			break;
	}
	secs = now_seconds() - start;
	for (unsigned i = 0; i < started; i++) {
		ret = pthread_join(threads[i], NULL);
		if (ret != 0) {
			fprintf(stderr, "pthread_join: %s\n", strerror(ret));
			failed = 1;
		} else if (args[i].err < 0 && args[i].err != -EPIPE) {
			fprintf(stderr, "producer %u: %s\n", i,
				lull_strerror(args[i].err));
			failed = 1;
		}
	}
	ret = lull_ring_destroy(ring);
	if (ret < 0) {
		fprintf(stderr, "lull_ring_destroy: %s\n", lull_strerror(ret));
		return 1;
	}
	if (failed)
		return 1;
	printf("%-5s %u producer%s  %10" PRIu64 " records  %6.3f s  "
	       "%6.2f M records/s  %6.1f ns/record  %s\n",
	       name, producers, producers == 1 ? " " : "s", st.received, secs,
	       (double)st.received / secs / 1e6,
	       secs * 1e9 / (double)st.received,
	       st.bad ? "OUT OF ORDER"
	       : st.received != total ? "RECORDS MISSING"
				      : "in order, intact");
	return st.bad || st.received != total ? 1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t records = 4000000;
	char *end;
	int failed = 0;

	if (argc > 1) {
		records = strtoull(argv[1], &end, 10);
		if (*end || end == argv[1])
			records = 0;
	}
	if (records == 0 || argc > 2) {
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
