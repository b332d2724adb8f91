#!/bin/sh
# Run both libFuzzer targets side by side for SECONDS each (default 60)
# from the seed corpus, and report what each ran and found.  New inputs
# that reach new code are kept in $B/fuzz/corpus/NAME, so a later run
# starts where this one stopped; a crash leaves its input in $B/fuzz.
# Usage: scripts/fuzz.sh [SECONDS]; exit status 1 when a target failed.
set -u
B=${B:-build}
seconds=${1:-60}
corpus=$B/fuzz/corpus
seeds=$B/fuzz/seeds
rm -rf "$seeds"
python3 test/fuzz/seeds.py "$seeds" || exit 1
status=0
pids=""
for name in http_reader speech_request; do
	mkdir -p "$corpus/$name"
	# The first directory receives new inputs; the seeds are only read.
	"$B/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$B/fuzz/$name-" \
		"$corpus/$name" "$seeds/$name" >"$B/fuzz/$name.log" 2>&1 &
	pids="$pids $!"
done
i=0
for pid in $pids; do
	i=$((i + 1))
	name=$(echo "http_reader speech_request" | cut -d' ' -f$i)
	if wait "$pid"; then
		result=ok
	else
		result=FAILED
		status=1
		tail -n 40 "$B/fuzz/$name.log"
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' \
		"$B/fuzz/$name.log")
	cov=$(grep -o 'cov: [0-9]*' "$B/fuzz/$name.log" | tail -n 1)
	echo "fuzz $name: $result, ${runs:-?} executions in ${seconds} s," \
		"${cov:-cov: ?}, corpus $(ls "$corpus/$name" | wc -l) inputs"
done
exit $status
