/* SPDX-License-Identifier: MIT */
/*
 * test_ring_producers.c - the Criterion suite of lull/ring.h: producers:
 * attach, detach, the topology's calls, destroy.
 * The fixture (struct model, struct fix, TOPO_TEST) is ring_fix.h.
 */
#include "ring_fix.h"

/* ========================================================================
 * Producers: attach, detach, topology, destroy
 */

/*
 * The SPSC producer role is the region's, not a handle's: a second attach,
 * through any handle, is -EBUSY while the producer is attached.  Its
 * detach is the last one, so it shuts the ring down: attaching again, by
 * any handle and with any flag, is then -EPIPE (not -EBUSY: the detach
 * gave the role back), and the consumer gets the records, then the poison.
 */
Test(spsc, second_producer_is_ebusy_until_detach_then_epipe, .timeout = 10)
{
	struct lull_producer *second = NULL;
	struct lull_ring *opened;
	struct region r;
	struct fix f;

	fix_start(&f, &topo_spsc, region_create(&r, 256, &topo_spsc), 256);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, LULL_PRODUCER_THREAD,
					  &second), -EBUSY);
	opened = region_open(&r, 0);
	cr_assert_eq(lull_producer_attach(opened, 0, &second), -EBUSY);
	fix_put(&f, BY_WRITE, 5);
	model_read(&f.m, f.ring, 8);
	/* Records the consumer has not read yet outlive the producer. */
	fix_put(&f, BY_CLAIM, 6);
	fix_put(&f, BY_WRITEV, 7);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_producer_attach(opened, 0, &second), -EPIPE);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EPIPE);
	cr_assert_eq(lull_producer_attach(f.ring, LULL_PRODUCER_THREAD,
					  &second), -EPIPE);
	/* A failed attach holds nothing: both handles can be destroyed. */
	cr_assert_eq(lull_ring_destroy(opened), 0);
	cr_assert(model_expect_end(&f.m, f.ring));
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second), -EPIPE);
	cr_assert_eq(lull_ring_destroy(f.ring), 0);
	region_free(&r);
}

Test(mpsc, many_producers_attach_and_write, .timeout = 10)
{
	struct lull_producer *p[16];
	struct fix f;
	int i, round;

	fix_init(&f, &topo_mpsc, 4096);
	for (i = 0; i < 16; i++)
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p[i]), 0,
			     "producer %d", i);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < 16; i++)
			fix_put_by(&f, p[(i * 7 + round) % 16],
				   (enum method)((i + round) % METHODS),
				   (size_t)(i * 3 + round));
		model_drain_mixed(&f.m, f.ring, (unsigned)round);
	}
	for (i = 0; i < 16; i++)
		cr_assert_eq(lull_producer_detach(p[i]), 0);
	fix_fini(&f);
}

/*
 * LULL_PRODUCER_THREAD is the only attach flag: any other bit, alone or
 * with it, is -EINVAL and attaches nothing.
 */
