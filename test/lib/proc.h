/* SPDX-License-Identifier: MIT */
/*
 * test/lib/proc.h - what a thread of this process is doing, from
 * /proc/self/task/TID/{stat,status,syscall}, and where a ring's consumer
 * sleeps (the region's park word).
 *
 * "Parked" is a conjunction, never the thread state alone: the ring's park
 * word says the consumer announced a park (ring_park_word() != 0), and the
 * consumer's thread sleeps in the kernel (proc_thread_state() == 'S'),
 * ideally inside the backend's sleeping call (proc_thread_syscall()).
 *
 *	pid_t tid = gettid();          // in the thread, published to others
 *	...
 *	if (ring_park_word(ring) != RING_PARK_AWAKE &&
 *	    proc_thread_state(tid) == 'S') ... parked
 *
 * ring_park_word() reads the ring's region through the library's private
 * layout (lib/handles.h, lib/region.h): the program must be compiled with
 * -Ilib, as every test is; it uses no hidden symbol, so it works against
 * liblull.so too.
 */
#ifndef LULL_TEST_LIB_PROC_H
#define LULL_TEST_LIB_PROC_H

#include <stdint.h>
#include <sys/types.h>

#include <lull.h>

/* The state letter of thread @tid of this process ('R', 'S', ...), or 0. */
char proc_thread_state(pid_t tid);
/*
 * The system call number thread @tid is blocked in, -1 when it is running
 * in user space, -2 when /proc does not say (no such file or thread).
 */
long proc_thread_syscall(pid_t tid);
/* Voluntary (and, when @involuntary, involuntary) switches, or -1. */
long proc_thread_switches(pid_t tid, long *involuntary);

/* The park word of @ring's region: RING_PARK_AWAKE unless parked. */
#define RING_PARK_AWAKE 0u
uint32_t ring_park_word(const struct lull_ring *ring);

#endif
