#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# test/audio/run.sh - the integration test of the streaming text-to-speech
# example server and its load generator.
#
# Usage, from the repository root:
#     test/audio/run.sh [SERVER [LOADGEN [ASAN_SERVER]]]
# defaults: $B/examples/audio-server, $B/examples/audio-loadgen,
# $B/examples/audio-server-asan (an AddressSanitizer + UBSan build of
# the server; when it is missing, the sanitizer round fails), where B is
# the build directory of make B=... (default build).
# Environment: AUDIO_SKIP_ASAN=1 skips the sanitizer round (it is then
# reported as skipped, not passed); AUDIO_ROUNDS="basics slow ..." runs
# only the rounds named (see ROUNDS below); AUDIO_KEEP=1 keeps the logs.
#
# What it checks (each line "ok", "FAIL" or "skip" with the reason):
#   0. audio-loadgen itself, against test/audio/fake_server.py: every kind
#      of broken stream (a stalled one too) is counted under its kind;
#      valid streams, however they are cut into chunks and lines, pass;
#      without --concurrency it runs levels 1, 8, 16, 32, each after its
#      warm-up, which is logged but not counted; --plot writes a PNG;
#   1. the server on an ephemeral port, which it names as 127.0.0.1:PORT:
#      /health, /metrics (every family typed, the spec's counters there);
#      32 concurrent streams, all 200 with valid SSE and plausible audio,
#      far faster than real time; no lost wake-up
#      (lull_ring_safety_timeouts_total 0); the chunk ring parked and was
#      woken, nothing polled, and an idle loop makes no passes; without
#      --coalesce-us the loop never coalesces;
#      non-streaming wav and pcm; every voice speaks, each differently,
#      and speed changes the length; each bad request, and malformed
#      HTTP, gets its status and a JSON error; keep-alive, pipelining,
#      HTTP/1.0; the page at / decodes audio in headless Chromium and
#      hands it to Web Audio; an idle server exits 0 at once on SIGTERM;
#   2. --fault synth: every stream ends in speech.audio.error; SIGINT;
#      --fault engine: the engine's death comes through the chunk ring and
#      the server exits 1 on its own;
#   3. --wakeup poll (the loop polls, the ring never parks),
#      LULL_BACKEND=uring-eventfd and epoll: 32 streams; --coalesce-us
#      1000: 32 streams, the loop sleeps coalescing windows (counted on
#      /metrics, named on /health), and idle, the chunk ring still parks;
#   4. --pace realtime: audio arrives at its own rate, raw PCM chunk by
#      chunk; clients that leave mid-stream have their synthesis
#      cancelled, leave the server healthy, active streams back to 0;
#      SIGTERM under load exits 0 as soon as the running streams end, and
#      each of them is intact, while new connections are refused; a
#      stream longer than the drain deadline is cut with
#      speech.audio.error, and the exit is still 0;
#   5. a client that stops reading: disconnected with a logged reason once
#      its buffer overflows, without delaying the streams queued behind it
#      on the same worker; SIGTERM while a client is not reading: its
#      stream is cut at the deadline, its connection closed, every
#      connection freed by its own last callback, exit 0;
#   6. --max-connections and --idle-timeout; --host (0.0.0.0, ::1, a name
#      that does not resolve) and bad options (--coalesce-us too);
#   7. audio-loadgen --ab --ab-server: both servers, the table, the plot;
#      --server-arg-a/-b reach one side each, --ab-name-a/-b name them;
#   8. rounds 1-5 again with the sanitizer build, whose stderr must hold
#      no AddressSanitizer, LeakSanitizer or UBSan report;
#   9. the sanitizer build against a random-garbage client for
#      AUDIO_GARBAGE_SECONDS (20) or AUDIO_GARBAGE_COUNT (3000)
#      connections, seeded by AUDIO_GARBAGE_SEED (default: the time; the
#      seed is printed): truncated requests, random bytes, huge header
#      names split across writes, oversized URLs and bodies, silent
#      half-open connections; then no sanitizer report, /health 200, a
#      speech stream, and every connection closed.
# Prints one "audio: N passed, N failed" line at the end; exit status 1
# when anything failed.
set -u

B=${B:-build}
SERVER=${1:-$B/examples/audio-server}
LOADGEN=${2:-$B/examples/audio-loadgen}
ASAN_SERVER=${3:-$B/examples/audio-server-asan}
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="python3 $HERE/check.py"
T=$(mktemp -d "${TMPDIR:-/tmp}/lull-audio.XXXXXX")
T0=$(date +%s%3N)
passed=0
failed=0
skipped=0
PIDS=""

# The texts: short and medium sentences for load, a long one for streams
# that must still be running when something happens to them.
S1="Hello there."
S2="The quick brown fox jumps over the lazy dog."
S3="A ring buffer lets one thread hand audio to another without a lock."
S4="Please hold while your call is connected, and thank you for waiting."
LONG="This is a long passage of text, read out slowly, so that the stream \
is still running when the client leaves or the server is told to stop. \
It goes on for a while: one sentence after another, each of them spoken \
in full, with nothing interesting to say at all, until the very end of \
the paragraph, which comes after about twenty seconds of speech."

# Under --pace realtime a worker serves one stream at a time, at the
# audio's own rate: more concurrent streams than workers wait in line.
# The real-time rounds use as many workers as they run streams at once.
RT_WORKERS=4

# A drain may overrun its deadline by this much: the cut streams' error
# events still have to be sent, and the process has to exit.
SLACK_MS=1500

now_ms() { date +%s%3N; }

cleanup() {
	local p
	# TERM first: timeout(1) passes it on to what it runs, KILL would
	# leave that running.
	for p in $PIDS; do
		kill -TERM "$p" 2>/dev/null
	done
	[ -n "$PIDS" ] && sleep 0.2
	for p in $PIDS; do
		kill -KILL "$p" 2>/dev/null
	done
	for p in $PIDS; do
		wait "$p" 2>/dev/null
	done
	if [ "$failed" -eq 0 ] && [ -z "${AUDIO_KEEP:-}" ]; then
		rm -rf "$T"
	else
		echo "audio: logs kept in $T"
	fi
}
trap cleanup EXIT
trap 'echo "audio: interrupted"; exit 130' INT TERM

ok() {
	passed=$((passed + 1))
	printf '  ok    %s\n' "$1"
}
skip() { # NAME REASON
	skipped=$((skipped + 1))
	printf '  skip  %s: %s\n' "$1" "$2"
}
bad() {
	failed=$((failed + 1))
	printf '  FAIL  %s\n' "$1"
}

# check NAME COMMAND...: runs a check function (in this shell, so it may
# set variables); shows its output as detail, all of it when it fails.
check() {
	local name=$1 rc
	shift
	"$@" >"$T/check.out" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		ok "$name"
		[ -s "$T/check.out" ] && tail -n 3 "$T/check.out" |
			sed 's/^/        /'
	else
		bad "$name"
		tail -n 25 "$T/check.out" | sed 's/^/        /'
	fi
	return $rc
}

forget_pid() {
	local p out=""
	for p in $PIDS; do
		[ "$p" = "$1" ] || out="$out $p"
	done
	PIDS=$out
}

# A running process that is not a zombie.
alive() {
	local state
	[ -r "/proc/$1/stat" ] || return 1
	state=$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ]
}

# start_server NAME BINARY ARGS...: starts it on an ephemeral port and
# waits (20 s at most) for its "listening on HOST:PORT" line.  Sets
# SRV_PID, SRV_URL, SRV_ERR (its stderr).
start_server() {
	local name=$1 bin=$2 line i running
	shift 2
	SRV_ERR=$T/$name.err
	SRV_URL=""
	local cmd=("$bin")
	[ "$bin" = fake_server ] && cmd=(python3 "$HERE/fake_server.py")
	env ${SRV_ENV:-} "${cmd[@]}" --port 0 "$@" >"$T/$name.out" \
		2>"$SRV_ERR" &
	SRV_PID=$!
	PIDS="$PIDS $SRV_PID"
	for i in $(seq 200); do
		# Alive before the read: a server that prints its line and
		# exits at once (--fault engine) is still read, not missed.
		running=0
		alive "$SRV_PID" && running=1
		if IFS= read -r line <"$T/$name.out"; then
			case $line in
			"listening on "*)
				SRV_URL="http://${line#listening on }"
				echo "$name: ${SRV_ENV:+$SRV_ENV }$bin $* at $SRV_URL"
				return 0
				;;
			*)
				echo "first line '$line', not 'listening on'"
				break
				;;
			esac
		fi
		[ "$running" = 1 ] || break
		sleep 0.1
	done
	echo "$bin --port 0 $*: no 'listening on' line"
	tail -n 20 "$SRV_ERR"
	kill -KILL "$SRV_PID" 2>/dev/null
	wait_pid "$SRV_PID" 5
	SRV_PID=""
	return 1
}

