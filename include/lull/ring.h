/* SPDX-License-Identifier: MIT */
/*
 * lull/ring.h - lock-free rings of variable-length records.
 *
 * A ring is one contiguous, position-independent memory region (a header,
 * the hot indices, a control block and the data; no pointers inside) plus a
 * per-process handle, struct lull_ring, that points into it.  The region can
 * be allocated by lull or laid out in memory the caller provides, and opened
 * again by other handles ("create once, open many").
 *
 * Records are an 8-byte header {int32 length, int32 type} followed by the
 * payload, 8-byte aligned.  User types are >= 1; types <= 0 are reserved for
 * lull.  A record never straddles the end of the data area: a padding record,
 * which the consumer skips, fills the gap.
 *
 * Topology is fixed when the region is created:
 *   LULL_RING_SPSC  one attached producer at a time; its write path has no
 *                   atomic read-modify-write.  A second attach is -EBUSY.
 *   LULL_RING_MPSC  any number of producers claim space concurrently and
 *                   commit independently: a slow producer never makes another
 *                   producer wait; only the consumer waits at a record that
 *                   is claimed but not yet committed.  One order for all:
 *                   records are read in the order their space was claimed.
 *   LULL_RING_LANES(n)
 *                   up to n (1..LULL_RING_LANES_MAX) producers attached at
 *                   once, each writing a lane of its own as an SPSC
 *                   producer writes its ring: no atomic read-modify-write,
 *                   no line shared with another producer, and a producer
 *                   preempted mid-write delays nobody.  The consumer merges
 *                   the lanes, taking from each in turn: each producer's
 *                   records arrive in its order, with no order promised
 *                   between producers (as with a queue per producer).
 *                   Capacity is per lane.  An attach beyond n is -EBUSY.
 * Producers use the lull_spsc_*() or lull_mpsc_*() calls that match the
 * ring; the other family fails with -EINVAL.  A LANES producer may use
 * either family.
 *
 * Progress: every call is lock-free and returns without waiting: a full ring
 * is -EAGAIN on the producer side, an empty one -EAGAIN on the consumer side.
 * Nothing here spins, sleeps or makes a system call on the data path, but
 * the wake-ups of lull/park.h (a commit wakes a parked consumer, and a
 * read wakes producers blocked in lull_producer_wait()) and, on a shared
 * ring (see "Rings shared between processes"), the opening of a new
 * consumer's beacon by the first write that finds it, and, where no
 * beacon can be had, the one poll(2) by which a producer that finds the
 * ring full asks whether the consumer's process still lives.
 *
 * Which calls may run concurrently (same ring):
 *
 *   call                          | with itself          | with the others
 *   ------------------------------+----------------------+------------------
 *   lull_spsc_* (one producer)    | no (one thread at a  | yes
 *                                 |  time per producer)  |
 *   lull_mpsc_* (producer p)      | yes, on different p; | yes
 *                                 |  no, on the same p   |
 *   lull_ring_read, _read_items,  | no (one consumer)    | yes
 *    peek, release                |                      |
 *   lull_producer_attach/detach   | yes                  | yes, except on
 *                                 |                      |  the producer
 *                                 |                      |  being detached
 *   lull_ring_shutdown, _fatal    | yes                  | yes (also from
 *                                 |                      |  signal handlers)
 *   lull_ring_close               | no (consumer)        | yes
 *   lull_ring_capacity/max_payload| yes                  | yes
 *   lull_ring_create/open         | yes                  | yes
 *   (and _shared, _named, _fd,    |                      |
 *    send, recv, lull_ring_fd)    |                      |
 *   lull_ring_watch, _watch_fd    | no (consumer)        | yes
 *   lull_ring_destroy             | no                   | no: after every
 *                                 |                      |  producer of this
 *                                 |                      |  handle detached
 *
 * Errors are negative errno values.  The codes lull gives a meaning of its
 * own, across every header, with the text lull_strerror() (lull.h) returns
 * for each, word for word (test_ring checks the two agree); any other code
 * keeps its system meaning:
 *   -EINVAL    invalid argument
 *   -EAGAIN    ring full or empty, try again
 *   -EMSGSIZE  record larger than the ring's maximum payload
 *   -EBUSY     busy: a role or claim is taken, the submission queue is
 *              full, or the park, loop or handler is already set up or
 *              running
 *   -EPERM     not permitted: not the consumer handle, not the producer's
 *              own thread, or io_uring disabled in this process
 *   -ENOMEM    out of memory
 *   -EPROTO    not a lull region of this layout version, or corrupt
 *   -EPIPE     ring shut down
 *   -EALREADY  already done: a park is armed, or a fatal was reported
 *   -ENOENT    not found: nothing armed, attached or pending
 * In the rings:
 *   -EINVAL    a bad argument (NULL, bad capacity, reserved type, wrong
 *              topology, unaligned or too small memory)
 *   -EAGAIN    the ring is full (producer) or empty (consumer)
 *   -EMSGSIZE  the record is larger than lull_ring_max_payload()
 *   -EBUSY     the role is taken (a second SPSC producer, a second consumer,
 *              a second claim on one producer)
 *   -EPERM     the handle does not hold the consumer role, or a producer
 *              bound to its thread is detached from another
 *   -ENOMEM    allocation failed
 *   -EPROTO    the memory does not hold a lull region of this layout version
 *              or its header is inconsistent (open), or (read, peek) the
 *              region holds what no producer writes: reported once, the
 *              ring is then fatal (see "A corrupt region" below)
 *   -EPIPE     the ring is shut down: the one code for "closed", for
 *              producers (after a shutdown, a fatal, the last detach, or the
 *              consumer's lull_ring_close()) and for the consumer (after
 *              the poison record)
 *
 * Shutdown (docs/DESIGN.md, "Shutdown"): lull_ring_shutdown() may be called
 * from any thread, any number of times, and from a signal handler.  From
 * then on every new claim or write fails with -EPIPE; claims already taken
 * may still commit or abort; the consumer receives every record committed
 * before the shutdown, in order, then the fatal record if any, then exactly
 * one poison record, and -EPIPE ever after.  A parked consumer is woken for
 * it.  The last producer to detach shuts the ring down gracefully, as a
 * channel closes when its last sender goes.
 *
 * A corrupt region (docs/DESIGN.md, "A hostile region"): a region shared
 * with other processes may hold anything, written by mistake or on
 * purpose, and the consumer trusts none of it.  Whatever the region
 * holds, the consumer's calls never read or write outside it, never loop
 * on what they find, and never hand out a record that does not lie within
 * the data area or is longer than lull_ring_max_payload(); the fatal
 * record is the consumer's own copy, its message terminated.  Every
 * record header is checked before the record is handed out or skipped
 * (its length, where it lies, its type), and so is every position read
 * from the region.  The first thing found that no producer writes makes
 * the ring fatal: -EPROTO from one read or peek (the read that found it
 * returns the records it handed out before, and the next one says
 * -EPROTO), counted in lull_ring_stats()' corruptions; then the poison
 * record and -EPIPE ever after, nothing more read from the data.  The
 * region is shut down immediately and sealed, so producers get -EPIPE.
 * Payloads are not checked, and the process that wrote them can change
 * them while a handler reads them: copy before checking what must hold.
 * A producer can still withhold records, or keep its lane busy, and the
 * consumer then waits, as for any slow producer.
 */
