/* SPDX-License-Identifier: MIT */
/*
 * test_ring_claims.c - the Criterion suite of lull/ring.h: claims: commit,
 * abort, detach with a claim, and the MPSC order of claims.
 * The fixture (struct model, struct fix, TOPO_TEST) is ring_fix.h.
 */
#include "ring_fix.h"

/* ========================================================================
 * Claims: commit, abort, detach
 */

static void claim_invisible_until_commit(const struct topo *t)
{
	struct pending pc;
	struct fix f;

	fix_init(&f, t, 4096);
	pending_claim(&f, &pc, f.prod, 40, WILL_COMMIT);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_read(&f.m, f.ring, 8);
	/* And again behind a committed record. */
	fix_put(&f, BY_WRITE, 3);
	pending_claim(&f, &pc, f.prod, 0, WILL_COMMIT);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(claim_is_invisible_until_commit, 10)
{
	claim_invisible_until_commit(t);
}

static void claim_misuse(const struct topo *t)
{
	struct pending pc;
	void *dst = NULL;
	struct fix f;

	fix_init(&f, t, 4096);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "commit without claim");
	cr_assert_eq(t->abort(f.prod), -EINVAL, "abort without claim");
	pending_claim(&f, &pc, f.prod, 16, WILL_COMMIT);
	cr_assert_eq(t->claim(f.prod, 1, 16, &dst), -EBUSY);
	cr_assert_eq(t->claim(f.prod, 2, 0, &dst), -EBUSY);
	/* The first claim is intact and still the one committed. */
	pending_commit(&f, &pc);
	cr_assert_eq(t->commit(f.prod), -EINVAL, "second commit");
	cr_assert_eq(t->abort(f.prod), -EINVAL, "abort after commit");
	model_drain(&f.m, f.ring);
	/* A claim after an abort works. */
	cr_assert_eq(fix_claim_abort(&f, 8), 0);
	cr_assert_eq(fix_put(&f, BY_CLAIM, 30), 0);
	cr_assert_eq(fix_claim_abort(&f, 100), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 31), 0);
	cr_assert_eq(fix_put(&f, BY_WRITEV, 32), 0);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

TOPO_TEST(claim_misuse_is_ebusy_or_einval, 10)
{
	claim_misuse(t);
}

Test(spsc, abort_leaves_nothing, .timeout = 10)
{
	struct fix f;
	int i;

	fix_init(&f, &topo_spsc, 256);
	cr_assert_eq(fix_claim_abort(&f, f.max), 0);
	expect_nothing(f.ring);
	/* The aborted claim took no space: 8 records of 32 bytes fit. */
	for (i = 0; i < 8; i++)
		cr_assert_eq(fix_put(&f, (enum method)(i % METHODS), 24), 0);
	cr_assert_eq(fix_put(&f, BY_WRITE, 0), -EAGAIN);
	model_drain(&f.m, f.ring);
	fix_fini(&f);
}

Test(mpsc, aborted_claim_is_skipped_as_padding, .timeout = 10)
{
	struct lull_producer *p2, *p3;
	struct pending a, b;
	struct fix f;

	fix_init(&f, &topo_mpsc, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p3), 0);

	/* Alone: nothing to read. */
	cr_assert_eq(fix_claim_abort(&f, 50), 0);
	expect_nothing(f.ring);
	fix_put(&f, BY_WRITE, 5);
	model_read(&f.m, f.ring, 8);

	/* Ahead of another producer's record: blocks until aborted. */
	pending_claim(&f, &a, f.prod, 60, WILL_DROP);
	fix_put_by(&f, p2, BY_WRITEV, 6);
	expect_nothing(f.ring);
	cr_assert_eq(topo_mpsc.abort(f.prod), 0);
	model_read(&f.m, f.ring, 8);

	/* Between two records. */
	pending_claim(&f, &a, f.prod, 70, WILL_COMMIT);
	pending_claim(&f, &b, p2, 80, WILL_DROP);
	fix_put_by(&f, p3, BY_CLAIM, 7);
	pending_commit(&f, &a);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	cr_assert_eq(topo_mpsc.abort(p2), 0);
	model_read(&f.m, f.ring, 8);

	/* Several in a row. */
	cr_assert_eq(fix_claim_abort(&f, 0), 0);
	cr_assert_eq(fix_claim_abort(&f, 1), 0);
	cr_assert_eq(fix_claim_abort(&f, f.max), 0);
	fix_put_by(&f, p3, BY_WRITE, 9);
	model_drain(&f.m, f.ring);

	cr_assert_eq(lull_producer_detach(p2), 0);
	cr_assert_eq(lull_producer_detach(p3), 0);
	fix_fini(&f);
}

