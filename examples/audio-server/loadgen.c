/* SPDX-License-Identifier: MIT */
/*
 * loadgen.c - load generator for the streaming text-to-speech example.
 *
 * Sends N streaming POST /v1/audio/speech requests at concurrency C (for
 * each C given, default 1, 8, 16, 32), after a warm-up, and measures per
 * request:
 *   TTFP   request sent (its last byte written) -> first decoded audio delta
 *   E2E    request sent -> the speech.audio.done event
 *   audio  decoded PCM bytes / 48000 (24 kHz, s16le, mono)
 *   RTF    E2E / audio seconds
 * Every response is checked, and each failure is counted under its kind:
 * no response (connect refused, reset before a status line), bad status or
 * content type, malformed HTTP, malformed SSE or JSON, bad base64, an odd
 * byte count in a delta, no audio, a missing done, a speech.audio.error
 * event, a timeout.  Statistics are over the requests that succeeded; the
 * exit status is non-zero when any request (warm-up included) failed.
 *
 * One thread, one epoll set, non-blocking sockets, one connection per
 * request (Connection: close).  At 32 streams on a 2-CPU machine a thread
 * per connection would compete with the server it measures for the CPUs
 * and add scheduler noise to each timestamp; one epoll thread reads each
 * socket as it becomes readable and timestamps the data when it arrives,
 * and its work per event (HTTP, SSE, base64) is a few microseconds.
 *
 * --ab runs the same load against a server in each wake-up mode: with
 * --ab-server PATH it starts "PATH --port 0 --wakeup poll" (then park),
 * reads the "listening on HOST:PORT" line, runs the load, sends SIGTERM
 * and requires exit status 0; with --url-poll/--url-park it uses two
 * running servers.  It prints metric, baseline poll, candidate park,
 * delta and change in %.  --server-arg-a/--server-arg-b add arguments to
 * one side only, after its --wakeup (the server takes the last of an
 * option, so "--server-arg-a --wakeup=park" makes the baseline park too),
 * and --ab-name-a/--ab-name-b name the sides: park against park with a
 * coalescing window, for instance.
 *
 * Build: make examples/audio-loadgen (see audio.mk), or by hand:
 *     cc -std=c11 -D_GNU_SOURCE -O2 loadgen.c $(pkg-config --cflags \
 *         --libs libcjson libsodium) -lhttp_parser -lm -pthread
 * Run:   audio-loadgen --url http://127.0.0.1:8000 --requests 64 \
 *            --concurrency 1 --concurrency 32 --json --plot out.png
 */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <http_parser.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PCM_BYTES_PER_SECOND 48000.0 /* 24000 Hz x 2 bytes x 1 channel */
#define MAX_LEVELS 32
#define MAX_CONCURRENCY 4096
#define MAX_EVENT_BYTES (64u << 20) /* one SSE event, before decoding */
#define DETAIL_LEN 160
#define READ_CHUNK 65536

/* The fixed texts, used in turn: short, medium and long sentences. */
static const char *const default_sentences[] = {
	"Hello there.",
	"The quick brown fox jumps over the lazy dog.",
	"Streaming speech arrives in small pieces, long before the whole "
	"sentence has been synthesized.",
	"A ring buffer lets one thread hand audio to another without a lock.",
	"Please hold while your call is connected.",
	"Seven silent swans swam slowly southward under a pale winter sky, "
	"while the ferry waited at the pier for the last passengers of the "
	"evening.",
	"Numbers like 1, 2 and 3 are read out as words.",
	"Good night, and thank you for listening.",
};

enum err_kind {
	ERR_NONE,
	ERR_CONNECT,  /* refused, reset or closed before any response */
	ERR_STATUS,   /* HTTP status not 200, or not text/event-stream */
	ERR_HTTP,     /* the HTTP parser failed, or the body was cut short */
	ERR_SSE,      /* malformed event, bad JSON, unknown or late event */
	ERR_BASE64,   /* audio that does not decode */
	ERR_ODD,      /* a delta that is not a whole number of samples */
	ERR_NO_AUDIO, /* done, but no audio at all */
	ERR_NO_DONE,  /* the stream ended without speech.audio.done */
	ERR_EVENT,    /* the server sent speech.audio.error */
	ERR_TIMEOUT,  /* no done within --timeout */
	ERR_KINDS
};

static const char *const err_names[ERR_KINDS] = {
	"none", "connect", "status", "http", "sse", "base64",
	"odd_bytes", "no_audio", "no_done", "error_event", "timeout",
};

struct result {
	int id;
	int sentence; /* index into the texts */
	bool warmup;
	bool responded; /* a status line arrived */
	int status;
	enum err_kind err;
	char detail[DETAIL_LEN];
	double ttfp_ms, e2e_ms, audio_s;
	uint64_t audio_bytes;
	unsigned deltas;
};

/* A small parser for text/event-stream (the WHATWG rules): lines end in
 * LF, CRLF or CR; "field: value"; data lines join with LF; a blank line
 * dispatches; lines starting with ':' are comments. */
struct sse {
	char *line;
	size_t line_len, line_cap;
	bool after_cr; /* the last byte was CR: a following LF ends nothing */
	char event[64];
	char *data;
	size_t data_len, data_cap;
	bool has_data;
};

struct conn {
	int fd; /* -1 when the slot is free */
	struct result *res;
	enum { C_CONNECTING, C_SENDING, C_READING } state;
	const char *req;
	size_t req_len, req_off;
	http_parser hp;
	bool in_value, field_is_ctype, headers_done, complete, done_seen;
	char field[32];
	size_t field_len;
	char ctype[64];
	size_t ctype_len;
	struct sse sse;
	uint8_t *pcm; /* scratch for decoding one delta */
	size_t pcm_cap;
	double t_sent, deadline;
};

