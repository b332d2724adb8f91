#!/bin/sh
# Model-check the park/wake handshake and shutdown (test/model/park.pml) with
# spin: the code's protocol must verify with no error, and each broken
# variant must fail in the way it is expected to, which shows the properties
# can fail.
# Ends with one "model: N passed, N failed" line; the exit status is
# non-zero when any check failed.  Run from the repository root; needs spin
# and a C compiler (scripts/deps.sh test installs them).
set -u
model=test/model/park.pml
out=build/model
CC=${CC:-cc}
passed=0
failed=0

if [ ! -f "$model" ]; then
	echo "check-model: run from the repository root ($model not found)" >&2
	exit 2
fi

# One verification.  $1 name, $2 "pass" or the text of the error spin must
# report, $3 what that error shows, the rest spin -D options that choose the
# variant.
check() {
	name=$1
	expect=$2
	shows=$3
	shift 3
	dir=$out/$name
	mkdir -p "$dir"
	cp "$model" "$dir/park.pml"
	if ! (cd "$dir" && spin -a "$@" park.pml >spin.log 2>&1); then
		result="spin -a failed, see $dir/spin.log"
	elif ! (cd "$dir" &&
		$CC -O2 -DSAFETY -DMEMLIM=1024 -o pan pan.c >cc.log 2>&1); then
		result="compiling pan failed, see $dir/cc.log"
	else
		# -m: a search depth that never truncates; -n: no unreached list.
		(cd "$dir" && ./pan -m1000000 -n >pan.log 2>&1)
		result=""
	fi
	log=$dir/pan.log
	if [ -n "$result" ]; then
		ok=0
	else
		errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$log")
		states=$(sed -n 's/^ *\([0-9][0-9.e+]*\) states, stored.*/\1/p' \
			"$log")
		secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\).*/\1/p' \
			"$log")
		result="${errors:-?} errors, ${states:-?} states, ${secs:-?} s"
		ok=1
		if [ -z "$errors" ] ||
			grep -q 'max search depth too small' "$log" ||
			grep -q -e 'out of memory' -e 'MEMLIM bound' "$log"; then
			ok=0
			result="$result: incomplete search, see $log"
		elif [ "$expect" = pass ]; then
			if [ "$errors" -eq 0 ]; then
				result="$result: $shows"
			else
				ok=0
				first=$(grep -m1 -e 'assertion violated' \
					-e 'invalid end state' "$log" |
					sed 's/^pan:[0-9]*: *//')
				result="$result: $first, see $dir/park.pml.trail"
			fi
		elif [ "$errors" -eq 0 ]; then
			ok=0
			result="$result: expected \"$expect\""
		elif grep -qF "$expect" "$log"; then
			result="$result: $shows, as expected"
		else
			ok=0
			result="$result: not \"$expect\", see $log"
		fi
	fi
	if [ "$ok" -eq 1 ]; then
		passed=$((passed + 1))
		printf 'ok    %-28s %s\n' "$name" "$result"
	else
		failed=$((failed + 1))
		printf 'FAIL  %-28s %s\n' "$name" "$result"
	fi
}

if ! command -v spin >/dev/null 2>&1; then
	echo "check-model: spin not found (scripts/deps.sh test installs it)" >&2
	echo "model: 0 passed, 1 failed"
	exit 1
fi
rm -rf "$out"

# The code as it is.  Properties 1 (no lost wake-up: an invalid end state)
# and 2 (one wake_claim per park: an assertion) without the safety net;
# property 3 (the safety net counts no lost wake-up) with it.
live='no lost wake-up, one wake_claim per park'
check futex-2x2 pass "$live"
check futex-3x1 pass "$live" -DNPROD=3 -DRECORDS=1
check futex-spsc-1x3 pass "$live" -DNPROD=1 -DRECORDS=3
check asym-2x2 pass "$live" -DASYM
check asym-3x1 pass "$live" -DASYM -DNPROD=3 -DRECORDS=1
net='safety net counts no lost wake-up'
check safety-net-2x2 pass "$net" -DTIMEOUT
check safety-net-3x1 pass "$net" -DTIMEOUT -DNPROD=3 -DRECORDS=1
check safety-net-asym-2x3 pass "$net" -DTIMEOUT -DASYM -DRECORDS=3

# Shutdown: properties 4 (the consumer ends, every write that returned 0
# delivered before the poison) and 5 (one poison, nothing after it), and 2
# with the shutdown's wake_claim.  MPSC: claims fail at the tail's bit.
# SPSC: the busy handshake, whose -EPIPE path must notify like any leave.
end='every successful write before the one poison'
check shutdown-mpsc-2x2 pass "$end" -DSHUTDOWN
check shutdown-mpsc-1x3 pass "$end" -DSHUTDOWN -DNPROD=1 -DRECORDS=3
check shutdown-mpsc-asym-2x2 pass "$end" -DSHUTDOWN -DASYM
spsc='-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3'
# shellcheck disable=SC2086
check shutdown-spsc-1x3 pass "$end" $spsc
# shellcheck disable=SC2086
check shutdown-spsc-asym-1x3 pass "$end" $spsc -DASYM

# Broken on purpose: each property must fail.
lost='lost wake-up: consumer asleep for good'
check no-producer-fence 'invalid end state' "$lost" -DNO_PRODUCER_FENCE
check no-consumer-fence 'invalid end state' "$lost" -DNO_CONSUMER_FENCE
counted='assertion violated  !(((timed_out&&cleared_self)&&readable))'
net='safety net counts a lost wake-up'
check no-producer-fence-net "$counted" "$net" -DTIMEOUT -DNO_PRODUCER_FENCE
check no-consumer-fence-net "$counted" "$net" -DTIMEOUT -DNO_CONSUMER_FENCE
check claim-not-cas 'assertion violated (claims<=1)' \
	'two wake_claim winners in one park' -DBROKEN_CLAIM
check old-counter "$counted" 'the old count counts a wake-up on its way' \
	-DTIMEOUT -DOLD_COUNT
check no-grace "$counted" 'no grace counts a wake-up on its way' \
	-DTIMEOUT -DNO_GRACE
check read-after-reset "$counted" \
	'readability after the reset counts a wake-up' -DTIMEOUT -DREAD_AFTER
# shellcheck disable=SC2086
check spsc-epipe-no-notify 'invalid end state' \
	'a consumer waiting for busy sleeps for good' $spsc -DEPIPE_NO_NOTIFY
late='a write that returned 0 lost or after the poison'
# shellcheck disable=SC2086
check spsc-no-busy-fence 'assertion violated got[i]' "$late" $spsc \
	-DNO_BUSY_FENCE
# shellcheck disable=SC2086
check spsc-no-busy 'assertion violated got[i]' "$late" $spsc \
	-DNO_BUSY
# shellcheck disable=SC2086
check spsc-asym-no-close-fence 'assertion violated got[i]' "$late" $spsc \
	-DASYM -DNO_CLOSE_BARRIER
check mpsc-state-first 'assertion violated got[i]' "$late" -DSHUTDOWN \
	-DSTATE_FIRST

# Behaviours of the code as it is that spin must find (see park.pml).
check wake-while-awake 'assertion violated parking' \
	'futex wake after the consumer went back to reading' -DREACH_WAKE_AWAKE
check stale-claim 'assertion violated ( !(won)' \
	'a claim lands in the next park' -DREACH_ABA

echo "model: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
