/* SPDX-License-Identifier: MIT */
/*
 * server.c - connections, routing and audio delivery on the lull loop
 * (see server.h).
 *
 * Everything here runs on the loop's thread; nothing blocks.  Per
 * connection at most one recv and one send are in flight, each an SQE
 * from lull_loop_sqe() whose callback gets the connection.  A connection
 * answers one request at a time (the HTTP reader pauses after each), so a
 * pipelined request waits in the input buffer.
 *
 * Output goes to two buffers: `sending`, which the kernel may be reading
 * (never touched while a send is in flight), and `pending`, where new
 * bytes are appended; when `sending` is written out the two swap.  The
 * bytes queued in both are bounded by --max-send-buffer while audio is
 * streamed: past it the client is too slow, and is disconnected.
 *
 * A speech request becomes a stream: its job goes to a worker through the
 * worker's request ring; its audio comes back on the chunk ring as records
 * that carry the job id, which the slot table maps back to the stream and
 * its connection.  When the client leaves first, the stream loses its
 * connection and its job is flagged cancelled; chunks still in flight are
 * dropped, and the stream is freed when its final record arrives.
 *
 * A connection is freed only from the callback of the last SQE that names
 * it (conn->ops counts them), never while the kernel may still use its
 * buffers: closing shuts the socket down and cancels what is in flight
 * (lull_loop_cancel() on the connection, the ctx of all its SQEs), and
 * the completions do the rest.  Every callback may also run with
 * -ECANCELED when the loop stops: lull_loop_run() cancels what is still
 * in flight then and returns only after each callback ran, so a callback
 * that sees -ECANCELED closes its connection and never arms anything.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>
#include <lull.h>

#include "http.h"
#include "metrics.h"
#include "page.h"
#include "server.h"
#include "speech.h"
#include "tts.h"

#define CHUNK_RING_CAPACITY (2u << 20) /* 2 MiB: ~400 chunks of 100 ms */
#define CHUNK_BATCH 64u                /* records per loop pass */
#define IN_BUFFER 16384u   /* unparsed input: a pipelined request */
#define RECV_BUFFER 4096u  /* what one recv may bring */
#define KEEP_BUFFER 65536u  /* larger buffers are freed between requests */
#define POLL_INTERVAL_NS 1000000ull       /* --wakeup poll */
#define FORCE_CLOSE_NS 1000000000ull      /* after the drain deadline */
#define LINGER_NS 2000000000ull           /* read and discard, then close */
#define ACCEPT_RETRY_NS 100000000ull      /* after EMFILE and the like */
#define SWEEP_NS 1000000000ull            /* idle check, with connections */
#define LOOP_ENTRIES 1024u
#define WORKER_EXIT_NS 2000000000ull /* after the rings shut down */

struct stream;

struct conn {
	struct server *srv;
	struct conn *prev, *next;
	int fd;
	uint64_t id;
	unsigned ops;            /* SQEs in flight naming this connection */
	bool recv_armed, send_armed;
	bool closing;            /* shut down; freed when ops reaches 0 */
	bool cancel_again;       /* the cancel found no SQE: ask again */
	bool lingering;          /* answered an error: discard, then close */
	struct lull_loop_timer *linger_timer;
	struct http_reader http;
	bool busy;               /* a request is being answered */
	uint64_t idle_since;     /* when it last became not busy */
	bool response_done;      /* its last byte is queued */
	bool keep_alive;         /* read another request after it */
	bool bad_request;        /* the reader failed: close after answering */
	bool chunked;            /* the streamed body is chunked */
	bool head_only;          /* HEAD: no body */
	struct stream *stream;
	struct buf sending, pending;
	size_t sent;             /* bytes of `sending` written */
	uint64_t out_moved;      /* bytes ever moved from pending to sending */
	uint64_t out_sent;       /* bytes ever written */
	size_t in_len;
	char in[IN_BUFFER];
	/*
	 * The recv in flight writes here, never into `in`: parsing moves
	 * what is left of `in` to its start, which must not happen under
	 * the kernel's feet.
	 */
	char rbuf[RECV_BUFFER];
};

struct stream {
	struct tts_job job; /* shared with the worker; see tts.h */
	struct speech_request req;
	struct conn *conn;  /* NULL once the client is gone */
	uint32_t slot;
	uint64_t samples;
	uint32_t chunks;
	uint64_t t_start, t_first;
	uint64_t out_base;  /* the connection's output before the audio */
	struct buf audio;   /* SPEECH_WHOLE: the audio so far */
};

struct server {
	struct server_config cfg;
	struct lull_loop *loop;
	struct lull_ring *chunks;
	struct tts_pool *pool;
	int listen_fd;
	char address[INET6_ADDRSTRLEN + 8];
	bool accept_armed;       /* the one SQE whose ctx is the server */
	struct conn *conns;
	unsigned nconns;
	uint64_t next_conn_id;
	/* Streams by slot; a job id is (generation << 32 | slot). */
	struct stream **slots;
	uint32_t nslots, nfree, generation;
	uint32_t *free_slots;
	unsigned live_streams;   /* in the slot table */
	unsigned active_streams; /* ... with a client */
	struct lull_loop_timer *poll_timer, *drain_timer, *force_timer;
	struct lull_loop_timer *sweep_timer; /* armed while connections exist */
	bool draining, stopping, chunks_done;
	int exit_status;
	uint64_t started_ns;
	struct metrics m;
	struct lull_ring_stats *request_stats; /* one per worker */
	const char *voices[SPEECH_NVOICES + 1]; /* for the workers' check */
};

static void conn_close(struct conn *c);
static void send_flush(struct conn *c);
static void recv_arm(struct conn *c);
static void conn_input(struct conn *c);
static void stream_progress(struct stream *st);
static void check_drained(struct server *s);
static void begin_drain(struct server *s, const char *why);
static void sweep_arm(struct server *s);

