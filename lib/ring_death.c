/* SPDX-License-Identifier: MIT */
/*
 * ring_death.c - what a shared region adds to the protocol: the producer
 * slots, the consumer watching every producer process through a pidfd
 * and recovering what a dead one held, producers watching the consumer's
 * process, and the sleeps that wait for a futex and a death at once
 * (docs/DESIGN.md, "Across processes").
 *
 * A process's identity is its pid and its start time (field 22 of
 * /proc/PID/stat, in clock ticks since boot): a pidfd opened from a pid
 * alone could name another process that reused it, so every pidfd opened
 * is checked against the start time the slot recorded, after it was
 * opened (a pidfd names one process for good, so a check that passes
 * then holds).
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "consume.h"
#include "uring_compat.h"

/* ---- processes -------------------------------------------------------- */

int lull__proc_start(int32_t pid, uint64_t *startp)
{
	char path[32] = "/proc/", digits[12], buf[512];
	const char *p, *field;
	uint64_t start = 0;
	size_t n = 0, at = 6;
	long fd, got;
	int spaces = 0;

	if (pid <= 0)
		return -ESRCH;
	for (uint32_t v = (uint32_t)pid; v; v /= 10)
		digits[n++] = (char)('0' + v % 10);
	while (n)
		path[at++] = digits[--n];
	memcpy(path + at, "/stat", sizeof("/stat"));
	fd = LULL_SYSCALL(open(path, O_RDONLY | O_CLOEXEC));
	if (fd < 0)
		return (int)fd;
	got = LULL_SYSCALL(read((int)fd, buf, sizeof(buf) - 1));
	LULL_SYSCALL(close((int)fd));
	if (got <= 0)
		return got < 0 ? (int)got : -ESRCH;
	buf[got] = '\0';
	/* The command name may hold anything, ')' too: after the last one,
	 * " S ppid ..." and field 22 is the 20th after the name. */
	p = strrchr(buf, ')');
	if (!p)
		return -EPROTO;
	for (field = p + 1; *field && spaces < 20; field++)
		if (*field == ' ')
			spaces++;
	if (spaces < 20)
		return -EPROTO;
	for (; *field >= '0' && *field <= '9'; field++)
		start = start * 10 + (uint64_t)(*field - '0');
	*startp = start;
	return 0;
}

/* This process's identity, read once per process (a fork changes it). */
static int32_t self_pid;
static uint64_t self_start;
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;

static int self_identity(int32_t *pidp, uint64_t *startp)
{
	int32_t pid = (int32_t)getpid();
	int ret = 0;

	pthread_mutex_lock(&self_lock);
	if (self_pid != pid) {
		ret = lull__proc_start(pid, &self_start);
		if (ret == 0)
			self_pid = pid;
	}
	*pidp = pid;
	*startp = self_start;
	pthread_mutex_unlock(&self_lock);
	return ret;
}

static bool pidfd_exited(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return LULL_SYSCALL(poll(&p, 1, 0)) > 0;
}

/*
 * A pidfd of the process (@pid, @start), or -ESRCH when that process is
 * gone (exited, or its pid now names another), or another error (no
 * descriptor to spare, no pidfd_open here): then nothing is known.
 */
static int process_watch(int32_t pid, uint64_t start)
{
	uint64_t now;
	long fd;

	fd = LULL_SYSCALL(syscall(SYS_pidfd_open, pid, 0));
	if (fd < 0)
		return fd == -ESRCH ? -ESRCH : (int)fd;
	if (lull__proc_start(pid, &now) < 0 || now != start ||
	    pidfd_exited((int)fd)) {
		LULL_SYSCALL(close((int)fd));
		return -ESRCH;
	}
	return (int)fd;
}

/* ---- a sleep on a futex and a descriptor ------------------------------ */

#define UWAIT_FUTEX 1u
#define UWAIT_POLL 2u

