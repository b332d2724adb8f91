#!/bin/sh
# Run every test suite that `make test-build` built (and with "check",
# the examples' suites that `make check-build` built), keep going past a
# failure, and end with one "N passed, N failed" line (one per suite).
# The exit status is non-zero when any suite failed.
# Usage: scripts/run-tests.sh [test|check]
set -u
B=${B:-build}
scope=${1:-test}
case $scope in
test | check) ;;
*) echo "usage: $0 [test|check]" >&2; exit 2 ;;
esac
# The --records value of each stress program under ThreadSanitizer, which
# slows them roughly tenfold; the plain build still runs the full count.
tsan_records() {
	case $1 in
	stress_ring) echo "${TSAN_RECORDS_RING:-3000000}" ;;
	stress_park) echo "${TSAN_RECORDS_PARK:-100000}" ;;
	stress_shutdown) echo "${TSAN_RECORDS_SHUTDOWN:-10000000}" ;;
	*) echo 100000 ;;
	esac
}
passed=0
failed=0
failures=""
began=$(date +%s)

run() { # name, command...
	name=$1
	shift
	printf '\n=== %s: %s\n' "$name" "$*"
	start=$(date +%s)
	if "$@"; then
		passed=$((passed + 1))
		result=ok
	else
		failed=$((failed + 1))
		failures="$failures $name"
		result=FAILED
	fi
	printf '=== %s: %s in %d s\n' "$name" "$result" $(($(date +%s) - start))
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

for t in "$B"/test/test_*; do
	[ -x "$t" ] && run "unit $(basename "$t")" "$t"
done
# The io_uring-less fallback must pass the same suites: force it.
for t in "$B"/test/test_park_* "$B"/test/test_producer_wait \
	"$B"/test/test_loop_*; do
	[ -x "$t" ] && run "unit $(basename "$t") (LULL_BACKEND=epoll)" env \
		LULL_BACKEND=epoll "$t"
done
for t in "$B"/test/asan/test_*; do
	[ -x "$t" ] && run "asan+ubsan $(basename "$t")" env \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$t"
done
# make check runs stress_park's million ping-pong park cycles per backend;
# make test a tenth of them.  Each cycle is one cross-CPU wake-up, about
# 80 us on a quiet 2-vCPU VM, so the million take minutes there.
stress_args() {
	case $scope:$1 in
	test:stress_park) echo "--pingpong ${TEST_PINGPONG:-100000}" ;;
	esac
}
for t in "$B"/test/stress/*; do
	# shellcheck disable=SC2046
	[ -x "$t" ] && run "stress $(basename "$t")" "$t" \
		$(stress_args "$(basename "$t")")
done
for t in "$B"/test/tsan/*; do
	[ -x "$t" ] && run "tsan $(basename "$t")" env \
		TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
		"$t" --records "$(tsan_records "$(basename "$t")")"
done
[ -f test/model/park.pml ] && run "spin model" sh scripts/check-model.sh
run "install + pkg-config" install_check
run "version everywhere" version_check
run "man pages" bash scripts/check-man.sh
# The throughput binary has exactly the peers whose packages are here.
run "perf peers" sh perf/check-peers.sh "B=$B"
if [ "$scope" = check ]; then
	run "audio server" bash test/audio/run.sh "$B/examples/audio-server" \
		"$B/examples/audio-loadgen" "$B/examples/audio-server-asan"
	# The consumer of a region any process may write (its read, peek
	# and wait paths, and open) under libFuzzer, from the corpus in
	# test/fuzz/corpus, REGION_FUZZ_SECONDS each, side by side.
	run "fuzz region (libFuzzer)" sh scripts/fuzz.sh \
		"${REGION_FUZZ_SECONDS:-30}" region_read region_open
	# The audio example's HTTP reader and speech request under
	# libFuzzer, from the seed corpus, FUZZ_SECONDS each, side by side.
	run "fuzz (libFuzzer)" sh scripts/fuzz.sh "${FUZZ_SECONDS:-60}" \
		http_reader speech_request
fi

printf '\n%s took %d s\n' "$scope" $(($(date +%s) - began))
[ -n "$failures" ] && echo "failed suites:$failures"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
