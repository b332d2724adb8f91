/* SPDX-License-Identifier: MIT */
/*
 * beacon.c - how a producer in another process learns that the consumer's
 * process has ended, from its next claim or write, with no system call:
 * the consumer process's beacon (docs/DESIGN.md, "Across processes").
 *
 * A process that takes the consumer role of a shared ring makes, once, a
 * beacon: a page in a memfd that holds a word and a nonce, mapped writable
 * by this process and then sealed (F_SEAL_FUTURE_WRITE), so that no other
 * process can ever write it.  The word holds the thread id of the keeper,
 * a thread of lull's that sleeps for good with every signal blocked and
 * has the word on its robust futex list (set_robust_list(2)).  The keeper
 * ends only with its process (exit, a kill, a crash, an exec), and when it
 * ends the kernel walks that list and stores FUTEX_OWNER_DIED in the word.
 * The region names the beacon (pid, descriptor number, nonce); a producer
 * opens it through /proc/PID/fd/N, maps it read-only, and loads the word
 * before each claim or write: a word that changed is a consumer gone.
 *
 * Why a thread of lull's: a robust list is per thread, and the caller's
 * threads' lists are glibc's (its robust mutexes); a mutex held by a
 * caller's thread would also end with that thread, not with the process.
 * Why a memfd of its own and not a word of the ring's region: the kernel
 * and the list's owner follow the list's pointers, which must not lie in
 * memory another process may write.
 */
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handles.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define BEACON_SIZE 4096u
#define BEACON_SEALS                                                         \
	(F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define KEEPER_STACK (64u * 1024)

/* The beacon page: its first bytes. */
struct lull_beacon {
	struct robust_list entry; /* on the keeper's robust list */
	_Atomic uint32_t word;    /* the keeper's tid; then OWNER_DIED */
	uint32_t unused;
	uint64_t nonce;
};

/* A word nothing writes: what producers of a private ring watch. */
const _Atomic uint32_t lull__no_consumer_word;

/* ---- the consumer's process: its beacon ------------------------------- */

static struct {
	pthread_mutex_t lock;
	int32_t pid; /* the process that made it: a fork's child has none */
	int fd;
	uint64_t nonce;
	struct lull_beacon *page;
} self = { PTHREAD_MUTEX_INITIALIZER, 0, -1, 0, NULL };

/* The keeper's robust list: one entry, the beacon's word. */
static struct robust_list_head keeper_list;
static _Atomic uint32_t keeper_state; /* 0 starting, 1 up, 2 failed */

static void *keeper_main(void *arg)
{
	struct lull_beacon *page = arg;
	long ret;

	page->entry.next = &keeper_list.list;
	keeper_list.list.next = &page->entry;
	keeper_list.futex_offset = (long)(offsetof(struct lull_beacon, word) -
					  offsetof(struct lull_beacon, entry));
	keeper_list.list_op_pending = NULL;
	/*
	 * This thread's list replaces the one glibc registered for it,
	 * which it never uses: it takes no mutex of glibc's, and never
	 * returns.
	 */
	ret = LULL_SYSCALL(syscall(SYS_set_robust_list, &keeper_list,
				   sizeof(keeper_list)));
	if (ret == 0)
		/*
		 * Relaxed: the release store of keeper_state below publishes
		 * it to our maker, and producers only compare it.
		 */
		atomic_store_explicit(&page->word, (uint32_t)gettid(),
				      memory_order_relaxed);
	/* Pairs with the maker's acquire load in beacon_make(). */
	atomic_store_explicit(&keeper_state, ret == 0 ? 1 : 2,
			      memory_order_release);
	lull__futex_wake_op(&keeper_state, FUTEX_WAKE_PRIVATE, 1);
	if (ret < 0)
		return NULL;
	for (;;)
		pause(); /* every signal is blocked: for good */
	return NULL;
}

static void beacon_unmake(void)
{
	if (self.page)
		munmap(self.page, BEACON_SIZE);
	if (self.fd >= 0)
		LULL_SYSCALL(close(self.fd));
	self.page = NULL;
	self.fd = -1;
	self.pid = 0;
}

static uint64_t beacon_nonce(void)
{
	uint64_t nonce;

	/*
	 * It only tells a producer it opened the right file (a pid reused,
	 * a descriptor number reused), so without entropy yet the clock and
	 * the pid do.
	 */
	if (LULL_SYSCALL(getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK)) !=
	    (long)sizeof(nonce))
		nonce = lull__now_ns() ^ ((uint64_t)getpid() << 32);
	return nonce | 1; /* never 0 */
}

