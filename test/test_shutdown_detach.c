/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown_detach.c - the Criterion suite of how rings end: the last
 * detach ends the ring, and a consumer that leaves with lull_ring_close() ends
 * it for the producers.
 * The fixture (consumer ways, ledger, sink, TOPO_TEST) is shutdown_fix.h.
 */
#include "shutdown_fix.h"

/* ------------------------------------------------------------------------
 * The last detach
 */

static void last_detach_spsc(void)
{
	struct lull_producer *again;
	struct solo s;

	solo_init(&s, &topo_spsc, 4096);
	solo_send(&s, 4);
	cr_assert_eq(lull_producer_detach(s.prod), 0);
	s.prod = NULL;
	cr_assert_eq(lull_producer_attach(s.ring, 0, &again), -EPIPE,
		     "attach after the last detach");
	solo_read_all(&s);
	sink_expect("spsc last detach", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, last_detach_shuts_down_after_the_records, .timeout = 20)
{
	last_detach_spsc();
}

Test(mpsc, last_of_several_producers_shuts_down_on_detach, .timeout = 20)
{
	struct lull_producer *prod[3], *again;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	uint32_t seq[3] = { 0 };

	cr_assert_eq(lull_ring_create(&ring, 4096, LULL_RING_MPSC), 0);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert_eq(lull_producer_attach(ring, 0, &prod[i]), 0);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(stamp_send(&topo_mpsc, prod[i], i, seq[i]), 0);
		ledger_add(&ledger, i, seq[i]++);
	}
	cr_assert_eq(lull_producer_detach(prod[0]), 0);
	cr_assert_eq(lull_producer_detach(prod[1]), 0);
	/* One producer left: open, and no poison. */
	cr_assert_eq(stamp_send(&topo_mpsc, prod[2], 2, seq[2]), 0);
	ledger_add(&ledger, 2, seq[2]++);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod[0]), 0,
		     "attach while producers remain");
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), 4);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EAGAIN);
	cr_assert_eq(lull_producer_detach(prod[0]), 0);
	cr_assert_eq(stamp_send(&topo_mpsc, prod[2], 2, seq[2]), 0);
	ledger_add(&ledger, 2, seq[2]++);
	cr_assert_eq(lull_producer_detach(prod[2]), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &again), -EPIPE,
		     "attach after the last detach");
	while (lull_ring_read(ring, sink_handler, &sink, 100) > 0)
		;
	sink_expect("mpsc last detach", &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* The last producer leaves holding a claim: it is aborted, and the records
 * behind it (MPSC) arrive before the poison. */
static void last_detach_with_claim(const struct topo *t)
{
	struct lull_producer *other = NULL;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	struct lull_producer *prod;

	cr_assert_eq(lull_ring_create(&ring, 4096, t->flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(stamp_send(t, prod, 0, 0), 0);
	ledger_add(&ledger, 0, 0);
	cr_assert_eq(stamp_claim(t, prod, 0, 1), 0);
	if (topo_is_mpsc(t)) {
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
		cr_assert_eq(stamp_send(t, other, 1, 0), 0);
		ledger_add(&ledger, 1, 0);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), 1,
		     "the claim holds the rest back");
	cr_assert_eq(lull_producer_detach(prod), 0);
	while (lull_ring_read(ring, sink_handler, &sink, 100) > 0)
		;
	sink_expect("last detach with a claim", &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(last_detach_with_a_claim_aborts_it_and_shuts_down, 20)
{
	last_detach_with_claim(t);
}

/* ------------------------------------------------------------------------
 * The consumer leaves: lull_ring_close()
 */

#define WRITERS 3

struct writer {
	const struct topo *t;
	struct lull_ring *ring;
	unsigned index;
	atomic_uint sent;
	atomic_uint fulls; /* -EAGAIN seen */
	int last;          /* the result that ended it */
	struct flag done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct lull_producer *prod;
	uint32_t seq = 0;
	int ret;

	w->last = lull_producer_attach(w->ring, 0, &prod);
	if (w->last < 0) {
		flag_set(&w->done, 1);
		return NULL;
	}
	for (;;) {
		ret = stamp_send(w->t, prod, w->index, seq);
		if (ret == 0) {
			seq++;
			atomic_fetch_add_explicit(&w->sent, 1,
						  memory_order_relaxed);
		} else if (ret == -EAGAIN) {
			atomic_fetch_add_explicit(&w->fulls, 1,
						  memory_order_relaxed);
			sched_yield();
		} else {
			break;
		}
	}
	w->last = ret;
	lull_producer_detach(prod);
	flag_set(&w->done, 1);
	return NULL;
}

static void consumer_closes(const struct topo *t)
{
	struct writer w[WRITERS];
	struct lull_ring *ring, *other;
	struct lull_producer *prod;
	struct sink sink = { 0 };
	struct lull_record rec;
	pthread_t thread[WRITERS];
	unsigned n = topo_is_mpsc(t) ? WRITERS : 1;
	uint64_t deadline = now_ms() + DEADLINE_MS;
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size); /* size is a multiple */

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096, t->flags), 0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_ring_close(NULL), -EINVAL);
	cr_assert_eq(lull_ring_close(other), -EPERM,
		     "close by a handle that does not consume");
	for (unsigned i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].t = t;
		w[i].ring = ring;
		w[i].index = i;
		flag_init(&w[i].done);
		cr_assert_eq(pthread_create(&thread[i], NULL, writer_main,
					    &w[i]),
			     0);
	}
	/* Let every writer fill the ring, then read a little. */
	for (unsigned i = 0; i < n; i++)
		while (!atomic_load(&w[i].fulls))
			cr_assert_lt(now_ms(), deadline,
				     "writer %u never found the ring full", i);
	cr_assert_gt(lull_ring_read(ring, sink_handler, &sink, 10), 0);
	cr_assert_eq(lull_ring_close(ring), 0);
	for (unsigned i = 0; i < n; i++) {
		cr_assert(flag_wait(&w[i].done, 1, DEADLINE_MS),
			  "%s: writer %u still writing after the consumer "
			  "closed (sent %u, %u full)",
			  t->name, i, atomic_load(&w[i].sent),
			  atomic_load(&w[i].fulls));
		join_within(thread[i], DEADLINE_MS, "writer");
		cr_assert_eq(w[i].last, -EPIPE, "writer %u ended with %d", i,
			     w[i].last);
	}
	cr_assert(!sink.bad[0], "%s", sink.bad);
	/* The consumer's own reads: -EPIPE, no records and no poison. */
	for (int k = 0; k < 2; k++) {
		unsigned before = sink.n;
		int ret = lull_ring_read(ring, sink_handler, &sink, 100);

		cr_assert_eq(ret, -EPIPE,
			     "%s: read after lull_ring_close returned %d and "
			     "handed %u records",
			     t->name, ret, sink.n - before);
		cr_assert_eq(lull_ring_peek(ring, &rec), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 0), -EPIPE);
	}
	cr_assert_eq(sink.poisons, 0, "the consumer that left got a poison");
	cr_assert_eq(lull_producer_attach(other, 0, &prod), -EPIPE);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(spsc, consumer_close_makes_a_blocked_producer_fail_with_epipe,
     .timeout = 20)
{
	consumer_closes(&topo_spsc);
}