struct target {
	char host[256];
	char port[16];
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct level_stats {
	const char *mode;
	int concurrency, requests, ok, errors, warmup_errors;
	int by_kind[ERR_KINDS];
	double ttfp_mean, ttfp_p50, ttfp_p99;
	double e2e_mean, e2e_p50, e2e_p99;
	double audio_s, audio_min, audio_max;
	double rtf_mean, rtf_p50, rtf_p99;
	double wall_s;
};

static struct {
	const char *url, *url_poll, *url_park, *ab_server, *plot, *log_path;
	const char *model, *voice;
	const char *server_args[16];
	int n_server_args;
	/* --ab: the baseline's (0) and the candidate's (1) own arguments,
	 * and what the table calls each */
	const char *side_args[2][16];
	int n_side_args[2];
	const char *ab_name[2];
	const char **sentences;
	int n_sentences;
	int levels[MAX_LEVELS];
	int n_levels;
	int requests, warmup;
	double timeout_s, speed, start_timeout_s, stop_timeout_s;
	bool json, ab, quiet;
} opt = {
	.model = "espeak",
	.voice = "alloy",
	.requests = 64,
	.warmup = 4,
	.timeout_s = 60,
	.speed = 1.0,
	.start_timeout_s = 30,
	.stop_timeout_s = 60,
};

static FILE *log_file;
static FILE *human; /* the table: stdout, or stderr under --json */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("audio-loadgen: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

/* Records the first failure of a request; later ones are consequences. */
static void fail(struct conn *c, enum err_kind kind, const char *fmt, ...)
{
	va_list ap;

	if (c->res->err != ERR_NONE)
		return;
	c->res->err = kind;
	va_start(ap, fmt);
	vsnprintf(c->res->detail, sizeof(c->res->detail), fmt, ap);
	va_end(ap);
}

/* --- URLs and addresses ------------------------------------------------ */

static void parse_url(const char *url, struct target *t)
{
	const char *p = url, *host, *host_end, *port = "80";
	size_t port_len = 2;
	struct addrinfo hints = { 0 }, *ai;
	int ret;

	if (strncmp(p, "http://", 7) != 0)
		die("%s: only http://HOST:PORT URLs are supported", url);
	p += 7;
	if (*p == '[') { /* [v6]:port */
		host = p + 1;
		host_end = strchr(host, ']');
		if (!host_end)
			die("%s: unterminated [", url);
		p = host_end + 1;
	} else {
		host = p;
		host_end = p + strcspn(p, ":/");
		p = host_end;
	}
	if (*p == ':') {
		port = p + 1;
		port_len = strcspn(port, "/");
		p = port + port_len;
	}
	if ((*p && strcmp(p, "/") != 0) || host_end == host ||
	    (size_t)(host_end - host) >= sizeof(t->host) ||
	    port_len == 0 || port_len >= sizeof(t->port))
		die("%s: expected http://HOST:PORT", url);
	memcpy(t->host, host, host_end - host);
	t->host[host_end - host] = '\0';
	memcpy(t->port, port, port_len);
	t->port[port_len] = '\0';

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	ret = getaddrinfo(t->host, t->port, &hints, &ai);
	if (ret != 0)
		die("%s: %s", url, gai_strerror(ret));
	memcpy(&t->addr, ai->ai_addr, ai->ai_addrlen);
	t->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
}

/* --- the SSE parser ------------------------------------------------------ */

static bool grow(char **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 256;
	char *p;

	if (need <= *cap)
		return true;
	if (need > MAX_EVENT_BYTES)
		return false;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return false;
	*buf = p;
	*cap = n;
	return true;
}

static void sse_reset_event(struct sse *s)
{
	s->event[0] = '\0';
	s->data_len = 0;
	s->has_data = false;
}

static const char *json_string(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(item) ? item->valuestring : NULL;
}

static void on_delta(struct conn *c, const char *b64)
{
	size_t len = strlen(b64), bin_len = 0, need = len / 4 * 3 + 3;
	const char *end = NULL;

	if (need > c->pcm_cap) {
		uint8_t *p = realloc(c->pcm, need);

		if (!p) {
			fail(c, ERR_BASE64, "out of memory for %zu bytes", need);
			return;
		}
		c->pcm = p;
		c->pcm_cap = need;
	}
	if (sodium_base642bin(c->pcm, c->pcm_cap, b64, len, NULL, &bin_len,
			      &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    end != b64 + len) {
		fail(c, ERR_BASE64, "delta %u: invalid base64 (%zu chars)",
		     c->res->deltas, len);
		return;
	}
	if (bin_len % 2) {
		fail(c, ERR_ODD, "delta %u: %zu bytes, not whole s16 samples",
		     c->res->deltas, bin_len);
		return;
	}
	if (bin_len > 0 && c->res->audio_bytes == 0)
		c->res->ttfp_ms = now_ms() - c->t_sent;
	c->res->audio_bytes += bin_len;
	c->res->deltas++;
}

static void sse_dispatch(struct conn *c)
{
	struct sse *s = &c->sse;
	const char *name = s->event[0] ? s->event : "message";
	const char *type;
	cJSON *json;

	if (!s->has_data) { /* no data: the spec dispatches nothing */
		sse_reset_event(s);
		return;
	}
	if (c->done_seen) {
		fail(c, ERR_SSE, "event '%s' after speech.audio.done", name);
		return;
	}
	json = cJSON_ParseWithLength(s->data, s->data_len);
	if (!json || !cJSON_IsObject(json)) {
		fail(c, ERR_SSE, "event '%s': data is not a JSON object", name);
		goto out;
	}
	type = json_string(json, "type");
	if (!type || strcmp(type, name) != 0) {
		fail(c, ERR_SSE, "event '%s' carries type '%s'", name,
		     type ? type : "(none)");
		goto out;
	}
	if (strcmp(name, "speech.audio.delta") == 0) {
		const char *audio = json_string(json, "audio");

		if (!audio)
			fail(c, ERR_SSE, "delta without an audio string");
		else
			on_delta(c, audio);
	} else if (strcmp(name, "speech.audio.done") == 0) {
		const cJSON *usage = cJSON_GetObjectItemCaseSensitive(json,
								      "usage");
		const cJSON *samples = cJSON_GetObjectItemCaseSensitive(usage,
							"output_samples");

		if (!cJSON_IsObject(usage))
			fail(c, ERR_SSE, "done without a usage object");
		/* Optional, but when the server counts, it must agree. */
		else if (cJSON_IsNumber(samples) &&
			 samples->valuedouble * 2 != (double)c->res->audio_bytes)
			fail(c, ERR_SSE, "usage.output_samples %.0f, but %llu "
			     "samples decoded", samples->valuedouble,
			     (unsigned long long)c->res->audio_bytes / 2);
		c->done_seen = true;
		c->res->e2e_ms = now_ms() - c->t_sent;
	} else if (strcmp(name, "speech.audio.error") == 0) {
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(json,
								  "error");
		const char *msg = json_string(json, "message");

		if (!msg && cJSON_IsObject(e))
			msg = json_string(e, "message");
		fail(c, ERR_EVENT, "speech.audio.error: %s",
		     msg ? msg : "(no message)");
	} else {
		fail(c, ERR_SSE, "unknown event '%s'", name);
	}
out:
	cJSON_Delete(json);
	sse_reset_event(s);
}

static void sse_line(struct conn *c, char *line, size_t len)
{
	struct sse *s = &c->sse;
	char *colon, *value;
	size_t vlen;

	if (len == 0) {
		sse_dispatch(c);
		return;
	}
	if (line[0] == ':')
		return; /* a comment, e.g. a keep-alive */
	line[len] = '\0';
	colon = memchr(line, ':', len);
	if (colon) {
		*colon = '\0';
		value = colon + 1;
		if (*value == ' ')
			value++;
	} else {
		value = line + len;
	}
	vlen = line + len - value;
	if (strcmp(line, "event") == 0) {
		if (vlen >= sizeof(s->event)) {
			fail(c, ERR_SSE, "event name of %zu bytes", vlen);
			return;
		}
		memcpy(s->event, value, vlen + 1);
	} else if (strcmp(line, "data") == 0) {
		if (!grow(&s->data, &s->data_cap, s->data_len + vlen + 2)) {
			fail(c, ERR_SSE, "event data over %u bytes",
			     MAX_EVENT_BYTES);
			return;
		}
		if (s->has_data)
			s->data[s->data_len++] = '\n';
		memcpy(s->data + s->data_len, value, vlen);
		s->data_len += vlen;
		s->data[s->data_len] = '\0';
		s->has_data = true;
	}
	/* id and retry mean nothing here; unknown fields are ignored. */
}

static void sse_feed(struct conn *c, const char *buf, size_t len)
{
	struct sse *s = &c->sse;

	for (size_t i = 0; i < len && c->res->err == ERR_NONE; i++) {
		char ch = buf[i];

		if (s->after_cr) {
			s->after_cr = false;
			if (ch == '\n')
				continue;
		}
		if (ch == '\r' || ch == '\n') {
			s->after_cr = ch == '\r';
			sse_line(c, s->line, s->line_len);
			s->line_len = 0;
			continue;
		}
		if (!grow(&s->line, &s->line_cap, s->line_len + 2)) {
			fail(c, ERR_SSE, "line over %u bytes", MAX_EVENT_BYTES);
			return;
		}
		s->line[s->line_len++] = ch;
	}
}

/* --- HTTP, through http_parser ------------------------------------------ */

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct conn *c = hp->data;

	if (c->in_value) {
		c->in_value = false;
		c->field_len = 0;
	}
	for (size_t i = 0; i < len && c->field_len + 1 < sizeof(c->field); i++)
		c->field[c->field_len++] = at[i];
	c->field[c->field_len] = '\0';
	return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct conn *c = hp->data;

	if (!c->in_value) {
		c->in_value = true;
		c->field_is_ctype = strcasecmp(c->field, "content-type") == 0;
		if (c->field_is_ctype)
			c->ctype_len = 0;
		c->field_len = 0;
	}
	if (c->field_is_ctype)
		for (size_t i = 0; i < len &&
				   c->ctype_len + 1 < sizeof(c->ctype); i++)
			c->ctype[c->ctype_len++] = at[i];
	c->ctype[c->ctype_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *hp)
{
	struct conn *c = hp->data;

	c->headers_done = true;
	c->res->responded = true;
	c->res->status = hp->status_code;
	if (hp->status_code != 200)
		fail(c, ERR_STATUS, "HTTP %d: ", hp->status_code);
	else if (strncasecmp(c->ctype, "text/event-stream", 17) != 0)
		fail(c, ERR_STATUS, "content type '%s', not text/event-stream",
		     c->ctype);
	return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct conn *c = hp->data;

	if (c->res->err == ERR_STATUS && c->res->status != 200) {
		/* Keep the start of an error body for the report. */
		size_t used = strlen(c->res->detail);
		size_t room = sizeof(c->res->detail) - 1 - used;

		if (len < room)
			room = len;
		for (size_t i = 0; i < room; i++)
			c->res->detail[used + i] =
				at[i] == '\n' || at[i] == '\r' ? ' ' : at[i];
		c->res->detail[used + room] = '\0';
		return 0;
	}
	if (c->res->err == ERR_NONE)
		sse_feed(c, at, len);
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct conn *c = hp->data;

	c->complete = true;
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* --- requests on an epoll set -------------------------------------------- */

static char *build_request(const struct target *t, const char *text,
			   size_t *len)
{
	cJSON *o = cJSON_CreateObject();
	char *body, *req;
	int n;

	if (!o || !cJSON_AddStringToObject(o, "model", opt.model) ||
	    !cJSON_AddStringToObject(o, "input", text) ||
	    !cJSON_AddStringToObject(o, "voice", opt.voice) ||
	    !cJSON_AddStringToObject(o, "response_format", "pcm") ||
	    !cJSON_AddNumberToObject(o, "speed", opt.speed) ||
	    !cJSON_AddTrueToObject(o, "stream") ||
	    !cJSON_AddStringToObject(o, "stream_format", "sse"))
		die("out of memory");
	body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	if (!body)
		die("out of memory");
	n = asprintf(&req,
		     "POST /v1/audio/speech HTTP/1.1\r\n"
		     "Host: %s:%s\r\n"
		     "User-Agent: lull-audio-loadgen\r\n"
		     "Accept: text/event-stream\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s",
		     t->host, t->port, strlen(body), body);
	free(body);
	if (n < 0)
		die("out of memory");
	*len = n;
	return req;
}

static void conn_reset(struct conn *c)
{
	c->fd = -1;
	c->res = NULL;
	c->req_off = 0;
	c->in_value = c->field_is_ctype = false;
	c->headers_done = c->complete = c->done_seen = false;
	c->field_len = c->ctype_len = 0;
	c->field[0] = c->ctype[0] = '\0';
	c->sse.line_len = 0;
	c->sse.after_cr = false;
	sse_reset_event(&c->sse);
}

/* Ends a request: decides its outcome from what arrived. */
static void conn_finish(int ep, struct conn *c)
{
	struct result *r = c->res;

	if (r->err == ERR_NONE) {
		if (!c->headers_done)
			fail(c, ERR_CONNECT, "closed before a response");
		else if (!c->done_seen)
			fail(c, ERR_NO_DONE, "stream ended after %u deltas "
			     "without speech.audio.done", r->deltas);
		else if (!c->complete)
			fail(c, ERR_HTTP, "body cut short after done");
		else if (r->audio_bytes == 0)
			fail(c, ERR_NO_AUDIO, "done after no audio");
	}
	r->audio_s = r->audio_bytes / PCM_BYTES_PER_SECOND;
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	conn_reset(c);
}

static void conn_feed(int ep, struct conn *c, const char *buf, size_t len)
{
	size_t n = http_parser_execute(&c->hp, &parser_settings, buf, len);
	enum http_errno e = HTTP_PARSER_ERRNO(&c->hp);

	if (e != HPE_OK || (len && n != len)) {
		if (!c->headers_done)
			fail(c, ERR_HTTP, "bad response: %s",
			     http_errno_description(e));
		else if (len == 0 && !c->done_seen)
			fail(c, ERR_NO_DONE, "connection closed after %u "
			     "deltas without speech.audio.done",
			     c->res->deltas);
		else
			fail(c, ERR_HTTP, "%s", http_errno_description(e));
		conn_finish(ep, c);
		return;
	}
	if (c->complete || len == 0)
		conn_finish(ep, c);
}

static void conn_start(int ep, struct conn *c, const struct target *t,
		       struct result *r, const char *req, size_t req_len)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
	int one = 1;

	conn_reset(c);
	c->res = r;
	c->req = req;
	c->req_len = req_len;
	c->t_sent = now_ms();
	c->deadline = c->t_sent + opt.timeout_s * 1e3;
	http_parser_init(&c->hp, HTTP_RESPONSE);
	c->hp.data = c;
	c->fd = socket(t->addr.ss_family,
		       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->state = C_CONNECTING;
	if (connect(c->fd, (const struct sockaddr *)&t->addr, t->addrlen) &&
	    errno != EINPROGRESS) {
		fail(c, ERR_CONNECT, "connect: %s", strerror(errno));
		close(c->fd);
		conn_reset(c);
		return;
	}
	if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev))
		die("epoll_ctl: %s", strerror(errno));
}

static void conn_event(int ep, struct conn *c, uint32_t events)
{
	static char buf[READ_CHUNK];
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	ssize_t n;

	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			fail(c, ERR_CONNECT, "connect: %s", strerror(err));
			conn_finish(ep, c);
			return;
		}
		c->state = C_SENDING;
	}
	if (c->state == C_SENDING) {
		n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off,
			 MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN) {
			fail(c, ERR_CONNECT, "send: %s", strerror(errno));
			conn_finish(ep, c);
			return;
		}
		if (n > 0)
			c->req_off += n;
		if (c->req_off == c->req_len) {
			/* The clock starts when the request is all out. */
			c->t_sent = now_ms();
			c->deadline = c->t_sent + opt.timeout_s * 1e3;
			c->state = C_READING;
			if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev))
				die("epoll_ctl: %s", strerror(errno));
		}
		return;
	}
	(void)events;
	n = recv(c->fd, buf, sizeof(buf), 0);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		if (!c->headers_done)
			fail(c, ERR_CONNECT, "recv: %s", strerror(errno));
		else if (!c->done_seen)
			fail(c, ERR_NO_DONE, "recv after %u deltas: %s",
			     c->res->deltas, strerror(errno));
		else
			fail(c, ERR_HTTP, "recv after done: %s",
			     strerror(errno));
		conn_finish(ep, c);
		return;
	}
	if (n == 0 && !c->headers_done && c->hp.nread == 0) {
		fail(c, ERR_CONNECT, "closed before a response");
		conn_finish(ep, c);
		return;
	}
	conn_feed(ep, c, buf, n);
}

