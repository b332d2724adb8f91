/* SPDX-License-Identifier: MIT */
/*
 * test_shutdown.c - the Criterion suite of how rings end (lull/ring.h,
 * "Shutdown"): graceful and immediate shutdown, fatal records, the last
 * detach, producers bound to their thread, a consumer that leaves with
 * lull_ring_close(), and what lull_loop_stop() does to the rings of a loop.
 *
 * What every test checks, through struct ledger (what the producers
 * committed, in ring order) and struct sink (what the consumer was handed):
 * every record committed before the shutdown arrives, in order, with its
 * content intact; the fatal record, when one was reported, arrives once,
 * right before the poison; the poison arrives exactly once and nothing
 * after it; every later read is -EPIPE; writes after the shutdown fail with
 * -EPIPE.
 *
 * The consumer runs in one of eight ways (enum way): polling with
 * lull_ring_read or lull_ring_peek/release, blocking in lull_ring_wait,
 * parked on an io_uring of its own (futex or eventfd), or as the handler of
 * a lull_loop on each of its backends (uring-futex, uring-eventfd, epoll).
 * A backend the kernel lacks is skipped with the reason.
 *
 * "Running" means the consumer is inside its record handler at the moment
 * of the shutdown (the handler holds at a gate until the test lets it go).
 * "Parked" means the consumer thread is asleep in the kernel: the test
 * waits until the thread's state in /proc is S and the ring's parks counter
 * stands still (and, for a loop, whose counter moves when a park ends,
 * checks afterwards that a park ended after the shutdown).  Sleeps appear
 * only as the short naps of those polls; every other hand-off is a condvar
 * or an atomic.
 *
 * Threads never assert: a consumer or producer thread notes its first
 * failure in its struct, and the test thread asserts on it after a timed
 * wait.  Parks use a 30 s safety net, so that a lost shutdown wake-up shows
 * as a consumer that never finishes (our 5 s deadline) instead of being
 * rescued; the tests of a producer thread ending around its commit's
 * wake-up park with no safety net at all.  Every test also has Criterion's
 * .timeout watchdog, at 20 s: well past any one of our waits, because
 * Criterion 2.4's runner gives up on the whole suite ("The test has already
 * ended, invalid state 'timeout'") when a test that failed near its
 * timeout is still exiting.
 *
 * In the AddressSanitizer build, frames that pthread_cancel unwinds carry
 * no redzones (UNWOUND), and loop teardowns check for leaks on the spot.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <liburing.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <lull.h>

/* How long a test waits for anything a thread does before failing. */
#define DEADLINE_MS 5000
/* The parks' safety net: far beyond DEADLINE_MS, so it never hides a
 * lost wake-up. */
#define SAFETY_NS (30ull * 1000 * 1000 * 1000)
#define RING_CAP ((size_t)1 << 16)
#define MANY 200u
#define MAX_PRODUCERS 4
#define URING_TAG 0x6c756c6cull

/* ------------------------------------------------------------------------
 * The two producer families
 */

struct topo {
	unsigned flags;
	const char *name;
	int (*write)(struct lull_producer *prod, int32_t type,
		     const void *data, size_t len);
	int (*writev)(struct lull_producer *prod, int32_t type,
		      const struct iovec *iov, int iovcnt);
	int (*claim)(struct lull_producer *prod, int32_t type, size_t len,
		     void **datap);
	int (*commit)(struct lull_producer *prod);
	int (*abort)(struct lull_producer *prod);
};

static const struct topo spsc_topo = {
	.flags = LULL_RING_SPSC,
	.name = "spsc",
	.write = lull_spsc_write,
	.writev = lull_spsc_writev,
	.claim = lull_spsc_claim,
	.commit = lull_spsc_commit,
	.abort = lull_spsc_abort,
};

static const struct topo mpsc_topo = {
	.flags = LULL_RING_MPSC,
	.name = "mpsc",
	.write = lull_mpsc_write,
	.writev = lull_mpsc_writev,
	.claim = lull_mpsc_claim,
	.commit = lull_mpsc_commit,
	.abort = lull_mpsc_abort,
};

static bool is_mpsc(const struct topo *t)
{
	return t->flags == LULL_RING_MPSC;
}

/* ------------------------------------------------------------------------
 * Records: type 1 + producer, payload {producer, seq} then a pattern
 */

struct stamp {
	uint32_t producer;
	uint32_t seq;
};

static size_t record_len(uint32_t seq)
{
	return sizeof(struct stamp) + (seq * 37u) % 97u;
}

static int32_t record_type(uint32_t producer)
{
	return (int32_t)(1 + producer);
}

static uint8_t pattern_byte(uint32_t producer, uint32_t seq, size_t i)
{
	uint32_t x = (producer + 1) * 2654435761u ^ seq * 40503u ^
		     (uint32_t)i * 2246822519u;

	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	return (uint8_t)x;
}

static void record_fill(void *buf, uint32_t producer, uint32_t seq)
{
	struct stamp st = { producer, seq };
	uint8_t *p = buf;
	size_t len = record_len(seq);

	memcpy(p, &st, sizeof(st));
	for (size_t i = sizeof(st); i < len; i++)
		p[i] = pattern_byte(producer, seq, i);
}

/*
 * Send record @seq of @producer by one of three paths, chosen by the seq:
 * write, writev in two pieces, or claim + commit.  Returns what the call
 * that decides returned (the write, or the claim).
 */
static int send_record(const struct topo *t, struct lull_producer *prod,
		       uint32_t producer, uint32_t seq)
{
	uint8_t buf[sizeof(struct stamp) + 128];
	size_t len = record_len(seq);
	struct iovec iov[2];
	void *dst;
	int ret;

	record_fill(buf, producer, seq);
	switch (seq % 3) {
	case 0:
		return t->write(prod, record_type(producer), buf, len);
	case 1:
		iov[0].iov_base = buf;
		iov[0].iov_len = 5;
		iov[1].iov_base = buf + 5;
		iov[1].iov_len = len - 5;
		return t->writev(prod, record_type(producer), iov, 2);
	default:
		ret = t->claim(prod, record_type(producer), len, &dst);
		if (ret < 0)
			return ret;
		memcpy(dst, buf, len);
		return t->commit(prod);
	}
}

/* Claim record @seq and fill it; the caller commits or aborts. */
static int claim_record(const struct topo *t, struct lull_producer *prod,
			uint32_t producer, uint32_t seq)
{
	void *dst;
	int ret;

	ret = t->claim(prod, record_type(producer), record_len(seq), &dst);
	if (ret == 0)
		record_fill(dst, producer, seq);
	return ret;
}

/* ------------------------------------------------------------------------
 * The ledger: what must arrive, in ring order
 */

#define LEDGER_MAX 4096u

struct ledger {
	struct entry {
		uint32_t producer;
		uint32_t seq;
		bool live; /* false: aborted, must not arrive */
	} e[LEDGER_MAX];
	unsigned n;
	uint32_t next_seq[MAX_PRODUCERS];
};

static void ledger_add(struct ledger *l, uint32_t producer, uint32_t seq)
{
	cr_assert_lt(l->n, LEDGER_MAX, "ledger full");
	l->e[l->n].producer = producer;
	l->e[l->n].seq = seq;
	l->e[l->n].live = true;
	l->n++;
}

static void ledger_drop(struct ledger *l, uint32_t producer, uint32_t seq)
{
	for (unsigned i = 0; i < l->n; i++)
		if (l->e[i].producer == producer && l->e[i].seq == seq) {
			l->e[i].live = false;
			return;
		}
	cr_assert_fail("ledger has no record %u of producer %u", seq,
		       producer);
}

static unsigned ledger_live(const struct ledger *l)
{
	unsigned n = 0;

	for (unsigned i = 0; i < l->n; i++)
		n += l->e[i].live;
	return n;
}

/* ------------------------------------------------------------------------
 * The sink: what the consumer was handed
 */

#define SINK_MAX (LEDGER_MAX + 8)

struct seen {
	int32_t type;
	uint32_t producer;
	uint32_t seq;
};

struct sink {
	struct seen rec[SINK_MAX];
	unsigned n;       /* everything handed: user, fatal, poison */
	unsigned users;
	unsigned fatals;
	unsigned poisons;
	unsigned after_poison;
	struct lull_fatal fatal; /* a copy of the first fatal record */
	uint32_t fatal_len;      /* its record length */
	char bad[200];           /* the first malformed record */
};

static void sink_bad(struct sink *s, const char *fmt, ...)
{
	va_list ap;

	if (s->bad[0])
		return;
	va_start(ap, fmt);
	vsnprintf(s->bad, sizeof(s->bad), fmt, ap);
	va_end(ap);
}

/* Note one record handed to the consumer and check its form. */
static void sink_take(struct sink *s, const struct lull_record *rec)
{
	struct seen *sn = &s->rec[s->n < SINK_MAX ? s->n : SINK_MAX - 1];
	struct stamp st;
	const uint8_t *p = rec->data;

	if (s->poisons) {
		s->after_poison++;
		sink_bad(s, "a record of type %d after the poison", rec->type);
	}
	memset(sn, 0, sizeof(*sn));
	sn->type = rec->type;
	/* The fatal record's alignment has a test of its own. */
	if (((uintptr_t)rec->data & 7u) != 0 &&
	    rec->type != LULL_TYPE_FATAL)
		sink_bad(s, "record %u (type %d) is not 8-byte aligned", s->n,
			 rec->type);
	if (rec->type == LULL_TYPE_POISON) {
		if (rec->len != 0)
			sink_bad(s, "poison of %u bytes", rec->len);
		s->poisons++;
	} else if (rec->type == LULL_TYPE_FATAL) {
		const struct lull_fatal *f = rec->data;

		if (rec->len < offsetof(struct lull_fatal, message) ||
		    rec->len > sizeof(*f))
			sink_bad(s, "fatal record of %u bytes", rec->len);
		else if (rec->len != offsetof(struct lull_fatal, message) +
					     f->length ||
			 f->message[f->length] != '\0')
			sink_bad(s, "fatal record of %u bytes has length %u",
				 rec->len, f->length);
		else if (!s->fatals) {
			memcpy(&s->fatal, f, rec->len);
			s->fatal.message[f->length] = '\0';
			s->fatal_len = rec->len;
		}
		s->fatals++;
	} else if (rec->len < sizeof(st)) {
		sink_bad(s, "record %u of type %d has %u bytes", s->n,
			 rec->type, rec->len);
	} else {
		memcpy(&st, p, sizeof(st));
		sn->producer = st.producer;
		sn->seq = st.seq;
		if (st.producer >= MAX_PRODUCERS ||
		    rec->type != record_type(st.producer) ||
		    rec->len != record_len(st.seq))
			sink_bad(s, "record %u: type %d, %u bytes, stamp %u/%u",
				 s->n, rec->type, rec->len, st.producer,
				 st.seq);
		for (size_t i = sizeof(st); i < rec->len && !s->bad[0]; i++)
			if (p[i] != pattern_byte(st.producer, st.seq, i))
				sink_bad(s, "record %u/%u: byte %zu differs",
					 st.producer, st.seq, i);
		s->users++;
	}
	s->n++;
}

struct fatal_want {
	int32_t code;
	const char *message;
};

/*
 * The consumer got what the ledger says (all of it, or with @prefix a
 * prefix of it: an immediate shutdown may discard the rest), then the fatal
 * record when @fw, then the poison, and nothing else.
 */
static void sink_expect(const char *what, const struct sink *s,
			const struct ledger *l, const struct fatal_want *fw,
			bool prefix)
{
	unsigned live = ledger_live(l), at = 0, tail;

	cr_assert(!s->bad[0], "%s: %s", what, s->bad);
	cr_assert_lt(s->n, SINK_MAX, "%s: too many records", what);
	if (prefix)
		cr_assert_leq(s->users, live,
			      "%s: %u records handed, %u committed", what,
			      s->users, live);
	else
		cr_assert_eq(s->users, live,
			     "%s: %u records handed, %u committed", what,
			     s->users, live);
	for (unsigned i = 0; i < l->n && at < s->users; i++) {
		if (!l->e[i].live)
			continue;
		cr_assert(s->rec[at].producer == l->e[i].producer &&
				  s->rec[at].seq == l->e[i].seq,
			  "%s: record %u is %u/%u, expected %u/%u", what, at,
			  s->rec[at].producer, s->rec[at].seq,
			  l->e[i].producer, l->e[i].seq);
		at++;
	}
	cr_assert_eq(s->poisons, 1, "%s: %u poison records", what,
		     s->poisons);
	cr_assert_eq(s->after_poison, 0, "%s: %u records after the poison",
		     what, s->after_poison);
	cr_assert_eq(s->rec[s->n - 1].type, LULL_TYPE_POISON,
		     "%s: the poison is not last", what);
	tail = 1;
	if (fw) {
		cr_assert_eq(s->fatals, 1, "%s: %u fatal records", what,
			     s->fatals);
		cr_assert_geq(s->n, 2);
		cr_assert_eq(s->rec[s->n - 2].type, LULL_TYPE_FATAL,
			     "%s: the fatal record is not right before the "
			     "poison", what);
		cr_assert_eq(s->fatal.code, fw->code, "%s: fatal code %d",
			     what, s->fatal.code);
		cr_assert_str_eq(s->fatal.message, fw->message,
				 "%s: fatal message", what);
		tail = 2;
	} else {
		cr_assert_eq(s->fatals, 0, "%s: an unexpected fatal record",
			     what);
	}
	cr_assert_eq(s->n, s->users + tail, "%s: %u records handed", what,
		     s->n);
}

/* ------------------------------------------------------------------------
 * Waiting: flags, deadlines, thread states
 */

struct flag {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int value;
};

static void flag_init(struct flag *f)
{
	pthread_condattr_t attr;

	pthread_mutex_init(&f->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cond, &attr);
	pthread_condattr_destroy(&attr);
	f->value = 0;
}

