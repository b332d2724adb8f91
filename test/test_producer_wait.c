/* SPDX-License-Identifier: MIT */
/*
 * test_producer_wait.c - the Criterion suite producer_wait:
 * lull_producer_wait(), producers blocked on a full ring, woken by the
 * consumer's read or by a shutdown.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * lull_producer_wait(): producers blocked on a full ring
 */

/* Records of one producer, checked for order from seq next_seq on. */
struct seq_check {
	unsigned records, bad;
	uint64_t next_seq;
};

static int seq_check_record(const struct lull_record *rec, void *ctx)
{
	struct seq_check *c = ctx;
	struct msg m;

	if (rec->type != MSG_TYPE || rec->len != sizeof(m)) {
		c->bad++;
		return LULL_READ_CONTINUE;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.seq != c->next_seq)
		c->bad++;
	c->next_seq = m.seq + 1;
	c->records++;
	return LULL_READ_CONTINUE;
}

/* A producer thread that waits for room, then writes one more record. */
struct room_waiter {
	struct lull_producer *prod;
	bool mpsc;
	uint64_t seq;
	int64_t timeout_ns;
	_Atomic pid_t tid;
	int wait_ret;
	int write_ret;
};

static void *room_waiter_main(void *arg)
{
	struct room_waiter *w = arg;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	w->wait_ret = lull_producer_wait(w->prod, sizeof(struct msg),
					 w->timeout_ns);
	w->write_ret = w->wait_ret ? w->wait_ret
				   : write_msg(w->prod, w->mpsc, 0, w->seq);
	return NULL;
}

/* Wait until the waiter sleeps in futex(2) (the blocking "park"). */
static void wait_waiter_asleep(struct room_waiter *w)
{
	uint64_t deadline = now_ns() + 10 * NSEC_PER_SEC;
	pid_t tid;

	for (;;) {
		tid = atomic_load(&w->tid);
		if (tid && asleep_in_park(tid, &blocking_case))
			return;
		if (now_ns() > deadline)
			cr_assert_fail("watchdog: the producer did not go to "
				       "sleep waiting for room within 10 s");
		sleep_ns(100 * 1000);
	}
}

static void check_wait_rejects(unsigned topology)
{
	struct lull_ring *ring = new_ring(topology, 4096);
	struct lull_producer *prod;
	void *data;

	cr_assert_eq(lull_producer_wait(NULL, 8, -1), -EINVAL);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(lull_producer_wait(prod, 4096, -1), -EMSGSIZE);
	cr_assert_eq(lull_producer_wait(prod, SIZE_MAX, -1), -EMSGSIZE);
	cr_assert_eq(topology == LULL_RING_MPSC
			     ? lull_mpsc_claim(prod, MSG_TYPE, 8, &data)
			     : lull_spsc_claim(prod, MSG_TYPE, 8, &data),
		     0);
	cr_assert_eq(lull_producer_wait(prod, 8, -1), -EBUSY);
	cr_assert_eq(topology == LULL_RING_MPSC ? lull_mpsc_abort(prod)
						: lull_spsc_abort(prod),
		     0);
	/* Room, and no timeout needed: at once. */
	cr_assert_eq(lull_producer_wait(prod, 8, 0), 0);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, rejects_bad_arguments_spsc, .timeout = WATCHDOG_S)
{
	check_wait_rejects(LULL_RING_SPSC);
}

Test(producer_wait, rejects_bad_arguments_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_rejects(LULL_RING_MPSC);
}

static void check_wait_times_out(unsigned topology)
{
	struct lull_ring *ring = new_ring(topology, 4096);
	struct lull_producer *prod;
	unsigned written;
	uint64_t start;

	prod = fill_ring(ring, &written);
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg), 0),
		     -ETIMEDOUT);
	start = now_ns();
	cr_assert_eq(lull_producer_wait(prod, sizeof(struct msg),
					(int64_t)(30 * NSEC_PER_MSEC)),
		     -ETIMEDOUT);
	cr_assert_geq(now_ns() - start, 30 * NSEC_PER_MSEC);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, times_out_on_a_full_ring_spsc, .timeout = WATCHDOG_S)
{
	check_wait_times_out(LULL_RING_SPSC);
}