static void log_result(const char *mode, int level, const struct result *r)
{
	cJSON *o;
	char *s;

	if (!log_file)
		return;
	o = cJSON_CreateObject();
	if (!o)
		die("out of memory");
	if (mode)
		cJSON_AddStringToObject(o, "mode", mode);
	cJSON_AddNumberToObject(o, "concurrency", level);
	cJSON_AddNumberToObject(o, "id", r->id);
	cJSON_AddNumberToObject(o, "sentence", r->sentence);
	cJSON_AddBoolToObject(o, "warmup", r->warmup);
	cJSON_AddBoolToObject(o, "responded", r->responded);
	cJSON_AddNumberToObject(o, "status", r->status);
	cJSON_AddBoolToObject(o, "ok", r->err == ERR_NONE);
	cJSON_AddStringToObject(o, "error", err_names[r->err]);
	cJSON_AddStringToObject(o, "detail", r->detail);
	cJSON_AddNumberToObject(o, "deltas", r->deltas);
	cJSON_AddNumberToObject(o, "audio_bytes", (double)r->audio_bytes);
	cJSON_AddNumberToObject(o, "audio_s", r->audio_s);
	cJSON_AddNumberToObject(o, "ttfp_ms", r->ttfp_ms);
	cJSON_AddNumberToObject(o, "e2e_ms", r->e2e_ms);
	s = cJSON_PrintUnformatted(o);
	if (s)
		fprintf(log_file, "%s\n", s);
	fflush(log_file);
	free(s);
	cJSON_Delete(o);
}