static void flag_set(struct flag *f, int value)
{
	pthread_mutex_lock(&f->lock);
	f->value = value;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Wait until the flag is at least @value; false after @ms. */
static bool flag_wait(struct flag *f, int value, unsigned ms)
{
	struct timespec ts;
	bool ok = true;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&f->lock);
	while (f->value < value && ok)
		ok = pthread_cond_timedwait(&f->cond, &f->lock, &ts) == 0 ||
		     f->value >= value;
	ok = f->value >= value;
	pthread_mutex_unlock(&f->lock);
	return ok;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

/* The scheduler state of one of our threads (R, S, D, ...), or '?'. */
static char thread_state(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Join @thread, failing the test when it has not ended within @ms. */
static void *join_within(pthread_t thread, unsigned ms, const char *what)
{
	struct timespec ts;
	void *ret = NULL;
	int err;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000 + 1;
	err = pthread_timedjoin_np(thread, &ret, &ts);
	cr_assert_eq(err, 0, "%s: thread still running after %u ms (%s)",
		     what, ms, strerror(err));
	return ret;
}

/*
 * In the AddressSanitizer build, fail when anything the test and the
 * library allocated is unreachable now (every test runs in a process of
 * its own).  Elsewhere a no-op.
 */
static void expect_no_leaks(const char *what)
{
#if defined(__SANITIZE_ADDRESS__)
	cr_assert_eq(__lsan_do_recoverable_leak_check(), 0,
		     "%s: memory leaked (see the LeakSanitizer report)", what);
#else
	(void)what;
#endif
}

/* ------------------------------------------------------------------------
 * The consumer, in each of its ways
 */

enum way {
	WAY_READ,
	WAY_PEEK,
	WAY_WAIT,
	WAY_URING_FUTEX,
	WAY_URING_EVENTFD,
	WAY_LOOP_FUTEX,
	WAY_LOOP_EVENTFD,
	WAY_LOOP_EPOLL,
	WAYS
};

static const char *const way_name[WAYS] = {
	"lull_ring_read", "lull_ring_peek", "lull_ring_wait",
	"own io_uring (futex)", "own io_uring (eventfd)",
	"loop (uring-futex)", "loop (uring-eventfd)", "loop (epoll)",
};

static bool way_parks(enum way w)
{
	return w >= WAY_WAIT;
}

static bool way_is_uring(enum way w)
{
	return w == WAY_URING_FUTEX || w == WAY_URING_EVENTFD;
}

static bool way_is_loop(enum way w)
{
	return w >= WAY_LOOP_FUTEX;
}

struct consumer {
	enum way way;
	const char *what; /* the case, for messages */
	struct lull_ring *ring;
	unsigned limit;
	struct sink sink;
	pthread_t thread;
	bool started;
	_Atomic pid_t tid;
	struct flag done;
	char why[240]; /* the consumer thread's first failure */
	atomic_uint handled;
	atomic_uint poisoned;
	/* The handler holds at user record gate_seq of producer 0. */
	_Atomic uint32_t gate_seq;
	struct flag gate; /* 1: held there, 2: let go */
	struct io_uring uring;
	bool has_uring;
	struct lull_loop *loop;
	int run_ret;
	/* lull_ring_wait with no timeout (else DEADLINE_MS, which fails) */
	bool wait_forever;
};

static void consumer_fail(struct consumer *c, const char *fmt, ...)
{
	va_list ap;

	if (c->why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

static void consumer_expect(struct consumer *c, int got, int want,
			    const char *call)
{
	if (got != want)
		consumer_fail(c, "%s returned %d (%s), expected %d", call, got,
			      lull_strerror(got), want);
}

static int consumer_take(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;
	struct stamp st;

	sink_take(&c->sink, rec);
	if (rec->type == LULL_TYPE_POISON)
		atomic_fetch_add_explicit(&c->poisoned, 1,
					  memory_order_release);
	atomic_fetch_add_explicit(&c->handled, 1, memory_order_release);
	if (rec->type > 0 && rec->len >= sizeof(st)) {
		memcpy(&st, rec->data, sizeof(st));
		if (st.producer == 0 &&
		    st.seq == atomic_load_explicit(&c->gate_seq,
						   memory_order_relaxed)) {
			flag_set(&c->gate, 1);
			if (!flag_wait(&c->gate, 2, DEADLINE_MS))
				consumer_fail(c, "never let go at the gate");
		}
	}
	return LULL_READ_CONTINUE;
}

static int consumer_take_in_loop(const struct lull_record *rec, void *ctx)
{
	struct consumer *c = ctx;

	consumer_take(rec, ctx);
	/* The ring is detached after its poison: nothing else to wait for. */
	if (rec->type == LULL_TYPE_POISON)
		lull_loop_stop(c->loop);
	return LULL_READ_CONTINUE;
}

static void consume_read(struct consumer *c)
{
	uint64_t idle_since = now_ms();
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_read(c->ring, consumer_take, c, c->limit);
		if (ret == -EAGAIN) {
			if (now_ms() - idle_since > DEADLINE_MS) {
				consumer_fail(c, "no poison after %u ms idle",
					      DEADLINE_MS);
				return;
			}
			sched_yield();
			continue;
		}
		if (ret <= 0) {
			consumer_fail(c, "lull_ring_read returned %d", ret);
			return;
		}
		idle_since = now_ms();
	}
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the poison");
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 1),
			-EPIPE, "a second lull_ring_read after the poison");
}

static void consume_peek(struct consumer *c)
{
	uint64_t idle_since = now_ms();
	struct lull_record a, b;
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_peek(c->ring, &a);
		if (ret == -EAGAIN) {
			if (now_ms() - idle_since > DEADLINE_MS) {
				consumer_fail(c, "no poison after %u ms idle",
					      DEADLINE_MS);
				return;
			}
			sched_yield();
			continue;
		}
		if (ret < 0) {
			consumer_fail(c, "lull_ring_peek returned %d", ret);
			return;
		}
		/* Peeking again hands the same record until the release. */
		ret = lull_ring_peek(c->ring, &b);
		if (ret != 0 || a.data != b.data || a.len != b.len ||
		    a.type != b.type) {
			consumer_fail(c, "a second peek of a record of type %d "
					 "returned %d, type %d",
				      a.type, ret, b.type);
			return;
		}
		consumer_take(&a, c);
		consumer_expect(c, lull_ring_release(c->ring), 0,
				"lull_ring_release");
		idle_since = now_ms();
	}
	consumer_expect(c, lull_ring_peek(c->ring, &a), -EPIPE,
			"lull_ring_peek after the poison");
	consumer_expect(c, lull_ring_peek(c->ring, &a), -EPIPE,
			"a second lull_ring_peek after the poison");
	consumer_expect(c, lull_ring_release(c->ring), -EINVAL,
			"lull_ring_release after the poison");
}

static void consume_wait(struct consumer *c)
{
	int ret;

	while (!c->sink.poisons) {
		ret = lull_ring_wait(c->ring,
				     c->wait_forever
					     ? -1
					     : (int64_t)DEADLINE_MS * 1000 *
						       1000);
		if (ret < 0) {
			consumer_fail(c, "lull_ring_wait returned %d (%s)", ret,
				      lull_strerror(ret));
			return;
		}
		/* Readable: a read hands at least one record. */
		ret = lull_ring_read(c->ring, consumer_take, c, c->limit);
		if (ret <= 0) {
			consumer_fail(c, "lull_ring_read after a wait returned "
					 "%d", ret);
			return;
		}
	}
	consumer_expect(c, lull_ring_wait(c->ring, -1), -EPIPE,
			"lull_ring_wait after the poison");
	consumer_expect(c, lull_ring_wait(c->ring, 0), -EPIPE,
			"lull_ring_wait(0) after the poison");
}

static void consume_uring(struct consumer *c)
{
	struct __kernel_timespec ts = { .tv_sec = DEADLINE_MS / 1000 };
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	bool ours;
	int ret;

	ret = lull_uring_park_arm(c->ring, &c->uring, URING_TAG);
	if (ret == 1)
		ret = lull_uring_park_drain(c->ring, &c->uring, consumer_take,
					    c, c->limit);
	/* -EPIPE from the drain that delivered the poison: the end. */
	if (ret < 0 && !(ret == -EPIPE && c->sink.poisons)) {
		consumer_fail(c, "arming the park returned %d", ret);
		return;
	}
	while (!c->sink.poisons) {
		ret = io_uring_submit_and_wait_timeout(&c->uring, &cqe, 1, &ts,
						       NULL);
		if (ret == -ETIME) {
			consumer_fail(c, "no CQE for %u ms", DEADLINE_MS);
			return;
		}
		if (ret < 0 && ret != -EINTR) {
			consumer_fail(c, "io_uring_submit_and_wait_timeout "
					 "returned %d", ret);
			return;
		}
		seen = 0;
		ours = false;
		io_uring_for_each_cqe(&c->uring, head, cqe) {
			seen++;
			if (lull_uring_park_cqe(c->ring, cqe) == 1)
				ours = true;
		}
		io_uring_cq_advance(&c->uring, seen);
		if (!ours)
			continue;
		ret = lull_uring_park_drain(c->ring, &c->uring, consumer_take,
					    c, c->limit);
		/*
		 * The drain that delivers the poison says -EPIPE: nothing
		 * is armed, and no CQE will come.  Before the poison, any
		 * error is one.
		 */
		if (ret == -EPIPE && !c->sink.poisons) {
			consumer_fail(c, "lull_uring_park_drain returned "
					 "-EPIPE without the poison");
			return;
		}
		if (ret < 0 && ret != -EPIPE) {
			consumer_fail(c, "lull_uring_park_drain returned %d "
					 "before the poison", ret);
			return;
		}
	}
	consumer_expect(c,
			lull_uring_park_drain(c->ring, &c->uring,
					      consumer_take, c, c->limit),
			-EPIPE, "lull_uring_park_drain after the poison");
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the poison");
}

static void consume_loop(struct consumer *c)
{
	c->run_ret = lull_loop_run(c->loop);
	if (c->run_ret != 0)
		consumer_fail(c, "lull_loop_run returned %d", c->run_ret);
	if (!c->sink.poisons)
		consumer_fail(c, "lull_loop_run returned without the poison");
	/* Detached after the poison: the handle reads again, and says so. */
	consumer_expect(c, lull_ring_read(c->ring, consumer_take, c, 8),
			-EPIPE, "lull_ring_read after the loop's poison");
	consumer_expect(c, lull_ring_wait(c->ring, 0), -EPIPE,
			"lull_ring_wait after the loop's poison");
}

static void *consumer_main(void *arg)
{
	struct consumer *c = arg;

	atomic_store_explicit(&c->tid, gettid(), memory_order_release);
	switch (c->way) {
	case WAY_READ:
		consume_read(c);
		break;
	case WAY_PEEK:
		consume_peek(c);
		break;
	case WAY_WAIT:
		consume_wait(c);
		break;
	case WAY_URING_FUTEX:
	case WAY_URING_EVENTFD:
		consume_uring(c);
		break;
	default:
		consume_loop(c);
		break;
	}
	flag_set(&c->done, 1);
	return NULL;
}

static enum lull_backend loop_backend(enum way w)
{
	return w == WAY_LOOP_FUTEX	   ? LULL_BACKEND_URING_FUTEX
	       : w == WAY_LOOP_EVENTFD ? LULL_BACKEND_URING_EVENTFD
				       : LULL_BACKEND_EPOLL;
}

/* Skip the test when this kernel cannot run @way. */
static void skip_unless_supported(enum way w)
{
	enum lull_backend b;
	int ret;

	if (w == WAY_URING_FUTEX)
		b = LULL_BACKEND_URING_FUTEX;
	else if (w == WAY_URING_EVENTFD)
		b = LULL_BACKEND_URING_EVENTFD;
	else if (way_is_loop(w))
		b = loop_backend(w);
	else
		return;
	ret = lull_backend_supported(b);
	if (ret < 0)
		cr_skip_test("%s: %s", lull_backend_name(b),
			     lull_strerror(ret));
}

/*
 * Set up the consumer side of @ring for @way: the park's safety net, and
 * the io_uring or loop it parks on.  Skips the test where the kernel lacks
 * the backend.
 */
static void consumer_init(struct consumer *c, struct lull_ring *ring,
			  enum way way, const char *what)
{
	struct lull_park_config park = { .safety_timeout_ns = SAFETY_NS };
	struct lull_loop_config cfg = { .safety_timeout_ns = SAFETY_NS };
	int ret;

	memset(c, 0, sizeof(*c));
	c->way = way;
	c->what = what;
	c->ring = ring;
	c->limit = 64;
	flag_init(&c->done);
	flag_init(&c->gate);
	atomic_init(&c->handled, 0);
	atomic_init(&c->poisoned, 0);
	atomic_init(&c->gate_seq, UINT32_MAX);
	atomic_init(&c->tid, 0);
	skip_unless_supported(way);
	cr_assert_eq(lull_ring_park_config(ring, &park), 0);
	if (way_is_uring(way)) {
		/* Read once, at the first arm, before any thread starts. */
		setenv("LULL_BACKEND",
		       way == WAY_URING_FUTEX ? "uring-futex" : "uring-eventfd",
		       1);
		ret = io_uring_queue_init(8, &c->uring, 0);
		if (ret == -ENOSYS || ret == -EPERM)
			cr_skip_test("io_uring: %s", strerror(-ret));
		cr_assert_eq(ret, 0, "io_uring_queue_init: %s",
			     strerror(-ret));
		c->has_uring = true;
	} else if (way_is_loop(way)) {
		cfg.backend = loop_backend(way);
		ret = lull_loop_create(&c->loop, &cfg);
		cr_assert_eq(ret, 0, "lull_loop_create(%s): %s",
			     lull_backend_name(cfg.backend),
			     lull_strerror(ret));
		cr_assert_eq(lull_loop_attach(c->loop, ring,
					      consumer_take_in_loop, c,
					      c->limit),
			     0);
	}
}

static void consumer_start(struct consumer *c)
{
	cr_assert_eq(pthread_create(&c->thread, NULL, consumer_main, c), 0);
	c->started = true;
	while (!atomic_load_explicit(&c->tid, memory_order_acquire))
		sched_yield();
}

/* Wait for the consumer to end (poison and checks done), then join it. */
static void consumer_finish(struct consumer *c)
{
	bool done = flag_wait(&c->done, 1, DEADLINE_MS);

	cr_assert(done, "%s: consumer (%s) not finished after %u ms: %u "
			"records handed, %u poison%s%s%s",
		  c->what, way_name[c->way], DEADLINE_MS,
		  atomic_load(&c->handled), atomic_load(&c->poisoned),
		  way_is_loop(c->way) && atomic_load(&c->poisoned)
			  ? " (lull_loop_run never returned after the poison)"
			  : "",
		  c->why[0] ? "; " : "", c->why);
	join_within(c->thread, DEADLINE_MS, c->what);
	c->started = false;
	cr_assert(!c->why[0], "%s: consumer (%s): %s", c->what,
		  way_name[c->way], c->why);
}

/* Wait until the consumer has been handed @n records. */
static void consumer_wait_handled(struct consumer *c, unsigned n)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;

	while (atomic_load_explicit(&c->handled, memory_order_acquire) < n) {
		cr_assert_lt(now_ms(), deadline,
			     "%s: consumer (%s) handed %u records, waiting "
			     "for %u%s%s",
			     c->what, way_name[c->way],
			     atomic_load(&c->handled), n,
			     c->why[0] ? ": " : "", c->why);
		nap_us(100);
	}
}

/*
 * Wait until the consumer is parked: its thread asleep in the kernel and
 * the ring's park counters standing still across a short nap (the nap is
 * what lets us see that).  For the parking ways other than a loop, the
 * parks counter, which counts a park when it begins, must also have moved
 * past @after.  Returns the parks counter.
 */
static uint64_t consumer_wait_parked(struct consumer *c, uint64_t after)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;
	struct lull_ring_stats a, b;
	pid_t tid = atomic_load(&c->tid);
	char sa, sb;

	cr_assert(way_parks(c->way));
	for (;;) {
		cr_assert_eq(lull_ring_stats(c->ring, &a), 0);
		sa = thread_state(tid);
		nap_us(2000);
		cr_assert_eq(lull_ring_stats(c->ring, &b), 0);
		sb = thread_state(tid);
		if (sa == 'S' && sb == 'S' && a.parks == b.parks &&
		    a.park_cancels == b.park_cancels &&
		    (way_is_loop(c->way) || b.parks > after))
			return b.parks;
		cr_assert_lt(now_ms(), deadline,
			     "%s: consumer (%s) not parked: thread state %c, "
			     "parks %llu (after %llu)%s%s",
			     c->what, way_name[c->way], sb,
			     (unsigned long long)b.parks,
			     (unsigned long long)after, c->why[0] ? "; " : "",
			     c->why);
	}
}

