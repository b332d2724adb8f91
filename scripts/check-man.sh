#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check-man.sh - the man pages cover the exported ABI and are well formed.
#
#   1. every symbol in lib/lull.map has a page docs/man/<symbol>.3, which
#      names the symbol in its NAME section (directly, or through a .so
#      link to the page that documents it);
#   2. every page passes `mandoc -Tlint -Wwarning` with no message; a page
#      that is a single `.so manN/<page>.N` line is not linted but must
#      point to an existing page that is not itself a link;
#   3. no page documents a function that lib/lull.map does not export;
#   4. the SYNOPSIS of each symbol's page shows its prototype as the
#      public headers declare it (spacing aside).
#
# Prints one line per failure and ends with "man: N passed, N failed";
# exits 1 when anything failed.  Needs mandoc (Debian package mandoc) and
# a C compiler (cc) to read the headers' declarations.
#
# Usage: scripts/check-man.sh   (from anywhere in the repository)

set -u

cd "$(dirname "$0")/.." || exit 1

MAP=lib/lull.map
MANDIR=docs/man
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() {
	failed=$((failed + 1))
	printf '%s\n' "$*"
}

finish() {
	printf 'man: %d passed, %d failed\n' "$passed" "$failed"
	[ "$failed" -eq 0 ] && exit 0
	exit 1
}

if ! command -v mandoc >/dev/null 2>&1; then
	fail "mandoc not found: install the Debian package mandoc"
	finish
fi
if [ ! -r "$MAP" ]; then
	fail "$MAP: not readable"
	finish
fi

