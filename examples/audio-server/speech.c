/* SPDX-License-Identifier: MIT */
/*
 * speech.c - request validation and response encoding for the speech API
 * (see speech.h).
 *
 * JSON goes through cJSON both ways, except the audio delta, the one event
 * on the hot path: its only variable part is base64, which needs no JSON
 * escaping, so it is written straight into the output buffer, base64
 * included (sodium_bin2base64 encodes in place, no intermediate copy).
 */
#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "http.h"
#include "speech.h"

/*
 * OpenAI's voice names, each given a distinct espeak-ng voice and variant
 * (the "+xx" suffix picks a pitch and formant set: m = male, f = female).
 */
const struct speech_voice speech_voices[SPEECH_NVOICES + 1] = {
	{ "alloy", "en-us" },       { "ash", "en-us+m3" },
	{ "ballad", "en-gb-x-rp+m5" }, { "coral", "en-us+f2" },
	{ "echo", "en+m3" },        { "fable", "en-gb-x-rp" },
	{ "onyx", "en+m7" },        { "nova", "en-us+f3" },
	{ "sage", "en+f5" },        { "shimmer", "en+f4" },
	{ "verse", "en-us+m2" },    { "marin", "en-us+f1" },
	{ "cedar", "en-us+m1" },    { NULL, NULL },
};

#define INVALID "invalid_request_error"

void api_error_set(struct api_error *err, int status, const char *type,
		   const char *param, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	err->type = type;
	err->param = param;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

/*
 * The length of the valid UTF-8 sequence at @s (at most @len bytes), or 0
 * when there is none: overlong forms, surrogates, values past U+10FFFF
 * and sequences cut short are invalid.
 */
static size_t utf8_sequence(const unsigned char *s, size_t len)
{
	unsigned c = s[0], need, min, cp;

	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		need = 1, min = 0x80, cp = c & 0x1f;
	else if ((c & 0xf0) == 0xe0)
		need = 2, min = 0x800, cp = c & 0x0f;
	else if ((c & 0xf8) == 0xf0)
		need = 3, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if (len <= need)
		return 0;
	for (unsigned k = 1; k <= need; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return need + 1;
}

/* Code points in a UTF-8 string, or -1 when it is not valid UTF-8. */
static long utf8_chars(const unsigned char *s, size_t len)
{
	long chars = 0;
	size_t i = 0, n;

	while (i < len) {
		n = utf8_sequence(s + i, len - i);
		if (!n)
			return -1;
		i += n;
		chars++;
	}
	return chars;
}

void utf8_sanitize(char *text)
{
	unsigned char *s = (unsigned char *)text;
	size_t len = strlen(text), i = 0, n;

	while (i < len) {
		n = utf8_sequence(s + i, len - i);
		if (!n) {
			s[i] = '?';
			n = 1;
		}
		i += n;
	}
}

static const char *json_type_name(const cJSON *item)
{
	if (cJSON_IsString(item))
		return "a string";
	if (cJSON_IsNumber(item))
		return "a number";
	if (cJSON_IsBool(item))
		return "a boolean";
	if (cJSON_IsNull(item))
		return "null";
	if (cJSON_IsArray(item))
		return "an array";
	return "an object";
}

/* A string field: NULL when absent; -1 with @err set when not a string. */
static int get_string(const cJSON *root, const char *name, const char **out,
		      struct api_error *err)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, name);

	*out = NULL;
	if (!item)
		return 0;
	if (!cJSON_IsString(item) || !item->valuestring) {
		api_error_set(err, 400, INVALID, name,
			      "Invalid type for '%s': expected a string, but "
			      "got %s instead.",
			      name, json_type_name(item));
		return -1;
	}
	*out = item->valuestring;
	return 0;
}

static int parse_input(const cJSON *root, struct speech_request *req,
		       struct api_error *err)
{
	const char *input;
	size_t len, i;
	long chars;