/*
 * A detach with a claim outstanding drops the claim: the consumer gets the
 * record before it, then (the detach being the last) the poison, never
 * the claimed bytes and never a wait on them.
 */
Test(spsc, detach_drops_outstanding_claim, .timeout = 10)
{
	struct lull_producer *late;
	struct pending pc;
	struct fix f;

	fix_init(&f, &topo_spsc, 256);
	fix_put(&f, BY_WRITE, 16);
	pending_claim(&f, &pc, f.prod, 100 > f.max ? f.max : 100, WILL_DROP);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &late), -EPIPE,
		     "detach did not release the SPSC role, or did not "
		     "shut the ring down");
	cr_assert(model_expect_end(&f.m, f.ring));
	cr_assert_eq(lull_ring_destroy(f.ring), 0);

	/* The same with nothing committed before the claim. */
	fix_init(&f, &topo_spsc, 256);
	pending_claim(&f, &pc, f.prod, f.max, WILL_DROP);
	expect_nothing(f.ring);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	expect_poison_by_peek(f.ring);
	cr_assert_eq(lull_ring_destroy(f.ring), 0);
}

Test(mpsc, detach_with_claim_does_not_block_consumer, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;

	fix_init(&f, &topo_mpsc, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	fix_put(&f, BY_WRITE, 16);
	pending_claim(&f, &pc, f.prod, 100, WILL_DROP);
	fix_put_by(&f, p2, BY_WRITE, 24);
	/* The first record, then the claim blocks. */
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	cr_assert_eq(lull_producer_detach(f.prod), 0);
	model_read(&f.m, f.ring, 8);
	fix_put_by(&f, p2, BY_CLAIM, 40);
	model_read(&f.m, f.ring, 8);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &f.prod), 0);
	fix_put(&f, BY_WRITEV, 50);
	fix_put_by(&f, p2, BY_WRITE, 60);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

/* ========================================================================
 * MPSC ordering
 */

Test(mpsc, uncommitted_claim_blocks_later_records, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;

	fix_init(&f, &topo_mpsc, 4096);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	/* Nothing before the claim: read and peek find nothing. */
	pending_claim(&f, &pc, f.prod, 32, WILL_COMMIT);
	fix_put_by(&f, p2, BY_WRITE, 20);
	fix_put_by(&f, p2, BY_CLAIM, 21);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_read_expect(&f.m, f.ring, 8, 3);

	/* A record before the claim is read, then the claim blocks. */
	fix_put_by(&f, p2, BY_WRITEV, 10);
	pending_claim(&f, &pc, f.prod, 0, WILL_COMMIT);
	fix_put_by(&f, p2, BY_WRITE, 11);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}

Test(mpsc, records_arrive_in_claim_order_not_commit_order, .timeout = 10)
{
	struct lull_producer *p[3];
	struct pending pc[3];
	struct fix f;
	int i;

	fix_init(&f, &topo_mpsc, 4096);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(lull_producer_attach(f.ring, 0, &p[i]), 0);
		pending_claim(&f, &pc[i], p[i], (size_t)(i * 13), WILL_COMMIT);
	}
	pending_commit(&f, &pc[2]);
	expect_nothing(f.ring);
	pending_commit(&f, &pc[0]);
	model_read_expect(&f.m, f.ring, 8, 1);
	expect_nothing(f.ring);
	pending_commit(&f, &pc[1]);
	model_read_expect(&f.m, f.ring, 8, 2);
	expect_nothing(f.ring);
	for (i = 0; i < 3; i++)
		cr_assert_eq(lull_producer_detach(p[i]), 0);
	fix_fini(&f);
}

Test(mpsc, pending_claim_does_not_block_other_producers, .timeout = 10)
{
	struct lull_producer *p2;
	struct pending pc;
	struct fix f;
	int n = 0;

	fix_init(&f, &topo_mpsc, 512);
	cr_assert_eq(lull_producer_attach(f.ring, 0, &p2), 0);
	pending_claim(&f, &pc, f.prod, 8, WILL_COMMIT);
	/* The other producer fills the rest of the ring. */
	while (fix_put_by(&f, p2, (enum method)(n % METHODS), 16) == 0)
		n++;
	cr_assert_eq(n, (512 - 16) / 24);
	expect_nothing(f.ring);
	pending_commit(&f, &pc);
	model_drain(&f.m, f.ring);
	cr_assert_eq(lull_producer_detach(p2), 0);
	fix_fini(&f);
}
