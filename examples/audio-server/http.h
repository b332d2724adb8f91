/* SPDX-License-Identifier: MIT */
/*
 * http.h - HTTP/1.1 for the audio server: an incremental request reader
 * on top of http_parser (one request at a time, keep-alive and pipelining,
 * size limits) and helpers that frame responses (status line and headers,
 * chunked transfer encoding).
 *
 * Limits (a client that exceeds one gets the status in brackets, and the
 * connection is closed after the response; so does an HTTP version other
 * than 1.x, with 505):
 *   request line + headers  HTTP_MAX_HEADER_BYTES  (431)
 *   request target          HTTP_MAX_URL_BYTES     (414)
 *   body                    HTTP_MAX_BODY_BYTES    (413)
 */
#ifndef AUDIO_HTTP_H
#define AUDIO_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <http_parser.h>

#include "buf.h"

#define HTTP_MAX_HEADER_BYTES 8192u
#define HTTP_MAX_URL_BYTES 2048u
#define HTTP_MAX_BODY_BYTES 65536u

/* What http_reader_feed() found. */
enum http_feed {
	HTTP_FEED_MORE,    /* consumed everything; need more bytes */
	HTTP_FEED_REQUEST, /* a whole request is ready in reader->req */
	HTTP_FEED_ERROR,   /* bad request: reader->error holds the status */
};

struct http_request {
	enum http_method method;
	char path[HTTP_MAX_URL_BYTES + 1]; /* without the query string */
	struct buf body;
	unsigned short http_major, http_minor;
	bool keep_alive;
};

struct http_reader {
	http_parser parser;
	struct http_request req;
	int error;              /* status to answer with after an error */
	const char *error_text; /* what was wrong, for the error body */
	bool send_continue;     /* "Expect: 100-continue" seen: say so */
	/* private */
	size_t header_bytes;
	size_t url_len;
	char url[HTTP_MAX_URL_BYTES + 1];
	char field[16];
	size_t field_len;
	bool field_is_expect;
	bool last_was_value;
	char expect[32];
	size_t expect_len;
};

void http_reader_init(struct http_reader *r);
void http_reader_fini(struct http_reader *r);

/*
 * Parse what arrived.  *used is set to the bytes consumed: on
 * HTTP_FEED_REQUEST the bytes after the request stay unparsed (a pipelined
 * request) until http_reader_next().
 */
enum http_feed http_reader_feed(struct http_reader *r, const char *data,
				size_t len, size_t *used);

/* The request was answered: get ready for the next one. */
void http_reader_next(struct http_reader *r);

/* The standard reason phrase of a status code. */
const char *http_reason(int status);

/*
 * Append a status line and headers.  @length: the Content-Length, or
 * HTTP_BODY_CHUNKED (Transfer-Encoding: chunked) or HTTP_BODY_TO_CLOSE
 * (HTTP/1.0: the body ends when the connection closes).  @extra: more
 * header lines, each ending in "\r\n", or NULL.  Returns 0 or -ENOMEM.
 */
#define HTTP_BODY_CHUNKED (-1LL)
#define HTTP_BODY_TO_CLOSE (-2LL)
int http_head(struct buf *out, int status, const char *content_type,
	      long long length, bool keep_alive, const char *extra);

/* Chunked framing: the size line of a @len-byte chunk, its end, the end of
 * the body.  Returns 0 or -ENOMEM. */
int http_chunk_open(struct buf *out, size_t len);
int http_chunk_close(struct buf *out);
int http_chunk_last(struct buf *out);

#endif /* AUDIO_HTTP_H */
