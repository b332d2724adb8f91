/* SPDX-License-Identifier: MIT */
/*
 * speech.h - the OpenAI-style speech API: what a POST /v1/audio/speech
 * body may say (validated with cJSON), the voices, and the bytes the
 * server sends back (server-sent events with base64 PCM, a WAV header,
 * JSON error bodies).
 *
 * Audio everywhere is SPEECH_RATE Hz, signed 16-bit little-endian, mono.
 */
#ifndef AUDIO_SPEECH_H
#define AUDIO_SPEECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define SPEECH_RATE 24000u
#define SPEECH_MAX_INPUT_CHARS 4096u /* Unicode code points */
#define SPEECH_SPEED_MIN 0.25
#define SPEECH_SPEED_MAX 4.0
#define SPEECH_WAV_HEADER_BYTES 44u

enum speech_stream {
	SPEECH_WHOLE, /* one response with the whole audio */
	SPEECH_SSE,   /* server-sent events, base64 PCM deltas */
	SPEECH_AUDIO, /* raw PCM, one HTTP chunk per audio chunk */
};

enum speech_format { SPEECH_PCM, SPEECH_WAV };

/* An API voice and the espeak-ng voice that speaks it. */
struct speech_voice {
	const char *name;
	const char *espeak;
};

struct speech_request {
	char *input;        /* UTF-8, NUL-terminated, owned */
	size_t input_bytes;
	size_t input_chars;
	const struct speech_voice *voice;
	double speed;
	enum speech_format format;
	enum speech_stream stream;
};

/* A 4xx/5xx answer: status, and the fields of the JSON error object. */
struct api_error {
	int status;
	const char *type;  /* "invalid_request_error", ... */
	const char *param; /* the offending field, or NULL */
	char message[320];
};

/* The voice table, ended by an entry with a NULL name. */
#define SPEECH_NVOICES 13
extern const struct speech_voice speech_voices[SPEECH_NVOICES + 1];

/*
 * Validate a request body.  Returns 0 and fills @req (free it with
 * speech_request_fini()), or -1 and fills @err (a 400, or a 500 when out
 * of memory).
 */
int speech_request_parse(const char *body, size_t len,
			 struct speech_request *req, struct api_error *err);
void speech_request_fini(struct speech_request *req);

/*
 * Replace each byte of @text that is not part of a valid UTF-8 sequence
 * with '?', in place: text quoted from a client, or cut short by a length
 * limit, becomes valid UTF-8 for a JSON string.
 */
void utf8_sanitize(char *text);

/* Fill @err; printf-style message. */
void api_error_set(struct api_error *err, int status, const char *type,
		   const char *param, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* The JSON body of an error response.  Returns 0 or -ENOMEM. */
int api_error_json(struct buf *out, const struct api_error *err);

/*
 * One server-sent event, wrapped in one HTTP chunk when @chunked:
 *   delta: event speech.audio.delta with @bytes of PCM in base64;
 *   done:  event speech.audio.done with the usage;
 *   error: event speech.audio.error with a message and an error type.
 * Each returns 0 or -ENOMEM.
 */
int speech_sse_delta(struct buf *out, const void *pcm, size_t bytes,
		     bool chunked);
int speech_sse_done(struct buf *out, size_t input_chars, uint64_t samples,
		    bool chunked);
int speech_sse_error(struct buf *out, const char *message, const char *type,
		     bool chunked);

/* The 44-byte RIFF/WAVE header of @data_bytes of PCM. */
void speech_wav_header(uint8_t hdr[SPEECH_WAV_HEADER_BYTES],
		       uint32_t data_bytes);

#endif /* AUDIO_SPEECH_H */
