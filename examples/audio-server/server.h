/* SPDX-License-Identifier: MIT */
/*
 * server.h - the HTTP side of the audio server: one lull loop thread that
 * accepts, reads and writes every connection through io_uring (or the
 * loop's epoll fallback), routes requests, queues speech jobs to the
 * worker pool and routes the audio chunks that come back to their
 * connections.
 */
#ifndef AUDIO_SERVER_H
#define AUDIO_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "tts.h"

struct server_config {
	const char *host;         /* address to bind, numeric or a name */
	unsigned port;            /* 0: any free port */
	unsigned workers;
	enum tts_pace pace;
	bool wakeup_poll;         /* poll the chunk ring every 1 ms instead
				     of parking on it */
	unsigned coalesce_us;     /* the loop's coalesce_ns, in us; 0: off */
	unsigned drain_seconds;   /* how long streams may finish on SIGTERM */
	unsigned max_connections;
	size_t max_send_buffer;   /* bytes queued per stream, at most */
	unsigned send_timeout_ms; /* how long a worker waits for a client
				     that is a send window behind */
	unsigned chunk_ms;        /* audio per chunk */
	unsigned idle_timeout_s;  /* close connections without a complete
				     request for this long */
	enum tts_fault fault;
	enum tts_isolation isolation;
	const char *worker_program; /* --isolation process: audio-worker */
	bool demo_controls;       /* POST /v1/demo/kill-worker, on the page */
	bool verbose;             /* a log line per request */
};

struct server;

/*
 * Set everything up: the loop and its signals, the rings, the listening
 * socket, the workers.  Returns 0, or a negative errno after printing why.
 */
int server_create(struct server **serverp, const struct server_config *cfg);

/*
 * Print "listening on HOST:PORT" (the first line on stdout), then serve
 * until SIGTERM/SIGINT and a clean drain, or until the engine dies.
 * Returns the process exit status: 0 after a clean shutdown, 1 otherwise.
 */
int server_run(struct server *server);

void server_destroy(struct server *server);

#endif /* AUDIO_SERVER_H */