#ifndef LULL_RING_H
#define LULL_RING_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ring topology, given to lull_ring_create() and lull_ring_create_in(). */
#define LULL_RING_SPSC 1u
#define LULL_RING_MPSC 2u
#define LULL_RING_LANES(n) (3u | ((unsigned)(n) << 8))
#define LULL_RING_LANES_MAX 64u

/* lull_ring_open() flag: take the consumer role for this handle. */
#define LULL_OPEN_CONSUMER 1u

/* Record framing. */
#define LULL_RECORD_ALIGN 8u
#define LULL_RECORD_HEADER_SIZE 8u

/* Capacity (bytes of record data) is a power of two in this range. */
#define LULL_RING_MIN_CAPACITY ((size_t)1 << 8)
#define LULL_RING_MAX_CAPACITY ((size_t)1 << 30)

/*
 * Reserved record types.  Padding never reaches a handler.  After a
 * shutdown the consumer receives, once each and in this order, the fatal
 * record (if lull_ring_fatal() was called; its data is a struct
 * lull_fatal) and the poison record (no data); every read after the poison
 * is -EPIPE.
 */
#define LULL_TYPE_PADDING 0
#define LULL_TYPE_POISON (-1)
#define LULL_TYPE_FATAL (-2)
/*
 * A shared ring's producer process died (lull_ring_create_shared()): its
 * data is a struct lull_death, handed out once per producer handle that
 * process held, after every record that producer had committed and before
 * the poison record.
 */
