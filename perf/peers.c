/* SPDX-License-Identifier: MIT */
/*
 * peers.c - the rings throughput knows, in the order of its table.  The
 * Makefile builds peer_rte.c and peer_urcu.c, and defines HAVE_RTE_RING and
 * HAVE_URCU_WFCQ, only where pkg-config finds libdpdk and liburcu, and the
 * C++ peers peer_boost.cpp and peer_moodycamel.cpp, defining
 * HAVE_BOOST_LOCKFREE and HAVE_MOODYCAMEL, only where the C++ compiler
 * finds their headers; without them a ring here has a name and nothing
 * else, and throughput --help lists it as not built.
 */
#include "throughput.h"

extern const struct peer_ring tp_lull_spsc, tp_lull_mpsc, tp_lull_lanes;
extern const struct peer_ring tp_ck_spsc, tp_ck_mpmc, tp_ck_mpsc;
extern const struct peer_ring tp_pipe, tp_eventfd;

#ifdef HAVE_RTE_RING
extern const struct peer_ring tp_rte_spsc, tp_rte_mpsc;
#else
static const struct peer_ring tp_rte_spsc = {
	.name = "rte-spsc", .cls = CLASS_SPSC, .push_batch = 1,
};
static const struct peer_ring tp_rte_mpsc = {
	.name = "rte-mpsc", .cls = CLASS_MPSC, .target = true, .push_batch = 1,
};
#endif

#ifdef HAVE_URCU_WFCQ
extern const struct peer_ring tp_urcu_wfcq;
#else
static const struct peer_ring tp_urcu_wfcq = {
	.name = "urcu-wfcq", .cls = CLASS_MPSC, .target = true,
};
#endif

#ifdef HAVE_BOOST_LOCKFREE
extern const struct peer_ring tp_boost_spsc, tp_boost_spsc_bulk;
#else
static const struct peer_ring tp_boost_spsc = {
	.name = "boost-spsc", .cls = CLASS_SPSC,
};
static const struct peer_ring tp_boost_spsc_bulk = {
	.name = "boost-spsc-bulk", .cls = CLASS_SPSC, .push_batch = 32,
};
#endif

#ifdef HAVE_MOODYCAMEL
extern const struct peer_ring tp_moodycamel;
#else
static const struct peer_ring tp_moodycamel = {
	.name = "moodycamel", .cls = CLASS_MPSC, .target = true,
	.push_batch = 1,
};
#endif

const struct peer_ring *const tp_rings[RING_KINDS] = {
	[RING_LULL_SPSC] = &tp_lull_spsc,
	[RING_LULL_MPSC] = &tp_lull_mpsc,
	[RING_LULL_LANES] = &tp_lull_lanes,
	[RING_CK_SPSC] = &tp_ck_spsc,
	[RING_CK_MPMC] = &tp_ck_mpmc,
	[RING_CK_MPSC] = &tp_ck_mpsc,
	[RING_RTE_SPSC] = &tp_rte_spsc,
	[RING_RTE_MPSC] = &tp_rte_mpsc,
	[RING_URCU_WFCQ] = &tp_urcu_wfcq,
	[RING_BOOST_SPSC] = &tp_boost_spsc,
	[RING_BOOST_SPSC_BULK] = &tp_boost_spsc_bulk,
	[RING_MOODYCAMEL] = &tp_moodycamel,
	[RING_PIPE] = &tp_pipe,
	[RING_EVENTFD] = &tp_eventfd,
};
