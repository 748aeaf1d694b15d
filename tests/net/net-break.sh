#!/bin/bash
# An RC connection between two nodes (network namespaces with their own
# /dev/shm, tests/lib/netns-lib.sh) broken in the middle of a transfer, by
# tests/progs/net_break.c: the survivor in node 1, the peer in node 2.
#  (a) the peer process is killed (SIGKILL);
#  (b) node 2's link is taken down (its cable pulled at the bridge).
# Either way the survivor's RC QP must complete its outstanding SENDs, the
# first with IBV_WC_RETRY_EXC_ERR within timeout x (retry_cnt + 1), the
# rest with IBV_WC_WR_FLUSH_ERR, its receives flushed, nothing hanging;
# then (a) a new peer process, (b) the same peer once the link is back,
# connects new QPs and trades checked messages with the survivor.
#  (c) the peer closes right after its last receive (below).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need timeout
prog=$IBEMU_BUILDDIR/tests/progs/net_break
[ -x "$prog" ] || { echo "FAIL: $prog was not built"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
netns_setup 2 --own-shm
secs=${IBEMU_TEST_TIMEOUT:-60}
port=18600
run=(env "LD_PRELOAD=$IBEMU_LIB_PATH" "$prog")

# wait_line FILE RE PID SECS: until FILE has a line matching RE, while PID
# lives, SECS at most.
wait_line()
{
	local k
	for k in $(seq $(($4 * 10))); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# wait_pid PID SECS: its exit status, or 124 after SECS (then killed).
wait_pid()
{
	local k
	for k in $(seq $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && { kill -9 "$1"; wait "$1"; return 124; }
	wait "$1"
}

show()
{
	local f
	for f in "$dir"/*.out; do
		sed "s|^|    $(basename "$f" .out): |" "$f" | tail -n 8
	done
}

# start_pair MODE [VAR=VALUE...]: the survivor in node 1 in MODE, with
# those variables in its environment, then, once it listens, the peer in
# node 2; their PIDs in spid and ppid.  False when the survivor did not
# listen.
start_pair()
{
	local mode=$1
	shift
	port=$((port + 1))
	rm -f "$dir"/*.out
	netns_bg 1 env "$@" "${run[@]}" survivor "$port" "$mode" \
		>"$dir/survivor.out" 2>&1
	spid=$NETNS_PID
	netns_wait_listen 1 "$port" 20 "$spid" || return 1
	netns_bg 2 "${run[@]}" peer "$(netns_addr 1)" "$port" >"$dir/peer.out" 2>&1
	ppid=$NETNS_PID
}

# break_case NAME kill|link
break_case()
{
	local name=$1 mode=$2 spid ppid ppid2='' src prc=0 prc2=0
	if ! start_pair "$mode"; then
		fail "$name: the survivor did not listen"
		show
		return
	fi
	if wait_line "$dir/survivor.out" "^flowing" "$spid" "$secs"; then
		if [ "$mode" = kill ]; then
			kill -9 "$ppid"
			kill -USR1 "$spid"
			wait "$ppid" 2>/dev/null
			# A new peer for the survivor's new QP.
			netns_bg 2 "${run[@]}" peer "$(netns_addr 1)" "$port" \
				>"$dir/peer2.out" 2>&1
			ppid2=$NETNS_PID
		else
			netns_link 2 down
			kill -USR1 "$spid"
			wait_line "$dir/survivor.out" "^broken" "$spid" "$secs"
			netns_link 2 up
			kill -USR2 "$spid"
		fi
	fi
	wait_pid "$spid" "$secs"
	src=$?
	if [ "$mode" = kill ]; then
		if [ -n "$ppid2" ]; then
			wait_pid "$ppid2" "$secs"
			prc2=$?
		fi
	else
		wait_pid "$ppid" "$secs"
		prc=$?
		netns_link 2 up
	fi
	if [ "$src" = 0 ] && [ "$prc" = 0 ] && [ "$prc2" = 0 ] &&
	   grep -q "^broken: RETRY_EXC_ERR" "$dir/survivor.out" &&
	   grep -q "^reconnected" "$dir/survivor.out"; then
		pass "$name: $(grep '^broken' "$dir/survivor.out"); $(grep '^reconnected' "$dir/survivor.out")"
	else
		fail "$name: survivor exited $src, peer $prc, new peer $prc2 (124: timed out)"
		show
	fi
}

break_case "peer killed mid-transfer" kill
break_case "link down mid-transfer" link

# (c) The peer takes one message and closes its device at once: the ACK
# it owes leaves as it closes.  The survivor's next SENDs find the
# connection reset before it reads that ACK (its reads of the network
# held back 100 ms each, well within its retry budget of 4 x 67 ms);
# the first SEND must still succeed.
if start_pair close IBEMU_FAULTS=stall:netread:100000; then
	wait_pid "$ppid" "$secs"
	prc=$?
else
	prc=-
fi
wait_pid "$spid" "$secs"
src=$?
line=$(grep -m1 '^closed' "$dir/survivor.out")
if [ "$src$prc" = 00 ] && [ -n "$line" ]; then
	pass "peer closes after its last receive: $line"
else
	fail "peer closes after its last receive: survivor exited $src, peer $prc (124: timed out)"
	show
fi
finish