/* --- small helpers -------------------------------------------------------- */

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("audio-server: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Cancel a timer we hold, and forget it. */
static void timer_cancel(struct server *s, struct lull_loop_timer **timer)
{
	int ret;

	if (!*timer)
		return;
	ret = lull_loop_timer_cancel(s->loop, *timer);
	if (ret < 0 && ret != -ENOENT)
		logmsg("lull_loop_timer_cancel: %s", lull_strerror(ret));
	*timer = NULL;
}

/* Close a descriptor; there is nothing to do about a failure but say so. */
static void close_fd(int fd)
{
	if (close(fd) < 0)
		logmsg("close: %s", strerror(errno));
}

static const char *mode_name(enum speech_stream mode)
{
	return mode == SPEECH_SSE ? "sse"
	       : mode == SPEECH_AUDIO ? "audio" : "whole";
}

/* --- streams: the slot table -------------------------------------------- */

static int stream_register(struct server *s, struct stream *st)
{
	uint32_t slot;

	if (!s->nfree)
		return -EAGAIN;
	slot = s->free_slots[--s->nfree];
	if (++s->generation == 0)
		s->generation = 1;
	st->slot = slot;
	st->job.id = (uint64_t)s->generation << 32 | slot;
	/*
	 * Relaxed: the write of the job to its worker's ring publishes
	 * these (its release pairs with the worker's acquire read).
	 */
	st->job.ctl = tts_control(s->pool, slot);
	atomic_store_explicit(&st->job.ctl->cancelled, false,
			      memory_order_relaxed);
	atomic_store_explicit(&st->job.ctl->consumed, 0, memory_order_relaxed);
	s->slots[slot] = st;
	s->live_streams++;
	return 0;
}

static struct stream *stream_find(struct server *s, uint64_t id)
{
	uint32_t slot = (uint32_t)id;
	struct stream *st;

	if (slot >= s->nslots)
		return NULL;
	st = s->slots[slot];
	return st && st->job.id == id ? st : NULL;
}

static void stream_free(struct server *s, struct stream *st)
{
	s->slots[st->slot] = NULL;
	s->free_slots[s->nfree++] = st->slot;
	s->live_streams--;
	speech_request_fini(&st->req);
	buf_free(&st->audio);
	free(st);
}

/* The client is gone, or the server gives up on it: cancel the job. */
static void stream_orphan(struct server *s, struct stream *st)
{
	/* Relaxed: the worker polls it; the flag orders no other data. */
	atomic_store_explicit(&st->job.ctl->cancelled, true,
			      memory_order_relaxed);
	if (st->conn) {
		st->conn->stream = NULL;
		st->conn = NULL;
		s->active_streams--;
	}
}

/* --- connections: SQEs --------------------------------------------------- */

static void conn_free(struct conn *c)
{
	struct server *s = c->srv;

	timer_cancel(s, &c->linger_timer);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nconns--;
	close_fd(c->fd);
	http_reader_fini(&c->http);
	buf_free(&c->sending);
	buf_free(&c->pending);
	free(c);
	check_drained(s);
}

/*
 * Ask the loop to cancel every SQE of @c still in flight (its recv and its
 * send).  The shutdown in conn_close() already ends them on a socket; the
 * cancel makes sure.  Without a free SQE the loop asks for the rest later:
 * so do we, from the next of the connection's callbacks.
 */
static void conn_cancel(struct conn *c)
{
	int ret = lull_loop_cancel(c->srv->loop, c);

	c->cancel_again = ret == -EBUSY;
	if (ret < 0 && ret != -EBUSY)
		logmsg("connection %" PRIu64 ": lull_loop_cancel: %s", c->id,
		       lull_strerror(ret));
}

/* End of every connection callback: free it when it is done with. */
static void conn_release(struct conn *c)
{
	if (!c->closing)
		return;
	if (!c->ops)
		conn_free(c);
	else if (c->cancel_again)
		conn_cancel(c);
}

static void on_conn_nop(struct lull_loop *loop, int res, uint32_t flags,
			void *ctx)
{
	struct conn *c = ctx;

	(void)loop, (void)res, (void)flags;
	c->ops--;
	conn_release(c);
}

/*
 * Close: the socket is shut down at once (the peer sees the end, and
 * in-flight I/O completes), what is in flight is cancelled, and the
 * connection is freed by the last callback.
 */
static void conn_close(struct conn *c)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (c->closing)
		return;
	c->closing = true;
	if (c->stream)
		stream_orphan(c->srv, c->stream);
	if (shutdown(c->fd, SHUT_RDWR) < 0 && errno != ENOTCONN)
		logmsg("shutdown: %s", strerror(errno));
	if (c->ops) {
		conn_cancel(c);
		return;
	}
	/*
	 * With nothing in flight, a NOP's callback frees it on the next
	 * pass: the caller may still be using it.
	 */
	ret = lull_loop_sqe(c->srv->loop, on_conn_nop, c, &sqe);
	if (ret < 0) {
		logmsg("connection %" PRIu64 ": lull_loop_sqe: %s; it leaks "
		       "until exit", c->id, lull_strerror(ret));
		return;
	}
	c->ops++;
}

/* The client went away (EOF, reset): cancel what it asked for. */
static void conn_gone(struct conn *c, const char *why)
{
	struct server *s = c->srv;

	if (c->stream) {
		s->m.client_disconnects++;
		logmsg("connection %" PRIu64 ": client left mid-stream (%s); "
		       "job %" PRIx64 " cancelled after %" PRIu32 " chunks",
		       c->id, why, c->stream->job.id, c->stream->chunks);
	} else if (c->busy && !c->response_done) {
		s->m.client_disconnects++;
	}
	conn_close(c);
}

static void on_linger_timeout(struct lull_loop *loop, void *ctx)
{
	struct conn *c = ctx;

	(void)loop;
	c->linger_timer = NULL;
	conn_close(c);
}

/*
 * After an error answer to a request whose body was not read: stop
 * writing, read and discard for a while, then close.  Closing at once
 * with unread bytes would reset the connection, and the client might
 * never see the answer.
 */
static void conn_linger(struct conn *c)
{
	int ret;

	if (shutdown(c->fd, SHUT_WR) < 0) {
		conn_close(c);
		return;
	}
	c->lingering = true;
	ret = lull_loop_timer(c->srv->loop, LINGER_NS, 0, on_linger_timeout,
			      c, &c->linger_timer);
	if (ret < 0) {
		logmsg("lull_loop_timer: %s", lull_strerror(ret));
		conn_close(c);
		return;
	}
	recv_arm(c);
}

static void on_recv(struct lull_loop *loop, int res, uint32_t flags,
		    void *ctx)
{
	struct conn *c = ctx;
	struct server *s = c->srv;

	(void)loop, (void)flags;
	c->ops--;
	c->recv_armed = false;
	if (c->closing) {
		/* cancelled, or woken by the shutdown: nothing to do */
	} else if (res == -ECANCELED) {
		conn_close(c); /* the loop is stopping: arm nothing */
	} else if (res > 0) {
		s->m.bytes_received += (uint64_t)res;
		if (!c->lingering) {
			/* recv_arm() asked for no more than there is room. */
			memcpy(c->in + c->in_len, c->rbuf, (size_t)res);
			c->in_len += (size_t)res;
			conn_input(c);
		}
		recv_arm(c);
	} else if (res == -EINTR || res == -EAGAIN || res == -ENOBUFS) {
		recv_arm(c);
	} else if (c->lingering || (!c->busy && !c->in_len)) {
		conn_close(c); /* a quiet end between requests */
	} else {
		conn_gone(c, res == 0 ? "connection closed" : strerror(-res));
	}
	conn_release(c);
}

static void recv_arm(struct conn *c)
{
	size_t room = sizeof(c->in) - c->in_len;
	struct io_uring_sqe *sqe;
	int ret;

	if (c->recv_armed || c->closing || !room)
		return;
	ret = lull_loop_sqe(c->srv->loop, on_recv, c, &sqe);
	if (ret < 0) {
		logmsg("connection %" PRIu64 ": lull_loop_sqe: %s", c->id,
		       lull_strerror(ret));
		conn_close(c);
		return;
	}
	io_uring_prep_recv(sqe, c->fd, c->rbuf,
			   room < sizeof(c->rbuf) ? room : sizeof(c->rbuf), 0);
	c->recv_armed = true;
	c->ops++;
}