	if (get_string(root, "input", &input, err))
		return -1;
	if (!input) {
		api_error_set(err, 400, INVALID, "input",
			      "Missing required parameter: 'input'.");
		return -1;
	}
	len = strlen(input);
	for (i = 0; i < len; i++)
		if (input[i] != ' ' && input[i] != '\t' && input[i] != '\n' &&
		    input[i] != '\r')
			break;
	if (i == len) {
		api_error_set(err, 400, INVALID, "input",
			      "'input' is empty: give the text to speak.");
		return -1;
	}
	chars = utf8_chars((const unsigned char *)input, len);
	if (chars < 0) {
		api_error_set(err, 400, INVALID, "input",
			      "'input' is not valid UTF-8.");
		return -1;
	}
	if ((size_t)chars > SPEECH_MAX_INPUT_CHARS) {
		api_error_set(err, 400, INVALID, "input",
			      "'input' is %ld characters long; the limit is "
			      "%u characters.",
			      chars, SPEECH_MAX_INPUT_CHARS);
		return -1;
	}
	req->input = strdup(input);
	if (!req->input) {
		api_error_set(err, 500, "server_error", NULL, "Out of memory.");
		return -1;
	}
	req->input_bytes = len;
	req->input_chars = (size_t)chars;
	return 0;
}

static int parse_voice(const cJSON *root, struct speech_request *req,
		       struct api_error *err)
{
	char names[160];
	const char *voice;
	size_t n = 0;

	if (get_string(root, "voice", &voice, err))
		return -1;
	if (!voice)
		voice = "alloy";
	for (const struct speech_voice *v = speech_voices; v->name; v++)
		if (strcmp(v->name, voice) == 0) {
			req->voice = v;
			return 0;
		}
	/* The names are ours and fit; a longer list would just be cut. */
	names[0] = '\0';
	for (const struct speech_voice *v = speech_voices;
	     v->name && n < sizeof(names); v++)
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
				      n ? ", " : "", v->name);
	api_error_set(err, 400, INVALID, "voice",
		      "Unknown voice '%.64s'. Supported voices: %s.", voice,
		      names);
	return -1;
}

static int parse_speed(const cJSON *root, struct speech_request *req,
		       struct api_error *err)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(root, "speed");

	req->speed = 1.0;
	if (!item)
		return 0;
	if (!cJSON_IsNumber(item)) {
		api_error_set(err, 400, INVALID, "speed",
			      "Invalid type for 'speed': expected a number, "
			      "but got %s instead.",
			      json_type_name(item));
		return -1;
	}
	if (!(item->valuedouble >= SPEECH_SPEED_MIN &&
	      item->valuedouble <= SPEECH_SPEED_MAX)) {
		api_error_set(err, 400, INVALID, "speed",
			      "'speed' must be between 0.25 and 4.0; got %g.",
			      item->valuedouble);
		return -1;
	}
	req->speed = item->valuedouble;
	return 0;
}

/* stream, stream_format and response_format, which depend on each other. */
static int parse_mode(const cJSON *root, struct speech_request *req,
		      struct api_error *err)
{
	const cJSON *stream = cJSON_GetObjectItemCaseSensitive(root, "stream");
	const char *fmt, *sfmt;

	if (stream && !cJSON_IsBool(stream)) {
		api_error_set(err, 400, INVALID, "stream",
			      "Invalid type for 'stream': expected a boolean, "
			      "but got %s instead.",
			      json_type_name(stream));
		return -1;
	}
	if (get_string(root, "stream_format", &sfmt, err) ||
	    get_string(root, "response_format", &fmt, err))
		return -1;
	req->stream = stream && cJSON_IsTrue(stream) ? SPEECH_SSE
						     : SPEECH_WHOLE;
	if (sfmt && strcmp(sfmt, "sse") == 0) {
		req->stream = SPEECH_SSE;
	} else if (sfmt && strcmp(sfmt, "audio") == 0) {
		req->stream = SPEECH_AUDIO;
	} else if (sfmt) {
		api_error_set(err, 400, INVALID, "stream_format",
			      "Unsupported stream_format '%.32s'. Supported: "
			      "sse, audio.",
			      sfmt);
		return -1;
	}
	/* Streams carry PCM; a whole response defaults to a WAV file. */
	if (!fmt)
		fmt = req->stream == SPEECH_WHOLE ? "wav" : "pcm";
	if (strcmp(fmt, "pcm") == 0) {
		req->format = SPEECH_PCM;
	} else if (strcmp(fmt, "wav") == 0 && req->stream == SPEECH_WHOLE) {
		req->format = SPEECH_WAV;
	} else if (strcmp(fmt, "wav") == 0) {
		api_error_set(err, 400, INVALID, "response_format",
			      "response_format 'wav' needs the whole audio; "
			      "streamed responses carry 'pcm' (24 kHz, 16-bit "
			      "little-endian, mono).");
		return -1;
	} else {
		api_error_set(err, 400, INVALID, "response_format",
			      "Unsupported response_format '%.32s'. Supported: "
			      "pcm, wav.",
			      fmt);
		return -1;
	}
	return 0;
}

