#!/bin/sh
# Model-check the park/wake handshake and shutdown (test/model/park.pml) with
# spin.  The code's protocol must verify: liveness without any timer (spin
# -a, acceptance cycles of the model's ltl claims, under weak fairness),
# assertions, and with the opt-in safety net its counting.  Each broken
# variant must fail with the named error it is expected to, which shows the
# properties can fail.
# Prints one line per check and ends with one "model: N passed, N failed"
# line; the exit status is non-zero when any check failed.  Checks run in
# parallel, MODEL_JOBS at a time (default: the number of CPUs).  Run from
# the repository root; needs spin and a C compiler (scripts/deps.sh test
# installs them).
#
# Usage: scripts/check-model.sh [test|check]
#   check (the default): every check below, a few minutes of CPU;
#   test: make test's profile, the checks marked "test": each property on
#     the small configurations, and for each kind of property one broken
#     variant at least (half a minute of CPU).  make check runs them all.
set -u
model=test/model/park.pml
out=build/model
CC=${CC:-cc}
profile=${1:-check}
case $profile in
test | check) ;;
*) echo "usage: $0 [test|check]" >&2; exit 2 ;;
esac

if [ ! -f "$model" ]; then
	echo "check-model: run from the repository root ($model not found)" >&2
	exit 2
fi
if ! command -v spin >/dev/null 2>&1; then
	echo "check-model: spin not found (scripts/deps.sh test installs it)" >&2
	echo "model: 0 passed, 1 failed"
	exit 1
