#!/bin/bash
# Large SENDs and RDMA WRITEs, both ways between a parent and its child,
# when only one of them may read the other's memory (tests/pull_perm.c).
. "$(dirname "$0")/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/pull_perm"
case $? in
0) pass "pull-perm" ;;
77) exit 77 ;;
*) fail "pull-perm" ;;
esac
finish
