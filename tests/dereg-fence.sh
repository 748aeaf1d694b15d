#!/bin/bash
# No RDMA WRITE lands after ibv_dereg_mr() or a move to ERR returns, with
# the requester placing the data itself and through packets
# (tests/dereg_fence.c).
. "$(dirname "$0")/lib.sh"
for cma in 1 0; do
	IBEMU_CMA=$cma LD_PRELOAD=$IBEMU_LIB_PATH \
		"$IBEMU_BUILDDIR/tests/dereg_fence"
	case $? in
	0) pass "dereg-fence IBEMU_CMA=$cma" ;;
	77) exit 77 ;;
	*) fail "dereg-fence IBEMU_CMA=$cma" ;;
	esac
done
finish