/* The consumer thread was handed the poison (it may still be checking). */
static unsigned consumer_poisoned(struct consumer *c)
{
	return atomic_load_explicit(&c->poisoned, memory_order_acquire);
}

/*
 * Tear down the consumer side and destroy the ring; every producer of the
 * ring must be detached.  The destroy must succeed: for a loop, the ring
 * was detached by the loop itself after its poison.
 */
static void consumer_fini(struct consumer *c)
{
	struct __kernel_timespec ts = { .tv_sec = DEADLINE_MS / 1000 };
	struct io_uring_cqe *cqe;
	int ret;

	if (c->started)
		join_within(c->thread, DEADLINE_MS, c->what);
	if (c->loop) {
		cr_assert_eq(lull_loop_destroy(c->loop), 0);
		c->loop = NULL;
		expect_no_leaks(c->what);
	}
	if (c->has_uring) {
		/* The park's CQEs must be in before the handle goes. */
		lull_uring_park_cancel(c->ring, &c->uring);
		io_uring_submit(&c->uring);
		while ((ret = lull_ring_destroy(c->ring)) == -EBUSY) {
			cr_assert_eq(io_uring_wait_cqe_timeout(&c->uring, &cqe,
							       &ts),
				     0, "%s: the park's CQEs never came",
				     c->what);
			lull_uring_park_cqe(c->ring, cqe);
			io_uring_cqe_seen(&c->uring, cqe);
		}
		io_uring_queue_exit(&c->uring);
		c->has_uring = false;
	} else {
		ret = lull_ring_destroy(c->ring);
	}
	cr_assert_eq(ret, 0, "%s: lull_ring_destroy returned %d", c->what,
		     ret);
	c->ring = NULL;
}

/* ------------------------------------------------------------------------
 * The fixture: a ring, producers on the test thread, a consumer thread
 */

struct fix {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod[MAX_PRODUCERS];
	unsigned nprod;
	struct ledger ledger;
	struct consumer c;
	char what[160];
};

static void fix_init(struct fix *f, const struct topo *t, enum way way,
		     unsigned nprod, const char *fmt, ...)
{
	va_list ap;

	memset(f, 0, sizeof(*f));
	f->t = t;
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
	cr_assert_eq(lull_ring_create(&f->ring, RING_CAP, t->flags), 0);
	f->nprod = nprod;
	for (unsigned i = 0; i < nprod; i++)
		cr_assert_eq(lull_producer_attach(f->ring, 0, &f->prod[i]), 0,
			     "%s: attach", f->what);
	consumer_init(&f->c, f->ring, way, f->what);
}

/* Send the next record of producer @i; on success it must arrive. */
static int fix_send(struct fix *f, unsigned i)
{
	uint32_t seq = f->ledger.next_seq[i];
	int ret = send_record(f->t, f->prod[i], i, seq);

	if (ret == 0) {
		ledger_add(&f->ledger, i, seq);
		f->ledger.next_seq[i]++;
	}
	return ret;
}

static void fix_send_ok(struct fix *f, unsigned i, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		cr_assert_eq(fix_send(f, i), 0, "%s: write %u of producer %u",
			     f->what, k, i);
}

/* Claim the next record of producer @i, in the ledger until aborted. */
static void fix_claim(struct fix *f, unsigned i)
{
	uint32_t seq = f->ledger.next_seq[i];

	cr_assert_eq(claim_record(f->t, f->prod[i], i, seq), 0,
		     "%s: claim", f->what);
	ledger_add(&f->ledger, i, seq);
	f->ledger.next_seq[i]++;
}

static void fix_detach(struct fix *f, unsigned i)
{
	cr_assert_eq(lull_producer_detach(f->prod[i]), 0);
	f->prod[i] = NULL;
}

/* Every way in, for every producer still attached, and for a new one. */
static void fix_expect_closed(struct fix *f)
{
	struct lull_producer *prod;
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	bool busy = false;
	void *dst;

	for (unsigned i = 0; i < f->nprod; i++) {
		if (!f->prod[i])
			continue;
		cr_assert_eq(f->t->write(f->prod[i], 1, "x", 1), -EPIPE,
			     "%s: write after the shutdown", f->what);
		cr_assert_eq(f->t->writev(f->prod[i], 1, &iov, 1), -EPIPE,
			     "%s: writev after the shutdown", f->what);
		cr_assert_eq(f->t->claim(f->prod[i], 1, 8, &dst), -EPIPE,
			     "%s: claim after the shutdown", f->what);
	}
	/* SPSC: the producer role is still taken, which is checked first. */
	for (unsigned i = 0; i < f->nprod; i++)
		if (f->prod[i] && !is_mpsc(f->t))
			busy = true;
	cr_assert_eq(lull_producer_attach(f->ring, 0, &prod),
		     busy ? -EBUSY : -EPIPE, "%s: attach after the shutdown",
		     f->what);
}

static void fix_fini(struct fix *f)
{
	for (unsigned i = 0; i < f->nprod; i++)
		if (f->prod[i])
			fix_detach(f, i);
	consumer_fini(&f->c);
}

/* ------------------------------------------------------------------------
 * How a test ends the ring
 */

enum kind {
	KIND_GRACEFUL,
	KIND_IMMEDIATE,
	KIND_FATAL,
	KIND_LAST_DETACH,
};

static const char *const kind_name[] = {
	"graceful shutdown", "immediate shutdown", "fatal report",
	"last detach",
};

static const struct fatal_want test_fatal = { -5, "producer on fire" };

static void fix_end(struct fix *f, enum kind kind)
{
	switch (kind) {
	case KIND_GRACEFUL:
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		/* Idempotent: a second call changes nothing. */
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		break;
	case KIND_IMMEDIATE:
		cr_assert_eq(lull_ring_shutdown(f->ring,
						LULL_SHUTDOWN_IMMEDIATE),
			     0);
		break;
	case KIND_FATAL:
		cr_assert_eq(lull_ring_fatal(f->ring, test_fatal.code,
					     test_fatal.message),
			     0);
		cr_assert_eq(lull_ring_fatal(f->ring, 1, "again"), -EALREADY);
		break;
	case KIND_LAST_DETACH:
		for (unsigned i = 0; i < f->nprod; i++)
			if (f->prod[i])
				fix_detach(f, i);
		break;
	}
}

static const unsigned pending_counts[] = { 0, 1, MANY };

/* ------------------------------------------------------------------------
 * Shutdown reaches a running consumer
 *
 * The consumer is inside its handler, at record 0, when the shutdown
 * comes; @pending more records were committed behind it.  It must deliver
 * them, then the fatal record (for a fatal report), then the poison.
 */

static void end_running_consumer(const struct topo *t, enum way way)
{
	static const enum kind kinds[] = { KIND_GRACEFUL, KIND_FATAL };

	for (unsigned k = 0; k < 2; k++)
		for (unsigned p = 0; p < 3; p++) {
			struct fix f;
			unsigned pending = pending_counts[p];

			fix_init(&f, t, way, 1,
				 "%s, %s, running consumer (%s), %u pending",
				 t->name, kind_name[kinds[k]], way_name[way],
				 pending);
			atomic_store(&f.c.gate_seq, 0);
			consumer_start(&f.c);
			fix_send_ok(&f, 0, 1);
			cr_assert(flag_wait(&f.c.gate, 1, DEADLINE_MS),
				  "%s: handler never reached record 0",
				  f.what);
			fix_send_ok(&f, 0, pending);
			fix_end(&f, kinds[k]);
			fix_expect_closed(&f);
			flag_set(&f.c.gate, 2);
			consumer_finish(&f.c);
			sink_expect(f.what, &f.c.sink, &f.ledger,
				    kinds[k] == KIND_FATAL ? &test_fatal : NULL,
				    false);
			fix_fini(&f);
		}
}

#define RUNNING_TESTS(suite, topo)                                          \
	Test(suite, shutdown_reaches_a_consumer_inside_lull_ring_read,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_READ);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_inside_lull_ring_peek,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_PEEK);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_reading_after_a_wait,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_WAIT);                      \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_draining_uring_futex,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_URING_FUTEX);               \
	}                                                                   \
	Test(suite, shutdown_reaches_a_consumer_draining_uring_eventfd,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_URING_EVENTFD);             \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_uring_futex,            \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_FUTEX);                \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_uring_eventfd,          \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_EVENTFD);              \
	}                                                                   \
	Test(suite, shutdown_reaches_a_running_loop_epoll, .timeout = 20)   \
	{                                                                   \
		end_running_consumer(&topo, WAY_LOOP_EPOLL);                \
	}

RUNNING_TESTS(spsc, spsc_topo)
RUNNING_TESTS(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * Shutdown wakes a parked consumer
 *
 * The consumer took three records and parked.  Then @pending records are
 * committed and the ring is ended at once, by each kind of end.  For an
 * immediate shutdown the pending records may be discarded (a prefix of
 * them arrives); otherwise all of them arrive.
 */

static void end_parked_consumer(const struct topo *t, enum way way)
{
	static const enum kind kinds[] = { KIND_GRACEFUL, KIND_IMMEDIATE,
					   KIND_FATAL, KIND_LAST_DETACH };

	for (unsigned k = 0; k < 4; k++)
		for (unsigned p = 0; p < 3; p++) {
			struct lull_ring_stats st;
			struct fix f;
			unsigned pending = pending_counts[p];
			uint64_t parks;

			fix_init(&f, t, way, 1,
				 "%s, %s, parked consumer (%s), %u pending",
				 t->name, kind_name[kinds[k]], way_name[way],
				 pending);
			consumer_start(&f.c);
			fix_send_ok(&f, 0, 3);
			consumer_wait_handled(&f.c, 3);
			parks = consumer_wait_parked(&f.c, 0);
			fix_send_ok(&f, 0, pending);
			fix_end(&f, kinds[k]);
			fix_expect_closed(&f);
			consumer_finish(&f.c);
			cr_assert_eq(lull_ring_stats(f.ring, &st), 0);
			/* Every way counts a park when it starts: the one
			 * the end interrupted was counted before it. */
			cr_assert_geq(st.parks, parks, "%s: parks went back",
				      f.what);
			cr_assert_eq(st.safety_timeouts, 0,
				     "%s: a lost wake-up", f.what);
			sink_expect(f.what, &f.c.sink, &f.ledger,
				    kinds[k] == KIND_FATAL ? &test_fatal : NULL,
				    kinds[k] == KIND_IMMEDIATE);
			fix_fini(&f);
		}
}

#define PARKED_TESTS(suite, topo)                                           \
	Test(suite, end_wakes_a_consumer_parked_in_lull_ring_wait,          \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_WAIT);                       \
	}                                                                   \
	Test(suite, end_wakes_a_consumer_parked_on_uring_futex,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_URING_FUTEX);                \
	}                                                                   \
	Test(suite, end_wakes_a_consumer_parked_on_uring_eventfd,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		end_parked_consumer(&topo, WAY_URING_EVENTFD);              \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_uring_futex, .timeout = 20)     \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_FUTEX);                 \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_uring_eventfd, .timeout = 20)   \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_EVENTFD);               \
	}                                                                   \
	Test(suite, end_wakes_a_parked_loop_epoll, .timeout = 20)           \
	{                                                                   \
		end_parked_consumer(&topo, WAY_LOOP_EPOLL);                 \
	}

PARKED_TESTS(spsc, spsc_topo)
PARKED_TESTS(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * A claim taken before the shutdown
 *
 * Producer 0 holds a claim when the ring shuts down (on MPSC producer 1
 * has committed two records behind it).  The consumer must wait for the
 * claim (a parking consumer wakes for the shutdown and parks again,
 * without the poison); the claim then commits, and arrives, or aborts, and
 * does not.
 */

static void claim_across_shutdown(const struct topo *t, enum way way,
				  bool commit)
{
	struct fix f;
	uint64_t parks = 0;

	fix_init(&f, t, way, is_mpsc(t) ? 2 : 1,
		 "%s, claim %s after a graceful shutdown, consumer (%s)",
		 t->name, commit ? "committed" : "aborted", way_name[way]);
	consumer_start(&f.c);
	fix_send_ok(&f, 0, 2);
	consumer_wait_handled(&f.c, 2);
	fix_claim(&f, 0);
	if (is_mpsc(t))
		fix_send_ok(&f, 1, 2);
	if (way_parks(way))
		parks = consumer_wait_parked(&f.c, 0);
	cr_assert_eq(lull_ring_shutdown(f.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	if (is_mpsc(t)) {
		cr_assert_eq(send_record(t, f.prod[1], 1, 99), -EPIPE,
			     "%s: write after the shutdown", f.what);
	}
	cr_assert_eq(lull_producer_attach(f.ring, 0, &f.prod[3]),
		     is_mpsc(t) ? -EPIPE : -EBUSY);
	if (way_parks(way)) {
		/* Woken by the shutdown, it met the claim and parked again. */
		consumer_wait_parked(&f.c, parks);
		if (way_is_loop(way)) {
			struct lull_ring_stats st;

			lull_ring_stats(f.ring, &st);
			cr_assert_gt(st.parks, parks,
				     "%s: the loop slept through the shutdown",
				     f.what);
		}
	}
	cr_assert_eq(consumer_poisoned(&f.c), 0,
		     "%s: poison before the claim ended", f.what);
	cr_assert_eq(atomic_load(&f.c.handled), 2,
		     "%s: a record past the claim was handed", f.what);
	if (commit) {
		cr_assert_eq(t->commit(f.prod[0]), 0);
	} else {
		cr_assert_eq(t->abort(f.prod[0]), 0);
		ledger_drop(&f.ledger, 0, 2);
	}
	consumer_finish(&f.c);
	sink_expect(f.what, &f.c.sink, &f.ledger, NULL, false);
	fix_expect_closed(&f);
	fix_fini(&f);
}

#define CLAIM_TESTS(suite, topo, name, way)                                 \
	Test(suite, claim_before_shutdown_commits_##name, .timeout = 20)    \
	{                                                                   \
		claim_across_shutdown(&topo, way, true);                    \
	}                                                                   \
	Test(suite, claim_before_shutdown_aborts_##name, .timeout = 20)     \
	{                                                                   \
		claim_across_shutdown(&topo, way, false);                   \
	}

#define CLAIM_TESTS_ALL(suite, topo)                                        \
	CLAIM_TESTS(suite, topo, to_lull_ring_read, WAY_READ)               \
	CLAIM_TESTS(suite, topo, to_lull_ring_peek, WAY_PEEK)               \
	CLAIM_TESTS(suite, topo, to_lull_ring_wait, WAY_WAIT)               \
	CLAIM_TESTS(suite, topo, to_uring_futex, WAY_URING_FUTEX)           \
	CLAIM_TESTS(suite, topo, to_uring_eventfd, WAY_URING_EVENTFD)       \
	CLAIM_TESTS(suite, topo, to_loop_uring_futex, WAY_LOOP_FUTEX)       \
	CLAIM_TESTS(suite, topo, to_loop_uring_eventfd, WAY_LOOP_EVENTFD)   \
	CLAIM_TESTS(suite, topo, to_loop_epoll, WAY_LOOP_EPOLL)

CLAIM_TESTS_ALL(spsc, spsc_topo)
CLAIM_TESTS_ALL(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * Single-threaded checks of the consumer's side
 */

/* A ring with one producer, read on the test thread. */
struct solo {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct ledger ledger;
	struct sink sink;
};

static void solo_init(struct solo *s, const struct topo *t, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->t = t;
	cr_assert_eq(lull_ring_create(&s->ring, cap, t->flags), 0);
	cr_assert_eq(lull_producer_attach(s->ring, 0, &s->prod), 0);
}

static void solo_send(struct solo *s, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		uint32_t seq = s->ledger.next_seq[0]++;

		cr_assert_eq(send_record(s->t, s->prod, 0, seq), 0);
		ledger_add(&s->ledger, 0, seq);
	}
}

static int sink_handler(const struct lull_record *rec, void *ctx)
{
	sink_take(ctx, rec);
	return LULL_READ_CONTINUE;
}

/* Read everything there is into the sink; returns the last result. */
static int solo_read_all(struct solo *s)
{
	int ret;

	while ((ret = lull_ring_read(s->ring, sink_handler, &s->sink, 16)) >
	       0)
		;
	return ret;
}

static void solo_fini(struct solo *s)
{
	if (s->prod)
		cr_assert_eq(lull_producer_detach(s->prod), 0);
	cr_assert_eq(lull_ring_destroy(s->ring), 0);
}

static void after_poison_everything_is_epipe(struct lull_ring *ring)
{
	struct lull_record rec;

	for (int i = 0; i < 3; i++) {
		cr_assert_eq(lull_ring_read(ring, sink_handler, NULL, 4),
			     -EPIPE);
		cr_assert_eq(lull_ring_peek(ring, &rec), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 0), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 1000), -EPIPE);
	}
	cr_assert_eq(lull_ring_release(ring), -EINVAL);
}

static void graceful_basics(const struct topo *t)
{
	struct lull_producer *other;
	struct iovec iov = { .iov_base = "ab", .iov_len = 2 };
	struct solo s;
	void *dst;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_shutdown(NULL, LULL_SHUTDOWN_GRACEFUL),
		     -EINVAL);
	cr_assert_eq(lull_ring_shutdown(s.ring, 2), -EINVAL);
	cr_assert_eq(lull_ring_shutdown(s.ring, UINT32_MAX), -EINVAL);
	solo_send(&s, 5);
	/* The consumer takes two; three are pending at the shutdown. */
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
	cr_assert_eq(t->write(s.prod, 1, "ab", 2), -EPIPE);
	cr_assert_eq(t->writev(s.prod, 1, &iov, 1), -EPIPE);
	cr_assert_eq(t->claim(s.prod, 1, 2, &dst), -EPIPE);
	cr_assert_eq(t->commit(s.prod), -EINVAL);
	cr_assert_eq(lull_producer_attach(s.ring, 0, &other),
		     is_mpsc(t) ? -EPIPE : -EBUSY);
	/* Pending records first, in one batch, then the poison alone. */
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 100), 3);
	cr_assert_eq(s.sink.poisons, 0);
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0, "the poison is readable");
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 100), 1);
	sink_expect(t->name, &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	/* Shutting down again after the poison changes nothing. */
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, graceful_shutdown_delivers_pending_records_then_one_poison,
     .timeout = 20)
{
	graceful_basics(&spsc_topo);
}

