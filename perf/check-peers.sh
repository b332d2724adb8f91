#!/bin/sh
# SPDX-License-Identifier: MIT
#
# perf/check-peers.sh - builds build/perf/throughput (make, so a stale
# binary is rebuilt first) and checks that `throughput --help` lists as
# built exactly the peers whose pkg-config modules exist here: rte-spsc and
# rte-mpsc with libdpdk, urcu-wfcq with liburcu, and the rest always.
# Ends with "peers: N passed, N failed"; exit status 1 on any failure.
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

if ! make --no-print-directory -s B="$B" "$B/perf/throughput"; then
	fail "make $B/perf/throughput"
	echo "peers: $passed passed, $failed failed"
	exit 1
fi
help=$("$B/perf/throughput" --help) || fail "throughput --help exits 0"
rings=$(printf '%s\n' "$help" | sed -n 's/^  --ring NAME *//p')
if [ -z "$rings" ]; then
	fail "throughput --help lists the rings"
	echo "peers: $passed passed, $failed failed"
	exit 1
fi

# ring  pkg-config module it needs ("-": none)
while read -r ring module; do
	if [ "$module" = - ] || pkg-config --exists "$module" 2>/dev/null; then
		want=built
	else
		want="not built"
	fi
	entry=$(printf '%s\n' "$rings" | tr ',' '\n' | sed 's/^ *//' |
		grep -E "^$ring( |\$)")
	case $entry in
	"") got=missing ;;
	*"(not built)") got="not built" ;;
	*) got=built ;;
	esac
	if [ "$got" = "$want" ]; then
		if [ "$module" = - ]; then
			pass "$ring: $got"
		else
			pass "$ring: $got (pkg-config $module: $([ "$want" = built ] &&
				echo found || echo missing))"
		fi
	else
		fail "$ring: $got, but should be $want (pkg-config $module)"
	fi
done <<'LIST'
lull-spsc -
lull-mpsc -
ck-spsc -
ck-mpmc -
ck-mpsc -
rte-spsc libdpdk
rte-mpsc libdpdk
urcu-wfcq liburcu
pipe -
eventfd -
LIST

echo "peers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