/* Everything queued is written: finish the response. */
static void response_flushed(struct conn *c)
{
	struct server *s = c->srv;

	if (!c->busy || !c->response_done)
		return;
	if (!c->keep_alive || s->draining) {
		if (c->bad_request)
			conn_linger(c);
		else
			conn_close(c);
		return;
	}
	c->busy = false;
	c->response_done = false;
	c->idle_since = now_ns();
	http_reader_next(&c->http);
	buf_clear(&c->sending, KEEP_BUFFER);
	buf_clear(&c->pending, KEEP_BUFFER);
	conn_input(c); /* a pipelined request may be waiting */
	recv_arm(c);
}

static void on_send(struct lull_loop *loop, int res, uint32_t flags,
		    void *ctx)
{
	struct conn *c = ctx;

	(void)loop, (void)flags;
	c->ops--;
	c->send_armed = false;
	if (c->closing) {
		/* cancelled or failed by the shutdown */
	} else if (res == -ECANCELED) {
		conn_close(c); /* the loop is stopping: arm nothing */
	} else if (res >= 0) {
		c->sent += (size_t)res;
		c->out_sent += (uint64_t)res;
		c->srv->m.bytes_sent += (uint64_t)res;
		if (c->stream && c->stream->job.window)
			stream_progress(c->stream);
		send_flush(c);
	} else if (res == -EINTR || res == -EAGAIN) {
		send_flush(c);
	} else {
		conn_gone(c, strerror(-res));
	}
	conn_release(c);
}

/* Start writing what is queued, if no send is in flight. */
static void send_flush(struct conn *c)
{
	struct io_uring_sqe *sqe;
	struct buf swap;
	int ret;

	if (c->send_armed || c->closing)
		return;
	if (c->sent == c->sending.len) {
		c->sending.len = 0;
		c->sent = 0;
		if (!c->pending.len) {
			response_flushed(c);
			return;
		}
		swap = c->sending;
		c->sending = c->pending;
		c->pending = swap;
		c->out_moved += c->sending.len;
	}
	ret = lull_loop_sqe(c->srv->loop, on_send, c, &sqe);
	if (ret < 0) {
		logmsg("connection %" PRIu64 ": lull_loop_sqe: %s", c->id,
		       lull_strerror(ret));
		conn_close(c);
		return;
	}
	io_uring_prep_send(sqe, c->fd, c->sending.data + c->sent,
			   c->sending.len - c->sent, MSG_NOSIGNAL);
	c->send_armed = true;
	c->ops++;
}

static size_t conn_queued(const struct conn *c)
{
	return c->sending.len - c->sent + c->pending.len;
}

/* Every byte ever queued on the connection. */
static uint64_t conn_appended(const struct conn *c)
{
	return c->out_moved + c->pending.len;
}

/*
 * Tell the worker how much of the stream's PCM reached the socket: the
 * share of the stream's output written so far, in PCM bytes.
 */
static void stream_progress(struct stream *st)
{
	const struct conn *c = st->conn;
	uint64_t queued = conn_appended(c) - st->out_base;
	uint64_t sent = c->out_sent > st->out_base ? c->out_sent - st->out_base
						   : 0;
	uint64_t consumed = 0;

	if (queued)
		consumed = (uint64_t)((double)st->samples * 2 *
				      ((double)sent / (double)queued));
	/* Relaxed: a progress count, ordering nothing else (see flow()). */
	atomic_store_explicit(&st->job.ctl->consumed, consumed,
			      memory_order_relaxed);
}

/* --- responses ------------------------------------------------------------ */

static void respond(struct conn *c, int status, const char *type,
		    const void *body, size_t len, const char *extra)
{
	struct server *s = c->srv;

	metrics_response(&s->m, status);
	if (http_head(&c->pending, status, type, (long long)len, c->keep_alive,
		      extra) ||
	    (!c->head_only && buf_append(&c->pending, body, len))) {
		logmsg("connection %" PRIu64 ": out of memory", c->id);
		conn_close(c);
		return;
	}
	c->response_done = true;
	send_flush(c);
}

static void respond_error(struct conn *c, const struct api_error *err,
			  const char *extra)
{
	struct buf body = { 0 };

	if (api_error_json(&body, err) < 0) {
		conn_close(c);
		return;
	}
	if (c->srv->cfg.verbose || err->status >= 500)
		logmsg("connection %" PRIu64 ": %d %s", c->id, err->status,
		       err->message);
	respond(c, err->status, "application/json", body.data, body.len,
		extra);
	buf_free(&body);
}

static void respond_json_error(struct conn *c, int status, const char *type,
			       const char *extra, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void respond_json_error(struct conn *c, int status, const char *type,
			       const char *extra, const char *fmt, ...)
{
	struct api_error err = { .status = status, .type = type };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err.message, sizeof(err.message), fmt, ap);
	va_end(ap);
	respond_error(c, &err, extra);
}

/* --- the audio a stream receives ------------------------------------------ */

/* Detach a stream from its connection once its response is complete. */
static void stream_finish(struct server *s, struct stream *st)
{
	struct conn *c = st->conn;

	c->stream = NULL;
	st->conn = NULL;
	s->active_streams--;
	c->response_done = true;
	send_flush(c);
}

static void stream_audio(struct server *s, struct stream *st,
			 const int16_t *pcm, uint32_t samples)
{
	struct conn *c = st->conn;
	size_t bytes = (size_t)samples * 2;
	int ret = 0;

	if (!st->chunks)
		st->t_first = now_ns();
	st->chunks++;
	st->samples += samples;
	s->m.chunks++;
	s->m.audio_bytes += bytes;
	switch (st->req.stream) {
	case SPEECH_SSE:
		ret = speech_sse_delta(&c->pending, pcm, bytes, c->chunked);
		break;
	case SPEECH_AUDIO:
		if (c->chunked)
			ret = http_chunk_open(&c->pending, bytes);
		if (!ret)
			ret = buf_append(&c->pending, pcm, bytes);
		if (!ret && c->chunked)
			ret = http_chunk_close(&c->pending);
		break;
	case SPEECH_WHOLE:
		/* Bounded by the input limit: a few MB at most. */
		ret = buf_append(&st->audio, pcm, bytes);
		break;
	}
	if (ret < 0) {
		logmsg("connection %" PRIu64 ": out of memory", c->id);
		conn_close(c);
		return;
	}
	if (st->req.stream == SPEECH_WHOLE)
		return;
	if (conn_queued(c) > s->cfg.max_send_buffer) {
		s->m.slow_disconnects++;
		logmsg("connection %" PRIu64 ": slow client: %zu bytes queued, "
		       "over --max-send-buffer %zu; disconnecting (job %" PRIx64
		       " cancelled after %" PRIu32 " chunks)",
		       c->id, conn_queued(c), s->cfg.max_send_buffer,
		       st->job.id, st->chunks);
		conn_close(c);
		return;
	}
	send_flush(c);
}