int lull__uwait(struct lull_uwait *w, _Atomic uint32_t *word, uint32_t val,
		int fd, uint64_t timeout_ns, bool *fd_readyp)
{
	struct __kernel_timespec ts, *tsp = NULL;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret;

	*fd_readyp = false;
	if (!w->ready) {
		if (lull_backend_supported(LULL_BACKEND_URING_FUTEX) < 0)
			return -EOPNOTSUPP;
		/* Cooperative task work: no interrupt of the sleeper's CPU
		 * for a completion it will reap anyway (Linux 5.19). */
		ret = io_uring_queue_init(4, &w->uring,
					  IORING_SETUP_COOP_TASKRUN);
		if (ret == -EINVAL)
			ret = io_uring_queue_init(4, &w->uring, 0);
		if (ret < 0)
			return ret;
		w->ready = true;
		w->futex_armed = w->poll_armed = false;
	}
	if (w->poll_armed && w->poll_fd != fd) {
		/* Another descriptor now: start over (exit cancels all). */
		lull__uwait_fini(w);
		return lull__uwait(w, word, val, fd, timeout_ns, fd_readyp);
	}
	/*
	 * A futex wait still in flight from an earlier sleep waits on the
	 * same word for the same value (the caller's park word or room
	 * sequence): its completion is this sleep's.
	 */
	if (!w->futex_armed) {
		sqe = io_uring_get_sqe(&w->uring);
		lull__prep_futex_wait(sqe, word, val);
		io_uring_sqe_set_data64(sqe, UWAIT_FUTEX);
		w->futex_armed = true;
	}
	if (fd >= 0 && !w->poll_armed) {
		sqe = io_uring_get_sqe(&w->uring);
		io_uring_prep_poll_add(sqe, fd, POLLIN);
		io_uring_sqe_set_data64(sqe, UWAIT_POLL);
		w->poll_armed = true;
		w->poll_fd = fd;
	}
	if (timeout_ns < LULL_NS_FOREVER) {
		ts.tv_sec = (long long)(timeout_ns / 1000000000u);
		ts.tv_nsec = (long long)(timeout_ns % 1000000000u);
		tsp = &ts;
	}
	ret = lull__uring_submit_wait(&w->uring, 1, tsp,
				      w->uring.features & IORING_FEAT_NO_IOWAIT);
	if (ret == -ETIME)
		ret = -ETIMEDOUT;
	else if (ret == -EINTR)
		ret = 0; /* the caller looks again */
	else if (ret > 0)
		ret = 0;
	while (io_uring_peek_cqe(&w->uring, &cqe) == 0) {
		if (cqe->user_data == UWAIT_FUTEX) {
			w->futex_armed = false;
		} else if (cqe->user_data == UWAIT_POLL) {
			w->poll_armed = false;
			*fd_readyp = true;
		}
		io_uring_cqe_seen(&w->uring, cqe);
	}
	if (*fd_readyp && ret == -ETIMEDOUT)
		ret = 0;
	return ret;
}

void lull__uwait_fini(struct lull_uwait *w)
{
	if (!w->ready)
		return;
	io_uring_queue_exit(&w->uring);
	w->ready = false;
	w->futex_armed = w->poll_armed = false;
}

/* ---- producers: their slots, and the consumer's process --------------- */

int lull__slot_take(struct lull_producer *prod, const struct lull_ring *ring,
		    uint32_t lane)
{
	struct lull_slot *slots = lull__slots(ring), *slot;
	uint64_t start;
	int32_t pid;
	int ret;

	ret = self_identity(&pid, &start);
	if (ret < 0)
		return ret;
	for (uint32_t i = 0; i < LULL_PRODUCER_SLOTS; i++) {
		uint32_t expected = LULL_SLOT_FREE;

		slot = &slots[i];
		/* Acquire: pairs with the release that freed it (below, or
		 * the consumer's recovery): we fill it after them. */
		if (!atomic_compare_exchange_strong_explicit(
			    &slot->state, &expected, LULL_SLOT_TAKEN,
			    memory_order_acquire, memory_order_relaxed))
			continue;
		/* Relaxed: published by the release of LIVE below. */
		atomic_store_explicit(&slot->pid, pid, memory_order_relaxed);
		atomic_store_explicit(&slot->start, start, memory_order_relaxed);
		atomic_store_explicit(&slot->lane, lane, memory_order_relaxed);
		atomic_store_explicit(&slot->claim_phase, LULL_CLAIM_NONE,
				      memory_order_relaxed);
		/* Pairs with the consumer's acquire of state: it sees the
		 * fields above once it sees LIVE. */
		atomic_store_explicit(&slot->state, LULL_SLOT_LIVE,
				      memory_order_release);
		prod->slot = slot;
		prod->consumer_pidfd = -1;
		/*
		 * seq_cst, then the park check: a consumer parked now wakes
		 * and watches our process (its re-check reads roster_gen),
		 * as a commit wakes it for a record.
		 */
		atomic_fetch_add_explicit(&ring->region->roster_gen, 1,
					  memory_order_seq_cst);
		lull__notify(prod);
		lull__consumer_watch_start(prod);
		return 0;
	}
	return -EBUSY;
}

void lull__slot_give(struct lull_producer *prod)
{
	uint32_t expected = LULL_SLOT_LIVE;

	if (!prod->slot)
		return;
	/*
	 * Release: the lane and claim we gave back before are seen by
	 * whoever takes the slot next.  A slot the consumer found DEAD
	 * (it thought us gone) stays its to recover.
	 */
	atomic_compare_exchange_strong_explicit(&prod->slot->state, &expected,
						LULL_SLOT_FREE,
						memory_order_release,
						memory_order_relaxed);
	atomic_fetch_add_explicit(&prod->region->roster_gen, 1,
				  memory_order_seq_cst);
	lull__notify(prod);
	prod->slot = NULL;
	lull__consumer_watch_stop(prod);
	if (prod->consumer_pidfd >= 0)
		LULL_SYSCALL(close(prod->consumer_pidfd));
	prod->consumer_pidfd = -1;
	if (prod->uwait) {
		lull__uwait_fini(prod->uwait);
		free(prod->uwait);
		prod->uwait = NULL;
	}
}