# wait_pid PID LIMIT_S: waits for it (SIGKILL after LIMIT_S seconds) and
# returns its exit status.
wait_pid() {
	local t0 rc
	t0=$(now_ms)
	while alive "$1"; do
		if [ $(($(now_ms) - t0)) -gt $(($2 * 1000)) ]; then
			echo "pid $1 still running after $2 s: killed"
			kill -KILL "$1" 2>/dev/null
			break
		fi
		sleep 0.02
	done
	wait "$1" 2>/dev/null
	rc=$?
	forget_pid "$1"
	return $rc
}

# stop_server LIMIT_S: SIGTERM, then up to LIMIT_S seconds for the exit.
# Sets STOP_RC (137 when it had to be killed) and STOP_MS.
stop_server() { # LIMIT_S [SIGNAL]
	stop_server_async "${2:-TERM}"
	stop_server_wait "$1"
}

# The two halves, for a test that acts while the server drains.
stop_server_async() { # [SIGNAL]
	STOP_T0=$(now_ms)
	kill -"${1:-TERM}" "$SRV_PID" 2>/dev/null
}
stop_server_wait() { # LIMIT_S
	wait_pid "$SRV_PID" "$1"
	STOP_RC=$?
	STOP_MS=$(($(now_ms) - STOP_T0))
	SRV_PID=""
}

# The sanitizers' reports, and anything else alarming, on a stderr log.
clean_stderr() {
	if grep -nE 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error|SUMMARY: [A-Za-z]*Sanitizer|AddressSanitizer:DEADLYSIGNAL' "$1"; then
		return 1
	fi
	return 0
}

# req METHOD PATH [CURL ARGS...]: prints the status code ("000": no
# response); the body lands in $T/body, the headers in $T/headers.
req() {
	local m=$1 p=$2
	shift 2
	timeout 20 curl -sS -o "$T/body" -D "$T/headers" -w '%{http_code}' \
		--max-time 15 -X "$m" "$@" "$SRV_URL$p" 2>"$T/curl.err"
}

header() { # NAME: a response header's value, from $T/headers
	tr -d '\r' <"$T/headers" | sed -n "s/^$1: *//Ip" | tail -n 1
}

metric() { # NAME [LABEL]: its value (summed over labels) on /metrics now
	timeout 10 curl -sS --max-time 5 -o "$T/metrics" "$SRV_URL/metrics" &&
		$CHECK metric "$T/metrics" "$@"
}

# wait_metric NAME OP VALUE SECONDS: polls /metrics until NAME OP VALUE.
wait_metric() {
	local v i
	for i in $(seq $(($4 * 10))); do
		v=$(metric "$1") || v=""
		case $v in *[!0-9.e+-]* | "") ;; *)
			if python3 -c "import sys; sys.exit(0 if $v $2 $3 else 1)"; then
				echo "$1 = $v"
				return 0
			fi ;;
		esac
		sleep 0.1
	done
	echo "$1 = $v after $4 s, want $2 $3"
	return 1
}

# wait_log FILE REGEX SECONDS: polls a log until a line matches.
wait_log() {
	local i
	for i in $(seq $(($3 * 20))); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "no line matching '$2' in $1 after $3 s"
	tail -n 5 "$1"
	return 1
}

loadgen() { # LIMIT_S NAME ARGS...: runs audio-loadgen with --json --log
	local limit=$1 name=$2
	shift 2
	timeout "$limit" "$LOADGEN" --url "$SRV_URL" --json --quiet \
		--log "$T/$name.log" "$@" >"$T/$name.json" 2>"$T/$name.err"
}

# --- 0. the load generator, against a server that breaks streams -------

t_loadgen_detects_every_fault() {
	local faults="ok,bad_base64,odd_bytes,no_done,error_event,bad_json"
	faults="$faults,status_500,wrong_type,no_audio,reset,truncated_chunk"
	faults="$faults,stall"
	start_server fake fake_server --faults "$faults" ||
		return 1
	loadgen 60 fake --requests 24 --concurrency 4 --warmup 0 --timeout 3 \
		--sentence "one two" --sentence "a b c d e f g h"
	local rc=$?
	stop_server 10
	[ $rc -eq 1 ] || { echo "loadgen exit $rc, want 1"; return 1; }
	$CHECK faults "$T/fake.json" connect=2 status=2 http=2 sse=4 \
		base64=2 odd_bytes=2 no_audio=2 no_done=2 error_event=2 \
		timeout=2
}

# No --concurrency: the default levels, each after its warm-up.
t_loadgen_default_levels() {
	start_server fake3 fake_server --faults ok || return 1
	timeout 60 "$LOADGEN" --url "$SRV_URL" --json --quiet \
		--log "$T/levels.log" --requests 2 --warmup 1 \
		--sentence "one two" --plot "$T/levels.png" \
		>"$T/levels.json" 2>"$T/levels.err"
	local rc=$?
	stop_server 10
	[ $rc -eq 0 ] || { echo "loadgen exit $rc"; tail "$T/levels.err"; return 1; }
	$CHECK levels "$T/levels.json" "$T/levels.log" 2 1 1 8 16 32 || return 1
	[ "$(head -c 8 "$T/levels.png" | od -An -tx1 | tr -d ' \n')" = \
		89504e470d0a1a0a ] || { echo "$T/levels.png is not a PNG"; return 1; }
}

t_loadgen_accepts_odd_framing() {
	start_server fake2 fake_server --faults ok ||
		return 1
	loadgen 60 fake2 --requests 12 --concurrency 4 --warmup 0 \
		--sentence "one two three four five six" --sentence "seven"
	local rc=$?
	stop_server 10
	[ $rc -eq 0 ] || { cat "$T/fake2.err"; return 1; }
	$CHECK load "$T/fake2.json" "$T/fake2.log" 12 4 \
		"one two three four five six" "seven"
}

# --- 1. the basics --------------------------------------------------------
t_health() {
	local code
	code=$(req GET /health)
	[ "$code" = 200 ] || { echo "GET /health: $code"; return 1; }
	$CHECK health "$T/body"
}

t_metrics() {
	local code
	code=$(req GET /metrics)
	[ "$code" = 200 ] || { echo "GET /metrics: $code"; return 1; }
	case $(header Content-Type) in
	text/plain*) ;;
	*) echo "Content-Type: $(header Content-Type)"; return 1 ;;
	esac
	# What the spec asks /metrics for: requests, active streams, chunks,
	# bytes, errors, and each ring's wake-ups and safety-net timeouts.
	$CHECK metrics_format "$T/body" tts_http_requests_total \
		tts_http_responses_total tts_active_streams tts_chunks_total \
		tts_audio_bytes_total tts_bytes_sent_total \
		tts_synthesis_errors_total tts_jobs_cancelled_total \
		lull_ring_parks_total lull_ring_wakes_total \
		lull_ring_safety_timeouts_total lull_ring_idle_timeouts_total \
		lull_loop_safety_timeouts_total lull_ring_room_wakes_total \
		lull_loop_coalesce_waits_total tts_coalesce_seconds || return 1
	# Every ring has its room_wakes, the chunk ring first.
	$CHECK metric "$T/body" lull_ring_room_wakes_total 'ring="chunks"' \
		>/dev/null
}

t_address() { # HOST: the first line named it, with the port
	case $SRV_URL in
	"http://$1:"[0-9]*) ;;
	*) echo "listening on ${SRV_URL#http://}, want $1:PORT"; return 1 ;;
	esac
}

