#!/bin/bash
# A SEND whose source region is deregistered before its data left ends
# in a local protection error, through packets and through the pull path
# (tests/src_dereg.c).
. "$(dirname "$0")/lib.sh"
for cma in 1 0; do
	IBEMU_CMA=$cma LD_PRELOAD=$IBEMU_LIB_PATH \
		"$IBEMU_BUILDDIR/tests/src_dereg"
	case $? in
	0) pass "src-dereg IBEMU_CMA=$cma" ;;
	77) exit 77 ;;
	*) fail "src-dereg IBEMU_CMA=$cma" ;;
	esac
done
finish