/* End @st's response with an error (the job failed or was cut short). */
static void stream_error(struct server *s, struct stream *st,
			 const char *message, const char *type)
{
	struct conn *c = st->conn;
	int ret = 0;

	switch (st->req.stream) {
	case SPEECH_SSE:
		ret = speech_sse_error(&c->pending, message, type, c->chunked);
		if (!ret && c->chunked)
			ret = http_chunk_last(&c->pending);
		break;
	case SPEECH_AUDIO:
		/* Raw audio has no way to say it: send what came, then close
		 * without the last chunk, so the body is seen truncated. */
		logmsg("connection %" PRIu64 ": %s; ending the audio stream "
		       "without its last chunk",
		       c->id, message);
		c->keep_alive = false;
		break;
	case SPEECH_WHOLE:
		stream_orphan(s, st);
		respond_json_error(c, 500, type, NULL, "%s", message);
		return;
	}
	if (ret < 0) {
		conn_close(c);
		return;
	}
	stream_orphan(s, st); /* cancels the job if it still runs */
	c->response_done = true;
	send_flush(c);
}

static void stream_done(struct server *s, struct stream *st)
{
	struct conn *c = st->conn;
	uint8_t wav[SPEECH_WAV_HEADER_BYTES];
	size_t len = st->audio.len;
	bool wave = st->req.format == SPEECH_WAV;
	int ret = 0;

	s->m.streams_done++;
	switch (st->req.stream) {
	case SPEECH_SSE:
		ret = speech_sse_done(&c->pending, st->req.input_chars,
				      st->samples, c->chunked);
		if (!ret && c->chunked)
			ret = http_chunk_last(&c->pending);
		break;
	case SPEECH_AUDIO:
		if (c->chunked)
			ret = http_chunk_last(&c->pending);
		break;
	case SPEECH_WHOLE:
		metrics_response(&s->m, 200);
		speech_wav_header(wav, (uint32_t)len);
		ret = http_head(&c->pending, 200,
				wave ? "audio/wav" : "audio/pcm",
				(long long)(len + (wave ? sizeof(wav) : 0)),
				c->keep_alive, "X-Sample-Rate: 24000\r\n");
		if (!ret && wave)
			ret = buf_append(&c->pending, wav, sizeof(wav));
		if (!ret)
			ret = buf_append(&c->pending, st->audio.data, len);
		buf_free(&st->audio);
		break;
	}
	if (ret < 0) {
		logmsg("connection %" PRIu64 ": out of memory", c->id);
		conn_close(c);
		return;
	}
	if (s->cfg.verbose)
		logmsg("connection %" PRIu64 ": job %" PRIx64 " done: %s, "
		       "%zu chars, %" PRIu64 " samples in %" PRIu32 " chunks, "
		       "first chunk %.1f ms, last %.1f ms",
		       c->id, st->job.id, mode_name(st->req.stream),
		       st->req.input_chars, st->samples, st->chunks,
		       st->chunks ? (double)(st->t_first - st->t_start) / 1e6
				  : 0.0,
		       (double)(now_ns() - st->t_start) / 1e6);
	stream_finish(s, st);
}

/* --- the chunk ring's records --------------------------------------------- */

static void engine_failed(struct server *s, const char *why)
{
	char message[LULL_FATAL_MESSAGE_MAX + 40];

	s->exit_status = 1;
	snprintf(message, sizeof(message), "the speech engine failed: %s",
		 why);
	for (struct conn *c = s->conns; c; c = c->next)
		if (c->stream)
			stream_error(s, c->stream, message, "server_error");
	begin_drain(s, "the speech engine failed");
}

/* The end of a job: its last record. */
static void job_final(struct server *s, const struct lull_record *rec,
		      uint64_t id)
{
	struct stream *st = stream_find(s, id);
	const struct tts_error *e = rec->data;

	if (!st)
		return;
	tts_job_finished(s->pool, &st->job);
	if (rec->type == TTS_ERROR)
		s->m.synthesis_errors++;
	else if (rec->type == TTS_CANCELLED)
		s->m.jobs_cancelled++;
	if (st->conn) {
		if (rec->type == TTS_DONE)
			stream_done(s, st);
		else if (rec->type == TTS_ERROR &&
			 rec->len >= sizeof(struct tts_error))
			stream_error(s, st, e->message, "server_error");
		else
			stream_error(s, st, "synthesis was cancelled",
				     "server_error");
	}
	stream_free(s, st);
}

static int on_chunk_record(const struct lull_record *rec, void *ctx)
{
	struct server *s = ctx;
	const struct tts_chunk *chunk = rec->data;
	const struct lull_fatal *fatal = rec->data;
	struct stream *st;
	uint64_t id;

	switch (rec->type) {
	case TTS_CHUNK:
		if (rec->len < sizeof(*chunk) ||
		    (rec->len - sizeof(*chunk)) / 2 < chunk->samples)
			break;
		st = stream_find(s, chunk->job_id);
		if (st && st->conn)
			stream_audio(s, st, (const int16_t *)(chunk + 1),
				     chunk->samples);
		else
			s->m.chunks_dropped++;
		break;
	case TTS_DONE:
	case TTS_ERROR:
	case TTS_CANCELLED:
		if (rec->len < sizeof(uint64_t))
			break;
		memcpy(&id, rec->data, sizeof(id));
		job_final(s, rec, id);
		break;
	case LULL_TYPE_DEATH:
		/* A worker process died; what it committed came first. */
		if (rec->len >= sizeof(struct lull_death))
			tts_pool_death(s->pool, rec->data);
		break;
	case LULL_TYPE_FATAL:
		logmsg("engine failure reported on the chunk ring: %s (%s)",
		       fatal->message, strerror(-fatal->code));
		engine_failed(s, fatal->message);
		break;
	case LULL_TYPE_POISON:
		s->chunks_done = true;
		timer_cancel(s, &s->poll_timer);
		if (s->stopping) {
			if (s->cfg.wakeup_poll && lull_loop_stop(s->loop) < 0)
				logmsg("lull_loop_stop failed");
		} else if (!s->exit_status) {
			/* Every worker is gone without a word. */
			engine_failed(s, "all workers exited");
		}
		break;
	default:
		break;
	}
	return LULL_READ_CONTINUE;
}

static void on_poll_tick(struct lull_loop *loop, void *ctx)
{
	struct server *s = ctx;
	unsigned total = 0;
	int n;

	(void)loop;
	s->m.poll_ticks++;
	/* No loop watches a polled shared ring's producers: look. */
	if (s->cfg.isolation == TTS_ISOLATION_PROCESS &&
	    (n = lull_ring_watch(s->chunks)) < 0)
		logmsg("lull_ring_watch: %s", lull_strerror(n));
	/* The old way: look every millisecond whether audio arrived. */
	while ((n = lull_ring_read(s->chunks, on_chunk_record, s,
				   CHUNK_BATCH)) > 0) {
		total += (unsigned)n;
		if (total >= 16 * CHUNK_BATCH || s->chunks_done)
			break;
	}
	if (!total)
		s->m.poll_empty++;
	if (n < 0 && n != -EAGAIN && n != -EPIPE)
		logmsg("lull_ring_read: %s", lull_strerror(n));
}

/*
 * A worker process is gone, and every record it committed was read: end
 * the streams it had, queued or running, with an error.
 */
