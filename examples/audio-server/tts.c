/* SPDX-License-Identifier: MIT */
/*
 * tts.c - the worker pool: espeak-ng synthesis, libsoxr resampling, and
 * the two directions of lull rings (see tts.h).
 *
 * One job, in a worker:
 *   for each segment of the text (a sentence, or SEGMENT_MAX bytes):
 *       lock the engine; espeak_Synth() appends 22050 Hz samples to a
 *       private buffer through the synth callback; unlock
 *       while a chunk's worth of input is buffered:
 *           [realtime pace: sleep until the chunk is due]
 *           claim a chunk record in the chunk ring, let soxr write the
 *           24 kHz samples straight into it, commit
 *   flush soxr into the last chunk; commit the TTS_DONE record
 * The cancelled flag is checked between chunks and in the synth callback
 * (which then aborts espeak); the job then ends with TTS_CANCELLED.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <espeak-ng/speak_lib.h>
#include <soxr.h>

#include "speech.h"
#include "tts.h"

#define REQUEST_RING_CAPACITY 4096u /* ~170 queued jobs per worker */
/* Worker processes: a job travels whole, up to 16 KiB of text. */
#define REQUEST_RING_SHARED_CAPACITY (256u << 10)
#define REQUEST_JOB 1      /* struct tts_job *, to a worker thread */
#define REQUEST_JOB_COPY 2 /* struct tts_request ..., to a process */
/* Worker processes: */
#define SETTLE_NS 50000000ull     /* reaped, but no death record yet */
#define YOUNG_NS 250000000ull     /* a death this soon is a failed start */
#define BACKOFF_MIN_NS 50000000ull
#define BACKOFF_MAX_NS 5000000000ull
#define BOARD_FD 5
#define REQUEST_FD 3
#define CHUNK_FD 4
#define SEGMENT_MAX 240u   /* bytes of text per espeak_Synth() call */
#define ESPEAK_BUFFER_MS 50 /* how much audio per synth callback */
/* The longest wait for room in the chunk ring between looks at the
 * job's cancelled flag: how late a blocked, cancelled job notices. */
#define RING_FULL_WAIT_NS 10000000LL
#define FLOW_SLEEP_NS 2000000L /* while a client catches up */

struct job_state;

/*
 * The job board: what the loop tells the workers (tts.h).  @waiting[i]
 * is how many jobs wait behind worker i's current one: a worker with
 * jobs waiting stops waiting for a slow client.
 */
struct tts_board {
	uint32_t max_jobs;
	uint32_t reserved;
	atomic_uint waiting[TTS_WORKERS_MAX];
	struct tts_job_control jobs[];
};

enum worker_state {
	WORKER_DOWN,    /* no process; a restart may be due */
	WORKER_RUNNING, /* spawned (threads: always) */
	WORKER_LOST,    /* gone, its jobs forgotten; not reaped yet */
};

struct worker {
	struct tts_pool *pool;        /* NULL in a worker process */
	const struct tts_config *cfg;
	unsigned index;
	pthread_t thread;
	bool started;
	struct lull_ring *requests;   /* consumer: this worker's thread */
	struct lull_producer *submit; /* the loop's producer on requests */
	struct lull_producer *out;    /* this thread's producer on chunks */
	uint64_t load;                /* loop thread only: queued cost */
	unsigned outstanding;         /* loop thread only: jobs not final */
	const atomic_uint *waiting;   /* &board->waiting[index] */
	const struct tts_board *board;
	/* A worker process's copy of the job it does. */
	struct tts_job copy;
	char *copy_data;
	size_t copy_cap;
	pid_t parent;                 /* a worker process's server */
	/* The loop's view of a worker process. */
	enum worker_state state;
	pid_t pid;
	bool reaped;
	int status;                   /* waitpid's, once reaped */
	uint64_t spawned_ns;
	unsigned young_deaths;        /* in a row, for the back-off */
	struct lull_loop_timer *timer; /* settle or restart */
	struct tts_job *job;          /* read from the ring, being done */
	struct job_state *js;         /* its progress */
	/* Engine-rate samples of the current segment, plus the carry. */
	int16_t *native;
	size_t native_len, native_cap;
	int synth_error;
	char segment[SEGMENT_MAX + 8];
};

struct tts_pool {
	struct tts_config cfg;
	struct lull_ring *chunks;
	struct lull_loop *loop;
	unsigned nworkers;
	struct worker *workers;
	struct tts_board *board;
	size_t board_size;
	int board_fd;                  /* processes: the memfd, read-write */
	int board_ro_fd;               /* ... opened again, read-only */
	struct lull_producer *keeper;  /* processes: keeps the chunk ring
					  open while every worker is down */
	bool stopping;
	uint64_t deaths, restarts;
};

/* --- the engine: one espeak-ng for the process, behind one mutex ------ */

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static int engine_state;          /* 0: not started, 1: up, < 0: failed */
static char engine_message[LULL_FATAL_MESSAGE_MAX];
static int engine_rate;           /* espeak's sample rate (22050) */
/* What espeak is set to now ("": unknown); a copy, since a worker
 * process's job (and its voice name) is gone after the job. */
static char engine_voice[64];
static int engine_speed;
/* A worker process: the engine is its own, so no lock is needed. */
static bool engine_private;
static _Thread_local struct worker *synth_worker; /* for the callback */

static void emit_first(struct worker *w);

static atomic_uint_fast64_t stat_segments, stat_wait_ns, stat_held_ns,
	stat_ring_full, stat_flow_pauses, stat_flow_expired, stat_flow_yielded;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* espeak's synth callback, on the thread in espeak_Synth(), under the
 * engine lock.  Returning 1 aborts the synthesis. */
static int synth_callback(short *wav, int count, espeak_EVENT *events)
{
	struct worker *w = synth_worker;
	size_t cap;
	int16_t *grown;

	(void)events;
	if (!w)
		return 1;
	/* Relaxed: a flag polled for early exit, ordering nothing. */
	if (atomic_load_explicit(&w->job->ctl->cancelled,
				 memory_order_relaxed))
		return 1;
	if (!wav || count <= 0)
		return 0;
	if (w->native_cap - w->native_len < (size_t)count) {
		cap = w->native_cap ? w->native_cap : 65536;
		while (cap - w->native_len < (size_t)count)
			cap *= 2;
		grown = realloc(w->native, cap * sizeof(*grown));
		if (!grown) {
			w->synth_error = -ENOMEM;
			return 1;
		}
		w->native = grown;
		w->native_cap = cap;
	}
	memcpy(w->native + w->native_len, wav, (size_t)count * sizeof(*wav));
	w->native_len += (size_t)count;
	emit_first(w);
	return w->synth_error ? 1 : 0;
}

/*
 * Start espeak-ng once for the process and check every voice the API maps
 * to.  Every worker calls it; the first does the work.  Returns 0, or a
 * negative errno with @msg describing the failure.
 */
