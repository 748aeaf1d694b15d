#!/bin/bash
# The memory model of one-sided operations (tests/progs/mr_window.c): regions
# on the heap, the stack, .bss and .data, registered twice, overlapping,
# deregistered; a child forked after registration, with and without
# RDMAV_FORK_SAFE.  Each placement in turn (lib.sh: both_placements).
. "$(dirname "$0")/../lib/lib.sh"
both_placements mr-window-regions timeout -k 5 120 \
	"$IBEMU_BUILDDIR/tests/progs/mr_window" regions
both_placements mr-window-fork timeout -k 5 120 \
	"$IBEMU_BUILDDIR/tests/progs/mr_window" fork
RDMAV_FORK_SAFE=1 both_placements mr-window-fork-safe timeout -k 5 120 \
	"$IBEMU_BUILDDIR/tests/progs/mr_window" fork
finish