void lull__claim_given_up_shared(struct lull_producer *prod)
{
	struct lull_region *region = prod->region;

	lull__claim_done(prod);
	/*
	 * Store NONE, fence, load recovering; the consumer, in
	 * watch_death(), bumps recovering, fences, then reads our phase:
	 * with the two fences, either it sees our NONE (and does not wait
	 * for us), or we see it recovering.  Then a roster change, as an
	 * attach makes, with its park check: the consumer's park re-check
	 * takes it for work, and its next sync tries the recovery again.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&region->recovering, memory_order_relaxed))
		return;
	atomic_fetch_add_explicit(&region->roster_gen, 1, memory_order_seq_cst);
	lull__notify(prod);
}

void lull__consumer_announce(struct lull_ring *ring, bool taken)
{
	struct lull_region *region = ring->region;
	uint64_t start;
	int32_t pid;

	if (!taken) {
		atomic_store_explicit(&region->consumer_pid, 0,
				      memory_order_release);
		return;
	}
	if (self_identity(&pid, &start) < 0)
		return; /* no /proc: producers cannot watch us */
	/* Relaxed: published by the release of consumer_pid below. */
	atomic_store_explicit(&region->consumer_start, start,
			      memory_order_relaxed);
	lull__beacon_publish(region);
	/* Pairs with the producers' acquire of consumer_pid. */
	atomic_store_explicit(&region->consumer_pid, pid, memory_order_release);
}

bool lull__consumer_gone(struct lull_producer *prod)
{
	struct lull_region *region = prod->region;
	uint64_t start;
	int32_t pid;
	int fd;

	if (!prod->slot)
		return false;
	if (lull__consumer_lost(prod))
		return true;
	/* Pairs with the release in lull__consumer_announce(). */
	pid = atomic_load_explicit(&region->consumer_pid, memory_order_acquire);
	/* Relaxed: ordered by the acquire of consumer_pid just above. */
	start = atomic_load_explicit(&region->consumer_start,
				     memory_order_relaxed);
	if (pid <= 0 || pid == (int32_t)getpid())
		return false;
	/* Its beacon says it lives: no system call needed. */
	if (lull__consumer_beacon_lives(prod, pid))
		return false;
	if (prod->consumer_pidfd < 0 || prod->consumer_pid != pid) {
		if (prod->consumer_pidfd >= 0)
			LULL_SYSCALL(close(prod->consumer_pidfd));
		prod->consumer_pidfd = -1;
		fd = process_watch(pid, start);
		if (fd == -ESRCH)
			goto gone;
		if (fd < 0)
			return false; /* cannot tell: keep going */
		prod->consumer_pidfd = fd;
		prod->consumer_pid = pid;
	}
	if (!pidfd_exited(prod->consumer_pidfd))
		return false;
gone:
	/* Still the same consumer (not one that left and came back)? */
	if (atomic_load_explicit(&region->consumer_pid, memory_order_acquire) !=
	    pid)
		return false;
	lull__shutdown(region, prod->mode, LULL_SHUTDOWN_IMMEDIATE, 0);
	return true;
}

/* ---- the consumer's watch --------------------------------------------- */

/* A producer slot as the consumer watches it. */
struct watch_slot {
	int pidfd;          /* of its process, or -1 (ours, or none yet) */
	uint32_t gen;       /* bumped at every pidfd: tells its epoll events */
	int32_t pid;
	uint64_t start;
	bool dead;          /* found dead, not recovered yet */
	uint64_t death_tail; /* MPSC: the shared tail when found dead */
	uint64_t skipped;   /* bytes of its open claim skipped */
};

/* A death notice waiting for the records before it to be read. */
struct watch_notice {
	struct lull_death death;
	uint32_t lane;
	uint64_t due;       /* handed out once the lane's head is here */
};

struct lull_watch {
	int epfd;
	unsigned watched;   /* pidfds in it: processes of others */
	unsigned reads;     /* reads since the last look at the watch */
	uint32_t seen_gen;
	bool resync;        /* a pidfd could not be opened: try again */
	unsigned dead;      /* slots dead and not recovered */
	struct watch_slot slot[LULL_PRODUCER_SLOTS];
	struct watch_notice notice[LULL_PRODUCER_SLOTS];
	unsigned notice_first, notices;
	struct lull_death handed; /* the notice a read or peek hands out */
	struct lull_uwait wait;
};

