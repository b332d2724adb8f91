/* SPDX-License-Identifier: MIT */
/*
 * test_ring_shared.c - the Criterion suite of rings between processes:
 * sharing a ring (memfd, fork, SCM_RIGHTS, by name), what opening one
 * refuses, what parks across processes refuse, and death: a producer
 * process killed idle, mid-claim, mid-batch, or whose pid is taken for
 * another's; a consumer process killed under a waiting producer; the
 * loop watching producer processes.  Every child is reaped and every
 * descriptor closed: each test checks that it left no child, no
 * descriptor and no file behind.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <liburing.h>
#include <sched.h>

#include <lull.h>

#include "handles.h" /* the slot table, to fake a reused pid */
#include "lib/threads.h" /* now_ns() */

#define WATCHDOG_S 30
#define CAP (1u << 14)

/* ---- the fixture: children, and what they leave behind ---------------- */

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

static int fds_at_start;

/*
 * The first consumer role this process takes of a shared ring makes its
 * beacon (one descriptor, kept until the process ends): make it first, so
 * that the count is of what the test leaves.
 */
static void beacon_warm_up(void)
{
	struct lull_ring *ring;

	cr_assert_eq(lull_ring_create_shared(&ring, 4096, LULL_RING_MPSC, 0),
		     0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

static void leak_check_init(void)
{
	beacon_warm_up();
	fds_at_start = fd_count();
}

/* No child left (not even a zombie), no descriptor more than at start. */
static void leak_check_fini(void)
{
	cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child is left");
	cr_assert_eq(errno, ECHILD);
	cr_assert_eq(fd_count(), fds_at_start, "descriptors leaked");
}

/* A test of this suite: its body, then the leak check (asserts in a
 * .fini would not fail the test). */
#define SHARED_TEST(name)                                                    \
	static void name##_body(void);                                       \
	Test(shared, name, .timeout = WATCHDOG_S)                            \
	{                                                                    \
		leak_check_init();                                           \
		name##_body();                                               \
		leak_check_fini();                                           \
	}                                                                    \
	static void name##_body(void)

/* A child process, with a pipe to tell the parent where it is. */
struct child {
	pid_t pid;
	int to_parent; /* read end */
};

static void child_start(struct child *c, void (*fn)(int out, void *arg),
			void *arg)
{
	int fds[2];

	cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
	fflush(NULL);
	c->pid = fork();
	cr_assert_geq(c->pid, 0);
	if (c->pid == 0) {
		close(fds[0]);
		alarm(WATCHDOG_S);
		fn(fds[1], arg);
		_exit(0);
	}
	close(fds[1]);
	c->to_parent = fds[0];
}

/* The child says a byte; it is @what, or the child died first (0). */
static char child_said(struct child *c)
{
	char b = 0;

	while (read(c->to_parent, &b, 1) < 0 && errno == EINTR)
		;
	return b;
}

static void say(int out, char what)
{
	if (write(out, &what, 1) != 1)
		_exit(99);
}

/*
 * In a child: open the parent's shared ring through its (inherited)
 * memfd and attach a producer; exit 1 when either fails.
 */
static struct lull_producer *child_attach(struct lull_ring *parent,
					  struct lull_ring **ringp)
{
	struct lull_producer *p;

	if (lull_ring_open_fd(ringp, lull_ring_fd(parent), 0) ||
	    lull_producer_attach(*ringp, 0, &p))
		_exit(1);
	return p;
}

/* Reap the child; its exit status, or 128 + the signal that ended it. */
static int child_reap(struct child *c)
{
	int status;

	while (waitpid(c->pid, &status, 0) < 0)
		cr_assert_eq(errno, EINTR);
	close(c->to_parent);
	return WIFEXITED(status) ? WEXITSTATUS(status)
				 : 128 + WTERMSIG(status);
}

static void child_kill(struct child *c)
{
	cr_assert_eq(kill(c->pid, SIGKILL), 0);
	cr_assert_eq(child_reap(c), 128 + SIGKILL);
}

/* What a consumer read: counts by kind, in order. */
struct seen {
	unsigned records, deaths, poisons;
	uint32_t last_seq[8];  /* per producer id (the payload's first word) */
	bool out_of_order;
	struct lull_death death[8];
	unsigned after_poison; /* anything after the poison: a bug */
};

struct payload {
	uint32_t producer;
	uint32_t seq;
	uint64_t check; /* producer * 1000003 + seq: torn if wrong */
};

static int on_record(const struct lull_record *rec, void *ctx)
{
	struct seen *s = ctx;
	const struct payload *p = rec->data;

	if (s->poisons)
		s->after_poison++;
	if (rec->type == LULL_TYPE_POISON) {
		s->poisons++;
	} else if (rec->type == LULL_TYPE_DEATH) {
		cr_assert_eq(rec->len, sizeof(struct lull_death));
		if (s->deaths < 8)
			memcpy(&s->death[s->deaths], rec->data,
			       sizeof(struct lull_death));
		s->deaths++;
	} else {
		cr_assert_eq(rec->len, sizeof(*p), "len %u", rec->len);
		cr_assert_lt(p->producer, 8u);
		cr_assert_eq(p->check, p->producer * 1000003ull + p->seq,
			     "torn record");
		if (p->seq != s->last_seq[p->producer] + 1)
			s->out_of_order = true;
		s->last_seq[p->producer] = p->seq;
		s->records++;
	}
	return LULL_READ_CONTINUE;
}

/* Read until @until says stop or the poison came; fail after 10 s. */
static int consume(struct lull_ring *ring, struct seen *s,
		   bool (*until)(const struct seen *s, const void *arg),
		   const void *arg)
{
	int n;

	for (;;) {
		if (until && until(s, arg))
			return 0;
		n = lull_ring_wait(ring, 10ll * 1000000000);
		cr_assert(n == 0 || n == -EPIPE, "wait: %d (a hang?)", n);
		if (n == -EPIPE)
			return n;
		n = lull_ring_read(ring, on_record, s, 64);
		cr_assert(n > 0 || n == -EAGAIN || n == -EPIPE, "read: %d", n);
		if (n == -EPIPE)
			return n;
	}
}

static bool deaths_reach(const struct seen *s, const void *arg)
{
	return s->deaths >= *(const unsigned *)arg;
}

static int write_one(struct lull_producer *p, uint32_t id, uint32_t seq)
{
	struct payload pl = { id, seq, id * 1000003ull + seq };

	return p->mode == LULL_RING_SPSC
		       ? lull_spsc_write(p, 1, &pl, sizeof(pl))
		       : lull_mpsc_write(p, 1, &pl, sizeof(pl));
}

/* Write record @seq of producer @id, waiting for room (another thread or
 * process reads). */
static void write_seq(struct lull_producer *p, uint32_t id, uint32_t seq)
{
	int ret;

	while ((ret = write_one(p, id, seq)) == -EAGAIN)
		cr_assert_eq(lull_producer_wait(p, sizeof(struct payload), -1),
			     0);
	cr_assert_eq(ret, 0, "write: %d", ret);
}

/* The same where this thread is the consumer: read to make room. */
static void write_or_read(struct lull_ring *ring, struct lull_producer *p,
			  struct seen *s, uint32_t id, uint32_t seq)
{
	int ret;

	while ((ret = write_one(p, id, seq)) == -EAGAIN)
		cr_assert_gt(lull_ring_read(ring, on_record, s, 64), 0);
	cr_assert_eq(ret, 0, "write: %d", ret);
}

/* ---- sharing ---------------------------------------------------------- */

SHARED_TEST(memfd_is_sealed_at_its_size)
{
	struct lull_ring *ring;
	int fd, seals;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	fd = lull_ring_fd(ring);
	cr_assert_geq(fd, 0);
	seals = fcntl(fd, F_GET_SEALS);
	cr_assert_eq(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
		     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	cr_assert_neq(ftruncate(fd, 4096), 0);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

struct produce_arg {
	struct lull_ring *ring; /* the parent's handle: its fd, inherited */
	int sock;               /* or a socket to receive the ring from */
	const char *path;       /* or a path */
	uint32_t id, count;
	unsigned flags;
};

static void produce_child(int out, void *v)
{
	struct produce_arg *a = v;
	struct lull_ring *ring;
	struct lull_producer *p;
	int ret;

	if (a->path)
		ret = lull_ring_open_named(&ring, a->path, 0);
	else if (a->sock >= 0)
		ret = lull_ring_recv(&ring, a->sock, 0);
	else
		ret = lull_ring_open_fd(&ring, lull_ring_fd(a->ring), 0);
	if (ret || lull_producer_attach(ring, 0, &p))
		_exit(1);
	say(out, 'a');
	for (uint32_t i = 1; i <= a->count; i++)
		write_seq(p, a->id, i);
	if (lull_producer_detach(p) || lull_ring_destroy(ring))
		_exit(2);
}

/* Producers in @n children, by @how; every record arrives, then poison. */
static void share_and_drain(struct produce_arg *a, unsigned n)
{
	struct lull_ring *ring = a->ring;
	struct lull_producer *hold = NULL;
	struct child c[4];
	struct seen s = { 0 };

	/* Ours keeps the ring open until every child attached. */
	if (n > 1)
		cr_assert_eq(lull_producer_attach(ring, 0, &hold), 0);
	for (unsigned i = 0; i < n; i++) {
		a->id = i;
		child_start(&c[i], produce_child, a);
		cr_assert_eq(child_said(&c[i]), 'a');
	}
	if (hold)
		cr_assert_eq(lull_producer_detach(hold), 0);
	cr_assert_eq(consume(ring, &s, NULL, NULL), -EPIPE);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(child_reap(&c[i]), 0);
	cr_assert_eq(s.records, n * a->count);
	cr_assert_not(s.out_of_order);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(s.deaths, 0);
	cr_assert_eq(s.after_poison, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

SHARED_TEST(forked_producers_through_the_memfd)
{
	struct produce_arg a = { .sock = -1, .count = 20000 };

	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_MPSC, 0),
		     0);
	share_and_drain(&a, 3);
}

SHARED_TEST(lanes_producers_through_the_memfd)
{
	struct produce_arg a = { .sock = -1, .count = 20000 };

	/* A lane for each child, and one for the parent's hold. */
	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP,
					     LULL_RING_LANES(4), 0),
		     0);
	share_and_drain(&a, 3);
}

SHARED_TEST(producer_through_a_unix_socket)
{
	struct produce_arg a = { .count = 20000 };
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_SPSC, 0),
		     0);
	a.sock = sv[1];
	cr_assert_eq(lull_ring_send(a.ring, sv[0]), 0);
	share_and_drain(&a, 1);
	close(sv[0]);
	close(sv[1]);
}

