/* SPDX-License-Identifier: MIT */
/*
 * test_park_process.c - the Criterion suite process: checks that need a
 * process of their own (forked children): a park armed while the process
 * is single-threaded (the Linux 6.16+ futex hash), the loop's private
 * futex waits where no thread can come to lose them, membarrier missing or
 * failing, io_uring blocked by seccomp, LULL_SAFETY_NET_MS.
 * The fixture (backend cases, the consumer thread, producer threads,
 * what "parked" means) is park_fix.h.
 */
#include "park_fix.h"

/* ------------------------------------------------------------------------
 * process: checks that need a process of their own
 */

#define CHILD_OK 0
#define CHILD_FAIL 1
#define CHILD_SKIP 77

/*
 * Run @fn in a forked child with an alarm() watchdog.  It returns one of
 * the codes above and explains itself in @why, which comes back through a
 * pipe.  The child uses no Criterion calls.
 */
static void run_in_child(int (*fn)(char *why, size_t len),
			 unsigned watchdog_s, const char *what)
{
	char why[1024] = "";
	size_t got = 0;
	ssize_t n;
	int fds[2], status, code;
	pid_t pid;

	cr_assert_eq(pipe(fds), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		alarm(watchdog_s);
		code = fn(why, sizeof(why));
		if (write(fds[1], why, strlen(why)) < 0)
			code = CHILD_FAIL;
		_exit(code);
	}
	close(fds[1]);
	while (got < sizeof(why) - 1 &&
	       (n = read(fds[0], why + got, sizeof(why) - 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	why[got] = '\0';
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR);
	if (WIFSIGNALED(status))
		cr_assert_fail("%s: the child died of signal %d%s", what,
			 WTERMSIG(status),
			 WTERMSIG(status) == SIGALRM ? " (its watchdog: a hang)"
						     : "");
	cr_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == CHILD_SKIP)
		cr_skip_test("%s", why);
	cr_assert_eq(WEXITSTATUS(status), CHILD_OK, "%s: %s", what, why);
}

#define CHILD_CHECK(cond, ...)                                               \
	do {                                                                 \
		if (!(cond)) {                                               \
			snprintf(why, len, __VA_ARGS__);                     \
			return CHILD_FAIL;                                   \
		}                                                            \
	} while (0)

static bool read_file(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	return n > 0;
}

/* The threads of this process, from /proc/self/status; -1 unknown. */
static int thread_count(void)
{
	char buf[4096], *p;

	if (!read_file("/proc/self/status", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "\nThreads:");
	return p ? atoi(p + strlen("\nThreads:")) : -1;
}

/* Whether uring-futex works here; if not, @why says why (a skip). */
static bool uring_futex_here(char *why, size_t len)
{
	int ret = lull_backend_supported(LULL_BACKEND_URING_FUTEX);

	if (ret < 0)
		snprintf(why, len, "uring-futex is not available here: %s",
			 lull_strerror(ret));
	return ret >= 0;
}

static void *write_one_record(void *arg)
{
	struct lull_producer *prod = arg;

	return (void *)(intptr_t)write_msg(prod, false, 0, 0);
}

/*
 * In a process that is still single-threaded, park on a futex through
 * io_uring, then create the first thread and wake the park from it.  On
 * Linux 6.16+ the first pthread_create() gives the process a private
 * futex hash: a private futex wait queued before it is never found by a
 * wake after it.  lull's futexes are shared (park.c), so the wake finds
 * it; there is no safety net here to hide a lost one, and a wait of 4 s
 * turns one into a failure.
 */
static int futex_hash_child(char *why, size_t len)
{
	struct __kernel_timespec ts = { .tv_sec = 4 };
	struct io_uring_cqe *cqe;
	struct lull_producer *prod;
	struct lull_ring_stats st;
	struct lull_ring *ring;
	struct io_uring uring;
	uint64_t start;
	int ret, res;
	void *thread_ret;
	pthread_t thread;

	if (setenv("LULL_BACKEND", "uring-futex", 1))
		return CHILD_FAIL;
	if (!uring_futex_here(why, len))
		return CHILD_SKIP;
	CHILD_CHECK(thread_count() == 1, "the child has %d threads",
		    thread_count());
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create failed");
	CHILD_CHECK(ring->safety_ns == 0, "a safety net is on");
	CHILD_CHECK(lull_producer_attach(ring, 0, &prod) == 0, "attach");
	ret = io_uring_queue_init(8, &uring, 0);
	CHILD_CHECK(ret == 0, "io_uring_queue_init: %s", strerror(-ret));
	ret = lull_uring_park_arm(ring, &uring, PARK_UD);
	CHILD_CHECK(ret == 0, "lull_uring_park_arm: %d", ret);
	CHILD_CHECK(queued_sqe(&uring, 1)->opcode == OP_FUTEX_WAIT,
		    "the park is no futex wait (opcode %u)",
		    queued_sqe(&uring, 1)->opcode);
	ret = io_uring_submit(&uring);
	CHILD_CHECK(ret == 1, "io_uring_submit: %d", ret);
	CHILD_CHECK(thread_count() == 1, "armed with %d threads",
		    thread_count());

	start = now_ns();
	ret = pthread_create(&thread, NULL, write_one_record, prod);
	CHILD_CHECK(ret == 0, "pthread_create: %s", strerror(ret));
	ret = io_uring_wait_cqe_timeout(&uring, &cqe, &ts);
	CHILD_CHECK(ret == 0,
		    "the futex wait was not woken by the producer within "
		    "%.1f s (a private futex queued before the first "
		    "pthread_create() is lost on Linux 6.16+): %s",
		    (now_ns() - start) / 1e9, strerror(-ret));
	res = cqe->res;
	ret = lull_uring_park_cqe(ring, cqe);
	io_uring_cqe_seen(&uring, cqe);
	CHILD_CHECK(ret == 1, "the CQE is not the park's");
	CHILD_CHECK(res == 0 || res == -EAGAIN, "the futex wait ended with %d",
		    res);
	CHILD_CHECK(thread_join_within(thread, 10000, &thread_ret) == 0,
		    "a thread did not end within 10 s");
	CHILD_CHECK(thread_ret == NULL, "the producer's write failed");
	lull_ring_stats(ring, &st);
	CHILD_CHECK(st.wakes == 1 && st.safety_timeouts == 0 &&
			    st.idle_timeouts == 0,
		    ST_FMT, ST_ARGS(st));
	CHILD_CHECK(lull_ring_read(ring, consume_any, NULL, 16) == 1,
		    "the record is not there");
	return CHILD_OK;
}

Test(process, futex_park_armed_before_the_first_thread_is_woken_by_it,
     .timeout = WATCHDOG_S)
{
	run_in_child(futex_hash_child, 20, "futex park before pthread_create");
}

/*
 * The loop's thread is asleep in io_uring_enter(); false after 4 s.  A
 * record written now must wake it: no re-check of a park in progress can
 * catch it.
 */
static bool loop_asleep(pid_t tid)
{
	uint64_t deadline = now_ns() + 4 * NSEC_PER_SEC;

	while (now_ns() < deadline) {
		if (asleep_in_park(tid, &loop_futex_case))
			return true;
		sched_yield();
	}
	return false;
}

/*
 * Whether a private futex wait armed through io_uring now is safe, from
 * the kernel's answer itself (sys.h says why): the process has a futex
 * hash of its own (Linux 6.16+, slots > 0), or the kernel knows no such
 * hash (EINVAL).  Sets *@slots to the answer (-errno on failure).
 */
static bool private_wait_safe(long *slots)
{
	long ret = prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0);

	*slots = ret < 0 ? -errno : ret;
	return *slots > 0 || *slots == -EINVAL;
}

/* What a park announces on a ring of the process's own memory. */
static uint32_t own_futex_kind(bool private_ok)
{
	return private_ok ? LULL_PARK_FUTEX_PRIVATE : LULL_PARK_FUTEX;
}

/*
 * The same trap for a loop: its futex waits are armed by its first park,
 * in a process with one thread; a timer then creates the first thread,
 * whose record must wake the loop.  A 4 s timer is the watchdog.  The
 * run began single-threaded, so on Linux 6.16+ its waits must be shared:
 * the thread reads the kind in the park word before it writes.
 */
struct first_thread {
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct lull_producer *prod;
	pid_t loop_tid;
	pthread_t thread;
	bool created;
	bool timed_out;
	bool asleep;        /* the loop slept before the record */
	uint32_t park_seen; /* the park word then */
	unsigned records;
};

static void *write_to_sleeping_loop(void *arg)
{
	struct first_thread *ft = arg;

	ft->asleep = loop_asleep(ft->loop_tid);
	ft->park_seen = park_word(ft->ring);
	return write_one_record(ft->prod);
}

static void first_thread_start(struct lull_loop *loop, void *ctx)
{
	struct first_thread *ft = ctx;

	(void)loop;
	ft->created = thread_count() == 1 &&
		      pthread_create(&ft->thread, NULL, write_to_sleeping_loop,
				     ft) == 0;
}

static void first_thread_watchdog(struct lull_loop *loop, void *ctx)
{
	struct first_thread *ft = ctx;

	ft->timed_out = true;
	lull_loop_stop(loop);
}

static int first_thread_record(const struct lull_record *rec, void *ctx)
{
	struct first_thread *ft = ctx;

	if (rec->type == MSG_TYPE && ++ft->records == 1)
		lull_loop_stop(ft->loop);
	return LULL_READ_CONTINUE;
}

static int futex_hash_loop_child(char *why, size_t len)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_URING_FUTEX };
	struct first_thread ft = { .loop_tid = (pid_t)syscall(SYS_gettid) };
	struct lull_loop_timer *watchdog;
	struct lull_loop *loop;
	struct lull_ring *ring;
	void *thread_ret;
	bool private_ok;
	long slots;
	int ret;

	if (!uring_futex_here(why, len))
		return CHILD_SKIP;
	CHILD_CHECK(thread_count() == 1, "the child has %d threads",
		    thread_count());
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create failed");
	CHILD_CHECK(lull_producer_attach(ring, 0, &ft.prod) == 0, "attach");
	ft.ring = ring;
	ret = lull_loop_create(&loop, &cfg);
	CHILD_CHECK(ret == 0, "lull_loop_create: %s", lull_strerror(ret));
	ft.loop = loop;
	/* Linux 6.16+: no futex hash of its own yet, so shared waits. */
	private_ok = private_wait_safe(&slots);
	CHILD_CHECK(lull_loop_attach(loop, ring, first_thread_record, &ft,
				     0) == 0,
		    "lull_loop_attach");
	/* 20 ms: the loop has parked, its futex wait armed, by then. */
	CHILD_CHECK(lull_loop_timer(loop, 20 * NSEC_PER_MSEC, 0,
				    first_thread_start, &ft, NULL) == 0,
		    "lull_loop_timer");
	CHILD_CHECK(lull_loop_timer(loop, 4 * NSEC_PER_SEC, 0,
				    first_thread_watchdog, &ft,
				    &watchdog) == 0,
		    "lull_loop_timer");
	ret = lull_loop_run(loop);
	CHILD_CHECK(ret == 0, "lull_loop_run: %s", lull_strerror(ret));
	CHILD_CHECK(ft.created, "the timer did not create the first thread");
	CHILD_CHECK(thread_join_within(ft.thread, 10000, &thread_ret) == 0,
		    "a thread did not end within 10 s");
	CHILD_CHECK(thread_ret == NULL, "the producer's write failed");
	CHILD_CHECK(!ft.timed_out && ft.records == 1,
		    "the loop's futex wait, armed before the first "
		    "pthread_create(), was not woken by its record within "
		    "4 s (%u records)",
		    ft.records);
	CHILD_CHECK(ft.asleep, "the loop did not sleep before the record");
	CHILD_CHECK(ft.park_seen == own_futex_kind(private_ok),
		    "the park word read %u, not %u (the futex hash's "
		    "answer at the run's start: %ld)",
		    ft.park_seen, own_futex_kind(private_ok), slots);
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	CHILD_CHECK(lull_producer_detach(ft.prod) == 0, "detach");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, loop_futex_wait_armed_before_the_first_thread_is_woken_by_it,
     .timeout = WATCHDOG_S)
{
	run_in_child(futex_hash_loop_child, 20,
		     "loop futex park before pthread_create");
}