fi
jobs=${MODEL_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
rm -rf "$out"
mkdir -p "$out"
list=$out/checks

# The checks, one a line: name|profile|properties|expected|what it
# shows|spin -D options that choose the variant.  Profile "test": make
# test runs it too; "check": only the full run.  A property is "safety" (assertions and
# invalid end states, no claim: pan built with -DSAFETY -DNOLTL) or the name
# of an ltl claim in park.pml, checked with pan -a -f -N name.  Expected is
# "pass", or the text of the error spin must report (for a claim,
# "acceptance cycle"), and the run must report it for that claim.  Liveness
# is checked in full on the configurations that fit the time; on the
# larger ones only "ends", which implies the other two (the consumer
# finishes only once it has read every record and is awake), or only the
# safety run where even that is too slow.  A name's PxR is P producers
# writing R records each.
cat >"$list" <<'EOF'
futex-2x2|test|consumed parks_end ends|pass||
futex-1x3|test|consumed parks_end ends|pass||-DNPROD=1 -DRECORDS=3
futex-3x1|check|ends|pass||-DNPROD=3 -DRECORDS=1
asym-2x2|test|consumed parks_end ends|pass||-DASYM
asym-3x1|check|ends|pass||-DASYM -DNPROD=3 -DRECORDS=1
adaptive-2x2|test|consumed parks_end ends|pass||-DASYM -DADAPTIVE
adaptive-3x1|check|ends|pass||-DASYM -DADAPTIVE -DNPROD=3 -DRECORDS=1
eventfd-adaptive-2x2|check|ends|pass||-DEVENTFD -DASYM -DADAPTIVE
safety-net-adaptive-2x2|check|safety|pass|safety net counts no lost wake-up|-DTIMEOUT -DASYM -DADAPTIVE
shutdown-mpsc-adaptive-2x1|check|ends|pass||-DSHUTDOWN -DASYM -DADAPTIVE -DRECORDS=1
shutdown-spsc-adaptive-1x3|test|consumed parks_end ends|pass||-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DASYM -DADAPTIVE
eventfd-2x2|test|consumed parks_end ends|pass||-DEVENTFD
eventfd-asym-2x2|check|ends|pass||-DEVENTFD -DASYM
exits-2x2|test|consumed|pass||-DEXITS
safety-net-2x2|test|safety|pass|safety net counts no lost wake-up|-DTIMEOUT
safety-net-3x1|check|safety|pass|safety net counts no lost wake-up|-DTIMEOUT -DNPROD=3 -DRECORDS=1
safety-net-asym-2x3|check|safety|pass|safety net counts no lost wake-up|-DTIMEOUT -DASYM -DRECORDS=3
shutdown-mpsc-2x1|check|parks_end ends|pass||-DSHUTDOWN -DRECORDS=1
shutdown-mpsc-2x2|check|safety|pass|every successful write before the one poison|-DSHUTDOWN
shutdown-mpsc-1x3|test|ends|pass||-DSHUTDOWN -DNPROD=1 -DRECORDS=3
shutdown-mpsc-asym-2x1|check|ends|pass||-DSHUTDOWN -DASYM -DRECORDS=1
shutdown-mpsc-asym-2x2|check|safety|pass|every successful write before the one poison|-DSHUTDOWN -DASYM
shutdown-eventfd-2x1|check|ends|pass||-DSHUTDOWN -DEVENTFD -DRECORDS=1
shutdown-spsc-1x3|test|consumed parks_end ends|pass||-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3
shutdown-spsc-asym-1x3|check|consumed parks_end ends|pass||-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DASYM
room-1x3|test|room_waits_end room_writes|pass||-DROOM -DRECORDS=3
room-asym-1x3|test|room_waits_end room_writes|pass||-DROOM -DRECORDS=3 -DASYM
no-producer-fence|test|consumed|acceptance cycle|lost wake-up: a committed record never read|-DNO_PRODUCER_FENCE
no-consumer-fence|test|parks_end|acceptance cycle|lost wake-up: a park never ends|-DNO_CONSUMER_FENCE
asym-one-sided-fence|check|consumed|acceptance cycle|a fence pairs with no compiler barrier: lost wake-up|-DASYM -DONE_SIDED_FENCE
no-recheck|test|parks_end|acceptance cycle|no re-check after the barrier: lost wake-up|-DNO_RECHECK
adaptive-no-switch-barrier|test|consumed|acceptance cycle|a park that asks for fences fences alone: lost wake-up|-DASYM -DADAPTIVE -DNO_SWITCH_BARRIER
adaptive-fence-ignored|check|consumed|acceptance cycle|fenced parks, unfenced producers: lost wake-up|-DASYM -DADAPTIVE -DPFENCE_IGNORED
eventfd-no-producer-fence|check|parks_end|acceptance cycle|lost wake-up on the eventfd sleep|-DEVENTFD -DNO_PRODUCER_FENCE
exit-midway|test|consumed|acceptance cycle|a thread ending between commit and wake loses it|-DEXITS -DEXIT_MIDWAY
claim-not-cas|test|safety|assertion violated (claims<=1)|two wake_claim winners in one park|-DBROKEN_CLAIM
shutdown-no-wake|test|ends|acceptance cycle|a shutdown that wakes nobody: parked for good|-DSHUTDOWN -DNO_SHUTDOWN_WAKE -DRECORDS=1
spsc-epipe-no-notify|check|ends|acceptance cycle|a consumer waiting for busy sleeps for good|-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DEPIPE_NO_NOTIFY
room-no-consumer-fence|test|room_writes|acceptance cycle|lost room wake-up: the producer waits for good|-DROOM -DRECORDS=3 -DNO_SPACE_FENCE
room-no-waiter-fence|test|room_waits_end|acceptance cycle|lost room wake-up: a wait for room never ends|-DROOM -DRECORDS=3 -DNO_WAITER_FENCE
room-asym-one-sided-fence|check|room_writes|acceptance cycle|the waiter's fence pairs with no compiler barrier|-DROOM -DRECORDS=3 -DASYM -DONE_SIDED_FENCE
no-producer-fence-net|test|safety|assertion violated  !(((timed_out&&cleared_self)&&readable))|safety net counts a lost wake-up|-DTIMEOUT -DNO_PRODUCER_FENCE
no-consumer-fence-net|check|safety|assertion violated  !(((timed_out&&cleared_self)&&readable))|safety net counts a lost wake-up|-DTIMEOUT -DNO_CONSUMER_FENCE
old-counter|check|safety|assertion violated  !(((timed_out&&cleared_self)&&readable))|the old count counts a wake-up on its way|-DTIMEOUT -DOLD_COUNT
no-grace|check|safety|assertion violated  !(((timed_out&&cleared_self)&&readable))|no grace counts a wake-up on its way|-DTIMEOUT -DNO_GRACE
read-after-reset|check|safety|assertion violated  !(((timed_out&&cleared_self)&&readable))|readability after the reset counts a wake-up|-DTIMEOUT -DREAD_AFTER
spsc-no-busy-fence|test|safety|assertion violated got[i]|a write that returned 0 lost or after the poison|-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DNO_BUSY_FENCE
spsc-no-busy|check|safety|assertion violated got[i]|a write that returned 0 lost or after the poison|-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DNO_BUSY
spsc-asym-no-close-fence|check|safety|assertion violated got[i]|a write that returned 0 lost or after the poison|-DSHUTDOWN -DSPSC -DNPROD=1 -DRECORDS=3 -DASYM -DNO_CLOSE_BARRIER
mpsc-state-first|check|safety|assertion violated got[i]|a write that returned 0 lost or after the poison|-DSHUTDOWN -DSTATE_FIRST
wake-while-awake|check|safety|assertion violated parking|futex wake after the consumer went back to reading|-DREACH_WAKE_AWAKE
stale-claim|check|safety|assertion violated ( !(won)|a claim lands in the next park|-DREACH_ABA
eventfd-other-process|check|consumed|acceptance cycle|a producer in another process cannot wake an eventfd park|-DEVENTFD -DFOREIGN
EOF

# What a passing property shows.
shows_for() {
	case $1 in
	consumed) echo 'every committed record is consumed' ;;
	parks_end) echo 'every park ends' ;;
	ends) echo 'the consumer reads everything and finishes' ;;
	room_waits_end) echo 'every wait for room ends' ;;
	room_writes) echo 'the producer waiting for room writes everything' ;;
	*) echo "$2" ;;
	esac
}

