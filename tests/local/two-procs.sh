#!/bin/bash
# Programs started at the same instant share one HCA: same node GUID and
# LID, distinct QPNs (doc/design.md §6 "The node segment").
. "$(dirname "$0")/../lib/lib.sh"
probe=$IBEMU_BUILDDIR/tests/progs/qpn_probe
dir=$(mktemp -d); trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
mkfifo "$dir/hold"
pids=""
for i in 1 2 3 4 5 6 7 8; do
	"$IBEMU" run -- "$probe" 8 <"$dir/hold" >"$dir/out.$i" 2>&1 &
	pids="$pids $!"
done
exec 3>"$dir/hold"   # releases all eight at once, holds them open
for t in $(seq 100); do
	[ "$(cat "$dir"/out.* 2>/dev/null | wc -l)" -ge 8 ] && break
	sleep 0.1
done
exec 3>&-
for p in $pids; do wait "$p" || fail "probe $p exited $?"; done
cat "$dir"/out.*
[ "$(cut -d' ' -f1 "$dir"/out.* | sort -u | wc -l)" = 1 ] && pass "one node GUID" || fail "GUIDs differ"
[ "$(cut -d' ' -f2 "$dir"/out.* | sort -u | wc -l)" = 1 ] && pass "one LID" || fail "LIDs differ"
total=$(cut -d' ' -f3- "$dir"/out.* | tr ' ' '\n' | grep -c .)
uniq=$(cut -d' ' -f3- "$dir"/out.* | tr ' ' '\n' | grep . | sort -u | wc -l)
[ "$total" = 64 ] && [ "$uniq" = 64 ] && pass "64 distinct QPNs" || fail "QPNs: $uniq distinct of $total"
finish
