#!/bin/sh
# Run libFuzzer targets side by side for SECONDS each (default 60) from
# their seed corpora, and report what each ran and found.  New inputs that
# reach new code are kept in $B/fuzz/corpus/NAME, so a later run starts
# where this one stopped; a crash leaves its input in $B/fuzz.
# Usage: scripts/fuzz.sh [SECONDS [NAME...]]; NAME is a target without its
# fuzz_ prefix (default: every one).  Exit status 1 when a target failed.
#   region_read, region_open  the consumer of a hostile region (the
#                             library); seeds in test/fuzz/corpus/NAME
#   http_reader, speech_request  the audio example; seeds written by
#                             test/fuzz/seeds.py
set -u
B=${B:-build}
seconds=${1:-60}
[ $# -gt 0 ] && shift
names=${*:-region_read region_open http_reader speech_request}
corpus=$B/fuzz/corpus
seeds=$B/fuzz/seeds
case " $names " in
*" http_reader "* | *" speech_request "*)
	rm -rf "$seeds"
	python3 test/fuzz/seeds.py "$seeds" || exit 1
	;;
esac
status=0
pids=""
for name in $names; do
	case $name in
	region_read)
		seed_dir=test/fuzz/corpus/$name
		# A script: a few hundred steps are plenty, and longer ones
		# only slow each run down.
		max_len=-max_len=4096
		;;
	region_open)
		seed_dir=test/fuzz/corpus/$name
		# A region of 256-byte lanes is 1.5 to 2.5 KiB; LANES(3) of
		# 4 KiB lanes about 14 KiB.
		max_len=-max_len=20000
		;;
	*)
		seed_dir=$seeds/$name
		max_len=
		;;
	esac
	mkdir -p "$corpus/$name"
	# The first directory receives new inputs; the seeds are only read.
	# shellcheck disable=SC2086
	"$B/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 $max_len \
		-artifact_prefix="$B/fuzz/$name-" \
		"$corpus/$name" "$seed_dir" >"$B/fuzz/$name.log" 2>&1 &
	pids="$pids $!"
done
i=0
for pid in $pids; do
	i=$((i + 1))
	name=$(echo "$names" | cut -d' ' -f$i)
	if wait "$pid"; then
		result=ok
	else
		result=FAILED
		status=1
		tail -n 40 "$B/fuzz/$name.log"
	fi
	runs=$(LC_ALL=C sed -n 's/^stat::number_of_executed_units: *//p' \
		"$B/fuzz/$name.log")
	cov=$(grep -ao 'cov: [0-9]*' "$B/fuzz/$name.log" | tail -n 1)
	echo "fuzz $name: $result, ${runs:-?} executions in ${seconds} s," \
		"${cov:-cov: ?}, corpus $(ls "$corpus/$name" | wc -l) inputs"
done
exit $status
