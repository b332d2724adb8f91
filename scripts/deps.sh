#!/bin/sh
# Install the Debian packages a make target needs, and nothing when they are
# already there.  Usage: scripts/deps.sh build|test|demo|bench|audio
# Runs apt-get as root, or through sudo; prints what it installs.
set -eu

need=""
want_pkgconfig() { # pkg-config module, Debian package
	pkg-config --exists "$1" 2>/dev/null || need="$need $2"
}
want_command() { # command, Debian package
	command -v "$1" >/dev/null 2>&1 || need="$need $2"
}
want_file() { # file, Debian package
	[ -e "$1" ] || need="$need $2"
}

want_command cc gcc
want_command make make
want_command pkg-config pkg-config
# The library itself: io_uring, and Concurrency Kit's spin primitives.
want_pkgconfig liburing liburing-dev
want_pkgconfig ck libck-dev
case "${1:-build}" in
build) ;;
test)
	want_pkgconfig criterion libcriterion-dev
	want_command spin spin
	want_command mandoc mandoc
	# The sanitizer runtimes gcc links for -fsanitize=address,undefined,thread.
	libdir=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
	want_file "/usr/lib/$libdir/libasan.so.8" libasan8
	want_file "/usr/lib/$libdir/libubsan.so.1" libubsan1
	want_file "/usr/lib/$libdir/libtsan.so.2" libtsan2
	;;
check)
	# make test's packages, the audio example's, and for its fuzzers clang
	# with libFuzzer and its sanitizer runtimes (libclang-rt-dev follows
	# the default clang).
	sh "$0" test || exit 1
	sh "$0" audio || exit 1
	if ! command -v clang >/dev/null 2>&1; then
		need="$need clang libclang-rt-dev"
	elif ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ return 0; }\n' |
		clang -fsanitize=fuzzer,address,undefined -x c - \
			-o /dev/null >/dev/null 2>&1; then
		need="$need libclang-rt-dev"
	fi
	;;
demo)
	# make demo (perf/handoff) and make tour (examples/ring_tour) need
	# only the library's own: liburing, and ck for ck_pr_stall().
	;;
audio)
	# The text-to-speech server example, its load generator and its test.
	want_pkgconfig espeak-ng libespeak-ng-dev
	want_pkgconfig soxr libsoxr-dev
	want_pkgconfig libcjson libcjson-dev
	want_file /usr/include/http_parser.h libhttp-parser-dev
	want_pkgconfig libsodium libsodium-dev
	want_command gnuplot gnuplot-nox
	want_command chromium chromium
	want_command curl curl
	want_command python3 python3
	;;
bench)
	# The throughput peers, the handoff mechanisms from other libraries
	# (boost's spsc_queue and moodycamel's queues are C++ headers: g++
	# builds their peers) and the plots.
	want_pkgconfig libdpdk libdpdk-dev
	want_pkgconfig liburcu liburcu-dev
	want_command g++ g++
	want_file /usr/include/boost/lockfree/spsc_queue.hpp libboost-dev
	want_file /usr/include/concurrentqueue/concurrentqueue.h \
		libconcurrentqueue-dev
	want_pkgconfig libuv libuv1-dev
	want_command gnuplot gnuplot-nox
	want_command python3 python3
	;;
*)
	echo "usage: $0 build|test|check|demo|bench|audio" >&2
	exit 2
	;;
esac

[ -z "$need" ] && exit 0
echo "deps: installing$need"
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo"
else
	echo "deps: need root or sudo to install:$need" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $need
