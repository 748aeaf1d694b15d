#!/bin/bash
# The conformance suite under valgrind with the preload: no errors, no leaks.
. "$(dirname "$0")/../lib/lib.sh"
need valgrind
CF_RC_STRESS_MSGS=${CF_RC_STRESS_MSGS:-300} LD_PRELOAD=$IBEMU_LIB_PATH valgrind -q --leak-check=full \
	--show-leak-kinds=definite,indirect \
	--errors-for-leak-kinds=definite,indirect \
	--error-exitcode=42 \
	"$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 >"$IBEMU_BUILDDIR/tests/local/valgrind-conformance.out" 2>&1
rc=$?
tail -30 "$IBEMU_BUILDDIR/tests/local/valgrind-conformance.out"
[ "$rc" = 0 ] && pass "valgrind: no errors, no leaks" || fail "valgrind exit $rc"
finish
