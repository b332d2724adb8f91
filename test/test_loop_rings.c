/* SPDX-License-Identifier: MIT */
/*
 * test_loop_rings.c - the Criterion suite loop: rings on a loop, records
 * from producer threads in order, a wake-up for each record sent to a
 * sleeping loop, the batch limit, runs
 * (lull_loop_attach_items), detach and attach again, a handler that
 * detaches its own ring, rings on a loop never slip.
 * Run once per loop backend (LOOP_TEST); the fixture is loop_fix.h.
 */
#include "loop_fix.h"

#include "handles.h" /* the slip's state */

/* --- records from producer threads ----------------------------------- */

#define PT_RECORDS 20000u
#define PT_MPSC_PRODUCERS 3u

struct pt_shared {
	struct lull_loop *loop;
	unsigned delivered;
	unsigned expected;
};

struct pt_sink {
	struct pt_shared *shared;
	uint32_t ring; /* which ring this handler belongs to */
	struct ledger ledger; /* its producers' records, in order */
	unsigned errors;
	unsigned poisons;
};

struct pt_producer {
	pthread_t thread;
	struct lull_producer *prod;
	struct ledger *ledger; /* its ring's sink's */
	bool mpsc;
	uint32_t ring;
	uint32_t id;
	int ret;
};

/* The tag of record: ring in the high half, producer in the low. */
static uint32_t pt_tag(uint32_t ring, uint32_t producer)
{
	return ring << 16 | producer;
}