static void on_worker_lost(void *ctx, unsigned worker, const char *why)
{
	struct server *s = ctx;
	unsigned ended = 0;

	for (uint32_t i = 0; i < s->nslots; i++) {
		struct stream *st = s->slots[i];

		if (!st || st->job.worker != worker)
			continue;
		ended++;
		s->m.streams_worker_lost++;
		if (st->conn)
			stream_error(s, st, why, "server_error");
		stream_free(s, st);
	}
	logmsg("worker %u: %s; %u stream(s) ended%s", worker, why, ended,
	       s->stopping ? "" : "; restarting it");
}

/* --- requests ------------------------------------------------------------- */

static void handle_speech(struct conn *c)
{
	struct server *s = c->srv;
	struct http_request *hr = &c->http.req;
	struct api_error err;
	struct tts_worker_stats ws;
	char extra[160];
	struct stream *st;
	int ret;

	if (s->draining) {
		respond_json_error(c, 503, "server_error", "Retry-After: 1\r\n",
				   "The server is shutting down.");
		return;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		respond_json_error(c, 500, "server_error", NULL,
				   "Out of memory.");
		return;
	}
	if (speech_request_parse(hr->body.data, hr->body.len, &st->req,
				 &err) < 0) {
		free(st);
		respond_error(c, &err, NULL);
		return;
	}
	if (stream_register(s, st) < 0) {
		speech_request_fini(&st->req);
		free(st);
		respond_json_error(c, 503, "server_error", "Retry-After: 1\r\n",
				   "Too many speech requests in progress.");
		return;
	}
	st->t_start = now_ns();
	st->job.text = st->req.input;
	st->job.text_bytes = st->req.input_bytes;
	st->job.voice = st->req.voice->espeak;
	st->job.rate = tts_rate_for_speed(st->req.speed);
	st->job.cost = (unsigned)st->req.input_chars;
	/* Let the worker run ahead of the client by about half the send
	 * buffer (base64 makes SSE a third larger than the PCM). */
	if (st->req.stream == SPEECH_SSE)
		st->job.window = s->cfg.max_send_buffer * 3 / 8;
	else if (st->req.stream == SPEECH_AUDIO)
		st->job.window = s->cfg.max_send_buffer / 2;
	ret = tts_submit(s->pool, &st->job);
	if (ret < 0) {
		stream_free(s, st);
		respond_json_error(c, 503, "server_error", "Retry-After: 1\r\n",
				   ret == -EAGAIN ? "The synthesis queue is "
						    "full, or no worker is up."
						  : "The synthesis queue "
						    "refused it (%s).",
				   lull_strerror(ret));
		return;
	}
	s->m.streams++;
	st->conn = c;
	c->stream = st;
	s->active_streams++;
	if (st->req.stream == SPEECH_WHOLE)
		return; /* the head goes out with the audio */
	/* Streams answer at once; HTTP/1.0 gets a body ended by close. */
	c->chunked = hr->http_major > 1 ||
		     (hr->http_major == 1 && hr->http_minor >= 1);
	if (!c->chunked)
		c->keep_alive = false;
	metrics_response(&s->m, 200);
	/* Which worker serves it: the page shows it, tests kill it. */
	tts_worker_stats(s->pool, &ws);
	snprintf(extra, sizeof(extra),
		 "Cache-Control: no-cache\r\n%s"
		 "X-Worker: %u\r\nX-Worker-Pid: %d\r\n",
		 st->req.stream == SPEECH_SSE ? "X-Accel-Buffering: no\r\n"
					      : "X-Sample-Rate: 24000\r\n",
		 st->job.worker, (int)ws.pids[st->job.worker]);
	ret = http_head(&c->pending, 200,
			st->req.stream == SPEECH_SSE ? "text/event-stream"
						     : "audio/pcm",
			c->chunked ? HTTP_BODY_CHUNKED : HTTP_BODY_TO_CLOSE,
			c->keep_alive, extra);
	if (ret < 0) {
		conn_close(c);
		return;
	}
	st->out_base = conn_appended(c);
	send_flush(c);
}

static void metrics_view(struct server *s, struct metrics_view *v)
{
	memset(v, 0, sizeof(*v));
	v->m = &s->m;
	v->wakeup = s->cfg.wakeup_poll ? "poll" : "park";
	v->coalesce_us = s->cfg.coalesce_us;
	v->backend = lull_backend_name(lull_loop_backend(s->loop));
	v->pace = s->cfg.pace == TTS_PACE_REALTIME ? "realtime" : "fast";
	v->draining = s->draining;
	v->connections = s->nconns;
	v->active_streams = s->active_streams;
	v->queued_jobs = s->live_streams;
	v->workers = tts_pool_workers(s->pool);
	v->isolation = s->cfg.isolation == TTS_ISOLATION_PROCESS ? "process"
								 : "thread";
	tts_worker_stats(s->pool, &v->worker_stats);
	v->demo_controls = s->cfg.demo_controls;
	v->uptime_s = (double)(now_ns() - s->started_ns) / 1e9;
	/* These fail only for NULL arguments; then the counters read 0. */
	if (lull_ring_stats(s->chunks, &v->chunk_ring) < 0)
		logmsg("lull_ring_stats failed");
	for (unsigned i = 0; i < v->workers; i++)
		if (tts_pool_ring_stats(s->pool, i, &s->request_stats[i]) < 0)
			logmsg("lull_ring_stats failed");
	v->request_rings = s->request_stats;
	if (lull_loop_stats(s->loop, &v->loop) < 0)
		logmsg("lull_loop_stats failed");
	tts_engine_stats(&v->engine);
}

static void handle_page(struct conn *c, bool metrics)
{
	struct metrics_view v;
	struct buf body = { 0 };
	int ret;

	metrics_view(c->srv, &v);
	ret = metrics ? metrics_render(&body, &v) : health_render(&body, &v);
	if (ret < 0)
		respond_json_error(c, 500, "server_error", NULL,
				   "Out of memory.");
	else if (metrics)
		respond(c, 200, "text/plain; version=0.0.4; charset=utf-8",
			body.data, body.len, "Cache-Control: no-cache\r\n");
	else
		respond(c, 200, "application/json", body.data, body.len,
			"Cache-Control: no-cache\r\n");
	buf_free(&body);
}

/*
 * POST /v1/demo/kill-worker, body: a worker's index (--demo-controls,
 * --isolation process): kill -9 that worker, as a crash would.
 */
static void handle_kill_worker(struct conn *c)
{
	struct server *s = c->srv;
	const struct http_request *hr = &c->http.req;
	struct tts_worker_stats ws;
	char num[16], body[96];
	unsigned long w;
	char *end;
	int len;

	if (s->cfg.isolation != TTS_ISOLATION_PROCESS) {
		respond_json_error(c, 409, "invalid_request_error", NULL,
				   "Workers are threads here; start the "
				   "server with --isolation process.");
		return;
	}
	len = (int)(hr->body.len < sizeof(num) ? hr->body.len : 0);
	memcpy(num, hr->body.data, (size_t)len);
	num[len] = '\0';
	w = strtoul(num, &end, 10);
	if (!len || *end || w >= s->cfg.workers) {
		respond_json_error(c, 400, "invalid_request_error", NULL,
				   "The body must be a worker's index, 0 to "
				   "%u.",
				   s->cfg.workers - 1);
		return;
	}
	tts_worker_stats(s->pool, &ws);
	if (!ws.pids[w] || kill(ws.pids[w], SIGKILL) < 0) {
		respond_json_error(c, 409, "invalid_request_error", NULL,
				   "Worker %lu is not up.", w);
		return;
	}
	logmsg("worker %lu (pid %d): killed from the page (--demo-controls)",
	       w, (int)ws.pids[w]);
	len = snprintf(body, sizeof(body), "{\"worker\":%lu,\"killed\":%d}",
		       w, (int)ws.pids[w]);
	respond(c, 200, "application/json", body, (size_t)len, NULL);
}

