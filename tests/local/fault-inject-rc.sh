#!/bin/bash
# RC under injected faults (IBEMU_FAULTS, ibemu(7); tests/progs/fault_inject.c):
# 2 QPs with 1% of the packets dropped, duplicated and reordered, every
# byte and every atomic result checked.  Smaller runs by hand:
#   FAULT_RC_MIB=256 tests/local/fault-inject-rc.sh
#
# Requester-placed RDMA (IBEMU_CMA, on by default) moves WRITE and READ
# data with no packet for the injector to lose, and pulls large SENDs
# (only their descriptor is a packet): the full-size RC run therefore
# uses IBEMU_CMA=0, where every byte travels as packets, and a smaller
# run checks the default mode under the same faults.
. "$(dirname "$0")/../lib/fault-lib.sh"
: "${FAULT_RC_MIB:=1024}"

IBEMU_CMA=0 IBEMU_FAULTS="$faults,seed=1" run "rc: $FAULT_RC_MIB MiB per QP, packets only" "$prog" rc "$FAULT_RC_MIB"
grep -h "IBEMU_FAULTS: process" "$tmp/out" | sed 's/^/    /'
IBEMU_FAULTS="$faults,seed=2" run "rc: 128 MiB per QP, requester-placed RDMA on" "$prog" rc 128
# The general paths alone (IBEMU_FAST=0, doc/design.md §10).
IBEMU_FAST=0 IBEMU_FAULTS="$faults,seed=3" run "rc: 128 MiB per QP, fast paths off" "$prog" rc 128
finish