static int pt_handler(const struct lull_record *record, void *ctx)
{
	struct pt_sink *s = ctx;
	struct rec r = rec_of(record);
	uint32_t producer = r.tag & 0xffff;

	/* The stop's poison: once, after every record. */
	if (record->type < 1) {
		if (!is_poison(record) || s->poisons ||
		    s->shared->delivered != s->shared->expected)
			s->errors++;
		s->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (s->poisons || record->type != 1 || r.tag >> 16 != s->ring ||
	    !ledger_got(&s->ledger, producer, r.seq))
		s->errors++;
	if (++s->shared->delivered == s->shared->expected)
		lull_loop_stop(s->shared->loop);
	return LULL_READ_CONTINUE;
}

static void *pt_main(void *arg)
{
	struct pt_producer *p = arg;

	for (uint32_t seq = 0; seq < PT_RECORDS && !p->ret; seq++) {
		p->ret = write_rec(p->prod, p->mpsc, pt_tag(p->ring, p->id),
				   seq);
		if (!p->ret)
			ledger_sent(p->ledger, p->id, seq);
	}
	return NULL;
}

LOOP_TEST(records_from_producer_threads_reach_their_handler_in_order,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct pt_producer producers[1 + PT_MPSC_PRODUCERS];
	struct pt_sink spsc_sink = { .ring = 1 }, mpsc_sink = { .ring = 2 };
	struct lull_ring *spsc, *mpsc;
	struct pt_shared shared;
	struct lull_loop *loop;

	loop = loop_new(backend, 0);
	shared.loop = loop;
	shared.delivered = 0;
	shared.expected = PT_RECORDS * (1 + PT_MPSC_PRODUCERS);
	spsc_sink.shared = &shared;
	mpsc_sink.shared = &shared;
	check_eq(ledger_init(&spsc_sink.ledger, 1), 0);
	check_eq(ledger_init(&mpsc_sink.ledger, PT_MPSC_PRODUCERS), 0);
	spsc = ring_new(LULL_RING_SPSC, 4096);
	mpsc = ring_new(LULL_RING_MPSC, 4096);
	check_eq(lull_loop_attach(loop, spsc, pt_handler, &spsc_sink, 0), 0);
	check_eq(lull_loop_attach(loop, mpsc, pt_handler, &mpsc_sink, 16), 0);

	memset(producers, 0, sizeof(producers));
	for (unsigned i = 0; i < ARRAY_SIZE(producers); i++) {
		struct pt_producer *p = &producers[i];

		p->mpsc = i > 0;
		p->ring = p->mpsc ? 2 : 1;
		p->id = p->mpsc ? i - 1 : 0;
		p->ledger = p->mpsc ? &mpsc_sink.ledger : &spsc_sink.ledger;
		p->prod = producer_new(p->mpsc ? mpsc : spsc);
		check_eq(pthread_create(&p->thread, NULL, pt_main, p), 0);
	}
	run_loop(loop);
	for (unsigned i = 0; i < ARRAY_SIZE(producers); i++) {
		join_within(producers[i].thread, 8000,
			    "a producer thread");
		check_eq(producers[i].ret, 0);
		check_eq(lull_producer_detach(producers[i].prod), 0);
	}
	check_eq(shared.delivered, shared.expected);
	check_eq(spsc_sink.errors, 0);
	check_eq(mpsc_sink.errors, 0);
	check_eq(spsc_sink.poisons, 1);
	check_eq(mpsc_sink.poisons, 1);
	check_eq(ledger_count_got(&spsc_sink.ledger, 0), PT_RECORDS);
	for (unsigned i = 0; i < PT_MPSC_PRODUCERS; i++)
		check_eq(ledger_count_got(&mpsc_sink.ledger, i), PT_RECORDS);
	cr_assert(ledger_complete(&spsc_sink.ledger), "spsc: %s",
		  ledger_why(&spsc_sink.ledger));
	cr_assert(ledger_complete(&mpsc_sink.ledger), "mpsc: %s",
		  ledger_why(&mpsc_sink.ledger));
	ledger_fini(&spsc_sink.ledger);
	ledger_fini(&mpsc_sink.ledger);
	/* Every record handed to a handler counts, the poisons too. */
	check_eq(loop_stats(loop).records, shared.expected + 2);
	check_ring_ended(loop, spsc, NULL, false);
	check_ring_ended(loop, mpsc, NULL, true);
	loop_free(loop);
	check_eq(lull_ring_destroy(spsc), 0);
	check_eq(lull_ring_destroy(mpsc), 0);
}

/* --- one wake-up per record -------------------------------------------- */

/*
 * More wake-ups than a backend might coalesce or count before it resets
 * what it sleeps on: the epoll backend reads its edge-triggered eventfd
 * only once every 4096 edges.
 */
#define PP_RECORDS 5000u

struct pingpong {
	struct lull_loop *loop;
	struct lull_producer *prod;
	pid_t loop_tid;
	_Atomic unsigned seen;
	unsigned errors, poisons;
	unsigned sent;
	bool slept; /* the loop was parked before every record */
	int write_ret;
};

static int pp_handler(const struct lull_record *record, void *ctx)
{
	struct pingpong *pp = ctx;
	unsigned n = atomic_load_explicit(&pp->seen, memory_order_relaxed);

	/* The stop's poison: once, after every record. */
	if (record->type < 1) {
		if (!is_poison(record) || pp->poisons || n != PP_RECORDS)
			pp->errors++;
		pp->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (record->type != 1 || rec_of(record).seq != n)
		pp->errors++;
	/* Pairs with the producer's acquire in wait_at_least(). */
	atomic_store_explicit(&pp->seen, n + 1, memory_order_release);
	if (n + 1 == PP_RECORDS)
		lull_loop_stop(pp->loop);
	return LULL_READ_CONTINUE;
}

/* Each record only once the loop handled the last one and sleeps again. */
static void *pp_producer(void *arg)
{
	struct pingpong *pp = arg;

	pp->slept = true;
	for (uint32_t seq = 0; seq < PP_RECORDS; seq++) {
		if (!wait_at_least(&pp->seen, seq) ||
		    !wait_sleeping(pp->loop_tid)) {
			pp->slept = false;
			break;
		}
		pp->write_ret = write_rec(pp->prod, false, 0, seq);
		if (pp->write_ret)
			break;
		pp->sent++;
	}
	/* The test fails on what stopped us; end the run so it says why. */
	if (pp->sent != PP_RECORDS)
		lull_loop_stop(pp->loop);
	return NULL;
}

LOOP_TEST(every_record_to_a_sleeping_loop_wakes_it, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct pingpong pp = { .loop_tid = thread_id() };
	struct lull_ring_stats rs;
	struct lull_ring *ring;
	pthread_t producer;

	pp.loop = loop_new(backend, 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	pp.prod = producer_new(ring);
	check_eq(lull_loop_attach(pp.loop, ring, pp_handler, &pp, 0), 0);
	check_eq(pthread_create(&producer, NULL, pp_producer, &pp), 0);
	run_loop(pp.loop);
	join_within(producer, 8000, "the producer thread");
	check(pp.slept, "the loop did not go back to sleep after record %u",
	      pp.sent);
	check_eq(pp.write_ret, 0);
	check_eq(pp.sent, PP_RECORDS);
	/* Relaxed: the run is over and the producer joined. */
	check_eq(atomic_load_explicit(&pp.seen, memory_order_relaxed),
		 PP_RECORDS);
	check_eq(pp.errors, 0);
	check_eq(pp.poisons, 1);
	/* Asleep before each record: each one took a wake-up of its own. */
	check_eq(lull_ring_stats(ring, &rs), 0);
	check_op(rs.wakes, >=, PP_RECORDS);
	check_eq(rs.safety_timeouts, 0);
	check_eq(lull_producer_detach(pp.prod), 0);
	loop_free(pp.loop);
	check_eq(lull_ring_destroy(ring), 0);
}

/* --- the batch limit --------------------------------------------------- */

#define BATCH_A 20u /* records in ring A, batch 4 */
#define BATCH_B 10u /* records in ring B, batch 1: one per pass */

struct batch_log {
	struct lull_loop *loop;
	char order[BATCH_A + BATCH_B + 1]; /* 'A' or 'B', in handler order */
	unsigned n; /* records, not counting the poisons */
};

struct batch_sink {
	struct seq_sink seq;
	struct batch_log *log;
	char name;
};

static int batch_handler(const struct lull_record *record, void *ctx)
{
	struct batch_sink *s = ctx;
	struct batch_log *log = s->log;

	if (record->type < 1) /* the stop's poison, after every record */
		return seq_handler(record, &s->seq);
	if (log->n < BATCH_A + BATCH_B)
		log->order[log->n] = s->name;
	log->n++;
	seq_handler(record, &s->seq);
	if (log->n == BATCH_A + BATCH_B)
		lull_loop_stop(log->loop);
	return LULL_READ_CONTINUE;
}

LOOP_TEST(handler_gets_at_most_batch_records_per_pass, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct batch_sink sa = { .name = 'A' }, sb = { .name = 'B' };
	struct lull_producer *pa, *pb;
	struct lull_ring *a, *b;
	struct batch_log log;
	unsigned run_len = 0, longest = 0;

	memset(&log, 0, sizeof(log));
	log.loop = loop_new(backend, 0);
	sa.log = &log;
	sb.log = &log;
	sa.seq.tag = 0;
	sb.seq.tag = 1;
	a = ring_new(LULL_RING_SPSC, 4096);
	b = ring_new(LULL_RING_SPSC, 4096);
	pa = producer_new(a);
	pb = producer_new(b);
	for (uint32_t i = 0; i < BATCH_A; i++)
		check_eq(write_rec(pa, false, 0, i), 0);
	for (uint32_t i = 0; i < BATCH_B; i++)
		check_eq(write_rec(pb, false, 1, i), 0);
	check_eq(lull_loop_attach(log.loop, a, batch_handler, &sa, 4), 0);
	check_eq(lull_loop_attach(log.loop, b, batch_handler, &sb, 1), 0);
	run_loop(log.loop);

	check_eq(log.n, BATCH_A + BATCH_B);
	check_eq(sa.seq.errors, 0);
	check_eq(sb.seq.errors, 0);
	check_eq(sa.seq.poisons, 1);
	check_eq(sb.seq.poisons, 1);
	check_ring_ended(log.loop, a, pa, false);
	check_ring_ended(log.loop, b, pb, false);
	/*
	 * Ring B gives one record per pass, so the A records between two B
	 * records are one pass's worth: at most 4.
	 */
	for (unsigned i = 0; i < log.n; i++) {
		if (log.order[i] == 'A') {
			run_len++;
			continue;
		}
		check(run_len <= 4, "%u records of ring A in one pass: %s",
		      run_len, log.order);
		longest = run_len > longest ? run_len : longest;
		run_len = 0;
	}
	check(longest >= 1, "ring A never shared a pass with ring B: %s",
	      log.order);
	check_eq(lull_producer_detach(pa), 0);
	check_eq(lull_producer_detach(pb), 0);
	loop_free(log.loop);
	check_eq(lull_ring_destroy(a), 0);
	check_eq(lull_ring_destroy(b), 0);
}

/* --- runs: lull_loop_attach_items() ------------------------------------ */

/*
 * An array of 10 items, a single record and an array of 5, read 4 records
 * a pass: runs of 4, 4, then 2 and the record and 1, then 4.  The batch
 * counts records and cuts a run, never more.
 */
#define RUNS_TOTAL 16u
#define RUNS_MAX 16u

struct runs_sink {
	struct lull_loop *loop;
	uint64_t next;                /* the value the next item must carry */
	unsigned counts[RUNS_MAX];    /* each run's count, in order */
	unsigned nruns, errors, poisons, poison_counts;
};

static int runs_handler(const struct lull_items *run, void *ctx)
{
	struct runs_sink *s = ctx;
	const unsigned char *p = run->data;
	uint64_t v;

	if (run->type < 1) { /* the stop's poison: a run of one */
		s->poisons++;
		s->poison_counts += run->count;
		return LULL_READ_CONTINUE;
	}
	if (s->nruns < RUNS_MAX)
		s->counts[s->nruns] = run->count;
	s->nruns++;
	if (run->len != sizeof(v) || run->count < 1)
		s->errors++;
	for (uint32_t i = 0; i < run->count && run->len == sizeof(v); i++) {
		memcpy(&v, p + (size_t)i * sizeof(v), sizeof(v));
		if (v != s->next++)
			s->errors++;
	}
	if (s->next == RUNS_TOTAL)
		lull_loop_stop(s->loop);
	return LULL_READ_CONTINUE;
}

LOOP_TEST(attach_items_hands_an_array_out_in_runs_cut_by_the_batch,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	static const unsigned want[] = { 4, 4, 2, 1, 1, 4 };
	struct runs_sink sink = { 0 };
	uint64_t first[10], one = 10, second[5];
	struct lull_producer *prod;
	struct lull_ring *ring;

	for (unsigned i = 0; i < 10; i++)
		first[i] = i;
	for (unsigned i = 0; i < 5; i++)
		second[i] = 11 + i;
	sink.loop = loop_new(backend, 0);
	ring = ring_new(LULL_RING_SPSC, 4096);
	prod = producer_new(ring);
	check_eq(lull_spsc_write_array(prod, 2, first, sizeof(first[0]), 10),
		 0);
	check_eq(lull_spsc_write(prod, 2, &one, sizeof(one)), 0);
	check_eq(lull_spsc_write_array(prod, 2, second, sizeof(second[0]), 5),
		 0);
	check_eq(lull_loop_attach_items(sink.loop, ring, runs_handler, &sink,
					4),
		 0);
	run_loop(sink.loop);

	check_eq(sink.errors, 0);
	check_eq(sink.next, RUNS_TOTAL);
	check_eq(sink.nruns, ARRAY_SIZE(want));
	for (unsigned i = 0; i < ARRAY_SIZE(want) && i < sink.nruns; i++)
		check(sink.counts[i] == want[i], "run %u had %u items, want %u",
		      i, sink.counts[i], want[i]);
	check_eq(sink.poisons, 1);
	check_eq(sink.poison_counts, 1);
	check_ring_ended(sink.loop, ring, prod, false);
	check_eq(lull_producer_detach(prod), 0);
	loop_free(sink.loop);
	check_eq(lull_ring_destroy(ring), 0);
}

/* --- detach and attach again ------------------------------------------ */

/*
 * Run @loop until it has parked on @ring (uring-futex: with the ring's
 * futex wait in flight), then take the ring off the loop and stop it.  A
 * stop shuts down the rings attached at the time, so the ring is detached
 * first, on the loop's thread: a helper writes a pipe once the loop
 * sleeps, and the read's callback detaches the ring, then stops the loop,
 * which has no ring left to end and returns.
 */
struct park_detach {
	struct lull_ring *ring;
	int fds[2];
	char byte;
	int res;
	int detach_ret;
	unsigned calls;
};

static void park_detach_cqe(struct lull_loop *loop, int res, uint32_t flags,
			    void *ctx)
{
	struct park_detach *pd = ctx;

	(void)flags;
	pd->calls++;
	pd->res = res;
	pd->detach_ret = lull_loop_detach(loop, pd->ring);
	lull_loop_stop(loop);
}

static void pipe_write_action(struct helper *h)
{
	struct park_detach *pd = h->ctx;

	/* Checked by the callback: it sees the byte or never runs. */
	if (write(pd->fds[1], "x", 1) != 1)
		pd->res = -errno;
}

static void run_and_detach_when_parked(struct lull_loop *loop,
				       struct lull_ring *ring)
{
	struct park_detach pd = { .ring = ring, .detach_ret = 1 };
	struct io_uring_sqe *sqe;
	struct helper h;

	check_eq(pipe2(pd.fds, O_CLOEXEC), 0);
	sqe = get_sqe(loop, park_detach_cqe, &pd);
	io_uring_prep_read(sqe, pd.fds[0], &pd.byte, 1, (uint64_t)-1);
	helper_start(&h, loop, pipe_write_action, &pd);
	run_loop(loop);
	helper_join(&h);
	check_eq(pd.calls, 1);
	check_eq(pd.res, 1);
	check_eq(pd.detach_ret, 0);
	check_eq(lull_loop_detach(loop, ring), -ENOENT);
	close(pd.fds[0]);
	close(pd.fds[1]);
}

LOOP_TEST(detach_leaves_records_in_the_ring_and_reattach_delivers_them,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	struct lull_producer *prod = producer_new(ring);
	struct seq_sink sink = { .loop = loop, .tag = 7 };

	/*
	 * Delivered, then parked (uring-futex: a wait in flight), detached,
	 * stopped: a ring detached before the stop stays open.
	 */
	check_eq(write_rec(prod, false, 7, 0), 0);
	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_and_detach_when_parked(loop, ring);
	check_eq(sink.next, 1);
	check_eq(sink.poisons, 0);

	for (uint32_t i = 1; i <= 5; i++)
		check_eq(write_rec(prod, false, 7, i), 0);
	/* Still there, and the consumer reads them itself. */
	sink.stop_at = 0;
	check_eq(lull_ring_wait(ring, 0), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 2), 2);
	check_eq(sink.next, 3);

	/*
	 * Attached again, the loop delivers the rest; the stop at the last
	 * one shuts the ring down: the poison follows, and the loop detaches
	 * the ring.
	 */
	sink.stop_at = 6;
	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_loop(loop);
	check_eq(sink.next, 6);
	check_eq(sink.errors, 0);
	check_eq(sink.poisons, 1);
	check_eq(loop_stats(loop).records, 1 + 3 + 1);
	check_ring_ended(loop, ring, prod, false);

	check_eq(lull_producer_detach(prod), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
}

LOOP_TEST(destroy_after_detaching_a_parked_ring_frees_everything,
	  .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 60 * SEC);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	struct lull_producer *prod = producer_new(ring);
	struct seq_sink sink = { .tag = 5 };
	struct lull_ring_stats st;

	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 0), 0);
	run_and_detach_when_parked(loop, ring);
	/* Destroyed without running again (LeakSanitizer checks the rest). */
	loop_free(loop);

	/* The ring is nobody's parked consumer: a write wakes no one. */
	check_eq(write_rec(prod, false, 5, 0), 0);
	check_eq(lull_ring_stats(ring, &st), 0);
	check_eq(st.wakes, 0);
	check_eq(lull_ring_wait(ring, 0), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), 1);
	check_eq(sink.errors, 0);
	check_eq(sink.poisons, 0);
	/* Its producer's detach ends it. */
	check_eq(lull_producer_detach(prod), 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), 1);
	check_eq(sink.poisons, 1);
	check_eq(sink.errors, 0);
	check_eq(lull_ring_read(ring, seq_handler, &sink, 4), -EPIPE);
	check_eq(lull_ring_destroy(ring), 0);
}