SHARED_TEST(recv_without_a_descriptor_is_ebadmsg)
{
	struct lull_ring *ring;
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(write(sv[0], "L", 1), 1);
	cr_assert_eq(lull_ring_recv(&ring, sv[1], 0), -EBADMSG);
	cr_assert_eq(lull_ring_recv(&ring, -1, 0), -EINVAL);
	close(sv[0]);
	close(sv[1]);
	cr_assert_eq(lull_ring_recv(&ring, sv[1], 0), -EBADF);
}

static void shm_path(char *buf, size_t len)
{
	snprintf(buf, len, "/dev/shm/lull-test-%d", (int)getpid());
}

SHARED_TEST(named_ring_is_created_once_and_opened_by_path)
{
	struct produce_arg a = { .sock = -1, .count = 5000 };
	struct lull_ring *again;
	char path[64];
	struct stat st;

	shm_path(path, sizeof(path));
	unlink(path);
	cr_assert_eq(lull_ring_create_named(&a.ring, path, CAP, LULL_RING_MPSC,
					    0),
		     0);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(lull_ring_create_named(&again, path, CAP, LULL_RING_MPSC,
					    0),
		     -EEXIST);
	a.path = path;
	share_and_drain(&a, 2);
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(lull_ring_open_named(&again, path, 0), -ENOENT);
}