#define LULL_TYPE_DEATH (-3)

/* The payload of a LULL_TYPE_FATAL record. */
#define LULL_FATAL_MESSAGE_MAX 256
struct lull_fatal {
	int32_t code;    /* the producer's error code */
	uint32_t length; /* bytes of message, no terminating NUL counted */
	char message[LULL_FATAL_MESSAGE_MAX]; /* NUL-terminated */
};

/* The payload of a LULL_TYPE_DEATH record. */
struct lull_death {
	int32_t pid;      /* the producer's process */
	uint32_t slot;    /* its producer slot, 0..LULL_PRODUCER_SLOTS-1 */
	uint64_t skipped; /* bytes of the data area skipped for a claim
			     it left open (lull_*_claim(),
			     lull_*_claim_batch(); on MPSC also a write
			     call it died in): its headers, payloads and
			     a wrap's padding; 0 when it held none */
};

/* Producers attached at once to a shared ring, from all processes. */
#define LULL_PRODUCER_SLOTS 64u

/* lull_ring_create_shared() and lull_ring_create_named() flag: the
 * creating handle does not take the consumer role (a producer process
 * makes the ring, the consumer opens it). */
#define LULL_SHARE_NO_CONSUMER 1u

/* lull_ring_shutdown() modes. */
#define LULL_SHUTDOWN_GRACEFUL 0u  /* deliver what was committed, then poison */
#define LULL_SHUTDOWN_IMMEDIATE 1u /* discard what is undelivered, poison */

/* lull_producer_attach() flag: detach when the calling thread exits. */
#define LULL_PRODUCER_THREAD 1u

/* Largest user record type; user types are 1..LULL_TYPE_MAX. */
#define LULL_TYPE_MAX INT32_MAX

/* Return values of a lull_record_fn. */
#define LULL_READ_CONTINUE 0 /* consume this record, go on */
#define LULL_READ_STOP 1     /* consume this record, end the batch */
#define LULL_READ_KEEP 2     /* leave this record for the next read, end */

struct lull_ring;
struct lull_producer;

/*
 * A record as the consumer sees it: a view into the ring, valid only until
 * the handler returns (lull_ring_read) or until lull_ring_release().
 */
struct lull_record {
	const void *data; /* 8-byte aligned payload */
	uint32_t len;     /* payload bytes, 0 allowed */
	int32_t type;     /* >= 1 for user records */
};

/*
 * One record of a batch claim (lull_spsc_claim_batch()): the caller sets
 * type and len; the claim sets data, where the payload goes (8-byte
 * aligned).
 */
struct lull_claim {
	void *data;
	uint32_t len;
	int32_t type;
};

/* A producer's counters (lull_producer_stats()). */
struct lull_producer_stats {
	uint64_t claim_retries; /* MPSC: claims that lost a race for the
				   shared tail and tried again */
};

/*
 * Batch handler: called once per record, in ring order, on the consumer's
 * thread.  Returns LULL_READ_CONTINUE, LULL_READ_STOP or LULL_READ_KEEP; any
 * other value acts as LULL_READ_STOP.
 */
typedef int (*lull_record_fn)(const struct lull_record *rec, void *ctx);

/*
 * A run of records as lull_ring_read_items() hands them out: @count
 * records of one @type and @len payload bytes each, laid @len bytes apart
 * from @data (8-byte aligned).  A view into the ring, valid only until
 * the handler returns.  The items of one array record
 * (lull_spsc_write_array(), lull_mpsc_write_array()) come as one run, or
 * as a few when the read's limit or an earlier KEEP splits it; any other
 * record, the fatal and poison records and a death notice included, is
 * a run of one whose @len may be any payload length.
 */
