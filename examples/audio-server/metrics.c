/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - render the server's counters (see metrics.h).
 */
#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>

#include "metrics.h"

static const int statuses[METRICS_NSTATUS - 1] = { METRICS_STATUSES };

void metrics_response(struct metrics *m, int status)
{
	unsigned i;

	for (i = 0; i < METRICS_NSTATUS - 1; i++)
		if (statuses[i] == status)
			break;
	m->responses[i]++;
}

static int head(struct buf *out, const char *name, const char *type,
		const char *help)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help,
			  name, type);
}

static int counter(struct buf *out, const char *name, const char *help,
		   uint64_t value)
{
	return head(out, name, "counter", help) ||
	       buf_printf(out, "%s %" PRIu64 "\n", name, value);
}

static int seconds(struct buf *out, const char *name, const char *help,
		   uint64_t ns)
{
	return head(out, name, "counter", help) ||
	       buf_printf(out, "%s %.9f\n", name, (double)ns / 1e9);
}

static int gauge(struct buf *out, const char *name, const char *help,
		 double value)
{
	return head(out, name, "gauge", help) ||
	       buf_printf(out, "%s %.15g\n", name, value);
}

/* The uint64_t field of st at offset (an offsetof() of that struct). */
static uint64_t ring_stat(const struct lull_ring_stats *st, size_t offset)
{
	return *(const uint64_t *)((const char *)st + offset);
}

/* One lull_ring_stats field for every ring, as one labelled family. */
static int ring_family(struct buf *out, const struct metrics_view *v,
		       const char *name, const char *help, size_t offset)
{
	uint64_t value;

	if (head(out, name, "counter", help))
		return -ENOMEM;
	value = ring_stat(&v->chunk_ring, offset);
	if (buf_printf(out, "%s{ring=\"chunks\"} %" PRIu64 "\n", name, value))
		return -ENOMEM;
	for (unsigned i = 0; i < v->workers; i++) {
		value = ring_stat(&v->request_rings[i], offset);
		if (buf_printf(out,
			       "%s{ring=\"requests\",worker=\"%u\"} %" PRIu64
			       "\n",
			       name, i, value))
			return -ENOMEM;
	}
	return 0;
}

