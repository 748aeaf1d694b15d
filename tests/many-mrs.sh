#!/bin/bash
# RDMA into more regions than a process publishes for requesters that place
# data themselves: data intact, a deregistered region refused, with the
# requester placing the data itself and through packets (tests/many_mrs.c).
. "$(dirname "$0")/lib.sh"
need timeout
for cma in 1 0; do
	IBEMU_CMA=$cma LD_PRELOAD=$IBEMU_LIB_PATH \
		timeout -k 5 120 "$IBEMU_BUILDDIR/tests/many_mrs"
	case $? in
	0) pass "many-mrs IBEMU_CMA=$cma" ;;
	77) exit 77 ;;
	*) fail "many-mrs IBEMU_CMA=$cma" ;;
	esac
done
finish
