#!/bin/bash
# fork() after ibv_open_device (tests/fork_child.c).
. "$(dirname "$0")/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/fork_child" && pass "fork" || fail "fork"
finish