Test(mpsc, graceful_shutdown_delivers_pending_records_then_one_poison,
     .timeout = 20)
{
	graceful_basics(&mpsc_topo);
}

static void shutdown_of_unused_ring(const struct topo *t)
{
	struct lull_ring *ring;
	struct sink sink = { 0 };
	struct ledger none = { 0 };

	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 8), 1);
	sink_expect(t->name, &sink, &none, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(spsc, shutdown_of_a_ring_never_written_delivers_only_the_poison,
     .timeout = 20)
{
	shutdown_of_unused_ring(&spsc_topo);
}

Test(mpsc, shutdown_of_a_ring_never_written_delivers_only_the_poison,
     .timeout = 20)
{
	shutdown_of_unused_ring(&mpsc_topo);
}

/* A second handle on the region (as another process would have) ends it. */
static void shutdown_from_other_handle(const struct topo *t)
{
	size_t size = (size_t)lull_ring_region_size(4096);
	struct lull_ring *ring, *other;
	struct lull_producer *prod;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	void *mem = aligned_alloc(128, size); /* size is a multiple */

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096, t->flags), 0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_producer_attach(other, 0, &prod), 0);
	for (uint32_t seq = 0; seq < 4; seq++) {
		cr_assert_eq(send_record(t, prod, 0, seq), 0);
		ledger_add(&ledger, 0, seq);
	}
	cr_assert_eq(lull_ring_shutdown(other, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(send_record(t, prod, 0, 4), -EPIPE);
	while (lull_ring_read(ring, sink_handler, &sink, 3) > 0)
		;
	sink_expect(t->name, &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_producer_detach(prod), 0);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(spsc, shutdown_through_another_handle_reaches_the_consumer,
     .timeout = 20)
{
	shutdown_from_other_handle(&spsc_topo);
}

Test(mpsc, shutdown_through_another_handle_reaches_the_consumer,
     .timeout = 20)
{
	shutdown_from_other_handle(&mpsc_topo);
}

/* ------------------------------------------------------------------------
 * One code everywhere: fatal, then poison, then -EPIPE, on every path
 */

struct keeper {
	struct sink sink;
	int32_t keep_type; /* keep the first record of this type once */
	unsigned kept;
};

static int keep_once_handler(const struct lull_record *rec, void *ctx)
{
	struct keeper *k = ctx;

	if (rec->type == k->keep_type && !k->kept) {
		k->kept++;
		return LULL_READ_KEEP;
	}
	sink_take(&k->sink, rec);
	return LULL_READ_CONTINUE;
}

/* lull_ring_read: records in batches, the fatal alone, the poison alone;
 * a handler that keeps either gets it again. */
static void read_path_reports_end(const struct topo *t)
{
	struct solo s;
	struct keeper k = { .keep_type = LULL_TYPE_FATAL };

	solo_init(&s, t, 4096);
	solo_send(&s, 5);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 5,
		     "the fatal record must not join a batch of records");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 0,
		     "the kept fatal record is not consumed");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 1,
		     "the fatal record comes alone");
	k.keep_type = LULL_TYPE_POISON;
	k.kept = 0;
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 0,
		     "the kept poison is not consumed");
	cr_assert_eq(lull_ring_wait(s.ring, 0), 0,
		     "the kept poison is still readable");
	cr_assert_eq(lull_ring_read(s.ring, keep_once_handler, &k, 100), 1,
		     "the poison comes alone");
	sink_expect(t->name, &k.sink, &s.ledger, &test_fatal, false);
	cr_assert_eq(k.sink.fatal_len,
		     offsetof(struct lull_fatal, message) +
			     strlen(test_fatal.message));
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, read_hands_records_then_fatal_then_poison_then_epipe,
     .timeout = 20)
{
	read_path_reports_end(&spsc_topo);
}

Test(mpsc, read_hands_records_then_fatal_then_poison_then_epipe,
     .timeout = 20)
{
	read_path_reports_end(&mpsc_topo);
}

/* lull_ring_peek: each closing record is peeked again until released. */
static void peek_path_reports_end(const struct topo *t)
{
	struct lull_record a, b;
	struct solo s;
	struct sink sink = { 0 };

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(lull_ring_peek(s.ring, &a), 0);
		for (int again = 0; again < 3; again++) {
			cr_assert_eq(lull_ring_peek(s.ring, &b), 0);
			cr_assert(a.data == b.data && a.len == b.len &&
					  a.type == b.type,
				  "peek %d of record %d changed", again, i);
		}
		/* A read cannot be mixed with an outstanding peek. */
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &sink, 1),
			     -EINVAL);
		sink_take(&sink, &a);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	}
	sink_expect(t->name, &sink, &s.ledger, &test_fatal, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, peek_repeats_fatal_and_poison_until_release_then_epipe,
     .timeout = 20)
{
	peek_path_reports_end(&spsc_topo);
}

Test(mpsc, peek_repeats_fatal_and_poison_until_release_then_epipe,
     .timeout = 20)
{
	peek_path_reports_end(&mpsc_topo);
}

/*
 * A ring that is exactly full when the consumer starts draining it after a
 * shutdown (here: held back by a claim at the head, with the rest of the
 * ring committed behind it).  Each record must come once, then the poison;
 * the read must not wrap into what was consumed on the lap before.
 */
static void full_ring_drain(const struct topo *t, enum kind kind)
{
	struct lull_producer *a, *b;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	uint8_t rec[24];
	void *dst;
	int ret, reads = 0;

	/* 256 bytes: eight records of 8 + 24 bytes fill it exactly. */
	cr_assert_eq(lull_ring_create(&ring, 256, t->flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &a), 0);
	b = a;
	if (is_mpsc(t))
		cr_assert_eq(lull_producer_attach(ring, 0, &b), 0);
	/* A lap first, so that the data area holds consumed records. */
	for (uint32_t seq = 0; seq < 8; seq++) {
		memset(rec, 0, sizeof(rec));
		memcpy(rec, &(struct stamp){ 1, 100 + seq }, 8);
		cr_assert_eq(t->write(b, record_type(1), rec, sizeof(rec)), 0);
	}
	while (lull_ring_read(ring, sink_handler, &(struct sink){ 0 }, 100) >
	       0)
		;
	cr_assert_eq(t->claim(a, record_type(0), sizeof(rec), &dst), 0);
	memset(dst, 0, sizeof(rec));
	memcpy(dst, &(struct stamp){ 0, 0 }, 8);
	ledger_add(&ledger, 0, 0);
	if (is_mpsc(t)) {
		for (uint32_t seq = 0; seq < 7; seq++) {
			memset(rec, 0, sizeof(rec));
			memcpy(rec, &(struct stamp){ 1, seq }, 8);
			cr_assert_eq(t->write(b, record_type(1), rec,
					      sizeof(rec)),
				     0);
			ledger_add(&ledger, 1, seq);
		}
	}
	if (kind == KIND_FATAL)
		cr_assert_eq(lull_ring_fatal(ring, test_fatal.code,
					     test_fatal.message),
			     0);
	else
		cr_assert_eq(lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL),
			     0);
	/* Held back by the claim: the consumer starts its drain. */
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EAGAIN);
	cr_assert_eq(t->commit(a), 0);
	while ((ret = lull_ring_read(ring, sink_handler, &sink, 100)) > 0 &&
	       ++reads < 20)
		;
	/* Records carry stamps but not the pattern: compare stamps only. */
	sink.bad[0] = '\0';
	for (unsigned i = 0; i < sink.n && i < ledger.n; i++)
		cr_assert(sink.rec[i].type <= 0 ||
				  (sink.rec[i].producer ==
					   ledger.e[i].producer &&
				   sink.rec[i].seq == ledger.e[i].seq),
			  "%s: record %u is %u/%u, expected %u/%u", t->name, i,
			  sink.rec[i].producer, sink.rec[i].seq,
			  ledger.e[i].producer, ledger.e[i].seq);
	cr_assert_eq(sink.poisons, 1,
		     "%s: %u records handed and no poison after %d reads "
		     "(the drain wraps into the previous lap)",
		     t->name, sink.n, reads);
	cr_assert_eq(sink.n, ledger.n + 1 + (kind == KIND_FATAL),
		     "%s: %u records handed for %u committed", t->name,
		     sink.n, ledger.n);
	cr_assert_eq(ret, -EPIPE);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EPIPE);
	if (is_mpsc(t))
		cr_assert_eq(lull_producer_detach(b), 0);
	cr_assert_eq(lull_producer_detach(a), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(spsc, full_ring_drained_after_shutdown_hands_each_record_once,
     .timeout = 20)
{
	full_ring_drain(&spsc_topo, KIND_GRACEFUL);
}

Test(mpsc, full_ring_drained_after_shutdown_hands_each_record_once,
     .timeout = 20)
{
	full_ring_drain(&mpsc_topo, KIND_GRACEFUL);
}

Test(mpsc, full_ring_drained_after_fatal_hands_each_record_once,
     .timeout = 20)
{
	full_ring_drain(&mpsc_topo, KIND_FATAL);
}

/* ------------------------------------------------------------------------
 * Immediate shutdown
 */

/* Undelivered records are discarded: the poison (after the fatal, if one
 * was reported) is the next thing the consumer gets. */
static void immediate_discards(const struct topo *t, bool fatal,
			       bool after_graceful)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 6);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	if (after_graceful) {
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_GRACEFUL),
			     0);
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 1),
			     1);
	}
	if (fatal)
		cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
					     test_fatal.message),
			     0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	cr_assert_eq(send_record(t, s.prod, 0, 50), -EPIPE);
	/* What is left of the ledger was never handed: discarded. */
	for (unsigned i = s.sink.users; i < s.ledger.n; i++)
		s.ledger.e[i].live = false;
	solo_read_all(&s);
	sink_expect(fatal ? "immediate after a fatal report"
		    : after_graceful ? "immediate after a graceful shutdown"
				     : "immediate",
		    &s.sink, &s.ledger, fatal ? &test_fatal : NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, immediate_shutdown_discards_undelivered_records, .timeout = 20)
{
	immediate_discards(&spsc_topo, false, false);
}

Test(mpsc, immediate_shutdown_discards_undelivered_records, .timeout = 20)
{
	immediate_discards(&mpsc_topo, false, false);
}

Test(spsc, immediate_shutdown_keeps_the_fatal_before_the_poison,
     .timeout = 20)
{
	immediate_discards(&spsc_topo, true, false);
}

Test(mpsc, immediate_shutdown_keeps_the_fatal_before_the_poison,
     .timeout = 20)
{
	immediate_discards(&mpsc_topo, true, false);
}

Test(spsc, immediate_shutdown_upgrades_a_graceful_one, .timeout = 20)
{
	immediate_discards(&spsc_topo, false, true);
}

Test(mpsc, immediate_shutdown_upgrades_a_graceful_one, .timeout = 20)
{
	immediate_discards(&mpsc_topo, false, true);
}

/* An outstanding claim does not hold the poison back; committing it later
 * is allowed and delivers nothing. */
static void immediate_ignores_claim(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 2);
	cr_assert_eq(claim_record(t, s.prod, 0, 2), 0);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_IMMEDIATE), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 1,
		     "the poison must not wait for the claim");
	cr_assert_eq(t->commit(s.prod), 0);
	sink_expect("immediate with a claim", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, immediate_shutdown_does_not_wait_for_a_claim, .timeout = 20)
{
	immediate_ignores_claim(&spsc_topo);
}

Test(mpsc, immediate_shutdown_does_not_wait_for_a_claim, .timeout = 20)
{
	immediate_ignores_claim(&mpsc_topo);
}

/*
 * Once the consumer has been shown the poison of an immediate shutdown (by
 * a peek, or a wait that found it readable), a claim committed afterwards
 * does not slip in before it: a second peek shows the same poison, and a
 * read hands the poison and nothing else.
 */