struct lull_items {
	const void *data;
	uint32_t len;
	int32_t type;
	uint32_t count; /* >= 1 */
};

/*
 * Run handler: called once per run, in ring order, on the consumer's
 * thread.  LULL_READ_CONTINUE and LULL_READ_STOP consume the whole run,
 * LULL_READ_KEEP none of it; any other value acts as LULL_READ_STOP.
 */
typedef int (*lull_items_fn)(const struct lull_items *run, void *ctx);

/*
 * Bytes of memory an SPSC or MPSC region of the given capacity needs
 * (header, indices, control block and data).  Any thread.
 * Returns the size, or -EINVAL when capacity is not a power of two in
 * [LULL_RING_MIN_CAPACITY, LULL_RING_MAX_CAPACITY].
 */
ssize_t lull_ring_region_size(size_t capacity);

/*
 * Bytes of memory a region of topology @flags (LULL_RING_SPSC,
 * LULL_RING_MPSC or LULL_RING_LANES(n)) needs, with @capacity bytes of
 * data in each lane.  Any thread.  Returns the size, or -EINVAL (bad
 * capacity as above, unknown topology, a lane count outside
 * 1..LULL_RING_LANES_MAX).
 */
ssize_t lull_ring_region_size_for(size_t capacity, unsigned flags);

/*
 * Allocate a region of @capacity data bytes (per lane) with topology
 * @flags (LULL_RING_SPSC, LULL_RING_MPSC or LULL_RING_LANES(n)) and a
 * handle holding the consumer role.
 * Any thread.  Returns 0 and sets *ringp, or -EINVAL, -ENOMEM.
 */
int lull_ring_create(struct lull_ring **ringp, size_t capacity,
		     unsigned flags);

/*
 * Lay out a new region in caller memory @mem of @size bytes (at least
 * lull_ring_region_size_for(capacity, flags), 128-byte aligned; the caller
 * keeps ownership and must keep it alive until every handle on it is
 * destroyed) and return a handle holding the consumer role.  Any previous
 * content is overwritten: call it once per region, then lull_ring_open()
 * from others.
 * Any thread.  Returns 0 and sets *ringp, or -EINVAL, -ENOMEM.
 */
int lull_ring_create_in(struct lull_ring **ringp, void *mem, size_t size,
			size_t capacity, unsigned flags);

/*
 * Open a region laid out earlier by lull_ring_create_in(), without touching
 * its content.  With LULL_OPEN_CONSUMER the handle takes the consumer role.
 * The header is read once and checked whole; the handle keeps what it
 * checked, so a header rewritten later changes nothing it does.
 * Any thread.  Returns 0 and sets *ringp, or -EINVAL (bad argument or
 * @size smaller than the region), -EPROTO (not a lull region, another
 * layout version, an inconsistent header, or with LULL_OPEN_CONSUMER a
 * lane's read position that is not a multiple of 8), -EBUSY (consumer
 * role taken), -ENOMEM.
 */
int lull_ring_open(struct lull_ring **ringp, void *mem, size_t size,
		   unsigned flags);