static int watch_get(struct lull_ring *ring, struct lull_watch **wp)
{
	struct lull_watch *w = ring->watch;
	long fd;

	if (!w) {
		w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		fd = LULL_SYSCALL(epoll_create1(EPOLL_CLOEXEC));
		if (fd < 0) {
			free(w);
			return (int)fd;
		}
		w->epfd = (int)fd;
		for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++)
			w->slot[i].pidfd = -1;
		/*
		 * Not yet seen: the first sync reads every slot.  Relaxed:
		 * only a value to differ from; watch_roster() acquires it.
		 */
		w->seen_gen = atomic_load_explicit(&ring->region->roster_gen,
						   memory_order_relaxed) - 1;
		ring->watch = w;
	}
	*wp = w;
	return 0;
}

void lull__watch_free(struct lull_ring *ring)
{
	struct lull_watch *w = ring->watch;

	if (!w)
		return;
	lull__uwait_fini(&w->wait);
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++)
		if (w->slot[i].pidfd >= 0)
			LULL_SYSCALL(close(w->slot[i].pidfd));
	LULL_SYSCALL(close(w->epfd));
	free(w);
	ring->watch = NULL;
}

static void watch_unwatch(struct lull_watch *w, unsigned i)
{
	if (w->slot[i].pidfd >= 0) {
		/*
		 * Out of the epoll set first: a close alone leaves it there
		 * while a forked child still holds a copy of the descriptor,
		 * and its event would then name the slot's next producer.
		 */
		LULL_SYSCALL(epoll_ctl(w->epfd, EPOLL_CTL_DEL,
				       w->slot[i].pidfd, NULL));
		LULL_SYSCALL(close(w->slot[i].pidfd));
		w->watched--;
	}
	w->slot[i].pidfd = -1;
	w->slot[i].pid = 0;
}

/* Slot @i's producer process died: the consumer takes the slot over. */
static void watch_death(struct lull_ring *ring, struct lull_watch *w,
			unsigned i)
{
	struct lull_slot *slot = &lull__slots(ring)[i];
	uint32_t expected = LULL_SLOT_LIVE;

	watch_unwatch(w, i);
	/* Acquire: what it stored in the slot before dying is ours now. */
	if (!atomic_compare_exchange_strong_explicit(
		    &slot->state, &expected, LULL_SLOT_DEAD,
		    memory_order_acquire, memory_order_relaxed))
		return; /* it detached first */
	w->slot[i].dead = true;
	/* Relaxed: ordered by the acquire CAS just above. */
	w->slot[i].pid = atomic_load_explicit(&slot->pid, memory_order_relaxed);
	w->slot[i].skipped = 0;
	w->slot[i].death_tail = 0;
	if (ring->mode == LULL_RING_MPSC)
		/* Pairs with the producers' claim CAS (release fence). */
		w->slot[i].death_tail =
			atomic_load_explicit(&ring->cursor[0].lane->tail,
					     memory_order_acquire) &
			~(uint64_t)LULL_TAIL_FLAGS;
	w->dead++;
	/* Relaxed: a counter, read by lull_ring_stats(). */
	atomic_fetch_add_explicit(&ring->region->deaths, 1,
				  memory_order_relaxed);
	/*
	 * Then a fence before the recovery reads any claim phase: pairs
	 * with the fence of a producer giving a claim up
	 * (lull__claim_given_up_shared()).
	 */
	atomic_fetch_add_explicit(&ring->region->recovering, 1,
				  memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
}

/*
 * Read every slot again after a roster change: watch the producer
 * processes that came, stop watching those that left.
 */
static void watch_roster(struct lull_ring *ring, struct lull_watch *w)
{
	struct lull_slot *slots = lull__slots(ring);
	struct epoll_event ev = { .events = EPOLLIN };
	uint32_t gen, state;
	uint64_t start;
	int32_t pid, self = (int32_t)getpid();
	int fd;

	/* Acquire: pairs with the seq_cst bump after a slot's release. */
	gen = atomic_load_explicit(&ring->region->roster_gen,
				   memory_order_acquire);
	if (gen == w->seen_gen && !w->resync)
		return;
	w->seen_gen = gen;
	w->resync = false;
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++) {
		if (w->slot[i].dead)
			continue;
		/* Pairs with the release of LIVE in lull__slot_take(). */
		state = atomic_load_explicit(&slots[i].state,
					     memory_order_acquire);
		/* Relaxed: ordered by that acquire of state. */
		pid = atomic_load_explicit(&slots[i].pid, memory_order_relaxed);
		start = atomic_load_explicit(&slots[i].start,
					     memory_order_relaxed);
		if (state != LULL_SLOT_LIVE) {
			watch_unwatch(w, i);
			continue;
		}
		if (w->slot[i].pid == pid && w->slot[i].start == start &&
		    (w->slot[i].pidfd >= 0 || pid == self))
			continue; /* watched already */
		watch_unwatch(w, i);
		w->slot[i].pid = pid;
		w->slot[i].start = start;
		if (pid == self)
			continue; /* it cannot die without us */
		fd = process_watch(pid, start);
		if (fd == -ESRCH) {
			watch_death(ring, w, i);
			continue;
		}
		w->slot[i].gen++;
		ev.data.u64 = (uint64_t)w->slot[i].gen << 32 | i;
		if (fd < 0 ||
		    LULL_SYSCALL(epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev)) < 0) {
			if (fd >= 0)
				LULL_SYSCALL(close(fd));
			w->slot[i].pid = 0;
			w->resync = true; /* not watched: try again later */
			continue;
		}
		w->slot[i].pidfd = fd;
		w->watched++;
	}
}

