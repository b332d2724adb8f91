/* SPDX-License-Identifier: MIT */
/*
 * park.pml - a Promela model of lull's park/wake handshake: the consumer's
 * announce, barrier, recheck, sleep and unpark (lull__park_begin() and
 * lull__park_finish() in lib/park.c, the sleep of lull_ring_wait() in
 * lib/ring_wait.c) against producers that commit, notify_barrier, check,
 * wake_claim and wake (lull__notify(), lull__park_seen() and
 * lull__producer_barrier() in lib/park.h, lull__wake_region() and
 * lull__barrier_heavy() in lib/wake.c); with SHUTDOWN, how a ring ends:
 * lull__shutdown() and its wake in lib/shutdown.c, the producers' -EPIPE
 * paths (mpsc_reserve() in lib/mpsc.h, lane_enter() and lane_leave() in
 * lib/lane.h) and the consumer's drain and poison (closure_next()
 * and closure_final_tail() in lib/ring_read.c); with ROOM, the room
 * handshake, the same one with the roles swapped (lull_producer_wait() in
 * lib/producer_wait.c against lull__space_notify() in lib/park.h).  The
 * labels carry the step names of the C comments.  scripts/check-model.sh
 * runs every check; run it from the repository root.
 *
 * No timer.  A park has no timeout of lull's own (the safety net is an
 * opt-in diagnostic), so every record must reach the consumer through the
 * handshake alone.  The model proves it as liveness: spin -a with weak
 * fairness (pan -a -f), under which a store buffer drains and a thread that
 * can run runs, eventually, and nothing else happens on its own.  The
 * safety net (TIMEOUT) is a separate configuration that checks only what
 * it counts.
 *
 * The ring.  Producers claim positions in order (the CAS on tail in
 * mpsc_reserve()) and commit them in any order; the consumer reads only the
 * record at its head (lull__ring_readable()), so a record committed behind a
 * claimed one is not readable yet.  With NPROD 1 this is the SPSC ring as
 * far as the park handshake goes; SPSC selects the SPSC ring's own shutdown
 * (the busy handshake), with NPROD 1.  Without SHUTDOWN the consumer knows
 * it is to read TOTAL records and ends after the last (it never parks with
 * nothing due, the one park that rightly lasts for ever).
 *
 * Memory.  Promela runs one statement at a time in one global order, which
 * is sequential consistency.  The handshake's barriers exist for the one
 * reordering that SC hides, a store that waits in the CPU's store buffer
 * while a later load goes ahead (StoreLoad), so the model gives the stores
 * the handshakes depend on a store buffer: a producer's commit (sb[]) and,
 * SPSC, its stores of busy (bsb), and the consumer's announce (csb); ROOM:
 * the consumer's head (hsb) and the waiter's registration (wsb).  A
 * buffered store becomes visible at a moment of its own (the drain
 * processes) or when a barrier drains it.  A buffer holds one store, so a
 * thread's next store drains its last one, in program order: the model
 * explores fewer reorderings than a CPU, never one a CPU cannot make.
 *   seq_cst fence        drains the executing thread's buffer
 *   membarrier(2)        drains the consumer's buffer and every producer's:
 *                        a full barrier on every CPU running our threads
 *                        (lull__barrier_heavy(true): the fence, then it)
 *   compiler barrier     (atomic_signal_fence(), the asymmetric side)
 *                        drains nothing
 *   futex and eventfd system calls: full barriers in the kernel
 *   the consumer's exchange in lull__park_end(): drains its own buffer
 *                        first (a read-modify-write reads its own store)
 *   lull__shutdown()'s seq_cst RMWs and load: the shutdown process buffers
 *                        nothing
 * Nothing else of the C11 model is modelled: the records' payloads are
 * ordered by release/acquire pairs, which ThreadSanitizer checks.  The
 * consumer's relaxed exchange and the producers' relaxed CAS act on one
 * word, whose modification order alone decides who cleared it.
 *
 * The sleep.  FUTEX (the default): the kernel's FUTEX_WAIT compares the
 * word and queues the waiter in one step (under the hash bucket lock);
 * FUTEX_WAKE dequeues one waiter, or does nothing when none is queued.
 * EVENTFD: the consumer reads the eventfd whatever the word says; a write
 * made before the read is remembered in the count, and the read takes it.
 * waiting is the consumer asleep in either.  The loop's N-ring park
 * (announce on each ring, one barrier, re-check each) is not modelled: one
 * barrier drains all its announces as it drains the one here.
 *
 * The safety net (TIMEOUT, opt-in) ends a sleep at any moment: its length
 * is not modelled, only that it may fire anywhere.  lull__park_finish()
 * then reads readability before it resets the word and, when a record is
 * readable, polls the word for up to LULL_PARK_CLAIM_GRACE_NS so that a
 * producer between its commit and its wake_claim can claim the wake-up.
 * The model's grace is the ideal one: the consumer waits until the word was
 * cleared by someone else or no producer is between its commit and the end
 * of its wake_claim (inflight); a real producer preempted for longer than
 * the grace is counted.
 *
 * Shutdown (SHUTDOWN).  A shutdown process, any thread, runs
 * lull__shutdown() once at any moment: MPSC, the tail's CLOSED bit, then
 * the state's; SPSC, the state's; then it loads the park word and wakes a
 * parked consumer with the producers' wake_claim.  Every write returns 0 or
 * -EPIPE: MPSC, the claim fails once the tail's bit is set; SPSC, the
 * producer marks itself busy, barrier, checks the state (closed: busy 0,
 * -EPIPE), publishes its tail, clears busy and notifies.  The consumer, when
 * nothing is readable, asks closure_next(): once it sees CLOSED it settles
 * the final tail (MPSC: the closed tail; SPSC: barrier, then busy means wait
 * for the producer's leave to wake it, else the published tail), drains up
 * to it (waiting, parked, for commits of claims taken before the shutdown),
 * takes the poison and ends.  The graceful shutdown only: no DISCARD, no
 * fatal record, no peek, no spinning before a park, and the shutdown's
 * wake of producers waiting for room is not modelled.
 *
 * Variants, chosen with spin -D (all off: the code as it is, the symmetric
 * barriers of a region whose producers may live in other processes):
 *   ASYM               the asymmetric barrier: producers order only their
 *                      compiler (atomic_signal_fence), the consumer's
 *                      barrier is membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)
 *                      (ROOM: the consumer orders its compiler, the waiting
 *                      producer calls membarrier)
 *   ADAPTIVE           with ASYM: the park barrier follows the traffic
 *                      (lull__park_announce(), lull__notify_barrier()).
 *                      At each announce the consumer chooses, as any
 *                      heuristic may, between parks often (ask producers
 *                      to fence: the park_fence word 1, a buffered store
 *                      of its own; the asking park still calls membarrier,
 *                      the parks after it fence alone) and a stream (take
 *                      the request back, membarrier); a read may take it
 *                      back too.  A producer fences when it reads 1
 *   NO_SWITCH_BARRIER  broken, ADAPTIVE: the park that asks for fences
 *                      already fences alone, though producers may not have
 *                      read the request yet
 *   PFENCE_IGNORED     broken, ADAPTIVE: producers never read park_fence
 *                      (so never fence) while parks fence alone
 *   EVENTFD            the consumer sleeps on an eventfd (uring-eventfd,
 *                      epoll, the loop) instead of the futex
 *   TIMEOUT            the opt-in safety net: a sleeping consumer may wake
 *                      up at any moment on its own
 *   SHUTDOWN           a shutdown, and the consumer ends at the poison
 *   SPSC               with SHUTDOWN and NPROD 1: the SPSC ring's shutdown
 *   EXITS              a producer's thread may end between two writes
 *   ROOM               lull_producer_wait()'s handshake instead of the park
 *   EPIPE_NO_NOTIFY    broken, with SPSC: lane_enter()'s -EPIPE path clears
 *                      busy without notifying (how the code first was: a
 *                      consumer waiting for busy sleeps for good)
 *   NO_PRODUCER_FENCE  broken: no notify_barrier, a producer's check may pass
 *                      its buffered commit (the lost wake-up)
 *   NO_CONSUMER_FENCE  broken: no barrier, the consumer's recheck may pass
 *                      its buffered announce (the lost wake-up)
 *   ONE_SIDED_FENCE    broken, with ASYM: the consumer's barrier is a fence
 *                      only (what park.c once fell back to when membarrier
 *                      failed), which pairs with no producer's compiler
 *                      barrier; ROOM: the waiter's
 *   NO_RECHECK         broken: the consumer sleeps after its barrier
 *                      without re-checking the ring
 *   EXIT_MIDWAY        broken, with EXITS: the thread may end between its
 *                      commit and its wake-up (a cancellation point there)
 *   NO_SHUTDOWN_WAKE   broken, with SHUTDOWN: lull__shutdown() wakes nobody
 *   NO_SPACE_FENCE     broken, ROOM: no barrier in lull__space_notify()
 *   NO_WAITER_FENCE    broken, ROOM: no barrier in lull_producer_wait()
 *   BROKEN_CLAIM       broken: wake_claim as a load and a store instead of
 *                      one CAS, so two producers can win one park
 *   NO_GRACE           broken: lull__park_finish() without the grace; it
 *                      counts a wake-up still on its way
 *   READ_AFTER         broken: readability read after the exchange; it
 *                      counts a record committed to an awake consumer
 *   OLD_COUNT          broken: both, the counting lib/park.c had before
 *   NO_BUSY            broken, SPSC: no busy handshake at all
 *   NO_BUSY_FENCE      broken, SPSC: no barrier in lane_enter(), the state
 *                      check may pass the buffered busy = 1
 *   NO_CLOSE_BARRIER   broken, SPSC: no barrier in closure_final_tail(),
 *                      which with ASYM leaves busy = 1 in the producer's
 *                      buffer
 *   STATE_FIRST        broken, MPSC: the shutdown sets the state's bit
 *                      before the tail's
 *   FOREIGN            with EVENTFD: producer 0 lives in another process,
 *                      so lull__wake_region() does not claim the wake-up
 *                      (it cannot write the eventfd): what the code does,
 *                      and without a safety net a lost wake-up, which spin
 *                      finds
 *   REACH_WAKE_AWAKE   asserts that no futex wake is made after the
 *                      consumer reset the word and went back to reading;
 *                      spin finding it reachable is the expected answer
 *   REACH_ABA          asserts that a producer's CAS never lands in a later
 *                      park than the one it saw; reachable, as expected
 *   NOLTL              leaves out the ltl claims, for a plain safety search
 *
 * Properties.  Liveness, the ltl claims at the end, each checked alone with
 * pan -a -f -N name (a system that stops for good stutters, so a consumer
 * asleep for good is an acceptance cycle too):
 *   consumed        [] (head != tail -> <> head == tail): every record
 *                   claimed (so committed: nothing aborts) is consumed
 *   parks_end       [] (waiting -> <> !waiting): every park ends
 *   ends            <> cdone: the consumer reads every record (SHUTDOWN:
 *                   and the poison) and finishes; it implies the two above
 *   room_waits_end  ROOM: [] (pwaiting -> <> !pwaiting): every wait for
 *                   room ends
 *   room_writes     ROOM: <> pdone: the producer that waits for room
 *                   writes all its records
 * Safety, assertions checked in every run:
 *   2. One wake per park: at most one producer (or shutdown) passes
 *      wake_claim between two announces (claims).
 *   3. The safety net finds no lost wake-up: when it fires, a record was
 *      readable before the exchange, the grace is over and the consumer
 *      cleared the word itself (lull__park_finish() counts
 *      safety_timeouts), that never happens.  In the broken variants it
 *      counts a wake-up that was lost, or on its way.
 *   4. Shutdown ends the stream (SHUTDOWN): once the consumer has the
 *      poison it has received every record whose write returned 0.  A
 *      write that returned -EPIPE claimed no position, so it has no record
 *      to deliver.
 *   5. Exactly one poison, and nothing after it: once everyone is done,
 *      nothing is readable at the consumer's head (lull_ring_read() reads
 *      records before it asks closure_next()).
 * Property 1, no lost wake-up, is the liveness above; a plain safety run
 * (NOLTL, pan without -a) still reports a consumer asleep for good as an
 * invalid end state, which is how the larger shutdown configurations are
 * checked within the time.
 */

