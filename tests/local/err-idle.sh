#!/bin/bash
# A QP moved to ERR while blocked on a full peer inbox leaves the process
# idle (tests/progs/err_idle.c).
. "$(dirname "$0")/../lib/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/err_idle"
case $? in
0) pass "err-idle" ;;
77) exit 77 ;;
*) fail "err-idle" ;;
esac
finish