/*
 * Rings shared between processes (docs/DESIGN.md, "Across processes").
 * A shared region has the same records, parking and shutdown as any
 * other, and more:
 *   - every producer holds a slot of LULL_PRODUCER_SLOTS, naming its
 *     process; the consumer watches each producer process through a
 *     pidfd (lull_ring_wait(), the loop, or lull_ring_watch_fd()), and
 *     when one dies, however it dies, delivers what it had committed,
 *     skips a claim it left open (nothing torn is ever handed out), hands
 *     out a LULL_TYPE_DEATH record naming it, and frees its slot, lane and
 *     producer count: the last producer gone closes the ring as a detach
 *     does, poison last;
 *   - producers learn when the consumer's process ends (exit, kill,
 *     crash or exec), however it ends: their next claim or write returns
 *     -EPIPE, and the ring is shut down for every producer.  The news
 *     costs no system call: the first time a process takes the consumer
 *     role of a shared ring, lull makes that process's beacon, a sealed
 *     page (one descriptor, close-on-exec) whose word the kernel changes
 *     when the process ends, kept by a thread of lull's that sleeps for
 *     good with every signal blocked; both last until the process ends,
 *     however many rings it consumes (a fork's child lets go of its
 *     parent's).  A producer opens the beacon read-only through
 *     /proc/PID/fd of the consumer (the same user, or CAP_SYS_PTRACE)
 *     and loads its word before every claim or write.  Where it cannot,
 *     it falls back to a pidfd of the consumer: then a claim or write
 *     that finds the ring full, and lull_producer_wait(), return -EPIPE,
 *     and a write that still finds room succeeds into a ring nobody
 *     reads;
 *   - the barrier of the park handshake is a fence on both sides (recorded
 *     in the region, docs/DESIGN.md says why), and futex waits are
 *     process-shared.  A park on an eventfd cannot be woken from another
 *     process: the loop's uring-eventfd and epoll backends reach a
 *     shared ring's futex through a bridge thread (lull_loop_attach()),
 *     and lull_uring_park_arm() with the eventfd backend refuses a shared
 *     ring with -EOPNOTSUPP.
 * Pointers into a shared region are per process; everything in it is
 * positions and values.  A region stays alive while any process maps it:
 * the memfd when its last descriptor and mapping go, a named one until
 * unlink(2) as well.
 *
 * create_shared: a new region in a memfd (sealed against shrinking and
 *         growing), and a handle holding the consumer role unless
 *         @share_flags has LULL_SHARE_NO_CONSUMER.  lull_ring_fd() gives
 *         the memfd, close-on-exec: dup2() it across exec, or pass it
 *         with lull_ring_send().
 * create_named: the same in a new file at @path (0600, created
 *         exclusively: -EEXIST if it exists), on tmpfs (/dev/shm/NAME) or
 *         hugetlbfs (its huge pages then back the ring), for processes
 *         that find each other by path.  Remove it with unlink(2).
 * open_fd: open the shared region in @fd (a memfd from create_shared, or
 *         a file from create_named); the handle keeps a duplicate, so
 *         the caller may close @fd.  @flags as lull_ring_open().
 * open_named: open the region at @path.
 * send / recv: pass a shared ring's memfd over a connected Unix socket
 *         (SCM_RIGHTS) and open it on the other side; recv closes the
 *         descriptor it received after opening it.
 *
 * Opening checks everything it reads before trusting it: a regular file
 * or memfd whose size holds the region, a memfd's seals (F_SEAL_SHRINK at
 * least), then the header as lull_ring_open() does (magic, stored last at
 * creation, layout version, topology, capacity, flags, sizes) and that
 * the region was made shared.
 * Any thread.  Return 0 and set *ringp, or -EINVAL (bad argument, a file
 * that is not regular or too small for what its header says, an unsealed
 * memfd), -EPROTO (as lull_ring_open(), or a region not made shared),
 * -EBUSY (consumer role taken), -EEXIST (create_named: @path exists),
 * -ENOMEM, or the error of the system call that failed (open, mmap,
 * memfd_create, sendmsg, recvmsg: -ENOENT, -EACCES, -ENOTSOCK, ...;
 * recv: -EBADMSG when no descriptor came with the message, or the peer
 * closed the socket).  lull_producer_attach() on a shared ring may also
 * return -EBUSY (every slot taken) or the error of reading
 * /proc/self/stat, where the producer's start time comes from.
 */
int lull_ring_create_shared(struct lull_ring **ringp, size_t capacity,
			    unsigned flags, unsigned share_flags);
int lull_ring_create_named(struct lull_ring **ringp, const char *path,
			   size_t capacity, unsigned flags,
			   unsigned share_flags);
int lull_ring_open_fd(struct lull_ring **ringp, int fd, unsigned flags);
int lull_ring_open_named(struct lull_ring **ringp, const char *path,
			 unsigned flags);
int lull_ring_send(const struct lull_ring *ring, int sock);
int lull_ring_recv(struct lull_ring **ringp, int sock, unsigned flags);

