#!/bin/bash
# A peer SIGKILLed or SIGSTOPped at random moments of RC traffic (100 times
# each) never wedges nor crashes the survivor, with 64 KiB messages as
# packets (IBEMU_CMA=0) and placed or pulled by cross-memory attach (the
# default), both at once, each on a node of its own (tests/progs/peer_kill.c).
. "$(dirname "$0")/../lib/lib.sh"
node=$IBEMU_NODE
trap 'for c in 0 default; do IBEMU_NODE=$node-$c ibemu_cleanup; done' EXIT
pids=()
for cma in 0 default; do
	(
		export IBEMU_NODE=$node-$cma
		if [ $cma = default ]; then unset IBEMU_CMA; else export IBEMU_CMA=$cma; fi
		LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/peer_kill" 100 100
	) &
	pids+=($!)
done
i=0
for cma in 0 default; do
	wait "${pids[$i]}"
	case $? in
	0) pass "peer-kill IBEMU_CMA=$cma" ;;
	77) exit 77 ;;
	*) fail "peer-kill IBEMU_CMA=$cma" ;;
	esac
	i=$((i + 1))
done
finish