# The counters moved as 32 streams say they must.
t_counted() {
	local v
	v=$(metric tts_streams_completed_total) && [ "$v" -ge 32 ] ||
		{ echo "tts_streams_completed_total = $v"; return 1; }
	v=$(metric tts_chunks_total) && [ "$v" -ge 32 ] ||
		{ echo "tts_chunks_total = $v"; return 1; }
	v=$(metric tts_http_requests_total) && [ "$v" -ge 34 ] ||
		{ echo "tts_http_requests_total = $v"; return 1; }
	echo "$(metric tts_audio_bytes_total) PCM bytes in $(metric \
		tts_chunks_total) chunks, $(metric tts_bytes_sent_total) bytes sent"
}

# How the loop learned of audio: parked on the chunk ring, or polled it
# every millisecond.  Idle, a parked loop makes no passes at all (the
# /metrics requests cost a few); a polling one makes about a thousand a
# second.  The workers' wake-ups are shown, not required: a worker wakes
# the loop only when it commits while the loop sleeps, and a loop kept
# awake by its sockets (a slow build, 32 busy streams) may need none.  A
# lost wake-up, with no safety net, stalls a stream instead, which
# t_32_streams and t_no_lost_wakeups fail on.
t_wakeup_mode() { # park|poll
	local parks wakes ticks0 ticks1 it0 it1
	parks=$(metric lull_ring_parks_total 'ring="chunks"') || return 1
	wakes=$(metric lull_ring_wakes_total 'ring="chunks"') || return 1
	ticks0=$(metric tts_poll_ticks_total) || return 1
	it0=$(metric lull_loop_iterations_total) || return 1
	sleep 1
	ticks1=$(metric tts_poll_ticks_total) || return 1
	it1=$(metric lull_loop_iterations_total) || return 1
	echo "chunk ring: $parks parks, $wakes wakes; idle 1 s:" \
		"$((it1 - it0)) loop passes, $((ticks1 - ticks0)) poll ticks"
	if [ "$1" = park ]; then
		[ "$parks" -gt 0 ] && [ "$ticks1" = 0 ] &&
			[ $((it1 - it0)) -le 50 ]
	else
		[ "$parks" = 0 ] && [ "$wakes" = 0 ] &&
			[ $((ticks1 - ticks0)) -ge 300 ]
	fi
}

# --coalesce-us: off, the loop never sleeps a coalescing window; on, it
# does after the passes that handled audio, and /metrics and /health name
# the window.
t_coalesce() { # US
	local waits secs code
	waits=$(metric lull_loop_coalesce_waits_total) || return 1
	secs=$(metric tts_coalesce_seconds) || return 1
	code=$(req GET /health)
	[ "$code" = 200 ] || { echo "GET /health: $code"; return 1; }
	grep -q "\"coalesce_us\":$1[,}]" "$T/body" || {
		echo "/health: $(cat "$T/body"), want coalesce_us $1"
		return 1
	}
	echo "--coalesce-us $1: tts_coalesce_seconds $secs," \
		"lull_loop_coalesce_waits_total $waits," \
		"$(metric lull_ring_wakes_total 'ring="chunks"') chunk ring wakes" \
		"for $(metric tts_chunks_total) chunks"
	python3 -c "import sys; sys.exit(0 if abs($secs - $1 / 1e6) < 1e-9 else 1)" ||
		{ echo "tts_coalesce_seconds $secs, want $1 us"; return 1; }
	if [ "$1" = 0 ]; then
		[ "$waits" = 0 ]
	else
		[ "$waits" -gt 0 ]
	fi
}

t_32_streams() {
	loadgen 120 "load32-$1" --requests 32 --concurrency 32 --warmup 0 \
		--sentence "$S1" --sentence "$S2" --sentence "$S3" \
		--sentence "$S4"
	local rc=$?
	[ $rc -eq 0 ] || { echo "loadgen exit $rc"; tail "$T/load32-$1.err"; }
	$CHECK load "$T/load32-$1.json" "$T/load32-$1.log" 32 32 \
		"$S1" "$S2" "$S3" "$S4" && [ $rc -eq 0 ] &&
		$CHECK pace "$T/load32-$1.json" 0 0.5 3000
}

t_no_lost_wakeups() {
	wait_metric tts_active_streams == 0 10 || return 1
	local v
	v=$(metric lull_ring_safety_timeouts_total) || return 1
	[ "$v" = 0 ] || {
		echo "lull_ring_safety_timeouts_total = $v (lost wake-ups)"
		grep safety_timeouts "$T/metrics"
		return 1
	}
	v=$(metric lull_loop_safety_timeouts_total) || return 1
	echo "ring safety timeouts 0, loop safety timeouts $v"
}

t_wav() {
	local code
	code=$(req POST /v1/audio/speech -H 'Content-Type: application/json' \
		--data "{\"model\":\"tts-1\",\"input\":\"$S2\",\"voice\":\"alloy\",\"response_format\":\"wav\"}")
	[ "$code" = 200 ] || { echo "HTTP $code"; head -c 300 "$T/body"; return 1; }
	case $(header Content-Type) in
	audio/wav* | audio/x-wav* | audio/wave*) ;;
	*) echo "Content-Type: $(header Content-Type)"; return 1 ;;
	esac
	if command -v soxi >/dev/null 2>&1; then
		cp "$T/body" "$T/speech.wav"
		timeout 10 soxi "$T/speech.wav" || return 1
	fi
	$CHECK wav "$T/body" "$S2"
}

t_pcm_matches_stream() {
	local code whole streamed
	code=$(req POST /v1/audio/speech -H 'Content-Type: application/json' \
		--data "{\"input\":\"$S3\",\"response_format\":\"pcm\"}")
	[ "$code" = 200 ] || { echo "HTTP $code"; head -c 300 "$T/body"; return 1; }
	$CHECK pcm "$T/body" "$S3" || return 1
	whole=$(stat -c %s "$T/body")
	code=$(req POST /v1/audio/speech -H 'Content-Type: application/json' \
		-N --data "{\"input\":\"$S3\",\"stream\":true,\"stream_format\":\"sse\",\"response_format\":\"pcm\"}")
	[ "$code" = 200 ] || { echo "stream: HTTP $code"; return 1; }
	streamed=$($CHECK sse "$T/body" "$S3") || { echo "$streamed"; return 1; }
	echo "whole pcm $whole bytes, streamed $streamed bytes"
	# espeak-ng varies a sentence's length by a few milliseconds from
	# one call to the next (even in one process): allow 5%.
	python3 -c "import sys; sys.exit(0 if abs($whole - $streamed) <= 0.05 * $whole else 1)"
}

t_raw_stream() {
	local code
	code=$(req POST /v1/audio/speech -H 'Content-Type: application/json' \
		-N --data "{\"input\":\"$S4\",\"stream\":true,\"stream_format\":\"audio\"}")
	[ "$code" = 200 ] || { echo "HTTP $code"; head -c 300 "$T/body"; return 1; }
	case $(header Transfer-Encoding) in
	chunked) ;;
	*) echo "Transfer-Encoding: $(header Transfer-Encoding)"; return 1 ;;
	esac
	$CHECK pcm "$T/body" "$S4"
}

# status, then curl arguments: each must get that status and a JSON error.
BAD_CASES=(
	"400|empty body|POST /v1/audio/speech|--data-binary|@/dev/null"
	"400|invalid JSON|POST /v1/audio/speech|--data-binary|{\"input\": \"hi\""
	"400|JSON array|POST /v1/audio/speech|--data-binary|[1,2]"
	"400|trailing garbage|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\"} x"
	"400|missing input|POST /v1/audio/speech|--data-binary|{\"voice\":\"alloy\"}"
	"400|empty input|POST /v1/audio/speech|--data-binary|{\"input\":\"\"}"
	"400|blank input|POST /v1/audio/speech|--data-binary|{\"input\":\"  \"}"
	"400|input not a string|POST /v1/audio/speech|--data-binary|{\"input\":42}"
	"400|unknown voice|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"voice\":\"nobody\"}"
	"400|speed too high|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"speed\":10}"
	"400|speed too low|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"speed\":0.1}"
	"400|speed a string|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"speed\":\"fast\"}"
	"400|stream not a boolean|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"stream\":\"yes\"}"
	"400|unknown stream_format|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"stream\":true,\"stream_format\":\"ws\"}"
	"400|unknown response_format|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"response_format\":\"mp3\"}"
	"400|streamed wav|POST /v1/audio/speech|--data-binary|{\"input\":\"hi\",\"stream\":true,\"response_format\":\"wav\"}"
	"404|unknown path|GET /nope|"
	"404|unknown path, POST|POST /v1/audio/nope|--data-binary|{}"
	"405|GET on the speech API|GET /v1/audio/speech|"
	"405|DELETE /health|DELETE /health|"
	"405|POST /metrics|POST /metrics|--data-binary|x"
	"404|the demo controls, off|POST /v1/demo/kill-worker|--data-binary|0"
)