/*
 * Once the process has threads (here: one that came and went), a run's
 * futex waits are private on a ring of the process's own memory, which
 * spares each wake-up the kernel's page lookup on both sides, and shared
 * on a ring other processes may map.  The park word says which; the
 * record written to the sleeping loop must wake it either way.
 */
struct kind_probe {
	struct lull_loop *loop;
	struct lull_ring *rings[2]; /* the process's own memory, shared */
	struct lull_producer *prods[2];
	pid_t loop_tid;
	_Atomic unsigned handled;
	bool asleep[2];
	uint32_t park_seen[2];
	int write_ret;
	bool timed_out;
};

static int kind_probe_record(const struct lull_record *rec, void *ctx)
{
	struct kind_probe *kp = ctx;

	/* Pairs with the writer's acquire load: the record was handled. */
	if (rec->type == MSG_TYPE &&
	    atomic_fetch_add_explicit(&kp->handled, 1, memory_order_release) ==
		    1)
		lull_loop_stop(kp->loop);
	return LULL_READ_CONTINUE;
}

/* One record to each ring, each once the loop sleeps. */
static void *kind_probe_writer(void *arg)
{
	struct kind_probe *kp = arg;
	uint64_t deadline = now_ns() + 4 * NSEC_PER_SEC;

	for (unsigned i = 0; i < 2; i++) {
		while (atomic_load_explicit(&kp->handled,
					    memory_order_acquire) < i &&
		       now_ns() < deadline)
			sched_yield();
		kp->asleep[i] = loop_asleep(kp->loop_tid);
		kp->park_seen[i] = park_word(kp->rings[i]);
		kp->write_ret |= write_msg(kp->prods[i], false, 0, i);
	}
	return NULL;
}