Test(mpsc, immediate_poison_stays_next_when_a_claim_commits_late,
     .timeout = 20)
{
	struct lull_record rec;
	struct solo s;
	struct lull_producer *b;

	for (int by_wait = 0; by_wait < 2; by_wait++) {
		solo_init(&s, &mpsc_topo, 4096);
		cr_assert_eq(lull_producer_attach(s.ring, 0, &b), 0);
		cr_assert_eq(claim_record(&mpsc_topo, s.prod, 0, 0), 0);
		cr_assert_eq(send_record(&mpsc_topo, b, 1, 0), 0);
		cr_assert_eq(lull_ring_shutdown(s.ring,
						LULL_SHUTDOWN_IMMEDIATE),
			     0);
		if (by_wait) {
			cr_assert_eq(lull_ring_wait(s.ring, 0), 0);
		} else {
			cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
			cr_assert_eq(rec.type, LULL_TYPE_POISON);
		}
		cr_assert_eq(mpsc_topo.commit(s.prod), 0);
		if (by_wait) {
			solo_read_all(&s);
			sink_expect("read after a wait saw the immediate "
				    "poison",
				    &s.sink, &s.ledger, NULL, false);
		} else {
			cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
			cr_assert_eq(rec.type, LULL_TYPE_POISON,
				     "a second peek handed type %d after "
				     "the poison",
				     rec.type);
			cr_assert_eq(lull_ring_release(s.ring), 0);
		}
		after_poison_everything_is_epipe(s.ring);
		cr_assert_eq(lull_producer_detach(b), 0);
		solo_fini(&s);
	}
}

/* ------------------------------------------------------------------------
 * Fatal reports
 */

static void fatal_message(const struct topo *t, const char *message,
			  const char *expect)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 1);
	cr_assert_eq(lull_ring_fatal(s.ring, INT32_MIN, message), 0);
	solo_read_all(&s);
	sink_expect("fatal message", &s.sink, &s.ledger,
		    &(struct fatal_want){ INT32_MIN, expect }, false);
	cr_assert_eq(s.sink.fatal.length, strlen(expect));
	cr_assert_eq(s.sink.fatal_len,
		     offsetof(struct lull_fatal, message) + strlen(expect));
	solo_fini(&s);
}

static void fatal_messages(const struct topo *t)
{
	char longer[1000], cut[LULL_FATAL_MESSAGE_MAX];

	for (size_t i = 0; i < sizeof(longer) - 1; i++)
		longer[i] = (char)('a' + i % 26);
	longer[sizeof(longer) - 1] = '\0';
	memcpy(cut, longer, sizeof(cut) - 1);
	cut[sizeof(cut) - 1] = '\0';
	fatal_message(t, longer, cut);
	cut[sizeof(cut) - 2] = '\0';
	fatal_message(t, cut, cut); /* 254 bytes: kept whole */
	fatal_message(t, NULL, "");
	fatal_message(t, "", "");
}

Test(spsc, fatal_message_is_truncated_and_nul_terminated, .timeout = 20)
{
	fatal_messages(&spsc_topo);
}

Test(mpsc, fatal_message_is_truncated_and_nul_terminated, .timeout = 20)
{
	fatal_messages(&mpsc_topo);
}

/* struct lull_record promises an 8-byte aligned payload, closing records
 * included. */
static void closing_records_aligned(const struct topo *t)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_fatal(s.ring, 1, "x"), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq((uintptr_t)rec.data % LULL_RECORD_ALIGN, 0,
			     "the %s record's data is at %p",
			     rec.type == LULL_TYPE_FATAL ? "fatal" : "poison",
			     rec.data);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	}
	solo_fini(&s);
}

Test(spsc, fatal_and_poison_data_are_8_byte_aligned, .timeout = 20)
{
	closing_records_aligned(&spsc_topo);
}

Test(mpsc, fatal_and_poison_data_are_8_byte_aligned, .timeout = 20)
{
	closing_records_aligned(&mpsc_topo);
}

static void fatal_once(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	cr_assert_eq(lull_ring_fatal(NULL, 1, "x"), -EINVAL);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(send_record(t, s.prod, 0, 3), -EPIPE);
	cr_assert_eq(lull_ring_fatal(s.ring, 2, "second"), -EALREADY);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_fatal(s.ring, 3, "third"), -EALREADY);
	solo_read_all(&s);
	sink_expect("one fatal", &s.sink, &s.ledger, &test_fatal, false);
	cr_assert_eq(lull_ring_fatal(s.ring, 4, "late"), -EALREADY);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, second_fatal_report_is_ealready_and_the_first_is_delivered,
     .timeout = 20)
{
	fatal_once(&spsc_topo);
}

Test(mpsc, second_fatal_report_is_ealready_and_the_first_is_delivered,
     .timeout = 20)
{
	fatal_once(&mpsc_topo);
}

/* After a graceful shutdown, a fatal report still makes it, until the
 * consumer has taken (or peeked) the poison. */
static void fatal_after_graceful(const struct topo *t, bool peek_first)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 2), 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0, "a report before the poison is taken is delivered");
	solo_read_all(&s);
	sink_expect("fatal after graceful", &s.sink, &s.ledger, &test_fatal,
		    false);
	solo_fini(&s);

	/* Too late: the poison is taken (or peeked, which decides it). */
	solo_init(&s, t, 4096);
	solo_send(&s, 3);
	cr_assert_eq(lull_ring_shutdown(s.ring, LULL_SHUTDOWN_GRACEFUL), 0);
	if (peek_first) {
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8),
			     3);
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq(rec.type, LULL_TYPE_POISON);
		cr_assert_eq(lull_ring_fatal(s.ring, 9, "late"), -EPIPE);
		cr_assert_eq(lull_ring_peek(s.ring, &rec), 0);
		cr_assert_eq(rec.type, LULL_TYPE_POISON,
			     "the late report changed the peeked record");
		sink_take(&s.sink, &rec);
		cr_assert_eq(lull_ring_release(s.ring), 0);
	} else {
		solo_read_all(&s);
		cr_assert_eq(lull_ring_fatal(s.ring, 9, "late"), -EPIPE);
	}
	sink_expect("fatal after the poison", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, fatal_after_graceful_arrives_until_the_poison_is_taken,
     .timeout = 20)
{
	fatal_after_graceful(&spsc_topo, false);
}

Test(mpsc, fatal_after_graceful_arrives_until_the_poison_is_taken,
     .timeout = 20)
{
	fatal_after_graceful(&mpsc_topo, false);
}

Test(spsc, fatal_after_the_poison_was_peeked_is_epipe, .timeout = 20)
{
	fatal_after_graceful(&spsc_topo, true);
}

Test(mpsc, fatal_after_the_poison_was_peeked_is_epipe, .timeout = 20)
{
	fatal_after_graceful(&mpsc_topo, true);
}

/* A claim outstanding at the report still commits before the fatal. */
static void fatal_waits_for_claim(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 2);
	cr_assert_eq(claim_record(t, s.prod, 0, 2), 0);
	ledger_add(&s.ledger, 0, 2);
	cr_assert_eq(lull_ring_fatal(s.ring, test_fatal.code,
				     test_fatal.message),
		     0);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8), 2);
	cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink, 8),
		     -EAGAIN, "the fatal record passed an open claim");
	cr_assert_eq(t->commit(s.prod), 0);
	solo_read_all(&s);
	sink_expect("fatal with a claim", &s.sink, &s.ledger, &test_fatal,
		    false);
	solo_fini(&s);
}

Test(spsc, fatal_follows_a_claim_committed_after_it, .timeout = 20)
{
	fatal_waits_for_claim(&spsc_topo);
}

Test(mpsc, fatal_follows_a_claim_committed_after_it, .timeout = 20)
{
	fatal_waits_for_claim(&mpsc_topo);
}

/* ------------------------------------------------------------------------
 * The last detach
 */

static void last_detach_spsc(void)
{
	struct lull_producer *again;
	struct solo s;

	solo_init(&s, &spsc_topo, 4096);
	solo_send(&s, 4);
	cr_assert_eq(lull_producer_detach(s.prod), 0);
	s.prod = NULL;
	cr_assert_eq(lull_producer_attach(s.ring, 0, &again), -EPIPE,
		     "attach after the last detach");
	solo_read_all(&s);
	sink_expect("spsc last detach", &s.sink, &s.ledger, NULL, false);
	after_poison_everything_is_epipe(s.ring);
	solo_fini(&s);
}

Test(spsc, last_detach_shuts_down_after_the_records, .timeout = 20)
{
	last_detach_spsc();
}

Test(mpsc, last_of_several_producers_shuts_down_on_detach, .timeout = 20)
{
	struct lull_producer *prod[3], *again;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	uint32_t seq[3] = { 0 };

	cr_assert_eq(lull_ring_create(&ring, 4096, LULL_RING_MPSC), 0);
	for (uint32_t i = 0; i < 3; i++)
		cr_assert_eq(lull_producer_attach(ring, 0, &prod[i]), 0);
	for (uint32_t i = 0; i < 3; i++) {
		cr_assert_eq(send_record(&mpsc_topo, prod[i], i, seq[i]), 0);
		ledger_add(&ledger, i, seq[i]++);
	}
	cr_assert_eq(lull_producer_detach(prod[0]), 0);
	cr_assert_eq(lull_producer_detach(prod[1]), 0);
	/* One producer left: open, and no poison. */
	cr_assert_eq(send_record(&mpsc_topo, prod[2], 2, seq[2]), 0);
	ledger_add(&ledger, 2, seq[2]++);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod[0]), 0,
		     "attach while producers remain");
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), 4);
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), -EAGAIN);
	cr_assert_eq(lull_producer_detach(prod[0]), 0);
	cr_assert_eq(send_record(&mpsc_topo, prod[2], 2, seq[2]), 0);
	ledger_add(&ledger, 2, seq[2]++);
	cr_assert_eq(lull_producer_detach(prod[2]), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &again), -EPIPE,
		     "attach after the last detach");
	while (lull_ring_read(ring, sink_handler, &sink, 100) > 0)
		;
	sink_expect("mpsc last detach", &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

/* The last producer leaves holding a claim: it is aborted, and the records
 * behind it (MPSC) arrive before the poison. */
static void last_detach_with_claim(const struct topo *t)
{
	struct lull_producer *other = NULL;
	struct ledger ledger = { 0 };
	struct sink sink = { 0 };
	struct lull_ring *ring;
	struct lull_producer *prod;

	cr_assert_eq(lull_ring_create(&ring, 4096, t->flags), 0);
	cr_assert_eq(lull_producer_attach(ring, 0, &prod), 0);
	cr_assert_eq(send_record(t, prod, 0, 0), 0);
	ledger_add(&ledger, 0, 0);
	cr_assert_eq(claim_record(t, prod, 0, 1), 0);
	if (is_mpsc(t)) {
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
		cr_assert_eq(send_record(t, other, 1, 0), 0);
		ledger_add(&ledger, 1, 0);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	cr_assert_eq(lull_ring_read(ring, sink_handler, &sink, 100), 1,
		     "the claim holds the rest back");
	cr_assert_eq(lull_producer_detach(prod), 0);
	while (lull_ring_read(ring, sink_handler, &sink, 100) > 0)
		;
	sink_expect("last detach with a claim", &sink, &ledger, NULL, false);
	after_poison_everything_is_epipe(ring);
	cr_assert_eq(lull_ring_destroy(ring), 0);
}

Test(spsc, last_detach_with_a_claim_aborts_it_and_shuts_down,
     .timeout = 20)
{
	last_detach_with_claim(&spsc_topo);
}

Test(mpsc, last_detach_with_a_claim_aborts_it_and_shuts_down,
     .timeout = 20)
{
	last_detach_with_claim(&mpsc_topo);
}

/* ------------------------------------------------------------------------
 * Thread-bound producers
 */

enum exit_path {
	EXIT_RETURN,
	EXIT_PTHREAD_EXIT,
	EXIT_CANCEL_IN_READ,
	EXIT_CANCEL_IN_NANOSLEEP,
};

static const char *const exit_name[] = {
	"returns", "calls pthread_exit", "is cancelled in read(2)",
	"is cancelled in nanosleep(2)",
};

#define BOUND_RECORDS 3u

struct bound {
	const struct topo *t;
	struct lull_ring *ring;
	enum exit_path how;
	bool claim;
	int go[2]; /* the thread blocks reading it */
	struct flag ready;
	struct lull_producer *prod;
	char why[160];
};

/*
 * Frames that a cancellation unwinds carry no AddressSanitizer redzones:
 * GCC's ASan leaves a cancelled frame's redzones poisoned, and then trips
 * over them when the thread is torn down (a false stack-buffer-overflow in
 * its own sigaltstack call), with or without lull.
 */
#if defined(__SANITIZE_ADDRESS__)
#define UNWOUND __attribute__((no_sanitize_address, noinline))
#else
#define UNWOUND __attribute__((noinline))
#endif

/* The thread's end, by @b->how. */
static UNWOUND void *bound_end(struct bound *b)
{
	struct timespec forever = { 3600, 0 };
	char byte;
	int ret;

	switch (b->how) {
	case EXIT_RETURN:
		if (read(b->go[0], &byte, 1) != 1)
			snprintf(b->why, sizeof(b->why), "read of go failed");
		return (void *)1;
	case EXIT_PTHREAD_EXIT:
		if (read(b->go[0], &byte, 1) != 1)
			snprintf(b->why, sizeof(b->why), "read of go failed");
		pthread_exit((void *)2);
	case EXIT_CANCEL_IN_READ:
		ret = (int)read(b->go[0], &byte, 1);
		snprintf(b->why, sizeof(b->why), "read returned %d", ret);
		return NULL;
	case EXIT_CANCEL_IN_NANOSLEEP:
		nanosleep(&forever, NULL);
		snprintf(b->why, sizeof(b->why), "nanosleep returned");
		return NULL;
	}
	return NULL;
}

static void bound_start(struct bound *b)
{
	int ret;

	ret = lull_producer_attach(b->ring, LULL_PRODUCER_THREAD, &b->prod);
	if (ret < 0) {
		snprintf(b->why, sizeof(b->why), "attach: %d", ret);
		return;
	}
	for (uint32_t seq = 0; seq < BOUND_RECORDS; seq++)
		if ((ret = send_record(b->t, b->prod, 0, seq)) < 0)
			snprintf(b->why, sizeof(b->why), "write %u: %d", seq,
				 ret);
	if (b->claim &&
	    (ret = claim_record(b->t, b->prod, 0, BOUND_RECORDS)) < 0)
		snprintf(b->why, sizeof(b->why), "claim: %d", ret);
}

static UNWOUND void *bound_main(void *arg)
{
	struct bound *b = arg;

	bound_start(b);
	flag_set(&b->ready, 1);
	if (b->why[0])
		return NULL;
	return bound_end(b);
}

/*
 * A producer bound to its thread writes three records, maybe takes a claim,
 * and its thread ends.  The producer detaches by itself, its claim is
 * aborted (the records another producer committed behind it on MPSC still
 * arrive), and the ring shuts down if it was the last producer.
 */
static void bound_thread_ends(const struct topo *t, enum exit_path how,
			      bool claim, bool last)
{
	struct consumer c;
	struct ledger ledger = { 0 };
	struct lull_producer *other = NULL;
	struct lull_ring *ring;
	struct bound b = { .t = t, .how = how, .claim = claim };
	pthread_t thread;
	char what[160];
	void *result;

	snprintf(what, sizeof(what),
		 "%s, bound producer %s%s, %s producer", t->name,
		 exit_name[how], claim ? " holding a claim" : "",
		 last ? "last" : "not the last");
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, WAY_WAIT, what);
	b.ring = ring;
	flag_init(&b.ready);
	cr_assert_eq(pipe(b.go), 0);
	if (!last)
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, bound_main, &b), 0);
	cr_assert(flag_wait(&b.ready, 1, DEADLINE_MS), "%s: not ready", what);
	cr_assert(!b.why[0], "%s: %s", what, b.why);
	for (uint32_t seq = 0; seq < BOUND_RECORDS; seq++)
		ledger_add(&ledger, 0, seq);
	if (other) {
		/* Behind the claim, if there is one. */
		for (uint32_t seq = 0; seq < 2; seq++) {
			cr_assert_eq(send_record(t, other, 1, seq), 0);
			ledger_add(&ledger, 1, seq);
		}
	}
	consumer_wait_handled(&c, claim || !other ? BOUND_RECORDS
						  : BOUND_RECORDS + 2);
	consumer_wait_parked(&c, 0);
	/* The thread-bound producer is its thread's alone. */
	cr_assert_eq(lull_producer_detach(b.prod), -EPERM, "%s", what);

	if (how == EXIT_RETURN || how == EXIT_PTHREAD_EXIT)
		cr_assert_eq(write(b.go[1], "g", 1), 1);
	else
		cr_assert_eq(pthread_cancel(thread), 0);
	result = join_within(thread, DEADLINE_MS, what);
	cr_assert(!b.why[0], "%s: %s", what, b.why);
	cr_assert_eq(result,
		     how == EXIT_RETURN	       ? (void *)1
		     : how == EXIT_PTHREAD_EXIT ? (void *)2
						: PTHREAD_CANCELED,
		     "%s: thread result %p", what, result);
	if (!last) {
		/* Still open: the other producer's records all arrive. */
		consumer_wait_handled(&c, BOUND_RECORDS + 2);
		cr_assert_eq(send_record(t, other, 1, 2), 0);
		ledger_add(&ledger, 1, 2);
		consumer_wait_handled(&c, BOUND_RECORDS + 3);
		cr_assert_eq(consumer_poisoned(&c), 0,
			     "%s: poison while a producer remains", what);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	consumer_finish(&c);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	cr_assert_eq(lull_producer_attach(ring, 0, &other), -EPIPE,
		     "%s: attach after the last producer ended", what);
	close(b.go[0]);
	close(b.go[1]);
	consumer_fini(&c);
}

