/* SPDX-License-Identifier: MIT */
/*
 * park.pml - a Promela model of lull's park/wake handshake: the consumer's
 * announce, barrier, recheck, sleep and unpark (lull__park_begin(),
 * lull_ring_wait(), lull__park_end() and lull__park_account() in
 * lib/park.c) against producers that commit, notify_barrier, check,
 * wake_claim and wake (lull__notify() in lib/internal.h, lull__wake() in
 * lib/park.c).  The labels carry the step names of the C comments.
 * scripts/check-model.sh runs every check below; run it from the repository
 * root.
 *
 * The ring.  Producers claim positions in order (the CAS on tail in
 * mpsc_reserve()) and commit them in any order; the consumer reads only the
 * record at its head (lull__ring_readable()), so a record committed behind a
 * claimed one is not readable yet.  With NPROD 1 this is the SPSC ring.
 *
 * Memory.  Promela runs one statement at a time in one global order, which
 * is sequential consistency.  The handshake's barriers exist for the one
 * reordering that SC hides, a store that waits in the CPU's store buffer
 * while a later load goes ahead (StoreLoad), so the model gives the two
 * stores the handshake depends on a store buffer: a producer's commit (sb[])
 * and the consumer's announce (csb).  A buffered store becomes visible at a
 * moment of its own (the drain processes) or when a barrier drains it.  A
 * buffer holds one store, so a producer's next claim drains its last
 * commit: the model explores fewer reorderings than a CPU, never one a CPU
 * cannot make.
 *   seq_cst fence        drains the executing thread's buffer
 *   membarrier(2)        drains the consumer's buffer and every producer's:
 *                        a full barrier on every CPU running our threads
 *   futex system calls   full barriers in the kernel
 *   the consumer's exchange in lull__park_end(): drains its own buffer
 *                        first (a read-modify-write reads its own store)
 * Nothing else of the C11 model is modelled: the records' payloads are
 * ordered by release/acquire pairs, which ThreadSanitizer checks.  The
 * consumer's relaxed exchange and the producers' relaxed CAS act on one
 * word, whose modification order alone decides who cleared it.
 *
 * The safety net (TIMEOUT) ends a sleep at any moment: its length is not
 * modelled, only that it may fire anywhere, and it fires in no check of
 * property 1 (with it, a lost wake-up would only be late).
 *
 * The futex.  The kernel's FUTEX_WAIT compares the word and queues the
 * waiter in one step (under the hash bucket lock); FUTEX_WAKE dequeues one
 * waiter, or does nothing when none is queued.  waiting is that queue.
 *
 * Variants, chosen with spin -D (all off: the code as it is, the symmetric
 * barriers of a region whose producers may live in other processes):
 *   ASYM               the asymmetric barrier: producers order only their
 *                      compiler (atomic_signal_fence), the consumer's
 *                      barrier is membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
 *   TIMEOUT            the safety net: a sleeping consumer may wake up at
 *                      any moment on its own
 *   NO_PRODUCER_FENCE  broken: no notify_barrier, a producer's check may pass
 *                      its buffered commit (the lost wake-up)
 *   NO_CONSUMER_FENCE  broken: no barrier, the consumer's recheck may pass
 *                      its buffered announce (the lost wake-up)
 *   BROKEN_CLAIM       broken: wake_claim as a load and a store instead of
 *                      one CAS, so two producers can win one park
 *   COUNT_AS_C         property 3 as lib/park.c counts it: readable after
 *                      the exchange, whatever the producers are doing; spin
 *                      finds it counting wake-ups that were on their way
 *   REACH_WAKE_AWAKE   asserts that no futex wake is made after the
 *                      consumer reset the word and went back to reading;
 *                      spin finding it reachable is the expected answer
 *   REACH_ABA          asserts that a producer's CAS never lands in a later
 *                      park than the one it saw; reachable, as expected
 *
 * Properties:
 *   1. No lost wake-up.  Without TIMEOUT, every record committed is read:
 *      the consumer ends only after reading them all, so a consumer asleep
 *      for good (blocked at sleep with no waker left) is an invalid end
 *      state.  Only drain processes may end while blocked (end labels).
 *   2. One wake per park: at most one producer passes wake_claim between two
 *      announces (claims).
 *   3. The safety net finds no lost wake-up: when it fires and the consumer
 *      cleared the word itself (unpark), any record readable at that moment
 *      belongs to a producer still between commit and the end of its
 *      wake_claim, that is a wake-up on its way, not a lost one.  In the
 *      broken variants it finds the record whose wake-up was lost.
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef RECORDS
#define RECORDS 2 /* per producer */
#endif
#define TOTAL (NPROD * RECORDS)

#define AWAKE 0  /* LULL_PARK_AWAKE */
#define PARKED 1 /* LULL_PARK_FUTEX */

byte park = AWAKE;    /* region->park, as every CPU sees it */
bit committed[TOTAL]; /* record visible as committed (length > 0, or tail) */
byte tail;            /* next position to claim (region->tail in MPSC) */
byte head;            /* the consumer's head */
byte sb[NPROD];       /* a producer's buffered commit: position + 1, or 0 */
bit csb;              /* the consumer's buffered announce */
bit waiting;          /* the consumer is queued in FUTEX_WAIT */
byte claims;          /* wake_claim winners since the last announce */
byte inflight;        /* producers between commit and the end of check or
			 wake_claim: wake-ups on their way */
#ifdef REACH_ABA
bit epoch; /* flips at each announce */
#define EPOCH_FLIP epoch = 1 - epoch
#else
#define EPOCH_FLIP skip
#endif
#ifdef REACH_WAKE_AWAKE
bit parking; /* consumer between announce and its reset of the word */
#define PARKING(v) parking = v
#else
#define PARKING(v) skip
#endif

