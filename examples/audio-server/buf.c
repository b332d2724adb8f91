/* SPDX-License-Identifier: MIT */
/*
 * buf.c - growable byte buffers (see buf.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

int buf_reserve(struct buf *b, size_t extra)
{
	size_t cap;
	char *data;

	if (b->cap - b->len >= extra)
		return 0;
	if (extra > SIZE_MAX / 2 - b->len)
		return -ENOMEM;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra)
		cap *= 2;
	data = realloc(b->data, cap);
	if (!data)
		return -ENOMEM;
	b->data = data;
	b->cap = cap;
	return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
	int ret;

	if (!n)
		return 0;
	ret = buf_reserve(b, n);
	if (ret < 0)
		return ret;
	memcpy(b->data + b->len, data, n);
	b->len += n;
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, ret;

	/* One try in what is free, a second one with exactly enough room. */
	for (int pass = 0; pass < 2; pass++) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return 0;
		}
		ret = buf_reserve(b, (size_t)n + 1);
		if (ret < 0)
			return ret;
	}
	return -EINVAL;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void buf_clear(struct buf *b, size_t keep)
{
	b->len = 0;
	if (b->cap > keep)
		buf_free(b);
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}
