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

# A page that is one .so request: print its target path under $MANDIR.
so_target() {
	local line
	[ "$(grep -cv '^[[:space:]]*$' "$1")" -eq 1 ] || return 1
	line=$(grep -v '^[[:space:]]*$' "$1")
	case $line in
	.so\ *) ;;
	*) return 1 ;;
	esac
	line=${line#.so }
	printf '%s/%s\n' "$MANDIR" "${line##*/}"
}

# The page that documents $1 (itself, or the target of its .so link).
resolve() {
	so_target "$1" || printf '%s\n' "$1"
}

# The names a page's NAME section lists, one per line.
page_names() {
	sed -n '/^\.SH NAME/,/^\.SH/p' "$1" | sed -n '2p' |
		sed 's/[[:space:]]*\\-.*//' | tr ',' '\n' | tr -d ' '
}

# 1. Every exported symbol has its page, and that page names it.
for sym in $symbols; do
	page=$MANDIR/$sym.3
	if [ ! -f "$page" ]; then
		fail "$page: missing (exported by $MAP)"
		continue
	fi
	doc=$(resolve "$page")
	if [ ! -f "$doc" ]; then
		fail "$page: links to $doc, which does not exist"
	elif page_names "$doc" | grep -qx "$sym"; then
		pass
	else
		fail "$page: $doc does not list $sym in its NAME section"
	fi
done

# 2. Every page lints clean; every link points to a real page.
for page in "$MANDIR"/*.[1-9]; do
	[ -e "$page" ] || continue
	if target=$(so_target "$page"); then
		if [ ! -f "$target" ]; then
			fail "$page: .so target $target does not exist"
		elif so_target "$target" >/dev/null; then
			fail "$page: .so target $target is itself a .so link"
		else
			pass
		fi
		continue
	fi
	out=$(mandoc -Tlint -Wwarning "$page" 2>&1)
	rc=$?
	if [ -n "$out" ]; then
		# mandoc prints one line per message, naming file and line.
		while IFS= read -r line; do
			fail "$line"
		done <<<"$out"
	elif [ $rc -ne 0 ]; then
		fail "$page: mandoc -Tlint -Wwarning exited $rc"
	else
		pass
	fi
done

# 3. No page documents a function that is not exported (a stale page).
for page in "$MANDIR"/*.3; do
	[ -e "$page" ] || continue
	name=$(basename "$page" .3)
	if printf '%s\n' "$symbols" | grep -qx "$name"; then
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
decls=$(printf '%s\n' "$decls" | tr '\n' ' ' | tr ';' '\n' |
	sed 's/$/;/' | normalise)
for sym in $symbols; do
	page=$MANDIR/$sym.3
	[ -f "$page" ] || continue # reported above
	doc=$(resolve "$page")
	[ -f "$doc" ] || continue # reported above
	decl=$(printf '%s\n' "$decls" | grep -E "^[^(]*[ *]$sym\(" | head -n 1)
	if [ -z "$decl" ]; then
		fail "$page: no declaration of $sym in include/"
		continue
	fi
	synopsis=$(mandoc -Tascii "$doc" 2>/dev/null | sed 's/.\x08//g' |
		sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' | tr '\n' ' ' | normalise)
	case $synopsis in
	*"$decl"*) pass ;;
	*) fail "$doc: SYNOPSIS does not show the header's $decl" ;;
	esac
done

finish
