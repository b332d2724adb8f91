/* SPDX-License-Identifier: MIT */
/*
 * http.c - the request reader on http_parser and response framing (see
 * http.h).
 *
 * http_parser calls back per piece of the request as bytes arrive, keeps
 * no copy of them, and handles chunked request bodies, keep-alive rules
 * and pipelining.  The callbacks here copy only what the server uses (the
 * path, the body, the Expect header), count header bytes against our own
 * limit, and pause the parser at the end of each message, so that one
 * request is answered before the next one is read.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"

static struct http_reader *reader_of(http_parser *p)
{
	return p->data;
}

/*
 * Note the status and message to answer with, and return -1 so that the
 * callback stops the parser (any value but 0, 1 and 2 is an error).
 */
static int reject(struct http_reader *r, int status, const char *text)
{
	r->error = status;
	r->error_text = text;
	return -1;
}

/* Count request line and header bytes; fail with 431 past the limit. */
static int count_header(struct http_reader *r, size_t len)
{
	r->header_bytes += len;
	if (r->header_bytes <= HTTP_MAX_HEADER_BYTES)
		return 0;
	return reject(r, 431, "The request line and headers exceed 8192 bytes");
}

static int on_message_begin(http_parser *p)
{
	struct http_reader *r = reader_of(p);

	r->header_bytes = 0;
	r->url_len = 0;
	r->field_len = 0;
	r->field_is_expect = false;
	r->last_was_value = false;
	r->expect_len = 0;
	r->send_continue = false;
	r->req.body.len = 0;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct http_reader *r = reader_of(p);

	if (count_header(r, len))
		return -1;
	if (len > HTTP_MAX_URL_BYTES - r->url_len)
		return reject(r, 414, "The request target exceeds 2048 bytes");
	memcpy(r->url + r->url_len, at, len);
	r->url_len += len;
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct http_reader *r = reader_of(p);
	size_t room;

	if (count_header(r, len))
		return -1;
	if (r->last_was_value) { /* a new header starts */
		r->field_len = 0;
		r->last_was_value = false;
	}
	/*
	 * Only short names matter: keep what fits and count the rest, so that
	 * a longer name never matches.  field_len runs past the buffer for a
	 * long name that arrives in pieces, so the room is only computed
	 * while it is inside.
	 */
	if (r->field_len < sizeof(r->field)) {
		room = sizeof(r->field) - r->field_len;
		memcpy(r->field + r->field_len, at, len < room ? len : room);
	}
	r->field_len += len;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct http_reader *r = reader_of(p);
	size_t room;

	if (count_header(r, len))
		return -1;
	if (!r->last_was_value) {
		r->last_was_value = true;
		r->field_is_expect = r->field_len == 6 &&
				     strncasecmp(r->field, "expect", 6) == 0;
		if (r->field_is_expect)
			r->expect_len = 0;
	}
	if (r->field_is_expect) {
		room = sizeof(r->expect) - 1 - r->expect_len;
		if (len > room)
			len = room;
		memcpy(r->expect + r->expect_len, at, len);
		r->expect_len += len;
		r->expect[r->expect_len] = '\0';
	}
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct http_reader *r = reader_of(p);
	struct http_parser_url u;

	if (p->flags & F_CONTENTLENGTH &&
	    p->content_length > HTTP_MAX_BODY_BYTES)
		return reject(r, 413, "The request body exceeds 65536 bytes");
	if (p->http_major != 1)
		return reject(r, 505,
			      "Only HTTP/1.0 and HTTP/1.1 are supported");
	r->url[r->url_len] = '\0';
	http_parser_url_init(&u);
	if (http_parser_parse_url(r->url, r->url_len, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_PATH)))
		return reject(r, 400, "The request target is not a valid path");
	memcpy(r->req.path, r->url + u.field_data[UF_PATH].off,
	       u.field_data[UF_PATH].len);
	r->req.path[u.field_data[UF_PATH].len] = '\0';
	r->req.method = (enum http_method)p->method;
	r->req.http_major = p->http_major;
	r->req.http_minor = p->http_minor;
	r->send_continue = r->expect_len == 12 &&
			   strncasecmp(r->expect, "100-continue", 12) == 0 &&
			   p->http_major == 1 && p->http_minor >= 1;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct http_reader *r = reader_of(p);

	/* A chunked body has no Content-Length to check up front. */
	if (len > HTTP_MAX_BODY_BYTES - r->req.body.len)
		return reject(r, 413, "The request body exceeds 65536 bytes");
	if (buf_append(&r->req.body, at, len) < 0)
		return reject(r, 503, "Out of memory");
	return 0;
}

static int on_message_complete(http_parser *p)
{
	struct http_reader *r = reader_of(p);

	r->req.keep_alive = http_should_keep_alive(p) && !p->upgrade;
	/* One request at a time: the rest waits for http_reader_next(). */
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

void http_reader_init(struct http_reader *r)
{
	memset(r, 0, sizeof(*r));
	http_parser_init(&r->parser, HTTP_REQUEST);
	r->parser.data = r;
}

void http_reader_fini(struct http_reader *r)
{
	buf_free(&r->req.body);
}

enum http_feed http_reader_feed(struct http_reader *r, const char *data,
				size_t len, size_t *used)
{
	enum http_errno err;

	*used = http_parser_execute(&r->parser, &settings, data, len);
	err = HTTP_PARSER_ERRNO(&r->parser);
	if (err == HPE_PAUSED)
		return HTTP_FEED_REQUEST;
	if (err == HPE_OK)
		return HTTP_FEED_MORE;
	if (!r->error) {
		r->error = err == HPE_HEADER_OVERFLOW ? 431 : 400;
		r->error_text = http_errno_description(err);
	}
	return HTTP_FEED_ERROR;
}

void http_reader_next(struct http_reader *r)
{
	http_parser_pause(&r->parser, 0);
	r->send_continue = false;
	/* Keep a modest body buffer for the next request, not a large one. */
	buf_clear(&r->req.body, 16384);
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

int http_head(struct buf *out, int status, const char *content_type,
	      long long length, bool keep_alive, const char *extra)
{
	int ret;

	ret = buf_printf(out, "HTTP/1.1 %d %s\r\nServer: lull-audio-server\r\n",
			 status, http_reason(status));
	if (!ret && content_type)
		ret = buf_printf(out, "Content-Type: %s\r\n", content_type);
	if (!ret && length >= 0)
		ret = buf_printf(out, "Content-Length: %lld\r\n", length);
	else if (!ret && length == HTTP_BODY_CHUNKED)
		ret = buf_puts(out, "Transfer-Encoding: chunked\r\n");
	if (!ret)
		ret = buf_puts(out, keep_alive ? "Connection: keep-alive\r\n"
					       : "Connection: close\r\n");
	if (!ret && extra)
		ret = buf_puts(out, extra);
	if (!ret)
		ret = buf_puts(out, "\r\n");
	return ret;
}

int http_chunk_open(struct buf *out, size_t len)
{
	return buf_printf(out, "%zx\r\n", len);
}

int http_chunk_close(struct buf *out)
{
	return buf_append(out, "\r\n", 2);
}

int http_chunk_last(struct buf *out)
{
	return buf_append(out, "0\r\n\r\n", 5);
}
