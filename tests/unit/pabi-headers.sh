#!/bin/bash
# ibemu's layouts (provider/verbs/pabi/) against the headers and library
# of real builds of rdma-core: for each build, tests/unit/pabi_headers.c,
# compiled against its driver.h, finds every member of struct
# verbs_context_ops where ops.h puts it; and the row test_pabi --rows
# gives for the release has the build's member count, verbs_context size,
# an ibv_qp_ex size of its own, and the private and newest public version
# nodes the build's libibverbs defines.  A release no row has must define
# a pair of nodes no row has, or lack the row's private_since function.
#
#   tests/unit/pabi-headers.sh [BUILD...]
#
# BUILD: an rdma-core build directory (lib/, include/); by default every
# <release>/build under RDMA_CORE_CACHE (tests/matrix/rdma-core-lib.sh's
# cache).  Skipped when there is none.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${RDMA_CORE_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/rdma-core}"
need objdump
cc=${CC:-cc}
rows=$("$IBEMU_BUILDDIR/tests/unit/test_pabi" --rows) || { echo "no test_pabi"; exit 99; }
if [ $# = 0 ]; then
	for d in "$RDMA_CORE_CACHE"/*/build; do
		[ -e "$d/../READY" ] && set -- "$@" "$d"
	done
fi
[ $# -gt 0 ] || { echo "SKIP: no rdma-core build in $RDMA_CORE_CACHE"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; ibemu_cleanup' EXIT

for b in "$@"; do
	lib=$(readlink -f "$b/lib/libibverbs.so.1")
	# libibverbs.so.1.ABI.RELEASE.MINOR
	rel=$(basename "$lib" | awk -F. '{ print $5 }')
	nodes=$(objdump -p "$lib" | awk '/^Version definitions:/ { f = 1; next }
		/^Version References:/ { f = 0 } f && $4 ~ /^IBVERBS_/ { print $4 }')
	private=$(echo "$nodes" | grep '^IBVERBS_PRIVATE_')
	minor=$(echo "$nodes" | sed -n 's/^IBVERBS_1\.\([0-9]*\)$/\1/p' | sort -n | tail -1)
	$cc -std=gnu11 -DPABI_RELEASE="$rel" -I"$b/include" \
		-I"$IBEMU_SRCDIR/provider/verbs/pabi" \
		"$IBEMU_SRCDIR/tests/unit/pabi_headers.c" -o "$tmp/h$rel" 2>"$tmp/cc" ||
		{ fail "$rel: pabi_headers.c does not build: $(head -3 "$tmp/cc")"; continue; }
	got=$("$tmp/h$rel") || { fail "$rel: $got"; continue; }
	set -- $got
	ops=$2 words=$4 qpex=$6
	row=$(echo "$rows" | awk -v r="$rel" '$1 <= r && r <= $2')
	if [ -z "$row" ]; then
		match=$(echo "$rows" | awk -v p="$private" -v m="$minor" '$3 == p && $4 == m')
		since=$(echo "$match" | awk '{ print $8 }')
		if [ -z "$match" ]; then
			pass "$rel ($private, IBVERBS_1.$minor, $ops ops) is no row's"
		elif [ "$since" != - ] &&
			! objdump -T "$lib" | grep -q "($private) *$since\$"; then
			pass "$rel has $private and IBVERBS_1.$minor but not the row's $since"
		else
			fail "$rel: no row, yet its nodes and functions are a row's: $match"
		fi
		continue
	fi
	set -- $row
	[ "$3" = "$private" ] && [ "$4" = "$minor" ] && [ "$5" = "$ops" ] &&
		[ "$6" = "$words" ] && echo ",$7," | grep -q ",$qpex," &&
		pass "$rel: $private IBVERBS_1.$minor, $ops ops, $words words, ibv_qp_ex $qpex ops" ||
		fail "$rel: build has $private IBVERBS_1.$minor $ops ops $words words qp_ex $qpex; row: $row"
done
finish
