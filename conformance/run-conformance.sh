#!/bin/sh
# Run the conformance suite against ibemu0 through the build tree's preload.
# make check exports IBEMU_BUILDDIR; by hand: IBEMU_BUILDDIR=$PWD sh $0
# Extra arguments go to ibemu-conformance (e.g. -s qp_state).
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
LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" exec "$prog" -d ibemu0 "$@"
