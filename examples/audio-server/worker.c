/* SPDX-License-Identifier: MIT */
/*
 * worker.c - audio-worker, the synthesis worker process of
 * "audio-server --isolation process" (see tts.h).  The server starts it
 * with posix_spawn, its request ring on descriptor 3, the chunk ring on
 * 4 and the job board on 5; it is not meant to be run by hand.
 */
#include "tts.h"

int main(int argc, char **argv)
{
	return tts_worker_process_main(argc, argv);
}
