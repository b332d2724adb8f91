/* SPDX-License-Identifier: MIT */
/* test/lib/fail.c - see fail.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fail.h"

static tl_fail_hook fail_hook;

void tl_set_fail_hook(tl_fail_hook hook)
{
	fail_hook = hook;
}

void tl_fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (fail_hook)
		fail_hook(msg);
	fprintf(stderr, "FAIL: %s\n", msg);
	fflush(stderr);
	abort();
}