/* A route that takes POST only. */
static void post_only(struct conn *c, void (*handle)(struct conn *c))
{
	const struct http_request *hr = &c->http.req;

	if (hr->method == HTTP_POST)
		handle(c);
	else
		respond_json_error(c, 405, "invalid_request_error",
				   "Allow: POST\r\n",
				   "Method %s is not allowed on %s; use POST.",
				   http_method_str(hr->method), hr->path);
}

static void handle_request(struct conn *c)
{
	const struct http_request *hr = &c->http.req;
	bool get = hr->method == HTTP_GET || hr->method == HTTP_HEAD;
	const char *path = hr->path;

	c->keep_alive = hr->keep_alive && !c->srv->draining;
	c->head_only = hr->method == HTTP_HEAD;
	c->chunked = false;
	if (strcmp(path, "/v1/audio/speech") == 0) {
		post_only(c, handle_speech);
		return;
	}
	if (c->srv->cfg.demo_controls &&
	    strcmp(path, "/v1/demo/kill-worker") == 0) {
		post_only(c, handle_kill_worker);
		return;
	}
	if (strcmp(path, "/") == 0 || strcmp(path, "/health") == 0 ||
	    strcmp(path, "/metrics") == 0) {
		if (!get)
			respond_json_error(c, 405, "invalid_request_error",
					   "Allow: GET, HEAD\r\n",
					   "Method %s is not allowed on %s; "
					   "use GET.",
					   http_method_str(hr->method), path);
		else if (path[1] == '\0')
			respond(c, 200, "text/html; charset=utf-8", page_html,
				sizeof(page_html),
				"Cache-Control: no-cache\r\n");
		else
			handle_page(c, path[1] == 'm');
		return;
	}
	respond_json_error(c, 404, "invalid_request_error", NULL,
			   "Invalid URL (%s %.200s).",
			   http_method_str(hr->method), path);
}

/* Parse what arrived and answer the next complete request. */
static void conn_input(struct conn *c)
{
	enum http_feed r;
	size_t used;

	while (!c->busy && !c->closing && c->in_len) {
		r = http_reader_feed(&c->http, c->in, c->in_len, &used);
		memmove(c->in, c->in + used, c->in_len - used);
		c->in_len -= used;
		if (r == HTTP_FEED_MORE) {
			if (c->http.send_continue && !c->srv->draining) {
				c->http.send_continue = false;
				metrics_response(&c->srv->m, 100);
				if (buf_puts(&c->pending,
					     "HTTP/1.1 100 Continue\r\n\r\n")) {
					conn_close(c);
					return;
				}
				send_flush(c);
			}
			return;
		}
		c->busy = true;
		c->response_done = false;
		c->srv->m.requests++;
		if (r == HTTP_FEED_ERROR) {
			c->bad_request = true;
			c->keep_alive = false;
			c->head_only = false;
			respond_json_error(c, c->http.error,
					   "invalid_request_error", NULL,
					   "%s.", c->http.error_text);
			return;
		}
		handle_request(c);
	}
}

/* --- accepting ------------------------------------------------------------ */

/*
 * Close connections that sent no complete request for --idle-timeout:
 * idle keep-alive connections, and clients that send a request too slowly
 * (or never finish it).  The timer runs only while connections exist, so
 * an idle server still makes no wake-ups.
 */
static void on_sweep(struct lull_loop *loop, void *ctx)
{
	struct server *s = ctx;
	uint64_t limit = (uint64_t)s->cfg.idle_timeout_s * 1000000000u;
	uint64_t now = now_ns();

	(void)loop;
	s->sweep_timer = NULL;
	for (struct conn *c = s->conns; c; c = c->next)
		if (!c->busy && !c->closing && now - c->idle_since > limit) {
			if (s->cfg.verbose || c->in_len || c->http.parser.nread)
				logmsg("connection %" PRIu64 ": no complete "
				       "request in %u s; closing",
				       c->id, s->cfg.idle_timeout_s);
			s->m.idle_closed++;
			conn_close(c);
		}
	sweep_arm(s);
}

static void sweep_arm(struct server *s)
{
	int ret;

	if (s->sweep_timer || !s->nconns || s->stopping)
		return;
	ret = lull_loop_timer(s->loop, SWEEP_NS, 0, on_sweep, s,
			      &s->sweep_timer);
	if (ret < 0)
		logmsg("lull_loop_timer: %s", lull_strerror(ret));
}

static void accept_arm(struct server *s);

static void on_accept_retry(struct lull_loop *loop, void *ctx)
{
	(void)loop;
	accept_arm(ctx);
}