static void kind_probe_watchdog(struct lull_loop *loop, void *ctx)
{
	struct kind_probe *kp = ctx;

	kp->timed_out = true;
	lull_loop_stop(loop);
}

static void *no_work(void *arg)
{
	return arg;
}

static int futex_kinds_child(char *why, size_t len)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_URING_FUTEX };
	struct kind_probe kp = { .loop_tid = (pid_t)syscall(SYS_gettid) };
	pthread_t first, writer;
	unsigned handled;
	bool private_ok;
	long slots;
	int ret;

	if (!uring_futex_here(why, len))
		return CHILD_SKIP;
	CHILD_CHECK(pthread_create(&first, NULL, no_work, NULL) == 0 &&
			    thread_join_within(first, 10000, NULL) == 0,
		    "the first thread");
	/*
	 * Linux 6.16+ gave the process its futex hash with that thread
	 * (slots > 0); older kernels have no such prctl (EINVAL) and hash
	 * every private futex globally.  Either way a private wait is safe.
	 */
	private_ok = private_wait_safe(&slots);
	CHILD_CHECK(lull_ring_create(&kp.rings[0], 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create failed");
	ret = lull_ring_create_shared(&kp.rings[1], 4096, LULL_RING_SPSC, 0);
	CHILD_CHECK(ret == 0, "lull_ring_create_shared: %s",
		    lull_strerror(ret));
	ret = lull_loop_create(&kp.loop, &cfg);
	CHILD_CHECK(ret == 0, "lull_loop_create: %s", lull_strerror(ret));
	for (unsigned i = 0; i < 2; i++) {
		CHILD_CHECK(lull_producer_attach(kp.rings[i], 0,
						 &kp.prods[i]) == 0,
			    "attach to ring %u", i);
		CHILD_CHECK(lull_loop_attach(kp.loop, kp.rings[i],
					     kind_probe_record, &kp, 0) == 0,
			    "lull_loop_attach ring %u", i);
	}
	CHILD_CHECK(lull_loop_timer(kp.loop, 4 * NSEC_PER_SEC, 0,
				    kind_probe_watchdog, &kp, NULL) == 0,
		    "lull_loop_timer");
	CHILD_CHECK(pthread_create(&writer, NULL, kind_probe_writer, &kp) == 0,
		    "pthread_create");
	ret = lull_loop_run(kp.loop);
	CHILD_CHECK(ret == 0, "lull_loop_run: %s", lull_strerror(ret));
	CHILD_CHECK(thread_join_within(writer, 10000, NULL) == 0,
		    "the writer did not end within 10 s");
	CHILD_CHECK(kp.write_ret == 0, "a write failed");
	/* Relaxed: the run is over, on this thread. */
	handled = atomic_load_explicit(&kp.handled, memory_order_relaxed);
	CHILD_CHECK(!kp.timed_out && handled == 2,
		    "%u of 2 records woke the loop within 4 s", handled);
	CHILD_CHECK(kp.asleep[0] && kp.asleep[1],
		    "the loop did not sleep before each record");
	CHILD_CHECK(kp.park_seen[0] == own_futex_kind(private_ok),
		    "the own ring's park word read %u, not %u (the futex "
		    "hash's answer: %ld)",
		    kp.park_seen[0], own_futex_kind(private_ok), slots);
	CHILD_CHECK(kp.park_seen[1] == LULL_PARK_FUTEX,
		    "the shared ring's park word read %u, not %u",
		    kp.park_seen[1], LULL_PARK_FUTEX);
	CHILD_CHECK(lull_loop_destroy(kp.loop) == 0, "lull_loop_destroy");
	for (unsigned i = 0; i < 2; i++) {
		CHILD_CHECK(lull_producer_detach(kp.prods[i]) == 0, "detach");
		CHILD_CHECK(lull_ring_destroy(kp.rings[i]) == 0,
			    "lull_ring_destroy");
	}
	return CHILD_OK;
}

Test(process, loop_futex_waits_are_private_on_the_process_own_memory,
     .timeout = WATCHDOG_S)
{
	run_in_child(futex_kinds_child, 20, "loop futex kinds");
}

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS SECCOMP_RET_KILL
#endif

/* Make system call @nr fail with EPERM in this process, as seccomp does. */
static int block_syscall(long nr)
{
#if defined(__x86_64__)
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
			 (uint32_t)(__X32_SYSCALL_BIT | nr), 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = ARRAY_SIZE(filter),
		.filter = filter,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		return -errno;
	return 0;
#else
	(void)nr;
	return -EOPNOTSUPP;
#endif
}

/* What a container's seccomp profile does: io_uring_setup() is EPERM. */
static int block_io_uring(void)
{
	return block_syscall(__NR_io_uring_setup);
}

/*
 * membarrier(2) registration fails (a seccomp profile that denies it):
 * the region records the symmetric barrier when it is created, its
 * producers fence, and a consumer parked with no safety net is still
 * woken by the next commit.
 */
static int no_membarrier_child(char *why, size_t len)
{
	struct lull_producer *prod;
	struct lull_ring *ring;
	void *thread_ret;
	pthread_t thread;
	int ret;

	ret = block_syscall(__NR_membarrier);
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	CHILD_CHECK(syscall(SYS_membarrier, 0, 0, 0) < 0 && errno == EPERM,
		    "membarrier is not blocked");
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(!(ring->region->flags & LULL_REGION_ASYM_BARRIER),
		    "the region says asymmetric barrier without membarrier");
	CHILD_CHECK(lull_producer_attach(ring, 0, &prod) == 0, "attach");
	CHILD_CHECK(!prod->asym_barrier, "the producer does not fence");
	CHILD_CHECK(ring->safety_ns == 0, "a safety net is on");
	for (int i = 0; i < 200; i++) {
		CHILD_CHECK(pthread_create(&thread, NULL, write_when_parked,
					   prod) == 0,
			    "pthread_create");
		ret = lull_ring_wait(ring, -1);
		CHILD_CHECK(thread_join_within(thread, 10000, &thread_ret) == 0,
			    "a thread did not end within 10 s");
		CHILD_CHECK(ret == 0, "lull_ring_wait: %s", lull_strerror(ret));
		CHILD_CHECK(thread_ret == NULL, "the write failed");
		CHILD_CHECK(lull_ring_read(ring, consume_any, NULL, 16) == 1,
			    "record %d is not there", i);
	}
	CHILD_CHECK(lull_producer_detach(prod) == 0, "detach");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, park_barrier_without_membarrier_is_a_fence_on_both_sides,
     .timeout = WATCHDOG_S)
{
	run_in_child(no_membarrier_child, 20, "membarrier denied");
}

/*
 * membarrier(2) fails after a region chose it (a filter installed later):
 * its producers only have a compiler barrier, so a fence on the
 * consumer's side alone would not restore the handshake.  Every park
 * reports the error instead of sleeping on a broken barrier.
 */
static int membarrier_lost_child(char *why, size_t len)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct io_uring uring;
	int ret;

	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	if (!(ring->region->flags & LULL_REGION_ASYM_BARRIER)) {
		snprintf(why, len, "membarrier(2) is not available here");
		return CHILD_SKIP;
	}
	ret = block_syscall(__NR_membarrier);
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	ret = lull_ring_wait(ring, 2 * (int64_t)NSEC_PER_SEC);
	CHILD_CHECK(ret == -EPERM, "lull_ring_wait without its barrier: %d",
		    ret);
	CHILD_CHECK(park_word(ring) == LULL_PARK_AWAKE, "left announced");
	ret = io_uring_queue_init(8, &uring, 0);
	CHILD_CHECK(ret == 0, "io_uring_queue_init: %s", strerror(-ret));
	ret = lull_uring_park_arm(ring, &uring, PARK_UD);
	CHILD_CHECK(ret == -EPERM, "lull_uring_park_arm: %d", ret);
	CHILD_CHECK(io_uring_sq_ready(&uring) == 0, "an SQE was queued");
	io_uring_queue_exit(&uring);
	CHILD_CHECK(lull_loop_create(&loop, &cfg) == 0, "lull_loop_create");
	CHILD_CHECK(lull_loop_attach(loop, ring, consume_any, NULL, 0) == 0,
		    "lull_loop_attach");
	ret = lull_loop_run(loop);
	CHILD_CHECK(ret == -EPERM, "lull_loop_run: %d", ret);
	CHILD_CHECK(park_word(ring) == LULL_PARK_AWAKE, "left announced");
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, failing_membarrier_is_reported_never_degraded_to_one_fence,
     .timeout = WATCHDOG_S)
{
	run_in_child(membarrier_lost_child, 20, "membarrier lost");
}

