/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - the server's counters, and the two pages that show them:
 * GET /metrics (Prometheus text format 0.0.4) and GET /health (JSON).
 * Counters belong to the loop thread; the ring counters come from
 * lull_ring_stats(), which any thread may read.
 */
#ifndef AUDIO_METRICS_H
#define AUDIO_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include <lull.h>

#include "buf.h"
#include "tts.h"

/* The statuses counted one by one; any other is counted as "other". */
#define METRICS_STATUSES 100, 200, 400, 404, 405, 413, 414, 431, 500, 503, \
	505
#define METRICS_NSTATUS 12

struct metrics {
	uint64_t requests;           /* HTTP requests read, bad ones too */
	uint64_t responses[METRICS_NSTATUS]; /* by status, last: other */
	uint64_t connections;        /* accepted */
	uint64_t connections_refused; /* over --max-connections */
	uint64_t streams;            /* speech requests queued to a worker */
	uint64_t streams_done;       /* ... that ended with all their audio */
	uint64_t synthesis_errors;   /* ... that ended with an error */
	uint64_t jobs_cancelled;     /* ... whose worker stopped early */
	uint64_t chunks;             /* audio chunks sent on to a client */
	uint64_t audio_bytes;        /* their PCM bytes */
	uint64_t chunks_dropped;     /* chunks of requests whose client left */
	uint64_t bytes_sent;         /* to sockets, all responses */
	uint64_t bytes_received;
	uint64_t client_disconnects; /* clients gone with a request running */
	uint64_t slow_disconnects;   /* send buffer over --max-send-buffer */
	uint64_t drain_cut;          /* streams cut by the drain deadline */
	uint64_t idle_closed;        /* connections closed by --idle-timeout */
	uint64_t poll_ticks;         /* --wakeup poll: timer passes */
	uint64_t poll_empty;         /* ... that found the ring empty */
	uint64_t streams_worker_lost; /* streams ended by a worker's death */
};

/* Everything a page shows, gathered by the server. */
struct metrics_view {
	const struct metrics *m;
	const char *wakeup;  /* "park" or "poll" */
	unsigned coalesce_us; /* --coalesce-us */
	const char *backend; /* the loop's backend */
	const char *pace;
	bool draining;
	unsigned connections;
	unsigned active_streams;
	unsigned queued_jobs; /* jobs the workers have not finished */
	unsigned workers;
	const char *isolation; /* "thread" or "process" */
	struct tts_worker_stats worker_stats;
	bool demo_controls;
	double uptime_s;
	struct lull_ring_stats chunk_ring;
	const struct lull_ring_stats *request_rings; /* one per worker */
	struct lull_loop_stats loop;
	struct tts_engine_stats engine;
};

/* Count a response by status; the loop thread. */
void metrics_response(struct metrics *m, int status);

/* Render the pages.  Return 0 or -ENOMEM. */
int metrics_render(struct buf *out, const struct metrics_view *v);
int health_render(struct buf *out, const struct metrics_view *v);

#endif /* AUDIO_METRICS_H */
