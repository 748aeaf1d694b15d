#!/bin/bash
# Seeded fault injection (IBEMU_FAULTS, ibemu(7)) under real traffic
# (tests/progs/fault_inject.c): UC and UD with their losses counted, every
# message checked; the same seed injecting the same faults again; a kill
# point; a malformed IBEMU_FAULTS refusing the device.  RC is
# tests/local/fault-inject-rc.sh.
. "$(dirname "$0")/../lib/fault-lib.sh"

IBEMU_FAULTS="$faults,delay:0.01:50,seed=3" run "uc: 4000 messages per QP" "$prog" uc 4000
grep "^received" "$tmp/out" | sed 's/^/    /'
IBEMU_FAULTS="$faults,delay:0.01:50,seed=4" run "ud: 4000 datagrams" "$prog" ud 4000
grep "^received" "$tmp/out" | sed 's/^/    /'

# Replay: decisions are a hash of the seed and the packet, so the same
# seed makes the same faults (fresh node: the same QPNs and PSNs).
for i in 1 2; do
	IBEMU_NODE=$IBEMU_NODE-replay$i IBEMU_FAULTS="drop:0.05,dup:0.05,reorder:0.05,seed=99" \
		run "ud replay, run $i" "$prog" ud 2000
	grep "^received" "$tmp/out" > "$tmp/replay$i"
	IBEMU_NODE=$IBEMU_NODE-replay$i ibemu_cleanup
done
if cmp -s "$tmp/replay1" "$tmp/replay2" && grep -q "^received" "$tmp/replay1"; then
	pass "the same seed injects the same faults: $(cat "$tmp/replay1")"
else
	fail "replay differs: '$(cat "$tmp/replay1")' vs '$(cat "$tmp/replay2")'"
fi

# The responder executes the atomics only when the requester does not
# place them itself (IBEMU_CMA=0; doc/design.md §13 "Requester-placed
# RDMA WRITE and READ").
IBEMU_CMA=0 run "kill:atomic:3 kills the responder, the requester gets RETRY_EXC_ERR" "$prog" kill

# A malformed IBEMU_FAULTS refuses the device, with the reason.
for bad in "drop:1.5" "dup" "kill:nowhere:1" "seed=x" "drop:0.1,bogus:1" \
	"stall:place:0" "stall:place"; do
	out=$(IBEMU_FAULTS=$bad LD_PRELOAD=$IBEMU_LIB_PATH ibv_devinfo 2>&1)
	if [ $? != 0 ] && echo "$out" | grep -q "IBEMU_FAULTS: bad item"; then
		pass "IBEMU_FAULTS=$bad refused"
	else
		fail "IBEMU_FAULTS=$bad: $out"
	fi
done
finish