/*
 * The descriptor of a shared ring's memory (close-on-exec, owned by the
 * handle: do not close it), or -EINVAL (NULL, or a ring that is not
 * shared through a descriptor).  Any thread.
 */
int lull_ring_fd(const struct lull_ring *ring);

/*
 * Consumer of a shared ring, with an event loop of its own: a descriptor
 * (an epoll instance, owned by the handle) that reads ready when a watched
 * producer process has died, and the call that handles it.  Poll the
 * descriptor for POLLIN beside the ring's park; when it is ready (or at
 * any time), call lull_ring_watch(): it watches the producer processes
 * attached since the last call, takes note of those that died, and
 * recovers what it can (a read or a wait does the rest).  lull_ring_wait()
 * and the loop do all this themselves.  The consumer's thread.  Return
 * the descriptor / 0, or -EINVAL (NULL, not a shared region), -EPERM (not
 * the consumer handle), -ENOMEM, or the error of epoll_create1(2).  After
 * lull_ring_watch(), read the ring until it is empty: a recovery can make
 * records, and the death record, readable without any wake-up.
 */
int lull_ring_watch_fd(struct lull_ring *ring);
int lull_ring_watch(struct lull_ring *ring);

/*
 * Release the handle (and its consumer role); free the region when the
 * handle allocated it.  Every producer attached through this handle must be
 * detached first, the ring detached from any loop, and the CQEs of a park
 * on the caller's io_uring received (lull/park.h).  Returns 0, -EINVAL
 * (NULL) or -EBUSY (one of those is still in use; nothing is released).
 */
int lull_ring_destroy(struct lull_ring *ring);

/* Data capacity in bytes, or -EINVAL.  Any thread. */
ssize_t lull_ring_capacity(const struct lull_ring *ring);

/*
 * Largest payload one record may carry: capacity / 8 minus the 8-byte
 * header.  Any thread.  Returns it, or -EINVAL.
 */
ssize_t lull_ring_max_payload(const struct lull_ring *ring);

/*
 * Attach a producer to the ring.  On an SPSC ring only one producer may be
 * attached at a time, on a LANES ring one per lane (a detached producer's
 * lane goes to the next one to attach, which goes on where it stopped).
 * The producer is then used by one thread at a time.
 * With LULL_PRODUCER_THREAD it is bound to the calling thread: when that
 * thread ends by any path (return from its start routine, pthread_exit(),
 * pthread_cancel()) the producer detaches by itself, aborting a claim it
 * still holds, so a dead thread never leaves the consumer waiting.
 * Any thread.  Returns 0 and sets *prodp, or -EINVAL (unknown flags),
 * -EBUSY (a second SPSC producer, or every lane taken), -EPIPE (the ring
 * is shut down), -ENOMEM.
 */
int lull_producer_attach(struct lull_ring *ring, unsigned flags,
			 struct lull_producer **prodp);

/*
 * Detach and free a producer.  An outstanding claim is aborted first, so the
 * consumer is never left waiting on it.  When it was the last producer
 * attached to the region, the ring shuts down gracefully.  The producer's
 * thread, or any thread once that one no longer uses it; a thread-bound
 * producer only on its own thread.  Returns 0, -EINVAL, or -EPERM (a
 * thread-bound producer from another thread).
 */
int lull_producer_detach(struct lull_producer *prod);

/*
 * A producer's counters.  The producer's thread, or any thread while it
 * is not used.  Returns 0 or -EINVAL.
 */
int lull_producer_stats(const struct lull_producer *prod,
			struct lull_producer_stats *st);

/*
 * Shut the ring down (see "Shutdown" above), gracefully or immediately
 * (@how: LULL_SHUTDOWN_GRACEFUL or _IMMEDIATE; an immediate shutdown after
 * a graceful one upgrades it).  Any thread, any handle on the region,
 * idempotent, async-signal-safe.  Returns 0 or -EINVAL.
 */
int lull_ring_shutdown(struct lull_ring *ring, unsigned how);