/* Take note of every watched process that died since we last looked. */
static void watch_reap(struct lull_ring *ring, struct lull_watch *w)
{
	struct epoll_event ev[16];
	long n;

	do {
		n = LULL_SYSCALL(epoll_wait(w->epfd, ev, 16, 0));
		for (long k = 0; k < n; k++) {
			uint32_t i = (uint32_t)ev[k].data.u64;
			uint32_t gen = (uint32_t)(ev[k].data.u64 >> 32);

			/* Only the pidfd we watch the slot through now. */
			if (i < LULL_PRODUCER_SLOTS && w->slot[i].pidfd >= 0 &&
			    w->slot[i].gen == gen)
				watch_death(ring, w, i);
		}
	} while (n == 16);
}

/*
 * Whether a recovered slot's notice has room in the queue.  A slot queues
 * one notice at a time, but once freed it may be taken, and its producer
 * die, before that notice comes due: more than LULL_PRODUCER_SLOTS can
 * wait (or a region's other writer can make them).  Until a read hands
 * one out, a dead slot stays dead, and is recovered at a later look.
 */
static inline bool notice_room(const struct lull_watch *w)
{
	return w->notices < LULL_PRODUCER_SLOTS;
}

static void notice_push(struct lull_watch *w, unsigned i, uint32_t lane,
			uint64_t due)
{
	struct watch_notice *n;

	/* Never full here: recoveries wait for room (notice_room()). */
	n = &w->notice[(w->notice_first + w->notices) % LULL_PRODUCER_SLOTS];
	n->death.pid = w->slot[i].pid;
	n->death.slot = i;
	n->death.skipped = w->slot[i].skipped;
	n->lane = lane;
	n->due = due;
	w->notices++;
}

/*
 * Slot @i is recovered: its notice queued, the slot freed, and its
 * producer count given back (the last one closes the ring, as a detach).
 */
static void slot_release(struct lull_ring *ring, struct lull_watch *w,
			 unsigned i, uint32_t lane, uint64_t due)
{
	struct lull_region *region = ring->region;
	struct lull_slot *slot = &lull__slots(ring)[i];

	notice_push(w, i, lane, due);
	w->slot[i].dead = false;
	w->slot[i].pid = 0;
	w->dead--;
	/* Relaxed: published by the release of FREE below. */
	atomic_store_explicit(&slot->claim_phase, LULL_CLAIM_NONE,
			      memory_order_relaxed);
	/* Release: the lane given back before is seen by the next taker. */
	atomic_store_explicit(&slot->state, LULL_SLOT_FREE,
			      memory_order_release);
	/* Relaxed: a hint for producers giving up a claim; one that still
	 * reads it high makes one needless roster change. */
	atomic_fetch_sub_explicit(&region->recovering, 1, memory_order_relaxed);
	/* seq_cst, as lull_producer_detach() (with a racing attach). */
	if (atomic_fetch_sub_explicit(&region->producers, 1,
				      memory_order_seq_cst) == 1)
		lull__shutdown_by_consumer(ring, LULL_SHUTDOWN_GRACEFUL, 0);
	atomic_fetch_add_explicit(&region->roster_gen, 1, memory_order_seq_cst);
	w->seen_gen++; /* our own change: nothing to re-read for it */
}

/*
 * A dead lane producer (SPSC, LANES): what it committed stays for the
 * reader; past it, whatever it was writing (a record, a batch behind its
 * gate, a claim) was never published, and only the length where its
 * records end must read 0 (region.h).  Its tail is put there, and the
 * lane is free for the next producer, which goes on there.  What it
 * skips is the claim it announced, if it held one.  Nobody else writes
 * the lane meanwhile: the slot still holds it.
 */