#ifndef NPROD
#define NPROD 2
#endif
#ifndef RECORDS
#define RECORDS 2 /* per producer */
#endif
#define TOTAL (NPROD * RECORDS)

#if defined(SPSC) && (NPROD != 1 || !defined(SHUTDOWN))
#error "SPSC needs SHUTDOWN and NPROD 1"
#endif
#if defined(SHUTDOWN) && defined(TIMEOUT)
#error "the shutdown properties are checked without the safety net"
#endif
#ifdef OLD_COUNT
#define NO_GRACE
#define READ_AFTER
#endif
#if defined(EVENTFD) && defined(TIMEOUT)
#error "the safety net is modelled on the futex sleep only"
#endif
#if defined(ONE_SIDED_FENCE) && !defined(ASYM)
#error "ONE_SIDED_FENCE breaks the asymmetric barrier: it needs ASYM"
#endif
#if defined(FOREIGN) && !defined(EVENTFD)
#error "FOREIGN needs EVENTFD: any process can wake a futex"
#endif
#if defined(NO_SHUTDOWN_WAKE) && !defined(SHUTDOWN)
#error "NO_SHUTDOWN_WAKE needs SHUTDOWN"
#endif
#if (defined(NO_RECHECK) || defined(EXITS)) && defined(SHUTDOWN)
#error "NO_RECHECK and EXITS are modelled without SHUTDOWN"
#endif
#if defined(EXIT_MIDWAY) && !defined(EXITS)
#error "EXIT_MIDWAY needs EXITS"
#endif
#if defined(ROOM) && (defined(SHUTDOWN) || defined(TIMEOUT) || defined(EVENTFD))
#error "ROOM is the room handshake alone"
#endif
#if defined(ADAPTIVE) && (!defined(ASYM) || defined(ROOM) || \
			  defined(ONE_SIDED_FENCE))
