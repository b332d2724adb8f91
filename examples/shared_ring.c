/* SPDX-License-Identifier: MIT */
/*
 * shared_ring.c - one consumer process, producer processes, one ring.
 *
 * The consumer makes an MPSC ring in a memfd (lull_ring_create_shared())
 * and starts each producer with fork() and exec() of this same program,
 * the way unrelated programs meet: half inherit the memfd (its
 * close-on-exec flag cleared in the child, its number on the command
 * line) and open it with lull_ring_open_fd(); the other half inherit one
 * end of a socketpair, and the consumer passes the ring over it
 * (lull_ring_send(), lull_ring_recv()).  Each producer writes its records
 * and exits; with -k, producer 0 dies by SIGKILL halfway, with a claim
 * left open, as a crash would leave it.  The consumer parks in
 * lull_ring_wait(), which also watches the producer processes: it gets
 * every record the dead one committed, never its open claim, then one
 * LULL_TYPE_DEATH record for it, and the poison once every producer is
 * gone.  It exits 0 only if all of that arrived as documented.
 *
 * Build against an installed lull:
 *     cc -O2 shared_ring.c $(pkg-config --cflags --libs lull) -pthread
 * Run: ./a.out [-k] [producers [records-per-producer]]
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lull.h>

#define MESSAGE_TYPE 1
#define MAX_PRODUCERS 16

struct message {
	uint32_t producer;
	uint32_t pad;
	uint64_t seq;
};

struct consumer_state {
	unsigned producers;
	pid_t pid[MAX_PRODUCERS];
	uint64_t next_seq[MAX_PRODUCERS];
	uint64_t received, bad, deaths, skipped;
	int dead;    /* the producer a death record named, or -1 */
	int poison;
};

static int fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s\n", what, lull_strerror(err));
	return 1;
}

/* A producer process: argv is "--producer fd|sock N id records die". */
static int producer(char **argv)
{
	struct message msg = { .producer = (uint32_t)atoi(argv[4]) };
	uint64_t count = strtoull(argv[5], NULL, 10);
	int fd = atoi(argv[3]), die = atoi(argv[6]), ret;
	struct lull_producer *prod;
	struct lull_ring *ring;
	void *dst;

	if (strcmp(argv[2], "fd") == 0)
		ret = lull_ring_open_fd(&ring, fd, 0); /* keeps a dup */
	else
		ret = lull_ring_recv(&ring, fd, 0);    /* from the socket */
	close(fd);
	if (ret < 0)
		return fail("open", ret);
	if ((ret = lull_producer_attach(ring, 0, &prod)) < 0)
		return fail("attach", ret);
	for (; msg.seq < count; msg.seq++) {
		if (die && msg.seq == count / 2) {
			/* Crash with a claim open: the consumer skips it. */
			while ((ret = lull_mpsc_claim(prod, MESSAGE_TYPE,
						      sizeof(msg), &dst)) ==
			       -EAGAIN)
				if ((ret = lull_producer_wait(prod, sizeof(msg),
							      -1)) < 0)
					break;
			if (ret < 0)
				return fail("claim", ret);
			memset(dst, 0xff, sizeof(msg) / 2); /* half written */
			kill(getpid(), SIGKILL);
		}
		/* Full: sleep until the consumer frees room. */
		while ((ret = lull_mpsc_write(prod, MESSAGE_TYPE, &msg,
					      sizeof(msg))) == -EAGAIN)
			if ((ret = lull_producer_wait(prod, sizeof(msg), -1)) < 0)
				break;
		if (ret < 0)
			return fail("write", ret);
	}
	if ((ret = lull_producer_detach(prod)) < 0 ||
	    (ret = lull_ring_destroy(ring)) < 0)
		return fail("detach/destroy", ret);
	return 0;
}

