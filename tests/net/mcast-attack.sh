#!/bin/bash
# Multicast across nodes under attack (emulator/transport/tcp/mcast_ip.c,
# ibemu(7) SECURITY): a host of the subnet that is no ibemu node
# (tests/progs/mcast_spoof, node 2) sends UD datagrams laid out as
# ibemu's to a receiver's group, while a receiver in node 1 waits for a
# real sender's in node 3 (tests/progs/mcast_nodes, which fails on any
# datagram not the sender's, byte for byte).
#  - Without a fabric key: a datagram sent to the receiver's own address
#    (unicast, to the port its group socket is bound to) and one to the
#    group whose GRH names another node's IPv4 GID are both dropped.
#  - With a fabric key on nodes 1 and 3: the attacker's datagrams to the
#    group, without a MAC or with a MAC of no key, are dropped, and the
#    receiver says once why; the keyed sender's all arrive.
#  - The control: without a key, the attacker's datagram to the group
#    naming its own GID is taken (a host of the subnet may send to any
#    group, as on an InfiniBand subnet without partitions), so the
#    datagrams the cases above drop are ones ibemu would otherwise take.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need timeout
netns_setup 3 --own-shm

prog=$IBEMU_BUILDDIR/tests/progs/mcast_nodes
spoof=$IBEMU_BUILDDIR/tests/progs/mcast_spoof
dir=$NETNS_DIR
mgid=ff12:401b:ffff::a:1:2:5
mlid=0xc001
qkey=0x11111111
door=4791
count=32
key=0123456789abcdef-mcast-fabric

# run NODE LOG KEY ARGS...: mcast_nodes in NODE under the preload, with
# the fabric key KEY ("-": none), bounded.
run() {
	local node=$1 log=$2 k=$3
	local -a ke=()
	shift 3
	[ "$k" = - ] || ke=("IBEMU_FABRIC_KEY=$k")
	netns_bg "$node" env "${ke[@]}" LD_PRELOAD="$IBEMU_LIB_PATH" \
		timeout 90 "$prog" "$@" >"$dir/$log.log" 2>&1
}

# verdict NAME PID WHAT [taken]: pass when NAME exited 0; with taken,
# when it failed on a datagram not the sender's (one that came before
# the sender was there, or one of other bytes or another source QP).
verdict() {
	local rc
	wait "$2"
	rc=$?
	if [ "${4:-}" = taken ]; then
		if [ $rc = 1 ] && grep -Eq "sender's files are missing|src_qp 0xabcde|datagram [0-9]+ of [0-9]+ bytes" "$dir/$1.log"
		then
			pass "$3"
		else
			fail "$3: $1 exited $rc"
			tail -n 5 "$dir/$1.log"
		fi
		return
	fi
	case $rc in
	0) pass "$3" ;;
	77) netns_skip "no device: $(tail -n 1 "$dir/$1.log")" ;;
	*) fail "$3: $1 exited $rc"; tail -n 5 "$dir/$1.log" ;;
	esac
}

# attack NAME KEY EXPECT SPOOF-ARGS...: a receiver in node 1 attached to the
# group; once it is, the IP group it joined is read off node 1 (as any
# host of the subnet sees it in IGMP), and each SPOOF-ARGS (DEST SGID
# MODE, DEST "group" for the group's address) is sent from node 2;
# then the real sender in node 3 sends count datagrams.  EXPECT: clean
# (the receiver gets the sender's alone) or taken (the attacker's too).
attack() {
	local name=$1 k=$2 expect=$3 rpid group i dest
	shift 3
	rm -f "$dir"/*.ready "$dir"/*.got "$dir"/sender.*
	run 1 "$name-r" "$k" recv "$dir" r1 "$mgid" $mlid $count
	rpid=$NETNS_PID
	for i in $(seq 200); do
		[ -e "$dir/r1.ready" ] && break
		kill -0 "$rpid" 2>/dev/null || break
		sleep 0.05
	done
	group=$(netns_exec 1 ip -4 maddr show |
		awk '$2 ~ /^239\.255\./ { print $2; exit }')
	if [ -z "$group" ]; then
		fail "$name: node 1 joined no IP group"
		kill "$rpid" 2>/dev/null
		wait "$rpid"
		return
	fi
	while [ $# -ge 3 ]; do
		dest=$1
		[ "$dest" = group ] && dest=$group
		netns_exec 2 timeout 10 "$spoof" "$dest" $door "$mgid" $mlid \
			$qkey "$(netns_addr 2)" "$2" "$3" >>"$dir/$name-a.log" 2>&1 ||
			fail "$name: mcast_spoof $dest $2 $3 could not send"
		shift 3
	done
	sleep 0.3
	run 3 "$name-s" "$k" send "$dir" "$mgid" $mlid $count r1
	if [ "$expect" = taken ]; then
		wait "$NETNS_PID"
		verdict "$name-r" "$rpid" \
			"$name: the receiver took the attacker's datagram" taken
		return
	fi
	verdict "$name-s" "$NETNS_PID" "$name: the sender sent $count"
	verdict "$name-r" "$rpid" \
		"$name: the receiver got the sender's $count and nothing else"
}

attack control - taken group "$(netns_addr 2)" plain

attack nokey - clean \
	"$(netns_addr 1)" "$(netns_addr 2)" plain \
	group "$(netns_addr 3)" plain
cat "$dir/nokey-a.log"

attack keyed "$key" clean \
	group "$(netns_addr 2)" plain \
	group "$(netns_addr 2)" badmac
cat "$dir/keyed-a.log"
if grep -q "without this fabric key" "$dir/keyed-r.log"; then
	pass "keyed: the receiver said why it dropped a datagram"
else
	fail "keyed: the receiver did not say why"
	cat "$dir/keyed-r.log"
fi
finish