SHARED_TEST(creator_without_the_consumer_role)
{
	struct lull_ring *prod_side, *cons;
	struct lull_producer *p;
	struct seen s = { 0 };

	cr_assert_eq(lull_ring_create_shared(&prod_side, CAP, LULL_RING_MPSC,
					     LULL_SHARE_NO_CONSUMER),
		     0);
	cr_assert_eq(lull_ring_read(prod_side, on_record, &s, 1), -EPERM);
	cr_assert_eq(lull_ring_open_fd(&cons, lull_ring_fd(prod_side),
				       LULL_OPEN_CONSUMER),
		     0);
	cr_assert_eq(lull_ring_open_fd(&cons, lull_ring_fd(prod_side),
				       LULL_OPEN_CONSUMER) == -EBUSY,
		     true);
	cr_assert_eq(lull_producer_attach(prod_side, 0, &p), 0);
	write_seq(p, 0, 1);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(consume(cons, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 1);
	cr_assert_eq(lull_ring_destroy(cons), 0);
	cr_assert_eq(lull_ring_destroy(prod_side), 0);
}

/* A fatal report from a producer process: its records, the fatal record
 * with its text, then the poison, as between threads. */
static void fatal_child(int out, void *v)
{
	struct lull_ring *ring;
	struct lull_producer *p;

	p = child_attach(v, &ring);
	for (uint32_t i = 1; i <= 10; i++)
		write_seq(p, 3, i);
	if (lull_ring_fatal(ring, -EIO, "engine died"))
		_exit(2);
	say(out, 'f');
	if (lull_producer_detach(p) || lull_ring_destroy(ring))
		_exit(3);
}

static int on_fatal(const struct lull_record *rec, void *ctx)
{
	const struct lull_fatal *f = rec->data;

	if (rec->type == LULL_TYPE_FATAL) {
		cr_assert_eq(f->code, -EIO);
		cr_assert_str_eq(f->message, "engine died");
		((struct seen *)ctx)->deaths += 100; /* counted apart */
		return LULL_READ_CONTINUE;
	}
	return on_record(rec, ctx);
}

SHARED_TEST(fatal_report_from_a_producer_process)
{
	struct lull_ring *ring;
	struct seen s = { 0 };
	struct child c;
	int n;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	child_start(&c, fatal_child, ring);
	cr_assert_eq(child_said(&c), 'f');
	cr_assert_eq(child_reap(&c), 0);
	while ((n = lull_ring_wait(ring, 10ll * 1000000000)) == 0)
		cr_assert_gt(lull_ring_read(ring, on_fatal, &s, 64), 0);
	cr_assert_eq(n, -EPIPE);
	cr_assert_eq(s.records, 10);
	cr_assert_eq(s.deaths, 100, "the fatal record, once, and no death");
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(s.after_poison, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* ---- what opening refuses --------------------------------------------- */

static int memfd_with(const void *bytes, size_t len, size_t size, bool seal)
{
	int fd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	if (len)
		cr_assert_eq(pwrite(fd, bytes, len, 0), (ssize_t)len);
	if (seal)
		cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* A copy of a shared ring's region, byte for byte, and its size. */
static void *region_copy(struct lull_ring *ring, ssize_t *sizep)
{
	ssize_t size = lseek(lull_ring_fd(ring), 0, SEEK_END);
	void *copy = malloc((size_t)size);

	cr_assert_not_null(copy);
	cr_assert_eq(pread(lull_ring_fd(ring), copy, (size_t)size, 0), size);
	*sizep = size;
	return copy;
}

static void expect_open(int fd, int want, const char *what)
{
	struct lull_ring *ring;

	cr_assert_eq(lull_ring_open_fd(&ring, fd, 0), want, "%s", what);
	if (want == 0)
		cr_assert_eq(lull_ring_destroy(ring), 0);
	close(fd);
}

SHARED_TEST(open_refuses_what_is_not_a_whole_shared_region)
{
	struct lull_ring *ring, *plain;
	ssize_t size;
	void *copy;
	int pfd[2];

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	copy = region_copy(ring, &size);

	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	close(pfd[1]);
	expect_open(pfd[0], -EINVAL, "a pipe");
	expect_open(memfd_with(NULL, 0, 512, true), -EINVAL, "too small");
	expect_open(memfd_with(NULL, 0, (size_t)size, true), -EPROTO,
		    "zeroes (never initialised: no magic)");
	expect_open(memfd_with(copy, (size_t)size, (size_t)size, false),
		    -EINVAL, "a memfd not sealed against shrinking");
	expect_open(memfd_with(copy, (size_t)size - 4096, (size_t)size - 4096,
			       true),
		    -EINVAL, "a region cut short");
	expect_open(memfd_with(copy, (size_t)size, (size_t)size, true), 0,
		    "the same, whole and sealed");
	((struct lull_region *)copy)->flags |= LULL_REGION_ASYM_BARRIER;
	expect_open(memfd_with(copy, (size_t)size, (size_t)size, true),
		    -EPROTO, "shared, with one process's barrier");
	/* A region made for one process, in shared memory: not shared. */
	cr_assert_eq(lull_ring_create(&plain, CAP, LULL_RING_MPSC), 0);
	expect_open(memfd_with(plain->region, plain->region_size,
			       plain->region_size, true),
		    -EPROTO, "a region not made shared");
	cr_assert_eq(lull_ring_destroy(plain), 0);
	cr_assert_eq(lull_ring_open_fd(&plain, -1, 0), -EINVAL);
	cr_assert_eq(lull_ring_open_fd(&plain, lull_ring_fd(ring), 8), -EINVAL);
	cr_assert_eq(lull_ring_fd(NULL), -EINVAL);
	free(copy);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* lull_uring_park_arm() with the eventfd backend cannot reach a shared
 * ring's producers in other processes: refused. */
SHARED_TEST(eventfd_park_on_the_callers_uring_is_refused)
{
	struct lull_ring *ring;
	struct io_uring uring;

	if (lull_backend_supported(LULL_BACKEND_URING_EVENTFD) != 0)
		cr_skip_test("no io_uring here");
	/* Read at the ring's first park on an io_uring. */
	cr_assert_eq(setenv("LULL_BACKEND", "uring-eventfd", 1), 0);
	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	cr_assert_eq(io_uring_queue_init(8, &uring, 0), 0);
	cr_assert_eq(lull_uring_park_arm(ring, &uring, 1), -EOPNOTSUPP);
	io_uring_queue_exit(&uring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

SHARED_TEST(slots_bound_the_producers)
{
	struct lull_producer *p[LULL_PRODUCER_SLOTS], *extra;
	struct lull_ring *ring;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++)
		cr_assert_eq(lull_producer_attach(ring, 0, &p[i]), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &extra), -EBUSY);
	cr_assert_eq(lull_producer_detach(p[7]), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &p[7]), 0);
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++)
		cr_assert_eq(lull_producer_detach(p[i]), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* ---- a producer process dies ------------------------------------------ */

struct dying_arg {
	struct lull_ring *ring;
	uint32_t id, before; /* records committed before the stop */
	char stop;           /* 'i' idle, 'c' mid-claim, 'b' mid-batch */
};

static void dying_child(int out, void *v)
{
	struct dying_arg *a = v;
	struct lull_producer *p;
	struct lull_ring *ring;
	struct lull_claim claims[4];
	void *data;

	p = child_attach(a->ring, &ring);
	for (uint32_t i = 1; i <= a->before; i++)
		write_seq(p, a->id, i);
	if (a->stop == 'c') {
		if ((p->mode == LULL_RING_SPSC
			     ? lull_spsc_claim(p, 1, sizeof(struct payload),
					       &data)
			     : lull_mpsc_claim(p, 1, sizeof(struct payload),
					       &data)))
			_exit(2);
		memset(data, 0xab, 8); /* half a record: never handed out */
	} else if (a->stop == 'b') {
		for (int i = 0; i < 4; i++)
			claims[i] = (struct lull_claim){
				.len = sizeof(struct payload), .type = 1 };
		if ((p->mode == LULL_RING_SPSC
			     ? lull_spsc_claim_batch(p, claims, 4)
			     : lull_mpsc_claim_batch(p, claims, 4)))
			_exit(2);
		memset(claims[0].data, 0xcd, sizeof(struct payload));
	}
	say(out, a->stop);
	for (;;)
		pause();
}

/* Bytes of the data area one record of struct payload takes. */
#define PAYLOAD_SPACE                                                        \
	((LULL_RECORD_HEADER_SIZE + sizeof(struct payload) + 7) & ~(size_t)7)

/*
 * A producer is killed while stopped as @stop says, with @others writing
 * behind it in this process; everything it committed, and everything the
 * others did, arrives; its claim never does; one death record names it,
 * with the claim's bytes skipped (the ring never wraps here: no padding).
 */
static void producer_killed(unsigned flags, char stop)
{
	struct dying_arg a = { .id = 1, .before = 1000, .stop = stop };
	struct lull_producer *other;
	struct lull_ring_stats st;
	struct seen s = { 0 };
	struct child c;
	unsigned one = 1;

	/* Room for all it writes, and ours: the child needs no reader. */
	cr_assert_eq(lull_ring_create_shared(&a.ring, 4 * CAP, flags, 0), 0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &other), 0);
	cr_assert_eq(child_said(&c), stop);
	for (uint32_t i = 1; i <= 200; i++)
		write_seq(other, 0, i);
	child_kill(&c);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	/* Everything it committed came before its death record. */
	cr_assert_eq(s.last_seq[1], 1000);
	cr_assert_eq(s.death[0].pid, c.pid);
	cr_assert_eq(s.death[0].skipped,
		     stop == 'i' ? 0 : stop == 'c' ? PAYLOAD_SPACE
						   : 4 * PAYLOAD_SPACE);
	/* The others' records behind its claim arrive too. */
	for (uint32_t i = 201; i <= 300; i++)
		write_seq(other, 0, i);
	cr_assert_eq(lull_producer_detach(other), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 1300);
	cr_assert_not(s.out_of_order);
	cr_assert_eq(s.deaths, 1);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(s.after_poison, 0);
	cr_assert_eq(lull_ring_stats(a.ring, &st), 0);
	cr_assert_eq(st.producer_deaths, 1);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

SHARED_TEST(mpsc_producer_killed_idle)
{
	producer_killed(LULL_RING_MPSC, 'i');
}

SHARED_TEST(mpsc_producer_killed_mid_claim)
{
	producer_killed(LULL_RING_MPSC, 'c');
}

SHARED_TEST(mpsc_producer_killed_mid_batch)
{
	producer_killed(LULL_RING_MPSC, 'b');
}

SHARED_TEST(lane_producer_killed_mid_claim)
{
	producer_killed(LULL_RING_LANES(2), 'c');
}

SHARED_TEST(lane_producer_killed_mid_batch)
{
	producer_killed(LULL_RING_LANES(2), 'b');
}

/* Write @n records of producer @id, reading whenever the ring is full. */
static void write_reading(struct lull_ring *ring, struct lull_producer *p,
			  uint32_t id, uint32_t n, struct seen *s)
{
	int ret;

	for (uint32_t seq = 1; seq <= n; seq++) {
		while ((ret = write_one(p, id, seq)) == -EAGAIN)
			cr_assert_gt(lull_ring_read(ring, on_record, s, 64), 0);
		cr_assert_eq(ret, 0, "write: %d", ret);
	}
	while (lull_ring_read(ring, on_record, s, 64) > 0)
		;
}

/*
 * A lane producer killed between writes, on a lane whose earlier laps left
 * records' bytes past where it stopped: it held no claim, so nothing is
 * skipped, whatever lies there.
 */
SHARED_TEST(lane_producer_killed_idle_skips_nothing_of_earlier_laps)
{
	struct dying_arg a = { .id = 1, .before = 1000, .stop = 'i' };
	/* Three laps of the lane, in records of struct payload. */
	const uint32_t laps = 3 * 4 * CAP / PAYLOAD_SPACE;
	struct lull_producer *other, *lapper;
	struct seen s = { 0 };
	struct child c;
	unsigned one = 1;

	cr_assert_eq(lull_ring_create_shared(&a.ring, 4 * CAP,
					     LULL_RING_LANES(2), 0),
		     0);
	/* other holds lane 0, and the ring open; the child gets lane 1. */
	cr_assert_eq(lull_producer_attach(a.ring, 0, &other), 0);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &lapper), 0);
	write_reading(a.ring, lapper, 2, laps, &s);
	cr_assert_eq(s.last_seq[2], laps);
	cr_assert_eq(lull_producer_detach(lapper), 0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'i');
	child_kill(&c);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	cr_assert_eq(s.last_seq[1], 1000);
	cr_assert_eq(s.death[0].pid, c.pid);
	cr_assert_eq(s.death[0].skipped, 0);
	cr_assert_eq(lull_producer_detach(other), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, laps + 1000);
	cr_assert_not(s.out_of_order);
	cr_assert_eq(s.deaths, 1);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* The last producer dies: its records, its death, the poison, -EPIPE. */
SHARED_TEST(last_producer_dying_closes_the_ring)
{
	struct dying_arg a = { .id = 1, .before = 100, .stop = 'c' };
	struct seen s = { 0 };
	struct child c;
	struct lull_producer *p;

	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_SPSC, 0),
		     0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'c');
	/* Its lane is held: a second SPSC producer is refused. */
	cr_assert_eq(lull_producer_attach(a.ring, 0, &p), -EBUSY);
	child_kill(&c);
	/* The consumer parks with nothing to read, and the death wakes it. */
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 100);
	cr_assert_eq(s.deaths, 1);
	cr_assert_eq(s.death[0].pid, c.pid);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(lull_ring_read(a.ring, on_record, &s, 1), -EPIPE);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* A dead lane producer's lane is free again: the next one goes on there. */
SHARED_TEST(dead_producers_lane_is_taken_over)
{
	struct dying_arg a = { .id = 1, .before = 100, .stop = 'b' };
	struct lull_producer *keep, *p;
	struct seen s = { 0 };
	struct child c;
	unsigned one = 1;

	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_SPSC, 0),
		     0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'b');
	child_kill(&c);
	/*
	 * Attached before the death is handled, so that it is not the last
	 * producer's: its attach waits for the lane, which the dead one
	 * holds until the consumer recovers it.
	 */
	cr_assert_eq(lull_producer_attach(a.ring, 0, &p), -EBUSY);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	cr_assert_eq(s.records, 100);
	/* The ring closed with its last producer: a new one is refused. */
	cr_assert_eq(lull_producer_attach(a.ring, 0, &p), -EPIPE);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);

	/* With the ring kept open by a second lane, the lane is reused. */
	a.before = 100;
	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_LANES(2),
					     0),
		     0);
	memset(&s, 0, sizeof(s));
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'b');
	cr_assert_eq(lull_producer_attach(a.ring, 0, &keep), 0); /* lane 1 */
	child_kill(&c);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &p), 0); /* lane 0 */
	for (uint32_t i = 101; i <= 2000; i++)
		write_or_read(a.ring, p, &s, 1, i);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_producer_detach(keep), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_not(s.out_of_order);
	cr_assert_eq(s.last_seq[1], 2000);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* A slot whose pid now names another process is taken for dead. */