static void bound_all_exits(const struct topo *t, bool claim, bool last)
{
	for (unsigned how = 0; how < 4; how++)
		bound_thread_ends(t, (enum exit_path)how, claim, last);
}

Test(spsc, bound_producer_detaches_when_its_thread_ends, .timeout = 20)
{
	bound_all_exits(&spsc_topo, false, true);
}

Test(spsc, bound_producer_claim_is_aborted_when_its_thread_ends,
     .timeout = 20)
{
	bound_all_exits(&spsc_topo, true, true);
}

Test(mpsc, bound_producer_detaches_when_its_thread_ends, .timeout = 20)
{
	bound_all_exits(&mpsc_topo, false, true);
}

Test(mpsc, bound_producer_claim_is_aborted_when_its_thread_ends,
     .timeout = 20)
{
	bound_all_exits(&mpsc_topo, true, true);
}

Test(mpsc, bound_producer_ending_leaves_other_producers_open,
     .timeout = 20)
{
	bound_all_exits(&mpsc_topo, false, false);
}

Test(mpsc, dead_bound_claim_does_not_block_other_producers_records,
     .timeout = 20)
{
	bound_all_exits(&mpsc_topo, true, false);
}

struct two_bound {
	struct lull_ring *ring[2];
	int result[4];
};

/* One thread, three producers: two on one ring (one detached by hand
 * first), one on another.  Its end detaches what is left, once. */
static void *two_bound_main(void *arg)
{
	struct two_bound *tb = arg;
	struct lull_producer *a, *b, *c;

	tb->result[0] = lull_producer_attach(tb->ring[0],
					     LULL_PRODUCER_THREAD, &a);
	tb->result[1] = lull_producer_attach(tb->ring[0],
					     LULL_PRODUCER_THREAD, &b);
	tb->result[2] = lull_producer_attach(tb->ring[1],
					     LULL_PRODUCER_THREAD, &c);
	if (tb->result[0] == 0)
		tb->result[3] = lull_producer_detach(a);
	if (tb->result[1] == 0)
		lull_mpsc_write(b, 1, "b", 1);
	return NULL;
}

Test(mpsc, thread_end_detaches_each_bound_producer_once, .timeout = 20)
{
	struct lull_producer *keep;
	struct two_bound tb = { 0 };
	struct sink sink = { 0 };
	pthread_t thread;
	struct lull_record rec;

	cr_assert_eq(lull_ring_create(&tb.ring[0], 4096, LULL_RING_MPSC), 0);
	cr_assert_eq(lull_ring_create(&tb.ring[1], 4096, LULL_RING_MPSC), 0);
	/* Keeps ring 0 open past the thread's end. */
	cr_assert_eq(lull_producer_attach(tb.ring[0], 0, &keep), 0);
	cr_assert_eq(pthread_create(&thread, NULL, two_bound_main, &tb), 0);
	join_within(thread, DEADLINE_MS, "bound thread");
	for (int i = 0; i < 4; i++)
		cr_assert_eq(tb.result[i], 0, "call %d returned %d", i,
			     tb.result[i]);
	/* Ring 1 lost its only producer: poison. */
	cr_assert_eq(lull_ring_read(tb.ring[1], sink_handler, &sink, 8), 1);
	cr_assert_eq(sink.poisons, 1);
	/* Ring 0 is open: b's record, then nothing until keep leaves. */
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, 1);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), -EAGAIN);
	cr_assert_eq(lull_mpsc_write(keep, 2, NULL, 0), 0);
	cr_assert_eq(lull_producer_detach(keep), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, 2);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_peek(tb.ring[0], &rec), 0);
	cr_assert_eq(rec.type, LULL_TYPE_POISON);
	cr_assert_eq(lull_ring_release(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_destroy(tb.ring[0]), 0);
	cr_assert_eq(lull_ring_destroy(tb.ring[1]), 0);
}

/* ------------------------------------------------------------------------
 * A bound producer's thread ends right after its commit
 *
 * The consumer is parked with no safety net, and the producer's thread
 * commits one record and ends: it returns, calls pthread_exit(), or is
 * cancelled, the cancel arriving before the write (or while it holds a
 * claim, before the commit) so that it is pending throughout the commit
 * and its wake-up and acted on at the first cancellation point after.
 * With another producer keeping the ring open, nothing but that commit's
 * wake-up can end the park: no timer of lull's own, and no shutdown (the
 * thread's end detaches a producer that was not the last).  A wake-up
 * lost to the thread's end (a cancellation point between the wake claim
 * and the system call, say) leaves the record undelivered, and the test
 * fails at its deadline instead of stalling.  As the last producer, the
 * thread's end also shuts the ring down: the record, then the poison.
 */

/* No safety net at all, whatever LULL_SAFETY_NET_MS says. */
#define NO_SAFETY_NET UINT64_MAX

/*
 * After consumer_init(): park with no safety net (for a loop, a loop made
 * again with none), and in lull_ring_wait with no timeout either: its
 * timeout would end the park with the record there, as a safety net
 * does.  A lost wake-up then leaves the consumer asleep for good, and the
 * test fails at its deadline (the process ends with the thread).
 */
static void consumer_no_safety_net(struct consumer *c)
{
	struct lull_park_config park = { .safety_timeout_ns = NO_SAFETY_NET };
	struct lull_loop_config cfg = {
		.backend = loop_backend(c->way),
		.safety_timeout_ns = NO_SAFETY_NET,
	};

	cr_assert_eq(lull_ring_park_config(c->ring, &park), 0);
	c->wait_forever = true;
	if (!c->loop)
		return;
	cr_assert_eq(lull_loop_destroy(c->loop), 0);
	cr_assert_eq(lull_loop_create(&c->loop, &cfg), 0);
	cr_assert_eq(lull_loop_attach(c->loop, c->ring, consumer_take_in_loop,
				      c, c->limit),
		     0);
}

enum commit_end {
	END_RETURN,
	END_PTHREAD_EXIT,
	END_CANCEL_IN_WRITE,  /* cancel pending through the write */
	END_CANCEL_IN_COMMIT, /* cancel pending through claim's commit */
	COMMIT_ENDS
};

static const char *const commit_end_name[COMMIT_ENDS] = {
	"returns", "calls pthread_exit",
	"is cancelled (pending through its write)",
	"is cancelled (pending through its commit)",
};

struct committer {
	const struct topo *t;
	struct lull_ring *ring;
	enum commit_end how;
	struct lull_producer *prod;
	struct flag ready;
	atomic_int go;
	int ret;
	char why[160];
};

static UNWOUND void *committer_main(void *arg)
{
	struct committer *m = arg;
	bool cancel = m->how == END_CANCEL_IN_WRITE ||
		      m->how == END_CANCEL_IN_COMMIT;
	int ret;

	/* Until the commit, no cancellation point may act on the cancel. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	ret = lull_producer_attach(m->ring, LULL_PRODUCER_THREAD, &m->prod);
	if (ret < 0)
		snprintf(m->why, sizeof(m->why), "attach: %d", ret);
	else if (m->how == END_CANCEL_IN_COMMIT &&
		 (ret = claim_record(m->t, m->prod, 0, 0)) < 0)
		snprintf(m->why, sizeof(m->why), "claim: %d", ret);
	flag_set(&m->ready, 1);
	if (m->why[0])
		return NULL;
	while (!atomic_load_explicit(&m->go, memory_order_acquire))
		sched_yield();
	/* A cancel sent by now stays pending: no cancellation point yet. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	if (m->how == END_CANCEL_IN_COMMIT)
		ret = m->t->commit(m->prod);
	else
		ret = send_record(m->t, m->prod, 0, 0);
	if (ret < 0)
		snprintf(m->why, sizeof(m->why), "commit: %d", ret);
	if (cancel) {
		pthread_testcancel();
		snprintf(m->why, sizeof(m->why),
			 "a pending cancel was not acted on");
		return NULL;
	}
	if (m->how == END_PTHREAD_EXIT)
		pthread_exit((void *)2);
	return (void *)1;
}

static void commit_then_end(const struct topo *t, enum way way,
			    enum commit_end how, bool last)
{
	struct lull_ring_stats st;
	struct lull_producer *other = NULL;
	struct committer m = { .t = t, .how = how };
	struct ledger ledger = { 0 };
	struct lull_ring *ring;
	struct consumer c;
	pthread_t thread;
	char what[200];
	void *result;

	snprintf(what, sizeof(what),
		 "%s, %s, no safety net: the %s bound producer commits to a "
		 "parked consumer and its thread %s",
		 t->name, way_name[way], last ? "last" : "not the last",
		 commit_end_name[how]);
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, way, what);
	consumer_no_safety_net(&c);
	if (!last)
		cr_assert_eq(lull_producer_attach(ring, 0, &other), 0);
	m.ring = ring;
	flag_init(&m.ready);
	atomic_init(&m.go, 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, committer_main, &m), 0);
	cr_assert(flag_wait(&m.ready, 1, DEADLINE_MS), "%s: not ready", what);
	cr_assert(!m.why[0], "%s: %s", what, m.why);
	consumer_wait_parked(&c, 0);
	if (how == END_CANCEL_IN_WRITE || how == END_CANCEL_IN_COMMIT)
		cr_assert_eq(pthread_cancel(thread), 0);
	atomic_store_explicit(&m.go, 1, memory_order_release);
	result = join_within(thread, DEADLINE_MS, what);
	cr_assert(!m.why[0], "%s: %s", what, m.why);
	cr_assert_eq(result,
		     how == END_RETURN	       ? (void *)1
		     : how == END_PTHREAD_EXIT ? (void *)2
					       : PTHREAD_CANCELED,
		     "%s: thread result %p", what, result);
	ledger_add(&ledger, 0, 0);
	if (!last) {
		/*
		 * The ring is open and nothing else wakes the consumer: the
		 * record arrives by its commit's wake-up or never.
		 */
		consumer_wait_handled(&c, 1);
		cr_assert_eq(consumer_poisoned(&c), 0,
			     "%s: poison while a producer remains", what);
		cr_assert_eq(lull_ring_stats(ring, &st), 0);
		cr_assert_geq(st.wakes, 1, "%s: the record arrived without a "
					   "wake-up call", what);
		cr_assert_eq(lull_producer_detach(other), 0);
	}
	consumer_finish(&c);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	/* Read from the region, which lasts until the ring is destroyed. */
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	cr_assert_geq(st.wakes, 1, "%s: no wake-up call for a record "
				   "committed to a parked consumer", what);
	cr_assert_eq(st.safety_timeouts, 0, "%s", what);
	consumer_fini(&c);
}

static void commit_then_end_all(const struct topo *t, enum way way)
{
	for (unsigned how = 0; how < COMMIT_ENDS; how++) {
		commit_then_end(t, way, (enum commit_end)how, true);
		if (is_mpsc(t))
			commit_then_end(t, way, (enum commit_end)how, false);
	}
}

#define COMMIT_END_TESTS(suite, topo)                                       \
	Test(suite, thread_ending_after_commit_wakes_lull_ring_wait,         \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_WAIT);                       \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_uring_futex_park,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_URING_FUTEX);                \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_uring_eventfd_park,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_URING_EVENTFD);              \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_futex,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_FUTEX);                 \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_eventfd,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_EVENTFD);               \
	}                                                                   \
	Test(suite, thread_ending_after_commit_wakes_loop_epoll,             \
	     .timeout = 20)                                                 \
	{                                                                   \
		commit_then_end_all(&topo, WAY_LOOP_EPOLL);                 \
	}

