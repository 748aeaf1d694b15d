#!/bin/bash
# Two nodes in one network namespace (IBEMU_NODE x and y in node 1,
# tests/lib/netns-lib.sh) share its address and its LID; x holds the
# door, y cannot, and says so at warning level.  A client in node 2 of
# y's ibv_rc_pingpong server fails, and whoever sees the two port GUIDs
# says so in one line; x, which also runs a server (its QP has y's QP's
# number), gets no connection and no packet from node 2.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need ibv_rc_pingpong
need timeout
srv=$(netns_addr 1)
netns_setup 2 --own-shm
dir=$NETNS_DIR
pp=(env LD_PRELOAD="$IBEMU_LIB_PATH" timeout 20 ibv_rc_pingpong -d ibemu0
	-n 20)

netns_bg 1 env IBEMU_NODE=x "${pp[@]}" -p 18515 >"$dir/x.out" 2>&1
xpid=$NETNS_PID
netns_wait_listen 1 18515 10 "$xpid"
netns_bg 1 env IBEMU_NODE=y "${pp[@]}" -p 18516 >"$dir/y.out" 2>&1
ypid=$NETNS_PID
netns_wait_listen 1 18516 10 "$ypid"
netns_bg 2 env IBEMU_NODE=r "${pp[@]}" -p 18516 "$srv" >"$dir/r.out" 2>&1
rpid=$NETNS_PID
# x's connections while the client runs (a dead one is soon given back).
: >"$dir/x.status"
while kill -0 "$rpid" 2>/dev/null; do
	netns_exec 1 env IBEMU_NODE=x "$IBEMU" status >>"$dir/x.status" 2>&1
	sleep 0.1
done
wait "$rpid"
rc=$?
kill "$xpid" "$ypid" 2>/dev/null
wait "$xpid" "$ypid" 2>/dev/null

if grep -q "held by another node in this network namespace" "$dir/y.out"
then
	pass "y says it cannot hold the door"
else
	fail "y does not say it cannot hold the door"
	cat "$dir/y.out"
fi
n=$(cat "$dir/r.out" "$dir/y.out" | grep -c "two nodes at $srv have LID")
if [ "$rc" != 0 ] && [ "$n" -ge 1 ]; then
	pass "the client of y fails, and the two nodes are named ($n)"
else
	fail "the client of y: exit $rc, the two nodes named $n times"
	cat "$dir/r.out"
fi
if grep -q "10\.47\.0\.2" "$dir/x.status"; then
	fail "x has a connection from node 2"
	cat "$dir/x.status"
else
	pass "x has no connection from node 2"
fi
finish
