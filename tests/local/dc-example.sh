#!/bin/bash
# The example of mlx5dv_wr_post(3) on one node (examples/dc_example.c): one
# DCI writes to and sends to the DCTs of two other processes in turn, in
# one batch, and each target checks what arrived byte for byte; with a key
# other than the targets', the first WRITE completes with
# IBV_WC_REM_ACCESS_ERR, the rest are flushed and nothing arrives.
. "$(dirname "$0")/../lib/lib.sh"
prog=$IBEMU_BUILDDIR/examples/dc_example
[ -x "$prog" ] || { echo "SKIP: built without libmlx5's mlx5dv.h"; exit 77; }
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((18600 + $$ % 200))

# run NAME KEY ROUNDS: two targets, then the initiator; all must exit 0.
run()
{
	local name=$1 key=$2 rounds=$3 t rc ok=1
	pids=()
	for t in 0 1; do
		LD_PRELOAD=$IBEMU_LIB_PATH timeout "$secs" "$prog" \
			-p $((port + t)) >"$dir/t$t.out" 2>&1 &
		pids+=($!)
	done
	LD_PRELOAD=$IBEMU_LIB_PATH timeout "$secs" "$prog" -k "$key" \
		-r "$rounds" localhost:$port localhost:$((port + 1)) \
		>"$dir/i.out" 2>&1
	rc=$?
	for t in 0 1; do
		wait "${pids[$t]}" || { ok=0; sed "s/^/  target $t: /" "$dir/t$t.out"; }
	done
	pids=()
	sed 's/^/  initiator: /' "$dir/i.out"
	[ "$rc" = 0 ] && [ "$ok" = 1 ] && pass "$name" || fail "$name (initiator exit $rc)"
	port=$((port + 2))
}
run "one DCI, two DCTs, 4 rounds of WRITE + SEND" 0x1ee7 4
grep -q "all data checked" "$dir/i.out" && pass "the initiator checked every completion" ||
	fail "the initiator did not report its checks"
run "one DCI, two DCTs, 16 rounds" 0x1ee7 16
run "a wrong DC key: REM_ACCESS_ERR, nothing arrives" 0x1ee8 4
grep -q "access error as expected" "$dir/i.out" && pass "the wrong key gave the access error" ||
	fail "the wrong key did not give the access error"
IBEMU_FAST=0 run "the same with IBEMU_FAST=0" 0x1ee7 4
finish