COMMIT_END_TESTS(spsc, spsc_topo)
COMMIT_END_TESTS(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * A producer cancelled inside a wake-up
 *
 * The producer's write commits, finds the consumer parked and wakes it.
 * When the thread has a cancellation pending, any cancellation point on
 * that path ends the thread there.  The thread-bound producer detaches
 * (the ring shuts down), and the consumer must get the record and the
 * poison and be able to tear down (a wake-up left half done must not
 * leave it waiting).
 */

struct doomed {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct flag ready;
	atomic_int go;
	int ret;
	uint8_t record[sizeof(struct stamp)];
};

static UNWOUND void *doomed_main(void *arg)
{
	struct doomed *d = arg;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	d->ret = lull_producer_attach(d->ring, LULL_PRODUCER_THREAD,
				      &d->prod);
	flag_set(&d->ready, 1);
	if (d->ret < 0)
		return NULL;
	while (!atomic_load_explicit(&d->go, memory_order_acquire))
		sched_yield();
	/* The cancel is pending: the next cancellation point acts on it. */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	d->ret = d->t->write(d->prod, record_type(0), d->record,
			     sizeof(d->record));
	pthread_testcancel();
	return NULL;
}

/* Runs lull_ring_destroy, which must not hang. */
struct destroyer {
	struct consumer *c;
	struct flag done;
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	consumer_fini(d->c);
	flag_set(&d->done, 1);
	return NULL;
}

static void cancelled_in_wake(const struct topo *t, enum way way)
{
	struct lull_ring_stats st;
	struct destroyer killer;
	struct consumer c;
	struct doomed d = { .t = t };
	struct ledger ledger = { 0 };
	struct lull_ring *ring;
	pthread_t thread, reaper;
	char what[160];

	snprintf(what, sizeof(what),
		 "%s, bound producer cancelled while waking a consumer (%s)",
		 t->name, way_name[way]);
	cr_assert_eq(lull_ring_create(&ring, RING_CAP, t->flags), 0);
	consumer_init(&c, ring, way, what);
	/*
	 * No safety net: a wake-up claimed and then cut short by the
	 * cancellation would leave the consumer asleep for good (the
	 * detach's shutdown finds the park word already claimed), and the
	 * consumer would not finish by our deadline.
	 */
	consumer_no_safety_net(&c);
	d.ring = ring;
	record_fill(d.record, 0, 0);
	flag_init(&d.ready);
	atomic_init(&d.go, 0);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, doomed_main, &d), 0);
	cr_assert(flag_wait(&d.ready, 1, DEADLINE_MS));
	cr_assert_eq(d.ret, 0);
	consumer_wait_parked(&c, 0);
	cr_assert_eq(pthread_cancel(thread), 0);
	atomic_store_explicit(&d.go, 1, memory_order_release);
	cr_assert_eq(join_within(thread, DEADLINE_MS, what), PTHREAD_CANCELED);
	/* The record was committed before any wake-up was tried. */
	ledger_add(&ledger, 0, 0);
	/* Stats are read from the region: still there after the teardown. */
	consumer_finish(&c);
	cr_assert_eq(lull_ring_stats(ring, &st), 0);
	sink_expect(what, &c.sink, &ledger, NULL, false);
	killer.c = &c;
	flag_init(&killer.done);
	cr_assert_eq(pthread_create(&reaper, NULL, destroyer_main, &killer),
		     0);
	cr_assert(flag_wait(&killer.done, 1, 2000),
		  "%s: tearing the consumer down hangs (a wake-up cut short "
		  "by the cancellation left the region's waker count up)",
		  what);
	join_within(reaper, DEADLINE_MS, what);
	/* The consumer was parked when the record was committed. */
	cr_assert_geq(st.wakes, 1,
		      "%s: no wake-up call completed for a record committed "
		      "to a parked consumer",
		      what);
}

#define CANCEL_WAKE_TESTS(suite, topo)                                      \
	Test(suite, producer_cancelled_waking_lull_ring_wait_wedges_nothing, \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_WAIT);                         \
	}                                                                   \
	Test(suite, producer_cancelled_waking_uring_futex_wedges_nothing,   \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_URING_FUTEX);                  \
	}                                                                   \
	Test(suite, producer_cancelled_waking_uring_eventfd_wedges_nothing, \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_URING_EVENTFD);                \
	}                                                                   \
	Test(suite, producer_cancelled_waking_loop_futex_wedges_nothing,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_LOOP_FUTEX);                   \
	}                                                                   \
	Test(suite, producer_cancelled_waking_loop_eventfd_wedges_nothing,  \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_LOOP_EVENTFD);                 \
	}                                                                   \
	Test(suite, producer_cancelled_waking_loop_epoll_wedges_nothing,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		cancelled_in_wake(&topo, WAY_LOOP_EPOLL);                   \
	}

CANCEL_WAKE_TESTS(spsc, spsc_topo)
CANCEL_WAKE_TESTS(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * The consumer leaves: lull_ring_close()
 */

#define WRITERS 3

struct writer {
	const struct topo *t;
	struct lull_ring *ring;
	unsigned index;
	atomic_uint sent;
	atomic_uint fulls; /* -EAGAIN seen */
	int last;          /* the result that ended it */
	struct flag done;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct lull_producer *prod;
	uint32_t seq = 0;
	int ret;

	w->last = lull_producer_attach(w->ring, 0, &prod);
	if (w->last < 0) {
		flag_set(&w->done, 1);
		return NULL;
	}
	for (;;) {
		ret = send_record(w->t, prod, w->index, seq);
		if (ret == 0) {
			seq++;
			atomic_fetch_add_explicit(&w->sent, 1,
						  memory_order_relaxed);
		} else if (ret == -EAGAIN) {
			atomic_fetch_add_explicit(&w->fulls, 1,
						  memory_order_relaxed);
			sched_yield();
		} else {
			break;
		}
	}
	w->last = ret;
	lull_producer_detach(prod);
	flag_set(&w->done, 1);
	return NULL;
}

static void consumer_closes(const struct topo *t)
{
	struct writer w[WRITERS];
	struct lull_ring *ring, *other;
	struct lull_producer *prod;
	struct sink sink = { 0 };
	struct lull_record rec;
	pthread_t thread[WRITERS];
	unsigned n = is_mpsc(t) ? WRITERS : 1;
	uint64_t deadline = now_ms() + DEADLINE_MS;
	size_t size = (size_t)lull_ring_region_size(4096);
	void *mem = aligned_alloc(128, size); /* size is a multiple */

	cr_assert_not_null(mem);
	cr_assert_eq(lull_ring_create_in(&ring, mem, size, 4096, t->flags), 0);
	cr_assert_eq(lull_ring_open(&other, mem, size, 0), 0);
	cr_assert_eq(lull_ring_close(NULL), -EINVAL);
	cr_assert_eq(lull_ring_close(other), -EPERM,
		     "close by a handle that does not consume");
	for (unsigned i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].t = t;
		w[i].ring = ring;
		w[i].index = i;
		flag_init(&w[i].done);
		cr_assert_eq(pthread_create(&thread[i], NULL, writer_main,
					    &w[i]),
			     0);
	}
	/* Let every writer fill the ring, then read a little. */
	for (unsigned i = 0; i < n; i++)
		while (!atomic_load(&w[i].fulls))
			cr_assert_lt(now_ms(), deadline,
				     "writer %u never found the ring full", i);
	cr_assert_gt(lull_ring_read(ring, sink_handler, &sink, 10), 0);
	cr_assert_eq(lull_ring_close(ring), 0);
	for (unsigned i = 0; i < n; i++) {
		cr_assert(flag_wait(&w[i].done, 1, DEADLINE_MS),
			  "%s: writer %u still writing after the consumer "
			  "closed (sent %u, %u full)",
			  t->name, i, atomic_load(&w[i].sent),
			  atomic_load(&w[i].fulls));
		join_within(thread[i], DEADLINE_MS, "writer");
		cr_assert_eq(w[i].last, -EPIPE, "writer %u ended with %d", i,
			     w[i].last);
	}
	cr_assert(!sink.bad[0], "%s", sink.bad);
	/* The consumer's own reads: -EPIPE, no records and no poison. */
	for (int k = 0; k < 2; k++) {
		unsigned before = sink.n;
		int ret = lull_ring_read(ring, sink_handler, &sink, 100);

		cr_assert_eq(ret, -EPIPE,
			     "%s: read after lull_ring_close returned %d and "
			     "handed %u records",
			     t->name, ret, sink.n - before);
		cr_assert_eq(lull_ring_peek(ring, &rec), -EPIPE);
		cr_assert_eq(lull_ring_wait(ring, 0), -EPIPE);
	}
	cr_assert_eq(sink.poisons, 0, "the consumer that left got a poison");
	cr_assert_eq(lull_producer_attach(other, 0, &prod), -EPIPE);
	cr_assert_eq(lull_ring_destroy(other), 0);
	cr_assert_eq(lull_ring_destroy(ring), 0);
	free(mem);
}

Test(spsc, consumer_close_makes_a_blocked_producer_fail_with_epipe,
     .timeout = 20)
{
	consumer_closes(&spsc_topo);
}

Test(mpsc, consumer_close_makes_writing_producers_fail_with_epipe,
     .timeout = 20)
{
	consumer_closes(&mpsc_topo);
}

/* Reads after the consumer's own close are -EPIPE, with records left in
 * the ring or not, whatever the head's position. */
static void reads_after_close(const struct topo *t, unsigned taken,
			      unsigned left)
{
	struct lull_record rec;
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, taken + left);
	if (taken)
		cr_assert_eq(lull_ring_read(s.ring, sink_handler, &s.sink,
					    taken),
			     (int)taken);
	cr_assert_eq(lull_ring_close(s.ring), 0);
	for (int k = 0; k < 2; k++) {
		int ret = lull_ring_read(s.ring, sink_handler, &s.sink, 100);

		cr_assert_eq(ret, -EPIPE,
			     "%s, %u read, %u left: read after close returned "
			     "%d (%s), %u records handed",
			     t->name, taken, left, ret,
			     ret < 0 ? lull_strerror(ret) : "a count",
			     s.sink.n - taken);
		ret = lull_ring_peek(s.ring, &rec);
		cr_assert_eq(ret, -EPIPE,
			     "%s, %u read, %u left: peek after close returned "
			     "%d",
			     t->name, taken, left, ret);
	}
	cr_assert_eq(lull_ring_wait(s.ring, 0), -EPIPE);
	cr_assert_eq(send_record(t, s.prod, 0, 99), -EPIPE);
	solo_fini(&s);
}

static void reads_after_close_all(const struct topo *t)
{
	reads_after_close(t, 0, 0);
	reads_after_close(t, 3, 0);
	reads_after_close(t, 0, 3);
	reads_after_close(t, 2, 3);
}

Test(spsc, reads_after_the_consumer_closed_are_epipe, .timeout = 20)
{
	reads_after_close_all(&spsc_topo);
}

Test(mpsc, reads_after_the_consumer_closed_are_epipe, .timeout = 20)
{
	reads_after_close_all(&mpsc_topo);
}

/* Nobody will read a fatal record after the consumer left: -EPIPE, as for
 * any report too late to be delivered. */
static void fatal_after_close(const struct topo *t)
{
	struct solo s;

	solo_init(&s, t, 4096);
	solo_send(&s, 1);
	cr_assert_eq(lull_ring_close(s.ring), 0);
	cr_assert_eq(lull_ring_fatal(s.ring, 1, "nobody listens"), -EPIPE);
	solo_fini(&s);
}

Test(spsc, fatal_after_the_consumer_closed_is_epipe, .timeout = 20)
{
	fatal_after_close(&spsc_topo);
}

Test(mpsc, fatal_after_the_consumer_closed_is_epipe, .timeout = 20)
{
	fatal_after_close(&mpsc_topo);
}

/* ------------------------------------------------------------------------
 * Signals: lull_ring_shutdown and lull_ring_fatal are async-signal-safe
 */

static struct lull_ring *_Atomic signal_ring;
static atomic_int signal_fatal; /* the handler reports a fatal instead */
static atomic_int signal_hits;

static void on_signal(int signo)
{
	struct lull_ring *ring =
		atomic_load_explicit(&signal_ring, memory_order_acquire);
	int ret;

	(void)signo;
	if (atomic_load_explicit(&signal_fatal, memory_order_relaxed))
		ret = lull_ring_fatal(ring, test_fatal.code,
				      test_fatal.message);
	else
		ret = lull_ring_shutdown(ring, LULL_SHUTDOWN_GRACEFUL);
	atomic_fetch_add_explicit(&signal_hits, ret == 0 ? 1 : 1000,
				  memory_order_release);
}

static void signal_setup(struct lull_ring *ring, bool fatal)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	atomic_store(&signal_ring, ring);
	atomic_store(&signal_fatal, fatal);
	atomic_store(&signal_hits, 0);
}

struct streamer {
	const struct topo *t;
	struct lull_ring *ring;
	struct ledger ledger; /* this thread's, read after the join */
	atomic_uint sent;
	int last;
};

/* Writes (and claims) until the ring is shut down; a signal may come in
 * the middle of any call. */
static void *streamer_main(void *arg)
{
	struct streamer *s = arg;
	struct lull_producer *prod;
	uint32_t seq = 0;
	int ret;

	s->last = lull_producer_attach(s->ring, 0, &prod);
	if (s->last < 0)
		return NULL;
	for (;;) {
		/* Near the ledger's end, wait for the signal's shutdown. */
		while (s->ledger.n >= LEDGER_MAX - 1 &&
		       !atomic_load_explicit(&signal_hits,
					     memory_order_acquire))
			sched_yield();
		ret = send_record(s->t, prod, 0, seq);
		if (ret == 0) {
			if (s->ledger.n >= LEDGER_MAX) {
				ret = -ENOSPC; /* after the shutdown: a bug */
				break;
			}
			ledger_add(&s->ledger, 0, seq++);
			atomic_store_explicit(&s->sent, seq,
					      memory_order_release);
		} else if (ret == -EAGAIN) {
			sched_yield();
		} else {
			break;
		}
	}
	s->last = ret;
	lull_producer_detach(prod);
	return NULL;
}

/* The signal interrupts the producer, mid-stream: every record whose write
 * returned 0 arrives, and nothing else. */
static void signal_in_producer(const struct topo *t, bool fatal)
{
	struct streamer s = { .t = t };
	struct consumer c;
	pthread_t thread;
	uint64_t deadline = now_ms() + DEADLINE_MS;

	cr_assert_eq(lull_ring_create(&s.ring, 4096, t->flags), 0);
	consumer_init(&c, s.ring, WAY_WAIT, fatal ? "fatal from a signal"
						  : "shutdown from a signal");
	signal_setup(s.ring, fatal);
	consumer_start(&c);
	cr_assert_eq(pthread_create(&thread, NULL, streamer_main, &s), 0);
	while (atomic_load_explicit(&s.sent, memory_order_acquire) < 300)
		cr_assert_lt(now_ms(), deadline, "the producer is stuck");
	cr_assert_eq(pthread_kill(thread, SIGUSR1), 0);
	join_within(thread, DEADLINE_MS, "producer");
	cr_assert_eq(atomic_load(&signal_hits), 1, "the handler's call failed");
	cr_assert_eq(s.last, -EPIPE);
	consumer_finish(&c);
	sink_expect(c.what, &c.sink, &s.ledger, fatal ? &test_fatal : NULL,
		    false);
	consumer_fini(&c);
}

Test(spsc, shutdown_from_a_signal_handler_interrupting_the_producer,
     .timeout = 20)
{
	signal_in_producer(&spsc_topo, false);
}

Test(mpsc, shutdown_from_a_signal_handler_interrupting_the_producer,
     .timeout = 20)
{
	signal_in_producer(&mpsc_topo, false);
}

Test(spsc, fatal_from_a_signal_handler_interrupting_the_producer,
     .timeout = 20)
{
	signal_in_producer(&spsc_topo, true);
}

Test(mpsc, fatal_from_a_signal_handler_interrupting_the_producer,
     .timeout = 20)
{
	signal_in_producer(&mpsc_topo, true);
}

/* The signal lands on the parked consumer's own thread. */
static void signal_in_parked_consumer(const struct topo *t, enum way way)
{
	struct fix f;

	fix_init(&f, t, way, 1,
		 "%s, shutdown from a signal on the parked consumer (%s)",
		 t->name, way_name[way]);
	signal_setup(f.ring, false);
	consumer_start(&f.c);
	fix_send_ok(&f, 0, 2);
	consumer_wait_handled(&f.c, 2);
	consumer_wait_parked(&f.c, 0);
	cr_assert_eq(pthread_kill(f.c.thread, SIGUSR1), 0);
	consumer_finish(&f.c);
	cr_assert_eq(atomic_load(&signal_hits), 1);
	sink_expect(f.what, &f.c.sink, &f.ledger, NULL, false);
	fix_expect_closed(&f);
	fix_fini(&f);
}