static int engine_start(const struct tts_config *cfg, char *msg, size_t len)
{
	int rate;

	pthread_mutex_lock(&engine_lock);
	if (engine_state == 0 && cfg->fault == TTS_FAULT_ENGINE) {
		engine_state = -EIO;
		snprintf(engine_message, sizeof(engine_message),
			 "espeak-ng: injected engine failure (--fault engine)");
	} else if (engine_state == 0) {
		rate = espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS,
					 ESPEAK_BUFFER_MS, NULL,
					 espeakINITIALIZE_DONT_EXIT);
		if (rate <= 0) {
			engine_state = -EIO;
			snprintf(engine_message, sizeof(engine_message),
				 "espeak-ng: espeak_Initialize failed (%d)",
				 rate);
		} else {
			engine_rate = rate;
			engine_state = 1;
			espeak_SetSynthCallback(synth_callback);
		}
		for (const char *const *v = cfg->voices;
		     engine_state > 0 && v && *v; v++)
			if (espeak_SetVoiceByName(*v) != EE_OK) {
				engine_state = -ENOENT;
				snprintf(engine_message,
					 sizeof(engine_message),
					 "espeak-ng: voice '%s' not found", *v);
			}
	}
	snprintf(msg, len, "%s", engine_message);
	rate = engine_state;
	pthread_mutex_unlock(&engine_lock);
	return rate < 0 ? rate : 0;
}

/*
 * Synthesize one segment into w->native, after what is there.  Returns
 * 0, -ECANCELED, -ENOMEM, or -EIO (espeak failed).
 */
static int engine_synth(struct worker *w, const char *text, size_t len,
			bool sentence_end)
{
	unsigned flags = espeakCHARS_UTF8 | (sentence_end ? espeakENDPAUSE : 0);
	uint64_t t0 = now_ns(), t1, t2;
	espeak_ERROR err = EE_OK;

	if (!engine_private)
		pthread_mutex_lock(&engine_lock);
	t1 = now_ns();
	/* Voice and rate are engine-wide: set them when they differ. */
	if (!engine_voice[0] || strcmp(engine_voice, w->job->voice) != 0) {
		err = espeak_SetVoiceByName(w->job->voice);
		snprintf(engine_voice, sizeof(engine_voice), "%s",
			 err == EE_OK ? w->job->voice : "");
		engine_speed = 0;
	}
	if (err == EE_OK && engine_speed != w->job->rate) {
		err = espeak_SetParameter(espeakRATE, w->job->rate, 0);
		engine_speed = err == EE_OK ? w->job->rate : 0;
	}
	if (err == EE_OK) {
		w->synth_error = 0;
		synth_worker = w;
		err = espeak_Synth(text, len + 1, 0, POS_CHARACTER, 0, flags,
				   NULL, NULL);
		synth_worker = NULL;
	}
	t2 = now_ns();
	if (!engine_private)
		pthread_mutex_unlock(&engine_lock);
	atomic_fetch_add_explicit(&stat_segments, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&stat_wait_ns, t1 - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&stat_held_ns, t2 - t1, memory_order_relaxed);
	if (w->synth_error)
		return w->synth_error;
	if (atomic_load_explicit(&w->job->ctl->cancelled,
				 memory_order_relaxed))
		return -ECANCELED;
	return err == EE_OK ? 0 : -EIO;
}

void tts_engine_stats(struct tts_engine_stats *st)
{
	st->segments = atomic_load_explicit(&stat_segments,
					    memory_order_relaxed);
	st->lock_wait_ns = atomic_load_explicit(&stat_wait_ns,
						memory_order_relaxed);
	st->lock_held_ns = atomic_load_explicit(&stat_held_ns,
						memory_order_relaxed);
	st->ring_full = atomic_load_explicit(&stat_ring_full,
					     memory_order_relaxed);
	st->flow_pauses = atomic_load_explicit(&stat_flow_pauses,
					       memory_order_relaxed);
	st->flow_expired = atomic_load_explicit(&stat_flow_expired,
						memory_order_relaxed);
	st->flow_yielded = atomic_load_explicit(&stat_flow_yielded,
						memory_order_relaxed);
}

int tts_rate_for_speed(double speed)
{
	/*
	 * espeak-ng speaks 80..450 words per minute, and up to about 700
	 * with its built-in speed-up; 175 is its normal rate.  Speeds below
	 * 0.46 therefore all sound like 0.46.
	 */
	double rate = speed * espeakRATE_NORMAL;

	if (rate < espeakRATE_MINIMUM)
		return espeakRATE_MINIMUM;
	if (rate > 700)
		return 700;
	return (int)(rate + 0.5);
}

/* --- text segments ---------------------------------------------------- */

/*
 * The length of the segment of @text (@len bytes) that starts at @pos:
 * up to and including a sentence end (., !, ?, ;, :, or a newline) that
 * is followed by white space or the end, else the last white space before
 * SEGMENT_MAX bytes, else SEGMENT_MAX bytes cut at a character boundary.
 */
static size_t next_segment(const char *text, size_t len, size_t pos,
			   bool *sentence_end)
{
	size_t end = len - pos < SEGMENT_MAX ? len : pos + SEGMENT_MAX;
	size_t last_space = 0;

	for (size_t i = pos; i < end; i++) {
		char c = text[i];

		if (c == '\n' || ((c == '.' || c == '!' || c == '?' ||
				   c == ';' || c == ':') &&
				  (i + 1 == len || text[i + 1] == ' ' ||
				   text[i + 1] == '\n' || text[i + 1] == '\t' ||
				   text[i + 1] == '\r'))) {
			*sentence_end = true;
			return i + 1 - pos;
		}
		if (c == ' ' || c == '\t')
			last_space = i + 1;
	}
	*sentence_end = end == len;
	if (end == len)
		return len - pos;
	if (last_space > pos)
		return last_space - pos;
	while (end > pos + 1 && ((unsigned char)text[end] & 0xc0) == 0x80)
		end--; /* do not split a UTF-8 sequence */
	return end - pos;
}

/* --- writing to the chunk ring ----------------------------------------- */

static bool cancelled(const struct worker *w)
{
	/* Relaxed: the flag orders nothing; the job stays valid anyway. */
	return atomic_load_explicit(&w->job->ctl->cancelled,
				    memory_order_relaxed);
}