Test(producer_wait, times_out_on_a_full_ring_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_times_out(LULL_RING_MPSC);
}

/*
 * A producer blocked on a full ring sleeps until the consumer reads: it
 * then writes its record, which arrives after all the others.  @mem: the
 * region in caller memory (fences on both sides) instead of lull's own
 * (membarrier on the waiting side).
 */
static void check_wait_woken_by_read(unsigned topology, bool caller_memory)
{
	static alignas(128) unsigned char mem[8192];
	struct room_waiter w = { .timeout_ns = -1 };
	struct seq_check c = { .next_seq = 1 };
	struct lull_ring *ring;
	struct lull_record rec;
	unsigned written;
	pthread_t thread;

	if (caller_memory)
		cr_assert_eq(lull_ring_create_in(&ring, mem, sizeof(mem), 4096,
						 topology),
			     0);
	else
		ring = new_ring(topology, 4096);
	w.prod = fill_ring(ring, &written);
	w.mpsc = topology == LULL_RING_MPSC;
	w.seq = written;
	cr_assert_eq(pthread_create(&thread, NULL, room_waiter_main, &w), 0);
	wait_waiter_asleep(&w);
	cr_assert_eq(stats_of(ring).room_wakes, 0);
	/* Free one record's room: the consumer wakes the waiter. */
	cr_assert_eq(lull_ring_peek(ring, &rec), 0);
	cr_assert_eq(lull_ring_release(ring), 0);
	cr_assert_eq(stats_of(ring).room_wakes, 1);
	join_or_fail(thread, 20, "the producer waiting for room");
	cr_assert_eq(w.wait_ret, 0);
	cr_assert_eq(w.write_ret, 0);
	/* Records 1 .. written, the last one written after the wait. */
	while (lull_ring_read(ring, seq_check_record, &c, 1024) > 0)
		;
	cr_assert_eq(c.records, written);
	cr_assert_eq(c.bad, 0);
	cr_assert_eq(c.next_seq, (uint64_t)written + 1);
	cr_assert_eq(lull_producer_detach(w.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, sleeps_until_the_consumer_reads_spsc,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_SPSC, false);
}

Test(producer_wait, sleeps_until_the_consumer_reads_mpsc,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_MPSC, false);
}

Test(producer_wait, sleeps_until_the_consumer_reads_in_caller_memory,
     .timeout = WATCHDOG_S)
{
	check_wait_woken_by_read(LULL_RING_SPSC, true);
	check_wait_woken_by_read(LULL_RING_MPSC, true);
}

static void check_wait_ended_by_shutdown(unsigned topology)
{
	struct room_waiter w = { .timeout_ns = -1 };
	struct lull_ring *ring = new_ring(topology, 4096);
	unsigned written;
	pthread_t thread;

	w.prod = fill_ring(ring, &written);
	w.mpsc = topology == LULL_RING_MPSC;
	cr_assert_eq(pthread_create(&thread, NULL, room_waiter_main, &w), 0);
	wait_waiter_asleep(&w);
	cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(stats_of(ring).room_wakes, 1);
	join_or_fail(thread, 20, "the producer waiting for room");
	cr_assert_eq(w.wait_ret, -EPIPE);
	cr_assert_eq(lull_producer_detach(w.prod), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(producer_wait, is_ended_by_a_shutdown_spsc, .timeout = WATCHDOG_S)
{
	check_wait_ended_by_shutdown(LULL_RING_SPSC);
}

Test(producer_wait, is_ended_by_a_shutdown_mpsc, .timeout = WATCHDOG_S)
{
	check_wait_ended_by_shutdown(LULL_RING_MPSC);
}