static void attach_flags(const struct topo *t)
{
	static const unsigned bad[] = {
		2, 4, 0x80, 0x80000000u, ~0u, LULL_PRODUCER_THREAD | 2,
		~LULL_PRODUCER_THREAD,
	};
	struct lull_producer *prod;
	struct lull_ring *ring;
	size_t i;

	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(lull_producer_attach(ring, bad[i], &prod), -EINVAL,
			     "flags %#x", bad[i]);
	/* Nothing was attached, so nothing detached: the ring is open... */
	expect_nothing(ring);
	/* ...and the SPSC role is free, for the one flag there is. */
	cr_assert_eq(lull_producer_attach(ring, LULL_PRODUCER_THREAD, &prod),
		     0);
	cr_assert_eq(lull_ring_destroy(ring), -EBUSY);
	cr_assert_eq(lull_producer_detach(prod), 0);
	expect_poison_by_peek(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

TOPO_TEST(attach_with_flags_is_einval, 10)
{
	attach_flags(t);
}

/* The other family's calls fail and leave the ring and the claim alone. */
static void other_family_rejected(const struct topo *t)
{
	const struct topo *o = topo_other(t);
	struct iovec iov = { payload_buf, 8 };
	struct pending pc;
	void *dst = NULL;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(o->write(f.prod, 1, payload_buf, 8), -EINVAL);
	cr_assert_eq(o->write(f.prod, 1, NULL, 0), -EINVAL);
	cr_assert_eq(o->writev(f.prod, 1, &iov, 1), -EINVAL);
	cr_assert_eq(o->claim(f.prod, 1, 8, &dst), -EINVAL);
	cr_assert_eq(o->commit(f.prod), -EINVAL);
	cr_assert_eq(o->abort(f.prod), -EINVAL);
	expect_nothing(f.ring);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "the other claim counted");

	pending_claim(&f, &pc, f.prod, 24, WILL_COMMIT);
	cr_assert_eq(o->commit(f.prod), -EINVAL);
	cr_assert_eq(o->abort(f.prod), -EINVAL);
	cr_assert_eq(o->write(f.prod, 1, payload_buf, 8), -EINVAL);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(spsc, mpsc_calls_are_einval, .timeout = 10)
{
	other_family_rejected(&topo_spsc);
}

Test(mpsc, spsc_calls_are_einval, .timeout = 10)
{
	other_family_rejected(&topo_mpsc);
}

/*
 * Destroy is -EBUSY while any producer is attached through the handle,
 * even once the ring is shut down, and releases nothing.
 */
static void destroy_busy(const struct topo *t)
{
	struct lull_producer *second;
	struct fix f;

	fix_init(&f, t, 256);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	/* Nothing was released: the ring and the producer still work. */
	fix_put(&f, BY_WRITE, 10);
	model_read(&f.m, f.ring, 4);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &second),
		     topo_is_mpsc(t) ? 0 : -EBUSY);
	if (topo_is_mpsc(t)) {
		/* Not the last producer: the ring stays open. */
		cr_assert_eq(lull_producer_detach(f.prod), 0);
		cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
		f.prod = second;
		fix_put(&f, BY_WRITEV, 12);
		model_read(&f.m, f.ring, 4);
	}
	fix_put(&f, BY_CLAIM, 11);
	model_read(&f.m, f.ring, 4);
	/* Shut down, the producer is still attached: still -EBUSY. */
	fix_put(&f, BY_WRITE, 13);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(t->write(f.prod, 1, payload_buf, 14), -EPIPE);
	cr_assert_eq(lull_ring_destroy(f.ring), -EBUSY);
	fix_fini(&f);
}

TOPO_TEST(destroy_with_attached_producer_is_ebusy, 10)
{
	destroy_busy(t);
}

/*
 * Only producers attached through the handle itself keep it alive.  Each
 * half on a region of its own: an SPSC producer's detach is the last one
 * and ends the ring.
 */
static void destroy_other_handle(const struct topo *t)
{
	struct lull_ring *creator, *plain, *consumer;
	struct region r;
	struct fix f;

	/* A producer of the creating handle keeps a plain one from nothing. */
	creator = region_create(&r, 256, t);
	plain = region_open(&r, 0);
	fix_start(&f, t, creator, 256);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	fix_put(&f, BY_WRITE, 1);
	model_read(&f.m, creator, 4);
	fix_put(&f, BY_CLAIM, 3);
	fix_fini(&f);
	region_free(&r);

	/* A producer of a plain handle keeps the consumers from nothing. */
	creator = region_create(&r, 256, t);
	plain = region_open(&r, 0);
	fix_start(&f, t, plain, 256);
	cr_assert_eq(lull_ring_destroy(creator), 0);
	fix_put(&f, BY_WRITEV, 2);
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	model_read(&f.m, consumer, 4);
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	cr_assert_eq(lull_ring_destroy(plain), -EBUSY);
	fix_put(&f, BY_WRITE, 4);
	consumer = region_open(&r, LULL_OPEN_CONSUMER);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_ring_destroy(plain), 0);
	cr_assert(model_expect_end(&f.m, consumer));
	cr_assert_eq(lull_ring_destroy(consumer), 0);
	region_free(&r);
}

TOPO_TEST(destroy_ignores_producers_of_other_handles, 10)
{
	destroy_other_handle(t);
}
