/* SPDX-License-Identifier: MIT */
/*
 * peer_pipe.c - the pipe: one pipe (F_SETPIPE_SZ --capacity), made anew for
 * each run.  Each producer write()s one fixed-size message (atomic,
 * <= PIPE_BUF); the consumer read()s up to --batch messages (64 KiB at
 * most) and takes each in place (the read was its copy-out).  Both sides
 * block in the kernel: a full pipe blocks the writer, an empty one the
 * reader.  The run ends when the last producer closes the write end (EOF).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "throughput.h"

#define PIPE_READ_MAX ((size_t)64 << 10)

/* The run's pipe. */
struct pipe_run {
	int rfd, wfd;
};

/* The size F_SETPIPE_SZ gave, for the JSON. */
struct pipe_cfg {
	size_t size;
};

static int pipe_setup(struct config *cfg, const struct options *opt)
{
	(void)opt;
	cfg->state = calloc(1, sizeof(struct pipe_cfg));
	if (!cfg->state)
		return -ENOMEM;
	if (!cfg->payload ||
	    (cfg->producers > 1 && cfg->payload > PIPE_BUF)) {
		fprintf(stderr,
			"throughput: pipe P=%u payload=%zu skipped: "
			"messages must be 1 to PIPE_BUF bytes to stay "
			"whole\n",
			cfg->producers, cfg->payload);
		cfg->skipped = true;
	}
	return 0;
}

static void pipe_teardown(struct config *cfg)
{
	free(cfg->state);
}

static int pipe_run_open(struct run *run)
{
	struct pipe_cfg *pc = run->cfg->state;
	struct pipe_run *pr = malloc(sizeof(*pr));
	size_t capacity = run->opt->capacity;
	int fds[2], size;

	if (!pr) {
		fprintf(stderr, "throughput: out of memory\n");
		return -1;
	}
	pr->rfd = pr->wfd = -1;
	run->state = pr;
	if (pipe2(fds, O_CLOEXEC)) {
		fprintf(stderr, "throughput: pipe2: %s\n", strerror(errno));
		return -1;
	}
	pr->rfd = fds[0];
	pr->wfd = fds[1];
	size = capacity > INT_MAX ? INT_MAX : (int)capacity;
	size = fcntl(pr->wfd, F_SETPIPE_SZ, size);
	if (size < 0)
		size = fcntl(pr->wfd, F_GETPIPE_SZ);
	pc->size = size > 0 ? (size_t)size : 0;
	return 0;
}

static void pipe_run_close(struct run *run)
{
	struct pipe_run *pr = run->state;

	if (!pr)
		return;
	if (pr->rfd >= 0)
		close(pr->rfd);
	if (pr->wfd >= 0)
		close(pr->wfd);
	free(pr);
	run->state = NULL;
}

static int pipe_send(struct producer *p, struct config *cfg,
		     unsigned char *msg, uint64_t value, struct send_state *st)
{
	struct pipe_run *pr = p->run->state;
	size_t payload = cfg->payload;
	ssize_t n;

	memcpy(msg, &value, payload < 8 ? payload : 8);
	for (;;) {
		n = write(pr->wfd, msg, payload);
		st->syscalls++;
		if (likely(n == (ssize_t)payload))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? -errno : -EIO;
	}
}

static void pipe_produce(struct producer *p, unsigned char *msg)
{
	tp_produce(p, msg, pipe_send);
}

static void pipe_end_stream(struct run *run, void *handle)
{
	struct pipe_run *pr = run->state;

	(void)handle;
	close(pr->wfd);
	pr->wfd = -1; /* main reads it after the joins */
}

/*
 * read() whole messages until EOF, which comes when the last producer has
 * closed the write end.  A read may end inside a message only in theory
 * (every write is one atomic message); the rest is kept.
 */
static void pipe_consume(struct run *run, struct consumer_state *cs)
{
	struct pipe_run *pr = run->state;
	size_t payload = run->cfg->payload;
	size_t want = (size_t)run->opt->batch * payload;
	size_t have = 0, off;
	unsigned char *buf;
	ssize_t n;

	if (want > PIPE_READ_MAX)
		want = PIPE_READ_MAX / payload * payload;
	if (want < payload)
		want = payload;
	buf = malloc(want);
	if (!buf) {
		tp_run_fail(run, "pipe: out of memory");
		return;
	}
	for (;;) {
		n = read(pr->rfd, buf + have, want - have);
		cs->syscalls++;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			tp_run_fail(run, "pipe read: %s", strerror(errno));
			break;
		}
		if (n == 0) {
			if (have)
				cs->bad = 1;
			break;
		}
		have += (size_t)n;
		for (off = 0; off + payload <= have; off += payload) {
			uint64_t v = 0;

			memcpy(&v, buf + off, payload < 8 ? payload : 8);
			tp_take_value(cs, v);
		}
		if (off < have)
			memmove(buf, buf + off, have - off);
		have -= off;
		if (tp_aborted(run))
			break;
	}
	free(buf);
}

/* A failed consumer makes blocked writers fail, not hang. */
static void pipe_consumer_exit(struct run *run)
{
	struct pipe_run *pr = run->state;

	close(pr->rfd);
	pr->rfd = -1;
}

static void pipe_json(const struct config *cfg)
{
	const struct pipe_cfg *pc = cfg->state;

	printf("\"pipe_size\":%zu,", pc->size);
}

const struct peer_ring tp_pipe = {
	.name = "pipe",
	.cls = CLASS_GENERAL,
	.kernel = true,
	.setup = pipe_setup,
	.run_open = pipe_run_open,
	.run_close = pipe_run_close,
	.produce = pipe_produce,
	.end_stream = pipe_end_stream,
	.consume = pipe_consume,
	.consumer_exit = pipe_consumer_exit,
	.json = pipe_json,
	.teardown = pipe_teardown,
};
