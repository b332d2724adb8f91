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
 *
 * With --isolation process each worker is a process of its own (the
 * audio-worker program, started with posix_spawn), with an engine of its
 * own and no mutex.  Its rings are shared: its request ring (the loop
 * produces, the worker consumes; descriptor 3) and the one chunk ring
 * (the worker is one of its MPSC producers; descriptor 4), and the job
 * board (descriptor 5), which it maps read-only.  A job travels in its
 * request record whole (struct tts_request, voice, text).  When a worker
 * process dies, the loop reads what it had committed, then lull's
 * LULL_TYPE_DEATH record naming it: its streams end with an error, and a
 * replacement starts.  When the server dies, the worker's next chunk
 * write is -EPIPE, and an idle worker's lull_ring_wait() reads the
 * poison of a ring whose only producer died: it exits either way.
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
 * A request record for a worker process: this, then the voice name and
 * the text, each NUL-terminated.
 */
struct tts_request {
	uint64_t job_id;
	uint64_t window;
	int32_t rate;
	uint32_t voice_bytes; /* without the NUL */
	uint64_t text_bytes;  /* without the NUL */
};

/*
 * What the loop tells a worker while the worker runs a job: written by
 * the loop only, read by the worker.  One per job slot (the low 32 bits
 * of a job id), in the pool's job board: plain memory with worker
 * threads, a sealed memfd that worker processes map read-only.
 */
struct tts_job_control {
	atomic_bool cancelled;         /* polled between chunks */
	atomic_uint_fast64_t consumed; /* PCM bytes the client took */
};

/*
 * A job.  The loop fills it and submits it; a worker thread reads it
 * (never writes it) until it commits the job's final record, after which
 * the loop may free it.  A worker process gets a copy in the request
 * record instead.  The loop steers the job through @ctl.
 */
struct tts_job {
	uint64_t id;           /* slot in the low 32 bits, see tts_control */
	struct tts_job_control *ctl; /* tts_control(pool, slot) */
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
	 * whole at the end).  @ctl->consumed counts what was sent.
	 */
	uint64_t window;
};

enum tts_pace {
	TTS_PACE_FAST,     /* commit chunks as fast as synthesis allows */
	TTS_PACE_REALTIME, /* release chunks at the audio's own rate */
};

enum tts_fault {
	TTS_FAULT_NONE,
	TTS_FAULT_ENGINE, /* testing: the engine "fails to start" (worker
			     processes: exit at start, and again) */
	TTS_FAULT_SYNTH,  /* testing: every job fails after its 1st chunk */
	TTS_FAULT_CRASH,  /* testing, worker processes: abort(3) after a
			     job's 1st chunk */
};

enum tts_isolation {
	TTS_ISOLATION_THREAD,  /* workers are threads of the server */
	TTS_ISOLATION_PROCESS, /* workers are processes (audio-worker) */
};

#define TTS_WORKERS_MAX 64u

struct tts_config {
	unsigned workers;
	enum tts_pace pace;
	unsigned chunk_samples;     /* per chunk, at 24 kHz */
	enum tts_fault fault;
	uint64_t patience_ns;       /* longest flow-control pause */
	const char *const *voices;  /* espeak voices to check at start, NULL-
				       terminated; must outlive the pool */
	uint32_t max_jobs;          /* job slots (job ids' low 32 bits) */
	enum tts_isolation isolation;
	/* TTS_ISOLATION_PROCESS: */
	const char *worker_program; /* audio-worker's path */
	/*
	 * A worker process is gone (it died, or exited): called once per
	 * process, on the loop thread, after every record it committed was
	 * read.  The pool then forgets the jobs it had, without their final
	 * records: the server ends their streams.  The pool starts a
	 * replacement itself, with a back-off when workers die young.
	 */
	void (*worker_lost)(void *ctx, unsigned worker, const char *why);
	void *ctx;
};

/* Worker process counters; the loop thread. */
struct tts_worker_stats {
	unsigned up;       /* workers running (threads: all of them) */
	uint64_t deaths;   /* worker processes that ended unasked */
	uint64_t restarts; /* replacements started */
	int32_t pids[TTS_WORKERS_MAX]; /* per worker; 0: none (threads) */
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
 * Create the request rings and start the workers, producers of @chunks
 * (a shared ring for worker processes; @loop runs the pool's timers
 * then).  Call with the signals the loop handles already blocked (threads
 * inherit the mask).  Returns 0, or a negative errno.
 */
int tts_pool_start(struct tts_pool **poolp, const struct tts_config *cfg,
		   struct lull_ring *chunks, struct lull_loop *loop);

/* The control block of job slot @slot (< cfg.max_jobs). */
struct tts_job_control *tts_control(struct tts_pool *pool, uint32_t slot);

/*
 * Queue @job on the least loaded worker that is up.  The loop thread.
 * Returns 0, -EAGAIN (that worker's ring is full, or no worker is up),
 * -E2BIG (too much text for a request ring), or -EPIPE (shut down).
 */
int tts_submit(struct tts_pool *pool, struct tts_job *job);

/*
 * Worker processes, the loop thread: a LULL_TYPE_DEATH record on the
 * chunk ring, and SIGCHLD.  Each may call cfg.worker_lost.
 */
void tts_pool_death(struct tts_pool *pool, const struct lull_death *death);
void tts_pool_reap(struct tts_pool *pool);

void tts_worker_stats(const struct tts_pool *pool,
		      struct tts_worker_stats *st);

/*
 * The worker program's main (audio-worker): serve the request ring on
 * descriptor 3 into the chunk ring on 4, with the job board on 5.
 */
int tts_worker_process_main(int argc, char **argv);

/* The final record of @job arrived: forget its load.  The loop thread. */
void tts_job_finished(struct tts_pool *pool, const struct tts_job *job);

/*
 * Shut every request ring down gracefully: each worker finishes the jobs
 * queued to it, reads the poison and exits.  Any thread; idempotent.
 */
void tts_pool_shutdown(struct tts_pool *pool);

/*
 * Wait for every worker to exit (after tts_pool_shutdown()); worker
 * processes get until @deadline_ns (CLOCK_MONOTONIC), then SIGKILL.
 */
void tts_pool_join(struct tts_pool *pool, uint64_t deadline_ns);

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
