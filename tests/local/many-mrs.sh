#!/bin/bash
# RDMA into more regions than a process publishes for requesters that place
# data themselves: data intact, a deregistered region refused, with the
# requester placing the data itself and through packets (tests/progs/many_mrs.c).
. "$(dirname "$0")/../lib/lib.sh"
need timeout
both_placements many-mrs timeout -k 5 120 "$IBEMU_BUILDDIR/tests/progs/many_mrs"
finish
