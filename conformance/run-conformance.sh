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
IBEMU_NODE=${IBEMU_NODE:-conformance-$$}
CF_RC_STRESS_MSGS=${CF_RC_STRESS_MSGS:-100000}
export IBEMU_NODE CF_RC_STRESS_MSGS
LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$prog" -d ibemu0 "$@"
rc=$?
shmdir=${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)
rm -f "$shmdir"/v*-"$IBEMU_NODE" "$shmdir"/v*-"$IBEMU_NODE"-p*
exit $rc
