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
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <espeak-ng/speak_lib.h>
#include <soxr.h>

#include "speech.h"
#include "tts.h"

#define REQUEST_RING_CAPACITY 4096u /* ~170 queued jobs per worker */
#define REQUEST_JOB 1
#define SEGMENT_MAX 240u   /* bytes of text per espeak_Synth() call */
#define ESPEAK_BUFFER_MS 50 /* how much audio per synth callback */
/* The longest wait for room in the chunk ring between looks at the
 * job's cancelled flag: how late a blocked, cancelled job notices. */
#define RING_FULL_WAIT_NS 10000000LL
#define FLOW_SLEEP_NS 2000000L /* while a client catches up */

struct job_state;

struct worker {
	struct tts_pool *pool;
	unsigned index;
	pthread_t thread;
	bool started;
	struct lull_ring *requests;   /* consumer: this worker's thread */
	struct lull_producer *submit; /* the loop's producer on requests */
	struct lull_producer *out;    /* this thread's producer on chunks */
	uint64_t load;                /* loop thread only: queued cost */
	/*
	 * Jobs written to the request ring and not yet taken: the loop adds
	 * one before each write, the worker takes one off per job it reads.
	 * A worker with jobs waiting stops waiting for a slow client.
	 */
	atomic_uint waiting;
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
	unsigned nworkers;
	struct worker *workers;
};

