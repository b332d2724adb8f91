/* SPDX-License-Identifier: MIT */
/*
 * shutdown_sink.h - what the shutdown suites (test_shutdown_*.c,
 * test_producer_thread.c) check every ring's end against: struct ledger
 * (what the producers committed, in ring order) and struct sink (what the
 * consumer was handed).  Records are test/lib's stamped records.
 */
#ifndef LULL_TEST_SHUTDOWN_SINK_H
#define LULL_TEST_SHUTDOWN_SINK_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"

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

#include "criterion_hook.h"
#include "lib/proc.h"
#include "lib/threads.h"
#include "lib/topo.h"

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
		    rec->type != stamp_type(st.producer) ||
		    rec->len != stamp_len(st.seq))
			sink_bad(s, "record %u: type %d, %u bytes, stamp %u/%u",
				 s->n, rec->type, rec->len, st.producer,
				 st.seq);
		for (size_t i = sizeof(st); i < rec->len && !s->bad[0]; i++)
			if (p[i] != stamp_byte(st.producer, st.seq, i))
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


#pragma GCC diagnostic pop

#endif