SHARED_TEST(reused_pid_is_not_taken_for_the_producer)
{
	struct dying_arg a = { .id = 1, .before = 10, .stop = 'i' };
	struct lull_slot *slots;
	struct seen s = { 0 };
	struct child c;
	unsigned one = 1;

	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_MPSC, 0),
		     0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'i');
	/* The child lives, but its slot says it started at another time. */
	slots = lull__slots(a.ring);
	for (unsigned i = 0; i < LULL_PRODUCER_SLOTS; i++)
		if (atomic_load(&slots[i].pid) == c.pid)
			atomic_fetch_add(&slots[i].start, 1);
	atomic_fetch_add(&a.ring->region->roster_gen, 1);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	cr_assert_eq(s.death[0].pid, c.pid);
	child_kill(&c);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 10);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/*
 * Slot @i names a producer in process @pid, started at no time (so taken
 * for dead at the consumer's next look), holding the claim [@start, @end)
 * in @phase.
 */
static void slot_dead_producer(struct lull_ring *ring, unsigned i,
			       int32_t pid, uint32_t phase, uint64_t start,
			       uint64_t end)
{
	struct lull_slot *slot = &lull__slots(ring)[i];

	atomic_store(&slot->pid, pid);
	atomic_store(&slot->start, UINT64_MAX); /* no process's */
	atomic_store(&slot->claim_start, start);
	atomic_store(&slot->claim_end, end);
	atomic_store(&slot->claim_phase, phase);
	atomic_store(&slot->state, LULL_SLOT_LIVE);
	atomic_fetch_add(&ring->region->roster_gen, 1);
}

/* What a hostile region made the consumer hand out. */
struct handed {
	unsigned records, poisons;
};

static int count_handed(const struct lull_record *rec, void *ctx)
{
	struct handed *h = ctx;

	if (rec->type == LULL_TYPE_POISON)
		h->poisons++;
	else
		h->records++;
	return LULL_READ_CONTINUE;
}

/*
 * A shared MPSC region closed with a claim at the head that nobody
 * commits: the consumer drains to the final tail, 8 bytes on.  Then a
 * producer is taken for dead (its slot names our parent, started at
 * another time), and the region shows a padding at the head that reaches
 * past the final tail, a record behind it, and a tail a lap on.  The
 * recovery of the dead claim steps over paddings only up to the final
 * tail: past it, the read would walk on without a stop, hand out the
 * record, and zero more than a lap.  The padding across the final tail
 * is a corruption, reported once, then the poison.
 */
SHARED_TEST(recovery_never_takes_the_head_past_the_final_tail)
{
	struct lull_ring *ring;
	struct lull_cursor *cur;
	struct handed h = { 0 };
	int32_t padding[2] = { 64, LULL_TYPE_PADDING };
	int32_t record[4] = { 16, 1, 7, 7 };
	int n;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0),
		     0);
	cur = &ring->cursor[0];
	atomic_store(&cur->lane->tail, 8 | LULL_TAIL_CLOSED);
	atomic_fetch_or(&ring->region->state, LULL_STATE_CLOSED);
	cr_assert_eq(lull_ring_read(ring, count_handed, &h, 64), -EAGAIN);
	cr_assert_eq(ring->closing, LULL_CLOSING_DRAIN);
	cr_assert_eq(cur->final_tail, 8);

	memcpy(cur->data + 64, record, sizeof(record));
	memcpy(cur->data, padding, sizeof(padding));
	atomic_store(&cur->lane->tail, CAP | LULL_TAIL_CLOSED);
	slot_dead_producer(ring, 0, (int32_t)getppid(), LULL_CLAIM_OWNED, 0, 8);

	n = lull_ring_read(ring, count_handed, &h, 64);
	cr_assert_eq(n, -EPROTO, "read %d, head %llu, %u handed", n,
		     (unsigned long long)cur->head, h.records);
	cr_assert_leq(cur->head, 8);
	cr_assert_eq(lull_ring_read(ring, count_handed, &h, 64), 1);
	cr_assert_eq(lull_ring_read(ring, count_handed, &h, 64), -EPIPE);
	cr_assert_eq(h.records, 0);
	cr_assert_eq(h.poisons, 1);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* The death notices a read hands out, in order. */
