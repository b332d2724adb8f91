/* SPDX-License-Identifier: MIT */
/*
 * test/criterion_hook.h - include once in a Criterion suite that uses
 * test/lib: a failure test/lib reports on its own (tl_fail(): a timed join
 * that gave up, a watchdog that fired) becomes the running test's failed
 * assertion, with its message, instead of an abort.
 */
#ifndef LULL_TEST_CRITERION_HOOK_H
#define LULL_TEST_CRITERION_HOOK_H

#include <criterion/criterion.h>

#include "lib/fail.h"

static void criterion_fail_hook(const char *msg)
{
	cr_assert_fail("%s", msg);
}

__attribute__((constructor)) static void criterion_hook_install(void)
{
	tl_set_fail_hook(criterion_fail_hook);
}

#endif
