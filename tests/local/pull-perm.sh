#!/bin/bash
# Large SENDs and RDMA WRITEs, both ways between a parent and its child,
# when only one of them may read the other's memory (tests/progs/pull_perm.c).
. "$(dirname "$0")/../lib/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/pull_perm"
case $? in
0) pass "pull-perm" ;;
77) exit 77 ;;
*) fail "pull-perm" ;;
esac
finish