/*
 * Report a producer's failure: a fatal record carrying @code and @message
 * (truncated to LULL_FATAL_MESSAGE_MAX - 1 bytes; NULL for none) is
 * delivered after every record committed before it and before the poison,
 * exactly once; then the ring shuts down gracefully.  Only the first
 * report is kept.  Any thread, any handle, async-signal-safe.  Returns 0
 * (it will be delivered: also after a graceful shutdown, as long as the
 * consumer has not reached the poison yet), -EINVAL, -EALREADY (a fatal
 * record was reported before), -EPIPE (too late: the consumer already
 * chose the poison, or closed the ring).
 */
int lull_ring_fatal(struct lull_ring *ring, int32_t code, const char *message);

/*
 * The consumer is gone: producers' claims and writes fail with -EPIPE from
 * now on instead of filling the ring, and this handle's reads return
 * -EPIPE (no poison: the consumer is the one leaving).  The consumer's
 * thread.  Returns 0, -EINVAL, -EPERM (not the consumer handle).
 */
int lull_ring_close(struct lull_ring *ring);

/*
 * SPSC producer calls; the attached producer's thread only.
 *
 * write:  copy @len bytes of @data into one record of @type.
 * writev: gather @iovcnt buffers into one record of @type.
 * claim:  reserve a record of @type and @len payload bytes and set *datap to
 *         where the payload goes (8-byte aligned); nothing is visible to the
 *         consumer until commit.  One claim at a time per producer.
 * commit: publish the claimed record.
 * abort:  drop the claimed record; the consumer never sees it.
 *
 * Return 0, or -EINVAL (NULL, @type outside 1..LULL_TYPE_MAX, @len > 0 with
 * NULL @data, negative or too many iov entries, an MPSC producer; commit or
 * abort with no claim), -EMSGSIZE (@len above lull_ring_max_payload()),
 * -EAGAIN (not enough free space now; nothing was written), -EBUSY (a
 * write or a claim while a claim is outstanding), -EPIPE (write or claim
 * after a shutdown; a claim taken before it may still commit or abort).
 */
int lull_spsc_write(struct lull_producer *prod, int32_t type,
		    const void *data, size_t len);
int lull_spsc_writev(struct lull_producer *prod, int32_t type,
		     const struct iovec *iov, int iovcnt);
int lull_spsc_claim(struct lull_producer *prod, int32_t type, size_t len,
		    void **datap);
int lull_spsc_commit(struct lull_producer *prod);
int lull_spsc_abort(struct lull_producer *prod);

/*
 * Batches: @count records (at least 1) claimed at once and published with
 * one store, so the consumer sees all of them or none.
 *
 * claim_batch: reserve @count records, each of claims[i].type and
 *         claims[i].len, and set each claims[i].data; nothing is visible
 *         until lull_spsc_commit(), which publishes them all (or
 *         lull_spsc_abort(), which drops them all).  The claim counts as
 *         the producer's one claim.
 * write_batch: copy @count records (recs[i].data, .len, .type) and publish
 *         them together.
 * write_array: copy @count records of one @type and @item_len bytes each,
 *         record i from @items + i * @item_len (an array of fixed-size
 *         items, as rte_ring_enqueue_burst() or a bulk push takes), and
 *         publish them together; @items may be NULL when @item_len is 0.
 *         Items of a multiple of 8 bytes that fit one record together are
 *         packed into it (8 bytes of header for all of them, not for
 *         each); the consumer still gets one record per item.
 *
 * A batch is delivered whole: the consumer reads its records in order,
 * one by one as any others (and may stop between two of them), but a
 * shutdown (even an immediate one, once the consumer took its first
 * record), an abort or a detach never delivers part of one.  The records
 * of a batch, with the padding of a wrap, must fit in an empty ring:
 * their total size (each 8-byte header plus payload, rounded up to 8)
 * may be at most the capacity minus lull_ring_max_payload() minus 8.
 *
 * Return 0, or the errors of lull_spsc_claim() (-EINVAL also for @count
 * 0, a NULL array or a record with a reserved type, -EMSGSIZE also for a
 * batch too large for the ring, -EAGAIN when the whole batch does not
 * fit now: nothing was written).
 */
int lull_spsc_claim_batch(struct lull_producer *prod,
			  struct lull_claim *claims, unsigned count);
