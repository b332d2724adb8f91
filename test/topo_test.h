/* SPDX-License-Identifier: MIT */
/*
 * test/topo_test.h - one check, two tests: TOPO_TEST(name, seconds)
 * { body } runs body with `const struct topo *t` set to each topology
 * (test/lib/topo.h), as Test(spsc, name) and Test(mpsc, name), so that a
 * behaviour both topologies share is written once and still reported per
 * topology.
 */
#ifndef LULL_TEST_TOPO_TEST_H
#define LULL_TEST_TOPO_TEST_H

#include <criterion/criterion.h>

#include "lib/topo.h"

#define TOPO_TEST(name, secs)                                                \
	static void name##_both(const struct topo *t);                       \
	Test(spsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_both(&topo_spsc);                                     \
	}                                                                    \
	Test(mpsc, name, .timeout = secs)                                    \
	{                                                                    \
		name##_both(&topo_mpsc);                                     \
	}                                                                    \
	static void name##_both(const struct topo *t)

#endif
