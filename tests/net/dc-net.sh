#!/bin/bash
# The example of mlx5dv_wr_post(3) across nodes (examples/dc_example.c):
# one DCI in node 2 writes to and sends to a DCT in node 1 and a DCT of
# another process in its own node, in turn, in one batch; each target
# checks what arrived byte for byte.  Then a wrong DC key across nodes:
# IBV_WC_REM_ACCESS_ERR and nothing arrives.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
prog=$IBEMU_BUILDDIR/examples/dc_example
[ -x "$prog" ] || { echo "SKIP: built without libmlx5's mlx5dv.h"; exit 77; }
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
secs=${IBEMU_TEST_TIMEOUT:-30}
port=18620

run()
{
	local name=$1 key=$2 rc ok=1 p1 p2
	netns_bg 1 env LD_PRELOAD=$IBEMU_LIB_PATH timeout "$secs" "$prog" -p $port
	p1=$NETNS_PID
	netns_bg 2 env LD_PRELOAD=$IBEMU_LIB_PATH timeout "$secs" "$prog" -p $((port + 1))
	p2=$NETNS_PID
	netns_wait_listen 1 $port 10 "$p1"
	netns_wait_listen 2 $((port + 1)) 10 "$p2"
	netns_exec 2 env LD_PRELOAD=$IBEMU_LIB_PATH timeout "$secs" "$prog" \
		-k "$key" "$(netns_addr 1):$port" "127.0.0.1:$((port + 1))" \
		>"$dir/i.out" 2>&1
	rc=$?
	wait "$p1" || ok=0
	wait "$p2" || ok=0
	sed 's/^/  initiator: /' "$dir/i.out"
	[ "$rc" = 0 ] && [ "$ok" = 1 ] && pass "$name" || fail "$name (initiator exit $rc)"
	port=$((port + 2))
}
run "one DCI in node 2, DCTs in nodes 1 and 2" 0x1ee7
grep -q "all data checked" "$dir/i.out" && pass "every completion and byte checked" ||
	fail "the initiator did not report its checks"
run "a wrong DC key across nodes" 0x1ee8
grep -q "access error as expected" "$dir/i.out" && pass "REM_ACCESS_ERR across nodes" ||
	fail "no access error across nodes"
finish