# Build pan for one check: $1 the check's directory, $2 "safety" or "live",
# $3 the C optimisation, the rest spin -D options.
build() {
	bdir=$1/$2
	kind=$2
	opt=$3
	shift 3
	mkdir -p "$bdir"
	cp "$model" "$bdir/park.pml"
	if [ "$kind" = safety ]; then
		set -- "$@" -DNOLTL
		cflags=-DSAFETY
	else
		# Weak fairness needs room for every process.
		cflags=-DNFAIR=3
	fi
	if ! (cd "$bdir" && spin -a "$@" park.pml >spin.log 2>&1); then
		echo "spin -a failed, see $bdir/spin.log"
	elif ! (cd "$bdir" && $CC "$opt" $cflags -DMEMLIM=2048 -o pan pan.c \
		>cc.log 2>&1); then
		echo "compiling pan failed, see $bdir/cc.log"
	fi
}

# Run one property of a check and print its line: $1 name, $2 directory,
# $3 property, $4 expected, $5 what it shows.
verify() {
	name=$1
	dir=$2
	prop=$3
	expect=$4
	shows=$5
	if [ "$prop" = safety ]; then
		bdir=$dir/safety
		log=$bdir/pan.log
		# -m: a search depth that never truncates; -n: no unreached list.
		(cd "$bdir" && ./pan -m100000 "$hash" -n >pan.log 2>&1)
	else
		bdir=$dir/live
		log=$bdir/$prop.log
		# -E: the claim decides (a deadlock stutters into it).
		(cd "$bdir" && ./pan -a -f -N "$prop" -E -m100000 "$hash" -n \
			>"$prop.log" 2>&1)
	fi
	errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$log")
	states=$(sed -n 's/^ *\([0-9][0-9.e+]*\) states, stored.*/\1/p' "$log")
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\).*/\1/p' "$log")
	result="${errors:-?} errors, ${states:-?} states, ${secs:-?} s"
	ok=1
	if [ -z "$errors" ] ||
		grep -q 'max search depth too small' "$log" ||
		grep -q -e 'out of memory' -e 'MEMLIM bound' \
			-e 'error: too many processes' "$log"; then
		ok=0
		result="$result: incomplete search, see $log"
	elif [ "$prop" != safety ] &&
		! grep -q "^pan: ltl formula $prop\$" "$log"; then
		ok=0
		result="$result: not the claim $prop, see $log"
	elif [ "$expect" = pass ]; then
		if [ "$errors" -eq 0 ]; then
			result="$result: $(shows_for "$prop" "$shows")"
		else
			ok=0
			first=$(grep -m1 -e 'assertion violated' \
				-e 'invalid end state' -e 'acceptance cycle' \
				"$log" | sed 's/^pan:[0-9]*: *//')
			result="$result: $first, see $bdir/park.pml.trail"
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
	if [ "$ok" -eq 1 ]; then
		printf 'ok    %-27s %-14s %s\n' "$name" "$prop" "$result"
	else
		printf 'FAIL  %-27s %-14s %s\n' "$name" "$prop" "$result"
	fi
}

