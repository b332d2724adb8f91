/* SPDX-License-Identifier: MIT */
/*
 * audio-server - a streaming text-to-speech HTTP server on the lull loop.
 *
 * Shows lull's two directions in a real service: one loop thread serves
 * every HTTP connection through io_uring (accept, recv, send as SQEs of
 * lull_loop_sqe(); the epoll fallback with LULL_BACKEND=epoll) and queues
 * speech jobs to worker threads through per-worker SPSC rings, on which
 * the workers park; the workers synthesize with espeak-ng, resample to
 * 24 kHz with libsoxr straight into claimed records of one MPSC chunk
 * ring, and the loop, parked on that ring, is woken to stream each chunk
 * to its client as server-sent events, raw chunked PCM, or a whole WAV.
 * SIGTERM drains the streams, then shuts the rings down in order.
 * With --isolation process the workers are audio-worker processes
 * (worker.c) on shared rings, whose deaths end exactly their streams.
 *
 *   POST /v1/audio/speech   {"model","input","voice","speed",
 *                            "response_format","stream","stream_format"}
 *   GET  /                  a page that speaks what you type
 *   GET  /health, /metrics  JSON status; Prometheus counters
 *
 * Files: main.c (options), server.c (connections, routing, shutdown),
 * http.c (http_parser), speech.c (the API's JSON, SSE and WAV), tts.c
 * (workers, espeak-ng, soxr, rings), worker.c (audio-worker), metrics.c,
 * buf.c, index.html.
 *
 * Build: make build/examples/audio-server (after `make audio-deps`), or
 * by hand against an installed lull, in this folder (page.h is the page
 * as a C array, generated into a folder of its own):
 *     mkdir -p gen && { echo 'static const unsigned char page_html[] = {'; \
 *       od -An -v -tx1 index.html | sed 's/ *\([0-9a-f]\{2\}\)/0x\1,/g'; \
 *       echo '};'; } > gen/page.h
 *     cc -std=c11 -D_GNU_SOURCE -O2 -Igen main.c server.c http.c speech.c \
 *         tts.c metrics.c buf.c -o audio-server $(pkg-config --cflags \
 *         --libs lull espeak-ng soxr libcjson libsodium liburing) \
 *         -lhttp_parser -lm -pthread
 *     cc -std=c11 -D_GNU_SOURCE -O2 worker.c tts.c -o audio-worker \
 *         $(pkg-config --cflags --libs lull espeak-ng soxr) -lm -pthread
 * Run:   audio-server --port 8000, then open http://127.0.0.1:8000/
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "server.h"

static void usage(FILE *f)
{
	fputs(
"usage: audio-server [options]\n"
"  --host ADDR            address to listen on (default 127.0.0.1)\n"
"  --port N               port; 0 picks a free one (default 8000)\n"
"  --workers N            synthesis workers (default 2)\n"
"  --pace fast|realtime   release audio as fast as synthesized (default),\n"
"                         or at its own playback rate\n"
"  --wakeup park|poll     how the loop learns of new audio: park on the\n"
"                         chunk ring (default), or poll it every 1 ms\n"
"  --coalesce-us N        after a pass that handled audio, let the loop\n"
"                         wait up to N us before it parks, taking the\n"
"                         chunks that come meanwhile in one batch and\n"
"                         sparing the workers their wake-up calls; adds\n"
"                         up to N us of latency (default 0: off; with\n"
"                         --wakeup poll it has no effect)\n"
"  --drain-seconds N      on SIGTERM/SIGINT, let streams finish this long\n"
"                         (default 5)\n"
"  --max-connections N    more are answered 503 (default 256)\n"
"  --max-send-buffer N    bytes queued per stream before a slow client is\n"
"                         disconnected; K and M suffixes (default 4M)\n"
"  --send-timeout N       seconds a worker waits for a client half a send\n"
"                         buffer behind before it goes on (default 5; two\n"
"                         chunks' time while another job waits for it)\n"
"  --chunk-ms N           audio per chunk, 10..1000 ms (default 100)\n"
"  --idle-timeout N       close a connection that sent no complete request\n"
"                         in N seconds (default 30)\n"
"  --isolation thread|process\n"
"                         workers as threads of the server (default), or\n"
"                         as processes of their own (audio-worker), which\n"
"                         may crash: their streams end with an error and\n"
"                         a replacement starts\n"
"  --worker-program PATH  the audio-worker to start (default: the one\n"
"                         beside audio-server)\n"
"  --demo-controls        a button on the page (and POST\n"
"                         /v1/demo/kill-worker) that kills -9 the worker\n"
"                         serving a stream; for demonstrations only\n"
"  --fault engine|synth|crash\n"
"                         testing: fail the engine at start, or every\n"
"                         synthesis after its first chunk; crash (with\n"
"                         --isolation process): abort the worker there\n"
"  -v, --verbose          a log line per speech request\n"
"The first line on stdout is \"listening on HOST:PORT\"; logs go to\n"
"stderr.  Exit status 0 after a clean shutdown, 1 on failure, 2 on a\n"
"usage error.\n", f);
}

static unsigned long number(const char *arg, const char *opt,
			    unsigned long lo, unsigned long hi, bool suffix)
{
	unsigned long v, mult = 1;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (suffix && (*end == 'k' || *end == 'K'))
		mult = 1024, end++;
	else if (suffix && (*end == 'm' || *end == 'M'))
		mult = 1024 * 1024, end++;
	if (errno || end == arg || *end || arg[0] == '-' ||
	    v > ULONG_MAX / mult || v * mult < lo || v * mult > hi) {
		fprintf(stderr,
			"audio-server: %s: '%s' is not a number in "
			"[%lu, %lu]\n",
			opt, arg, lo, hi);
		exit(2);
	}
	return v * mult;
}

static int choice(const char *arg, const char *opt, const char *a,
		  const char *b)
{
	if (strcmp(arg, a) == 0)
		return 0;
	if (strcmp(arg, b) == 0)
		return 1;
	fprintf(stderr, "audio-server: %s: '%s': expected %s or %s\n", opt,
		arg, a, b);
	exit(2);
}

/* audio-worker in the server's own directory (a static buffer), or NULL. */
static const char *worker_beside_me(void)
{
	static char path[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);
	char *slash;

	if (len <= 0)
		return NULL;
	path[len] = '\0';
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash - path) + sizeof("/audio-worker") >
			      sizeof(path))
		return NULL;
	/* The ASan server starts the ASan worker. */
	strcpy(slash + 1, strstr(slash + 1, "-asan") ? "audio-worker-asan"
						      : "audio-worker");
	return access(path, X_OK) == 0 ? path : NULL;
}

