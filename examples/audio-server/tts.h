/* SPDX-License-Identifier: MIT */
/*
 * tts.h - the synthesis side of the audio server: a pool of worker threads
 * that turn text into 24 kHz PCM with espeak-ng and libsoxr, fed and
 * drained through lull rings.
 *
 *   loop thread --(SPSC ring per worker: job pointers)--> worker i
 *   worker 0..N-1 --(one MPSC ring: chunk records)--> loop thread
 *
 * The loop is the only producer of each request ring (an SPSC ring needs
 * no atomic read-modify-write to write), and it picks the worker with the
 * least outstanding text.  Each worker parks on its own request ring with
 * lull_ring_wait() and is woken by the loop's write.  Every worker is a
 * thread-bound producer (LULL_PRODUCER_THREAD) of the one chunk ring the
 * loop drains; chunks are claimed in the ring and resampled straight into
 * it (zero copy), then committed.  A worker that finds the chunk ring full
 * sleeps in lull_producer_wait() until the loop's reading makes room.
 *
 * Records on the chunk ring (type, payload):
 *   TTS_CHUNK      struct tts_chunk, then chunk.samples int16 samples
 *   TTS_DONE       struct tts_done:      the job ended; no more records
 *   TTS_ERROR      struct tts_error:     the job failed;  no more records
 *   TTS_CANCELLED  struct tts_cancelled: the job stopped early, as asked
 * Exactly one of the last three ends each job, unless the chunk ring was
 * shut down first.  A worker that cannot run at all (the engine failed to
 * start) reports lull_ring_fatal() on the chunk ring, which closes it.
 *
 * espeak-ng is not reentrant: one process-wide mutex serializes every call
 * into it.  A worker holds it only to synthesize one segment of text
 * (a sentence, or at most SEGMENT_MAX bytes) into a private buffer at the
 * engine's rate; resampling, pacing and ring writes run outside it.
 */
#ifndef AUDIO_TTS_H
#define AUDIO_TTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lull.h>

enum tts_record {
	TTS_CHUNK = 1,
	TTS_DONE = 2,
	TTS_ERROR = 3,
	TTS_CANCELLED = 4,
};

struct tts_chunk {
	uint64_t job_id;
	uint32_t seq;
	uint32_t samples; /* int16 samples that follow */
};

struct tts_done {
	uint64_t job_id;
	uint64_t samples;  /* in all chunks */
	uint64_t synth_ns; /* the job's wall time in the worker */
	uint32_t chunks;
	uint32_t reserved;
};

#define TTS_ERROR_MESSAGE_MAX 200
struct tts_error {
	uint64_t job_id;
	int32_t code; /* negative errno */
	uint32_t reserved;
	char message[TTS_ERROR_MESSAGE_MAX]; /* NUL-terminated */
};

struct tts_cancelled {
	uint64_t job_id;
};

/*
 * A job.  The loop fills it and submits it; the worker reads it (never
 * writes it) until it commits the job's final record, after which the
 * loop may free it.  @cancelled is the one field both sides touch.
 */
struct tts_job {
	uint64_t id;
	atomic_bool cancelled; /* set by the loop; polled between chunks */
	const char *text;      /* UTF-8, NUL-terminated */
	size_t text_bytes;
	const char *voice;     /* espeak-ng voice name */
	int rate;              /* espeak-ng words per minute */
	unsigned cost;         /* load accounting: characters */
	unsigned worker;       /* set by tts_submit() */
	/*
	 * Flow control: the worker pauses while more than @window bytes of
	 * the PCM it committed are not yet @consumed (written to the client's
	 * socket, as the loop counts it), for at most the pool's patience;
	 * while another job waits for the worker, for at most two chunks'
	 * playing time, so that a client slower than real time never holds
	 * up other streams.  @window 0: no flow control (a response sent
	 * whole at the end).
	 */
	uint64_t window;
	atomic_uint_fast64_t consumed; /* set by the loop */
};

enum tts_pace {
	TTS_PACE_FAST,     /* commit chunks as fast as synthesis allows */
	TTS_PACE_REALTIME, /* release chunks at the audio's own rate */
};

enum tts_fault {
	TTS_FAULT_NONE,
	TTS_FAULT_ENGINE, /* testing: the engine "fails to start" */
	TTS_FAULT_SYNTH,  /* testing: every job fails after its 1st chunk */
};

struct tts_config {
	unsigned workers;
	enum tts_pace pace;
	unsigned chunk_samples;     /* per chunk, at 24 kHz */
	enum tts_fault fault;
	uint64_t patience_ns;       /* longest flow-control pause */
	const char *const *voices;  /* espeak voices to check at start, NULL-
				       terminated; must outlive the pool */
};

/* Engine counters, process-wide; any thread. */
struct tts_engine_stats {
	uint64_t segments;     /* espeak_Synth() calls */
	uint64_t lock_wait_ns; /* time workers waited for the engine */
	uint64_t lock_held_ns; /* time a worker held it (synthesizing) */
	uint64_t ring_full;    /* waits for room in a full chunk ring */
	uint64_t flow_pauses;  /* times a worker waited for a client */
	uint64_t flow_expired; /* ... and gave up waiting (patience) */
	uint64_t flow_yielded; /* ... and gave up sooner: a job waited */
};

struct tts_pool;

/*
 * Create the request rings and start the workers, producers of @chunks.
 * Call with the signals the loop handles already blocked (threads inherit
 * the mask).  Returns 0, or a negative errno.
 */
int tts_pool_start(struct tts_pool **poolp, const struct tts_config *cfg,
		   struct lull_ring *chunks);

/*
 * Queue @job on the least loaded worker.  The loop thread.  Returns 0,
 * -EAGAIN (that worker's ring is full), or -EPIPE (shut down).
 */
int tts_submit(struct tts_pool *pool, struct tts_job *job);

/* The final record of @job arrived: forget its load.  The loop thread. */
void tts_job_finished(struct tts_pool *pool, const struct tts_job *job);

/*
 * Shut every request ring down gracefully: each worker finishes the jobs
 * queued to it, reads the poison and exits.  Any thread; idempotent.
 */
void tts_pool_shutdown(struct tts_pool *pool);

/* Wait for every worker to exit (after tts_pool_shutdown()). */
void tts_pool_join(struct tts_pool *pool);

/* Free the pool (after tts_pool_join()), and the engine. */
void tts_pool_destroy(struct tts_pool *pool);

unsigned tts_pool_workers(const struct tts_pool *pool);

/* Park/wake counters of worker @i's request ring. */
int tts_pool_ring_stats(const struct tts_pool *pool, unsigned i,
			struct lull_ring_stats *st);

void tts_engine_stats(struct tts_engine_stats *st);

/* espeak-ng's speaking rate (words per minute) for an API speed. */
int tts_rate_for_speed(double speed);

#endif /* AUDIO_TTS_H */
