#!/bin/bash
# UD multicast across nodes (emulator/transport/tcp/mcast_ip.c): three
# nodes, each a network namespace with its own /dev/shm, joined by a
# bridge.  Receivers in nodes 1 and 2, the sender and a receiver of its
# own node in node 3; the group's MGID and MLID come on the command line
# (node 2 attaches with another MLID: each node gives a group its own).
# Every receiver gets every datagram once, byte for byte
# (tests/progs/mcast_nodes.c); node 2's QP attached to another group gets
# none.  A group named by its MLID alone (no GRH) crosses too; rdma-core's
# mckey and the manual's multicast example (examples/mc_example.c) run with
# receivers in two nodes.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
netns_setup 3 --own-shm

prog=$IBEMU_BUILDDIR/tests/progs/mcast_nodes
dir=$NETNS_DIR
mgid=ff12:401b:ffff::a:1:2:3
other=ff12:401b:ffff::a:1:2:4
count=96

# run NODE LOG ARGS...: the program in NODE under the preload, bounded.
run() {
	local node=$1 log=$2
	shift 2
	netns_bg "$node" env LD_PRELOAD="$IBEMU_LIB_PATH" timeout 90 \
		"$prog" "$@" >"$dir/$log.log" 2>&1
}

skip=0
# verdicts NAME:PID...: wait for each, one verdict each.
verdicts() {
	local who name rc
	for who in "$@"; do
		name=${who%%:*}
		wait "${who#*:}"
		rc=$?
		case $rc in
		0) pass "$(tail -n 1 "$dir/$name.log")" ;;
		77) skip=1 ;;
		*) fail "$name exited $rc"; cat "$dir/$name.log" ;;
		esac
	done
}

run 1 r1 recv "$dir" r1 "$mgid" 0xc001 $count
p1=$NETNS_PID
run 2 r2 recv "$dir" r2 "$mgid" 0xc007 $count "$other"
p2=$NETNS_PID
run 3 r3 recv "$dir" r3 "$mgid" 0xc001 $count
p3=$NETNS_PID
run 3 s send "$dir" "$mgid" 0xc001 $count r1 r2 r3
verdicts r1:$p1 r2:$p2 r3:$p3 s:$NETNS_PID

# Without a GRH the MLID names the group: it leaves node 3 because a
# group of node 3 has that MLID (r3's), whose MGID picks the IP group.
rm -f "$dir"/*.ready "$dir"/*.got "$dir"/sender.qpn
run 1 n1 -n recv "$dir" n1 "$other" 0xc002 $count
p1=$NETNS_PID
run 3 n3 -n recv "$dir" n3 "$other" 0xc002 $count
p3=$NETNS_PID
run 3 ns -n send "$dir" - 0xc002 $count n1 n3
verdicts n1:$p1 n3:$p3 ns:$NETNS_PID

# Programs that join through the RDMA CM, unmodified: receivers in nodes
# 1 and 2, each bound to its node's address, then the sender in node 3
# once both say they joined; each node's stand-in for the SA picks the
# group's MLID.
# cm_run NAME JOINED-PATTERN JOINED-LINES PROGRAM ARGS...: receivers run
# PROGRAM ARGS -b ADDR -c 2 (two QPs), the sender PROGRAM ARGS -b ADDR -s
# -c 1; every process must exit 0.
cm_run() {
	local name=$1 pattern=$2 lines=$3 i k rc
	shift 3
	local -a mpid=()
	for i in 1 2; do
		netns_bg "$i" timeout 60 stdbuf -oL "$IBEMU" run -- "$@" \
			-b "$(netns_addr "$i")" -c 2 >"$dir/$name$i.log" 2>&1
		mpid[$i]=$NETNS_PID
	done
	for i in 1 2; do
		for k in $(seq 300); do
			[ "$(grep -c "$pattern" "$dir/$name$i.log")" = "$lines" ] &&
				break
			kill -0 "${mpid[$i]}" 2>/dev/null || break
			sleep 0.1
		done
	done
	netns_exec 3 timeout 60 "$IBEMU" run -- "$@" -b "$(netns_addr 3)" \
		-s -c 1 >"$dir/${name}3.log" 2>&1
	rc=$?
	for i in 1 2; do
		wait "${mpid[$i]}" || rc=1
	done
	if [ "$rc" = 0 ]; then
		pass "$name: receivers in nodes 1 and 2 got every message"
	else
		fail "$name across nodes"
		tail -n 6 "$dir/$name"[123].log
	fi
}

# rdma-core's mckey: 2 QPs per receiver, 20 messages on each.
if command -v mckey >/dev/null && command -v stdbuf >/dev/null; then
	cm_run mckey '^mckey: joined' 2 mckey -m 239.1.2.3 -C 20
	for i in 1 2; do
		grep -q '^return status 0' "$dir/mckey$i.log" ||
			fail "mckey receiver $i: no 'return status 0'"
	done
else
	echo "note: mckey or stdbuf is not installed"
fi
# The manual's multicast example: 2 QPs per receiver, 100 messages of
# 1000 bytes, every byte checked.
if command -v stdbuf >/dev/null; then
	cm_run mc_example '^joined' 1 "$IBEMU_BUILDDIR/examples/mc_example" \
		-m 239.1.3.1 -C 100 -S 1000
fi
finish
