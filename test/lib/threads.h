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
 * A long run that must only keep moving watches more than the clock:
 * watchdog_watch() also fires when the program's progress() stands still
 * for stall_s seconds, or when its check() finds something wrong (a
 * record committed long ago and still not delivered), looking every
 * tick_ms; its report() prints what each thread was doing before the
 * process aborts.
 *
 *	struct watchdog_watch w = { .progress = records_moved,
 *				    .stall_s = 60, .report = dump, .ctx = run };
 *	watchdog_watch(&wd, 0, "stress_ring mpsc4", &w);   // no deadline
 *
 * struct flag is a condvar-backed integer: flag_set() from one thread,
 * flag_wait(f, value, ms) in another, false on its deadline.
 */
#ifndef LULL_TEST_LIB_THREADS_H
#define LULL_TEST_LIB_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
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

/* What a watchdog looks at besides its deadline; any field may be 0. */
struct watchdog_watch {
	/* Fire when progress(ctx) returns one value for stall_s seconds. */
	uint64_t (*progress)(void *ctx);
	unsigned stall_s;
	/* Fire when check(ctx, ...) returns false, with why filled in. */
	bool (*check)(void *ctx, char *why, size_t size);
	/* When firing, after the message: print the program's state. */
	void (*report)(void *ctx);
	void *ctx;
	unsigned tick_ms; /* how often to look (0: every 100 ms) */
};

struct watchdog {
	pthread_t thread;
	struct flag stop;
	unsigned seconds;
	struct watchdog_watch watch;
	char what[160];
	bool running;
};

/*
 * Abort the process with "watchdog: @what ..." unless stopped within
 * @seconds; 0 or the error number of pthread_create.
 */
int watchdog_start(struct watchdog *wd, unsigned seconds, const char *what);
/*
 * The same, also firing on what @watch says (copied); @seconds 0: no
 * deadline, only @watch.
 */
int watchdog_watch(struct watchdog *wd, unsigned seconds, const char *what,
		   const struct watchdog_watch *watch);
void watchdog_stop(struct watchdog *wd);

#endif