# The exported symbols: the names in the map's global: block.
symbols=$(sed -n '/global:/,/local:/p' "$MAP" |
	sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p')
if [ -z "$symbols" ]; then
	fail "$MAP: no exported symbols found"
	finish
fi

# Every page read once, into two tables (bash builtins: no process per
# page or per symbol, where the checks below used to start several).
#   so_of[page]     the target path under $MANDIR of a page that is one
#                   .so request (one line that is not blank); unset else
#   names_of[page]  the names its NAME section lists, one per line: the
#                   line after ".SH NAME", up to its "\-", split at commas
declare -A so_of names_of
read_page() {
	local page=$1 line only="" nonblank=0 i
	local -a lines
	mapfile -t lines <"$page"
	for line in "${lines[@]}"; do
		[[ $line =~ ^[[:space:]]*$ ]] && continue
		nonblank=$((nonblank + 1))
		only=$line
	done
	if [ "$nonblank" -eq 1 ] && [[ $only == ".so "* ]]; then
		line=${only#.so }
		so_of[$page]=$MANDIR/${line##*/}
	fi
	for ((i = 0; i < ${#lines[@]}; i++)); do
		[[ ${lines[i]} == .SH\ NAME* ]] || continue
		line=${lines[i + 1]-}
		line=${line%%\\-*}
		line=${line// /}
		names_of[$page]=${line//,/$'\n'}
		break
	done
}
for page in "$MANDIR"/*.[1-9]; do
	[ -e "$page" ] && read_page "$page"
done

# 1. Every exported symbol has its page, and that page names it.
for sym in $symbols; do
	page=$MANDIR/$sym.3
	if [ ! -f "$page" ]; then
		fail "$page: missing (exported by $MAP)"
		continue
	fi
	doc=${so_of[$page]-$page}
	if [ ! -f "$doc" ]; then
		fail "$page: links to $doc, which does not exist"
	elif [ -z "${names_of[$doc]+set}" ] && ! read_page "$doc"; then
		fail "$page: $doc cannot be read"
	elif [[ $'\n'${names_of[$doc]-}$'\n' == *$'\n'"$sym"$'\n'* ]]; then
		pass
	else
		fail "$page: $doc does not list $sym in its NAME section"
	fi
done

# 2. Every page lints clean; every link points to a real page.  One
# mandoc run lints them all; it names the page in each message.
lint=()
for page in "$MANDIR"/*.[1-9]; do
	[ -e "$page" ] || continue
	if [ -n "${so_of[$page]+set}" ]; then
		target=${so_of[$page]}
		if [ ! -f "$target" ]; then
			fail "$page: .so target $target does not exist"
		elif [ -n "${so_of[$target]+set}" ]; then
			fail "$page: .so target $target is itself a .so link"
		else
			pass
		fi
		continue
	fi
	lint+=("$page")
done
if [ ${#lint[@]} -gt 0 ]; then
	out=$(mandoc -Tlint -Wwarning "${lint[@]}" 2>&1)
	rc=$?
	for page in "${lint[@]}"; do
		if [[ $'\n'$out == *$'\n'"mandoc: $page:"* ]]; then
			# mandoc prints one line per message, naming file and line.
			while IFS= read -r line; do
				[[ $line == "mandoc: $page:"* ]] && fail "$line"
			done <<<"$out"
		else
			pass
		fi
	done
	# Messages that name no page, or a failure that printed none.
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		known=0
		for page in "${lint[@]}"; do
			[[ $line == "mandoc: $page:"* ]] && known=1 && break
		done
		[ "$known" -eq 1 ] || fail "$line"
	done <<<"$out"
	[ -z "$out" ] && [ "$rc" -ne 0 ] &&
		fail "mandoc -Tlint -Wwarning exited $rc"
fi

# 3. No page documents a function that is not exported (a stale page).
declare -A exported
for sym in $symbols; do
	exported[$sym]=1
done
for page in "$MANDIR"/*.3; do
	[ -e "$page" ] || continue
	name=${page##*/}
	name=${name%.3}
	if [ -n "${exported[$name]-}" ]; then
		pass
	else
		fail "$page: $name is not exported by $MAP"
	fi
done

# 4. The SYNOPSIS shows the prototype the headers declare.  The
# preprocessor drops the headers' comments; then one statement a line,
# and both sides with spacing normalised.
normalise() {
	sed -E 's/[[:space:]]+/ /g; s/ ?([][(),*;]) ?/\1/g; s/^ //; s/ $//'
}
if ! decls=$(${CC:-cc} -E -P -Iinclude include/lull.h 2>/dev/null); then
	fail "include/lull.h: ${CC:-cc} -E failed: cannot compare prototypes"
	finish
fi
mapfile -t decl_lines < <(printf '%s\n' "$decls" | tr '\n' ' ' |
	tr ';' '\n' | sed 's/$/;/' | normalise)

# Each documenting page's SYNOPSIS section as mandoc renders it, on one
# line "PAGE|SYNOPSIS", all normalised at once: a mandoc run per page and
# one sed in all.
declare -A synopsis_of
rendered=()
for sym in $symbols; do
	page=$MANDIR/$sym.3
	doc=${so_of[$page]-$page}
	if [ ! -f "$doc" ] || [ -n "${synopsis_of[$doc]+set}" ]; then
		continue
	fi
	synopsis_of[$doc]=""
	# What sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' prints, overstrikes gone.
	text=$(mandoc -Tascii "$doc" 2>/dev/null)
	text=${text//?$'\b'/}
	if [[ $text == *$'\n'SYNOPSIS* ]]; then
		text=SYNOPSIS${text#*$'\n'SYNOPSIS}
		[[ $text == *$'\n'DESCRIPTION* ]] &&
			text=${text%%$'\n'DESCRIPTION*}$'\n'DESCRIPTION
	else
		text=""
	fi
	rendered+=("$doc|${text//$'\n'/ }")
done
while IFS='|' read -r doc text; do
	synopsis_of[$doc]=$text
done < <(printf '%s\n' "${rendered[@]}" | normalise)

for sym in $symbols; do
	page=$MANDIR/$sym.3
	[ -f "$page" ] || continue # reported above
	doc=${so_of[$page]-$page}
	[ -f "$doc" ] || continue # reported above
	decl=""
	for line in "${decl_lines[@]}"; do
		if [[ $line =~ ^[^\(]*[\ *]$sym\( ]]; then
			decl=$line
			break
		fi
	done
	if [ -z "$decl" ]; then
		fail "$page: no declaration of $sym in include/"
		continue
	fi
	case ${synopsis_of[$doc]} in
	*"$decl"*) pass ;;
	*) fail "$doc: SYNOPSIS does not show the header's $decl" ;;
	esac
done

finish
