#!/bin/bash
# Run the conformance suite on ibemu0 here and on the kernel's Soft-RoCE
# device rxe0 in the rxe VM (RXE_VM, default ../shared/rxe-vm beside the
# project: a Debian 12 guest under qemu, about ten minutes without KVM),
# with every report (TAP, JUnit, deviation report, capability matrix) of
# both, and compare the verdicts test by test (compare-verdicts.sh).
#
#   conformance/rxe-compare.sh [OUTDIR]          from the top of a build tree
#
# Environment: RXE_VM, RXE_EXPECT (the known deviations of rxe0 given to
# its run with -E; default conformance/expect/rxe-6.1.txt when it exists),
# ACCEL (tcg).  The guest builds the committed tree (git archive HEAD).
# Exit status: compare-verdicts.sh's, or that of a run that broke.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/rxe-compare.out}
vm=${RXE_VM:-$top/../shared/rxe-vm}
expect=${RXE_EXPECT:-conformance/expect/rxe-6.1.txt}
mkdir -p "$out"
[ -x "$vm/run.sh" ] || { echo "rxe-compare: no $vm/run.sh (RXE_VM)" >&2; exit 2; }
[ -x "$top/ibemu-conformance" ] || { echo "rxe-compare: build the tree first" >&2; exit 2; }

# ibemu0, on its node's own address for the RDMA CM suites.
IBEMU_NODE=rxe-compare-$$ "$top/ibemu" run -- "$top/ibemu-conformance" \
	-d ibemu0 -a 127.0.0.1 -E "$top/conformance/expect/ibemu.txt" \
	-T "$out/ibemu.tap" -J "$out/ibemu.xml" \
	-D "$out/ibemu.dev" -C "$out/ibemu.caps" >"$out/ibemu.txt" 2>&1
echo "ibemu0: exit $?, $(grep -E '^ +tests ' "$out/ibemu.txt")"

# rxe0, in the guest: $RXE_DEV, $RXE_GID (RoCE v2 GID) and $RXE_ADDR are
# the guest's (rxe-vm/README.md).
PROJECT_DIR=$top ACCEL=${ACCEL:-tcg} QUIET=1 "$vm/run.sh" -- sh -c '
	autoreconf -fi >/dev/null 2>&1 && ./configure >/dev/null &&
	make -j2 >/dev/null 2>&1 || { echo "guest build failed"; exit 99; }
	e=; [ -r "'"$expect"'" ] && e="-E '"$expect"'"
	./ibemu-conformance -d "$RXE_DEV" -i 1 -g "$RXE_GID" -a "$RXE_ADDR" $e \
		-T "$OUT/rxe.tap" -J "$OUT/rxe.xml" -D "$OUT/rxe.dev" \
		-C "$OUT/rxe.caps" >"$OUT/rxe.txt" 2>&1
	echo "rxe0: exit $?"' >"$out/vm.log" 2>&1
rc=$?
res=$(sed -n 's/^run.sh: results in //p' "$out/vm.log" | tail -n 1)
[ -n "$res" ] || res=$(ls -d "$vm"/results/latest 2>/dev/null)
for f in rxe.tap rxe.xml rxe.dev rxe.caps rxe.txt; do
	cp "$res/out/$f" "$out/" 2>/dev/null
done
grep -E "^rxe0: exit|guest build" "$out/vm.log"
[ -s "$out/rxe.tap" ] || { echo "rxe-compare: no verdicts from rxe0 (vm exit $rc, $out/vm.log)" >&2; exit 1; }
"$top/conformance/compare-verdicts.sh" ibemu0 "$out/ibemu.tap" rxe0 "$out/rxe.tap"