int metrics_render(struct buf *out, const struct metrics_view *v)
{
	const struct metrics *m = v->m;
	int ret;

	ret = counter(out, "tts_http_requests_total",
		      "HTTP requests read, malformed ones included.",
		      m->requests) ||
	      head(out, "tts_http_responses_total", "counter",
		   "HTTP responses by status code.");
	for (unsigned i = 0; i < METRICS_NSTATUS - 1 && !ret; i++)
		ret = buf_printf(out, "%s{code=\"%d\"} %" PRIu64 "\n",
				 "tts_http_responses_total", statuses[i],
				 m->responses[i]);
	if (!ret)
		ret = buf_printf(out, "%s{code=\"other\"} %" PRIu64 "\n",
				 "tts_http_responses_total",
				 m->responses[METRICS_NSTATUS - 1]);
	ret = ret ||
	      head(out, "tts_info", "gauge",
		   "Configuration: wake-up mode, loop backend, pace, "
		   "isolation.") ||
	      buf_printf(out,
			 "tts_info{wakeup=\"%s\",backend=\"%s\",pace=\"%s\","
			 "isolation=\"%s\"} 1\n",
			 v->wakeup, v->backend, v->pace, v->isolation) ||
	      gauge(out, "tts_coalesce_seconds",
		    "--coalesce-us: the loop's coalescing window (0: off).",
		    v->coalesce_us / 1e6) ||
	      gauge(out, "tts_draining", "1 while shutting down.",
		    v->draining) ||
	      gauge(out, "tts_connections", "Open client connections.",
		    v->connections) ||
	      gauge(out, "tts_active_streams",
		    "Speech requests with a client waiting.",
		    v->active_streams) ||
	      gauge(out, "tts_queued_jobs",
		    "Jobs submitted to workers and not finished.",
		    v->queued_jobs) ||
	      gauge(out, "tts_workers", "Synthesis workers configured.",
		    v->workers) ||
	      gauge(out, "tts_workers_up",
		    "Synthesis workers running (processes: spawned and "
		    "not seen dead).",
		    v->worker_stats.up) ||
	      counter(out, "tts_worker_deaths_total",
		      "--isolation process: workers that died.",
		      v->worker_stats.deaths) ||
	      counter(out, "tts_worker_restarts_total",
		      "--isolation process: replacement workers started.",
		      v->worker_stats.restarts) ||
	      counter(out, "tts_worker_lost_streams_total",
		      "Streams ended with an error by their worker's death.",
		      m->streams_worker_lost) ||
	      gauge(out, "tts_uptime_seconds", "Seconds since start.",
		    v->uptime_s) ||
	      counter(out, "tts_connections_total", "Connections accepted.",
		      m->connections) ||
	      counter(out, "tts_connections_refused_total",
		      "Connections refused over --max-connections.",
		      m->connections_refused) ||
	      counter(out, "tts_streams_total",
		      "Speech requests handed to a worker.", m->streams) ||
	      counter(out, "tts_streams_completed_total",
		      "Speech requests that ended with all their audio.",
		      m->streams_done) ||
	      counter(out, "tts_synthesis_errors_total",
		      "Speech requests that failed in synthesis.",
		      m->synthesis_errors) ||
	      counter(out, "tts_jobs_cancelled_total",
		      "Speech jobs a worker stopped early because the client "
		      "had gone.",
		      m->jobs_cancelled) ||
	      counter(out, "tts_chunks_total",
		      "Audio chunks passed on to clients.", m->chunks) ||
	      counter(out, "tts_audio_bytes_total",
		      "PCM bytes passed on to clients.", m->audio_bytes) ||
	      counter(out, "tts_chunks_dropped_total",
		      "Audio chunks of requests whose client had gone.",
		      m->chunks_dropped) ||
	      counter(out, "tts_bytes_sent_total",
		      "Bytes written to client sockets.", m->bytes_sent) ||
	      counter(out, "tts_bytes_received_total",
		      "Bytes read from client sockets.", m->bytes_received) ||
	      counter(out, "tts_client_disconnects_total",
		      "Clients that left while their request ran.",
		      m->client_disconnects) ||
	      counter(out, "tts_slow_client_disconnects_total",
		      "Clients disconnected because their send buffer "
		      "overflowed.",
		      m->slow_disconnects) ||
	      counter(out, "tts_idle_closed_total",
		      "Connections closed without a complete request in "
		      "--idle-timeout.",
		      m->idle_closed) ||
	      counter(out, "tts_drain_cut_streams_total",
		      "Streams cut short by the shutdown deadline.",
		      m->drain_cut) ||
	      counter(out, "tts_poll_ticks_total",
		      "--wakeup poll: timer passes over the chunk ring.",
		      m->poll_ticks) ||
	      counter(out, "tts_poll_empty_ticks_total",
		      "--wakeup poll: passes that found nothing.",
		      m->poll_empty) ||
	      counter(out, "tts_engine_segments_total",
		      "espeak_Synth() calls (one per text segment).",
		      v->engine.segments) ||
	      seconds(out, "tts_engine_lock_wait_seconds_total",
		      "Time workers waited for the espeak-ng lock.",
		      v->engine.lock_wait_ns) ||
	      seconds(out, "tts_engine_lock_held_seconds_total",
		      "Time a worker held the espeak-ng lock (synthesizing).",
		      v->engine.lock_held_ns) ||
	      counter(out, "tts_chunk_ring_full_total",
		      "Times a worker found the chunk ring full and waited "
		      "for room.",
		      v->engine.ring_full) ||
	      counter(out, "tts_flow_pauses_total",
		      "Times a worker paused for a client a window behind.",
		      v->engine.flow_pauses) ||
	      counter(out, "tts_flow_pauses_expired_total",
		      "Pauses that outlasted --send-timeout (the worker "
		      "went on).",
		      v->engine.flow_expired) ||
	      counter(out, "tts_flow_pauses_yielded_total",
		      "Pauses cut short because another job waited for the "
		      "worker.",
		      v->engine.flow_yielded);
	if (ret)
		return -ENOMEM;
	if (ring_family(out, v, "lull_ring_parks_total",
			"Times the ring's consumer slept.",
			offsetof(struct lull_ring_stats, parks)) ||
	    ring_family(out, v, "lull_ring_park_cancels_total",
			"Parks dropped at the re-check.",
			offsetof(struct lull_ring_stats, park_cancels)) ||
	    ring_family(out, v, "lull_ring_wakes_total",
			"Wake-up system calls made by producers.",
			offsetof(struct lull_ring_stats, wakes)) ||
	    ring_family(out, v, "lull_ring_safety_timeouts_total",
			"Parks ended by the safety net with a record waiting "
			"(lost wake-ups; 0 in a correct run).",
			offsetof(struct lull_ring_stats, safety_timeouts)) ||
	    ring_family(out, v, "lull_ring_idle_timeouts_total",
			"Parks ended by the safety net with nothing to read.",
			offsetof(struct lull_ring_stats, idle_timeouts)) ||
	    ring_family(out, v, "lull_ring_room_wakes_total",
			"Wake-up calls for producers waiting for room "
			"(lull_producer_wait).",
			offsetof(struct lull_ring_stats, room_wakes)))
		return -ENOMEM;
	ret = counter(out, "lull_loop_iterations_total",
		      "Passes through the loop.", v->loop.iterations) ||
	      counter(out, "lull_loop_parks_total",
		      "Times the loop slept in the kernel.", v->loop.parks) ||
	      counter(out, "lull_loop_park_cancels_total",
		      "Loop parks dropped at the re-check.",
		      v->loop.park_cancels) ||
	      counter(out, "lull_loop_safety_timeouts_total",
		      "Loop parks ended by the safety net.",
		      v->loop.safety_timeouts) ||
	      counter(out, "lull_loop_records_total",
		      "Records handed to ring handlers by the loop.",
		      v->loop.records) ||
	      counter(out, "lull_loop_completions_total",
		      "SQE callbacks run by the loop.", v->loop.completions) ||
	      counter(out, "lull_loop_coalesce_waits_total",
		      "Coalescing windows the loop slept (--coalesce-us).",
		      v->loop.coalesce_waits);
	return ret ? -ENOMEM : 0;
}