static void refuse(struct server *s, int fd)
{
#define BUSY_BODY                                                          \
	"{\"error\":{\"message\":\"Too many connections.\","                   \
	"\"type\":\"server_error\",\"param\":null,\"code\":null}}"
	char busy[512];
	int n;

	s->m.connections_refused++;
	metrics_response(&s->m, 503);
	n = snprintf(busy, sizeof(busy),
		     "HTTP/1.1 503 Service Unavailable\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n"
		     "Retry-After: 1\r\n\r\n%s",
		     sizeof(BUSY_BODY) - 1, BUSY_BODY);
#undef BUSY_BODY
	/* A fresh socket has room for this; if not, it does not matter. */
	if (send(fd, busy, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		logmsg("refusing a connection: send: %s", strerror(errno));
	close_fd(fd);
}

static void conn_start(struct server *s, int fd)
{
	struct conn *c;
	int one = 1;

	if (s->draining) {
		close_fd(fd);
		return;
	}
	if (s->nconns >= s->cfg.max_connections) {
		refuse(s, fd);
		return;
	}
	/* Small writes of audio must leave at once, not wait for an ACK. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 &&
	    errno != EOPNOTSUPP)
		logmsg("TCP_NODELAY: %s", strerror(errno));
	c = calloc(1, sizeof(*c));
	if (!c) {
		logmsg("out of memory for a connection");
		close_fd(fd);
		return;
	}
	c->srv = s;
	c->fd = fd;
	c->id = ++s->next_conn_id;
	c->idle_since = now_ns();
	http_reader_init(&c->http);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	s->m.connections++;
	sweep_arm(s);
	recv_arm(c);
}

static void on_accept(struct lull_loop *loop, int res, uint32_t flags,
		      void *ctx)
{
	struct server *s = ctx;
	int ret;

	(void)flags;
	s->accept_armed = false;
	if (res >= 0) {
		conn_start(s, res);
	} else if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS ||
		   res == -ENOMEM) {
		logmsg("accept: %s; retrying in 100 ms", strerror(-res));
		ret = lull_loop_timer(loop, ACCEPT_RETRY_NS, 0, on_accept_retry,
				      s, NULL);
		if (ret < 0)
			logmsg("lull_loop_timer: %s", lull_strerror(ret));
		return;
	} else if (res != -ECANCELED && res != -EINTR &&
		   res != -ECONNABORTED) {
		logmsg("accept: %s", strerror(-res));
	}
	/*
	 * Cancelled: by the drain, or by the loop's stop, which would cancel
	 * a new accept again and again; either way accepting is over.
	 */
	if (s->draining || s->stopping || res == -ECANCELED) {
		if (s->listen_fd >= 0)
			close_fd(s->listen_fd);
		s->listen_fd = -1;
		check_drained(s);
		return;
	}
	accept_arm(s);
}

static void accept_arm(struct server *s)
{
	struct io_uring_sqe *sqe;
	int ret;

	if (s->accept_armed || s->draining || s->stopping ||
	    s->listen_fd < 0)
		return;
	ret = lull_loop_sqe(s->loop, on_accept, s, &sqe);
	if (ret < 0) {
		logmsg("accept: lull_loop_sqe: %s; retrying in 100 ms",
		       lull_strerror(ret));
		ret = lull_loop_timer(s->loop, ACCEPT_RETRY_NS, 0,
				      on_accept_retry, s, NULL);
		if (ret < 0)
			logmsg("lull_loop_timer: %s", lull_strerror(ret));
		return;
	}
	io_uring_prep_accept(sqe, s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	s->accept_armed = true;
}

/* --- shutting down -------------------------------------------------------- */

/*
 * Every connection is gone: shut the rings down.  The request rings first
 * (each worker finishes, reads the poison, exits), then the chunk ring:
 * attached to the loop, lull_loop_stop() shuts it down and returns from
 * lull_loop_run() once its poison is read; polled, the poll timer reads
 * the poison and stops the loop.
 */
static void stop_all(struct server *s)
{
	int ret;

	if (s->stopping)
		return;
	s->stopping = true;
	timer_cancel(s, &s->drain_timer);
	timer_cancel(s, &s->force_timer);
	timer_cancel(s, &s->sweep_timer);
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i])
			stream_orphan(s, s->slots[i]);
	tts_pool_shutdown(s->pool);
	if (!s->cfg.wakeup_poll || s->chunks_done) {
		ret = lull_loop_stop(s->loop);
	} else {
		ret = lull_ring_shutdown(s->chunks, LULL_SHUTDOWN_GRACEFUL);
	}
	if (ret < 0)
		logmsg("stopping: %s", lull_strerror(ret));
}

static void check_drained(struct server *s)
{
	if (s->draining && !s->stopping && !s->nconns && !s->accept_armed)
		stop_all(s);
}

static void on_force_close(struct lull_loop *loop, void *ctx)
{
	struct server *s = ctx;

	(void)loop;
	s->force_timer = NULL;
	if (s->nconns)
		logmsg("closing %u connection(s) that did not finish",
		       s->nconns);
	for (struct conn *c = s->conns; c; c = c->next)
		conn_close(c);
	/* Freed connections call check_drained(); do not wait on leaks. */
	stop_all(s);
}

static void on_drain_deadline(struct lull_loop *loop, void *ctx)
{
	struct server *s = ctx;
	unsigned cut = 0;
	int ret;

	s->drain_timer = NULL;
	for (struct conn *c = s->conns; c; c = c->next)
		if (c->stream) {
			cut++;
			stream_error(s, c->stream,
				     "the server is shutting down",
				     "server_error");
		} else if (!c->busy) {
			conn_close(c);
		}
	s->m.drain_cut += cut;
	if (cut)
		logmsg("drain deadline: cut %u stream(s) short", cut);
	ret = lull_loop_timer(loop, FORCE_CLOSE_NS, 0, on_force_close, s,
			      &s->force_timer);
	if (ret < 0) {
		logmsg("lull_loop_timer: %s", lull_strerror(ret));
		on_force_close(loop, s);
	}
}

/* Stop accepting; let running requests finish, close idle connections. */
static void begin_drain(struct server *s, const char *why)
{
	int ret;

	if (s->draining)
		return;
	s->draining = true;
	logmsg("%s: draining %u stream(s), %u connection(s), for up to %u s",
	       why, s->active_streams, s->nconns, s->cfg.drain_seconds);
	if (s->accept_armed) {
		/*
		 * The accept is the only SQE whose ctx is the server; its
		 * callback closes the listening socket.  Without an SQE for
		 * the cancel now, the loop's stop cancels it at the end.
		 */
		ret = lull_loop_cancel(s->loop, s);
		if (ret < 0)
			logmsg("cancelling accept: %s", lull_strerror(ret));
	} else if (s->listen_fd >= 0) {
		close_fd(s->listen_fd);
		s->listen_fd = -1;
	}
	for (struct conn *c = s->conns; c; c = c->next) {
		c->keep_alive = false;
		if (!c->busy)
			conn_close(c);
	}
	ret = lull_loop_timer(s->loop, (uint64_t)s->cfg.drain_seconds *
					       1000000000u,
			      0, on_drain_deadline, s, &s->drain_timer);
	if (ret < 0) {
		logmsg("lull_loop_timer: %s", lull_strerror(ret));
		on_drain_deadline(s->loop, s);
	}
	check_drained(s);
}

static void on_signal(struct lull_loop *loop, int signo, void *ctx)
{
	struct server *s = ctx;

	(void)loop;
	if (signo == SIGCHLD) {
		tts_pool_reap(s->pool);
		return;
	}
	if (!s->draining) {
		begin_drain(s, strsignal(signo));
	} else if (s->drain_timer) {
		logmsg("%s again: cutting the drain short", strsignal(signo));
		timer_cancel(s, &s->drain_timer);
		on_drain_deadline(s->loop, s);
	}
}

/* --- setup and teardown --------------------------------------------------- */

static int listen_on(struct server *s)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct addrinfo *ai;
	char port[8], host[INET6_ADDRSTRLEN];
	int fd, one = 1, ret;

	snprintf(port, sizeof(port), "%u", s->cfg.port);
	ret = getaddrinfo(s->cfg.host, port, &hints, &ai);
	if (ret) {
		logmsg("--host %s: %s", s->cfg.host, gai_strerror(ret));
		return -EINVAL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 511) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		ret = -errno;
		logmsg("listening on %s port %s: %s", s->cfg.host, port,
		       strerror(errno));
		if (fd >= 0)
			close_fd(fd);
		freeaddrinfo(ai);
		return ret;
	}
	freeaddrinfo(ai);
	ret = getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host),
			  port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	if (ret) {
		logmsg("getnameinfo: %s", gai_strerror(ret));
		close_fd(fd);
		return -EINVAL;
	}
	snprintf(s->address, sizeof(s->address),
		 ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
	s->listen_fd = fd;
	return 0;
}

