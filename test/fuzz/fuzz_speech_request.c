/* SPDX-License-Identifier: MIT */
/*
 * fuzz_speech_request.c - libFuzzer target for the audio server's speech
 * request handling (examples/audio-server/speech.c): the JSON body of
 * POST /v1/audio/speech, validated, and the JSON error it may earn.
 *
 * The input is a request body.  A body the parser accepts must give a
 * request within every limit (its text NUL-terminated, valid UTF-8, no
 * longer than the character limit; a known voice; a speed in range); a
 * body it rejects must give a 400 (or a 500 when out of memory) whose
 * JSON error body is valid UTF-8 and parses back to the same message,
 * since the message may quote what the client sent.  The events a stream
 * ends with are built for accepted requests, as the server does.
 *
 * Build: make build/fuzz/fuzz_speech_request (clang, -fsanitize=fuzzer)
 * Run:   build/fuzz/fuzz_speech_request -max_total_time=600 CORPUS_DIR \
 *            test/fuzz/corpus/speech_request
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "speech.h"

#define require(cond) ((cond) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Strict UTF-8 (RFC 3629), written apart from speech.c's on purpose. */
static bool valid_utf8(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t n;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			n = 2, cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 3, cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 4, cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i < n)
			return false;
		for (size_t k = 1; k < n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n;
	}
	return true;
}

static void check_accepted(const struct speech_request *req)
{
	struct buf out = { 0 };

	require(req->input != NULL);
	require(strlen(req->input) == req->input_bytes);
	require(valid_utf8((const unsigned char *)req->input,
			   req->input_bytes));
	require(req->input_chars >= 1 &&
		req->input_chars <= SPEECH_MAX_INPUT_CHARS);
	require(req->input_chars <= req->input_bytes);
	require(req->voice != NULL && req->voice->name != NULL);
	require(req->speed >= SPEECH_SPEED_MIN &&
		req->speed <= SPEECH_SPEED_MAX);
	require(req->format == SPEECH_PCM || req->format == SPEECH_WAV);
	require(req->format == SPEECH_PCM || req->stream == SPEECH_WHOLE);
	require(speech_sse_done(&out, req->input_chars, 24000, true) == 0);
	require(speech_sse_error(&out, req->input, "server_error", false) ==
		0);
	require(valid_utf8((const unsigned char *)out.data, out.len));
	buf_free(&out);
}

static void check_rejected(const struct api_error *err)
{
	struct buf out = { 0 };
	const cJSON *message;
	cJSON *doc;

	require(err->status == 400 || err->status == 500);
	require(err->type != NULL);
	require(memchr(err->message, '\0', sizeof(err->message)) != NULL);
	require(api_error_json(&out, err) == 0);
	require(valid_utf8((const unsigned char *)out.data, out.len));
	doc = cJSON_ParseWithLength(out.data, out.len);
	require(doc != NULL);
	message = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(doc, "error"), "message");
	require(cJSON_IsString(message));
	/* The same text, but for bytes replaced to keep it valid UTF-8. */
	require(strlen(message->valuestring) == strlen(err->message));
	cJSON_Delete(doc);
	buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct speech_request req;
	struct api_error err = { 0 };

	if (speech_request_parse((const char *)data, size, &req, &err) == 0) {
		check_accepted(&req);
		speech_request_fini(&req);
	} else {
		check_rejected(&err);
	}
	return 0;
}
