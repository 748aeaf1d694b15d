#!/bin/bash
# The RC, UC and UD suites with requester-placed RDMA turned off
# (IBEMU_CMA=0): every WRITE and READ then crosses the inbox as packets and
# is executed by the target's responder, the path used where the kernel
# refuses cross-memory attach (doc/design.md §13).
. "$(dirname "$0")/lib.sh"
for suite in rc_ uc ud; do
	if IBEMU_CMA=0 CF_RC_STRESS_MSGS=3000 \
		LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 -s "$suite" \
		>"$IBEMU_BUILDDIR/tests/conformance-packets-$suite.out" 2>&1; then
		pass "suite $suite over packets: $(grep -E '^ +tests ' "$IBEMU_BUILDDIR/tests/conformance-packets-$suite.out")"
	else
		fail "suite $suite over packets:"
		grep -E "^ +[0-9]+\. |tests " "$IBEMU_BUILDDIR/tests/conformance-packets-$suite.out"
	fi
done
finish