int main(int argc, char **argv)
{
	enum { O_HOST = 256, O_PORT, O_WORKERS, O_PACE, O_WAKEUP, O_COALESCE,
	       O_DRAIN, O_MAXCONN, O_SENDBUF, O_SENDTIMEOUT, O_CHUNK, O_IDLE,
	       O_FAULT, O_ISOLATION, O_WORKER_PROGRAM, O_DEMO_CONTROLS };
	static const struct option opts[] = {
		{ "host", required_argument, NULL, O_HOST },
		{ "port", required_argument, NULL, O_PORT },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "pace", required_argument, NULL, O_PACE },
		{ "wakeup", required_argument, NULL, O_WAKEUP },
		{ "coalesce-us", required_argument, NULL, O_COALESCE },
		{ "drain-seconds", required_argument, NULL, O_DRAIN },
		{ "max-connections", required_argument, NULL, O_MAXCONN },
		{ "max-send-buffer", required_argument, NULL, O_SENDBUF },
		{ "send-timeout", required_argument, NULL, O_SENDTIMEOUT },
		{ "chunk-ms", required_argument, NULL, O_CHUNK },
		{ "idle-timeout", required_argument, NULL, O_IDLE },
		{ "fault", required_argument, NULL, O_FAULT },
		{ "isolation", required_argument, NULL, O_ISOLATION },
		{ "worker-program", required_argument, NULL,
		  O_WORKER_PROGRAM },
		{ "demo-controls", no_argument, NULL, O_DEMO_CONTROLS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct server_config cfg = {
		.host = "127.0.0.1",
		.port = 8000,
		.workers = 2,
		.pace = TTS_PACE_FAST,
		.drain_seconds = 5,
		.max_connections = 256,
		.max_send_buffer = 4u << 20,
		.send_timeout_ms = 5000,
		.chunk_ms = 100,
		.idle_timeout_s = 30,
	};
	struct server *server;
	int ch, ret;

	while ((ch = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (ch) {
		case O_HOST: cfg.host = optarg; break;
		case O_PORT:
			cfg.port = (unsigned)number(optarg, "--port", 0, 65535,
						    false);
			break;
		case O_WORKERS:
			cfg.workers = (unsigned)number(optarg, "--workers", 1,
						       64, false);
			break;
		case O_PACE:
			cfg.pace = choice(optarg, "--pace", "fast", "realtime")
					   ? TTS_PACE_REALTIME
					   : TTS_PACE_FAST;
			break;
		case O_WAKEUP:
			cfg.wakeup_poll = choice(optarg, "--wakeup", "park",
						 "poll");
			break;
		case O_COALESCE:
			cfg.coalesce_us = (unsigned)number(
				optarg, "--coalesce-us", 0, 1000000, false);
			break;
		case O_DRAIN:
			cfg.drain_seconds = (unsigned)number(
				optarg, "--drain-seconds", 0, 3600, false);
			break;
		case O_MAXCONN:
			cfg.max_connections = (unsigned)number(
				optarg, "--max-connections", 1, 100000, false);
			break;
		case O_SENDBUF:
			cfg.max_send_buffer = number(optarg,
						     "--max-send-buffer", 4096,
						     1ul << 30, true);
			break;
		case O_SENDTIMEOUT:
			cfg.send_timeout_ms = 1000 * (unsigned)number(
				optarg, "--send-timeout", 1, 3600, false);
			break;
		case O_CHUNK:
			cfg.chunk_ms = (unsigned)number(optarg, "--chunk-ms",
							10, 1000, false);
			break;
		case O_IDLE:
			cfg.idle_timeout_s = (unsigned)number(
				optarg, "--idle-timeout", 1, 86400, false);
			break;
		case O_FAULT:
			if (strcmp(optarg, "crash") == 0)
				cfg.fault = TTS_FAULT_CRASH;
			else
				cfg.fault = choice(optarg, "--fault", "engine",
						   "synth")
						    ? TTS_FAULT_SYNTH
						    : TTS_FAULT_ENGINE;
			break;
		case O_ISOLATION:
			cfg.isolation = choice(optarg, "--isolation", "thread",
					       "process")
						? TTS_ISOLATION_PROCESS
						: TTS_ISOLATION_THREAD;
			break;
		case O_WORKER_PROGRAM: cfg.worker_program = optarg; break;
		case O_DEMO_CONTROLS: cfg.demo_controls = true; break;
		case 'v': cfg.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* Room for a few chunks as SSE (base64: 4/3, plus the framing). */
	if (cfg.max_send_buffer < 4 * (cfg.chunk_ms * 64 + 256)) {
		fprintf(stderr, "audio-server: --max-send-buffer must hold at "
				"least 4 chunks: %u bytes for --chunk-ms %u\n",
			4 * (cfg.chunk_ms * 64 + 256), cfg.chunk_ms);
		return 2;
	}
	if (cfg.fault == TTS_FAULT_CRASH &&
	    cfg.isolation != TTS_ISOLATION_PROCESS) {
		fputs("audio-server: --fault crash needs --isolation process\n",
		      stderr);
		return 2;
	}
	if (cfg.isolation == TTS_ISOLATION_PROCESS && !cfg.worker_program &&
	    !(cfg.worker_program = worker_beside_me())) {
		fputs("audio-server: cannot find audio-worker beside the "
		      "server; give --worker-program\n",
		      stderr);
		return 2;
	}
	if (sodium_init() < 0) {
		fputs("audio-server: sodium_init failed\n", stderr);
		return 1;
	}
	ret = server_create(&server, &cfg);
	if (ret < 0)
		return 1;
	ret = server_run(server);
	server_destroy(server);
	return ret;
}