struct notices {
	unsigned count, poisons, others;
	struct lull_death death[80];
};

static int collect_notices(const struct lull_record *rec, void *ctx)
{
	struct notices *n = ctx;

	if (rec->type == LULL_TYPE_DEATH && n->count < 80)
		memcpy(&n->death[n->count++], rec->data, sizeof(n->death[0]));
	else if (rec->type == LULL_TYPE_POISON)
		n->poisons++;
	else
		n->others++;
	return LULL_READ_CONTINUE;
}

/*
 * More deaths than slots before any notice comes due: a shared MPSC ring
 * whose tail says 4096 bytes are claimed, none committed, so that every
 * notice waits for the head to pass 4096.  Each slot in turn names a
 * producer taken for dead (our parent, started at no time), is recovered
 * at the next read and freed, and then names another: 70 deaths, the
 * last 6 in process 1.  The queue holds 64; the other deaths wait, their
 * slots dead, until notices are handed out.  At the close every notice
 * comes, each once and in the order of the deaths, then the poison.
 */
SHARED_TEST(more_deaths_than_slots_wait_for_their_notices)
{
	struct notices n = { 0 };
	struct lull_ring *ring;
	int32_t pid;
	int ret;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0),
		     0);
	/* Producers to give back: the last would close the ring. */
	atomic_store(&ring->region->producers, 1000);
	atomic_store(&ring->cursor[0].lane->tail, 4096);
	for (unsigned k = 0; k < 70; k++) {
		pid = k < LULL_PRODUCER_SLOTS ? (int32_t)getppid() : 1;
		slot_dead_producer(ring, k % LULL_PRODUCER_SLOTS, pid,
				   LULL_CLAIM_NONE, 0, 0);
		cr_assert_eq(lull_ring_read(ring, collect_notices, &n, 64),
			     -EAGAIN, "death %u", k);
	}
	cr_assert_eq(n.count, 0, "a notice came before it was due");
	atomic_fetch_or(&ring->region->state,
			LULL_STATE_CLOSED | LULL_STATE_DISCARD);
	for (int reads = 0; reads < 200; reads++) {
		ret = lull_ring_read(ring, collect_notices, &n, 64);
		if (ret == -EPIPE)
			break;
		cr_assert(ret == 1 || ret == -EAGAIN, "read: %d", ret);
	}
	cr_assert_eq(ret, -EPIPE);
	cr_assert_eq(n.count, 70);
	for (unsigned k = 0; k < 70; k++) {
		pid = k < LULL_PRODUCER_SLOTS ? (int32_t)getppid() : 1;
		cr_assert_eq(n.death[k].pid, pid, "notice %u: pid %d", k,
			     (int)n.death[k].pid);
		cr_assert_eq(n.death[k].slot, k % LULL_PRODUCER_SLOTS,
			     "notice %u: slot %u", k, n.death[k].slot);
	}
	cr_assert_eq(n.poisons, 1);
	cr_assert_eq(n.others, 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * A consumer with an event loop of its own: the watch descriptor reads
 * ready when the producer dies, and lull_ring_watch() makes the rest
 * readable, no wait involved.
 */
SHARED_TEST(watch_fd_reads_ready_at_a_death)
{
	struct dying_arg a = { .id = 1, .before = 20, .stop = 'c' };
	struct lull_producer *other;
	struct seen s = { 0 };
	struct pollfd pfd;
	struct child c;
	int n;

	cr_assert_eq(lull_ring_create_shared(&a.ring, 4 * CAP, LULL_RING_MPSC,
					     0),
		     0);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &other), 0);
	pfd.fd = lull_ring_watch_fd(a.ring);
	cr_assert_geq(pfd.fd, 0);
	pfd.events = POLLIN;
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), 'c');
	write_seq(other, 0, 1); /* behind its claim */
	cr_assert_eq(lull_ring_watch(a.ring), 0); /* watched from here on */
	cr_assert_eq(poll(&pfd, 1, 0), 0, "ready while it lives");
	child_kill(&c);
	cr_assert_eq(poll(&pfd, 1, 10 * 1000), 1, "not ready at its death");
	cr_assert_eq(lull_ring_watch(a.ring), 0);
	while ((n = lull_ring_read(a.ring, on_record, &s, 64)) > 0)
		;
	cr_assert_eq(n, -EAGAIN);
	cr_assert_eq(s.records, 21);
	cr_assert_eq(s.deaths, 1);
	cr_assert_gt(s.death[0].skipped, 0);
	cr_assert_eq(poll(&pfd, 1, 0), 0, "still ready once handled");
	cr_assert_eq(lull_producer_detach(other), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(lull_ring_watch_fd(NULL), -EINVAL);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

SHARED_TEST(watch_is_for_the_consumer_of_a_shared_ring)
{
	struct lull_ring *plain, *shared, *prod;

	cr_assert_eq(lull_ring_create(&plain, CAP, LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_watch_fd(plain), -EINVAL);
	cr_assert_eq(lull_ring_watch(plain), -EINVAL);
	cr_assert_eq(lull_ring_create_shared(&shared, CAP, LULL_RING_MPSC, 0),
		     0);
	cr_assert_eq(lull_ring_open_fd(&prod, lull_ring_fd(shared), 0), 0);
	cr_assert_eq(lull_ring_watch_fd(prod), -EPERM);
	cr_assert_eq(lull_ring_watch(prod), -EPERM);
	cr_assert_eq(lull_ring_destroy(prod), 0);
	cr_assert_eq(lull_ring_destroy(shared), 0);
	cr_assert_eq(lull_ring_destroy(plain), 0);
}

/* Writes @fill records of 248 bytes and one of @last (0: none), then
 * holds a claim of 104 bytes until killed. */
struct wrap_arg {
	struct lull_ring *ring;
	int fill, last;
};

static void wrap_child(int out, void *v)
{
	static char buf[256];
	struct wrap_arg *a = v;
	struct lull_producer *p;
	struct lull_ring *ring;
	void *dst;

	p = child_attach(a->ring, &ring);
	for (int i = 0; i < a->fill; i++)
		if (lull_mpsc_write(p, 1, buf, 248))
			_exit(2);
	if (a->last && lull_mpsc_write(p, 1, buf, (size_t)a->last))
		_exit(2);
	if (lull_mpsc_claim(p, 1, 104, &dst))
		_exit(3);
	say(out, 'c');
	for (;;)
		pause();
}

static int count_kinds(const struct lull_record *rec, void *ctx)
{
	struct seen *s = ctx;

	if (rec->type == LULL_TYPE_DEATH)
		s->deaths++;
	else if (rec->type == LULL_TYPE_POISON)
		s->poisons++;
	else
		s->records++;
	return LULL_READ_CONTINUE;
}

/*
 * Two producers die holding claims next to each other, the second one
 * behind the wrap's padding (published at once): the consumer skips the
 * first, steps over the padding and skips the second, and wakes for the
 * end with nobody left to wake it.
 */
SHARED_TEST(dead_claims_on_both_sides_of_a_wrap_padding)
{
	struct wrap_arg a = { .fill = 7, .last = 128 };
	struct seen s = { 0 };
	struct child ca, cb;
	int n;

	/* A's claim ends 8 bytes before the end: B's starts with padding. */
	cr_assert_eq(lull_ring_create_shared(&a.ring, 2048, LULL_RING_MPSC, 0),
		     0);
	child_start(&ca, wrap_child, &a);
	cr_assert_eq(child_said(&ca), 'c');
	while (lull_ring_read(a.ring, count_kinds, &s, 64) > 0)
		;
	cr_assert_eq(s.records, 8);
	a.fill = a.last = 0;
	child_start(&cb, wrap_child, &a);
	cr_assert_eq(child_said(&cb), 'c');
	child_kill(&ca);
	child_kill(&cb);
	while ((n = lull_ring_wait(a.ring, 10ll * 1000000000)) == 0)
		while (lull_ring_read(a.ring, count_kinds, &s, 64) > 0)
			;
	cr_assert_eq(n, -EPIPE, "wait: %d", n);
	cr_assert_eq(s.records, 8);
	cr_assert_eq(s.deaths, 2);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* Claims a record, aborts it (a padding), then waits to be killed. */
static void abort_child(int out, void *v)
{
	struct lull_producer *p;
	struct lull_ring *ring;
	void *dst;

	p = child_attach(v, &ring);
	if (lull_mpsc_claim(p, 1, sizeof(struct payload), &dst) ||
	    lull_mpsc_abort(p))
		_exit(2);
	say(out, 'a');
	for (;;)
		pause();
}

/*
 * A producer dies after its aborted claim, behind a live producer's claim
 * the consumer waits at: its death is noticed there, and its notice is
 * due only past where it died.  The live claim is aborted too and its
 * producer leaves, which closes the ring: one read then walks both
 * paddings to the end with no record to hand out, and the death record
 * must still come before the poison.
 */
SHARED_TEST(death_record_before_the_poison_past_paddings)
{
	struct lull_producer *live;
	struct lull_ring_stats st = { 0 };
	struct lull_ring *ring;
	struct seen s = { 0 };
	struct child c;
	uint64_t deadline;
	void *dst;
	int n;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &live), 0);
	cr_assert_eq(lull_mpsc_claim(live, 1, sizeof(struct payload), &dst),
		     0);
	child_start(&c, abort_child, ring);
	cr_assert_eq(child_said(&c), 'a');
	child_kill(&c);
	/* Until the consumer's watch has taken the death in. */
	deadline = now_ns() + 10ull * 1000000000;
	while (st.producer_deaths == 0) {
		cr_assert_lt(now_ns(), deadline, "the death went unnoticed");
		n = lull_ring_wait(ring, 10 * 1000000);
		cr_assert(n == 0 || n == -ETIMEDOUT, "wait: %d", n);
		cr_assert_eq(lull_ring_read(ring, on_record, &s, 64), -EAGAIN);
		cr_assert_eq(lull_ring_stats(ring, &st), 0);
	}
	cr_assert_eq(s.deaths, 0, "due only past the paddings");
	cr_assert_eq(lull_mpsc_abort(live), 0);
	cr_assert_eq(lull_producer_detach(live), 0);
	/* A read straight away: no wait has stepped over the paddings. */
	cr_assert_eq(lull_ring_read(ring, on_record, &s, 64), 1);
	cr_assert_eq(s.deaths, 1, "the death record first");
	cr_assert_eq(s.poisons, 0);
	cr_assert_eq(consume(ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 0);
	cr_assert_eq(s.deaths, 1);
	cr_assert_eq(s.death[0].pid, c.pid);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(s.after_poison, 0, "the death record after the poison");
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* io_uring_setup() fails with EPERM in this process, as in a container. */
static bool io_uring_blocked(void)
{
#if defined(__x86_64__)
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K,
			 SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(filter) / sizeof(filter[0]),
				   .filter = filter };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
	       syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
#else
	return false;
#endif
}

static void late_writer_child(int out, void *v)
{
	struct lull_ring *ring;
	struct lull_producer *p;

	say(out, 'w');
	usleep(100 * 1000); /* once the consumer sleeps; it need not */
	p = child_attach(v, &ring);
	write_seq(p, 3, 1);
	if (lull_producer_detach(p) || lull_ring_destroy(ring))
		_exit(2);
}

/*
 * Without io_uring the consumer sleeps in futex(2) alone, and learns of a
 * death at its next wake-up: here another producer's record.
 */
SHARED_TEST(without_io_uring_a_death_is_noticed_at_the_next_wake)
{
	struct dying_arg a = { .id = 1, .before = 5, .stop = 'i' };
	struct lull_producer *keep;
	struct seen s = { 0 };
	struct child dead, late;
	unsigned one = 1;

	if (!io_uring_blocked())
		cr_skip_test("cannot block io_uring here");
	cr_assert_neq(lull_backend_supported(LULL_BACKEND_URING_FUTEX), 0);
	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_MPSC, 0),
		     0);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &keep), 0);
	child_start(&dead, dying_child, &a);
	cr_assert_eq(child_said(&dead), 'i');
	cr_assert_eq(lull_ring_read(a.ring, on_record, &s, 64), 5);
	child_kill(&dead);
	child_start(&late, late_writer_child, a.ring);
	cr_assert_eq(child_said(&late), 'w');
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	cr_assert_eq(s.death[0].pid, dead.pid);
	cr_assert_eq(child_reap(&late), 0);
	cr_assert_eq(lull_producer_detach(keep), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 6);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

