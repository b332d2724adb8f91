#!/bin/sh
# Run every test suite that `make test-build` built (and with "check",
# the examples' suites that `make check-build` built), keep going past a
# failure, and end with one "N passed, N failed" line (one per suite).
# The exit status is non-zero when any suite failed.
#
# The library's suites are independent programs: they run TEST_JOBS at a
# time (default: one per CPU), the longest first.  Each one's output is
# kept whole and printed when it ends, framed by "=== NAME: COMMAND" and
# "=== NAME: ok in N s"; the slowest are listed again at the end.  With
# "check", the examples' integration test and fuzzers then run alone, as
# they measure time.
#
# make test runs each stress program, and the model, at a quick size (a
# few seconds each); make check at the full size CI relies on: the stress
# programs' own defaults (minutes of randomised rounds, a million
# ping-pong park cycles per backend), ThreadSanitizer's larger runs, and
# every configuration of the model.
# Usage: scripts/run-tests.sh [test|check]
set -u
B=${B:-build}
scope=${1:-test}
case $scope in
test | check) ;;
*) echo "usage: $0 [test|check]" >&2; exit 2 ;;
esac
jobs=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
out=$B/test-runs
began=$(date +%s)

# The options of stress program $2 in flavour $1 (plain or tsan) for this
# scope.  ThreadSanitizer makes every run about ten times dearer, so its
# full runs are smaller than the plain ones (TSAN_RECORDS_* override
# them).  The quick runs keep every configuration, only fewer records or
# rounds in each, and stress_park's per-configuration deadline is brought
# down to what such a run needs (its lost wake-up detection, after 1 s
# parked, does not change).
stress_options() {
	case $scope:$1:$2 in
	test:plain:stress_ring) echo --records 2M ;;
	test:plain:stress_park) echo --records 10000 --pingpong 10000 \
		--deadline 60 ;;
	test:plain:stress_shutdown) echo --rounds 1000 ;;
	test:plain:stress_kill) echo --rounds 600 ;;
	test:plain:stress_slip) echo --records 2M ;;
	test:tsan:stress_slip) echo --records 200K ;;
	check:tsan:stress_slip) echo --records "${TSAN_RECORDS_SLIP:-2M}" ;;
	test:tsan:stress_kill) echo --rounds 300 ;;
	check:tsan:stress_kill) echo --rounds "${TSAN_ROUNDS_KILL:-2000}" ;;
	test:tsan:stress_ring) echo --records 300000 ;;
	test:tsan:stress_park) echo --records 5000 --deadline 60 ;;
	test:tsan:stress_shutdown) echo --rounds 400 ;;
	check:tsan:stress_ring) echo --records "${TSAN_RECORDS_RING:-3000000}" ;;
	check:tsan:stress_park) echo --records "${TSAN_RECORDS_PARK:-100000}" ;;
	check:tsan:stress_shutdown)
		echo --records "${TSAN_RECORDS_SHUTDOWN:-10000000}" ;;
	esac
}

# Install into a scratch prefix and build an example against it with
# pkg-config alone, so a broken install, lull.pc or version script fails;
# then check that DESTDIR is honoured and that uninstall leaves nothing.
install_check() {
	stage=$(pwd)/$B/stage
	rm -rf "$stage"
	make --no-print-directory install PREFIX="$stage/prefix" >/dev/null ||
		return 1
	# shellcheck disable=SC2046
	PKG_CONFIG_PATH="$stage/prefix/lib/pkgconfig" \
		cc -O2 -o "$stage/ring_tour" examples/ring_tour.c \
		$(PKG_CONFIG_PATH="$stage/prefix/lib/pkgconfig" \
			pkg-config --cflags --libs lull) -pthread || return 1
	readelf -d "$stage/ring_tour" | grep -q 'NEEDED.*liblull.so.0' ||
		{ echo "example is not linked against liblull.so.0"; return 1; }
	LD_LIBRARY_PATH="$stage/prefix/lib" "$stage/ring_tour" 200000 ||
		return 1
	make --no-print-directory uninstall PREFIX="$stage/prefix" \
		>/dev/null || return 1
	make --no-print-directory install DESTDIR="$stage/dest" PREFIX=/usr \
		>/dev/null || return 1
	for f in usr/include/lull.h usr/include/lull/ring.h \
		usr/lib/liblull.so.0 usr/lib/liblull.a usr/lib/pkgconfig/lull.pc \
		usr/share/man/man3/lull_ring_create.3 usr/share/man/man7/lull.7; do
		[ -e "$stage/dest/$f" ] || { echo "install: no $f"; return 1; }
	done
	grep -q '^prefix=/usr$' "$stage/dest/usr/lib/pkgconfig/lull.pc" ||
		{ echo "lull.pc does not say prefix=/usr"; return 1; }
	make --no-print-directory uninstall DESTDIR="$stage/dest" PREFIX=/usr \
		>/dev/null || return 1
	left=$(find "$stage/prefix" "$stage/dest" -type f -o -type l)
	[ -z "$left" ] || { echo "uninstall left: $left"; return 1; }
}