int speech_request_parse(const char *body, size_t len,
			 struct speech_request *req, struct api_error *err)
{
	const char *end = NULL, *model;
	cJSON *root;
	int ret = -1;

	memset(req, 0, sizeof(*req));
	if (!len) {
		api_error_set(err, 400, INVALID, NULL,
			      "The request body is empty: expected a JSON "
			      "object.");
		return -1;
	}
	root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
	if (root && end) /* only white space may follow the value */
		while (end < body + len &&
		       (*end == ' ' || *end == '\t' || *end == '\n' ||
			*end == '\r'))
			end++;
	if (!root || end != body + len) {
		api_error_set(err, 400, INVALID, NULL,
			      "We could not parse the JSON body of your "
			      "request: %s at byte %td.",
			      root ? "unexpected data after the JSON value"
				   : "invalid JSON",
			      end ? end - body : (ptrdiff_t)0);
		cJSON_Delete(root);
		return -1;
	}
	if (!cJSON_IsObject(root)) {
		api_error_set(err, 400, INVALID, NULL,
			      "The request body must be a JSON object, not "
			      "%s.",
			      json_type_name(root));
		goto out;
	}
	/* Any model name is accepted: there is one engine. */
	if (get_string(root, "model", &model, err) ||
	    parse_input(root, req, err) || parse_voice(root, req, err) ||
	    parse_speed(root, req, err) || parse_mode(root, req, err))
		goto out;
	ret = 0;
out:
	cJSON_Delete(root);
	if (ret)
		speech_request_fini(req);
	return ret;
}

void speech_request_fini(struct speech_request *req)
{
	free(req->input);
	req->input = NULL;
}

/* Print @obj without spaces and append it; frees @obj. */
static int append_json(struct buf *out, cJSON *obj)
{
	char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
	int ret = text ? buf_puts(out, text) : -ENOMEM;

	free(text);
	cJSON_Delete(obj);
	return ret;
}

static cJSON *error_object(const char *message, const char *type,
			   const char *param)
{
	cJSON *e = cJSON_CreateObject();
	cJSON *m = e ? cJSON_AddStringToObject(e, "message", message) : NULL;

	/*
	 * Messages quote what a client sent (a voice, a path), cut to a
	 * length that may split a character: JSON must stay valid UTF-8.
	 */
	if (m)
		utf8_sanitize(m->valuestring);
	if (!e || !m ||
	    !cJSON_AddStringToObject(e, "type", type) ||
	    !(param ? cJSON_AddStringToObject(e, "param", param)
		    : cJSON_AddNullToObject(e, "param")) ||
	    !cJSON_AddNullToObject(e, "code")) {
		cJSON_Delete(e);
		return NULL;
	}
	return e;
}

int api_error_json(struct buf *out, const struct api_error *err)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *e = error_object(err->message, err->type, err->param);

	if (!root || !e || !cJSON_AddItemToObject(root, "error", e)) {
		cJSON_Delete(root);
		cJSON_Delete(e);
		return -ENOMEM;
	}
	return append_json(out, root);
}