/* Runs n requests, at most conc at a time, into res[0..n). */
static void run_batch(const struct target *t, int conc, int n, bool warmup,
		      struct result *res, char **reqs, size_t *req_lens)
{
	struct conn *conns = calloc(conc, sizeof(*conns));
	struct epoll_event evs[64];
	int ep = epoll_create1(EPOLL_CLOEXEC), next = 0, active = 0;

	if (!conns || ep < 0)
		die("setup: %s", strerror(errno));
	for (int i = 0; i < conc; i++)
		conn_reset(&conns[i]);
	for (int i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		res[i].id = i;
		res[i].warmup = warmup;
	}
	for (;;) {
		double now = now_ms(), soonest = now + 1e3;
		int timeout, m;

		/* Fill every free slot; a refused connect frees it at once. */
		for (int i = 0; i < conc && next < n; i++) {
			int k = next % opt.n_sentences;

			if (conns[i].fd >= 0)
				continue;
			res[next].sentence = k;
			conn_start(ep, &conns[i], t, &res[next], reqs[k],
				   req_lens[k]);
			next++;
			if (conns[i].fd < 0)
				i--; /* failed at once: reuse this slot */
		}
		active = 0;
		for (int i = 0; i < conc; i++) {
			if (conns[i].fd < 0)
				continue;
			active++;
			if (conns[i].deadline <= now) {
				fail(&conns[i], ERR_TIMEOUT, "no done within "
				     "%.0f s (%u deltas)", opt.timeout_s,
				     conns[i].res->deltas);
				conn_finish(ep, &conns[i]);
				active--;
			} else if (conns[i].deadline < soonest) {
				soonest = conns[i].deadline;
			}
		}
		if (active == 0 && next == n)
			break;
		if (active == 0)
			continue;
		timeout = (int)ceil(soonest - now);
		m = epoll_wait(ep, evs, 64, timeout < 1 ? 1 : timeout);
		if (m < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		for (int i = 0; i < m; i++) {
			struct conn *c = evs[i].data.ptr;

			if (c->fd >= 0)
				conn_event(ep, c, evs[i].events);
		}
	}
	for (int i = 0; i < conc; i++) {
		free(conns[i].sse.line);
		free(conns[i].sse.data);
		free(conns[i].pcm);
	}
	free(conns);
	close(ep);
}

/* --- statistics ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, int n, double p)
{
	int k;

	if (n == 0)
		return NAN;
	k = (int)ceil(p / 100.0 * n) - 1;
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void summarize(double *v, int n, double *mean, double *p50,
		      double *p99)
{
	double sum = 0;

	for (int i = 0; i < n; i++)
		sum += v[i];
	qsort(v, n, sizeof(*v), cmp_double);
	*mean = n ? sum / n : NAN;
	*p50 = pct(v, n, 50);
	*p99 = pct(v, n, 99);
}

static void run_level(const struct target *t, const char *mode, int conc,
		      struct level_stats *st)
{
	int n = opt.requests, w = opt.warmup, ok = 0;
	struct result *res = calloc(n > w ? n : w ? w : 1, sizeof(*res));
	double *ttfp = calloc(n, sizeof(double));
	double *e2e = calloc(n, sizeof(double));
	double *rtf = calloc(n, sizeof(double));
	char *reqs[64];
	size_t lens[64];
	double t0;

	if (!res || !ttfp || !e2e || !rtf)
		die("out of memory");
	for (int k = 0; k < opt.n_sentences; k++)
		reqs[k] = build_request(t, opt.sentences[k], &lens[k]);
	memset(st, 0, sizeof(*st));
	st->mode = mode;
	st->concurrency = conc;
	st->requests = n;
	if (w > 0) {
		run_batch(t, conc < w ? conc : w, w, true, res, reqs, lens);
		for (int i = 0; i < w; i++) {
			log_result(mode, conc, &res[i]);
			if (res[i].err != ERR_NONE) {
				st->warmup_errors++;
				fprintf(stderr, "audio-loadgen: warm-up %d at "
					"c=%d: %s: %s\n", i, conc,
					err_names[res[i].err], res[i].detail);
			}
		}
	}
	t0 = now_ms();
	run_batch(t, conc, n, false, res, reqs, lens);
	st->wall_s = (now_ms() - t0) / 1e3;
	st->audio_min = INFINITY;
	st->audio_max = 0;
	for (int i = 0; i < n; i++) {
		struct result *r = &res[i];

		log_result(mode, conc, r);
		st->audio_s += r->audio_s;
		if (r->err != ERR_NONE) {
			st->errors++;
			st->by_kind[r->err]++;
			if (st->errors <= 5 && !opt.quiet)
				fprintf(stderr, "audio-loadgen: request %d at "
					"c=%d: %s: %s\n", i, conc,
					err_names[r->err], r->detail);
			continue;
		}
		ttfp[ok] = r->ttfp_ms;
		e2e[ok] = r->e2e_ms;
		rtf[ok] = r->e2e_ms / 1e3 / r->audio_s;
		if (r->audio_s < st->audio_min)
			st->audio_min = r->audio_s;
		if (r->audio_s > st->audio_max)
			st->audio_max = r->audio_s;
		ok++;
	}
	if (st->errors > 5 && !opt.quiet)
		fprintf(stderr, "audio-loadgen: ... %d failed at c=%d\n",
			st->errors, conc);
	if (ok == 0)
		st->audio_min = NAN;
	st->ok = ok;
	summarize(ttfp, ok, &st->ttfp_mean, &st->ttfp_p50, &st->ttfp_p99);
	summarize(e2e, ok, &st->e2e_mean, &st->e2e_p50, &st->e2e_p99);
	summarize(rtf, ok, &st->rtf_mean, &st->rtf_p50, &st->rtf_p99);
	for (int k = 0; k < opt.n_sentences; k++)
		free(reqs[k]);
	free(res);
	free(ttfp);
	free(e2e);
	free(rtf);
}

/* JSON has no NaN: a level with no successes reports null. */
static void add_num(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		cJSON_AddNumberToObject(o, key, round(v * 1000) / 1000);
	else
		cJSON_AddNullToObject(o, key);
}

static void print_json(const struct level_stats *st)
{
	cJSON *o = cJSON_CreateObject(), *kinds = cJSON_CreateObject();
	char *s;

	if (!o || !kinds)
		die("out of memory");
	if (st->mode)
		cJSON_AddStringToObject(o, "mode", st->mode);
	cJSON_AddNumberToObject(o, "concurrency", st->concurrency);
	cJSON_AddNumberToObject(o, "requests", st->requests);
	cJSON_AddNumberToObject(o, "ok", st->ok);
	cJSON_AddNumberToObject(o, "errors", st->errors);
	cJSON_AddNumberToObject(o, "warmup_errors", st->warmup_errors);
	for (int k = 1; k < ERR_KINDS; k++)
		if (st->by_kind[k])
			cJSON_AddNumberToObject(kinds, err_names[k],
						st->by_kind[k]);
	cJSON_AddItemToObject(o, "errors_by_kind", kinds);
	add_num(o, "ttfp_mean_ms", st->ttfp_mean);
	add_num(o, "ttfp_p50_ms", st->ttfp_p50);
	add_num(o, "ttfp_p99_ms", st->ttfp_p99);
	add_num(o, "e2e_mean_ms", st->e2e_mean);
	add_num(o, "e2e_p50_ms", st->e2e_p50);
	add_num(o, "e2e_p99_ms", st->e2e_p99);
	add_num(o, "audio_s", st->audio_s);
	add_num(o, "audio_s_min", st->audio_min);
	add_num(o, "audio_s_max", st->audio_max);
	add_num(o, "rtf_mean", st->rtf_mean);
	add_num(o, "rtf_p50", st->rtf_p50);
	add_num(o, "rtf_p99", st->rtf_p99);
	add_num(o, "wall_s", st->wall_s);
	s = cJSON_PrintUnformatted(o);
	if (!s)
		die("out of memory");
	printf("%s\n", s);
	fflush(stdout);
	free(s);
	cJSON_Delete(o);
}

static void print_header(const char *name)
{
	if (name)
		fprintf(human, "\nwake-up mode: %s\n", name);
	fprintf(human, "%5s %6s %6s | %27s | %27s | %9s %7s\n", "conc",
		"reqs", "errors", "TTFP ms  mean    p50    p99",
		"E2E ms  mean    p50    p99", "audio s", "RTF");
}

static void print_row(const struct level_stats *st)
{
	fprintf(human, "%5d %6d %6d | %9.2f %7.2f %7.2f | %9.2f %7.2f %7.2f |"
		" %9.2f %7.4f\n", st->concurrency, st->requests,
		st->errors + st->warmup_errors, st->ttfp_mean, st->ttfp_p50,
		st->ttfp_p99, st->e2e_mean, st->e2e_p50, st->e2e_p99,
		st->audio_s, st->rtf_mean);
	fflush(human);
}

/* --- A/B: servers started here ------------------------------------------ */

struct child {
	pid_t pid;
	int out; /* the server's stdout, after its first line */
	pthread_t drain;
	bool draining;
};

/* Copies the server's later stdout to stderr, so it never blocks on a
 * full pipe. */
static void *drain_stdout(void *arg)
{
	struct child *ch = arg;
	char buf[4096];
	ssize_t n;

	while ((n = read(ch->out, buf, sizeof(buf))) > 0)
		if (write(STDERR_FILENO, buf, n) < 0)
			break;
	return NULL;
}

static void start_server(int side, const char *mode, struct child *ch,
			 char *url, size_t url_len)
{
	const char *argv[48];
	int argc = 0, fds[2];
	char line[256];
	size_t len = 0;
	double deadline = now_ms() + opt.start_timeout_s * 1e3;

	argv[argc++] = opt.ab_server;
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--wakeup";
	argv[argc++] = mode;
	for (int i = 0; i < opt.n_server_args; i++)
		argv[argc++] = opt.server_args[i];
	for (int i = 0; i < opt.n_side_args[side]; i++)
		argv[argc++] = opt.side_args[side][i];
	argv[argc] = NULL;
	if (pipe2(fds, O_CLOEXEC))
		die("pipe: %s", strerror(errno));
	ch->pid = fork();
	if (ch->pid < 0)
		die("fork: %s", strerror(errno));
	if (ch->pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "audio-loadgen: exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	ch->out = fds[0];
	/* Read the first line byte by byte: what follows it is not ours. */
	while (len + 1 < sizeof(line)) {
		struct pollfd p = { .fd = ch->out, .events = POLLIN };
		int left = (int)(deadline - now_ms());
		char chr;

		if (left <= 0 || poll(&p, 1, left) <= 0) {
			kill(ch->pid, SIGKILL);
			die("%s --wakeup %s: no listening line within %.0f s",
			    opt.ab_server, mode, opt.start_timeout_s);
		}
		if (read(ch->out, &chr, 1) != 1)
			die("%s --wakeup %s: exited before listening",
			    opt.ab_server, mode);
		if (chr == '\n')
			break;
		line[len++] = chr;
	}
	line[len] = '\0';
	if (strncmp(line, "listening on ", 13) != 0)
		die("%s: first line '%s', not 'listening on HOST:PORT'",
		    opt.ab_server, line);
	snprintf(url, url_len, "http://%s", line + 13);
	ch->draining = pthread_create(&ch->drain, NULL, drain_stdout,
				      ch) == 0;
}

/* SIGTERM, then the exit status; 0 when the server exited 0 in time. */
static int stop_server(const char *mode, struct child *ch)
{
	double deadline = now_ms() + opt.stop_timeout_s * 1e3;
	int status = 0;
	pid_t got;

	kill(ch->pid, SIGTERM);
	while ((got = waitpid(ch->pid, &status, WNOHANG)) == 0 &&
	       now_ms() < deadline) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	if (got == 0) {
		kill(ch->pid, SIGKILL);
		waitpid(ch->pid, &status, 0);
		fprintf(stderr, "audio-loadgen: server (%s) still running %.0f "
			"s after SIGTERM: killed\n", mode, opt.stop_timeout_s);
		status = -1;
	}
	if (ch->draining)
		pthread_join(ch->drain, NULL);
	close(ch->out);
	if (status == -1)
		return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "audio-loadgen: server (%s) after SIGTERM: %s "
			"%d\n", mode, WIFEXITED(status) ? "exit status" :
			"signal", WIFEXITED(status) ? WEXITSTATUS(status) :
			WTERMSIG(status));
		return -1;
	}
	return 0;
}