int lull_spsc_write_batch(struct lull_producer *prod,
			  const struct lull_record *recs, unsigned count);
int lull_spsc_write_array(struct lull_producer *prod, int32_t type,
			  const void *items, size_t item_len, unsigned count);

/*
 * MPSC producer calls: the same contract as the SPSC ones, for producers of
 * an MPSC ring; different producers may call them concurrently.  An aborted
 * claim becomes a padding record that the consumer skips.  -EINVAL also for
 * an SPSC producer.
 */
int lull_mpsc_write(struct lull_producer *prod, int32_t type,
		    const void *data, size_t len);
int lull_mpsc_writev(struct lull_producer *prod, int32_t type,
		     const struct iovec *iov, int iovcnt);
int lull_mpsc_claim(struct lull_producer *prod, int32_t type, size_t len,
		    void **datap);
int lull_mpsc_commit(struct lull_producer *prod);
int lull_mpsc_abort(struct lull_producer *prod);

/*
 * MPSC batches: as the SPSC ones, with one atomic claim of the shared
 * tail for the whole batch.  Its records are consecutive in the ring:
 * no other producer's record comes between them.
 */
int lull_mpsc_claim_batch(struct lull_producer *prod,
			  struct lull_claim *claims, unsigned count);
int lull_mpsc_write_batch(struct lull_producer *prod,
			  const struct lull_record *recs, unsigned count);
int lull_mpsc_write_array(struct lull_producer *prod, int32_t type,
			  const void *items, size_t item_len, unsigned count);

/*
 * Consumer: hand up to @limit committed records to @fn in ring order, in
 * place (no copy), and publish the new read position once for the batch.
 * On a LANES ring, the lanes are taken in turn, each read starting where
 * the last one left off: every lane's records in their order, and a busy
 * lane cannot keep the others waiting for more than one read.
 * Stops early at a record that is claimed but not yet committed, or when @fn
 * returns LULL_READ_STOP or LULL_READ_KEEP; and on a ring of one lane of
 * 64 KiB or more, after the record that reaches a quarter of the capacity
 * past where the read began (freeing that space for the producers).  Must
 * not be mixed with an outstanding lull_ring_peek().  The consumer's thread
 * only.
 * Returns the number of records consumed (>= 1, or 0 when @fn kept the
 * first one), or -EAGAIN (no committed record), -EPIPE (shut down and the
 * poison record already consumed, or lull_ring_close() called), -EINVAL
 * (NULL, @limit 0, a peek outstanding), -EPERM (not the consumer handle),
 * -EPROTO (the region is corrupt: reported once, after which the ring is
 * fatal and the next read hands out the poison record; see "A corrupt
 * region" above).
 * The fatal and poison records end a batch.
 */
int lull_ring_read(struct lull_ring *ring, lull_record_fn fn, void *ctx,
		   unsigned limit);

/*
 * Consumer: lull_ring_read(), handing out runs instead of records: an
 * array record's items in one call, so that a consumer of small records
 * sent in arrays pays one call per array instead of one per item.  The
 * same records in the same order, the same limit (in records: a run is
 * cut to fit it, the rest of the array left for the next read), the same
 * batches, shutdown and returns (the number of records consumed).
 */
int lull_ring_read_items(struct lull_ring *ring, lull_items_fn fn, void *ctx,
			 unsigned limit);

/*
 * Consumer: look at the next committed record without consuming it.  Calling
 * it again returns the same record until lull_ring_release().  The
 * consumer's thread only.  Returns 0 and fills *rec, or -EAGAIN (no
 * committed record), -EPIPE, -EINVAL, -EPERM, -EPROTO (as for a read:
 * once, then the poison record).
 */
int lull_ring_peek(struct lull_ring *ring, struct lull_record *rec);

/*
 * Consumer: consume the record returned by the last lull_ring_peek() and
 * publish the new read position.  Returns 0, -EINVAL (NULL, or no record
 * peeked), -EPERM.
 */
int lull_ring_release(struct lull_ring *ring);

#ifdef __cplusplus
}
#endif

#endif /* LULL_RING_H */