static void recover_lane(struct lull_ring *ring, struct lull_watch *w,
			 unsigned i)
{
	/* Relaxed: the slot is ours since watch_death()'s acquire CAS. */
	uint32_t lane = atomic_load_explicit(&lull__slots(ring)[i].lane,
					     memory_order_relaxed);
	struct lull_cursor *cur;
	struct lull_record_header *hdr;
	uint64_t cap = ring->mask + 1, pos, size, claim_end;
	int32_t raw;

	if (lane >= ring->lanes) {
		lull__ring_corrupt(ring);
		slot_release(ring, w, i, 0, ring->cursor[0].head);
		return;
	}
	cur = &ring->cursor[lane];
	for (pos = cur->head; pos - cur->head < cap; pos += size) {
		hdr = lull__header_at(cur->data, ring->mask, pos);
		/* Pairs with the producer's release store of the length. */
		raw = atomic_load_explicit(&hdr->length, memory_order_acquire);
		if (raw <= 0)
			break;
		size = lull__align8((uint64_t)(raw & LULL_LENGTH_MASK));
		if (size < LULL_RECORD_HEADER_SIZE ||
		    size > cap - (pos - cur->head))
			break; /* not a record: the reader will say so */
	}
	/*
	 * The claim it held, which begins where its records end: one that
	 * ends past them, within the lane's lap.  Relaxed: its stores are
	 * done (it is dead).  Anything else is not a claim it holds (one
	 * committed, or aborted) or not one it could have made: none.
	 */
	claim_end = atomic_load_explicit(&cur->lane->claim_end,
					 memory_order_relaxed);
	if ((int64_t)(claim_end - pos) > 0 && claim_end - cur->head <= cap &&
	    !(claim_end & (LULL_RECORD_ALIGN - 1)))
		w->slot[i].skipped = claim_end - pos;
	/*
	 * Nothing to clear: the walk stopped at a length that reads 0 (a
	 * gate, or the length its last write cleared), at a full lap, whose
	 * length the consumer clears, or at a header no producer wrote,
	 * which the reader reports.  Relaxed: published by the release of
	 * owner below.
	 */
	atomic_store_explicit(&cur->lane->claim_end, pos, memory_order_relaxed);
	atomic_store_explicit(&cur->lane->tail, pos, memory_order_relaxed);
	atomic_store_explicit(&cur->lane->busy, 0, memory_order_release);
	/* Pairs with the acquire CAS of lane_take() in producer.c. */
	atomic_store_explicit(&cur->lane->owner, 0, memory_order_release);
	/* Its records were committed before it died; a graceful close may
	 * have waited for its busy mark: look again. */
	slot_release(ring, w, i, lane, pos);
}

/* Does [start, end) hold @pos, in free-running positions? */
static bool span_holds(uint64_t start, uint64_t end, uint64_t pos)
{
	return (int64_t)(pos - start) >= 0 && (int64_t)(end - pos) > 0;
}

/*
 * The shared MPSC lane, stuck at @h (nothing committed there, though the
 * tail is past it): whose claim is it?  A live producer announces every
 * claim it tries before its CAS, so one whose claim holds @h is waited
 * for.  Otherwise the claim is a dead producer's: the one that owned a
 * claim holding @h (it said so before writing any of it), or one that
 * died trying at @h after a CAS that won but before it said so, and so
 * wrote nothing: its claim ends where the next thing begins, the next
 * claim's start (announced, or written), or the tail.  Returns where the
 * dead claim ends, or @h when it is not a dead one's.
 */
static uint64_t mpsc_dead_claim_end(struct lull_ring *ring,
				    const struct lull_watch *w, uint64_t h,
				    uint64_t tail)
{
	struct lull_slot *slots = lull__slots(ring);
	struct lull_cursor *cur = &ring->cursor[0];
	uint64_t start, end, bound = tail, owned_end = h, word;
	uint32_t phase, state;
	bool tried_here = false;

	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++) {
		/* Pairs with the releases of LIVE and FREE (attach, detach). */
		state = atomic_load_explicit(&slots[i].state,
					     memory_order_acquire);
		/* Pairs with the release of CLAIM_NONE after a commit. */
		phase = atomic_load_explicit(&slots[i].claim_phase,
					     memory_order_acquire);
		if (state == LULL_SLOT_FREE || phase == LULL_CLAIM_NONE)
			continue;
		/*
		 * Relaxed: a try's span is stored before its CAS and carried
		 * by the release fence and the tail our caller acquired.
		 */
		start = atomic_load_explicit(&slots[i].claim_start,
					     memory_order_relaxed);
		end = atomic_load_explicit(&slots[i].claim_end,
					   memory_order_relaxed);
		if ((int64_t)(start - h) > 0 && (int64_t)(start - bound) < 0)
			bound = start;
		if (!span_holds(start, end, h))
			continue;
		/* Dead: found so by us, whatever the region says. */
		if (!w->slot[i].dead)
			return h; /* a live producer may own it: wait */
		if (phase == LULL_CLAIM_OWNED)
			owned_end = end;
		else if (start == h)
			tried_here = true;
	}
	/* A commit may have come while we looked: then it is no claim. */
	if (atomic_load_explicit(&lull__header_at(cur->data, ring->mask, h)
					  ->length,
				 memory_order_acquire) > 0)
		return h;
	if (owned_end != h)
		return owned_end;
	if (!tried_here)
		return h;
	/*
	 * It wrote nothing: the first word written past @h bounds it.
	 * Relaxed loads of words a live producer may be writing: any value
	 * but zero ends the span, whichever it is.
	 */
	for (uint64_t pos = h + 8; (int64_t)(bound - pos) > 0; pos += 8) {
		word = __atomic_load_n(
			(const uint64_t *)(const void *)(cur->data +
							 (pos & ring->mask)),
			__ATOMIC_RELAXED);
		if (word) {
			bound = pos;
			break;
		}
	}
	return bound;
}