Test(mpsc, consumer_close_makes_writing_producers_fail_with_epipe,
     .timeout = 20)
{
	consumer_closes(&topo_mpsc);
}

/* Reads after the consumer's own close are -EPIPE, with records left in
 * the ring or not, whatever the head's position. */
static void reads_after_close(const struct topo *t, unsigned taken,
			      unsigned left)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, taken + left);
	if (taken)
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink,
					    taken),
			     (int)taken);
	cr_assert_eq(lull_ring_close(s.ring), 0);
	for (int k = 0; k < 2; k++) {
		int ret = lull_ring_read(s.ring, sink_handler, &s.sink, 100);

		cr_assert_eq(ret, -EPIPE,
			     "%s, %u read, %u left: read after close returned "
			     "%d (%s), %u records handed",
			     t->name, taken, left, ret,
			     ret < 0 ? lull_strerror(ret) : "a count",
			     s.sink.n - taken);
		ret = lull_ring_peek(s.ring, &rec);
		cr_assert_eq(ret, -EPIPE,
			     "%s, %u read, %u left: peek after close returned "
			     "%d",
			     t->name, taken, left, ret);
	}
	cr_assert_eq(lull_ring_wait(s.ring, 0), -EPIPE);
	cr_assert_eq(stamp_send(t, s.prod, 0, 99), -EPIPE);
	solo_fini(&s);
}

static void reads_after_close_all(const struct topo *t)
{
	reads_after_close(t, 0, 0);
	reads_after_close(t, 3, 0);
	reads_after_close(t, 0, 3);
	reads_after_close(t, 2, 3);
}

TOPO_TEST(reads_after_the_consumer_closed_are_epipe, 20)
{
	reads_after_close_all(t);
}

/* Nobody will read a fatal record after the consumer left: -EPIPE, as for
 * any report too late to be delivered. */
static void fatal_after_close(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 1);
	cr_assert_eq(lull_ring_close(s.ring), 0);
	cr_assert_eq(lull_ring_fatal(s.ring, 1, "nobody listens"), -EPIPE);
	solo_fini(&s);
}

TOPO_TEST(fatal_after_the_consumer_closed_is_epipe, 20)
{
	fatal_after_close(t);
}