struct self_detach {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct seq_sink sink;
	int detach_ret;
	unsigned calls;
};

static int detach_self_handler(const struct lull_record *record, void *ctx)
{
	struct self_detach *d = ctx;

	d->calls++;
	seq_handler(record, &d->sink);
	d->detach_ret = lull_loop_detach(d->loop, d->ring);
	lull_loop_stop(d->loop);
	return LULL_READ_STOP;
}

LOOP_TEST(handler_can_detach_its_own_ring, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct self_detach d = { .detach_ret = 1 };
	struct lull_producer *prod;

	d.loop = loop_new(backend, 0);
	d.ring = ring_new(LULL_RING_SPSC, 4096);
	d.sink.tag = 3;
	prod = producer_new(d.ring);
	for (uint32_t i = 0; i < 10; i++)
		check_eq(write_rec(prod, false, 3, i), 0);
	check_eq(lull_loop_attach(d.loop, d.ring, detach_self_handler, &d, 0),
		 0);
	run_loop(d.loop);
	check_eq(d.calls, 1);
	check_eq(d.detach_ret, 0);
	check_eq(lull_loop_detach(d.loop, d.ring), -ENOENT);
	/*
	 * The other nine stayed in the ring, which the stop did not shut
	 * down: detached before it, it was not the loop's any more.
	 */
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 9);
	check_eq(d.sink.next, 10);
	check_eq(d.sink.errors, 0);
	check_eq(d.sink.poisons, 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), -EAGAIN);
	check_eq(write_rec(prod, false, 3, 10), 0);
	check_eq(lull_producer_detach(prod), 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 1);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), 1);
	check_eq(d.sink.poisons, 1);
	check_eq(d.sink.errors, 0);
	check_eq(lull_ring_read(d.ring, seq_handler, &d.sink, 64), -EPIPE);
	loop_free(d.loop);
	check_eq(lull_ring_destroy(d.ring), 0);
}


