#!/bin/bash
# Memory windows on ibemu0: the device says it has type 1 and type 2B
# windows (IBV_DEVICE_MEM_WINDOW, _TYPE_2B), so the conformance suite's mw
# tests must all run, none skipped, and pass.  Window R_Keys are never
# published for requester-placed RDMA (emulator/hca/mw.c): the suite runs with
# placement on and off alike.
. "$(dirname "$0")/../lib/lib.sh"
out="$IBEMU_BUILDDIR/tests/local/mw.out"
for cma in 1 0; do
	if IBEMU_CMA=$cma LD_PRELOAD=$IBEMU_LIB_PATH \
		"$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 -s mw \
		>"$out" 2>&1 &&
		grep -q '^Skipped: 0 ' "$out" &&
		grep -Eq '^ +tests +[0-9]+ +[0-9]+ +[0-9]+ +0 ' "$out"; then
		pass "mw suite, IBEMU_CMA=$cma: $(grep -E '^ +tests ' "$out")"
	else
		fail "mw suite, IBEMU_CMA=$cma:"
		grep -E "SKIP|^ +[0-9]+\. |tests |Skipped" "$out"
	fi
done
finish
