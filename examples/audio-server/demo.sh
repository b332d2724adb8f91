#!/bin/sh
# demo.sh - what `make audio-demo` runs.
#
#  1. audio-loadgen --ab: the same streaming load against a server in each
#     wake-up mode, one at a time (the loop polls the chunk ring every
#     1 ms, or parks on it and is woken by the worker's commit); the
#     load generator starts each on --port 0, stops it with SIGTERM and
#     requires exit status 0; then it prints the A/B table.
#  2. Idle cost: both servers on free ports, left alone for two seconds;
#     the loop thread's passes and CPU time in that time, then SIGTERM to
#     both, each of which must drain and exit 0.
#  3. Where to listen in a browser.
#
# Usage: demo.sh SERVER LOADGEN
# Environment: AUDIO_PACE=fast|realtime (default fast: synthesis as fast
# as it goes; realtime: each request lasts as long as its audio, which
# emulates a model that generates as it speaks, and takes a few minutes).
set -eu

server=$1
loadgen=$2
pace=${AUDIO_PACE:-fast}
tmp=$(mktemp -d)
pids=""
status=0

cleanup() {
	for pid in $pids; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# start MODE: run a server on a free port; sets pid and url.
start() {
	"$server" --port 0 --wakeup "$1" >"$tmp/$1.out" 2>"$tmp/$1.err" &
	pid=$!
	pids="$pids $pid"
	i=0
	while ! grep -q '^listening on ' "$tmp/$1.out" 2>/dev/null; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "audio-demo: the $1 server did not start:" >&2
			cat "$tmp/$1.err" >&2
			exit 1
		fi
		sleep 0.1
	done
	url="http://$(sed -n 's/^listening on //p' "$tmp/$1.out")"
}

# stop PID MODE: SIGTERM; the exit status must be 0.
stop() {
	kill -TERM "$1"
	if wait "$1"; then
		echo "audio-demo: the $2 server drained and exited 0"
	else
		echo "audio-demo: the $2 server exited with status $?:" >&2
		cat "$tmp/$2.err" >&2
		status=1
	fi
}

# Nanoseconds the loop (the main thread) has run, and its passes.
cpu_ns() { cut -d' ' -f1 "/proc/$1/schedstat"; }
passes() {
	curl -s "$1/metrics" | sed -n 's/^lull_loop_iterations_total //p'
}

echo "== 1. A/B under load: --wakeup poll versus park (pace $pace)"
if [ "$pace" = realtime ]; then
	set -- --server-arg --pace --server-arg realtime --server-arg \
		--workers --server-arg 16 --requests 16 --warmup 1 \
		--concurrency 1 --concurrency 8
else
	set -- --requests 64 --concurrency 1 --concurrency 8 \
		--concurrency 16 --concurrency 32
fi
"$loadgen" --ab --ab-server "$server" "$@" || status=1

echo
echo "== 2. Idle for 2 s: the loop thread's passes and CPU time"
start poll
poll_pid=$pid
poll_url=$url
start park
park_pid=$pid
park_url=$url
sleep 0.5
p0=$(passes "$poll_url") k0=$(passes "$park_url")
pc0=$(cpu_ns "$poll_pid") kc0=$(cpu_ns "$park_pid")
sleep 2
pc1=$(cpu_ns "$poll_pid") kc1=$(cpu_ns "$park_pid")
p1=$(passes "$poll_url") k1=$(passes "$park_url")
# Each /metrics request itself costs the loop a few passes.
printf '  poll: %6d loop passes, %8.3f ms CPU\n' $((p1 - p0)) \
	"$(echo "($pc1 - $pc0) / 1000000" | bc -l)"
printf '  park: %6d loop passes, %8.3f ms CPU\n' $((k1 - k0)) \
	"$(echo "($kc1 - $kc0) / 1000000" | bc -l)"
stop "$poll_pid" poll
stop "$park_pid" park
pids=""

cat <<MSG

== 3. Listen in a browser: run
    $server --port 8000        (or: make audio-serve)
and open http://127.0.0.1:8000/ , type something and press Speak.  Or:
    curl -N -X POST http://127.0.0.1:8000/v1/audio/speech \\
        -d '{"input":"Hello","voice":"nova","stream":true}'
MSG
exit $status