/*
 * Move the shared lane's head past dead producers' claims wherever it is
 * stuck at one, and free the slots of those whose claims are behind it.
 */
static void recover_mpsc(struct lull_ring *ring, struct lull_watch *w)
{
	struct lull_slot *slots = lull__slots(ring);
	struct lull_cursor *cur = &ring->cursor[0];
	struct lull_record_header *hdr;
	uint64_t h, tail, end, start, send, size;
	uint32_t phase;
	int32_t raw;

	for (;;) {
		h = cur->head;
		hdr = lull__header_at(cur->data, ring->mask, h);
		/* Pairs with the producer's release store of the length. */
		raw = atomic_load_explicit(&hdr->length, memory_order_acquire);
		/* Pairs with the producers' claim CAS (release fence): a
		 * claim it shows us was announced before. */
		tail = atomic_load_explicit(&cur->lane->tail,
					    memory_order_acquire) &
		       ~(uint64_t)LULL_TAIL_FLAGS;
		/*
		 * Closing, the reads stop at the final tail (walk_stop()),
		 * which no claim passes: neither may we, whatever a hostile
		 * region's tail says now, or the head would pass the reads'
		 * stop and they would walk on without one.
		 */
		if (ring->closing != LULL_CLOSING_OPEN)
			tail = cur->final_tail;
		if (tail == h || (int64_t)(tail - h) < 0 ||
		    tail - h > ring->mask + 1)
			break;
		if (raw > 0) {
			/*
			 * A wrap's padding may stand between two dead claims
			 * (the second one's, published at once): step over
			 * it as a read would, or the reader would park on
			 * the claim behind it with nothing left to wake it.
			 * A record ends the recovery: the reader takes it.
			 */
			size = lull__align8((uint64_t)(raw & LULL_LENGTH_MASK));
			if (hdr->type != LULL_TYPE_PADDING ||
			    size < LULL_RECORD_HEADER_SIZE ||
			    size > ring->mask + 1 - (h & ring->mask) ||
			    size > tail - h)
				break;
			lull__consume_to(ring, cur, h + size);
			continue;
		}
		end = mpsc_dead_claim_end(ring, w, h, tail);
		if (end == h)
			break;
		/* A span no producer announces: the region is corrupt. */
		if ((int64_t)(end - h) < 0 || (int64_t)(tail - end) < 0 ||
		    (end & (LULL_RECORD_ALIGN - 1))) {
			lull__ring_corrupt(ring);
			return;
		}
		/* Relaxed: only the dead slots count, ours since their
		 * acquire CAS in watch_death(). */
		for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++) {
			start = atomic_load_explicit(&slots[i].claim_start,
						     memory_order_relaxed);
			send = atomic_load_explicit(&slots[i].claim_end,
						    memory_order_relaxed);
			if (w->slot[i].dead && span_holds(start, send, h))
				w->slot[i].skipped += end - h;
		}
		lull__consume_to(ring, cur, end);
	}
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS && notice_room(w); i++) {
		if (!w->slot[i].dead)
			continue;
		/* Relaxed: a dead slot, ours since its acquire CAS. */
		phase = atomic_load_explicit(&slots[i].claim_phase,
					     memory_order_relaxed);
		start = atomic_load_explicit(&slots[i].claim_start,
					     memory_order_relaxed);
		send = atomic_load_explicit(&slots[i].claim_end,
					    memory_order_relaxed);
		h = cur->head;
		/*
		 * Behind us: no claim; an owned claim we are past; a try
		 * we are past (someone's record was there), or one that
		 * never moved the tail (it was still at its start when we
		 * found it dead).
		 */
		if (phase == LULL_CLAIM_NONE ||
		    (phase == LULL_CLAIM_OWNED && (int64_t)(h - send) >= 0) ||
		    (phase == LULL_CLAIM_TRYING &&
		     ((int64_t)(h - start) > 0 ||
		      (int64_t)(w->slot[i].death_tail - start) <= 0)))
			slot_release(ring, w, i, 0, w->slot[i].death_tail);
	}
}