static void holder_child(int out, void *v)
{
	(void)v;
	say(out, 'h');
	for (;;)
		pause();
}

/*
 * A child forked after the watch began holds copies of the consumer's
 * pidfds: the dead producer's stays in the epoll set unless removed from
 * it, and must never be taken for the death of the slot's next producer.
 */
SHARED_TEST(slot_reused_after_a_death_is_not_taken_for_dead)
{
	struct dying_arg a = { .id = 1, .before = 5, .stop = 'i' };
	struct lull_producer *keep;
	struct seen s = { 0 };
	struct child dead, holder, next;
	unsigned one = 1, two = 2;

	cr_assert_eq(lull_ring_create_shared(&a.ring, CAP, LULL_RING_MPSC, 0),
		     0);
	cr_assert_eq(lull_producer_attach(a.ring, 0, &keep), 0);
	child_start(&dead, dying_child, &a);
	cr_assert_eq(child_said(&dead), 'i');
	cr_assert_eq(lull_ring_watch(a.ring), 0);
	child_start(&holder, holder_child, NULL);
	cr_assert_eq(child_said(&holder), 'h');
	child_kill(&dead);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &one), 0);
	a.id = 2;
	child_start(&next, dying_child, &a);
	cr_assert_eq(child_said(&next), 'i');
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_ring_watch(a.ring), 0);
		while (lull_ring_read(a.ring, on_record, &s, 64) > 0)
			;
	}
	cr_assert_eq(s.deaths, 1, "the living producer taken for dead");
	child_kill(&next);
	cr_assert_eq(consume(a.ring, &s, deaths_reach, &two), 0);
	cr_assert_eq(s.death[1].pid, next.pid);
	child_kill(&holder);
	cr_assert_eq(lull_producer_detach(keep), 0);
	cr_assert_eq(consume(a.ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.deaths, 2);
	cr_assert_eq(s.records, 10);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* A memfd made without sealing can never be sealed: refused. */
SHARED_TEST(memfd_that_cannot_be_sealed_is_refused)
{
	struct lull_ring *ring, *other;
	ssize_t size;
	void *copy;
	int fd;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC, 0), 0);
	copy = region_copy(ring, &size);
	fd = memfd_create("unsealable", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, copy, (size_t)size, 0), size);
	cr_assert_eq(lull_ring_open_fd(&other, fd, 0), -EINVAL);
	close(fd);
	free(copy);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* A producer that exits without detaching is found dead as well. */
