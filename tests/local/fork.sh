#!/bin/bash
# fork() after ibv_open_device (tests/progs/fork_child.c).
. "$(dirname "$0")/../lib/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/fork_child" && pass "fork" || fail "fork"
finish