/* --- the A/B table and the plot ----------------------------------------- */

/* The table's columns: as wide as the default names, or the names. */
static int ab_width[2] = { 14, 15 };

static void ab_row(const char *metric, int conc, double a, double b)
{
	char name[48];

	snprintf(name, sizeof(name), "%s @c%d", metric, conc);
	if (a != 0 && isfinite(a) && isfinite(b))
		fprintf(human, "%-20s %*.3f %*.3f %12.3f %10.1f%%\n", name,
			ab_width[0], a, ab_width[1], b, b - a,
			(b - a) / a * 100);
	else
		fprintf(human, "%-20s %*.3f %*.3f %12.3f %11s\n", name,
			ab_width[0], a, ab_width[1], b, b - a, "-");
}

static void print_ab(const struct level_stats *poll_st,
		     const struct level_stats *park_st, int n)
{
	char head_a[160], head_b[160];

	if (!opt.n_side_args[0] && !opt.n_side_args[1] &&
	    !strcmp(opt.ab_name[0], "poll") && !strcmp(opt.ab_name[1], "park"))
		fprintf(human, "\nA/B: baseline --wakeup poll, candidate "
			"--wakeup park (negative delta: park is lower)\n");
	else
		fprintf(human, "\nA/B: baseline %s, candidate %s (negative "
			"delta: %s is lower)\n", opt.ab_name[0],
			opt.ab_name[1], opt.ab_name[1]);
	snprintf(head_a, sizeof(head_a), "baseline %s", opt.ab_name[0]);
	snprintf(head_b, sizeof(head_b), "candidate %s", opt.ab_name[1]);
	if ((int)strlen(head_a) > ab_width[0])
		ab_width[0] = (int)strlen(head_a);
	if ((int)strlen(head_b) > ab_width[1])
		ab_width[1] = (int)strlen(head_b);
	fprintf(human, "%-20s %*s %*s %12s %11s\n", "metric", ab_width[0],
		head_a, ab_width[1], head_b, "delta", "change");
	for (int i = 0; i < n; i++) {
		const struct level_stats *a = &poll_st[i], *b = &park_st[i];
		int c = a->concurrency;

		ab_row("ttfp_p50_ms", c, a->ttfp_p50, b->ttfp_p50);
		ab_row("ttfp_p99_ms", c, a->ttfp_p99, b->ttfp_p99);
		ab_row("e2e_p50_ms", c, a->e2e_p50, b->e2e_p50);
		ab_row("e2e_p99_ms", c, a->e2e_p99, b->e2e_p99);
		ab_row("rtf_mean", c, a->rtf_mean, b->rtf_mean);
		ab_row("errors", c, a->errors + a->warmup_errors,
		       b->errors + b->warmup_errors);
	}
	fflush(human);
}