#error "ADAPTIVE is a mode of the asymmetric park barrier"
#endif
#if (defined(NO_SWITCH_BARRIER) || defined(PFENCE_IGNORED)) && \
	!defined(ADAPTIVE)
#error "NO_SWITCH_BARRIER and PFENCE_IGNORED need ADAPTIVE"
#endif

#define AWAKE 0  /* LULL_PARK_AWAKE */
#define PARKED 1 /* LULL_PARK_FUTEX */

/* The consumer's view of a shutdown (ring->closing). */
#define OPEN 0   /* LULL_CLOSING_OPEN */
#define DRAIN 1  /* LULL_CLOSING_DRAIN */
#define POISON 3 /* LULL_CLOSING_POISON */
#define DONE 4   /* LULL_CLOSING_DONE */

/* bsb: an SPSC producer's buffered store of busy. */
#define BUSY_CLEAR 1 /* busy = 0 */
#define BUSY_SET 2   /* busy = 1 */

byte park = AWAKE;        /* region->park, as every CPU sees it */
bit committed[TOTAL + 1]; /* record visible as committed (length > 0);
			     one more, never set */
byte tail;                /* next position to claim (region->tail in MPSC) */
byte head;                /* the consumer's head */
byte sb[NPROD];           /* a producer's buffered commit: position + 1, or 0 */
bit csb;                  /* the consumer's buffered announce */
bit waiting;              /* the consumer sleeps: queued in FUTEX_WAIT, or
			     EVENTFD, blocked in the eventfd's read */