static void sleep_ns(long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000L,
			       .tv_nsec = ns % 1000000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * The chunk ring is full: sleep until the loop's reading makes room for
 * @len bytes (lull_producer_wait: the loop wakes us, no polling), or for
 * RING_FULL_WAIT_NS at most.  Room is a hint, since another worker may
 * take it first: the caller tries again either way.  Returns 0 (try
 * again) or -EPIPE (the ring is shut down: the server is going away).
 */
static int wait_for_room(struct worker *w, size_t len)
{
	int ret;

	/* Relaxed: a statistics counter. */
	atomic_fetch_add_explicit(&stat_ring_full, 1, memory_order_relaxed);
	ret = lull_producer_wait(w->out, len, RING_FULL_WAIT_NS);
	if (ret == -ETIMEDOUT)
		return 0;
	return ret;
}

/*
 * Claim a chunk record, waiting while the ring is full.  Returns 0,
 * -ECANCELED, -EPIPE (the ring is shut down: the server is going away),
 * or another error of lull_mpsc_claim() or lull_producer_wait().
 */
static int claim_chunk(struct worker *w, size_t len, void **datap)
{
	int ret;

	for (;;) {
		ret = lull_mpsc_claim(w->out, TTS_CHUNK, len, datap);
		if (ret != -EAGAIN)
			return ret;
		if (cancelled(w))
			return -ECANCELED;
		ret = wait_for_room(w, len);
		if (ret < 0)
			return ret;
	}
}

/*
 * The final record of a job, written even when the job was cancelled: the
 * loop frees the job when it arrives.  Waits while the ring is full.
 */
static int write_final(struct worker *w, int32_t type, const void *data,
		       size_t len)
{
	int ret;

	while ((ret = lull_mpsc_write(w->out, type, data, len)) == -EAGAIN) {
		ret = wait_for_room(w, len);
		if (ret < 0)
			return ret;
	}
	return ret;
}

/* --- one job ------------------------------------------------------------ */

struct job_state {
	soxr_t soxr;
	size_t in_per_chunk; /* engine samples that surely make one chunk */
	uint64_t samples;    /* committed, at 24 kHz */
	uint32_t chunks;
	uint64_t t0;         /* when the first chunk was committed */
	bool flushed;        /* soxr has given its last sample */
	bool impatient;      /* the client stalled: no more flow control */
};

/*
 * Flow control: wait while the client is more than a window behind.  A
 * client that drains less than a chunk in the pool's patience is not
 * waited for again: the job runs on at full speed, and the loop's send
 * buffer limit disconnects the client if it really is too slow.
 *
 * While another job waits in this worker's ring, the patience is two
 * chunks' playing time: a client that keeps up with real time (any
 * client that plays the audio) still gets flow control, but a stalled
 * one costs the streams queued behind it that much once, not the whole
 * --send-timeout.
 */
static int flow(struct worker *w, struct job_state *js)
{
	const struct tts_job *job = w->job;
	const uint64_t quick = 2ull * w->cfg->chunk_samples *
			       1000000000u / SPEECH_RATE;
	uint64_t start = 0, limit, now;
	bool others;

	if (!job->window || js->impatient)
		return 0;
	/* Relaxed: a progress count; it publishes no other data. */
	while (js->samples * 2 -
		       atomic_load_explicit(&job->ctl->consumed,
					    memory_order_relaxed) >
	       job->window) {
		if (cancelled(w))
			return -ECANCELED;
		/* A worker process whose server died: nobody to wait for. */
		if (w->parent && getppid() != w->parent)
			return -EPIPE;
		now = now_ns();
		if (!start) {
			start = now;
			atomic_fetch_add_explicit(&stat_flow_pauses, 1,
						  memory_order_relaxed);
		}
		/* Relaxed: a hint read in a loop; it orders nothing. */
		others = atomic_load_explicit(w->waiting,
					      memory_order_relaxed) > 0;
		limit = w->cfg->patience_ns;
		if (others && quick < limit)
			limit = quick;
		if (now - start >= limit) {
			atomic_fetch_add_explicit(others ? &stat_flow_yielded
							 : &stat_flow_expired,
						  1, memory_order_relaxed);
			js->impatient = true;
			break;
		}
		sleep_ns(FLOW_SLEEP_NS);
	}
	return 0;
}

/* Realtime pace: wait until the next chunk is due. */
static int pace(struct worker *w, struct job_state *js)
{
	struct timespec ts;
	uint64_t due;

	if (w->cfg->pace != TTS_PACE_REALTIME || !js->chunks)
		return 0;
	due = js->t0 + js->samples * 1000000000u / SPEECH_RATE;
	ts.tv_sec = (time_t)(due / 1000000000u);
	ts.tv_nsec = (long)(due % 1000000000u);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
	return cancelled(w) ? -ECANCELED : 0;
}

/*
 * Resample @out_len samples into @out from w->native[*pos...]; when @last,
 * flush soxr once the input is used up.  Returns the samples written, or
 * -EIO.
 */
static ssize_t resample(struct worker *w, struct job_state *js, size_t *pos,
			int16_t *out, size_t out_len, bool last)
{
	size_t filled = 0, idone, odone;
	soxr_error_t err;

	while (filled < out_len) {
		size_t left = w->native_len - *pos;

		if (left) {
			err = soxr_process(js->soxr, w->native + *pos, left,
					   &idone, out + filled,
					   out_len - filled, &odone);
		} else if (last && !js->flushed) {
			idone = 0;
			err = soxr_process(js->soxr, NULL, 0, NULL,
					   out + filled, out_len - filled,
					   &odone);
			if (!err && odone < out_len - filled)
				js->flushed = true;
		} else {
			break;
		}
		if (err)
			return -EIO;
		*pos += idone;
		filled += odone;
		if (js->flushed || (!idone && !odone))
			break;
	}
	return (ssize_t)filled;
}

/* --fault synth and crash, after a job's first chunk is committed. */
static int injected_fault(const struct worker *w)
{
	if (w->cfg->fault == TTS_FAULT_CRASH)
		abort(); /* a worker process only: main.c checks */
	return w->cfg->fault == TTS_FAULT_SYNTH ? -EIO : 0;
}

/*
 * The job's first chunk, from the synth callback (under the engine lock)
 * as soon as there is audio for it: the time to first audio is then the
 * synthesis of one chunk, not of a whole segment.  It never waits: with
 * the ring full, the chunk goes out after the segment, like the others.
 */
static void emit_first(struct worker *w)
{
	struct job_state *js = w->js;
	const size_t samples = w->cfg->chunk_samples;
	struct tts_chunk *chunk;
	size_t pos = 0;
	ssize_t got;
	int ret;

	if (!js || js->chunks || w->native_len < js->in_per_chunk)
		return;
	ret = lull_mpsc_claim(w->out, TTS_CHUNK,
			      sizeof(*chunk) + samples * 2, (void **)&chunk);
	if (ret == -EAGAIN)
		return;
	if (ret == 0) {
		got = resample(w, js, &pos, (int16_t *)(chunk + 1), samples,
			       false);
		if (got > 0) {
			chunk->job_id = w->job->id;
			chunk->seq = 0;
			chunk->samples = (uint32_t)got;
			ret = lull_mpsc_commit(w->out);
			js->t0 = now_ns();
			js->chunks = 1;
			js->samples = (uint64_t)got;
		} else {
			ret = lull_mpsc_abort(w->out);
			if (ret == 0)
				ret = -EIO;
		}
		memmove(w->native, w->native + pos,
			(w->native_len - pos) * sizeof(*w->native));
		w->native_len -= pos;
	}
	if (!ret)
		ret = injected_fault(w);
	if (ret < 0)
		w->synth_error = ret; /* aborts the synthesis */
}

/*
 * Turn what w->native holds into committed chunks.  Unless @last, input
 * short of a full chunk stays buffered for the next segment.  Returns 0,
 * -ECANCELED, -EPIPE, -EIO.
 */
static int emit(struct worker *w, struct job_state *js, bool last)
{
	const size_t samples = w->cfg->chunk_samples;
	const size_t len = sizeof(struct tts_chunk) + samples * 2;
	struct tts_chunk *chunk;
	size_t pos = 0;
	ssize_t got;
	int ret = 0;

	for (;;) {
		if (last ? js->flushed : w->native_len - pos < js->in_per_chunk)
			break;
		if (cancelled(w)) {
			ret = -ECANCELED;
			break;
		}
		ret = flow(w, js);
		if (!ret)
			ret = pace(w, js);
		if (ret < 0)
			break;
		ret = claim_chunk(w, len, (void **)&chunk);
		if (ret < 0)
			break;
		/* soxr writes into the ring: no copy on the way out. */
		got = resample(w, js, &pos, (int16_t *)(chunk + 1), samples,
			       last);
		if (got <= 0) { /* nothing more (flushed), or soxr failed */
			ret = lull_mpsc_abort(w->out);
			if (got < 0)
				ret = -EIO;
			break;
		}
		chunk->job_id = w->job->id;
		chunk->seq = js->chunks;
		chunk->samples = (uint32_t)got;
		ret = lull_mpsc_commit(w->out);
		if (ret < 0)
			break;
		if (!js->chunks)
			js->t0 = now_ns();
		js->chunks++;
		js->samples += (uint64_t)got;
		ret = injected_fault(w);
		if (ret < 0)
			break;
	}
	/* Keep what did not make a whole chunk for the next segment. */
	memmove(w->native, w->native + pos,
		(w->native_len - pos) * sizeof(*w->native));
	w->native_len -= pos;
	return ret;
}

static int run_job(struct worker *w, struct job_state *js)
{
	const struct tts_job *job = w->job;
	soxr_io_spec_t io = soxr_io_spec(SOXR_INT16_I, SOXR_INT16_I);
	soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
	soxr_runtime_spec_t runtime = soxr_runtime_spec(1);
	soxr_error_t err = NULL;
	size_t pos = 0, len;
	bool sentence_end;
	int ret = 0;

	io.flags |= SOXR_NO_DITHER; /* the same text gives the same bytes */
	/* One resampler per job: soxr keeps filter state between calls. */
	js->soxr = soxr_create(engine_rate, SPEECH_RATE, 1, &err, &io,
			       &quality, &runtime);
	if (!js->soxr)
		return -ENOMEM;
	js->in_per_chunk = (size_t)w->cfg->chunk_samples *
				   (size_t)engine_rate / SPEECH_RATE +
			   1024;
	w->native_len = 0;
	w->js = js;
	while (pos < job->text_bytes && !ret) {
		len = next_segment(job->text, job->text_bytes, pos,
				   &sentence_end);
		memcpy(w->segment, job->text + pos, len);
		w->segment[len] = '\0';
		pos += len;
		ret = engine_synth(w, w->segment, len, sentence_end);
		if (!ret)
			ret = emit(w, js, pos == job->text_bytes);
	}
	w->js = NULL;
	soxr_delete(js->soxr);
	js->soxr = NULL;
	return ret;
}

/* Commit the record that ends the job, for the outcome @ret of run_job. */
static int final_record(struct worker *w, int ret, const struct job_state *js,
			uint64_t start)
{
	if (ret == -ECANCELED) {
		struct tts_cancelled c = { .job_id = w->job->id };

		return write_final(w, TTS_CANCELLED, &c, sizeof(c));
	} else if (ret < 0) {
		struct tts_error e = { .job_id = w->job->id, .code = ret };

		snprintf(e.message, sizeof(e.message), "synthesis failed: %s",
			 w->cfg->fault == TTS_FAULT_SYNTH
				 ? "injected fault (--fault synth)"
				 : strerror(-ret));
		return write_final(w, TTS_ERROR, &e, sizeof(e));
	} else {
		struct tts_done d = {
			.job_id = w->job->id,
			.samples = js->samples,
			.synth_ns = now_ns() - start,
			.chunks = js->chunks,
		};

		return write_final(w, TTS_DONE, &d, sizeof(d));
	}
}

static void do_job(struct worker *w)
{
	struct job_state js = { 0 };
	uint64_t start = now_ns();
	int ret = cancelled(w) ? -ECANCELED : run_job(w, &js);

	if (ret == -EPIPE)
		return; /* the chunk ring is shut down: nobody listens */
	ret = final_record(w, ret, &js, start);
	/* -EPIPE: shut down meanwhile; the loop frees the job at exit. */
	if (ret < 0 && ret != -EPIPE)
		fprintf(stderr, "audio-server: worker %u: final record: %s\n",
			w->index, lull_strerror(ret));
	/* The job is the loop's again from the final record on. */
}

/* --- a worker: thread or process ------------------------------------------ */

/*
 * A worker process's job, from its request record: check every length
 * before using it (the record comes from another process).  Returns 0 or
 * -EPROTO.
 */
static int copy_job(struct worker *w, const struct lull_record *rec)
{
	struct tts_request req;
	const char *voice, *text;
	uint32_t slot;

	if (rec->len < sizeof(req))
		return -EPROTO;
	memcpy(&req, rec->data, sizeof(req));
	if (req.voice_bytes > 64 || req.text_bytes > rec->len ||
	    sizeof(req) + req.voice_bytes + 1 + req.text_bytes + 1 != rec->len)
		return -EPROTO;
	voice = (const char *)rec->data + sizeof(req);
	text = voice + req.voice_bytes + 1;
	slot = (uint32_t)req.job_id;
	if (voice[req.voice_bytes] || text[req.text_bytes] ||
	    slot >= w->board->max_jobs)
		return -EPROTO;
	if (w->copy_cap < rec->len) {
		char *grown = realloc(w->copy_data, rec->len);

		if (!grown)
			return -ENOMEM;
		w->copy_data = grown;
		w->copy_cap = rec->len;
	}
	memcpy(w->copy_data, voice, rec->len - sizeof(req));
	w->copy = (struct tts_job){
		.id = req.job_id,
		/* Read only: the board is mapped without write access. */
		.ctl = (struct tts_job_control *)&w->board->jobs[slot],
		.voice = w->copy_data,
		.text = w->copy_data + req.voice_bytes + 1,
		.text_bytes = req.text_bytes,
		.rate = req.rate,
		.window = req.window,
		.worker = w->index,
	};
	w->job = &w->copy;
	return 0;
}

static int on_request(const struct lull_record *rec, void *ctx)
{
	struct worker *w = ctx;
	int ret;

	/* The poison record ends the ring; the next read is -EPIPE. */
	if (rec->type == REQUEST_JOB && rec->len == sizeof(w->job)) {
		memcpy(&w->job, rec->data, sizeof(w->job));
	} else if (rec->type == REQUEST_JOB_COPY) {
		ret = copy_job(w, rec);
		if (ret < 0)
			fprintf(stderr, "audio-worker %u: a request record: "
					"%s\n",
				w->index, strerror(-ret));
	}
	return LULL_READ_STOP; /* one job at a time */
}

/* Do the jobs of the request ring until its poison. */
static void serve(struct worker *w)
{
	int ret;

	for (;;) {
		ret = lull_ring_read(w->requests, on_request, w, 1);
		if (ret == -EAGAIN) {
			/* Park until the loop queues a job (or shuts down). */
			ret = lull_ring_wait(w->requests, -1);
			if (ret < 0 && ret != -EPIPE) {
				fprintf(stderr,
					"audio-server: worker %u: "
					"lull_ring_wait: %s\n",
					w->index, lull_strerror(ret));
				break;
			}
			continue;
		}
		if (ret == -EPIPE)
			break; /* the poison came: shut down */
		if (ret < 0) {
			fprintf(stderr,
				"audio-server: worker %u: lull_ring_read: %s\n",
				w->index, lull_strerror(ret));
			break;
		}
		if (w->job) {
			do_job(w);
			w->job = NULL;
		}
	}
	free(w->native);
	w->native = NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tts_pool *pool = w->pool;
	char msg[LULL_FATAL_MESSAGE_MAX];
	int ret;

	/* Bound to this thread: however it ends, the producer detaches. */
	ret = lull_producer_attach(pool->chunks, LULL_PRODUCER_THREAD, &w->out);
	if (ret < 0) {
		/* -EPIPE: closed already, by a failing peer or a shutdown. */
		if (ret != -EPIPE)
			fprintf(stderr,
				"audio-server: worker %u: chunk ring: %s\n",
				w->index, lull_strerror(ret));
		return NULL;
	}
	ret = engine_start(&pool->cfg, msg, sizeof(msg));
	if (ret < 0) {
		/* Engine death: close the chunk ring with the reason. */
		ret = lull_ring_fatal(pool->chunks, ret, msg);
		if (ret < 0 && ret != -EALREADY && ret != -EPIPE)
			fprintf(stderr, "audio-server: lull_ring_fatal: %s\n",
				lull_strerror(ret));
		return NULL;
	}
	serve(w);
	return NULL;
}

/* --- the job board -------------------------------------------------------- */

static size_t board_size(uint32_t max_jobs)
{
	size_t size = sizeof(struct tts_board) +
		      (size_t)max_jobs * sizeof(struct tts_job_control);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (size + page - 1) / page * page;
}

/*
 * Threads: plain memory.  Processes: a sealed memfd, and a second,
 * read-only open of it for the workers, who can then map it only
 * read-only.
 */
static int board_create(struct tts_pool *pool)
{
	char path[64];
	void *mem;

	pool->board_size = board_size(pool->cfg.max_jobs);
	if (pool->cfg.isolation == TTS_ISOLATION_THREAD) {
		mem = calloc(1, pool->board_size);
		if (!mem)
			return -ENOMEM;
	} else {
		pool->board_fd = memfd_create("audio-server-board",
					      MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (pool->board_fd < 0)
			return -errno;
		if (ftruncate(pool->board_fd, (off_t)pool->board_size) < 0 ||
		    fcntl(pool->board_fd, F_ADD_SEALS,
			  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
			return -errno;
		snprintf(path, sizeof(path), "/proc/self/fd/%d",
			 pool->board_fd);
		pool->board_ro_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (pool->board_ro_fd < 0)
			return -errno;
		mem = mmap(NULL, pool->board_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, pool->board_fd, 0);
		if (mem == MAP_FAILED)
			return -errno;
	}
	pool->board = mem;
	pool->board->max_jobs = pool->cfg.max_jobs;
	for (uint32_t i = 0; i < pool->cfg.max_jobs; i++) {
		atomic_init(&pool->board->jobs[i].cancelled, false);
		atomic_init(&pool->board->jobs[i].consumed, 0);
	}
	return 0;
}

static void board_destroy(struct tts_pool *pool)
{
	if (pool->cfg.isolation == TTS_ISOLATION_THREAD)
		free(pool->board);
	else if (pool->board && munmap(pool->board, pool->board_size) < 0)
		fprintf(stderr, "audio-server: munmap: %s\n", strerror(errno));
	if (pool->board_fd >= 0)
		close(pool->board_fd);
	if (pool->board_ro_fd >= 0)
		close(pool->board_ro_fd);
	pool->board = NULL;
}

struct tts_job_control *tts_control(struct tts_pool *pool, uint32_t slot)
{
	return slot < pool->cfg.max_jobs ? &pool->board->jobs[slot] : NULL;
}

/* Jobs waiting behind worker @w's current one, for its flow control. */
static void publish_waiting(struct tts_pool *pool, struct worker *w)
{
	/* Relaxed: a hint the worker polls; it orders nothing else. */
	atomic_store_explicit(&pool->board->waiting[w->index],
			      w->outstanding > 1 ? w->outstanding - 1 : 0,
			      memory_order_relaxed);
}

/* --- worker processes, from the loop's side ------------------------------- */

static void worker_retire(struct worker *w)
{
	int ret;

	if (w->submit && (ret = lull_producer_detach(w->submit)) < 0)
		fprintf(stderr, "audio-server: lull_producer_detach: %s\n",
			lull_strerror(ret));
	w->submit = NULL;
	if (w->requests && (ret = lull_ring_destroy(w->requests)) < 0)
		fprintf(stderr, "audio-server: lull_ring_destroy: %s\n",
			lull_strerror(ret));
	w->requests = NULL;
}

/* A descriptor above the three the worker gets, so dup2 moves it. */
static int high_fd(int fd, int *owned)
{
	if (fd > BOARD_FD)
		return fd;
	*owned = fcntl(fd, F_DUPFD_CLOEXEC, BOARD_FD + 1);
	return *owned;
}

static int spawn_worker(struct tts_pool *pool, struct worker *w)
{
	const struct tts_config *cfg = &pool->cfg;
	static const char *const faults[] = { "none", "engine", "synth",
					      "crash" };
	char index[16], samples[16], patience[32], jobs[16];
	const char *argv[16 + 2 * SPEECH_NVOICES];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, defaults;
	int fds[3], owned[3] = { -1, -1, -1 }, ret, argc = 0;
	pid_t pid;

	ret = lull_ring_create_shared(&w->requests,
				      REQUEST_RING_SHARED_CAPACITY,
				      LULL_RING_SPSC, LULL_SHARE_NO_CONSUMER);
	if (!ret)
		ret = lull_producer_attach(w->requests, 0, &w->submit);
	if (ret < 0) {
		worker_retire(w);
		return ret;
	}
	snprintf(index, sizeof(index), "%u", w->index);
	snprintf(samples, sizeof(samples), "%u", cfg->chunk_samples);
	snprintf(patience, sizeof(patience), "%" PRIu64, cfg->patience_ns);
	snprintf(jobs, sizeof(jobs), "%" PRIu32, cfg->max_jobs);
	argv[argc++] = "audio-worker";
	argv[argc++] = "--index";
	argv[argc++] = index;
	argv[argc++] = "--pace";
	argv[argc++] = cfg->pace == TTS_PACE_REALTIME ? "realtime" : "fast";
	argv[argc++] = "--chunk-samples";
	argv[argc++] = samples;
	argv[argc++] = "--patience-ns";
	argv[argc++] = patience;
	argv[argc++] = "--max-jobs";
	argv[argc++] = jobs;
	argv[argc++] = "--fault";
	argv[argc++] = faults[cfg->fault];
	for (const char *const *v = cfg->voices;
	     v && *v && argc < (int)(sizeof(argv) / sizeof(*argv)) - 3; v++) {
		argv[argc++] = "--voice";
		argv[argc++] = *v;
	}
	argv[argc] = NULL;

	fds[0] = high_fd(lull_ring_fd(w->requests), &owned[0]);
	fds[1] = high_fd(lull_ring_fd(pool->chunks), &owned[1]);
	fds[2] = high_fd(pool->board_ro_fd, &owned[2]);
	ret = posix_spawn_file_actions_init(&fa);
	if (ret) {
		ret = -ret;
		goto out;
	}
	ret = posix_spawnattr_init(&attr);
	if (ret) {
		posix_spawn_file_actions_destroy(&fa);
		ret = -ret;
		goto out;
	}
	/* Descriptors 3, 4 and 5, and nothing else the server has open. */
	for (int i = 0; i < 3 && !ret; i++)
		ret = fds[i] < 0 ? EBADF
				 : posix_spawn_file_actions_adddup2(
					   &fa, fds[i], REQUEST_FD + i);
	if (!ret)
		ret = posix_spawn_file_actions_addclosefrom_np(&fa,
							       BOARD_FD + 1);
	/* The loop's signals are blocked here; the worker's are not. */
	sigemptyset(&none);
	sigemptyset(&defaults);
	sigaddset(&defaults, SIGTERM);
	sigaddset(&defaults, SIGINT);
	sigaddset(&defaults, SIGCHLD);
	sigaddset(&defaults, SIGPIPE);
	if (!ret)
		ret = posix_spawnattr_setsigmask(&attr, &none);
	if (!ret)
		ret = posix_spawnattr_setsigdefault(&attr, &defaults);
	if (!ret)
		ret = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
							      POSIX_SPAWN_SETSIGDEF);
	if (!ret)
		ret = posix_spawn(&pid, cfg->worker_program, &fa, &attr,
				  (char *const *)argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	ret = -ret;
out:
	for (int i = 0; i < 3; i++)
		if (owned[i] >= 0)
			close(owned[i]);
	if (ret < 0) {
		worker_retire(w);
		return ret;
	}
	w->pid = pid;
	w->reaped = false;
	w->state = WORKER_RUNNING;
	w->spawned_ns = now_ns();
	w->outstanding = 0;
	w->load = 0;
	publish_waiting(pool, w);
	return 0;
}

static void restart_due(struct lull_loop *loop, void *ctx);

static void timer_drop(struct tts_pool *pool, struct worker *w)
{
	if (w->timer && lull_loop_timer_cancel(pool->loop, w->timer) < 0)
		fprintf(stderr, "audio-server: lull_loop_timer_cancel failed\n");
	w->timer = NULL;
}

/* Start a replacement for @w, after a back-off when workers die young. */
static void restart_later(struct tts_pool *pool, struct worker *w)
{
	uint64_t delay = 1000000u; /* at once, from the loop */
	int ret;

	if (pool->stopping || w->state != WORKER_DOWN)
		return;
	if (w->young_deaths) {
		/* 50 ms, doubled per young death in a row, at most 5 s. */
		unsigned doublings = w->young_deaths - 1;

		delay = BACKOFF_MIN_NS << (doublings < 7 ? doublings : 7);
		if (delay > BACKOFF_MAX_NS)
			delay = BACKOFF_MAX_NS;
	}
	timer_drop(pool, w);
	ret = lull_loop_timer(pool->loop, delay, 0, restart_due, w, &w->timer);
	if (ret < 0)
		fprintf(stderr, "audio-server: worker %u: restart timer: %s\n",
			w->index, lull_strerror(ret));
}

static void restart_due(struct lull_loop *loop, void *ctx)
{
	struct worker *w = ctx;
	struct tts_pool *pool = w->pool;
	int ret;

	(void)loop;
	w->timer = NULL;
	if (pool->stopping || w->state != WORKER_DOWN)
		return;
	ret = spawn_worker(pool, w);
	if (ret < 0) {
		fprintf(stderr, "audio-server: worker %u: restart: %s\n",
			w->index, strerror(-ret));
		w->young_deaths++;
		restart_later(pool, w);
		return;
	}
	pool->restarts++;
}

static void describe_exit(const struct worker *w, char *why, size_t len)
{
	if (!w->reaped)
		snprintf(why, len, "the speech worker (pid %d) died",
			 (int)w->pid);
	else if (WIFSIGNALED(w->status))
		snprintf(why, len, "the speech worker (pid %d) died: %s",
			 (int)w->pid, strsignal(WTERMSIG(w->status)));
	else
		snprintf(why, len, "the speech worker (pid %d) exited with "
				   "status %d",
			 (int)w->pid, WEXITSTATUS(w->status));
}

/*
 * @w's process is gone and what it committed is read: forget its jobs,
 * tell the server, and restart it once it is reaped.
 */
static void worker_gone(struct tts_pool *pool, struct worker *w)
{
	char why[128];

	if (w->state != WORKER_RUNNING)
		return;
	timer_drop(pool, w);
	describe_exit(w, why, sizeof(why));
	w->state = WORKER_LOST;
	worker_retire(w);
	w->outstanding = 0;
	w->load = 0;
	publish_waiting(pool, w);
	if (!pool->stopping) {
		pool->deaths++;
		if (now_ns() - w->spawned_ns < YOUNG_NS)
			w->young_deaths++;
		else
			w->young_deaths = 0;
	}
	if (pool->cfg.worker_lost)
		pool->cfg.worker_lost(pool->cfg.ctx, w->index, why);
	if (w->reaped) {
		w->state = WORKER_DOWN;
		restart_later(pool, w);
	}
}

void tts_pool_death(struct tts_pool *pool, const struct lull_death *death)
{
	if (pool->cfg.isolation != TTS_ISOLATION_PROCESS)
		return;
	for (unsigned i = 0; i < pool->nworkers; i++)
		if (pool->workers[i].pid == death->pid)
			worker_gone(pool, &pool->workers[i]);
}

/*
 * Reaped before its death record came: it may have died before it
 * attached to the chunk ring, and then no record comes.  What it did
 * commit is read within this time anyway (the loop drains the ring
 * before its timers run out of a pass).
 */
static void settle_due(struct lull_loop *loop, void *ctx)
{
	struct worker *w = ctx;

	(void)loop;
	w->timer = NULL;
	worker_gone(w->pool, w);
}

void tts_pool_reap(struct tts_pool *pool)
{
	int ret;

	if (pool->cfg.isolation != TTS_ISOLATION_PROCESS)
		return;
	for (unsigned i = 0; i < pool->nworkers; i++) {
		struct worker *w = &pool->workers[i];

		if (!w->pid || w->reaped ||
		    waitpid(w->pid, &w->status, WNOHANG) != w->pid)
			continue;
		w->reaped = true;
		if (w->state == WORKER_LOST) {
			w->state = WORKER_DOWN;
			restart_later(pool, w);
		} else if (w->state == WORKER_RUNNING) {
			/* Draining too: a worker that exits when asked may
			 * have final records still unread. */
			timer_drop(pool, w);
			ret = lull_loop_timer(pool->loop, SETTLE_NS, 0,
					      settle_due, w, &w->timer);
			if (ret < 0)
				worker_gone(pool, w);
		}
	}
}

void tts_worker_stats(const struct tts_pool *pool,
		      struct tts_worker_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->deaths = pool->deaths;
	st->restarts = pool->restarts;
	for (unsigned i = 0; i < pool->nworkers; i++) {
		const struct worker *w = &pool->workers[i];

		if (pool->cfg.isolation == TTS_ISOLATION_THREAD) {
			st->up++;
			continue;
		}
		if (w->state == WORKER_RUNNING && !w->reaped) {
			st->up++;
			st->pids[i] = (int32_t)w->pid;
		}
	}
}

/* --- the pool, from the loop's side -------------------------------------- */

int tts_pool_start(struct tts_pool **poolp, const struct tts_config *cfg,
		   struct lull_ring *chunks, struct lull_loop *loop)
{
	struct tts_pool *pool;
	int ret = 0;

	if (!cfg->workers || cfg->workers > TTS_WORKERS_MAX ||
	    !cfg->chunk_samples || !cfg->max_jobs ||
	    (cfg->isolation == TTS_ISOLATION_PROCESS &&
	     (!cfg->worker_program || !loop)))
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->cfg = *cfg;
	pool->chunks = chunks;
	pool->loop = loop;
	pool->board_fd = pool->board_ro_fd = -1;
	pool->workers = calloc(cfg->workers, sizeof(*pool->workers));
	if (!pool->workers) {
		free(pool);
		return -ENOMEM;
	}
	pool->nworkers = cfg->workers;
	ret = board_create(pool);
	for (unsigned i = 0; i < cfg->workers; i++) {
		struct worker *w = &pool->workers[i];

		w->pool = pool;
		w->cfg = &pool->cfg;
		w->index = i;
		w->board = pool->board;
		w->waiting = pool->board ? &pool->board->waiting[i] : NULL;
	}
	if (!ret && cfg->isolation == TTS_ISOLATION_PROCESS) {
		/* The chunk ring stays open while every worker is down. */
		ret = lull_producer_attach(chunks, 0, &pool->keeper);
		for (unsigned i = 0; i < cfg->workers && !ret; i++)
			ret = spawn_worker(pool, &pool->workers[i]);
	}
	for (unsigned i = 0; cfg->isolation == TTS_ISOLATION_THREAD &&
			     i < cfg->workers && !ret;
	     i++) {
		struct worker *w = &pool->workers[i];

		w->state = WORKER_RUNNING;
		ret = lull_ring_create(&w->requests, REQUEST_RING_CAPACITY,
				       LULL_RING_SPSC);
		if (!ret)
			ret = lull_producer_attach(w->requests, 0, &w->submit);
	}
	for (unsigned i = 0; cfg->isolation == TTS_ISOLATION_THREAD &&
			     i < cfg->workers && !ret;
	     i++) {
		struct worker *w = &pool->workers[i];

		ret = -pthread_create(&w->thread, NULL, worker_main, w);
		w->started = !ret;
	}
	if (ret) {
		tts_pool_shutdown(pool);
		tts_pool_join(pool, now_ns() + 1000000000u);
		tts_pool_destroy(pool);
		return ret;
	}
	*poolp = pool;
	return 0;
}

static int submit_to(struct tts_pool *pool, struct worker *best,
		     struct tts_job *job);

static int submit_copy(struct worker *w, const struct tts_job *job)
{
	struct tts_request req = {
		.job_id = job->id,
		.window = job->window,
		.rate = job->rate,
		.voice_bytes = (uint32_t)strlen(job->voice),
		.text_bytes = job->text_bytes,
	};
	struct iovec iov[3] = {
		{ &req, sizeof(req) },
		{ (void *)job->voice, req.voice_bytes + 1 },
		{ (void *)job->text, job->text_bytes + 1 },
	};

	return lull_spsc_writev(w->submit, REQUEST_JOB_COPY, iov, 3);
}

/* The least loaded worker that is up, and not in @tried. */
static struct worker *least_loaded(struct tts_pool *pool, uint64_t tried)
{
	struct worker *best = NULL;

	for (unsigned i = 0; i < pool->nworkers; i++) {
		struct worker *w = &pool->workers[i];

		if (w->state == WORKER_RUNNING && w->submit &&
		    !(tried >> i & 1) && (!best || w->load < best->load))
			best = w;
	}
	return best;
}

int tts_submit(struct tts_pool *pool, struct tts_job *job)
{
	uint64_t tried = 0;
	struct worker *best;
	int ret;

	/*
	 * -EPIPE from a worker process's ring: it died, and its death is
	 * not handled yet (it will be, once its records are read): the
	 * next worker then.
	 */
	do {
		best = least_loaded(pool, tried);
		if (!best)
			return pool->stopping ? -EPIPE : -EAGAIN;
		tried |= 1ull << best->index;
		ret = submit_to(pool, best, job);
	} while (ret == -EPIPE && !pool->stopping);
	return ret;
}

static int submit_to(struct tts_pool *pool, struct worker *best,
		     struct tts_job *job)
{
	int ret;

	job->worker = best->index;
	if (pool->cfg.isolation == TTS_ISOLATION_PROCESS) {
		ret = submit_copy(best, job);
	} else {
		/*
		 * The record carries the pointer; the ring's release/acquire
		 * pair publishes the job's fields to the worker along with it.
		 */
		ret = lull_spsc_write(best->submit, REQUEST_JOB, &job,
				      sizeof(job));
	}
	if (ret == 0) {
		best->load += job->cost;
		best->outstanding++;
		publish_waiting(pool, best);
	} else if (ret == -EMSGSIZE) {
		ret = -E2BIG;
	}
	return ret;
}

void tts_job_finished(struct tts_pool *pool, const struct tts_job *job)
{
	struct worker *w = &pool->workers[job->worker];

	/* A lost worker's jobs were forgotten already. */
	if (!w->outstanding)
		return;
	w->load -= job->cost;
	w->outstanding--;
	publish_waiting(pool, w);
}

void tts_pool_shutdown(struct tts_pool *pool)
{
	int ret;

	pool->stopping = true;
	for (unsigned i = 0; i < pool->nworkers; i++) {
		timer_drop(pool, &pool->workers[i]);
		if (pool->workers[i].requests &&
		    (ret = lull_ring_shutdown(pool->workers[i].requests,
					      LULL_SHUTDOWN_GRACEFUL)) < 0 &&
		    ret != -EPIPE)
			fprintf(stderr, "audio-server: lull_ring_shutdown: %s\n",
				lull_strerror(ret));
	}
}

/* Wait for worker process @w to end until @deadline_ns, then kill it. */
static void reap_by(struct worker *w, uint64_t deadline_ns)
{
	int pidfd = (int)syscall(SYS_pidfd_open, w->pid, 0);
	uint64_t now;

	while (pidfd >= 0 && (now = now_ns()) < deadline_ns) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		int ms = (int)((deadline_ns - now + 999999) / 1000000);

		if (poll(&p, 1, ms) != 0 && !(p.revents & POLLIN) &&
		    errno != EINTR)
			break;
		if (p.revents & POLLIN)
			break;
	}
	if (pidfd >= 0)
		close(pidfd);
	if (waitpid(w->pid, &w->status, WNOHANG) != w->pid) {
		fprintf(stderr, "audio-server: worker %u (pid %d) did not "
				"exit in time: killing it\n",
			w->index, (int)w->pid);
		kill(w->pid, SIGKILL);
		while (waitpid(w->pid, &w->status, 0) < 0 && errno == EINTR)
			;
	}
	w->reaped = true;
}

void tts_pool_join(struct tts_pool *pool, uint64_t deadline_ns)
{
	for (unsigned i = 0; i < pool->nworkers; i++) {
		struct worker *w = &pool->workers[i];
		int ret;

		if (pool->cfg.isolation == TTS_ISOLATION_PROCESS) {
			/* The loop still exists, but runs no more timers. */
			timer_drop(pool, w);
			if (w->pid && !w->reaped)
				reap_by(w, deadline_ns);
			continue;
		}
		if (!w->started)
			continue;
		ret = pthread_join(w->thread, NULL);
		if (ret)
			fprintf(stderr, "audio-server: pthread_join: %s\n",
				strerror(ret));
		w->started = false;
	}
}

void tts_pool_destroy(struct tts_pool *pool)
{
	int ret;

	/* Timers went with tts_pool_join(), or with the loop. */
	for (unsigned i = 0; i < pool->nworkers; i++)
		worker_retire(&pool->workers[i]);
	if (pool->keeper && (ret = lull_producer_detach(pool->keeper)) < 0)
		fprintf(stderr, "audio-server: lull_producer_detach: %s\n",
			lull_strerror(ret));
	board_destroy(pool);
	free(pool->workers);
	free(pool);
	pthread_mutex_lock(&engine_lock);
	if (engine_state > 0)
		espeak_Terminate();
	engine_state = 0;
	engine_voice[0] = '\0';
	pthread_mutex_unlock(&engine_lock);
}

unsigned tts_pool_workers(const struct tts_pool *pool)
{
	return pool->nworkers;
}

int tts_pool_ring_stats(const struct tts_pool *pool, unsigned i,
			struct lull_ring_stats *st)
{
	if (i >= pool->nworkers)
		return -EINVAL;
	if (!pool->workers[i].requests) {
		memset(st, 0, sizeof(*st));
		return 0; /* a worker process between lives */
	}
	return lull_ring_stats(pool->workers[i].requests, st);
}

/* --- the worker program (audio-worker) ------------------------------------ */

static int worker_usage(void)
{
	fprintf(stderr,
		"audio-worker: started by audio-server --isolation process, "
		"with its rings on descriptors 3 and 4 and the job board on "
		"5\n");
	return 2;
}

int tts_worker_process_main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "index", required_argument, NULL, 'i' },
		{ "pace", required_argument, NULL, 'p' },
		{ "chunk-samples", required_argument, NULL, 'c' },
		{ "patience-ns", required_argument, NULL, 't' },
		{ "max-jobs", required_argument, NULL, 'j' },
		{ "fault", required_argument, NULL, 'f' },
		{ "voice", required_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *voices[SPEECH_NVOICES + 1];
	struct tts_config cfg = { .workers = 1 };
	struct worker w = { .cfg = &cfg };
	struct lull_ring *chunks = NULL;
	char msg[LULL_FATAL_MESSAGE_MAX];
	unsigned nv = 0;
	void *board;
	int opt, ret;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'i': w.index = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'p':
			cfg.pace = strcmp(optarg, "realtime") == 0
					   ? TTS_PACE_REALTIME
					   : TTS_PACE_FAST;
			break;
		case 'c':
			cfg.chunk_samples = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't': cfg.patience_ns = strtoull(optarg, NULL, 10); break;
		case 'j':
			cfg.max_jobs = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'f':
			cfg.fault = strcmp(optarg, "engine") == 0 ? TTS_FAULT_ENGINE
				    : strcmp(optarg, "synth") == 0 ? TTS_FAULT_SYNTH
				    : strcmp(optarg, "crash") == 0 ? TTS_FAULT_CRASH
								   : TTS_FAULT_NONE;
			break;
		case 'v':
			if (nv < SPEECH_NVOICES)
				voices[nv++] = optarg;
			break;
		default: return worker_usage();
		}
	}
	cfg.voices = voices;
	if (!cfg.chunk_samples || !cfg.max_jobs || w.index >= TTS_WORKERS_MAX)
		return worker_usage();
	if (cfg.fault == TTS_FAULT_CRASH) {
		struct rlimit none = { 0, 0 };

		setrlimit(RLIMIT_CORE, &none); /* crashes on purpose */
	}
	w.parent = getppid();
	engine_private = true;
	board = mmap(NULL, board_size(cfg.max_jobs), PROT_READ, MAP_SHARED,
		     BOARD_FD, 0);
	if (board == MAP_FAILED) {
		fprintf(stderr, "audio-worker %u: the job board: %s\n",
			w.index, strerror(errno));
		return 1;
	}
	close(BOARD_FD);
	w.board = board;
	if (w.board->max_jobs != cfg.max_jobs)
		return worker_usage();
	w.waiting = &w.board->waiting[w.index];
	ret = lull_ring_open_fd(&w.requests, REQUEST_FD, LULL_OPEN_CONSUMER);
	if (!ret)
		ret = lull_ring_open_fd(&chunks, CHUNK_FD, 0);
	if (!ret)
		ret = lull_producer_attach(chunks, 0, &w.out);
	close(REQUEST_FD);
	close(CHUNK_FD);
	if (ret < 0) {
		fprintf(stderr, "audio-worker %u: its rings: %s\n", w.index,
			lull_strerror(ret));
		return 1;
	}
	ret = engine_start(&cfg, msg, sizeof(msg));
	if (ret < 0) {
		/* The server restarts it, with a back-off. */
		fprintf(stderr, "audio-worker %u: %s\n", w.index, msg);
		return 1;
	}
	serve(&w);
	free(w.copy_data);
	if ((ret = lull_producer_detach(w.out)) < 0 ||
	    (ret = lull_ring_destroy(chunks)) < 0 ||
	    (ret = lull_ring_destroy(w.requests)) < 0)
		fprintf(stderr, "audio-worker %u: %s\n", w.index,
			lull_strerror(ret));
	if (engine_state > 0)
		espeak_Terminate();
	munmap(board, board_size(cfg.max_jobs));
	return 0;
}
