/* SPDX-License-Identifier: MIT */
/*
 * handoff_xproc.c - the consumer in another process.  For every -xproc
 * mechanism, main forks the consumer before the producer thread starts:
 * the run (its latencies, the consumer's snapshots, the ready barrier,
 * process-shared) lies in a MAP_SHARED mapping made before the fork, so
 * the measurement loop reads what the child wrote as it would a thread's,
 * and both sides stamp CLOCK_MONOTONIC, one clock for every process on
 * the host.
 *
 * lull-blocking-xproc and lull-uring-futex-xproc: main's ring is a shared
 * one (lull_ring_create_shared(), no consumer role); the child opens its
 * memfd, inherited across the fork, with LULL_OPEN_CONSUMER and parks in
 * lull_ring_wait() or a lull_loop (on uring-futex, and on uring-eventfd
 * and epoll through their bridge).  futex-xproc-floor: handoff_floors.c, on a
 * shared futex.  And the kernel's own ways between processes, one write(2)
 * per message and a blocking read(2) of it:
 *   unix-xproc   a SOCK_SEQPACKET socketpair (datagrams kept whole, and
 *                no queue limit of 10 as a connected SOCK_DGRAM pair has)
 *   pipe-xproc   a pipe: each 16-byte write is atomic (<= PIPE_BUF), so
 *                a read returns whole messages
 */
#include <fcntl.h>

#include "handoff.h"

pid_t ho_consumer_fork(struct run *run, void *(*consumer)(void *))
{
	struct consumer *c = &run->c;
	pid_t parent = getpid(), pid;
	int r;

	/* Nothing buffered twice: the child never flushes what main wrote. */
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		ho_die(run, "fork: %s", strerror(errno));
	if (pid)
		return pid;
	/* Go with main, however main ends (ho_die(), a signal). */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		_exit(1);
	if (run->ring) {
		r = lull_ring_open_fd(&c->ring, lull_ring_fd(run->ring),
				      LULL_OPEN_CONSUMER);
		if (r < 0)
			ho_die(run, "lull_ring_open_fd: %s", lull_strerror(r));
	}
	consumer(run);
	if (c->ring) {
		r = lull_ring_destroy(c->ring);
		if (r < 0)
			ho_die(run, "lull_ring_destroy: %s", lull_strerror(r));
		c->ring = NULL;
	}
	_exit(0);
}

int ho_consumer_wait(struct run *run, pid_t pid, uint64_t limit_ns,
		     uint64_t *cpu_ns)
{
	uint64_t deadline = bench_now_ns() + limit_ns, now, ms;
	struct pollfd p = { .events = POLLIN };
	struct rusage ru;
	int status, r;

	p.fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (p.fd < 0)
		ho_die(run, "pidfd_open: %s", strerror(errno));
	for (;;) {
		now = bench_now_ns();
		if (now >= deadline) {
			r = 0;
			break;
		}
		ms = (deadline - now) / 1000000 + 1;
		r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
		if (r != 0 && !(r < 0 && errno == EINTR))
			break;
	}
	close(p.fd);
	if (r < 0)
		ho_die(run, "poll: %s", strerror(errno));
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return ETIMEDOUT;
	}
	if (wait4(pid, &status, 0, &ru) != pid)
		ho_die(run, "wait4: %s", strerror(errno));
	if (WIFSIGNALED(status))
		ho_die(run, "the consumer process was killed by signal %d",
		       WTERMSIG(status));
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		ho_die(run, "the consumer process failed (exit status %d)",
		       WEXITSTATUS(status));
	*cpu_ns = bench_ru_cpu_ns(&ru);
	return 0;
}

/* --- unix-xproc, pipe-xproc -------------------------------------------- */

struct fd_pair {
	int rd, wr;
};

static void fds_open(struct run *run, bool unix_socket)
{
	struct fd_pair *q = calloc(1, sizeof(*q));
	int fds[2], r;

	if (!q)
		ho_die(run, "out of memory");
	if (unix_socket)
		r = socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds);
	else
		r = pipe2(fds, O_CLOEXEC);
	if (r < 0)
		ho_die(run, "%s: %s", unix_socket ? "socketpair" : "pipe2",
		       strerror(errno));
	q->rd = fds[0];
	q->wr = fds[1];
	run->queue = q;
}

static void unix_open(struct run *run)
{
	fds_open(run, true);
}

static void pipe_open(struct run *run)
{
	fds_open(run, false);
}

/*
 * Block in read(2) until messages come; a read takes what is there, whole
 * messages (a pipe's 16-byte writes are atomic, a socket's are datagrams).
 */
static void fds_consume(struct consumer *c)
{
	struct run *run = c->run;
	struct fd_pair *q = run->queue;
	struct msg m[16];
	ssize_t got;

	pthread_barrier_wait(&run->ready);
	ho_snap_take(c, &c->start);
	while (!c->done) {
		c->iters++;
		got = read(q->rd, m, sizeof(m));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0 || got % (ssize_t)sizeof(m[0]))
			ho_die(run, "read: %s",
			       got < 0 ? strerror(errno) : "a partial message");
		for (ssize_t i = 0; i < got / (ssize_t)sizeof(m[0]) && !c->done;
		     i++)
			ho_take(c, m[i].seq, m[i].t_push);
	}
}

static void fds_push(struct run *run, const struct msg *m)
{
	struct fd_pair *q = run->queue;
	ssize_t put;

	do
		put = write(q->wr, m, sizeof(*m));
	while (put < 0 && errno == EINTR);
	if (put != (ssize_t)sizeof(*m))
		ho_die(run, "write: %s",
		       put < 0 ? strerror(errno) : "a short write");
}

static void fds_close(struct run *run)
{
	struct fd_pair *q = run->queue;

	close(q->rd);
	close(q->wr);
	free(q);
	run->queue = NULL;
}

const struct ho_queue ho_unix_xproc = {
	.open = unix_open,
	.consume = fds_consume,
	.push = fds_push,
	.close = fds_close,
};

const struct ho_queue ho_pipe_xproc = {
	.open = pipe_open,
	.consume = fds_consume,
	.push = fds_push,
	.close = fds_close,
};