static int write_plot(const char *path, const struct level_stats *sets[],
		      const char *names[], int n_sets, int n)
{
	FILE *g;
	int status, points = 0;

	for (int s = 0; s < n_sets; s++)
		for (int i = 0; i < n; i++)
			points += sets[s][i].ok > 0;
	if (points == 0) {
		fprintf(stderr, "audio-loadgen: no successful request to "
			"plot; %s not written\n", path);
		return -1;
	}
	g = popen("gnuplot", "w");
	if (!g) {
		fprintf(stderr, "audio-loadgen: gnuplot: %s\n",
			strerror(errno));
		return -1;
	}
	fprintf(g, "set terminal pngcairo size 1000,640 noenhanced\n"
		"set output '%s'\n"
		"set title 'lull audio-server: streaming TTS latency by "
		"concurrency (%d requests per level)'\n"
		"set xlabel 'concurrent streams'\n"
		"set ylabel 'latency (ms)'\n"
		"set logscale x 2\nset logscale y 10\n"
		"set grid\nset key top left box\n", path, opt.requests);
	for (int s = 0; s < n_sets; s++) {
		fprintf(g, "$d%d << EOD\n", s);
		for (int i = 0; i < n; i++) {
			const struct level_stats *st = &sets[s][i];

			if (st->ok > 0)
				fprintf(g, "%d %.4f %.4f %.4f %.4f\n",
					st->concurrency, st->ttfp_p50,
					st->ttfp_p99, st->e2e_p50,
					st->e2e_p99);
		}
		fprintf(g, "EOD\n");
	}
	fprintf(g, "plot ");
	for (int s = 0; s < n_sets; s++) {
		const char *tag = names[s] ? names[s] : "";
		const char *sep = names[s] ? " " : "";

		fprintf(g, "%s$d%d using 1:2 with linespoints lw 2 lc %d pt 7 "
			"title '%s%sTTFP p50', "
			"$d%d using 1:3 with linespoints lw 1 lc %d dt 2 pt 7 "
			"title '%s%sTTFP p99', "
			"$d%d using 1:4 with linespoints lw 2 lc %d pt 5 "
			"title '%s%sE2E p50', "
			"$d%d using 1:5 with linespoints lw 1 lc %d dt 2 pt 5 "
			"title '%s%sE2E p99'",
			s ? ", " : "", s, 1 + 2 * s, tag, sep, s, 1 + 2 * s,
			tag, sep, s, 2 + 2 * s, tag, sep, s, 2 + 2 * s, tag,
			sep);
	}
	fprintf(g, "\n");
	status = pclose(g);
	if (status != 0) {
		fprintf(stderr, "audio-loadgen: gnuplot failed (%d)\n",
			status);
		return -1;
	}
	fprintf(stderr, "audio-loadgen: plot written to %s\n", path);
	return 0;
}