static void watch_recover(struct lull_ring *ring, struct lull_watch *w)
{
	if (!w->dead || ring->closing >= LULL_CLOSING_CORRUPT || ring->peeked)
		return;
	if (ring->mode == LULL_RING_MPSC) {
		recover_mpsc(ring, w);
		return;
	}
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS && notice_room(w); i++)
		if (w->slot[i].dead)
			recover_lane(ring, w, i);
}

/*
 * Reads between two looks at the watch by a consumer that never sleeps
 * (a stream, or a spin): its sleeps would look at every wake-up, so this
 * only bounds how many reads a death notice waits behind, at the cost of
 * one epoll_wait(2) per that many reads.
 */
#define WATCH_READS 256u

void lull__watch_sync(struct lull_ring *ring, bool reap)
{
	struct lull_watch *w;

	if (lull__ring_done(ring) || watch_get(ring, &w) < 0)
		return;
	watch_roster(ring, w);
	if (!reap && w->watched && ++w->reads >= WATCH_READS)
		reap = true;
	if (reap) {
		w->reads = 0;
		watch_reap(ring, w);
	}
	watch_recover(ring, w);
}

static bool notice_due(const struct lull_ring *ring,
		       const struct lull_watch *w)
{
	const struct watch_notice *n;

	if (!w->notices)
		return false;
	n = &w->notice[w->notice_first];
	return ring->closing >= LULL_CLOSING_DRAIN ||
	       (int64_t)(ring->cursor[n->lane].head - n->due) >= 0;
}

bool lull__watch_pending(const struct lull_ring *ring)
{
	const struct lull_watch *w = ring->watch;

	if (!w)
		return false; /* reads and waits make it first */
	/*
	 * Relaxed: the park re-check's barrier orders it after the announce
	 * (a roster change's bump is seq_cst, then the producer's park
	 * check), and watch_roster() acquires it before reading slots.
	 */
	return notice_due(ring, w) ||
	       atomic_load_explicit(&ring->region->roster_gen,
				    memory_order_relaxed) != w->seen_gen;
}

bool lull__watch_recovering(const struct lull_ring *ring)
{
	return ring->watch && ring->watch->dead;
}

bool lull__watch_notice_queued(const struct lull_ring *ring)
{
	return ring->watch && ring->watch->notices;
}

int lull__watch_notice(struct lull_ring *ring, struct lull_record *rec)
{
	struct lull_watch *w = ring->watch;

	if (!w || ring->closing >= LULL_CLOSING_CORRUPT || !notice_due(ring, w))
		return 0;
	w->handed = w->notice[w->notice_first].death;
	rec->data = &w->handed;
	rec->len = sizeof(w->handed);
	rec->type = LULL_TYPE_DEATH;
	return 1;
}

void lull__watch_notice_consume(struct lull_ring *ring)
{
	struct lull_watch *w = ring->watch;

	w->notice_first = (w->notice_first + 1) % LULL_PRODUCER_SLOTS;
	w->notices--;
}

int lull__watch_sleep(struct lull_ring *ring, uint32_t how, uint64_t slice)
{
	struct lull_watch *w;
	bool died;
	int ret;

	ret = watch_get(ring, &w);
	/* Every producer in this process: a futex wait is all it takes. */
	if (ret == 0 && !w->watched)
		return (int)lull__futex_wait(&ring->region->park, how, slice);
	if (ret == 0)
		ret = lull__uwait(&w->wait, &ring->region->park, how, w->epfd,
				  slice, &died);
	if (ret == -EOPNOTSUPP || ret == -ENOSYS || ret == -EPERM) {
		/* No io_uring futex wait here: a death is noticed when
		 * something else wakes us (docs/DESIGN.md). */
		ret = (int)lull__futex_wait(&ring->region->park, how, slice);
		lull__watch_sync(ring, true);
		return ret;
	}
	if (ret == 0 && died)
		lull__watch_sync(ring, true);
	return ret;
}

/* The public calls' checks: the consumer of a shared region, its watch. */
static int watch_of_consumer(struct lull_ring *ring, struct lull_watch **wp)
{
	if (!ring || !(ring->flags & LULL_REGION_SHARED))
		return -EINVAL;
	if (!ring->is_consumer)
		return -EPERM;
	return watch_get(ring, wp);
}

LULL_EXPORT int lull_ring_watch_fd(struct lull_ring *ring)
{
	struct lull_watch *w;
	int ret = watch_of_consumer(ring, &w);

	return ret < 0 ? ret : w->epfd;
}

LULL_EXPORT int lull_ring_watch(struct lull_ring *ring)
{
	struct lull_watch *w;
	int ret = watch_of_consumer(ring, &w);

	if (ret < 0)
		return ret;
	lull__watch_sync(ring, true);
	return 0;
}
