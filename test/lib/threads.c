/* SPDX-License-Identifier: MIT */
/* test/lib/threads.c - see threads.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fail.h"
#include "threads.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t now_ms(void)
{
	return now_ns() / 1000000u;
}

void nap_us(unsigned us)
{
	struct timespec ts = { us / 1000000u, (long)(us % 1000000u) * 1000 };

	nanosleep(&ts, NULL);
}

int thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	return pthread_create(thread, NULL, fn, arg);
}

static void deadline(struct timespec *ts, clockid_t clock, unsigned ms)
{
	clock_gettime(clock, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

int thread_join_within(pthread_t thread, unsigned ms, void **ret)
{
	struct timespec ts;
	void *res = NULL;
	int err;

	/* pthread_timedjoin_np measures against CLOCK_REALTIME. */
	deadline(&ts, CLOCK_REALTIME, ms);
	err = pthread_timedjoin_np(thread, &res, &ts);
	if (err == 0 && ret)
		*ret = res;
	return err;
}

void *thread_join_or_fail(pthread_t thread, unsigned ms, const char *what)
{
	void *ret = NULL;
	int err = thread_join_within(thread, ms, &ret);

	if (err)
		tl_fail("%s: thread still running after %u ms (%s)", what, ms,
			strerror(err));
	return ret;
}

void flag_init(struct flag *f)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &attr);
	pthread_condattr_destroy(&attr);
	f->value = 0;
}

void flag_destroy(struct flag *f)
{
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
}

void flag_set(struct flag *f, int value)
{
	pthread_mutex_lock(&f->lock);
	f->value = value;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

int flag_get(struct flag *f)
{
	int v;

	pthread_mutex_lock(&f->lock);
	v = f->value;
	pthread_mutex_unlock(&f->lock);
	return v;
}

bool flag_wait(struct flag *f, int value, unsigned ms)
{
	struct timespec ts;
	bool ok = true;

	deadline(&ts, CLOCK_MONOTONIC, ms);
	pthread_mutex_lock(&f->lock);
	while (f->value < value && ok)
		ok = pthread_cond_timedwait(&f->cond, &f->lock, &ts) == 0 ||
		     f->value >= value;
	ok = f->value >= value;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

static _Noreturn void watchdog_fire(struct watchdog *wd, const char *why)
{
	fflush(stdout);
	fprintf(stderr, "watchdog: %s: %s\n", wd->what, why);
	if (wd->watch.report)
		wd->watch.report(wd->watch.ctx);
	fflush(stdout);
	fflush(stderr);
	/* The stuck threads cannot be joined: no exit handlers either. */
	abort();
}

static void *watchdog_main(void *arg)
{
	struct watchdog *wd = arg;
	const struct watchdog_watch *w = &wd->watch;
	unsigned tick = w->tick_ms ? w->tick_ms : 100;
	uint64_t start = now_ms(), moved = start, now, last = 0;
	char why[400];

	if (w->progress)
		last = w->progress(w->ctx);
	for (;;) {
		unsigned wait = tick;

		now = now_ms();
		if (wd->seconds && now - start >= wd->seconds * 1000ull) {
			snprintf(why, sizeof(why), "still running after %u s",
				 wd->seconds);
			watchdog_fire(wd, why);
		}
		/* Only a deadline: one wait to the end. */
		if (wd->seconds && !w->progress && !w->check)
			wait = (unsigned)(start + wd->seconds * 1000ull - now);
		if (flag_wait(&wd->stop, 1, wait))
			return NULL;
		now = now_ms();
		if (w->progress) {
			uint64_t cur = w->progress(w->ctx);

			if (cur != last) {
				last = cur;
				moved = now;
			} else if (w->stall_s &&
				   now - moved >= w->stall_s * 1000ull) {
				snprintf(why, sizeof(why), "no progress for "
					 "%llu s", (unsigned long long)
					 ((now - moved) / 1000));
				watchdog_fire(wd, why);
			}
		}
		if (w->check && !w->check(w->ctx, why, sizeof(why)))
			watchdog_fire(wd, why);
	}
}

int watchdog_watch(struct watchdog *wd, unsigned seconds, const char *what,
		   const struct watchdog_watch *watch)
{
	int err;

	memset(wd, 0, sizeof(*wd));
	flag_init(&wd->stop);
	wd->seconds = seconds;
	if (watch)
		wd->watch = *watch;
	snprintf(wd->what, sizeof(wd->what), "%s", what);
	err = pthread_create(&wd->thread, NULL, watchdog_main, wd);
	wd->running = err == 0;
	if (err)
		flag_destroy(&wd->stop);
	return err;
}

int watchdog_start(struct watchdog *wd, unsigned seconds, const char *what)
{
	return watchdog_watch(wd, seconds, what, NULL);
}

void watchdog_stop(struct watchdog *wd)
{
	if (!wd->running)
		return;
	flag_set(&wd->stop, 1);
	pthread_join(wd->thread, NULL);
	wd->running = false;
	flag_destroy(&wd->stop);
}
