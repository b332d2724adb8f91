/* SPDX-License-Identifier: MIT */
/*
 * fuzz_http_reader.c - libFuzzer target for the audio server's HTTP
 * request reader (examples/audio-server/http.c).
 *
 * The input is one connection's bytes, after a 3-byte prefix that says how
 * they arrive: byte 0's low bit turns pipelining on (answer a request,
 * then read the next one from the same bytes, as a keep-alive connection
 * does), bytes 1-2 seed the sizes of the pieces the bytes arrive in (from
 * one byte to a whole receive buffer, as recv() may cut them).  The
 * harness keeps the server's own input buffer and its feed loop, so a
 * piece is appended only where there is room, and checks what the reader
 * promises: it never consumes more than it was given, a request it
 * returns is within every limit, an error carries a status the server
 * knows.  AddressSanitizer and UBSan catch the rest.
 *
 * Build: make build/fuzz/fuzz_http_reader (clang, -fsanitize=fuzzer)
 * Run:   build/fuzz/fuzz_http_reader -max_total_time=600 CORPUS_DIR \
 *            test/fuzz/corpus/http_reader
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

#define IN_BUFFER 16384u  /* as server.c: unparsed input */
#define RECV_BUFFER 4096u /* as server.c: what one recv may bring */

/* A failed promise is a crash, which libFuzzer reports with the input. */
#define require(cond) ((cond) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t next_random(uint32_t *state)
{
	/* xorshift32: any seed but 0 gives a full period. */
	*state ^= *state << 13;
	*state ^= *state >> 17;
	*state ^= *state << 5;
	return *state;
}

/* The size of the next piece: mostly small, sometimes a whole buffer. */
static size_t piece_size(uint32_t *state)
{
	uint32_t r = next_random(state);

	switch (r & 3) {
	case 0: return 1;
	case 1: return 1 + (r >> 2) % 8;
	case 2: return 1 + (r >> 2) % 256;
	default: return RECV_BUFFER;
	}
}

static bool known_status(int status)
{
	switch (status) {
	case 400: case 413: case 414: case 431: case 503: case 505:
		return true;
	default:
		return false;
	}
}

static void check_request(const struct http_request *req)
{
	size_t path_len = strnlen(req->path, sizeof(req->path));

	require(path_len < sizeof(req->path));
	require(path_len <= HTTP_MAX_URL_BYTES);
	require(req->body.len <= HTTP_MAX_BODY_BYTES);
	require(req->body.len <= req->body.cap);
	require(req->http_major == 1);
	require(http_method_str(req->method) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char in[IN_BUFFER];
	struct http_reader reader;
	uint32_t seed;
	bool pipelining;
	size_t in_len = 0, off = 3;

	if (size < 3)
		return 0;
	pipelining = data[0] & 1;
	seed = (uint32_t)data[1] << 8 | data[2] | 0x10000u;
	http_reader_init(&reader);
	while (off < size) {
		size_t piece = piece_size(&seed), room = IN_BUFFER - in_len;

		/* A full buffer is not read from: the server waits too. */
		if (!room)
			break;
		if (piece > room)
			piece = room;
		if (piece > size - off)
			piece = size - off;
		memcpy(in + in_len, data + off, piece);
		in_len += piece;
		off += piece;
		while (in_len) { /* server.c's conn_input() */
			size_t used = 0;
			enum http_feed r;

			r = http_reader_feed(&reader, in, in_len, &used);
			require(used <= in_len);
			memmove(in, in + used, in_len - used);
			in_len -= used;
			if (r == HTTP_FEED_MORE)
				break;
			if (r == HTTP_FEED_ERROR) {
				require(known_status(reader.error));
				require(reader.error_text != NULL);
				goto done; /* answered, then closed */
			}
			check_request(&reader.req);
			if (!pipelining || !reader.req.keep_alive)
				goto done;
			http_reader_next(&reader);
		}
	}
done:
	http_reader_fini(&reader);
	return 0;
}