/* Make this process's beacon and start its keeper; self.lock held. */
static int beacon_make(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t keeper;
	uint32_t state;
	long ret;

	ret = LULL_SYSCALL(memfd_create("lull-beacon",
					MFD_CLOEXEC | MFD_ALLOW_SEALING));
	if (ret < 0)
		return (int)ret;
	self.fd = (int)ret;
	ret = LULL_SYSCALL(ftruncate(self.fd, BEACON_SIZE));
	if (ret == 0) {
		self.page = mmap(NULL, BEACON_SIZE, PROT_READ | PROT_WRITE,
				 MAP_SHARED, self.fd, 0);
		if (self.page == MAP_FAILED) {
			self.page = NULL;
			ret = -ENOMEM;
		}
	}
	if (ret == 0) {
		self.nonce = beacon_nonce();
		self.page->nonce = self.nonce;
		/* From here only our own mapping writes it. */
		ret = LULL_SYSCALL(fcntl(self.fd, F_ADD_SEALS, BEACON_SEALS));
	}
	if (ret < 0)
		goto fail;

	/* Relaxed: before the keeper exists; pthread_create() orders it. */
	atomic_store_explicit(&keeper_state, 0, memory_order_relaxed);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, KEEPER_STACK);
	/* The keeper takes no signal of the process's: block all first. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&keeper, &attr, keeper_main, self.page);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret < 0)
		goto fail;
	pthread_setname_np(keeper, "lull-beacon");
	/* Acquire: pairs with the keeper's release store of its state. */
	while ((state = atomic_load_explicit(&keeper_state,
					     memory_order_acquire)) == 0)
		lull__futex_wait_private(&keeper_state, 0,
					 LULL_NS_FOREVER);
	if (state != 1) {
		/*
		 * No robust list here (a seccomp filter, say): the keeper
		 * has returned, and no word will ever change.  Keep the
		 * page mapped: nothing points into it, and one page is the
		 * whole cost.
		 */
		ret = -ENOSYS;
		goto fail;
	}
	self.pid = (int32_t)getpid();
	return 0;
fail:
	beacon_unmake();
	return (int)ret;
}

/*
 * A fork's child has no keeper (fork copies only the calling thread):
 * the beacon it inherited is its parent's.  It lets go of it, and makes
 * its own if it ever takes a consumer role.
 */
static void beacon_prefork(void)
{
	pthread_mutex_lock(&self.lock);
}

static void beacon_postfork_parent(void)
{
	pthread_mutex_unlock(&self.lock);
}

static void beacon_postfork_child(void)
{
	if (self.fd >= 0)
		beacon_unmake();
	pthread_mutex_unlock(&self.lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(beacon_prefork, beacon_postfork_parent,
		       beacon_postfork_child);
}

void lull__beacon_publish(struct lull_region *region)
{
	int32_t fd_plus_one = 0;
	uint64_t nonce = 0;

	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&self.lock);
	if (self.pid == (int32_t)getpid() || beacon_make() == 0) {
		fd_plus_one = self.fd + 1;
		nonce = self.nonce;
	}
	pthread_mutex_unlock(&self.lock);
	/*
	 * Relaxed: published by the caller's release store of consumer_pid;
	 * a producer that still mixes them with another consumer's finds
	 * the nonce wrong, and checks again when consumer_pid changes.
	 */
	atomic_store_explicit(&region->consumer_beacon_nonce, nonce,
			      memory_order_relaxed);
	atomic_store_explicit(&region->consumer_beacon_fd, fd_plus_one,
			      memory_order_relaxed);
}

/* ---- a producer: the consumer's beacon, from another process ---------- */

static void fd_path(char *buf, size_t size, int32_t pid, int fd)
{
	if (pid)
		snprintf(buf, size, "/proc/%d/fd/%d", (int)pid, fd);
	else
		snprintf(buf, size, "/proc/self/fd/%d", fd);
}

/*
 * Map the beacon of process @pid, its descriptor @fd, if it is one: a
 * sealed memfd page holding @nonce.  NULL otherwise, or when this process
 * may not open another's descriptors (another user; a process that is
 * not dumpable).  Whatever the region named, nothing but a regular file
 * is opened for reading: an O_PATH first, with no side effect.
 */
static struct lull_beacon *beacon_open(int32_t pid, int fd, uint64_t nonce)
{
	struct lull_beacon *page;
	char path[48];
	struct stat st;
	long opath, rfd, seals;

	fd_path(path, sizeof(path), pid, fd);
	opath = LULL_SYSCALL(open(path, O_PATH | O_CLOEXEC));
	if (opath < 0)
		return NULL;
	if (LULL_SYSCALL(fstat((int)opath, &st)) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)BEACON_SIZE) {
		LULL_SYSCALL(close((int)opath));
		return NULL;
	}
	fd_path(path, sizeof(path), 0, (int)opath);
	rfd = LULL_SYSCALL(open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
					      O_NOCTTY));
	LULL_SYSCALL(close((int)opath));
	if (rfd < 0)
		return NULL;
	/*
	 * Sealed: nobody can write it but its maker, nor cut it short.  Its
	 * size again once sealed, from this descriptor: the first look came
	 * before the seal, and a page cut off since would fault at the
	 * nonce's read.  Pages of the system's size (no hugetlbfs file),
	 * so that the munmap() of BEACON_SIZE takes the whole mapping.
	 */
	seals = LULL_SYSCALL(fcntl((int)rfd, F_GET_SEALS));
	page = MAP_FAILED;
	if (seals >= 0 &&
	    (seals & (F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK)) ==
		    (F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK) &&
	    LULL_SYSCALL(fstat((int)rfd, &st)) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size >= (off_t)BEACON_SIZE &&
	    st.st_blksize <= (blksize_t)sysconf(_SC_PAGESIZE))
		page = mmap(NULL, BEACON_SIZE, PROT_READ, MAP_SHARED, (int)rfd,
			    0);
	LULL_SYSCALL(close((int)rfd));
	if (page == MAP_FAILED)
		return NULL;
	if (page->nonce != nonce) {
		munmap(page, BEACON_SIZE);
		return NULL;
	}
	return page;
}