/* --- main --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: audio-loadgen --url http://HOST:PORT [options]\n"
"       audio-loadgen --ab --ab-server PATH [--server-arg ARG]...\n"
"                     [--server-arg-a ARG]... [--server-arg-b ARG]...\n"
"                     [--ab-name-a NAME] [--ab-name-b NAME] [options]\n"
"       audio-loadgen --ab --url-poll URL --url-park URL [options]\n"
"  --requests N        measured requests per level (default 64)\n"
"  --concurrency C     a level; repeatable (default 1, 8, 16, 32)\n"
"  --warmup N          unmeasured requests before each level (default 4)\n"
"  --timeout S         per-request limit in seconds (default 60)\n"
"  --sentence TEXT     a text to speak; repeatable (replaces the built-in\n"
"                      set)\n"
"  --model M --voice V --speed X   request fields (espeak, alloy, 1.0)\n"
"  --json              one JSON line per level on stdout; table to stderr\n"
"  --log FILE          one JSON line per request to FILE\n"
"  --plot FILE.png     TTFP and E2E by concurrency (gnuplot)\n"
"  --server-arg ARG    passed to the --ab-server (e.g. --pace realtime)\n"
"  --server-arg-a ARG  passed to the baseline (--wakeup poll) server only,\n"
"  --server-arg-b ARG  or the candidate (--wakeup park); after --wakeup and\n"
"                      --server-arg, so they win: --server-arg-a\n"
"                      --wakeup=park makes the baseline park as well\n"
"  --ab-name-a NAME    the baseline's name in the table, the JSON lines\n"
"  --ab-name-b NAME    and the plot (default: poll and park, followed by\n"
"                      that side's own arguments)\n"
"  --quiet             no per-request error lines\n"
"Exit status: 0 when every request succeeded (and, with --ab-server, both\n"
"servers exited 0 after SIGTERM), 1 otherwise, 2 on a usage error.\n");
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end || v < lo || v > hi)
		die("%s: '%s' is not an integer in [%d, %d]", what, s, lo, hi);
	return (int)v;
}

static double parse_double(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	if (*s == '\0' || *end || !(v > 0))
		die("%s: '%s' is not a positive number", what, s);
	return v;
}

/* "poll" or "park", followed by that side's own server arguments. */
static const char *side_name(int side)
{
	static char names[2][256];
	char *p = names[side], *end = names[side] + sizeof(names[side]);

	p += snprintf(p, (size_t)(end - p), "%s", side ? "park" : "poll");
	for (int i = 0; i < opt.n_side_args[side] && p < end; i++)
		p += snprintf(p, (size_t)(end - p), " %s",
			      opt.side_args[side][i]);
	return names[side];
}

