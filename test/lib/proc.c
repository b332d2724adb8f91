/* SPDX-License-Identifier: MIT */
/* test/lib/proc.c - see proc.h. */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

/* The library's private layout: the region behind a handle. */
#include "handles.h"
#include "region.h"

_Static_assert(RING_PARK_AWAKE == LULL_PARK_AWAKE, "park word layout");

static bool read_task_file(pid_t tid, const char *name, char *buf,
			   size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

char proc_thread_state(pid_t tid)
{
	char buf[512], *p;

	if (!read_task_file(tid, "stat", buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

long proc_thread_syscall(pid_t tid)
{
	char buf[256];

	if (!read_task_file(tid, "syscall", buf, sizeof(buf)))
		return -2;
	if (buf[0] < '0' || buf[0] > '9')
		return -1; /* "running" */
	return strtol(buf, NULL, 10);
}

long proc_thread_switches(pid_t tid, long *involuntary)
{
	char buf[4096], *p;
	long vol = -1;

	if (!read_task_file(tid, "status", buf, sizeof(buf)))
		return -1;
	p = strstr(buf, "\nvoluntary_ctxt_switches:");
	if (p)
		vol = strtol(p + strlen("\nvoluntary_ctxt_switches:"), NULL,
			     10);
	if (involuntary) {
		p = strstr(buf, "\nnonvoluntary_ctxt_switches:");
		*involuntary = p ? strtol(p + strlen("\nnonvoluntary_ctxt_"
						     "switches:"),
					  NULL, 10)
				 : -1;
	}
	return vol;
}

uint32_t ring_park_word(const struct lull_ring *ring)
{
	return atomic_load_explicit(&ring->region->park, memory_order_relaxed);
}
