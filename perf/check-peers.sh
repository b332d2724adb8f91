#!/bin/sh
# SPDX-License-Identifier: MIT
#
# perf/check-peers.sh - builds build/perf/throughput and build/perf/handoff
# (make, so a stale binary is rebuilt first) and checks that their --help
# lists as built exactly the peers whose packages are here: rte-spsc and
# rte-mpsc with pkg-config's libdpdk, urcu-wfcq with liburcu, uv-async
# with libuv; boost-spsc and boost-spsc-bulk where the C++ compiler finds
# boost.lockfree, moodycamel and moodycamel-blocking where it finds
# moodycamel's queue (perf/cxx-peers.probe, as the Makefile asks it); the
# rest always; and that a short run of lull's rings with either read of
# --lull-read delivers every message.  Ends with "peers: N passed, N
# failed"; exit status 1 on any failure.
#
# Usage: sh perf/check-peers.sh [B=build dir]   (from the repository root)

B=build
for arg in "$@"; do
	case $arg in
	B=*) B=${arg#B=} ;;
	*) echo "usage: $0 [B=dir]" >&2; exit 2 ;;
	esac
done

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "  ok    $1"; }
fail() { failed=$((failed + 1)); echo "  FAIL  $1"; }

if ! make --no-print-directory -s B="$B" "$B/perf/throughput" \
	"$B/perf/handoff"; then
	fail "make $B/perf/throughput $B/perf/handoff"
	echo "peers: $passed passed, $failed failed"
	exit 1
fi
help=$("$B/perf/throughput" --help) || fail "throughput --help exits 0"
rings=$(printf '%s\n' "$help" | sed -n 's/^  --ring NAME *//p')
# handoff's list runs over several lines, up to the one ending in ';'.
help=$("$B/perf/handoff" --help) || fail "handoff --help exits 0"
mechs=$(printf '%s\n' "$help" |
	sed -n '/^  --mechanism NAME/,/;$/p' | sed 's/.*(default)://')
if [ -z "$rings" ] || [ -z "$mechs" ]; then
	fail "throughput --help lists the rings, handoff --help the mechanisms"
	echo "peers: $passed passed, $failed failed"
	exit 1
fi

# The C++ headers the compiler finds, as the Makefile asks for them.
cxx_found=$(${CXX:-g++} -std=c++23 -E -P -x c++ perf/cxx-peers.probe \
	2>/dev/null)

# Whether @1 is here: "-" (nothing needed), "cxx:NAME" (a name the probe
# prints) or a pkg-config module.
have() {
	case $1 in
	-) return 0 ;;
	cxx:*) printf '%s\n' "$cxx_found" | grep -qx "${1#cxx:}" ;;
	*) pkg-config --exists "$1" 2>/dev/null ;;
	esac
}
how() {
	case $1 in
	cxx:*) echo "C++ header ${1#cxx:}" ;;
	*) echo "pkg-config $1" ;;
	esac
}

# program  peer  what it needs ("-": nothing)
while read -r prog peer need; do
	if have "$need"; then
		want=built
	else
		want="not built"
	fi
	if [ "$prog" = throughput ]; then
		list=$rings
	else
		list=$mechs
	fi
	entry=$(printf '%s\n' "$list" | tr ';' ',' | tr ',' '\n' |
		sed 's/^ *//' | grep -E "^$peer( |\$)")
	case $entry in
	"") got=missing ;;
	*"(not built)") got="not built" ;;
	*) got=built ;;
	esac
	if [ "$got" = "$want" ]; then
		if [ "$need" = - ]; then
			pass "$prog $peer: $got"
		else
			pass "$prog $peer: $got ($(how "$need"): $(
				[ "$want" = built ] && echo found ||
					echo missing))"
		fi
	else
		fail "$prog $peer: $got, but should be $want ($(how "$need"))"
	fi
done <<'LIST'
throughput lull-spsc -
throughput lull-mpsc -
throughput ck-spsc -
throughput ck-mpmc -
throughput ck-mpsc -
throughput rte-spsc libdpdk
throughput rte-mpsc libdpdk
throughput urcu-wfcq liburcu
throughput boost-spsc cxx:boost-lockfree
throughput boost-spsc-bulk cxx:boost-lockfree
throughput moodycamel cxx:concurrentqueue
throughput pipe -
throughput eventfd -
handoff moodycamel-blocking cxx:concurrentqueue
handoff uv-async libuv
handoff msg-ring -
handoff lull-blocking-memfd -
handoff lull-blocking-xproc -
handoff lull-uring-futex-xproc -
handoff lull-uring-eventfd-xproc -
handoff lull-epoll-xproc -
handoff futex-xproc-floor -
handoff unix-xproc -
handoff pipe-xproc -
LIST

# Both lull reads deliver every message, checked by throughput's own sum,
# records written one by one and in arrays (24 bytes: packed, copied out).
for how in records runs; do
	if "$B/perf/throughput" --ring lull-spsc --ring lull-mpsc \
		--ring lull-lanes --producers 1 --producers 2 --payload 8 \
		--payload 24 --producer-batch 32 --messages 100000 --runs 1 \
		--lull-read "$how" >/dev/null 2>&1; then
		pass "throughput --lull-read $how: every message arrived"
	else
		fail "throughput --lull-read $how: a run failed"
	fi
done

echo "peers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