/* --- rings on a loop never slip -------------------------------------- */

#define VOLLEYS 20u

struct volley {
	struct lull_loop *loop;
	struct lull_ring *ring[2];
	struct lull_producer *prod[2];
	uint32_t seq;      /* the next record due, on either ring */
	unsigned poisons;
	int fail;          /* the first failure seen, for the test thread */
	bool stopped;
};

struct volley_side {
	struct volley *v;
	unsigned me;
};

/*
 * Each record, read from one ring, writes the next into the other: every
 * read of either ring finds exactly one record, read after read, never an
 * empty ring, which is what makes a ring read by lull_ring_read() slip
 * (test_ring_pacing.c).  On a loop a pass reads every ring in turn, so it
 * must not: the handler finds its ring's slip never armed.
 */
static int volley_handler(const struct lull_record *record, void *ctx)
{
	struct volley_side *side = ctx;
	struct volley *v = side->v;
	struct lull_ring *ring = v->ring[side->me];
	int ret;

	if (is_poison(record)) {
		v->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (v->fail)
		return LULL_READ_CONTINUE;
	if (rec_of(record).seq != v->seq)
		v->fail = -EPROTO;
	else if (ring->slip_armed || ring->slip_ns)
		v->fail = -EBUSY;
	else if (++v->seq < VOLLEYS) {
		ret = write_rec(v->prod[!side->me], false, 0, v->seq);
		if (ret)
			v->fail = ret;
	}
	if ((v->fail || v->seq == VOLLEYS) && !v->stopped) {
		v->stopped = true;
		lull_loop_stop(v->loop);
	}
	return LULL_READ_CONTINUE;
}

LOOP_TEST(rings_on_a_loop_never_slip, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct volley v = { 0 };
	struct volley_side sides[2] = { { &v, 0 }, { &v, 1 } };

	v.loop = loop_new(backend, 0);
	for (unsigned i = 0; i < 2; i++) {
		v.ring[i] = ring_new(LULL_RING_SPSC, 4096);
		v.prod[i] = producer_new(v.ring[i]);
		check_eq(lull_loop_attach(v.loop, v.ring[i], volley_handler,
					  &sides[i], 64),
			 0);
	}
	check_eq(write_rec(v.prod[0], false, 0, 0), 0);
	run_loop(v.loop);
	check(v.fail != -EBUSY, "a ring on the loop slipped at record %u",
	      v.seq);
	check_eq(v.fail, 0);
	check_eq(v.seq, VOLLEYS);
	check_eq(v.poisons, 2);
	for (unsigned i = 0; i < 2; i++) {
		check_ring_ended(v.loop, v.ring[i], v.prod[i], false);
		check_eq(lull_producer_detach(v.prod[i]), 0);
		check_eq(lull_ring_destroy(v.ring[i]), 0);
	}
	loop_free(v.loop);
}

/* A ring read by hand until it slips stops slipping once attached. */
LOOP_TEST(attach_ends_a_slip_under_way, .timeout = 10)
{
	enum lull_backend backend = use_backend(backendp);
	struct lull_loop *loop = loop_new(backend, 0);
	struct lull_ring *ring = ring_new(LULL_RING_SPSC, 4096);
	struct lull_producer *prod = producer_new(ring);
	struct seq_sink sink = { 0 };
	uint32_t seq = 0;

	for (int reads = 0; reads < 3; reads++) {
		for (int i = 0; i < 2; i++)
			check_eq(write_rec(prod, false, 0, seq++), 0);
		check_eq(lull_ring_read(ring, seq_handler, &sink, 64), 2);
	}
	check_eq(sink.errors, 0);
	check(ring->slip_ns != 0, "three short reads did not slip");
	check_eq(lull_loop_attach(loop, ring, seq_handler, &sink, 64), 0);
	check_eq(ring->slip_ns, 0);
	check(!ring->slip_armed, "attached with the slip armed");
	check_eq(lull_loop_detach(loop, ring), 0);
	check_eq(lull_producer_detach(prod), 0);
	loop_free(loop);
	check_eq(lull_ring_destroy(ring), 0);
}