struct fallback {
	struct lull_ring *ring;
	struct lull_loop *loop;
	uint64_t received;
	uint64_t expected;
	unsigned poisons; /* after the records: the ring ended */
	bool out_of_order;
};

static int fallback_record(const struct lull_record *rec, void *ctx)
{
	struct fallback *f = ctx;
	struct msg m;

	if (is_poison(rec) && !f->poisons && f->received == f->expected) {
		f->poisons++;
		return LULL_READ_CONTINUE;
	}
	if (f->poisons || rec->type != MSG_TYPE || rec->len != sizeof(m)) {
		f->out_of_order = true;
		return LULL_READ_CONTINUE;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.seq != f->received)
		f->out_of_order = true;
	if (++f->received == f->expected)
		lull_loop_stop(f->loop);
	return LULL_READ_CONTINUE;
}

/* Rounds of 100 records, each sent once the consumer has parked. */
static void *fallback_producer(void *arg)
{
	struct fallback *f = arg;
	struct lull_producer *prod;
	uint64_t seq = 0;

	if (lull_producer_attach(f->ring, 0, &prod) < 0)
		return (void *)1;
	for (int round = 0; round < 10; round++) {
		while (park_word(f->ring) == LULL_PARK_AWAKE)
			sched_yield();
		for (int i = 0; i < 100; i++)
			if (write_msg(prod, true, 0, seq++) < 0)
				return (void *)1;
	}
	lull_producer_detach(prod);
	return NULL;
}

