#!/bin/bash
# A peer SIGKILLed or SIGSTOPped at random moments of RC traffic (100 times
# each) never wedges nor crashes the survivor, with 64 KiB messages as
# packets (IBEMU_CMA=0) and placed or pulled by cross-memory attach
# (tests/peer_kill.c).
. "$(dirname "$0")/lib.sh"
for cma in 0 default; do
	if [ $cma = default ]; then unset IBEMU_CMA; else export IBEMU_CMA=$cma; fi
	LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/peer_kill" 100 100
	case $? in
	0) pass "peer-kill IBEMU_CMA=$cma" ;;
	77) exit 77 ;;
	*) fail "peer-kill IBEMU_CMA=$cma" ;;
	esac
done
finish