#ifdef EVENTFD
bit efd;                  /* the eventfd's count is not 0 */
#endif
bit cdone;                /* the consumer has finished: read all TOTAL
			     records, or (SHUTDOWN) taken the poison */
byte claims;              /* wake_claim winners since the last announce */
byte inflight;            /* producers between commit (or an SPSC -EPIPE that
			     notifies) and the end of check or wake_claim:
			     wake-ups on their way */
#ifdef SHUTDOWN
bit closed;       /* region->state & LULL_STATE_CLOSED */
bit tail_closed;  /* MPSC: region->tail & LULL_TAIL_CLOSED */
byte closing;     /* ring->closing */
byte final;       /* ring->final_tail */
bit got[TOTAL];   /* delivered (before the poison: the consumer ends there) */
byte refused;     /* writes that returned -EPIPE */
byte ended;       /* producers and the shutdown that returned */
#endif
#ifdef SPSC
bit busy;     /* region->busy, as every CPU sees it */
byte bsb;     /* the producer's buffered store of busy: BUSY_*, or 0 */
byte ptail;   /* region->tail, the published tail, as every CPU sees it */
#define PUBLISH(p) ptail = p
#define DRAIN_BUSY                                                         \
	if                                                                 \
	:: bsb != 0 ->                                                     \
		busy = bsb - 1;                                            \
		bsb = 0                                                    \
	:: else                                                            \
	fi
#define BUFFERED(i) (sb[i] != 0 || bsb != 0)
/* next_record(): nothing past the final tail once closing. */
#define READABLE (committed[head] && (closing == OPEN || head < final))
#else
#define PUBLISH(p) skip
#define DRAIN_BUSY skip
#define BUFFERED(i) (sb[i] != 0)
#define READABLE committed[head]
#endif
#if defined(SPSC) && !defined(EPIPE_NO_NOTIFY)
#define EPIPE_NOTIFIES 1 /* an SPSC -EPIPE leaves via lane_leave() */
#else
#define EPIPE_NOTIFIES 0
#endif
#ifdef ADAPTIVE
bit pfence; /* region->park_fence, as every CPU sees it */
byte fsb;   /* the consumer's buffered store of park_fence: value + 1, or 0 */
#define DRAIN_FENCE_WORD                                                   \
	if                                                                 \
	:: fsb != 0 ->                                                     \
		pfence = fsb - 1;                                          \
		fsb = 0                                                    \
	:: else                                                            \
	fi
/* The consumer stores park_fence: after its last store there, in order. */
#define STORE_FENCE_WORD(v)                                                \
	DRAIN_FENCE_WORD;                                                  \
	fsb = (v) + 1
#else
#define DRAIN_FENCE_WORD skip
#endif
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