t_bad_request() { # STATUS|NAME|METHOD PATH|CURL ARGS...
	local f want mp code allow
	IFS='|' read -r -a f <<<"$1"
	want=${f[0]} mp=${f[2]}
	if [ "${mp%% *}" = POST ]; then
		code=$(req POST "${mp#* }" -H 'Content-Type: application/json' \
			"${f[@]:3}")
	else
		code=$(req "${mp%% *}" "${mp#* }" "${f[@]:3}")
	fi
	[ "$code" = "$want" ] || {
		echo "HTTP $code, want $want: $(head -c 300 "$T/body")"
		return 1
	}
	case $(header Content-Type) in
	application/json*) ;;
	*) echo "Content-Type: $(header Content-Type)"; return 1 ;;
	esac
	if [ "$want" = 405 ]; then
		allow=$(header Allow)
		[ -n "$allow" ] || { echo "405 without an Allow header"; return 1; }
	fi
	$CHECK error_json "$T/body"
}

# rejected FILE: POSTs FILE to the speech API; it must get 400 and a JSON
# error.
rejected() {
	local code
	code=$(req POST /v1/audio/speech -H 'Content-Type: application/json' \
		--data-binary "@$1")
	[ "$code" = 400 ] || { echo "HTTP $code"; return 1; }
	$CHECK error_json "$T/body"
}

t_invalid_utf8() {
	printf '{"input":"caf\xe9 \xff"}' >"$T/utf8.json"
	rejected "$T/utf8.json"
}

t_input_too_long() {
	python3 -c 'import json; print(json.dumps({"input": "a" * 5000}))' \
		>"$T/long.json"
	rejected "$T/long.json"
}

t_headers_too_large() {
	local big code
	big=$(head -c 20000 /dev/zero | tr '\0' 'x')
	code=$(req GET /health -H "X-Big: $big")
	[ "$code" = 431 ] || { echo "HTTP $code"; cat "$T/curl.err"; return 1; }
	$CHECK error_json "$T/body"
}

t_body_too_large() {
	local code
	python3 -c 'import json; print(json.dumps({"input": "a " * 60000}))' \
		>"$T/huge.json"
	code=$(req POST /v1/audio/speech -H 'Expect:' \
		-H 'Content-Type: application/json' --data-binary "@$T/huge.json")
	[ "$code" = 413 ] || { echo "HTTP $code"; cat "$T/curl.err"; return 1; }
	$CHECK error_json "$T/body"
}

t_url_too_long() {
	local code path
	path=/$(head -c 5000 /dev/zero | tr '\0' 'a')
	code=$(req GET "$path")
	[ "$code" = 414 ] || { echo "HTTP $code"; return 1; }
	$CHECK error_json "$T/body"
}

# t_stop LIMIT_S [SIGNAL]: stop an idle server; it must exit 0.  With no
# safety net of lull's, a lost wake-up is no slow exit but none at all:
# stop_server kills it after LIMIT_S and the check fails on its status.
# How long it took is shown, not judged (machines under load are slow).
t_stop() {
	stop_server "$1" "${2:-TERM}"
	echo "exit status $STOP_RC after $STOP_MS ms"
	[ "$STOP_RC" = 0 ]
}

t_stderr_clean() { # LOG
	clean_stderr "$1"
}