/* A producer's commit becomes visible. */
inline drain_producer(i)
{
	if
	:: sb[i] != 0 ->
		committed[sb[i] - 1] = 1;
		sb[i] = 0
	:: else
	fi
}

/* The consumer's announce becomes visible: a new park begins. */
inline drain_consumer()
{
	if
	:: csb ->
		park = PARKED;
		csb = 0;
		claims = 0;
		EPOCH_FLIP
	:: else
	fi
}

/* lull__park_end(): exchange the word to AWAKE. */
inline park_end()
{
	drain_consumer();
	cleared_self = (park != AWAKE);
	park = AWAKE;
	PARKING(0)
}

active proctype consumer()
{
	bit cleared_self, timed_out, readable, pending;
	byte i;

next:
	if
	:: head == TOTAL -> goto done
	:: else
	fi;
	/* lull_ring_read(): take the record at the head if it is committed. */
	if
	:: committed[head] ->
		head++;
		goto next
	:: else
	fi;
	/* lull_ring_wait() with an empty ring: lull__park_begin(). */
announce:
	d_step {
		csb = 1;
		PARKING(1)
	};
barrier:
#if defined(NO_CONSUMER_FENCE)
	skip;
#elif defined(ASYM)
	/* membarrier(): our buffer, then a full barrier on every producer. */
	d_step {
		drain_consumer();
		i = 0;
		do
		:: i < NPROD ->
			drain_producer(i);
			i++
		:: else ->
			break
		od;
		i = 0
	};
#else
	/* atomic_thread_fence(memory_order_seq_cst) */
	d_step {
		drain_consumer()
	};
#endif
recheck:
	if
	:: committed[head] ->
		/* A record came: lull__park_end() and read (park_cancels). */
		d_step {
			park_end();
			cleared_self = 0
		};
		goto next
	:: else
	fi;
	/*
	 * sleep: FUTEX_WAIT returns at once unless the word still reads
	 * PARKED; the system call is a full barrier.
	 */
sleep:
	d_step {
		drain_consumer();
		if
		:: park == PARKED ->
			waiting = 1
		:: else
		fi
	};
	if
	:: !waiting ->
		timed_out = 0
#ifdef TIMEOUT
	:: d_step {
		waiting ->
		waiting = 0;
		timed_out = 1
	}
#endif
	fi;
	/*
	 * unpark: lull__park_end(), with a snapshot of the ring and of the
	 * wake-ups on their way for property 3.
	 */
unpark:
	d_step {
		park_end();
		readable = committed[head];
		pending = (inflight > 0)
	};
	/* lull__park_account(): safety_timeouts++ when this holds. */
account:
#ifdef COUNT_AS_C
	d_step {
		assert(!(timed_out && cleared_self && committed[head]))
	};
#else
	assert(!(timed_out && cleared_self && readable) || pending);
#endif
	d_step {
		cleared_self = 0;
		timed_out = 0;
		readable = 0;
		pending = 0
	};
	/* Readable or not (a stale wake-up), lull_ring_wait() loops. */
	goto next;
done:
	skip
}

active [NPROD] proctype producer()
{
	byte me = _pid - 1;
	byte k, pos, seen;
	bit won;
#ifdef REACH_ABA
	bit seen_epoch;
#endif

	do
	:: k < RECORDS ->
		/*
		 * mpsc_reserve(): the CAS on tail.  The model's store buffer
		 * holds one store, so the previous commit drains here (as an
		 * x86 CAS drains it): fewer reorderings than a real buffer,
		 * but all of them possible ones.
		 */
		d_step {
			drain_producer(me);
			pos = tail;
			tail++
		};
		/* commit: the release store of length (MPSC) or tail (SPSC). */
commit:
		d_step {
			sb[me] = pos + 1;
			inflight++
		};
		/* lull__notify() */
notify_barrier:
#if defined(NO_PRODUCER_FENCE) || defined(ASYM)
		skip; /* ASYM: atomic_signal_fence() orders only the compiler */
#else
		d_step {
			drain_producer(me)
		};
#endif
check:
		d_step {
			seen = park;
#ifdef REACH_ABA
			seen_epoch = epoch;
#endif
			if
			:: seen == AWAKE ->
				inflight--
			:: else
			fi
		};
		if
		:: seen != AWAKE ->
			/* lull__wake() */
wake_claim:
#ifdef BROKEN_CLAIM
			if
			:: park == seen ->
				park = AWAKE;
				claims++;
				won = 1
			:: else
			fi;
			assert(claims <= 1);
			inflight--;
#else
			d_step {
				if
				:: park == seen ->
					park = AWAKE;
					claims++;
					won = 1
				:: else
				fi;
				assert(claims <= 1);
#ifdef REACH_ABA
				assert(!won || seen_epoch == epoch);
#endif
				inflight--
			};
#endif
			if
			:: won ->
				/* futex_wake_one(): a full barrier */
wake:
				d_step {
#ifdef REACH_WAKE_AWAKE
					assert(parking);
#endif
					drain_producer(me);
					waiting = 0
				}
			:: else
			fi
		:: else
		fi;
		d_step {
			k++;
			won = 0;
			seen = 0;
			pos = 0
		}
	:: else ->
		break
	od
}

/* Each store buffer drains on its own, at any moment. */
active [NPROD] proctype drain()
{
	byte me = _pid - 1 - NPROD;

end:
	do
	:: d_step {
		sb[me] != 0 ->
		drain_producer(me)
	}
	od
}

active proctype drain_announce()
{
end:
	do
	:: d_step {
		csb ->
		drain_consumer()
	}
	od
}