/* Start producer @id: fork, hand it the memfd or a socket, exec. */
static pid_t spawn(struct lull_ring *ring, unsigned id, uint64_t count, int die)
{
	char fdarg[16], idarg[16], countarg[24], diearg[4];
	int sv[2] = { -1, -1 }, fd = lull_ring_fd(ring), ret;
	bool by_socket = id % 2;
	pid_t pid;

	if (by_socket && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	if (by_socket)
		fd = sv[1];
	if (fd < 0)
		return -1;
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	snprintf(idarg, sizeof(idarg), "%u", id);
	snprintf(countarg, sizeof(countarg), "%" PRIu64, count);
	snprintf(diearg, sizeof(diearg), "%d", die);
	pid = fork();
	if (pid == 0) {
		/* lull's descriptors are close-on-exec: let this one through. */
		if (fcntl(fd, F_SETFD, 0) == 0)
			execl("/proc/self/exe", "shared_ring", "--producer",
			      by_socket ? "sock" : "fd", fdarg, idarg,
			      countarg, diearg, (char *)NULL);
		_exit(127);
	}
	if (by_socket) {
		close(sv[1]);
		ret = pid > 0 ? lull_ring_send(ring, sv[0]) : 0;
		close(sv[0]);
		if (ret < 0) {
			fail("send", ret);
			kill(pid, SIGKILL);
		}
	}
	return pid;
}

static int on_record(const struct lull_record *rec, void *ctx)
{
	struct consumer_state *st = ctx;
	struct lull_death death;
	struct message msg;

	if (rec->type == LULL_TYPE_POISON) {
		st->poison++;
		return LULL_READ_STOP;
	}
	if (rec->type == LULL_TYPE_DEATH && rec->len == sizeof(death)) {
		memcpy(&death, rec->data, sizeof(death));
		st->deaths++;
		st->skipped += death.skipped;
		for (unsigned i = 0; i < st->producers; i++)
			if (st->pid[i] == death.pid)
				st->dead = (int)i;
		return LULL_READ_CONTINUE;
	}
	if (rec->type != MESSAGE_TYPE || rec->len != sizeof(msg)) {
		st->bad++;
		return LULL_READ_CONTINUE;
	}
	/* Copy first: a producer process could still change the payload. */
	memcpy(&msg, rec->data, sizeof(msg));
	if (msg.producer >= st->producers || (int)msg.producer == st->dead ||
	    msg.seq != st->next_seq[msg.producer]++)
		st->bad++;
	st->received++;
	return LULL_READ_CONTINUE;
}

int main(int argc, char **argv)
{
	struct consumer_state st = { .dead = -1 };
	struct lull_producer *guard = NULL;
	struct lull_ring_stats stats;
	struct lull_ring *ring;
	uint64_t count, expect = 0;
	int kill_one = 0, ret, status, ok = 1;

	if (argc == 7 && strcmp(argv[1], "--producer") == 0)
		return producer(argv);
	if (argc > 1 && strcmp(argv[1], "-k") == 0) {
		kill_one = 1;
		argv++, argc--;
	}
	st.producers = argc > 1 ? (unsigned)atoi(argv[1]) : 4;
	count = argc > 2 ? strtoull(argv[2], NULL, 10) : 10000;
	if (st.producers < 1 || st.producers > MAX_PRODUCERS || count < 2) {
		fprintf(stderr, "usage: %s [-k] [producers (1..%d) [records (2..)]]\n",
			argv[0], MAX_PRODUCERS);
		return 2;
	}
	if ((ret = lull_ring_create_shared(&ring, 1 << 16, LULL_RING_MPSC, 0)) < 0)
		return fail("lull_ring_create_shared", ret);
	/*
	 * A producer of our own holds the ring open until every child has
	 * attached: the last producer to leave closes it, and a child that
	 * finished before the next one attached would close it too early.
	 */
	if ((ret = lull_producer_attach(ring, 0, &guard)) < 0)
		return fail("attach", ret);
	for (unsigned i = 0; i < st.producers; i++) {
		st.pid[i] = spawn(ring, i, count, kill_one && i == 0);
		if (st.pid[i] < 0) {
			perror("spawn");
			return 1;
		}
	}
	while (!st.poison) {
		ret = lull_ring_read(ring, on_record, &st, 256);
		if (ret == -EAGAIN) /* empty: park; a death wakes us too */
			ret = lull_ring_wait(ring, 5 * 1000000000LL);
		if (ret < 0) {
			ok = !fail("read/wait", ret);
			break;
		}
		/* Every child has written (or died): let the ring close. */
		unsigned started = 0;
		for (unsigned i = 0; i < st.producers; i++)
			started += st.next_seq[i] > 0 || st.dead == (int)i;
		if (guard && started == st.producers) {
			if ((ret = lull_producer_detach(guard)) < 0)
				return fail("detach", ret);
			guard = NULL;
		}
	}
	if (guard && (ret = lull_producer_detach(guard)) < 0)
		return fail("detach", ret);
	for (unsigned i = 0; i < st.producers; i++) {
		if (!ok) /* a failed run: end the children, still reap them */
			kill(st.pid[i], SIGKILL);
		if (waitpid(st.pid[i], &status, 0) != st.pid[i]) {
			perror("waitpid");
			return 1;
		}
		bool victim = kill_one && i == 0;

		if (victim)
			ok &= WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		else
			ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
		/* All it committed, nothing of its open claim. */
		expect += victim ? count / 2 : count;
		ok &= st.next_seq[i] == (victim ? count / 2 : count);
	}
	if ((ret = lull_ring_stats(ring, &stats)) < 0)
		return fail("stats", ret);
	ok &= st.received == expect && !st.bad && st.poison == 1 &&
	      st.deaths == (uint64_t)kill_one &&
	      stats.producer_deaths == (uint64_t)kill_one &&
	      (!kill_one || (st.dead == 0 && st.skipped > 0));
	printf("%u producer processes%s: %" PRIu64 " records in order, %" PRIu64
	       " death record(s), %" PRIu64 " bytes of open claims skipped, %d "
	       "poison; parks %" PRIu64 ", wake-ups %" PRIu64 ": %s\n",
	       st.producers, kill_one ? " (one killed halfway)" : "",
	       st.received, st.deaths, st.skipped, st.poison, stats.parks,
	       stats.wakes, ok ? "ok" : "FAILED");
	if ((ret = lull_ring_destroy(ring)) < 0)
		return fail("destroy", ret);
	return ok ? 0 : 1;
}