round_basics() { # TAG BINARY
	local tag=$1 bin=$2 c
	echo "round $tag: basics"
	check "$tag: server starts, prints its port" \
		start_server "basic-$tag" "$bin" || return
	check "$tag: listening on 127.0.0.1:PORT by default" t_address 127.0.0.1
	check "$tag: GET /health" t_health
	check "$tag: GET /metrics (Prometheus text)" t_metrics
	check "$tag: 32 concurrent streams, all valid, faster than real time" \
		t_32_streams "$tag"
	check "$tag: active streams 0 after, no lost wake-ups" \
		t_no_lost_wakeups
	check "$tag: the counters add up" t_counted
	check "$tag: the loop parked on the chunk ring; idle, it sleeps" \
		t_wakeup_mode park
	check "$tag: no --coalesce-us: the loop never coalesces" t_coalesce 0
	check "$tag: non-streaming wav is RIFF/WAVE" t_wav
	check "$tag: non-streaming pcm ~ streamed pcm (SSE by curl)" \
		t_pcm_matches_stream
	check "$tag: stream_format audio: chunked raw pcm" t_raw_stream
	check "$tag: every voice speaks, differently; speed sets the pace" \
		timeout 60 $CHECK voices "${SRV_URL#http://}"
	check "$tag: HTTP/1.0 stream, ended by the close" \
		timeout 30 $CHECK http10 "${SRV_URL#http://}" "$S2"
	for c in "${BAD_CASES[@]}"; do
		IFS='|' read -r status name _ <<<"$c"
		check "$tag: $status for $name" t_bad_request "$c"
	done
	check "$tag: 400 for invalid UTF-8" t_invalid_utf8
	check "$tag: 400 for input over the limit" t_input_too_long
	check "$tag: 431 for oversized headers" t_headers_too_large
	check "$tag: 413 for an oversized body" t_body_too_large
	check "$tag: 414 for an oversized URL" t_url_too_long
	check "$tag: malformed HTTP: 400, 413, 505 with JSON, then close" \
		timeout 60 $CHECK garbage "${SRV_URL#http://}"
	check "$tag: still healthy after the bad requests" t_health
	check "$tag: keep-alive: GET, stream, GET on one connection" \
		t_keepalive sequential
	check "$tag: pipelining: 2 GETs in one write, then a stream" \
		t_keepalive pipelined
	check "$tag: GET / serves the page" t_page
	if [ "$tag" = plain ]; then
		check "$tag: the page decodes streamed audio in Chromium" \
			t_browser
	fi
	check "$tag: SIGTERM when idle: exit 0 at once" t_stop 15
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

# --- 2. a synthesis failure -----------------------------------------------
t_fault_stream() {
	loadgen 60 "fault-$1" --requests 4 --concurrency 2 --warmup 0 \
		--sentence "$S3"
	local rc=$?
	[ $rc -eq 1 ] || { echo "loadgen exit $rc, want 1"; return 1; }
	$CHECK faults "$T/fault-$1.json" error_event=4
}

round_fault() { # TAG BINARY
	local tag=$1 bin=$2
	echo "round $tag: synthesis failure"
	check "$tag: server starts with --fault synth" \
		start_server "fault-$tag" "$bin" --fault synth || return
	check "$tag: every stream ends in speech.audio.error" \
		t_fault_stream "$tag"
	check "$tag: healthy after the failures" t_health
	check "$tag: active streams back to 0" \
		wait_metric tts_active_streams == 0 10
	check "$tag: SIGINT: exit 0 at once" t_stop 15 INT
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts with --fault engine" \
		start_server "engine-$tag" "$bin" --fault engine || return
	check "$tag: engine death: through the chunk ring, exit 1 unasked" \
		t_engine_death
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

# No signal: the workers' lull_ring_fatal() reaches the loop, which drains
# (nothing runs) and exits 1.
t_engine_death() {
	wait_pid "$SRV_PID" 15
	local rc=$?
	SRV_PID=""
	echo "exit status $rc"
	[ $rc -eq 1 ] || return 1
	grep 'engine failure reported on the chunk ring: .*--fault engine' \
		"$SRV_ERR" || { tail -n 5 "$SRV_ERR"; return 1; }
}

# --- 2b. the other wake-up mode and loop backends ---------------------------
t_backend() { # BACKEND
	local code
	code=$(req GET /health)
	[ "$code" = 200 ] || { echo "GET /health: $code"; return 1; }
	grep -q "\"backend\":\"$1\"" "$T/body" || {
		echo "/health: $(cat "$T/body")"
		return 1
	}
}

t_keepalive() { # sequential|pipelined
	timeout 30 $CHECK keepalive "$1" "${SRV_URL#http://}" "$S2"
}

round_variants() { # TAG BINARY
	local tag=$1 bin=$2 b
	echo "round $tag: --wakeup poll, the other loop backends, --coalesce-us"
	check "$tag: server starts with --wakeup poll" \
		start_server "poll-$tag" "$bin" --wakeup poll || return
	check "$tag: poll: 32 concurrent streams, all valid" \
		t_32_streams "poll-$tag"
	check "$tag: poll: the chunk ring never parked; the loop polls" \
		t_wakeup_mode poll
	check "$tag: poll: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: poll: stderr clean" t_stderr_clean "$SRV_ERR"
	for b in uring-eventfd epoll; do
		SRV_ENV="LULL_BACKEND=$b"
		check "$tag: server starts with LULL_BACKEND=$b" \
			start_server "$b-$tag" "$bin" || { SRV_ENV=; continue; }
		SRV_ENV=
		check "$tag: $b: /health names the backend" t_backend "$b"
		check "$tag: $b: 32 concurrent streams, all valid" \
			t_32_streams "$b-$tag"
		check "$tag: $b: keep-alive" t_keepalive sequential
		check "$tag: $b: pipelining" t_keepalive pipelined
		check "$tag: $b: SIGTERM: exit 0 at once" t_stop 15
		check "$tag: $b: stderr clean" t_stderr_clean "$SRV_ERR"
	done
	check "$tag: server starts with --coalesce-us 1000" \
		start_server "coalesce-$tag" "$bin" --coalesce-us 1000 || return
	check "$tag: coalesce: 32 concurrent streams, all valid" \
		t_32_streams "coalesce-$tag"
	check "$tag: coalesce: active streams 0 after, no lost wake-ups" \
		t_no_lost_wakeups
	check "$tag: coalesce: the loop slept windows; /metrics, /health" \
		t_coalesce 1000
	check "$tag: coalesce: the chunk ring still parks; idle, it sleeps" \
		t_wakeup_mode park
	check "$tag: coalesce: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: coalesce: stderr clean" t_stderr_clean "$SRV_ERR"
}

# --- 3. clients that leave --------------------------------------------------
t_disconnects() { # TAG
	local i pids="" rc body out=$T/leave-$1
	body="{\"input\":\"$LONG\",\"stream\":true,\"stream_format\":\"sse\"}"
	for i in 1 2 3 4; do
		timeout 10 curl -sS -N --max-time 0.3 -o "$out-$i.sse" \
			-w "client $i: HTTP %{http_code}, %{size_download} bytes, first byte after %{time_starttransfer} s\n" \
			-H 'Content-Type: application/json' --data "$body" \
			"$SRV_URL/v1/audio/speech" >"$out-$i.txt" 2>&1 &
		pids="$pids $!"
	done
	i=0
	for p in $pids; do
		i=$((i + 1))
		wait "$p"
		rc=$?
		cat "$out-$i.txt"
		[ $rc -eq 28 ] || { echo "curl exit $rc, want 28 (timeout)"; return 1; }
	done
	for i in 1 2 3 4; do
		grep -q 'speech.audio.delta' "$out-$i.sse" 2>/dev/null || {
			echo "client $i got no audio before it left"
			return 1
		}
	done
	# Gone before the first byte, and half a request.
	timeout 10 python3 - "${SRV_URL#http://}" "$body" <<'EOF' || return 1
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
body = sys.argv[2].encode()
req = (b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
       b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
       % len(body)) + body
for cut in (len(req), len(req) - 10, 20):
    s = socket.create_connection((host, int(port)))
    s.sendall(req[:cut])
    s.close()
EOF
	echo "4 clients left after 0.3 s, 3 more left early"
}

t_disconnects_counted() {
	wait_metric tts_active_streams == 0 10 || return 1
	wait_metric tts_connections '<=' 1 10 || return 1
	local v
	v=$(metric tts_client_disconnects_total) || return 1
	echo "tts_client_disconnects_total = $v"
	[ "$v" -ge 4 ]
}

# The clients' texts last about 20 s at real-time pace: their jobs are
# all finished within 5 s only if leaving cancelled them.
t_disconnects_cancel() {
	wait_metric tts_queued_jobs == 0 5 || return 1
	local v
	v=$(metric tts_jobs_cancelled_total) || return 1
	echo "tts_jobs_cancelled_total = $v"
	[ "$v" -ge 4 ]
}

t_stream_after_disconnects() {
	loadgen 60 "after-$1" --requests 2 --concurrency 2 --warmup 0 \
		--sentence "$S1" &&
		$CHECK load "$T/after-$1.json" "$T/after-$1.log" 2 2 "$S1" &&
		$CHECK pace "$T/after-$1.json" 0.9 1.6 500
}

# --- 4. SIGTERM ---------------------------------------------------------------
t_sigterm_under_load() { # TAG DRAIN_S
	local tag=$1 drain=$2 lg rc active code chunks
	chunks=$(metric tts_chunks_total) || return 1
	"$LOADGEN" --url "$SRV_URL" --json --quiet --log "$T/drain-$tag.log" \
		--requests 24 --concurrency "$RT_WORKERS" --warmup 0 --timeout 30 \
		--sentence "$S2" --sentence "$S3" --sentence "$S4" \
		>"$T/drain-$tag.json" 2>"$T/drain-$tag.err" &
	lg=$!
	PIDS="$PIDS $lg"
	wait_metric tts_active_streams '>=' "$RT_WORKERS" 10 || return 1
	# Into the streams, not at their start: half a second of each.
	wait_metric tts_chunks_total '>=' $((chunks + 5 * RT_WORKERS)) 10 ||
		return 1
	active=$(metric tts_active_streams)
	stop_server_async
	# Once it drains, a new request gets no stream.
	wait_log "$SRV_ERR" ': draining [0-9]+ stream' 5 || return 1
	code=$(req POST /v1/audio/speech --max-time 3 \
		-H 'Content-Type: application/json' --data "{\"input\":\"$S1\",\"stream\":true}")
	echo "a request during the drain: HTTP $code"
	case $code in
	000 | 503) ;;
	*) echo "want no response or 503"; return 1 ;;
	esac
	stop_server_wait $((drain + 5))
	echo "exit status $STOP_RC after $STOP_MS ms ($active streams active at SIGTERM, deadline ${drain} s)"
	wait_pid "$lg" 40
	rc=$?
	echo "loadgen exit $rc"
	[ "$STOP_RC" = 0 ] || return 1
	# Every stream running at SIGTERM has at most one sentence (< 5 s)
	# left: the server must exit when they end, well before the deadline.
	[ "$STOP_MS" -le $(((drain - 3) * 1000)) ] || {
		echo "took longer than the streams needed (< 5 s)"
		return 1
	}
	$CHECK drained "$T/drain-$tag.log" "$active"
}

t_deadline_cuts_long_stream() { # TAG DRAIN_S
	local tag=$1 drain=$2 lg rc chunks
	chunks=$(metric tts_chunks_total) || return 1
	"$LOADGEN" --url "$SRV_URL" --json --quiet --log "$T/cut-$tag.log" \
		--requests 1 --concurrency 1 --warmup 0 --timeout 30 \
		--sentence "$LONG" >"$T/cut-$tag.json" 2>"$T/cut-$tag.err" &
	lg=$!
	PIDS="$PIDS $lg"
	wait_metric tts_active_streams '>=' 1 10 || return 1
	wait_metric tts_chunks_total '>=' $((chunks + 5)) 10 || return 1
	stop_server_async
	stop_server_wait $((drain + 5))
	wait_pid "$lg" 20
	rc=$?
	echo "exit status $STOP_RC after $STOP_MS ms (deadline ${drain} s), loadgen exit $rc"
	[ "$STOP_RC" = 0 ] || return 1
	[ "$STOP_MS" -le $((drain * 1000 + SLACK_MS)) ] || {
		echo "took longer than the ${drain} s deadline + $SLACK_MS ms"
		return 1
	}
	$CHECK cut "$T/cut-$tag.log"
}