/* An event whose data is @obj, in one HTTP chunk when @chunked. */
static int sse_event(struct buf *out, const char *event, cJSON *obj,
		     bool chunked)
{
	char *data = obj ? cJSON_PrintUnformatted(obj) : NULL;
	size_t len;
	int ret = -ENOMEM;

	cJSON_Delete(obj);
	if (!data)
		return -ENOMEM;
	len = strlen("event: ") + strlen(event) + strlen("\ndata: ") +
	      strlen(data) + 2;
	if ((!chunked || !(ret = http_chunk_open(out, len))) &&
	    !(ret = buf_printf(out, "event: %s\ndata: %s\n\n", event, data)) &&
	    chunked)
		ret = http_chunk_close(out);
	free(data);
	return ret;
}

int speech_sse_delta(struct buf *out, const void *pcm, size_t bytes,
		     bool chunked)
{
	static const char head[] = "event: speech.audio.delta\ndata: "
				   "{\"type\":\"speech.audio.delta\","
				   "\"audio\":\"";
	static const char tail[] = "\"}\n\n";
	size_t b64 = sodium_base64_ENCODED_LEN(bytes,
					       sodium_base64_VARIANT_ORIGINAL);
	size_t len = sizeof(head) - 1 + (b64 - 1) + sizeof(tail) - 1;
	int ret;

	if (chunked && (ret = http_chunk_open(out, len)))
		return ret;
	/* b64 counts the NUL that sodium writes; the tail overwrites it. */
	ret = buf_reserve(out, len + 1 + (chunked ? 2 : 0));
	if (ret)
		return ret;
	memcpy(out->data + out->len, head, sizeof(head) - 1);
	out->len += sizeof(head) - 1;
	sodium_bin2base64(out->data + out->len, b64, pcm, bytes,
			  sodium_base64_VARIANT_ORIGINAL);
	out->len += b64 - 1;
	memcpy(out->data + out->len, tail, sizeof(tail) - 1);
	out->len += sizeof(tail) - 1;
	return chunked ? http_chunk_close(out) : 0;
}

int speech_sse_done(struct buf *out, size_t input_chars, uint64_t samples,
		    bool chunked)
{
	cJSON *root = cJSON_CreateObject(), *usage = cJSON_CreateObject();
	double seconds = round((double)samples * 1000.0 / SPEECH_RATE) / 1000;

	if (!root || !usage ||
	    !cJSON_AddStringToObject(root, "type", "speech.audio.done") ||
	    !cJSON_AddNumberToObject(usage, "input_characters",
				     (double)input_chars) ||
	    !cJSON_AddNumberToObject(usage, "output_samples",
				     (double)samples) ||
	    !cJSON_AddNumberToObject(usage, "audio_seconds", seconds) ||
	    !cJSON_AddItemToObject(root, "usage", usage)) {
		cJSON_Delete(root);
		cJSON_Delete(usage);
		return -ENOMEM;
	}
	return sse_event(out, "speech.audio.done", root, chunked);
}

int speech_sse_error(struct buf *out, const char *message, const char *type,
		     bool chunked)
{
	cJSON *root = cJSON_CreateObject();
	cJSON *e = error_object(message, type, NULL);

	if (!root || !e ||
	    !cJSON_AddStringToObject(root, "type", "speech.audio.error") ||
	    !cJSON_AddItemToObject(root, "error", e)) {
		cJSON_Delete(root);
		cJSON_Delete(e);
		return -ENOMEM;
	}
	return sse_event(out, "speech.audio.error", root, chunked);
}

static void put_le(uint8_t *p, uint32_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void speech_wav_header(uint8_t hdr[SPEECH_WAV_HEADER_BYTES],
		       uint32_t data_bytes)
{
	memcpy(hdr, "RIFF", 4);
	put_le(hdr + 4, 36 + data_bytes, 4);
	memcpy(hdr + 8, "WAVEfmt ", 8);
	put_le(hdr + 16, 16, 4);              /* fmt chunk size */
	put_le(hdr + 20, 1, 2);               /* PCM */
	put_le(hdr + 22, 1, 2);               /* mono */
	put_le(hdr + 24, SPEECH_RATE, 4);     /* sample rate */
	put_le(hdr + 28, SPEECH_RATE * 2, 4); /* byte rate */
	put_le(hdr + 32, 2, 2);               /* block align */
	put_le(hdr + 34, 16, 2);              /* bits per sample */
	memcpy(hdr + 36, "data", 4);
	put_le(hdr + 40, data_bytes, 4);
}