static void parse_args(int argc, char **argv)
{
	enum { O_URL = 256, O_URL_POLL, O_URL_PARK, O_AB_SERVER, O_SARG,
	       O_SARG_A, O_SARG_B, O_NAME_A, O_NAME_B, O_SENT, O_MODEL,
	       O_VOICE, O_SPEED, O_LOG, O_TIMEOUT, O_WARMUP };
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, O_URL },
		{ "url-poll", required_argument, NULL, O_URL_POLL },
		{ "url-park", required_argument, NULL, O_URL_PARK },
		{ "ab", no_argument, NULL, 'a' },
		{ "ab-server", required_argument, NULL, O_AB_SERVER },
		{ "server-arg", required_argument, NULL, O_SARG },
		{ "server-arg-a", required_argument, NULL, O_SARG_A },
		{ "server-arg-b", required_argument, NULL, O_SARG_B },
		{ "ab-name-a", required_argument, NULL, O_NAME_A },
		{ "ab-name-b", required_argument, NULL, O_NAME_B },
		{ "requests", required_argument, NULL, 'n' },
		{ "concurrency", required_argument, NULL, 'c' },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "sentence", required_argument, NULL, O_SENT },
		{ "model", required_argument, NULL, O_MODEL },
		{ "voice", required_argument, NULL, O_VOICE },
		{ "speed", required_argument, NULL, O_SPEED },
		{ "json", no_argument, NULL, 'j' },
		{ "log", required_argument, NULL, O_LOG },
		{ "plot", required_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const char *sent[64];
	int ch;

	while ((ch = getopt_long(argc, argv, "n:c:jp:qh", longopts,
				 NULL)) != -1) {
		switch (ch) {
		case O_URL: opt.url = optarg; break;
		case O_URL_POLL: opt.url_poll = optarg; break;
		case O_URL_PARK: opt.url_park = optarg; break;
		case 'a': opt.ab = true; break;
		case O_AB_SERVER: opt.ab_server = optarg; opt.ab = true; break;
		case O_SARG:
			if (opt.n_server_args == 16)
				die("too many --server-arg");
			opt.server_args[opt.n_server_args++] = optarg;
			break;
		case O_SARG_A:
		case O_SARG_B: {
			int side = ch == O_SARG_B;

			if (opt.n_side_args[side] == 16)
				die("too many --server-arg-%c", "ab"[side]);
			opt.side_args[side][opt.n_side_args[side]++] = optarg;
			break;
		}
		case O_NAME_A: opt.ab_name[0] = optarg; break;
		case O_NAME_B: opt.ab_name[1] = optarg; break;
		case 'n':
			opt.requests = parse_int(optarg, 1, 1000000,
						 "--requests");
			break;
		case 'c':
			if (opt.n_levels == MAX_LEVELS)
				die("too many --concurrency levels");
			opt.levels[opt.n_levels++] = parse_int(optarg, 1,
				MAX_CONCURRENCY, "--concurrency");
			break;
		case O_WARMUP:
			opt.warmup = parse_int(optarg, 0, 100000, "--warmup");
			break;
		case O_TIMEOUT:
			opt.timeout_s = parse_double(optarg, "--timeout");
			break;
		case O_SENT:
			if (opt.n_sentences == 64)
				die("too many --sentence");
			sent[opt.n_sentences++] = optarg;
			break;
		case O_MODEL: opt.model = optarg; break;
		case O_VOICE: opt.voice = optarg; break;
		case O_SPEED: opt.speed = parse_double(optarg, "--speed"); break;
		case 'j': opt.json = true; break;
		case O_LOG: opt.log_path = optarg; break;
		case 'p': opt.plot = optarg; break;
		case 'q': opt.quiet = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(2);
	}
	if (opt.n_sentences) {
		opt.sentences = sent;
	} else {
		opt.sentences = (const char **)default_sentences;
		opt.n_sentences = sizeof(default_sentences) /
				  sizeof(default_sentences[0]);
	}
	if (opt.n_levels == 0) {
		static const int def[] = { 1, 8, 16, 32 };

		memcpy(opt.levels, def, sizeof(def));
		opt.n_levels = 4;
	}
	if (opt.ab) {
		if (!opt.ab_server && !(opt.url_poll && opt.url_park))
			die("--ab needs --ab-server PATH, or --url-poll and "
			    "--url-park");
		if (opt.ab_server && (opt.url_poll || opt.url_park))
			die("--ab-server and --url-poll/--url-park exclude "
			    "each other");
		if (!opt.ab_server &&
		    (opt.n_side_args[0] || opt.n_side_args[1]))
			die("--server-arg-a/-b need --ab-server");
		for (int side = 0; side < 2; side++)
			if (!opt.ab_name[side])
				opt.ab_name[side] = side_name(side);
	} else if (!opt.url) {
		usage(stderr);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	static struct level_stats stats[2][MAX_LEVELS];
	const char *modes[2] = { "poll", "park" };
	int failed = 0, n_runs;

	parse_args(argc, argv);
	if (sodium_init() < 0)
		die("sodium_init failed");
	signal(SIGPIPE, SIG_IGN);
	human = opt.json ? stderr : stdout;
	if (opt.log_path) {
		log_file = fopen(opt.log_path, "w");
		if (!log_file)
			die("%s: %s", opt.log_path, strerror(errno));
	}
	n_runs = opt.ab ? 2 : 1;
	for (int r = 0; r < n_runs; r++) {
		const char *name = opt.ab ? opt.ab_name[r] : NULL;
		struct child ch = { 0 };
		struct target t;
		char url[300];

		if (opt.ab_server) {
			start_server(r, modes[r], &ch, url, sizeof(url));
			fprintf(stderr, "audio-loadgen: started %s (%s) at "
				"%s\n", opt.ab_server, side_name(r), url);
			parse_url(url, &t);
		} else {
			parse_url(!opt.ab ? opt.url : r ? opt.url_park :
				  opt.url_poll, &t);
		}
		print_header(name);
		for (int i = 0; i < opt.n_levels; i++) {
			struct level_stats *st = &stats[r][i];

			run_level(&t, name, opt.levels[i], st);
			failed |= st->errors + st->warmup_errors > 0;
			print_row(st);
			if (opt.json)
				print_json(st);
		}
		if (opt.ab_server && stop_server(name, &ch) != 0)
			failed = 1;
	}
	if (opt.ab)
		print_ab(stats[0], stats[1], opt.n_levels);
	if (opt.plot) {
		const struct level_stats *sets[2] = { stats[0], stats[1] };

		if (write_plot(opt.plot, sets, opt.ab ? opt.ab_name :
			       (const char *[]){ NULL, NULL }, n_runs,
			       opt.n_levels) != 0)
			failed = 1;
	}
	if (log_file)
		fclose(log_file);
	return failed;
}
