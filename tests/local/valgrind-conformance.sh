#!/bin/bash
# The conformance suite under valgrind with the preload: no errors, no leaks.
. "$(dirname "$0")/../lib/lib.sh"
need valgrind
# With the two-sided fast paths (doc/design.md §10) and with only the
# general ones (IBEMU_FAST=0).
for fast in 1 0; do
	out=$IBEMU_BUILDDIR/tests/local/valgrind-conformance-fast$fast.out
	IBEMU_FAST=$fast CF_RC_STRESS_MSGS=${CF_RC_STRESS_MSGS:-300} LD_PRELOAD=$IBEMU_LIB_PATH valgrind -q --leak-check=full \
		--show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect \
		--error-exitcode=42 \
		"$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 >"$out" 2>&1
	rc=$?
	tail -30 "$out"
	[ "$rc" = 0 ] && pass "valgrind, IBEMU_FAST=$fast: no errors, no leaks" ||
		fail "valgrind, IBEMU_FAST=$fast: exit $rc"
done
finish
