/* SPDX-License-Identifier: MIT */
/*
 * buf.h - growable byte buffers for the audio server: request bodies,
 * responses being built, and the two halves of a connection's output.
 */
#ifndef AUDIO_BUF_H
#define AUDIO_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

/* Make room for @extra more bytes.  Returns 0 or -ENOMEM. */
int buf_reserve(struct buf *b, size_t extra);
/* Append @n bytes.  Returns 0 or -ENOMEM. */
int buf_append(struct buf *b, const void *data, size_t n);
/* Append a string. */
int buf_puts(struct buf *b, const char *s);
/* Append printf output.  Returns 0, -ENOMEM or -EINVAL (bad format). */
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Drop the first @n bytes. */
void buf_consume(struct buf *b, size_t n);
/* Empty it; free the memory when it grew beyond @keep bytes. */
void buf_clear(struct buf *b, size_t keep);
void buf_free(struct buf *b);

#endif /* AUDIO_BUF_H */