round_realtime() { # TAG BINARY
	local tag=$1 bin=$2
	echo "round $tag: real-time pace, disconnects, SIGTERM"
	check "$tag: server starts with --pace realtime" \
		start_server "rt-$tag" "$bin" --pace realtime \
		--workers "$RT_WORKERS" --drain-seconds 10 || return
	check "$tag: stream_format audio arrives chunk by chunk, in real time" \
		timeout 30 $CHECK rawstream "${SRV_URL#http://}" "$S2"
	check "$tag: clients leave mid-stream" t_disconnects "$tag"
	check "$tag: healthy after, active streams back to 0" \
		t_disconnects_counted
	check "$tag: leaving cancelled their synthesis" t_disconnects_cancel
	check "$tag: streams still work after the disconnects, in real time" \
		t_stream_after_disconnects "$tag"
	check "$tag: SIGTERM under load: exit 0 in time, streams intact" \
		t_sigterm_under_load "$tag" 10
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts with --drain-seconds 1" \
		start_server "cut-$tag" "$bin" --pace realtime \
		--drain-seconds 1 || return
	check "$tag: drain deadline cuts a long stream with an error event" \
		t_deadline_cuts_long_stream "$tag" 1
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

# --- 5. a client that stops reading ------------------------------------------
# A client that sends a long streaming request and never reads: its socket
# buffers fill, the worker pauses for it, then the server's send buffer
# for it overflows.  Runs in the background (killed by cleanup at worst).
stall_client() { # NAME
	timeout 60 python3 - "${SRV_URL#http://}" "$LONG $LONG $LONG" \
		>"$T/$1.out" 2>&1 <<'EOF' &
import json, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host, int(port)))
body = json.dumps({"input": sys.argv[2], "stream": True}).encode()
s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
print("sent; not reading", flush=True)
time.sleep(60)
EOF
	STALL_PID=$!
	PIDS="$PIDS $STALL_PID"
}

# One worker, --send-timeout 10: the stalled stream holds the worker, and
# the streams queued behind it must not wait for the send timeout.
t_slow_client_queued() { # TAG
	local tag=$1 rc
	stall_client "stall-$tag"
	wait_metric tts_flow_pauses_total '>=' 1 10 || return 1
	loadgen 60 "behind-$tag" --requests 4 --concurrency 2 --warmup 0 \
		--sentence "$S2"
	rc=$?
	[ $rc -eq 0 ] || { echo "loadgen exit $rc"; tail "$T/behind-$tag.err"; }
	$CHECK load "$T/behind-$tag.json" "$T/behind-$tag.log" 4 2 "$S2" &&
		[ $rc -eq 0 ] || return 1
	# Alone they take well under 100 ms each; behind a worker that
	# waited out --send-timeout, over 10 s.
	$CHECK pace "$T/behind-$tag.json" 0 1 3000 || return 1
	t_slow_client_cut
}

# The stalled client is disconnected, counted, logged with its reason.
t_slow_client_cut() {
	wait_metric tts_slow_client_disconnects_total == 1 15 || return 1
	grep -E 'slow client: [0-9]+ bytes queued, over --max-send-buffer' \
		"$SRV_ERR" || return 1
	wait_metric tts_active_streams == 0 10 || return 1
	kill -TERM "$STALL_PID" 2>/dev/null # timeout(1) passes it on
	wait_pid "$STALL_PID" 5
	return 0
}

t_slow_alone() { # TAG
	stall_client "stall1-$1"
	wait_metric tts_flow_pauses_expired_total '>=' 1 15 || return 1
	t_slow_client_cut
}

# SIGTERM while a client is not reading: its stream is cut at the drain
# deadline, but the error event cannot reach it, so its connection is
# closed a second later with I/O in flight, and the loop's stop runs the
# callbacks of what it cancels; each connection is freed by its own last
# callback, exactly once (the sanitizer round checks the "once").
t_stalled_at_sigterm() { # TAG
	stall_client "stall2-$1"
	wait_metric tts_flow_pauses_total '>=' 1 10 || return 1
	stop_server_async
	stop_server_wait 10
	echo "exit status $STOP_RC after $STOP_MS ms (deadline 1 s)"
	kill -TERM "$STALL_PID" 2>/dev/null
	wait_pid "$STALL_PID" 5
	[ "$STOP_RC" = 0 ] || return 1
	[ "$STOP_MS" -le $((2000 + SLACK_MS)) ] || {
		echo "took longer than the deadline and the forced close"
		return 1
	}
	grep -E 'drain deadline: cut 1 stream' "$SRV_ERR" || return 1
	grep -E 'closing 1 connection\(s\) that did not finish' "$SRV_ERR" ||
		return 1
	if grep 'still open after the loop' "$SRV_ERR"; then
		return 1
	fi
}

round_slow() { # TAG BINARY
	local tag=$1 bin=$2
	echo "round $tag: a client that stops reading"
	check "$tag: server starts with one worker, --send-timeout 10" \
		start_server "slow-$tag" "$bin" --workers 1 \
		--max-send-buffer 64K --send-timeout 10 || return
	check "$tag: streams queued behind a stalled client are not held up" \
		t_slow_client_queued "$tag"
	check "$tag: healthy after" t_health
	check "$tag: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts with --send-timeout 1" \
		start_server "slow1-$tag" "$bin" --max-send-buffer 64K \
		--send-timeout 1 || return
	check "$tag: a stalled client alone: disconnected after the timeout" \
		t_slow_alone "$tag"
	check "$tag: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts with --send-timeout 30 --drain-seconds 1" \
		start_server "stall2-$tag" "$bin" --max-send-buffer 64K \
		--send-timeout 30 --drain-seconds 1 || return
	check "$tag: SIGTERM with a client not reading: cut, closed, exit 0" \
		t_stalled_at_sigterm "$tag"
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

# --- 9. a random-garbage client ---------------------------------------------
# Any byte sequence, in any pieces, at any pace: the sanitizer build must
# report nothing, and the server must still serve.
GARBAGE_SECONDS=${AUDIO_GARBAGE_SECONDS:-20}
GARBAGE_COUNT=${AUDIO_GARBAGE_COUNT:-3000}

t_connections_back_to_zero() {
	# The /metrics request itself is the one connection left.
	wait_metric tts_connections == 1 10
}

round_garbage() { # TAG BINARY
	local tag=$1 bin=$2 seed
	seed=${AUDIO_GARBAGE_SEED:-$(date +%s)}
	echo "round $tag: a random-garbage client"
	check "$tag: server starts with --idle-timeout 2" \
		start_server "garbage-$tag" "$bin" --idle-timeout 2 || return
	check "$tag: garbage for ${GARBAGE_SECONDS} s or $GARBAGE_COUNT connections (seed $seed)" \
		timeout $((GARBAGE_SECONDS + 60)) $CHECK chaos \
		"${SRV_URL#http://}" "$GARBAGE_SECONDS" "$GARBAGE_COUNT" "$seed"
	check "$tag: no sanitizer report after the garbage" \
		t_stderr_clean "$SRV_ERR"
	check "$tag: GET /health answers 200" t_health
	check "$tag: a speech request still streams" t_raw_stream
	check "$tag: every garbage connection closed" \
		t_connections_back_to_zero
	check "$tag: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

# --- 6. limits and options ---------------------------------------------------
round_limits() { # TAG BINARY
	local tag=$1 bin=$2
	echo "round $tag: --max-connections, --idle-timeout"
	check "$tag: server starts with --max-connections 2 --idle-timeout 1" \
		start_server "limits-$tag" "$bin" --max-connections 2 \
		--idle-timeout 1 || return
	check "$tag: a third connection gets 503; idle ones are closed" \
		timeout 30 $CHECK limits "${SRV_URL#http://}" 1
	check "$tag: refused and idle connections counted" t_limits_counted
	check "$tag: SIGTERM: exit 0 at once" t_stop 15
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
}

t_limits_counted() {
	wait_metric tts_connections_refused_total == 1 5 &&
		wait_metric tts_idle_closed_total '>=' 1 5
}

t_health_at() { # URL
	local code
	code=$(timeout 20 curl -sS -o "$T/body" -w '%{http_code}' \
		--max-time 15 "$1/health" 2>"$T/curl.err")
	[ "$code" = 200 ] || { echo "GET $1/health: $code"; return 1; }
	$CHECK health "$T/body"
}

# A server that must not start: exit status WANT, no listening line.
t_refuses() { # WANT ARGS...
	local want=$1 rc
	shift
	timeout 10 "$SERVER" "$@" >"$T/refuse.out" 2>"$T/refuse.err"
	rc=$?
	cat "$T/refuse.err"
	[ $rc -eq "$want" ] || { echo "exit status $rc, want $want"; return 1; }
	[ ! -s "$T/refuse.out" ] || { echo "stdout: $(cat "$T/refuse.out")"; return 1; }
}

round_options() {
	echo "round options: --host and bad options"
	check "--host 0.0.0.0: the server starts" \
		start_server any "$SERVER" --host 0.0.0.0 &&
		check "--host 0.0.0.0: listening on 0.0.0.0:PORT" \
			t_address 0.0.0.0 &&
		check "--host 0.0.0.0: reachable on 127.0.0.1" \
			t_health_at "http://127.0.0.1:${SRV_URL##*:}" &&
		check "--host 0.0.0.0: SIGTERM: exit 0" t_stop 15
	if python3 -c 'import socket; socket.create_server(("::1", 0), family=socket.AF_INET6)' 2>/dev/null; then
		check "--host ::1: the server starts" \
			start_server v6 "$SERVER" --host ::1 &&
			check "--host ::1: listening on [::1]:PORT" \
				t_address '[::1]' &&
			check "--host ::1: GET /health over IPv6" \
				t_health_at "$SRV_URL" &&
			check "--host ::1: SIGTERM: exit 0" t_stop 15
	else
		skip "--host ::1" "no IPv6 loopback here"
	fi
	check "--host nosuch.invalid: exit 1, no listening line" \
		t_refuses 1 --port 0 --host nosuch.invalid
	check "--wakeup sideways: exit 2" t_refuses 2 --wakeup sideways
	check "--coalesce-us -1: exit 2" t_refuses 2 --coalesce-us -1
	check "--coalesce-us 1000001: exit 2" t_refuses 2 --coalesce-us 1000001
	check "--port 65536: exit 2" t_refuses 2 --port 65536
}

# --- 7. the page, in headless Chromium ---------------------------------------
t_page() {
	local code
	code=$(req GET /)
	[ "$code" = 200 ] || { echo "GET /: $code"; return 1; }
	case $(header Content-Type) in
	text/html*) ;;
	*) echo "Content-Type: $(header Content-Type)"; return 1 ;;
	esac
	grep -q 'data-samples' "$T/body" || {
		echo "the page does not expose data-samples"
		return 1
	}
}

