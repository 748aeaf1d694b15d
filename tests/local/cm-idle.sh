#!/bin/bash
# An idle RDMA CM connection costs no wake-ups, and a peer's death is
# still seen at once (tests/progs/cm_idle.c).
. "$(dirname "$0")/../lib/lib.sh"
out=$(LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/cm_idle" 2>&1)
case $? in
0) pass "cm-idle: $(echo "$out" | tr '\n' ' ')" ;;
77) echo "$out"; exit 77 ;;
*) fail "cm-idle"; echo "$out" ;;
esac
finish