# The version a user sees, everywhere it shows, against the header's:
# the Makefile's, the SONAME, the installed lull.pc's Version and the
# symbol version of lib/lull.map (LULL_MAJOR.MINOR).
version_check() {
	h=include/lull.h
	major=$(sed -n 's/^#define LULL_VERSION_MAJOR \([0-9]*\)$/\1/p' $h)
	minor=$(sed -n 's/^#define LULL_VERSION_MINOR \([0-9]*\)$/\1/p' $h)
	patch=$(sed -n 's/^#define LULL_VERSION_PATCH \([0-9]*\)$/\1/p' $h)
	string=$(sed -n 's/^#define LULL_VERSION_STRING "\(.*\)"$/\1/p' $h)
	echo "lull.h: $major.$minor.$patch, \"$string\""
	[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] &&
		[ "$string" = "$major.$minor.$patch" ] ||
		{ echo "lull.h: the macros disagree"; return 1; }
	mk=$(sed -n 's/^VERSION := *//p' Makefile)
	[ "$mk" = "$string" ] ||
		{ echo "Makefile: VERSION $mk, not $string"; return 1; }
	so=$(readelf -d "$B/lib/liblull.so.$mk" |
		sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
	[ "$so" = "liblull.so.$major" ] ||
		{ echo "SONAME $so, not liblull.so.$major"; return 1; }
	stage=$(pwd)/$B/stage-version
	rm -rf "$stage"
	make --no-print-directory install PREFIX="$stage" >/dev/null || return 1
	pc=$(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --modversion lull)
	rm -rf "$stage"
	[ "$pc" = "$string" ] ||
		{ echo "lull.pc: Version $pc, not $string"; return 1; }
	node=$(sed -n 's/^\(LULL_[0-9.]*\) {$/\1/p' lib/lull.map)
	[ "$node" = "LULL_$major.$minor" ] ||
		{ echo "lull.map: version node $node, not LULL_$major.$minor"; return 1; }
	# Every exported function carries that node in the built library.
	untagged=$(nm -D --defined-only "$B/lib/liblull.so.$mk" |
		awk '$2 == "T" && $3 !~ /@@'"$node"'$/ { print $3 }')
	[ -z "$untagged" ] ||
		{ echo "exported without $node: $untagged"; return 1; }
	echo "Makefile, SONAME, lull.pc and lull.map agree: $string ($node)"
}


# --- running suites ------------------------------------------------------

# Add a suite to list $1: its name, then the command (words without
# spaces; a shell function of this script is fine).
suite() {
	list=$1
	name=$2
	shift 2
	printf '%s|%s\n' "$name" "$*" >>"$list"
}

# Run suite number $1, named $2, command $3; print its output whole once
# it ends, and leave "ok|SECONDS|NAME" (or FAILED) in $out/$1.result.
run_suite() {
	log=$out/$1.log
	start=$(date +%s)
	printf '\n=== %s: %s\n' "$2" "$3" >"$log"
	# A subshell: a function suite keeps its variables to itself.
	if (eval "$3") </dev/null >>"$log" 2>&1; then
		result=ok
	else
		result=FAILED
	fi
	took=$(($(date +%s) - start))
	printf '=== %s: %s in %d s\n' "$2" "$result" "$took" >>"$log"
	printf '%s|%d|%s\n' "$result" "$took" "$2" >"$out/$1.result"
	while ! mkdir "$out/print.lock" 2>/dev/null; do
		sleep 0.2
	done
	cat "$log"
	rmdir "$out/print.lock"
}

# Run every suite of list $1, $2 at a time: each worker takes the next
# suite nobody took (mkdir is atomic).  Suites are numbered from $3 on.
run_list() {
	w=0
	while [ "$w" -lt "$2" ]; do
		(
			n=$3
			while IFS='|' read -r name cmd; do
				if mkdir "$out/taken.$n" 2>/dev/null; then
					run_suite "$n" "$name" "$cmd"
				fi
				n=$((n + 1))
			done <"$1"
		) &
		w=$((w + 1))
	done
	wait
}

rm -rf "$out"
mkdir -p "$out"
all=$out/suites
alone=$out/suites-alone
: >"$all"
: >"$alone"

# The longest first, so that the short ones fill in around them.
[ -f test/model/park.pml ] && suite "$all" "spin model" \
	sh scripts/check-model.sh "$scope"
for t in "$B"/test/tsan/*; do
	# shellcheck disable=SC2046
	[ -x "$t" ] && suite "$all" "tsan $(basename "$t")" env \
		TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$t" \
		$(stress_options tsan "$(basename "$t")")
done
for t in "$B"/test/stress/*; do
	# shellcheck disable=SC2046
	[ -x "$t" ] && suite "$all" "stress $(basename "$t")" "$t" \
		$(stress_options plain "$(basename "$t")")
done
for t in "$B"/test/asan/test_*; do
	[ -x "$t" ] && suite "$all" "asan+ubsan $(basename "$t")" env \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$t"
done
for t in "$B"/test/test_*; do
	[ -x "$t" ] && suite "$all" "unit $(basename "$t")" "$t"
done
# The io_uring-less fallback must pass the same suites: force it.
for t in "$B"/test/test_park_* "$B"/test/test_producer_wait \
	"$B"/test/test_loop_*; do
	[ -x "$t" ] && suite "$all" "unit $(basename "$t") (LULL_BACKEND=epoll)" \
		env LULL_BACKEND=epoll "$t"
done
# The example of producer processes, as its README runs it, one killed.
suite "$all" "example shared_ring" sh -c \
	"'$B/examples/shared_ring' && '$B/examples/shared_ring' -k 8 5000"
suite "$all" "man pages" bash scripts/check-man.sh
# The throughput binary has exactly the peers whose packages are here.
suite "$all" "perf peers" sh perf/check-peers.sh "B=$B"
suite "$all" "install + pkg-config" install_check
suite "$all" "version everywhere" version_check
if [ "$scope" = check ]; then
	suite "$alone" "audio server" bash test/audio/run.sh \
		"$B/examples/audio-server" "$B/examples/audio-loadgen" \
		"$B/examples/audio-server-asan"
	# The consumer of a region any process may write (its read, peek
	# and wait paths, and open) under libFuzzer, from the corpus in
	# test/fuzz/corpus, REGION_FUZZ_SECONDS each, side by side.
	suite "$alone" "fuzz region (libFuzzer)" sh scripts/fuzz.sh \
		"${REGION_FUZZ_SECONDS:-30}" region_read region_open
	# The audio example's HTTP reader and speech request under
	# libFuzzer, from the seed corpus, FUZZ_SECONDS each, side by side.
	suite "$alone" "fuzz (libFuzzer)" sh scripts/fuzz.sh \
		"${FUZZ_SECONDS:-60}" http_reader speech_request
fi

printf '%s: %d suites, %d at a time\n' "$scope" "$(wc -l <"$all")" "$jobs"
run_list "$all" "$jobs" 1
run_list "$alone" 1 1001

results=$(cat "$out"/*.result 2>/dev/null)
suites=$(cat "$all" "$alone" | wc -l)
passed=$(printf '%s\n' "$results" | grep -c '^ok|')
failed=$((suites - passed))
printf '\n%s took %d s; the slowest suites:\n' "$scope" \
	$(($(date +%s) - began))
printf '%s\n' "$results" | sort -t'|' -k2,2nr | head -n 8 |
	awk -F'|' '{ printf "  %5d s  %s\n", $2, $3 }'
failures=$(printf '%s\n' "$results" | sed -n 's/^FAILED|[0-9]*|//p')
[ -n "$failures" ] && printf 'failed suites:\n%s\n' "$failures" |
	sed '2,$s/^/  /'
[ "$(printf '%s\n' "$results" | grep -c '|')" -lt "$suites" ] &&
	echo "(and suites that left no result)"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