int server_create(struct server **serverp, const struct server_config *cfg)
{
	static const int signals[] = { SIGINT, SIGTERM, SIGCHLD };
	struct lull_loop_config lcfg = {
		.entries = LOOP_ENTRIES,
		.coalesce_ns = (uint64_t)cfg->coalesce_us * 1000u,
	};
	struct tts_config tcfg = { 0 };
	struct server *s;
	unsigned nv = 0;
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->listen_fd = -1;
	s->started_ns = now_ns();
	/* Sends use MSG_NOSIGNAL; this covers anything else. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
		ret = -errno;
		logmsg("signal: %s", strerror(errno));
		goto fail;
	}
	ret = lull_loop_create(&s->loop, &lcfg);
	if (ret < 0) {
		logmsg("lull_loop_create: %s", lull_strerror(ret));
		goto fail;
	}
	/* Before any thread starts: workers inherit the blocked mask. */
	ret = lull_loop_signals(s->loop, signals, 3, on_signal, s);
	if (ret < 0) {
		logmsg("lull_loop_signals: %s", lull_strerror(ret));
		goto fail;
	}
	/* Worker processes write it from their own mappings of its memfd. */
	if (cfg->isolation == TTS_ISOLATION_PROCESS)
		ret = lull_ring_create_shared(&s->chunks, CHUNK_RING_CAPACITY,
					      LULL_RING_MPSC, 0);
	else
		ret = lull_ring_create(&s->chunks, CHUNK_RING_CAPACITY,
				       LULL_RING_MPSC);
	if (ret < 0) {
		logmsg("lull_ring_create: %s", lull_strerror(ret));
		goto fail;
	}
	if (cfg->wakeup_poll)
		ret = lull_loop_timer(s->loop, POLL_INTERVAL_NS,
				      POLL_INTERVAL_NS, on_poll_tick, s,
				      &s->poll_timer);
	else
		ret = lull_loop_attach(s->loop, s->chunks, on_chunk_record, s,
				       CHUNK_BATCH);
	if (ret < 0) {
		logmsg("%s: %s",
		       cfg->wakeup_poll ? "lull_loop_timer"
					: "lull_loop_attach",
		       lull_strerror(ret));
		goto fail;
	}
	/* Every stream's job may outlive its connection for a while. */
	s->nslots = cfg->max_connections * 2 + 16;
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	s->free_slots = calloc(s->nslots, sizeof(*s->free_slots));
	s->request_stats = calloc(cfg->workers, sizeof(*s->request_stats));
	if (!s->slots || !s->free_slots || !s->request_stats) {
		ret = -ENOMEM;
		logmsg("out of memory");
		goto fail;
	}
	for (uint32_t i = 0; i < s->nslots; i++)
		s->free_slots[s->nfree++] = s->nslots - 1 - i;
	ret = listen_on(s);
	if (ret < 0)
		goto fail;
	for (const struct speech_voice *v = speech_voices; v->name; v++)
		s->voices[nv++] = v->espeak;
	s->voices[nv] = NULL;
	tcfg.workers = cfg->workers;
	tcfg.pace = cfg->pace;
	tcfg.chunk_samples = SPEECH_RATE * cfg->chunk_ms / 1000;
	tcfg.fault = cfg->fault;
	tcfg.patience_ns = (uint64_t)cfg->send_timeout_ms * 1000000u;
	tcfg.voices = s->voices;
	tcfg.max_jobs = s->nslots;
	tcfg.isolation = cfg->isolation;
	tcfg.worker_program = cfg->worker_program;
	tcfg.worker_lost = on_worker_lost;
	tcfg.ctx = s;
	ret = tts_pool_start(&s->pool, &tcfg, s->chunks, s->loop);
	if (ret < 0) {
		logmsg("starting the workers: %s", lull_strerror(ret));
		goto fail;
	}
	*serverp = s;
	return 0;
fail:
	server_destroy(s);
	return ret;
}

int server_run(struct server *s)
{
	int ret;

	logmsg("lull %s, loop backend %s, wake-up %s, coalesce %u us, "
	       "%u worker(s), pace %s",
	       lull_version(), lull_backend_name(lull_loop_backend(s->loop)),
	       s->cfg.wakeup_poll ? "poll (1 ms timer)" : "park",
	       s->cfg.coalesce_us, s->cfg.workers,
	       s->cfg.pace == TTS_PACE_REALTIME ? "realtime" : "fast");
	if (printf("listening on %s\n", s->address) < 0 || fflush(stdout)) {
		logmsg("stdout: %s", strerror(errno));
		return 1;
	}
	accept_arm(s);
	ret = lull_loop_run(s->loop);
	if (ret < 0) {
		logmsg("lull_loop_run: %s", lull_strerror(ret));
		s->exit_status = 1;
	} else if (s->nconns) {
		/*
		 * A clean stop ran every callback, and the last one of each
		 * connection freed it: this is a bug (server_destroy() frees
		 * them anyway).
		 */
		logmsg("%u connection(s) still open after the loop stopped",
		       s->nconns);
	}
	/* Normally done already; after a loop failure this frees workers
	 * waiting on a full chunk ring. */
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i])
			stream_orphan(s, s->slots[i]);
	tts_pool_shutdown(s->pool);
	ret = lull_ring_shutdown(s->chunks, LULL_SHUTDOWN_IMMEDIATE);
	if (ret < 0)
		logmsg("lull_ring_shutdown: %s", lull_strerror(ret));
	tts_pool_join(s->pool, now_ns() + WORKER_EXIT_NS);
	logmsg("stopped: %" PRIu64 " streams (%" PRIu64 " complete, %" PRIu64
	       " failed, %" PRIu64 " cut by clients, %" PRIu64
	       " slow clients), %" PRIu64 " chunks",
	       s->m.streams, s->m.streams_done, s->m.synthesis_errors,
	       s->m.client_disconnects, s->m.slow_disconnects, s->m.chunks);
	return s->exit_status;
}

void server_destroy(struct server *s)
{
	struct conn *c;
	int ret;

	if (!s)
		return;
	if (s->pool) {
		tts_pool_shutdown(s->pool);
		if (s->chunks && (ret = lull_ring_shutdown(
					  s->chunks, LULL_SHUTDOWN_IMMEDIATE)) < 0)
			logmsg("lull_ring_shutdown: %s", lull_strerror(ret));
		tts_pool_join(s->pool, now_ns() + WORKER_EXIT_NS);
	}
	/* Stop the kernel from touching connection buffers, then free. */
	for (c = s->conns; c; c = c->next)
		if (shutdown(c->fd, SHUT_RDWR) < 0 && errno != ENOTCONN)
			logmsg("shutdown: %s", strerror(errno));
	if (s->loop && (ret = lull_loop_destroy(s->loop)) < 0)
		logmsg("lull_loop_destroy: %s", lull_strerror(ret));
	while ((c = s->conns)) {
		s->conns = c->next;
		close_fd(c->fd);
		http_reader_fini(&c->http);
		buf_free(&c->sending);
		buf_free(&c->pending);
		free(c);
	}
	for (uint32_t i = 0; s->slots && i < s->nslots; i++)
		if (s->slots[i])
			stream_free(s, s->slots[i]);
	if (s->pool)
		tts_pool_destroy(s->pool);
	if (s->chunks && (ret = lull_ring_destroy(s->chunks)) < 0)
		logmsg("lull_ring_destroy: %s", lull_strerror(ret));
	if (s->listen_fd >= 0)
		close_fd(s->listen_fd);
	free(s->slots);
	free(s->free_slots);
	free(s->request_stats);
	free(s);
}