/* One record once the consumer is parked in lull_ring_wait(). */
static void *late_producer(void *arg)
{
	struct fallback *f = arg;
	struct lull_producer *prod;
	int ret;

	if (lull_producer_attach(f->ring, 0, &prod) < 0)
		return (void *)1;
	while (park_word(f->ring) == LULL_PARK_AWAKE)
		sched_yield();
	ret = write_msg(prod, true, 0, 0);
	lull_producer_detach(prod);
	return ret < 0 ? (void *)1 : NULL;
}

static int seccomp_child(char *why, size_t len)
{
	struct lull_loop_config forced = {
		.backend = LULL_BACKEND_URING_FUTEX,
	};
	struct fallback f = { .expected = 1000 };
	struct lull_ring_stats st;
	struct io_uring uring;
	void *thread_ret;
	pthread_t thread;
	int ret;

	unsetenv("LULL_BACKEND");
	ret = block_io_uring();
	if (ret == -EOPNOTSUPP) {
		snprintf(why, len, "the seccomp filter is written for x86_64");
		return CHILD_SKIP;
	}
	CHILD_CHECK(ret == 0, "installing the seccomp filter: %s",
		    strerror(-ret));
	ret = io_uring_queue_init(2, &uring, 0);
	CHILD_CHECK(ret == -EPERM, "io_uring_queue_init under the filter: %d",
		    ret);

	ret = lull_backend_supported(LULL_BACKEND_URING_FUTEX);
	CHILD_CHECK(ret == -EPERM, "supported(uring-futex) = %d", ret);
	ret = lull_backend_supported(LULL_BACKEND_URING_EVENTFD);
	CHILD_CHECK(ret == -EPERM, "supported(uring-eventfd) = %d", ret);
	CHILD_CHECK(lull_backend_supported(LULL_BACKEND_EPOLL) == 0, "epoll");
	CHILD_CHECK(lull_backend_supported(LULL_BACKEND_BLOCKING) == 0,
		    "blocking");
	ret = lull_backend_probe();
	CHILD_CHECK(ret == LULL_BACKEND_EPOLL, "probe = %d", ret);
	setenv("LULL_BACKEND", "uring-eventfd", 1);
	ret = lull_backend_probe();
	CHILD_CHECK(ret == -EPERM, "probe with uring-eventfd forced = %d",
		    ret);
	unsetenv("LULL_BACKEND");
	ret = lull_loop_create(&f.loop, &forced);
	CHILD_CHECK(ret == -EPERM, "a uring-futex loop: %d", ret);

	ret = lull_loop_create(&f.loop, NULL);
	CHILD_CHECK(ret == 0, "lull_loop_create(AUTO): %s",
		    lull_strerror(ret));
	ret = lull_loop_backend(f.loop);
	CHILD_CHECK(ret == LULL_BACKEND_EPOLL, "the loop's backend is %d",
		    ret);
	CHILD_CHECK(lull_ring_create(&f.ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	ret = lull_loop_attach(f.loop, f.ring, fallback_record, &f, 0);
	CHILD_CHECK(ret == 0, "lull_loop_attach: %s", lull_strerror(ret));
	CHILD_CHECK(pthread_create(&thread, NULL, fallback_producer, &f) == 0,
		    "pthread_create");
	ret = lull_loop_run(f.loop);
	CHILD_CHECK(thread_join_within(thread, 10000, &thread_ret) == 0,
		    "a thread did not end within 10 s");
	CHILD_CHECK(ret == 0, "lull_loop_run: %s", lull_strerror(ret));
	CHILD_CHECK(thread_ret == NULL, "the producer failed");
	CHILD_CHECK(f.received == f.expected && !f.out_of_order,
		    "%" PRIu64 " of %" PRIu64 " records%s", f.received,
		    f.expected, f.out_of_order ? ", out of order" : "");
	/* The stop (or the producer's detach) ended the ring: its poison. */
	CHILD_CHECK(f.poisons == 1, "%u poison records", f.poisons);
	lull_ring_stats(f.ring, &st);
	CHILD_CHECK(st.wakes >= 1 && st.wakes <= st.parks + st.park_cancels &&
			    st.safety_timeouts == 0,
		    ST_FMT, ST_ARGS(st));
	/* The loop detached the ring after its poison. */
	CHILD_CHECK(lull_loop_detach(f.loop, f.ring) == -ENOENT, "detach");
	CHILD_CHECK(lull_loop_destroy(f.loop) == 0, "destroy");
	CHILD_CHECK(lull_ring_read(f.ring, consume_any, NULL, 16) == -EPIPE,
		    "a read after the poison");
	CHILD_CHECK(lull_ring_destroy(f.ring) == 0, "lull_ring_destroy");

	/* The blocking wait needs no io_uring either; on a new ring. */
	CHILD_CHECK(lull_ring_create(&f.ring, 4096, LULL_RING_MPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(pthread_create(&thread, NULL, late_producer, &f) == 0,
		    "pthread_create");
	ret = lull_ring_wait(f.ring, 5 * (int64_t)NSEC_PER_SEC);
	CHILD_CHECK(thread_join_within(thread, 10000, &thread_ret) == 0,
		    "a thread did not end within 10 s");
	CHILD_CHECK(ret == 0, "lull_ring_wait: %s", lull_strerror(ret));
	CHILD_CHECK(thread_ret == NULL, "the late producer failed");
	CHILD_CHECK(lull_ring_read(f.ring, consume_any, NULL, 16) == 1,
		    "the late record");
	/* Its producer's detach, the last, left the poison after it. */
	ret = lull_ring_wait(f.ring, 5 * (int64_t)NSEC_PER_SEC);
	CHILD_CHECK(ret == 0, "lull_ring_wait for the poison: %s",
		    lull_strerror(ret));
	f.poisons = 0;
	f.received = f.expected;
	CHILD_CHECK(lull_ring_read(f.ring, fallback_record, &f, 16) == 1 &&
			    f.poisons == 1 && !f.out_of_order,
		    "the poison after the late record");
	ret = lull_ring_wait(f.ring, 0);
	CHILD_CHECK(ret == -EPIPE, "lull_ring_wait after the poison: %d", ret);
	CHILD_CHECK(lull_ring_destroy(f.ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, io_uring_blocked_by_seccomp_falls_back_to_epoll,
     .timeout = WATCHDOG_S)
{
	run_in_child(seccomp_child, 20, "io_uring blocked by seccomp");
}

/* LULL_SAFETY_NET_MS switches the net on for rings and loops alike. */
static int safety_env_child(char *why, size_t len)
{
	struct lull_loop *loop;
	struct lull_ring *ring;
	struct io_uring uring;

	(void)why;
	(void)len;
	CHILD_CHECK(setenv("LULL_SAFETY_NET_MS", "250", 1) == 0, "setenv");
	CHILD_CHECK(lull_ring_create(&ring, 4096, LULL_RING_SPSC) == 0,
		    "lull_ring_create");
	CHILD_CHECK(ring->safety_ns == 250 * NSEC_PER_MSEC,
		    "the ring's safety net is %" PRIu64 " ns", ring->safety_ns);
	CHILD_CHECK(io_uring_queue_init(8, &uring, 0) == 0, "io_uring");
	CHILD_CHECK(lull_uring_park_arm(ring, &uring, PARK_UD) == 0, "arm");
	CHILD_CHECK(io_uring_sq_ready(&uring) == 2, "no link timeout armed");
	CHILD_CHECK(park_teardown(ring, &uring) == 0, "teardown");
	io_uring_queue_exit(&uring);
	CHILD_CHECK(lull_ring_wait(ring, 600 * (int64_t)NSEC_PER_MSEC) ==
			    -ETIMEDOUT,
		    "wait");
	CHILD_CHECK(stats_of(ring).idle_timeouts >= 2,
		    "the 250 ms net fired %" PRIu64 " times in 600 ms",
		    stats_of(ring).idle_timeouts);
	CHILD_CHECK(lull_loop_create(&loop, NULL) == 0, "lull_loop_create");
	CHILD_CHECK(loop->safety_ns == 250 * NSEC_PER_MSEC,
		    "the loop's safety net is %" PRIu64 " ns", loop->safety_ns);
	CHILD_CHECK(lull_loop_destroy(loop) == 0, "lull_loop_destroy");
	/* Read once: a later change does not count. */
	CHILD_CHECK(setenv("LULL_SAFETY_NET_MS", "0", 1) == 0, "setenv");
	CHILD_CHECK(lull_ring_park_config(ring, NULL) == 0, "config");
	CHILD_CHECK(ring->safety_ns == 250 * NSEC_PER_MSEC, "read again");
	CHILD_CHECK(lull_ring_destroy(ring) == 0, "lull_ring_destroy");
	return CHILD_OK;
}

Test(process, lull_safety_net_ms_switches_the_safety_net_on,
     .timeout = WATCHDOG_S)
{
	run_in_child(safety_env_child, 20, "LULL_SAFETY_NET_MS");
}

/*
 * A child of fork() forgets the eventfds its parent published: the
 * parent's loop parks on its eventfd for a ring; the child closes that
 * descriptor, puts a pipe at its number, and shuts the ring down with the
 * park word saying "asleep on the eventfd".  Nothing may reach the pipe:
 * the number is no eventfd of the child's any more.
 */
static struct lull_ring *fork_ring;

static int fork_forgets_child(char *why, size_t len)
{
	char path[64], target[64];
	int eventfds = 0, fds[2];
	ssize_t n;

	CHILD_CHECK(pipe2(fds, O_NONBLOCK) == 0, "pipe2: %s", strerror(errno));
	/* Every eventfd the child inherited becomes the pipe. */
	for (int fd = 3; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (strcmp(target, "anon_inode:[eventfd]") != 0)
			continue;
		CHILD_CHECK(dup2(fds[1], fd) == fd, "dup2: %s",
			    strerror(errno));
		eventfds++;
	}
	CHILD_CHECK(eventfds > 0, "no eventfd among the inherited descriptors");
	atomic_store(&fork_ring->region->park, LULL_PARK_EVENTFD);
	CHILD_CHECK(lull_ring_shutdown(fork_ring, LULL_SHUTDOWN_GRACEFUL) == 0,
		    "lull_ring_shutdown failed");
	n = read(fds[0], target, sizeof(target));
	CHILD_CHECK(n < 0 && errno == EAGAIN,
		    "the parent's eventfd number was written in the child "
		    "(%zd bytes)", n);
	return CHILD_OK;
}

static int noop_record(const struct lull_record *rec, void *ctx)
{
	(void)rec;
	(void)ctx;
	return LULL_READ_CONTINUE;
}

Test(process, a_forked_child_writes_no_eventfd_of_its_parent,
     .timeout = WATCHDOG_S)
{
	struct lull_loop_config cfg = { .backend = LULL_BACKEND_EPOLL };
	struct lull_loop *loop;

	cr_assert_eq(lull_loop_create(&loop, &cfg), 0);
	cr_assert_eq(lull_ring_create(&fork_ring, 4096, LULL_RING_SPSC), 0);
	cr_assert_eq(lull_loop_attach(loop, fork_ring, noop_record, NULL, 0), 0);
	run_in_child(fork_forgets_child, 20, "the forked child");
	cr_assert_eq(lull_loop_detach(loop, fork_ring), 0);
	cr_assert_eq(lull_ring_destroy(fork_ring), 0);
	cr_assert_eq(lull_loop_destroy(loop), 0);
}
