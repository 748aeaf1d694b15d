#!/bin/bash
# UD multicast on one node: fan-out to QPs of several processes, detach,
# the MLID-only group, limits and EBUSY (tests/progs/mcast_fanout.c).
. "$(dirname "$0")/../lib/lib.sh"
out=$(LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/mcast_fanout" 2>&1)
case $? in
0) pass "multicast fan-out: $out" ;;
77) exit 77 ;;
*) fail "multicast fan-out"; echo "$out" ;;
esac
finish