# One check, every property of it; its lines go to $out/<name>/result.
run_check() {
	name=$1
	props=$2
	expect=$3
	shows=$4
	defs=$5
	dir=$out/$name
	mkdir -p "$dir"
	# Broken variants fail within a few hundred states: compile fast,
	# and a small hash table.
	opt=-O1
	hash=-w22
	if [ "$expect" != pass ]; then
		opt=-O0
		hash=-w18
	fi
	{
		for prop in $props; do
			[ "$prop" = safety ] && kind=safety || kind=live
			if [ ! -f "$dir/$kind.built" ]; then
				# shellcheck disable=SC2086
				err=$(build "$dir" "$kind" "$opt" $defs)
				: >"$dir/$kind.built"
				[ -n "$err" ] && echo "$err" >"$dir/$kind.error"
			fi
			if [ -f "$dir/$kind.error" ]; then
				printf 'FAIL  %-27s %-14s %s\n' "$name" "$prop" \
					"$(cat "$dir/$kind.error")"
			else
				verify "$name" "$dir" "$prop" "$expect" "$shows"
			fi
		done
	} >"$dir/result.tmp"
	mv "$dir/result.tmp" "$dir/result"
}

# A worker takes the next check nobody took (mkdir is atomic).
worker() {
	i=0
	while IFS='|' read -r name props expect shows defs; do
		i=$((i + 1))
		mkdir "$out/taken.$i" 2>/dev/null || continue
		run_check "$name" "$props" "$expect" "$shows" "$defs"
	done <"$run"
}

# The profile's checks, without the profile field.
run=$out/run
if [ "$profile" = check ]; then
	cut -d'|' -f1,3- "$list" >"$run"
else
	grep '^[^|]*|test|' "$list" | cut -d'|' -f1,3- >"$run"
fi

w=0
while [ "$w" -lt "$jobs" ]; do
	worker &
	w=$((w + 1))
done
wait

passed=0
failed=0
while IFS='|' read -r name props expect shows defs; do
	if [ -f "$out/$name/result" ]; then
		cat "$out/$name/result"
	else
		echo "FAIL  $name: no result"
	fi
done <"$run"
passed=$(cat "$out"/*/result 2>/dev/null | grep -c '^ok ')
failed=$(cat "$out"/*/result 2>/dev/null | grep -c '^FAIL ')
missing=0
while IFS='|' read -r name props expect shows defs; do
	[ -f "$out/$name/result" ] || missing=$((missing + 1))
done <"$run"
failed=$((failed + missing))
echo "model: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
