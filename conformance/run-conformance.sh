#!/bin/sh
# Run the conformance suite against ibemu0 through the build tree's preload.
# make check exports IBEMU_BUILDDIR; by hand: IBEMU_BUILDDIR=$PWD sh $0
# Extra arguments go to ibemu-conformance (e.g. -s qp_state).
# The stress test runs the 100000 messages per QP unless
# CF_RC_STRESS_MSGS says otherwise; the run has its own emulated node.
builddir=${IBEMU_BUILDDIR:-.}
lib="$builddir/.libs/libibemu.so"
prog="$builddir/ibemu-conformance"

if [ ! -x "$prog" ]; then
	echo "run-conformance: $prog is not built" >&2
	exit 99
fi
if [ ! -f "$lib" ]; then
	echo "run-conformance: $lib is not built" >&2
	exit 99
fi
# Tests of capabilities ibemu offers: a SKIP of one on ibemu0 is a failure
# (the capability went missing), though on a device without it the same
# test skips.
must_run='cm/|mcast/|odp/|odp_peer/|examples/|rc_ex/(cq_ex_stamps|cq_ex_ud_readers|wr_atomic_write|wr_atomic_write_err|parent_domain)|td/'
IBEMU_NODE=${IBEMU_NODE:-conformance-$$}
CF_RC_STRESS_MSGS=${CF_RC_STRESS_MSGS:-100000}
# ibemu gives a parent domain's allocators its queue buffers (ibemu(7)).
CF_EXPECT_PD_ALLOCATORS=1
export IBEMU_NODE CF_RC_STRESS_MSGS CF_EXPECT_PD_ALLOCATORS
out=$(mktemp)
# The RDMA CM suite on the node's loopback address (ibemu(7)).
# ibemu's known deviations: none (doc/conformance.md), so every failure
# fails the run; the list is given to keep it honest (LISTED BUT PASSED).
expect=${IBEMU_SRCDIR:-$(dirname "$0")/..}/conformance/expect/ibemu.txt
# The reports for CI systems, beside this script's log in the build tree:
# conformance/ibemu0.tap, .xml (JUnit), .caps (capability matrix) and
# .dev (deviation report); CF_REPORT_NAME names them otherwise.
rep=$builddir/conformance/${CF_REPORT_NAME:-ibemu0}
LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$prog" -d ibemu0 -a 127.0.0.1 \
	-E "$expect" -T "$rep.tap" -J "$rep.xml" -C "$rep.caps" -D "$rep.dev" \
	"$@" >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" = 0 ] && grep -Eq "^SKIP: ($must_run)" "$out"; then
	echo "run-conformance: ibemu0 offers these; skipping them is a failure:"
	grep -E "^SKIP: ($must_run)" "$out"
	rc=1
fi
# ibemu never crashes on invalid input, which the suite reports as a
# device's choice where the verbs leave the input undefined.
if [ "$rc" = 0 ] && grep -Eq "^CHOICE: .* crashes" "$out"; then
	echo "run-conformance: ibemu0 crashed on invalid input:"
	grep -E "^CHOICE: .* crashes" "$out"
	rc=1
fi
rm -f "$out"
# The node's directory (ibemu(1), dir).
shmdir=$("$builddir/ibemu" dir 2>/dev/null) ||
	shmdir=${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)
rm -f "$shmdir"/v*-"$IBEMU_NODE" "$shmdir"/v*-"$IBEMU_NODE"-p*
exit $rc