#define SIGNAL_PARKED_TESTS(suite, topo)                                    \
	Test(suite, signal_handler_shutdown_wakes_its_own_lull_ring_wait,   \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_WAIT);                 \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_uring_futex,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_URING_FUTEX);          \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_uring_eventfd,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_URING_EVENTFD);        \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_futex,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_FUTEX);           \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_eventfd,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_EVENTFD);         \
	}                                                                   \
	Test(suite, signal_handler_shutdown_wakes_its_own_loop_epoll,       \
	     .timeout = 20)                                                 \
	{                                                                   \
		signal_in_parked_consumer(&topo, WAY_LOOP_EPOLL);           \
	}

SIGNAL_PARKED_TESTS(spsc, spsc_topo)
SIGNAL_PARKED_TESTS(mpsc, mpsc_topo)

/* ------------------------------------------------------------------------
 * Loops with several rings
 */

#define LOOP_RINGS 3

struct loop_ring_fix {
	const struct topo *t;
	struct lull_ring *ring;
	struct lull_producer *prod;
	struct ledger ledger;
	struct sink sink;
	atomic_uint handled;
	atomic_uint poisoned;
	atomic_bool destroyed; /* by the loop's timer, after the poison */
	int destroy_error;
	/* Hold the handler at these seqs (UINT32_MAX: never). */
	uint32_t gate_seq[2];
	struct flag gate[2]; /* 1: held, 2: let go */
};

struct loop_fix {
	enum way way;
	char what[160];
	struct lull_loop *loop;
	struct loop_ring_fix r[LOOP_RINGS];
	unsigned nrings;
	pthread_t thread;
	_Atomic pid_t tid;
	struct flag done;
	int run_ret;
	bool destroy_in_timer;
};

static int loop_ring_take(const struct lull_record *rec, void *ctx)
{
	struct loop_ring_fix *r = ctx;
	struct stamp st;

	sink_take(&r->sink, rec);
	if (rec->type == LULL_TYPE_POISON)
		atomic_fetch_add_explicit(&r->poisoned, 1,
					  memory_order_release);
	atomic_fetch_add_explicit(&r->handled, 1, memory_order_release);
	if (rec->type > 0 && rec->len >= sizeof(st)) {
		memcpy(&st, rec->data, sizeof(st));
		for (int g = 0; g < 2; g++)
			if (st.seq == r->gate_seq[g]) {
				flag_set(&r->gate[g], 1);
				if (!flag_wait(&r->gate[g], 2, DEADLINE_MS))
					sink_bad(&r->sink, "never let go");
			}
	}
	return LULL_READ_CONTINUE;
}

/* On the loop's thread: destroy each ring once it has had its poison;
 * -EBUSY until the loop has detached it. */
static void loop_reaper(struct lull_loop *loop, void *ctx)
{
	struct loop_fix *lf = ctx;
	int ret;

	(void)loop;
	for (unsigned i = 0; i < lf->nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		if (atomic_load(&r->destroyed) || !atomic_load(&r->poisoned) ||
		    r->prod)
			continue;
		ret = lull_ring_destroy(r->ring);
		if (ret == 0)
			atomic_store(&r->destroyed, true);
		else if (ret != -EBUSY)
			r->destroy_error = ret;
	}
}

static void *loop_main(void *arg)
{
	struct loop_fix *lf = arg;

	atomic_store(&lf->tid, gettid());
	lf->run_ret = lull_loop_run(lf->loop);
	flag_set(&lf->done, 1);
	return NULL;
}

static void loop_fix_init(struct loop_fix *lf, enum way way, unsigned nrings,
			  unsigned batch, const char *what)
{
	struct lull_loop_config cfg = {
		.backend = loop_backend(way),
		.safety_timeout_ns = SAFETY_NS,
	};
	int ret;

	memset(lf, 0, sizeof(*lf));
	lf->way = way;
	lf->nrings = nrings;
	snprintf(lf->what, sizeof(lf->what), "%s, %s", what, way_name[way]);
	skip_unless_supported(way);
	flag_init(&lf->done);
	atomic_init(&lf->tid, 0);
	ret = lull_loop_create(&lf->loop, &cfg);
	cr_assert_eq(ret, 0, "lull_loop_create: %s", lull_strerror(ret));
	for (unsigned i = 0; i < nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		r->t = i % 2 ? &mpsc_topo : &spsc_topo;
		r->gate_seq[0] = r->gate_seq[1] = UINT32_MAX;
		flag_init(&r->gate[0]);
		flag_init(&r->gate[1]);
		atomic_init(&r->handled, 0);
		atomic_init(&r->poisoned, 0);
		atomic_init(&r->destroyed, false);
		cr_assert_eq(lull_ring_create(&r->ring, RING_CAP, r->t->flags),
			     0);
		cr_assert_eq(lull_producer_attach(r->ring, 0, &r->prod), 0);
		cr_assert_eq(lull_loop_attach(lf->loop, r->ring,
					      loop_ring_take, r, batch),
			     0);
	}
}

static void loop_fix_send(struct loop_fix *lf, unsigned i, unsigned n)
{
	struct loop_ring_fix *r = &lf->r[i];

	for (unsigned k = 0; k < n; k++) {
		uint32_t seq = r->ledger.next_seq[0]++;

		cr_assert_eq(send_record(r->t, r->prod, 0, seq), 0,
			     "%s: ring %u write", lf->what, i);
		ledger_add(&r->ledger, 0, seq);
	}
}

static void loop_fix_start(struct loop_fix *lf)
{
	cr_assert_eq(pthread_create(&lf->thread, NULL, loop_main, lf), 0);
	while (!atomic_load(&lf->tid))
		sched_yield();
}

static void loop_fix_wait_handled(struct loop_fix *lf, unsigned i,
				  unsigned n)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;

	while (atomic_load(&lf->r[i].handled) < n) {
		cr_assert_lt(now_ms(), deadline,
			     "%s: ring %u handed %u of %u records", lf->what,
			     i, atomic_load(&lf->r[i].handled), n);
		nap_us(100);
	}
}

/* The loop's thread asleep in the kernel (see consumer_wait_parked). */
static void loop_fix_wait_parked(struct loop_fix *lf)
{
	uint64_t deadline = now_ms() + DEADLINE_MS;
	pid_t tid = atomic_load(&lf->tid);

	while (thread_state(tid) != 'S' ||
	       (nap_us(2000), thread_state(tid) != 'S'))
		cr_assert_lt(now_ms(), deadline, "%s: the loop never parked",
			     lf->what);
}

static void loop_fix_finish(struct loop_fix *lf)
{
	cr_assert(flag_wait(&lf->done, 1, DEADLINE_MS),
		  "%s: lull_loop_run did not return", lf->what);
	join_within(lf->thread, DEADLINE_MS, lf->what);
	cr_assert_eq(lf->run_ret, 0, "%s: lull_loop_run returned %d",
		     lf->what, lf->run_ret);
}

static void loop_fix_fini(struct loop_fix *lf)
{
	for (unsigned i = 0; i < lf->nrings; i++) {
		struct loop_ring_fix *r = &lf->r[i];

		if (r->prod)
			cr_assert_eq(lull_producer_detach(r->prod), 0);
		if (!atomic_load(&r->destroyed))
			cr_assert_eq(lull_ring_destroy(r->ring), 0,
				     "%s: ring %u still attached to the loop",
				     lf->what, i);
	}
	cr_assert_eq(lull_loop_destroy(lf->loop), 0);
	expect_no_leaks(lf->what);
}

/* lull_loop_stop shuts down every ring: each delivers what was committed,
 * then its poison, is detached, and run returns. */
static void loop_stop_all(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, LOOP_RINGS, 16, "lull_loop_stop");
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 5);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 5);
	loop_fix_wait_parked(&lf);
	/* Pending at the stop: 1, 41 and 81 records. */
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 1 + i * 40);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++) {
		struct loop_ring_fix *r = &lf.r[i];

		sink_expect(lf.what, &r->sink, &r->ledger, NULL, false);
		cr_assert_eq(send_record(r->t, r->prod, 0, 999), -EPIPE);
	}
	loop_fix_fini(&lf);
}

static struct lull_loop *_Atomic signal_loop;

static void on_stop_signal(int signo)
{
	(void)signo;
	lull_loop_stop(atomic_load_explicit(&signal_loop,
					    memory_order_acquire));
}

static void loop_stop_all_by_signal(enum way way)
{
	struct loop_fix lf;
	struct sigaction sa;

	loop_fix_init(&lf, way, LOOP_RINGS, 16,
		      "lull_loop_stop from a signal handler");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR2, &sa, NULL), 0);
	atomic_store(&signal_loop, lf.loop);
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 3);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 3);
	loop_fix_wait_parked(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 2);
	cr_assert_eq(pthread_kill(lf.thread, SIGUSR2), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* One ring shut down: it drains, gets its poison and is detached (the
 * loop's timer destroys it); the others keep delivering until the stop. */
static void loop_one_ring_ends(enum way way)
{
	struct loop_fix lf;
	uint64_t deadline;

	loop_fix_init(&lf, way, LOOP_RINGS, 16, "one ring shut down");
	cr_assert_eq(lull_loop_timer(lf.loop, 1000000, 1000000, loop_reaper,
				     &lf, NULL),
		     0);
	loop_fix_start(&lf);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 4);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_wait_handled(&lf, i, 4);
	loop_fix_send(&lf, 0, 30);
	loop_fix_send(&lf, 1, 7);
	cr_assert_eq(lull_ring_shutdown(lf.r[0].ring, LULL_SHUTDOWN_GRACEFUL),
		     0);
	loop_fix_send(&lf, 2, 7);
	cr_assert_eq(send_record(lf.r[0].t, lf.r[0].prod, 0, 999), -EPIPE);
	cr_assert_eq(lull_producer_detach(lf.r[0].prod), 0);
	lf.r[0].prod = NULL;
	deadline = now_ms() + DEADLINE_MS;
	while (!atomic_load(&lf.r[0].destroyed))
		cr_assert_lt(now_ms(), deadline,
			     "%s: ring 0 not destroyable after its poison "
			     "(poisoned %u, destroy error %d)",
			     lf.what, atomic_load(&lf.r[0].poisoned),
			     lf.r[0].destroy_error);
	cr_assert_eq(lf.r[0].destroy_error, 0);
	sink_expect(lf.what, &lf.r[0].sink, &lf.r[0].ledger, NULL, false);
	/* The others were never disturbed: they go on. */
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 1; i < LOOP_RINGS; i++) {
			unsigned had = lf.r[i].ledger.n;

			loop_fix_send(&lf, i, 5);
			loop_fix_wait_handled(&lf, i, had + 5);
			cr_assert_eq(atomic_load(&lf.r[i].poisoned), 0,
				     "%s: ring %u poisoned", lf.what, i);
		}
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	for (unsigned i = 1; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* A second stop makes the shutdown immediate: what is undelivered when
 * the loop acts on it is discarded.  Batches of one record, so that the
 * loop acts on each stop right after the record it holds at. */
static void loop_second_stop(enum way way)
{
	struct loop_fix lf;
	struct loop_ring_fix *r;

	loop_fix_init(&lf, way, 2, 1, "second lull_loop_stop");
	for (unsigned i = 0; i < 2; i++) {
		lf.r[i].gate_seq[0] = 0;
		lf.r[i].gate_seq[1] = 1;
	}
	for (unsigned i = 0; i < 2; i++)
		loop_fix_send(&lf, i, 10);
	loop_fix_start(&lf);
	/* First stop while the loop holds at record 0 of both rings. */
	r = &lf.r[0];
	cr_assert(flag_wait(&r->gate[0], 1, DEADLINE_MS));
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	flag_set(&r->gate[0], 2);
	cr_assert(flag_wait(&lf.r[1].gate[0], 1, DEADLINE_MS));
	flag_set(&lf.r[1].gate[0], 2);
	/* Graceful: record 1 still comes; the second stop while it is held. */
	cr_assert(flag_wait(&r->gate[1], 1, DEADLINE_MS));
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	flag_set(&r->gate[1], 2);
	cr_assert(flag_wait(&lf.r[1].gate[1], 1, DEADLINE_MS));
	flag_set(&lf.r[1].gate[1], 2);
	loop_fix_finish(&lf);
	for (unsigned i = 0; i < 2; i++) {
		r = &lf.r[i];
		/* Records 2..9 were undelivered at the second stop. */
		for (unsigned k = 2; k < r->ledger.n; k++)
			r->ledger.e[k].live = false;
		sink_expect(lf.what, &r->sink, &r->ledger, NULL, false);
	}
	loop_fix_fini(&lf);
}

/* A stop requested before run: run drains every ring, then returns. */
static void loop_stop_before_run(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, LOOP_RINGS, 4, "lull_loop_stop before run");
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		loop_fix_send(&lf, i, 3 + i * 5);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	lf.run_ret = lull_loop_run(lf.loop);
	cr_assert_eq(lf.run_ret, 0);
	for (unsigned i = 0; i < LOOP_RINGS; i++)
		sink_expect(lf.what, &lf.r[i].sink, &lf.r[i].ledger, NULL,
			    false);
	loop_fix_fini(&lf);
}

/* A fatal report reaches the ring's handler, before its poison, while the
 * other rings carry on. */
static void loop_fatal(enum way way)
{
	struct loop_fix lf;

	loop_fix_init(&lf, way, 2, 16, "fatal on one ring of a loop");
	loop_fix_start(&lf);
	loop_fix_send(&lf, 0, 3);
	loop_fix_send(&lf, 1, 3);
	loop_fix_wait_handled(&lf, 1, 3);
	cr_assert_eq(lull_ring_fatal(lf.r[1].ring, test_fatal.code,
				     test_fatal.message),
		     0);
	loop_fix_wait_handled(&lf, 1, 5);
	loop_fix_send(&lf, 0, 3);
	loop_fix_wait_handled(&lf, 0, 6);
	cr_assert_eq(atomic_load(&lf.r[0].poisoned), 0);
	cr_assert_eq(lull_loop_stop(lf.loop), 0);
	loop_fix_finish(&lf);
	sink_expect(lf.what, &lf.r[0].sink, &lf.r[0].ledger, NULL, false);
	sink_expect(lf.what, &lf.r[1].sink, &lf.r[1].ledger, &test_fatal,
		    false);
	loop_fix_fini(&lf);
}

#define LOOP_TESTS(name, way)                                               \
	Test(loop, stop_shuts_down_every_ring_and_returns_##name,           \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_stop_all(way);                                  \
	}                                                                   \
	Test(loop, stop_from_a_signal_handler_drains_and_returns_##name,    \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_stop_all_by_signal(way);                               \
	}                                                                   \
	Test(loop, one_ring_shut_down_leaves_the_others_running_##name,     \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_one_ring_ends(way);                                    \
	}                                                                   \
	Test(loop, second_stop_discards_what_is_undelivered_##name,         \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_second_stop(way);                                      \
	}                                                                   \
	Test(loop, stop_before_run_drains_every_ring_##name, .timeout = 20) \
	{                                                                   \
		loop_stop_before_run(way);                                  \
	}                                                                   \
	Test(loop, fatal_reaches_the_handler_before_the_poison_##name,      \
	     .timeout = 20)                                                 \
	{                                                                   \
		loop_fatal(way);                                            \
	}

LOOP_TESTS(uring_futex, WAY_LOOP_FUTEX)
LOOP_TESTS(uring_eventfd, WAY_LOOP_EVENTFD)
LOOP_TESTS(epoll, WAY_LOOP_EPOLL)