/* --- the engine: one espeak-ng for the process, behind one mutex ------ */

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static int engine_state;          /* 0: not started, 1: up, < 0: failed */
static char engine_message[LULL_FATAL_MESSAGE_MAX];
static int engine_rate;           /* espeak's sample rate (22050) */
static const char *engine_voice;  /* what espeak is set to now */
static int engine_speed;
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
	if (atomic_load_explicit(&w->job->cancelled, memory_order_relaxed))
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

	pthread_mutex_lock(&engine_lock);
	t1 = now_ns();
	/* Voice and rate are engine-wide: set them when they differ. */
	if (!engine_voice || strcmp(engine_voice, w->job->voice) != 0) {
		err = espeak_SetVoiceByName(w->job->voice);
		engine_voice = err == EE_OK ? w->job->voice : NULL;
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
	pthread_mutex_unlock(&engine_lock);
	atomic_fetch_add_explicit(&stat_segments, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&stat_wait_ns, t1 - t0, memory_order_relaxed);
	atomic_fetch_add_explicit(&stat_held_ns, t2 - t1, memory_order_relaxed);
	if (w->synth_error)
		return w->synth_error;
	if (atomic_load_explicit(&w->job->cancelled, memory_order_relaxed))
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
	return atomic_load_explicit(&w->job->cancelled, memory_order_relaxed);
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
	const uint64_t quick = 2ull * w->pool->cfg.chunk_samples *
			       1000000000u / SPEECH_RATE;
	uint64_t start = 0, limit, now;
	bool others;

	if (!job->window || js->impatient)
		return 0;
	/* Relaxed: a progress count; it publishes no other data. */
	while (js->samples * 2 -
		       atomic_load_explicit(&job->consumed,
					    memory_order_relaxed) >
	       job->window) {
		if (cancelled(w))
			return -ECANCELED;
		now = now_ns();
		if (!start) {
			start = now;
			atomic_fetch_add_explicit(&stat_flow_pauses, 1,
						  memory_order_relaxed);
		}
		/* Relaxed: a hint read in a loop; it orders nothing. */
		others = atomic_load_explicit(&w->waiting,
					      memory_order_relaxed) > 0;
		limit = w->pool->cfg.patience_ns;
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

	if (w->pool->cfg.pace != TTS_PACE_REALTIME || !js->chunks)
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

/*
 * The job's first chunk, from the synth callback (under the engine lock)
 * as soon as there is audio for it: the time to first audio is then the
 * synthesis of one chunk, not of a whole segment.  It never waits: with
 * the ring full, the chunk goes out after the segment, like the others.
 */
static void emit_first(struct worker *w)
{
	struct job_state *js = w->js;
	const size_t samples = w->pool->cfg.chunk_samples;
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
	if (!ret && w->pool->cfg.fault == TTS_FAULT_SYNTH)
		ret = -EIO;
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
	const size_t samples = w->pool->cfg.chunk_samples;
	const size_t len = sizeof(struct tts_chunk) + samples * 2;
	struct tts_chunk *chunk;
	size_t pos = 0;
	ssize_t got;
	int ret = 0;

	for (;;) {
		if (last ? js->flushed : w->native_len - pos < js->in_per_chunk)
			break;
		if (cancelled(w) || flow(w, js) < 0 || pace(w, js) < 0) {
			ret = -ECANCELED;
			break;
		}
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
		if (w->pool->cfg.fault == TTS_FAULT_SYNTH) {
			ret = -EIO;
			break;
		}
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
	js->in_per_chunk = (size_t)w->pool->cfg.chunk_samples *
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
			 w->pool->cfg.fault == TTS_FAULT_SYNTH
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

/* --- the worker thread --------------------------------------------------- */

static int on_request(const struct lull_record *rec, void *ctx)
{
	struct worker *w = ctx;

	/* The poison record ends the ring; the next read is -EPIPE. */
	if (rec->type == REQUEST_JOB && rec->len == sizeof(w->job)) {
		memcpy(&w->job, rec->data, sizeof(w->job));
		/*
		 * Relaxed: the loop's increment came before its write, whose
		 * release this read's acquire pairs with, so the count never
		 * goes below zero; it is a hint that orders nothing else.
		 */
		atomic_fetch_sub_explicit(&w->waiting, 1,
					  memory_order_relaxed);
	}
	return LULL_READ_STOP; /* one job at a time */
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
	return NULL;
}

/* --- the pool, from the loop's side -------------------------------------- */

int tts_pool_start(struct tts_pool **poolp, const struct tts_config *cfg,
		   struct lull_ring *chunks)
{
	struct tts_pool *pool;
	int ret = 0;

	if (!cfg->workers || !cfg->chunk_samples)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->cfg = *cfg;
	pool->chunks = chunks;
	pool->workers = calloc(cfg->workers, sizeof(*pool->workers));
	if (!pool->workers) {
		free(pool);
		return -ENOMEM;
	}
	pool->nworkers = cfg->workers;
	for (unsigned i = 0; i < cfg->workers && !ret; i++) {
		struct worker *w = &pool->workers[i];

		w->pool = pool;
		w->index = i;
		atomic_init(&w->waiting, 0);
		ret = lull_ring_create(&w->requests, REQUEST_RING_CAPACITY,
				       LULL_RING_SPSC);
		if (!ret)
			ret = lull_producer_attach(w->requests, 0, &w->submit);
	}
	for (unsigned i = 0; i < cfg->workers && !ret; i++) {
		struct worker *w = &pool->workers[i];

		ret = -pthread_create(&w->thread, NULL, worker_main, w);
		w->started = !ret;
	}
	if (ret) {
		tts_pool_shutdown(pool);
		tts_pool_join(pool);
		tts_pool_destroy(pool);
		return ret;
	}
	*poolp = pool;
	return 0;
}

int tts_submit(struct tts_pool *pool, struct tts_job *job)
{
	struct worker *best = &pool->workers[0];
	int ret;

	for (unsigned i = 1; i < pool->nworkers; i++)
		if (pool->workers[i].load < best->load)
			best = &pool->workers[i];
	job->worker = best->index;
	/* Relaxed: counted before the write that publishes it (on_request). */
	atomic_fetch_add_explicit(&best->waiting, 1, memory_order_relaxed);
	/*
	 * The record carries the pointer; the ring's release/acquire pair
	 * publishes the job's fields to the worker along with it.
	 */
	ret = lull_spsc_write(best->submit, REQUEST_JOB, &job, sizeof(job));
	if (ret == 0)
		best->load += job->cost;
	else
		atomic_fetch_sub_explicit(&best->waiting, 1,
					  memory_order_relaxed);
	return ret;
}

void tts_job_finished(struct tts_pool *pool, const struct tts_job *job)
{
	pool->workers[job->worker].load -= job->cost;
}

void tts_pool_shutdown(struct tts_pool *pool)
{
	int ret;

	for (unsigned i = 0; i < pool->nworkers; i++)
		if (pool->workers[i].requests &&
		    (ret = lull_ring_shutdown(pool->workers[i].requests,
					      LULL_SHUTDOWN_GRACEFUL)) < 0)
			fprintf(stderr, "audio-server: lull_ring_shutdown: %s\n",
				lull_strerror(ret));
}

void tts_pool_join(struct tts_pool *pool)
{
	for (unsigned i = 0; i < pool->nworkers; i++) {
		struct worker *w = &pool->workers[i];
		int ret;

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

	for (unsigned i = 0; i < pool->nworkers; i++) {
		struct worker *w = &pool->workers[i];

		if (w->submit && (ret = lull_producer_detach(w->submit)) < 0)
			fprintf(stderr, "audio-server: lull_producer_detach: "
					"%s\n",
				lull_strerror(ret));
		if (w->requests && (ret = lull_ring_destroy(w->requests)) < 0)
			fprintf(stderr, "audio-server: lull_ring_destroy: %s\n",
				lull_strerror(ret));
	}
	free(pool->workers);
	free(pool);
	pthread_mutex_lock(&engine_lock);
	if (engine_state > 0)
		espeak_Terminate();
	engine_state = 0;
	engine_voice = NULL;
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
	return lull_ring_stats(pool->workers[i].requests, st);
}
