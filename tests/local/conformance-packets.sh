#!/bin/bash
# The RC, UC and UD suites with one-sided placement turned off
# (IBEMU_CMA=0): every WRITE, READ and atomic then crosses the inbox as
# packets and is executed by the target's responder, the path used where
# the kernel refuses cross-memory attach (doc/design.md §13
# "Requester-placed RDMA WRITE and READ").  Then the RC suites with
# registered memory left where it is (IBEMU_MAP=0): WRITE and READ by
# cross-memory attach, atomics as packets; and with requesters that fence
# every placement in full (IBEMU_REMOTE_FENCE=0, the protocol where the
# kernel has no remote fence: emulator/transport/shm/remote_fence.h).
. "$(dirname "$0")/../lib/lib.sh"
run_suite() { # NAME SETTING SUITE
	local out="$IBEMU_BUILDDIR/tests/local/conformance-packets-$1-$3.out"
	if env "$2" CF_RC_STRESS_MSGS=3000 \
		LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 -s "$3" \
		>"$out" 2>&1; then
		pass "suite $3 with $2: $(grep -E '^ +tests ' "$out")"
	else
		fail "suite $3 with $2:"
		grep -E "^ +[0-9]+\. |tests " "$out"
	fi
}
for suite in rc_ uc ud; do
	run_suite packets IBEMU_CMA=0 "$suite"
done
run_suite cma IBEMU_MAP=0 rc_
run_suite fence IBEMU_REMOTE_FENCE=0 rc_
finish
