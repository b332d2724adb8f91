/* SPDX-License-Identifier: MIT */
/*
 * test/lib/threads.h - threads that cannot hang a test: timed joins,
 * watchdogs, flags with deadlines, clocks.
 *
 * A join that gives up after a deadline FAILS with a message; no test
 * relies on Criterion's .timeout (or a CI timeout) to notice a hang:
 *
 *	pthread_t th;
 *	if (thread_start(&th, worker_main, &w))  ... errno-style failure
 *	...
 *	thread_join_or_fail(th, 5000, "producer 2");  // tl_fail() after 5 s
 *
 * or, to assert yourself, thread_join_within() returns ETIMEDOUT.  A
 * watchdog guards a whole phase of a program (a stress round, a test
 * body): when it is not stopped within its time it prints what was
 * running and aborts the process (a Criterion test then reports a crash
 * with that message; a stress program exits non-zero).
 *
 *	struct watchdog wd;
 *	watchdog_start(&wd, 20, "round 7");
 *	...
 *	watchdog_stop(&wd);
 *
 * struct flag is a condvar-backed integer: flag_set() from one thread,
 * flag_wait(f, value, ms) in another, false on its deadline.
 */
#ifndef LULL_TEST_LIB_THREADS_H
#define LULL_TEST_LIB_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC, in ms and ns. */
uint64_t now_ms(void);
uint64_t now_ns(void);
void nap_us(unsigned us);

/* pthread_create with default attributes; 0 or the error number. */
int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg);
/*
 * Join @thread if it ends within @ms: 0 (its result in *@ret when @ret),
 * or ETIMEDOUT, the thread left running and still joinable.
 */
int thread_join_within(pthread_t thread, unsigned ms, void **ret);
/* The same, failing through tl_fail() with @what on the deadline. */
void *thread_join_or_fail(pthread_t thread, unsigned ms, const char *what);

struct flag {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int value;
};

void flag_init(struct flag *f);
void flag_destroy(struct flag *f);
void flag_set(struct flag *f, int value);
int flag_get(struct flag *f);
/* Wait until the flag is at least @value; false after @ms. */
bool flag_wait(struct flag *f, int value, unsigned ms);

struct watchdog {
	pthread_t thread;
	struct flag stop;
	unsigned seconds;
	char what[160];
	bool running;
};

/* Abort the process with "watchdog: @what ..." unless stopped in time. */
int watchdog_start(struct watchdog *wd, unsigned seconds, const char *what);
void watchdog_stop(struct watchdog *wd);

#endif