static void exit_child(int out, void *v)
{
	struct lull_ring *ring;
	struct lull_producer *p;

	p = child_attach(v, &ring);
	write_seq(p, 2, 1);
	say(out, 'x');
	_exit(0); /* no detach, no destroy, no exit handlers */
}

SHARED_TEST(producer_exiting_without_detach_is_found_dead)
{
	struct lull_ring *ring;
	struct seen s = { 0 };
	struct child c;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_LANES(2), 0),
		     0);
	child_start(&c, exit_child, ring);
	cr_assert_eq(child_said(&c), 'x');
	cr_assert_eq(child_reap(&c), 0);
	cr_assert_eq(consume(ring, &s, NULL, NULL), -EPIPE);
	cr_assert_eq(s.records, 1);
	cr_assert_eq(s.deaths, 1);
	cr_assert_eq(s.poisons, 1);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* ---- the consumer process dies ---------------------------------------- */

static void consumer_child(int out, void *v)
{
	struct lull_ring *ring;

	if (lull_ring_open_fd(&ring, lull_ring_fd(v), LULL_OPEN_CONSUMER))
		_exit(1);
	say(out, 'c');
	for (;;)
		pause();
}

SHARED_TEST(consumer_killed_under_a_waiting_producer)
{
	struct lull_ring *ring;
	struct lull_producer *p;
	struct payload pl = { 0 };
	struct child c;
	int ret;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC,
					     LULL_SHARE_NO_CONSUMER),
		     0);
	cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	child_start(&c, consumer_child, ring);
	cr_assert_eq(child_said(&c), 'c');
	while ((ret = lull_mpsc_write(p, 1, &pl, sizeof(pl))) == 0)
		;
	cr_assert_eq(ret, -EAGAIN, "a live consumer: full, not closed");
	if (fork() == 0) { /* the killer, once we sleep */
		usleep(50 * 1000);
		kill(c.pid, SIGKILL);
		_exit(0);
	}
	cr_assert_eq(lull_producer_wait(p, sizeof(pl), 20ll * 1000000000),
		     -EPIPE);
	cr_assert_eq(child_reap(&c), 128 + SIGKILL);
	cr_assert_eq(wait(NULL) > 0, true); /* the killer */
	cr_assert_eq(lull_mpsc_write(p, 1, &pl, sizeof(pl)), -EPIPE);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

SHARED_TEST(full_ring_of_a_dead_consumer_is_epipe)
{
	struct lull_ring *ring;
	struct lull_producer *p;
	struct payload pl = { 0 };
	struct child c;
	int ret;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_LANES(1),
					     LULL_SHARE_NO_CONSUMER),
		     0);
	cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	child_start(&c, consumer_child, ring);
	cr_assert_eq(child_said(&c), 'c');
	child_kill(&c);
	while ((ret = lull_spsc_write(p, 1, &pl, sizeof(pl))) == 0)
		;
	cr_assert_eq(ret, -EPIPE);
	cr_assert_eq(lull_producer_wait(p, sizeof(pl), -1), -EPIPE);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/*
 * One record, the way @how says: 'w' a write, 'c' a claim then its commit,
 * 'b' a batch of three; in the family of the ring's topology.
 */
static int write_as(struct lull_producer *p, bool mpsc, char how)
{
	struct payload pl = { 0 };
	struct lull_record recs[3];
	void *data;
	int ret;

	switch (how) {
	case 'c':
		ret = mpsc ? lull_mpsc_claim(p, 1, sizeof(pl), &data)
			   : lull_spsc_claim(p, 1, sizeof(pl), &data);
		if (ret < 0)
			return ret;
		memcpy(data, &pl, sizeof(pl));
		return mpsc ? lull_mpsc_commit(p) : lull_spsc_commit(p);
	case 'b':
		for (unsigned i = 0; i < 3; i++)
			recs[i] = (struct lull_record){ .type = 1,
							.data = &pl,
							.len = sizeof(pl) };
		return mpsc ? lull_mpsc_write_batch(p, recs, 3)
			    : lull_spsc_write_batch(p, recs, 3);
	default:
		return mpsc ? lull_mpsc_write(p, 1, &pl, sizeof(pl))
			    : lull_spsc_write(p, 1, &pl, sizeof(pl));
	}
}

/*
 * The consumer's process is killed while the ring has room: the next
 * claim or write of the producer is -EPIPE (through the consumer's
 * beacon, with no full ring and no wait), and so is everything after.
 * @early: the producer attached before the consumer took its role.
 */
static void next_write_after_consumer_death(unsigned flags, char how,
					    bool early)
{
	bool mpsc = flags == LULL_RING_MPSC;
	struct lull_ring *ring;
	struct lull_producer *p = NULL;
	struct child c;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, flags,
					     LULL_SHARE_NO_CONSUMER),
		     0);
	if (early)
		cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	child_start(&c, consumer_child, ring);
	cr_assert_eq(child_said(&c), 'c');
	if (!early)
		cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	cr_assert_eq(write_as(p, mpsc, how), 0, "a live consumer's ring");
	child_kill(&c); /* reaped: its process has ended */
	cr_assert_eq(write_as(p, mpsc, how), -EPIPE,
		     "the first write after the consumer's death");
	cr_assert_eq(write_as(p, mpsc, 'w'), -EPIPE);
	cr_assert_eq(lull_producer_wait(p, 16, -1), -EPIPE);
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

SHARED_TEST(mpsc_write_after_the_consumer_died_is_epipe)
{
	next_write_after_consumer_death(LULL_RING_MPSC, 'w', false);
	next_write_after_consumer_death(LULL_RING_MPSC, 'w', true);
}

SHARED_TEST(mpsc_claim_and_batch_after_the_consumer_died_are_epipe)
{
	next_write_after_consumer_death(LULL_RING_MPSC, 'c', true);
	next_write_after_consumer_death(LULL_RING_MPSC, 'b', false);
}

SHARED_TEST(spsc_write_after_the_consumer_died_is_epipe)
{
	next_write_after_consumer_death(LULL_RING_SPSC, 'w', true);
	next_write_after_consumer_death(LULL_RING_SPSC, 'c', false);
	next_write_after_consumer_death(LULL_RING_SPSC, 'b', true);
}

SHARED_TEST(lane_write_after_the_consumer_died_is_epipe)
{
	next_write_after_consumer_death(LULL_RING_LANES(2), 'w', false);
	next_write_after_consumer_death(LULL_RING_LANES(2), 'c', true);
	next_write_after_consumer_death(LULL_RING_LANES(2), 'b', false);
}

/*
 * A beacon the region names wrongly (a nonce or a descriptor another
 * process wrote there) is not trusted: without it the producer learns of
 * the consumer's death as before, at a full ring or a wait, and nothing
 * it opened on the way is left open.
 */
