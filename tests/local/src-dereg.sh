#!/bin/bash
# A SEND whose source region is deregistered before its data left ends
# in a local protection error, through packets and through the pull path
# (tests/progs/src_dereg.c).
. "$(dirname "$0")/../lib/lib.sh"
both_placements src-dereg "$IBEMU_BUILDDIR/tests/progs/src_dereg"
finish