/* A producer's buffered store becomes visible (there is at most one). */
inline drain_producer(i)
{
	if
	:: sb[i] != 0 ->
		committed[sb[i] - 1] = 1;
		PUBLISH(sb[i]);
		sb[i] = 0
	:: else
	fi;
	DRAIN_BUSY
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

/* membarrier(): our buffers, then a full barrier on every producer. */
inline membarrier()
{
	DRAIN_FENCE_WORD;
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
}

/*
 * lull__park_end(): exchange the word to AWAKE.  The C first loads it and
 * skips the exchange when it reads AWAKE; that read forwards our own
 * buffered announce if there is one, so it skips only with csb empty and
 * the word AWAKE, where the steps below change nothing: one model covers
 * both.
 */
inline park_end()
{
	drain_consumer();
	cleared_self = (park != AWAKE);
	park = AWAKE;
	PARKING(0)
}

#ifdef SHUTDOWN
/*
 * closure_next() with nothing readable: r = 1 when the poison is next.  It
 * changes closing as the C does, from the read path and from the recheck
 * alike (both call it when the ring is empty).
 */
inline closure_next(r)
{
	if
	:: closing == OPEN && closed ->
		/* closure_final_tail() */
#ifdef SPSC
#ifdef NO_CLOSE_BARRIER
		skip;
#elif defined(ASYM)
		d_step {
			membarrier()
		};
#else
		d_step {
			drain_consumer()
		};
#endif
		if
		:: busy ->
			skip /* its lane_leave() will wake us */
		:: else ->
			d_step {
				final = ptail;
				closing = DRAIN
			}
		fi
#else
		d_step {
			final = tail; /* the closed tail, its bit masked */
			closing = DRAIN
		}
#endif
	:: else
	fi;
	/* DRAIN: at the final tail, seal and hand out the poison. */
	d_step {
		if
		:: closing == DRAIN && head == final ->
			closing = POISON
		:: else
		fi;
		r = (closing == POISON)
	}
}
#endif

#ifndef ROOM
active proctype consumer()
{
	bit cleared_self, timed_out, readable, before;
	byte i;
#ifdef ADAPTIVE
	/*
	 * ring->park_fence_asked, ring->park_fenced, and whether this park's
	 * barrier must be membarrier (lull__park_announce()'s answer).
	 */
	bit asked, fenced, heavy = 1;
#endif

next:
#ifndef SHUTDOWN
	if
	:: head == TOTAL -> goto done
	:: else
	fi;
#endif
	/* lull_ring_read(): take the record at the head if it is committed. */
	if
	:: READABLE ->
		d_step {
#ifdef SHUTDOWN
			got[head] = 1;
#endif
			head++
		};
#ifdef ADAPTIVE
		/* read_batch(): a stream may take the request back. */
		if
		:: asked ->
			d_step {
				STORE_FENCE_WORD(0);
				asked = 0;
				fenced = 0
			}
		:: true
		fi;
#endif
		goto next
	:: else
	fi;
#ifdef SHUTDOWN
	/* Nothing readable: is it the end? */
	closure_next(readable);
	if
	:: readable ->
		goto poison
	:: else
	fi;
#endif
	/* lull_ring_wait() with an empty ring: lull__park_begin(). */
announce:
	d_step {
		csb = 1;
		PARKING(1)
	};
#ifdef ADAPTIVE
	/*
	 * lull__park_announce()'s choice, whatever the heuristic: parks
	 * often (fence alone once asked, else ask and membarrier) or a stream
	 * (take any request back, membarrier).
	 */
mode:
	if
	:: fenced ->
		heavy = 0
	:: !fenced ->
		d_step {
			STORE_FENCE_WORD(1);
			asked = 1;
#ifdef NO_SWITCH_BARRIER
			fenced = 1;
			heavy = 0
#else
			heavy = 1
#endif
		}
	:: d_step {
		if
		:: asked ->
			STORE_FENCE_WORD(0);
			asked = 0;
			fenced = 0
		:: else
		fi;
		heavy = 1
	}
	fi;
#endif
barrier:
#if defined(NO_CONSUMER_FENCE)
	skip;
#elif defined(ADAPTIVE)
	/*
	 * lull__barrier_heavy(heavy), then lull__park_fence_settle(): after
	 * a membarrier(2) an asked-for park_fence is seen by every producer.
	 */
	if
	:: heavy ->
		d_step {
			membarrier();
			if
			:: asked ->
				fenced = 1
			:: else
			fi
		}
	:: else ->
		d_step {
			DRAIN_FENCE_WORD;
			drain_consumer()
		}
	fi;
#elif defined(ASYM) && !defined(ONE_SIDED_FENCE)
	/* lull__barrier_heavy(true): the fence, then membarrier(2) */
	d_step {
		membarrier()
	};
#else
	/*
	 * atomic_thread_fence(memory_order_seq_cst); ONE_SIDED_FENCE: only
	 * this, though the producers order nothing but their compiler.
	 */
	d_step {
		drain_consumer()
	};
#endif
recheck:
	/*
	 * lull__ring_readable(): a record, or closure_next()'s answer.  Its
	 * common case (head_state()) reads the state first and, open, the
	 * head's header alone, two loads the shutdown may run between:
	 * then the answer is "nothing", and the shutdown's own look at the
	 * park word (after its RMW, as our load comes after the barrier)
	 * finds us parked and wakes us.
	 */
#ifdef SHUTDOWN
	if
	:: !closed && closing == OPEN ->
		readable = committed[head]
	:: else ->
		if
		:: READABLE ->
			readable = 1
		:: else ->
			closure_next(readable)
		fi
	fi;
#elif defined(NO_RECHECK)
	readable = 0;
#else
	readable = committed[head];
#endif
	if
	:: readable ->
		/* A record came: lull__park_end() and read (park_cancels). */
		d_step {
			park_end();
			cleared_self = 0;
			readable = 0
		};
		goto next
	:: else
	fi;
	/*
	 * sleep: FUTEX_WAIT returns at once unless the word still reads
	 * PARKED; the system call is a full barrier.
	 */
sleep:
#ifdef EVENTFD
	/*
	 * EVENTFD: a read of the eventfd (an io_uring read, or epoll_wait()
	 * then read) sleeps until the count is not 0, whatever the park word
	 * says, and takes the count: a wake written before the read is
	 * remembered.  A system call: a full barrier.
	 */
	d_step {
		DRAIN_FENCE_WORD;
		drain_consumer();
		waiting = 1
	};
	d_step {
		efd ->
		efd = 0;
		waiting = 0;
		timed_out = 0
	};
#else
	d_step {
		DRAIN_FENCE_WORD;
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
#endif
	/* unpark: lull__park_finish() */
unpark:
	if
	:: timed_out ->
		/* Readability before the exchange. */
		before = committed[head];
grace:
#ifndef NO_GRACE
		if
		:: before ->
			/* the ideal grace: until claimed, or none on its way */
			(park == AWAKE || inflight == 0)
		:: else
		fi;
#endif
		d_step {
			park_end();
#ifdef READ_AFTER
			readable = committed[head]
#else
			readable = before
#endif
		}
	:: else ->
		d_step {
			park_end()
		}
	fi;
	/* account: safety_timeouts++ when this fails. */
account:
	assert(!(timed_out && cleared_self && readable));
	d_step {
		cleared_self = 0;
		timed_out = 0;
		readable = 0;
		before = 0
	};
	/* Readable or not (a stale wake-up), lull_ring_wait() loops. */
	goto next;
#ifdef SHUTDOWN
	/*
	 * Take the poison (closure_consume(): DONE), then check properties 4
	 * and 5 once the producers and the shutdown returned, with every
	 * buffered store visible.
	 */
poison:
	closing = DONE;
	(ended == NPROD + 1);
	d_step {
		i = 0;
		do
		:: i < NPROD ->
			drain_producer(i);
			i++
		:: else ->
			break
		od;
		assert(tail + refused == TOTAL);
		i = 0;
		do
		:: i < tail ->
			assert(got[i]);
			i++
		:: else ->
			break
		od;
		i = 0;
		assert(!READABLE)
	};
#endif
done:
	cdone = 1
}

active [NPROD] proctype producer()
{
	byte me = _pid - 1;
	byte k, pos, seen;
	bit won;
	bit epipe; /* this write returned -EPIPE */
#ifdef REACH_ABA
	bit seen_epoch;
#endif

	do
#ifdef EXITS
	:: break /* the thread ends (returns, or is cancelled) between writes */
#endif
	:: k < RECORDS ->
#ifdef SPSC
		/*
		 * lane_enter(): busy = 1 (relaxed), barrier, check the state.
		 * The store drains the last one, busy = 0 of the last write.
		 */
enter:
#ifdef NO_BUSY
		skip;
#else
		d_step {
			drain_producer(me);
			bsb = BUSY_SET
		};
#if defined(NO_BUSY_FENCE) || defined(ASYM)
		skip; /* ASYM: atomic_signal_fence() orders only the compiler */
#else
		d_step {
			drain_producer(me)
		};
#endif
#endif
enter_check:
		if
		:: closed ->
			/* -EPIPE: lane_leave(): busy = 0, then notify. */
			d_step {
				drain_producer(me);
#ifndef NO_BUSY
				bsb = BUSY_CLEAR;
#endif
#if EPIPE_NOTIFIES
				inflight++;
#endif
				refused++;
				epipe = 1
			}
		:: else ->
			/*
			 * spsc_reserve(), then commit: spsc_publish()'s
			 * release store of the length, then its store of
			 * the tail, modelled as one buffered store: the two
			 * drain in order, and the only reader of the tail
			 * (a closing consumer) reads it after acquiring
			 * busy, which the producer stores after both.
			 */
commit:
			d_step {
				drain_producer(me);
				pos = tail;
				tail++;
				sb[me] = pos + 1;
				inflight++
			};
			/* lane_leave(): busy = 0 (release), lull__notify() */
leave:
#ifdef NO_BUSY
			skip
#else
			d_step {
				drain_producer(me);
				bsb = BUSY_CLEAR
			}
#endif
		fi;
#else
		/*
		 * mpsc_reserve(): the CAS on tail, which fails with -EPIPE
		 * once the tail's CLOSED bit is set.  The model's store
		 * buffer holds one store, so the previous commit drains here
		 * (as an x86 CAS drains it): fewer reorderings than a real
		 * buffer, but all of them possible ones.
		 */
claim:
		d_step {
			drain_producer(me);
#ifdef SHUTDOWN
			if
			:: tail_closed ->
				refused++;
				epipe = 1
			:: else ->
				pos = tail;
				tail++
			fi
#else
			pos = tail;
			tail++
#endif
		};
#endif
		if
		:: epipe && !EPIPE_NOTIFIES ->
			skip
		:: else ->
#ifndef SPSC
			/* commit: mpsc_commit_at()'s release store of length */
commit:
			d_step {
				sb[me] = pos + 1;
				inflight++
			};
#endif
#ifdef EXIT_MIDWAY
			/*
			 * Broken: the thread may end between its commit and its
			 * wake-up (a cancellation point in between).
			 */
			if
			:: break
			:: skip
			fi;
#endif
			/* lull__notify() */
notify_barrier:
#if defined(ADAPTIVE) && !defined(NO_PRODUCER_FENCE) && \
	!defined(PFENCE_IGNORED)
			/*
			 * lull__notify_barrier(): the compiler's, and a
			 * fence when park_fence reads 1.
			 */
			d_step {
				if
				:: pfence ->
					drain_producer(me)
				:: else
				fi
			};
#elif defined(NO_PRODUCER_FENCE) || defined(ASYM)
			skip; /* ASYM: atomic_signal_fence(), compiler only */
#else
			d_step {
				drain_producer(me)
			};
#endif
check:
			d_step {
				seen = park;
#ifdef FOREIGN
				/*
				 * Producer 0 lives in another process:
				 * lull__wake_region() returns before its
				 * wake_claim, since it cannot write the
				 * consumer's eventfd.
				 */
				if
				:: me == 0 ->
					seen = AWAKE
				:: else
				fi;
#endif
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
#ifdef EVENTFD
						efd = 1 /* write(2) */
#else
						waiting = 0 /* futex_wake_one() */
#endif
					}
				:: else
				fi
			:: else
			fi
		fi;
		d_step {
			k++;
			won = 0;
			epipe = 0;
			seen = 0;
			pos = 0
		}
	:: else ->
		break
	od;
#ifdef SHUTDOWN
	ended++
#endif
}

/* Each store buffer drains on its own, at any moment. */
active [NPROD] proctype drain()
{
	byte me = _pid - 1 - NPROD;

end:
	do
	:: d_step {
		BUFFERED(me) ->
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
#ifdef ADAPTIVE
	:: d_step {
		fsb != 0 ->
		DRAIN_FENCE_WORD
	}
#endif
	od
}

#ifdef SHUTDOWN
/*
 * lull__shutdown(LULL_SHUTDOWN_GRACEFUL), from any thread at any moment:
 * seq_cst RMWs, then a seq_cst load of the park word, so it buffers
 * nothing.
 */
active proctype shutdown()
{
	byte seen;
	bit won;

#if !defined(SPSC) && !defined(STATE_FIRST)
close_tail:
	tail_closed = 1; /* fetch_or(tail, LULL_TAIL_CLOSED) */
#endif
close_state:
	closed = 1; /* fetch_or(state, LULL_STATE_CLOSED) */
#if !defined(SPSC) && defined(STATE_FIRST)
close_tail:
	tail_closed = 1;
#endif
check:
#ifdef NO_SHUTDOWN_WAKE
	seen = AWAKE; /* broken: the shutdown wakes nobody */
#else
	seen = park;
#endif
	if
	:: seen != AWAKE ->
		/* lull__wake_region() */
wake_claim:
		d_step {
			if
			:: park == seen ->
				park = AWAKE;
				claims++;
				won = 1
			:: else
			fi;
			assert(claims <= 1)
		};
		if
		:: won ->
wake:
#ifdef EVENTFD
			efd = 1
#else
			waiting = 0
#endif
		:: else
		fi
	:: else
	fi;
	ended++
}
#endif

/*
 * Liveness, checked with spin -a and weak fairness (pan -a -f -N name):
 * a store buffer drains, and a thread that can run runs, eventually; no
 * timer is needed for any of these.
 */
#else /* ROOM */
/*
 * lull_producer_wait(): the park handshake with the roles swapped.  One
 * producer writes RECORDS records into a ring with room for one; when it
 * finds no room it waits: load space_seq, register in space_waiters,
 * barrier, re-check the room, futex wait on space_seq while it still holds
 * what it loaded, unregister.  The consumer reads each record (it is
 * modelled as never sleeping: its own park is the model above), stores
 * head, then lull__space_notify(): barrier, load space_waiters, and when
 * someone waits lull__space_wake(): bump space_seq, wake everyone.  The
 * stores that matter are buffered as above: the consumer's head (hsb) and
 * the producer's registration (wsb).  ASYM: the consumer, the frequent side
 * here, orders only its compiler, and the waiting producer's barrier is
 * membarrier(2).
 */
#define CAP 1          /* records the ring holds */
byte rtail;            /* records written (visible at once: the consumer's
			  side of that is the park model's) */
byte rhead;            /* region->head, as every CPU sees it */
byte chead;            /* the consumer's own head */
bit hsb;               /* the consumer's buffered store of head */
byte waiters;          /* region->space_waiters, as every CPU sees it */
bit wsb;               /* the producer's buffered registration */
byte seq;              /* region->space_seq */
bit pwaiting;          /* the producer is queued in FUTEX_WAIT */
bit pdone;             /* the producer wrote all its records */

inline drain_head()
{
	if
	:: hsb ->
		rhead = chead;
		hsb = 0
	:: else
	fi
}

inline drain_register()
{
	if
	:: wsb ->
		waiters++;
		wsb = 0
	:: else
	fi
}

active proctype producer()
{
	byte k, s;

	do
	:: k < RECORDS ->
room_check:
		if
		:: rtail - rhead < CAP ->
			/* the write */
			rtail++;
			k++
		:: else ->
			s = seq; /* acquire load of space_seq */
register:
			d_step {
				wsb = 1
			};
room_barrier:
#if defined(NO_WAITER_FENCE)
			skip;
#elif defined(ASYM) && !defined(ONE_SIDED_FENCE)
			d_step {
				drain_register();
				drain_head()
			};
#else
			d_step {
				drain_register()
			};
#endif
room_recheck:
			if
			:: rtail - rhead < CAP ->
				skip
			:: else ->
				/* futex_wait(space_seq, s): a full barrier */
room_sleep:
				d_step {
					drain_register();
					if
					:: seq == s ->
						pwaiting = 1
					:: else
					fi
				};
				!pwaiting
			fi;
unregister:
			d_step {
				drain_register();
				waiters--
			}
		fi
	:: else ->
		break
	od;
	pdone = 1
}

active proctype consumer()
{
	do
	:: chead < RECORDS ->
		(rtail > chead); /* a record to read */
		/* release store of head */
		d_step {
			drain_head();
			chead++;
			hsb = 1
		};
		/* lull__space_notify() */
space_barrier:
#if defined(NO_SPACE_FENCE) || defined(ASYM)
		skip; /* ASYM: atomic_signal_fence(), compiler only */
#else
		d_step {
			drain_head()
		};
#endif
space_check:
		if
		:: waiters > 0 ->
			/* lull__space_wake(): FUTEX_WAKE, a full barrier */
			d_step {
				drain_head();
				seq++;
				pwaiting = 0
			}
		:: else
		fi
	:: else ->
		break
	od
}

active proctype drain_buffers()
{
end:
	do
	:: d_step {
		hsb ->
		drain_head()
	}
	:: d_step {
		wsb ->
		drain_register()
	}
	od
}
#endif /* ROOM */

#if !defined(NOLTL) && !defined(ROOM)
/* Every record claimed (so committed: nothing aborts) is consumed. */
ltl consumed { [] ((head != tail) -> <> (head == tail)) }
/* Every park ends: nobody sleeps for good while records are due. */
ltl parks_end { [] (waiting -> <> !waiting) }
/* The consumer finishes: all TOTAL records, or the poison. */
ltl ends { <> cdone }
#elif !defined(NOLTL)
/* Every wait for room ends. */
ltl room_waits_end { [] (pwaiting -> <> !pwaiting) }
/* The producer writes all its records. */
ltl room_writes { <> pdone }
#endif
