#!/bin/bash
# No RDMA WRITE lands after ibv_dereg_mr() or a move to ERR returns, with
# the requester placing the data itself and through packets
# (tests/dereg_fence.c).
. "$(dirname "$0")/lib.sh"
both_placements dereg-fence "$IBEMU_BUILDDIR/tests/dereg_fence"
finish