static void beacon_drop(struct lull_producer *prod)
{
	if (prod->beacon)
		munmap(prod->beacon, BEACON_SIZE);
	prod->beacon = NULL;
	prod->consumer_word = &lull__no_consumer_word;
	prod->consumer_word_ok = 0;
}

/* A keeper's word once its process has ended (or it was never set). */
static bool beacon_word_ended(uint32_t word)
{
	return (word & FUTEX_OWNER_DIED) || !(word & FUTEX_TID_MASK);
}

static bool consumer_is(const struct lull_region *region, int32_t pid,
			uint64_t start)
{
	/* Pairs with the release in lull__consumer_announce(). */
	return atomic_load_explicit(&region->consumer_pid,
				    memory_order_acquire) == pid &&
	       /* Relaxed: ordered by the acquire just above. */
	       atomic_load_explicit(&region->consumer_start,
				    memory_order_relaxed) == start;
}

static bool consumer_ended(struct lull_producer *prod)
{
	beacon_drop(prod);
	lull__shutdown(prod->region, prod->mode, LULL_SHUTDOWN_IMMEDIATE, 0);
	return true;
}

/*
 * Watch the consumer the region names now: its beacon, or when there is
 * none to be had, the region's consumer_pid (a new consumer changes it).
 */
static bool consumer_follow(struct lull_producer *prod)
{
	struct lull_region *region = prod->region;
	struct lull_beacon *page;
	uint64_t start, nonce;
	int32_t pid, fd_plus_one;
	uint32_t word;

	beacon_drop(prod);
	/* Pairs with the release in lull__consumer_announce(). */
	pid = atomic_load_explicit(&region->consumer_pid, memory_order_acquire);
	/* Relaxed: ordered by the acquire of consumer_pid just above. */
	start = atomic_load_explicit(&region->consumer_start,
				     memory_order_relaxed);
	/* Relaxed, both: as start; a mix of two consumers' fields fails the
	 * nonce or the consumer_is() check below. */
	fd_plus_one = atomic_load_explicit(&region->consumer_beacon_fd,
					   memory_order_relaxed);
	nonce = atomic_load_explicit(&region->consumer_beacon_nonce,
				     memory_order_relaxed);
	prod->consumer_word = (const _Atomic uint32_t *)&region->consumer_pid;
	prod->consumer_word_ok = (uint32_t)pid;
	if (pid <= 0 || pid == prod->pid || fd_plus_one <= 0)
		return false;
	page = beacon_open(pid, fd_plus_one - 1, nonce);
	if (!page)
		return false; /* the full ring and the waits still look */
	if (!consumer_is(region, pid, start)) {
		munmap(page, BEACON_SIZE);
		return false; /* changed meanwhile: consumer_pid tells */
	}
	prod->beacon = page;
	prod->beacon_pid = pid;
	prod->beacon_start = start;
	/* Relaxed: the kernel's store at the keeper's end is all it says. */
	word = atomic_load_explicit(&page->word, memory_order_relaxed);
	if (beacon_word_ended(word))
		return consumer_ended(prod);
	prod->consumer_word = &page->word;
	prod->consumer_word_ok = word;
	return false;
}

void lull__consumer_watch_start(struct lull_producer *prod)
{
	prod->beacon = NULL;
	prod->consumer_word = &lull__no_consumer_word;
	prod->consumer_word_ok = 0;
	if (prod->slot)
		consumer_follow(prod);
}

void lull__consumer_watch_stop(struct lull_producer *prod)
{
	beacon_drop(prod);
}

bool lull__consumer_recheck(struct lull_producer *prod)
{
	uint32_t word;

	if (!prod->slot)
		return false;
	if (prod->beacon) {
		/* Relaxed: as in consumer_follow(). */
		word = atomic_load_explicit(&prod->beacon->word,
					    memory_order_relaxed);
		if (!beacon_word_ended(word))
			return false;
		/* Its process ended: was it the consumer still? */
		if (consumer_is(prod->region, prod->beacon_pid,
				prod->beacon_start))
			return consumer_ended(prod);
	}
	return consumer_follow(prod);
}

bool lull__consumer_beacon_lives(const struct lull_producer *prod,
				 int32_t pid)
{
	return prod->beacon && prod->beacon_pid == pid &&
	       /* Relaxed: as in consumer_follow(). */
	       !beacon_word_ended(atomic_load_explicit(&prod->beacon->word,
						       memory_order_relaxed));
}
