#!/bin/bash
# No RDMA WRITE lands after ibv_dereg_mr() or a move to ERR returns, with
# the requester placing the data itself and through packets
# (tests/progs/dereg_fence.c).  Then again with every placement stalled 2 ms
# between its checks and its copy (IBEMU_FAULTS stall:place): without the
# placement fence (emulator/transport/shm/cma.c) such a copy lands after
# the call returned, and the test sees it.  Requesters announce their
# placements without a fence of their own where the kernel has the remote
# fence (emulator/transport/shm/remote_fence.h), and with one where it is
# turned off.
. "$(dirname "$0")/../lib/lib.sh"
both_placements dereg-fence "$IBEMU_BUILDDIR/tests/progs/dereg_fence"
IBEMU_FAULTS=stall:place:2000 both_placements dereg-fence-stalled \
	"$IBEMU_BUILDDIR/tests/progs/dereg_fence" 3
# The same with requesters that fence in full
# (emulator/transport/shm/remote_fence.h off): the protocol a process
# takes where the kernel has no remote fence.
IBEMU_REMOTE_FENCE=0 IBEMU_FAULTS=stall:place:2000 both_placements \
	dereg-fence-stalled-full-fences "$IBEMU_BUILDDIR/tests/progs/dereg_fence" 3
finish