int health_render(struct buf *out, const struct metrics_view *v)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *pids = NULL;
	char *text;
	int ret;

	if (!root ||
	    !cJSON_AddStringToObject(root, "status",
				     v->draining ? "draining" : "ok") ||
	    !cJSON_AddStringToObject(root, "wakeup", v->wakeup) ||
	    !cJSON_AddNumberToObject(root, "coalesce_us", v->coalesce_us) ||
	    !cJSON_AddStringToObject(root, "backend", v->backend) ||
	    !cJSON_AddStringToObject(root, "pace", v->pace) ||
	    !cJSON_AddNumberToObject(root, "workers", v->workers) ||
	    !cJSON_AddStringToObject(root, "isolation", v->isolation) ||
	    !cJSON_AddBoolToObject(root, "demo_controls", v->demo_controls) ||
	    !cJSON_AddNumberToObject(root, "workers_up",
				     v->worker_stats.up) ||
	    !cJSON_AddNumberToObject(root, "worker_deaths",
				     (double)v->worker_stats.deaths) ||
	    !cJSON_AddNumberToObject(root, "worker_restarts",
				     (double)v->worker_stats.restarts) ||
	    !(pids = cJSON_AddArrayToObject(root, "worker_pids")) ||
	    !cJSON_AddNumberToObject(root, "connections", v->connections) ||
	    !cJSON_AddNumberToObject(root, "active_streams",
				     v->active_streams) ||
	    !cJSON_AddNumberToObject(root, "uptime_seconds", v->uptime_s) ||
	    !cJSON_AddStringToObject(root, "lull_version", lull_version())) {
		cJSON_Delete(root);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < v->workers && i < TTS_WORKERS_MAX; i++) {
		cJSON *pid = cJSON_CreateNumber(v->worker_stats.pids[i]);

		if (!pid || !cJSON_AddItemToArray(pids, pid)) {
			cJSON_Delete(pid);
			cJSON_Delete(root);
			return -ENOMEM;
		}
	}
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	ret = text ? buf_puts(out, text) : -ENOMEM;
	free(text);
	return ret;
}