static void forged_beacon(bool forge_nonce)
{
	struct lull_ring *ring;
	struct lull_producer *p;
	struct child c;
	int ret;

	cr_assert_eq(lull_ring_create_shared(&ring, CAP, LULL_RING_MPSC,
					     LULL_SHARE_NO_CONSUMER),
		     0);
	child_start(&c, consumer_child, ring);
	cr_assert_eq(child_said(&c), 'c');
	if (forge_nonce)
		atomic_fetch_add(&ring->region->consumer_beacon_nonce, 2);
	else /* the consumer's standard input, which is no beacon */
		atomic_store(&ring->region->consumer_beacon_fd, 0 + 1);
	cr_assert_eq(lull_producer_attach(ring, 0, &p), 0);
	child_kill(&c);
	cr_assert_eq(write_as(p, true, 'w'), 0,
		     "no beacon trusted: the write finds room");
	while ((ret = write_as(p, true, 'w')) == 0)
		;
	cr_assert_eq(ret, -EPIPE, "the full ring still asks the pidfd");
	cr_assert_eq(lull_producer_detach(p), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

SHARED_TEST(forged_beacon_is_not_trusted)
{
	forged_beacon(true);
	forged_beacon(false);
}

/*
 * The beacon is one descriptor for the process's life, whatever number
 * of rings it consumes (the fixture made it already), and a fork's child
 * that takes a consumer role makes its own: its producers' parent then
 * learns of its death at once.
 */
SHARED_TEST(one_beacon_a_process)
{
	struct lull_ring *a, *b;
	int before = fd_count();

	cr_assert_eq(lull_ring_create_shared(&a, CAP, LULL_RING_MPSC, 0), 0);
	cr_assert_eq(lull_ring_create_shared(&b, CAP, LULL_RING_SPSC, 0), 0);
	cr_assert_eq(fd_count(), before + 2, "the two memfds, no more");
	cr_assert_eq(lull_ring_destroy(a), 0);
	cr_assert_eq(lull_ring_destroy(b), 0);
	/* consumer_child is such a child: its beacon is its own. */
	next_write_after_consumer_death(LULL_RING_MPSC, 'w', true);
}

/* ---- the loop --------------------------------------------------------- */

struct loop_seen {
	struct seen s;
	struct lull_loop *loop;
};

static int on_loop_record(const struct lull_record *rec, void *ctx)
{
	struct loop_seen *ls = ctx;

	on_record(rec, &ls->s);
	if (rec->type == LULL_TYPE_POISON)
		lull_loop_stop(ls->loop);
	return LULL_READ_CONTINUE;
}

/*
 * A loop parks on a shared ring with a producer process stopped as
 * @stop; with @behind, a second producer process writes behind it and
 * leaves.  The stopped one is killed while the loop sleeps: the loop
 * learns of it (nothing else wakes it), delivers everything committed,
 * then the death record and the poison.
 */
static void loop_producer_killed_on(int backend, char stop, bool behind,
				    bool before_run)
{
	struct lull_loop_config cfg = { .backend = backend };
	struct dying_arg a = { .id = 1, .before = 50, .stop = stop };
	struct produce_arg b = { .sock = -1, .id = 2, .count = 100 };
	struct loop_seen ls = { 0 };
	struct child c, d;

	if (lull_backend_supported(backend) != 0)
		return; /* not on this kernel */
	cr_assert_eq(lull_ring_create_shared(&a.ring, 4 * CAP, LULL_RING_MPSC,
					     0),
		     0);
	cr_assert_eq(lull_loop_create(&ls.loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(ls.loop, a.ring, on_loop_record, &ls, 0),
		     0);
	child_start(&c, dying_child, &a);
	cr_assert_eq(child_said(&c), stop);
	if (behind) {
		b.ring = a.ring;
		child_start(&d, produce_child, &b);
		cr_assert_eq(child_said(&d), 'a');
		cr_assert_eq(child_reap(&d), 0);
	}
	if (before_run) {
		/* Dead before the loop read anything: found dead with its
		 * records, and the claim, still ahead of the reader. */
		child_kill(&c);
		cr_assert_eq(lull_loop_run(ls.loop), 0);
	} else {
		/* The killer runs once the loop sleeps; nothing else wakes
		 * it. */
		if (fork() == 0) {
			usleep(100 * 1000);
			kill(c.pid, SIGKILL);
			_exit(0);
		}
		cr_assert_eq(lull_loop_run(ls.loop), 0);
		cr_assert_eq(child_reap(&c), 128 + SIGKILL);
		cr_assert_eq(wait(NULL) > 0, true);
	}
	cr_assert_eq(ls.s.records, behind ? 150u : 50u);
	cr_assert_not(ls.s.out_of_order);
	cr_assert_eq(ls.s.deaths, 1);
	cr_assert_eq(ls.s.death[0].pid, c.pid);
	cr_assert_eq(ls.s.poisons, 1);
	cr_assert_eq(ls.s.after_poison, 0);
	cr_assert_eq(lull_loop_destroy(ls.loop), 0);
	cr_assert_eq(lull_ring_destroy(a.ring), 0);
}

/* On every backend this kernel has: the futex one, and the two that
 * park on the loop's eventfd (through a bridge, for a shared ring). */
static void loop_producer_killed(char stop, bool behind, bool before_run)
{
	static const int backends[] = { LULL_BACKEND_URING_FUTEX,
					LULL_BACKEND_URING_EVENTFD,
					LULL_BACKEND_EPOLL };

	for (unsigned i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		loop_producer_killed_on(backends[i], stop, behind, before_run);
}

SHARED_TEST(loop_learns_of_a_dead_producer)
{
	loop_producer_killed('i', false, false);
}

/*
 * A producer process that writes only to a parked consumer: before each
 * record it waits until the park word says the consumer parked, so every
 * record needs a wake-up that crossed the processes.
 */
static void parked_writer_child(int out, void *v)
{
	struct produce_arg *a = v;
	struct lull_ring *ring;
	struct lull_producer *p = child_attach(a->ring, &ring);

	say(out, 'a');
	for (uint32_t i = 1; i <= a->count; i++) {
		/* Relaxed: only a hint of when to write. */
		while (atomic_load_explicit(&ring->region->park,
					    memory_order_relaxed) ==
		       LULL_PARK_AWAKE)
			sched_yield();
		write_seq(p, a->id, i);
	}
	if (lull_producer_detach(p) || lull_ring_destroy(ring))
		_exit(2);
}

/*
 * The loop takes a shared ring on every backend: on uring-futex its futex
 * wait, on uring-eventfd and epoll the bridge; each of the child's records
 * reaches a parked loop, and the last detach ends the run with the poison.
 */
SHARED_TEST(loop_parks_on_a_shared_ring_on_every_backend)
{
	static const int backends[] = { LULL_BACKEND_URING_FUTEX,
					LULL_BACKEND_URING_EVENTFD,
					LULL_BACKEND_EPOLL };
	struct lull_loop_config cfg = { 0 };
	struct lull_loop_stats st;
	struct child c;

	for (unsigned i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		struct produce_arg a = { .sock = -1, .id = 1, .count = 300 };
		struct loop_seen ls = { 0 };

		if (lull_backend_supported(backends[i]) != 0)
			continue;
		cfg.backend = backends[i];
		cr_assert_eq(lull_ring_create_shared(&a.ring, CAP,
						     LULL_RING_MPSC, 0),
			     0);
		cr_assert_eq(lull_loop_create(&ls.loop, &cfg), 0);
		cr_assert_eq(lull_loop_attach(ls.loop, a.ring, on_loop_record,
					      &ls, 0),
			     0, "backend %d", backends[i]);
		child_start(&c, parked_writer_child, &a);
		cr_assert_eq(child_said(&c), 'a');
		cr_assert_eq(lull_loop_run(ls.loop), 0);
		cr_assert_eq(child_reap(&c), 0);
		cr_assert_eq(ls.s.records, 300u, "backend %d", backends[i]);
		cr_assert_not(ls.s.out_of_order);
		cr_assert_eq(ls.s.poisons, 1);
		cr_assert_eq(lull_loop_stats(ls.loop, &st), 0);
		cr_assert_geq(st.parks, 1, "the loop slept");
		cr_assert_eq(lull_loop_destroy(ls.loop), 0);
		cr_assert_eq(lull_ring_destroy(a.ring), 0);
	}
}

SHARED_TEST(loop_skips_a_dead_producers_claim)
{
	loop_producer_killed('c', true, false);
}

SHARED_TEST(loop_skips_a_claim_of_one_dead_before_it_ran)
{
	loop_producer_killed('c', true, true);
}