# The page starts speaking at load when the URL has ?text=, and keeps its
# progress on <body data-state data-samples data-deltas data-error>.
# --dump-dom prints the DOM once the virtual time budget is spent; virtual
# time stands still while a fetch is pending, so the dump comes after the
# stream ends (or after the timeout, which fails the check).
urlquote() { # TEXT: percent-encoded for a query string
	python3 -c 'import sys, urllib.parse
print(urllib.parse.quote(sys.argv[1]))' "$1"
}

# chromium_page NAME URL ARGS...: headless Chromium on the page, with a
# fresh profile and 15 s of virtual time; its stdout in $T/NAME.out.
chromium_page() {
	local name=$1 url=$2 prof rc
	shift 2
	command -v chromium >/dev/null 2>&1 || {
		echo "chromium is not installed (scripts/deps.sh audio)"
		return 1
	}
	prof=$(mktemp -d "$T/chromium.XXXXXX")
	timeout 60 chromium --headless --no-sandbox --disable-gpu \
		--disable-quic --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync \
		--user-data-dir="$prof" \
		--autoplay-policy=no-user-gesture-required \
		--virtual-time-budget=15000 "$@" "$url" \
		>"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	[ $rc -eq 0 ] || {
		echo "chromium $* exit $rc"
		tail -n 5 "$T/$name.err"
		return 1
	}
}

t_browser() {
	local text="Hello from headless Chromium, streaming over Web Audio."
	local url
	url="$SRV_URL/?text=$(urlquote "$text")"
	chromium_page page "$url" --dump-dom || return 1
	$CHECK page "$T/page.out" "$text" || return 1
	# The same page as a person sees it: the waveform and the charts.
	chromium_page shot "$url" --hide-scrollbars --window-size=1000,1400 \
		--screenshot="$T/page.png" || return 1
	[ -s "$T/page.png" ] || { echo "no screenshot"; return 1; }
	$CHECK screenshot "$T/page.png"
}

# --- 10. worker processes (--isolation process) ------------------------------
WORKERS_PY="python3 $HERE/workers.py"

# What a process holds: descriptors, the memfds among them (lull's rings
# and beacon, the job board), and the shared-memory objects of the host.
held() { # PID
	local fds memfds shm
	fds=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
	memfds=$(find "/proc/$1/fd" -lname '/memfd:*' 2>/dev/null | wc -l)
	shm=$(ls /dev/shm 2>/dev/null | wc -l)
	echo "fds=$fds memfds=$memfds shm=$shm"
}

# Every pid given is gone (not even a zombie).
t_all_gone() { # PID...
	local p
	for p in "$@"; do
		alive "$p" && { echo "worker $p still running"; return 1; }
	done
	echo "workers $* all gone"
}

t_identical() { # TAG BINARY
	local tag=$1 bin=$2 a b
	start_server "same-thread-$tag" "$bin" --workers 1 || return 1
	a=${SRV_URL#http://}
	A_PID=$SRV_PID
	start_server "same-proc-$tag" "$bin" --workers 1 \
		--isolation process || return 1
	b=${SRV_URL#http://}
	timeout 180 $WORKERS_PY identical "$a" "$b" 32 "$S2" || return 1
	stop_server 15 || return 1
	SRV_PID=$A_PID
	stop_server 15
}

t_chaos() { # TAG
	local before after
	before=$(held "$SRV_PID")
	timeout 300 $WORKERS_PY chaos "${SRV_URL#http://}" 50 8 || return 1
	after=$(held "$SRV_PID")
	echo "before: $before; after: $after"
	[ "$before" = "$after" ] || { echo "the server leaked"; return 1; }
	$WORKERS_PY children "$SRV_PID" 2
}

t_sigterm_workers() { # gone after SIGTERM: the server and its workers
	local pids
	pids=$($WORKERS_PY pids "${SRV_URL#http://}") || return 1
	stop_server 15
	echo "exit status $STOP_RC after $STOP_MS ms"
	[ "$STOP_RC" = 0 ] || return 1
	t_all_gone $pids
}

# The page's own button, in Chromium (?kill=1 presses it at the first
# audio): the stream it plays ends with its worker's death.
t_browser_kill() {
	chromium_page page-kill "$SRV_URL/?kill=1&text=$(urlquote "$LONG")" \
		--dump-dom || return 1
	$CHECK page_killed "$T/page-kill.out" || return 1
	wait_metric tts_workers_up == 2 10
}

# The page's button: kill -9 worker 1; it is counted and replaced.
t_demo_kill() {
	local code deaths
	deaths=$(metric tts_worker_deaths_total) || return 1
	code=$(req POST /v1/demo/kill-worker --data-binary 1)
	cat "$T/body"; echo
	[ "$code" = 200 ] || { echo "HTTP $code"; return 1; }
	wait_metric tts_worker_deaths_total == $((deaths + 1)) 10 || return 1
	wait_metric tts_workers_up == 2 10 || return 1
	code=$(req POST /v1/demo/kill-worker --data-binary 2)
	[ "$code" = 400 ] || { echo "worker 2 of 2: HTTP $code"; return 1; }
}

t_server_kill() {
	local pid=$SRV_PID
	timeout 60 $WORKERS_PY server-kill "${SRV_URL#http://}" "$pid"
	local rc=$?
	wait_pid "$pid" 5
	SRV_PID=""
	return $rc
}

t_backoff() { # BINARY
	local started
	started=$(date +%s%3N)
	start_server "backoff-$tag" "$1" --isolation process \
		--fault engine || return 1
	timeout 60 $WORKERS_PY backoff "${SRV_URL#http://}" "$started" ||
		return 1
	t_stop 15
}

round_process() { # TAG BINARY
	local tag=$1 bin=$2 pids
	echo "round $tag: worker processes (--isolation process)"
	check "$tag: 32 streams of one sentence: the same audio as threads" \
		t_identical "$tag" "$bin"
	check "$tag: server starts with --isolation process" \
		start_server "proc-$tag" "$bin" --isolation process \
		--workers 2 --demo-controls || return
	check "$tag: 32 concurrent streams on worker processes, all valid" \
		t_32_streams "proc-$tag"
	check "$tag: 50 random worker kills under load: no hang, no leak" \
		t_chaos "$tag"
	check "$tag: 32 streams after the kills" t_32_streams "proc2-$tag"
	check "$tag: --demo-controls: POST /v1/demo/kill-worker kills one" \
		t_demo_kill
	check "$tag: SIGTERM: exit 0, every worker gone" t_sigterm_workers
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts, real time, 2 worker processes" \
		start_server "kill-$tag" "$bin" --isolation process \
		--workers 2 --pace realtime --demo-controls || return
	check "$tag: kill a worker with 8 streams: exactly those end in error" \
		timeout 120 $WORKERS_PY kill-one "${SRV_URL#http://}" 8 "$S1"
	if [ "$tag" = plain ]; then
		check "$tag: the page's kill button: its stream ends with the death" \
			t_browser_kill
	fi
	check "$tag: the server's kill -9: its workers exit on their own" \
		t_server_kill
	check "$tag: server starts, real time, $RT_WORKERS worker processes" \
		start_server "procrt-$tag" "$bin" --isolation process \
		--pace realtime --workers "$RT_WORKERS" --drain-seconds 10 ||
		return
	pids=$($WORKERS_PY pids "${SRV_URL#http://}")
	check "$tag: SIGTERM under load: streams drain, exit 0" \
		t_sigterm_under_load "proc-$tag" 10
	check "$tag: ... and no worker is left" t_all_gone $pids
	check "$tag: stderr clean" t_stderr_clean "$SRV_ERR"
	check "$tag: server starts with --fault crash" \
		start_server "crash-$tag" "$bin" --isolation process \
		--fault crash || return
	check "$tag: a worker that aborts: its stream ends in error" \
		timeout 120 $WORKERS_PY crash "${SRV_URL#http://}" 4
	check "$tag: SIGTERM: exit 0" t_stop 15
	check "$tag: workers that die at start are restarted with a back-off" \
		t_backoff "$bin"
}

# --- the load generator's A/B mode ------------------------------------------
t_ab() {
	local rc
	timeout 120 "$LOADGEN" --ab --ab-server "$SERVER" --requests 16 \
		--concurrency 1 --concurrency 8 --warmup 2 --json \
		--plot "$T/ab.png" >"$T/ab.json" 2>"$T/ab.err"
	rc=$?
	grep -A 13 '^A/B' "$T/ab.err"
	[ $rc -eq 0 ] || { echo "loadgen exit $rc"; tail "$T/ab.err"; return 1; }
	$CHECK ab "$T/ab.json" poll=1 poll=8 park=1 park=8 || return 1
	grep -q '^metric .*baseline poll.*candidate park.*delta.*change' \
		"$T/ab.err" || { echo "no A/B table"; return 1; }
	[ "$(head -c 8 "$T/ab.png" | od -An -tx1 | tr -d ' \n')" = \
		89504e470d0a1a0a ] || { echo "$T/ab.png is not a PNG"; return 1; }
}

# Park against park with a coalescing window: each side's own arguments
# reach that side's server only, and the table, the JSON lines and the
# log name each side.
t_ab_sides() {
	local rc
	timeout 120 "$LOADGEN" --ab --ab-server "$SERVER" --requests 4 \
		--concurrency 4 --warmup 0 --json \
		--server-arg-a --wakeup=park --ab-name-a park \
		--server-arg-b --coalesce-us --server-arg-b 500 \
		>"$T/ab2.json" 2>"$T/ab2.err"
	rc=$?
	grep -A 7 '^A/B' "$T/ab2.err"
	[ $rc -eq 0 ] || { echo "loadgen exit $rc"; tail "$T/ab2.err"; return 1; }
	$CHECK ab "$T/ab2.json" park=4 "park --coalesce-us 500=4" || return 1
	grep -q '^metric .*baseline park.*candidate park --coalesce-us 500.*delta' \
		"$T/ab2.err" || { echo "no A/B table"; return 1; }
	# The servers' own first log lines, in order: A parks without a
	# window, B with one.
	grep -o 'wake-up [a-z]*, coalesce [0-9]* us' "$T/ab2.err" \
		>"$T/ab2.modes"
	printf 'wake-up park, coalesce 0 us\nwake-up park, coalesce 500 us\n' |
		cmp -s - "$T/ab2.modes" || {
		echo "server log lines:"; cat "$T/ab2.modes"; return 1
	}
	if "$LOADGEN" --ab --url-poll http://127.0.0.1:1 \
		--url-park http://127.0.0.1:1 --server-arg-a x \
		>/dev/null 2>"$T/ab3.err"; then
		echo "--server-arg-a without --ab-server accepted"
		return 1
	fi
	grep -q 'need --ab-server' "$T/ab3.err"
}

# --- main ----------------------------------------------------------------------
for f in "$SERVER" "$LOADGEN"; do
	if [ ! -x "$f" ]; then
		echo "audio: $f is not built (make $f)"
		echo "audio: 0 passed, 1 failed"
		exit 1
	fi
done

# AUDIO_ROUNDS="basics slow ..." runs only those rounds (the names below);
# a partial run says so, and is never silent about what it left out.
ROUNDS="loadgen basics fault variants realtime slow limits process options"
ROUNDS="$ROUNDS ab"
ROUNDS="$ROUNDS asan garbage"
want() {
	case " ${AUDIO_ROUNDS:-$ROUNDS} " in *" $1 "*) return 0 ;; esac
	return 1
}
for r in ${AUDIO_ROUNDS:-}; do
	case " $ROUNDS " in *" $r "*) ;; *)
		echo "audio: AUDIO_ROUNDS: no round '$r' (rounds: $ROUNDS)"
		exit 2 ;;
	esac
done

if want loadgen; then
	echo "round 0: the load generator"
	check "loadgen counts every kind of broken stream" \
		t_loadgen_detects_every_fault
	check "loadgen accepts valid streams however they are cut" \
		t_loadgen_accepts_odd_framing
	check "loadgen runs levels 1, 8, 16, 32 by default, warm-ups apart; plot" \
		t_loadgen_default_levels
fi

# The rounds that run on both builds.
server_rounds() { # TAG BINARY
	want basics && round_basics "$1" "$2"
	want fault && round_fault "$1" "$2"
	want variants && round_variants "$1" "$2"
	want realtime && round_realtime "$1" "$2"
	want slow && round_slow "$1" "$2"
	want limits && round_limits "$1" "$2"
	want process && round_process "$1" "$2"
	return 0
}

server_rounds plain "$SERVER"
want options && round_options
if want ab; then
	echo "round ab: audio-loadgen --ab against the real server"
	check "loadgen --ab --ab-server: table, plot, both servers exit 0" t_ab
	check "loadgen --ab: --server-arg-a/-b reach one side, named" \
		t_ab_sides
fi

if ! want asan; then
	echo "round asan: not asked for (AUDIO_ROUNDS)"
	asan_skipped=1
elif [ -n "${AUDIO_SKIP_ASAN:-}" ]; then
	echo "round asan: skipped (AUDIO_SKIP_ASAN)"
	asan_skipped=1
elif [ ! -x "$ASAN_SERVER" ]; then
	bad "asan: $ASAN_SERVER is not built"
else
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}
	export UBSAN_OPTIONS=print_stacktrace=1:${UBSAN_OPTIONS:-}
	server_rounds asan "$ASAN_SERVER"
fi
if want garbage; then
	if [ ! -x "$ASAN_SERVER" ]; then
		bad "garbage: $ASAN_SERVER is not built"
	else
		export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}
		export UBSAN_OPTIONS=print_stacktrace=1:${UBSAN_OPTIONS:-}
		round_garbage garbage "$ASAN_SERVER"
	fi
fi

echo "audio: took $((($(now_ms) - T0) / 1000)) s"
[ -n "${asan_skipped:-}" ] && echo "audio: the sanitizer round was skipped"
[ -n "${AUDIO_ROUNDS:-}" ] && echo "audio: only the rounds: $AUDIO_ROUNDS"
if [ "$skipped" -gt 0 ]; then
	echo "audio: $passed passed, $failed failed, $skipped skipped"
else
	echo "audio: $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
