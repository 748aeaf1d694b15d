#!/bin/bash
# Unmodified librdmacm programs across network namespaces, each node with
# its own /dev/shm and nothing configured (tests/netns-lib.sh): rping,
# udaddy and ucmatose with the server in node 1 and the client in node 2;
# connects nobody answers (no process in the other node; a port nobody
# listens on there: REJECTED), each ending by itself; then multicast:
# mckey and the manual's multicast example with receivers in nodes 1 and
# 2 and the sender in node 3.  Every process is bounded by a timeout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns-lib.sh"
need rping
need timeout
need stdbuf
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
netns_setup 3 --own-shm
secs=${IBEMU_TEST_TIMEOUT:-30}
a1=$(netns_addr 1)
a2=$(netns_addr 2)
a3=$(netns_addr 3)

show()
{
	sed 's/^/    server: /' "$dir/server.out" | tail -n 8
	sed 's/^/    client: /' "$dir/client.out" | tail -n 8
}

# cm_pair SERVER-ARGV... ::: CLIENT-ARGV...: server in node 1, client in
# node 2, both under ibemu, meeting through the RDMA CM.
cm_pair()
{
	local a
	local -a args=(1 "$IBEMU" run --)
	for a in "$@"; do
		args+=("$a")
		[ "$a" = ":::" ] && args+=(2 "$IBEMU" run --)
	done
	netns_pair "$dir" "$secs" - "${args[@]}"
}

# cm_verdict NAME SERVER-RE CLIENT-RE
cm_verdict()
{
	if [ "$NETNS_SERVER_RC" = 0 ] && [ "$NETNS_CLIENT_RC" = 0 ] &&
	   { [ -z "$2" ] || grep -q "$2" "$dir/server.out"; } &&
	   { [ -z "$3" ] || grep -q "$3" "$dir/client.out"; }; then
		pass "$1"
	else
		fail "$1: server $NETNS_SERVER_RC, client $NETNS_CLIENT_RC"
		show
	fi
}

# rping -v: ten pings, the same data on both sides.
cm_pair rping -s -a "$a1" -p 7501 -v -C 10 ::: rping -c -a "$a1" -p 7501 -v -C 10
n=$(LC_ALL=C grep -cE '^ping data: rdma-ping-[0-9]+: [A-z]{50}$' "$dir/client.out")
if [ "$NETNS_SERVER_RC" = 0 ] && [ "$NETNS_CLIENT_RC" = 0 ] && [ "$n" = 10 ] &&
   diff <(sed -n 's/^ping data: //p' "$dir/client.out") \
	<(sed -n 's/^server ping data: //p' "$dir/server.out") >/dev/null; then
	pass "rping $a2 -> $a1: 10 pings, data identical on both sides"
else
	fail "rping $a2 -> $a1: server $NETNS_SERVER_RC, client $NETNS_CLIENT_RC, $n pings"
	show
fi

# The server listening on any address.
cm_pair rping -s -a 0.0.0.0 -p 7502 -v -C 10 ::: rping -c -a "$a1" -p 7502 -v -C 10
cm_verdict "rping $a2 -> 0.0.0.0 in node 1" "" ""

if command -v udaddy >/dev/null; then
	cm_pair udaddy ::: udaddy -s "$a1"
	cm_verdict "udaddy $a2 -> $a1: UD ids, SIDR and datagrams" "" "return status 0"
else
	fail "udaddy is not installed"
fi

if command -v ucmatose >/dev/null; then
	cm_pair ucmatose -p 7505 -c 4 ::: ucmatose -p 7505 -c 4 -s "$a1"
	cm_verdict "ucmatose $a2 -> $a1: 4 connections, data and disconnect" \
		"disconnected" "test complete"
else
	fail "ucmatose is not installed"
fi

# No ibemu process runs in node 1: nothing answers at its address, and the
# connect ends by itself (UNREACHABLE, or REJECTED), not a hang.
netns_exec 2 timeout -k 5 30 "$IBEMU" run -- rping -c -a "$a1" -p 7598 -C 1 \
	>"$dir/client.out" 2>&1 </dev/null
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] &&
   grep -qE "RDMA_CM_EVENT_(UNREACHABLE|REJECTED)" "$dir/client.out"; then
	pass "rping to node 1 with no ibemu process there: $(grep -oE 'RDMA_CM_EVENT_(UNREACHABLE|REJECTED).*' "$dir/client.out" | head -n 1)"
else
	fail "rping to node 1 with no ibemu process there: exit $rc"
	sed 's/^/    client: /' "$dir/client.out" | tail -n 6
fi

# A listener on another port of node 1: its CM refuses the connect to a
# port nobody listens on (REJECTED, IBA 12.6.7.2 reason 8) at once.
netns_bg 1 timeout -k 5 "$secs" "$IBEMU" run -- rping -s -a "$a1" -p 7597 -C 1 \
	>"$dir/server.out" 2>&1 </dev/null
lpid=$NETNS_PID
netns_wait_listen 1 "${IBEMU_TCP_PORT:-4791}" 20 "$lpid"
netns_exec 2 timeout -k 5 30 "$IBEMU" run -- rping -c -a "$a1" -p 7598 -C 1 \
	>"$dir/client.out" 2>&1 </dev/null
rc=$?
if [ "$rc" != 124 ] && grep -q "RDMA_CM_EVENT_REJECTED" "$dir/client.out"; then
	pass "rping to a port nobody listens on in node 1: REJECTED"
else
	fail "rping to a port nobody listens on in node 1: exit $rc"
	sed 's/^/    client: /' "$dir/client.out" | tail -n 6
fi
kill "$lpid" 2>/dev/null
wait "$lpid" 2>/dev/null

# mc_group NAME JOINED-RE JOINS DONE-RE RECEIVER-ARGV... ::: SENDER-ARGV...:
# a receiver in node 1 and one in node 2 (an argument "BIND" is replaced
# by the node's address), then, once both printed JOINS lines matching
# JOINED-RE (their QPs attached, receives posted), the sender in node 3;
# every process must end 0 and print a line matching DONE-RE.
mc_group()
{
	local name=$1 joined=$2 joins=$3 done_re=$4 a seen=0 i k rc ok=1
	local -a rargs=() sargs=() pids=() args
	shift 4
	for a in "$@"; do
		if [ "$a" = ":::" ]; then
			seen=1
		elif [ $seen = 0 ]; then
			rargs+=("$a")
		else
			sargs+=("$a")
		fi
	done
	rm -f "$dir"/r*.out "$dir/s.out"
	for i in 1 2; do
		args=("${rargs[@]/#BIND/$(netns_addr $i)}")
		netns_bg "$i" timeout -k 5 "$secs" stdbuf -oL "$IBEMU" run -- \
			"${args[@]}" >"$dir/r$i.out" 2>&1 </dev/null
		pids[$i]=$NETNS_PID
	done
	for i in 1 2; do
		for k in $(seq $((secs * 10))); do
			[ "$(grep -cE "$joined" "$dir/r$i.out" 2>/dev/null)" -ge "$joins" ] &&
				break
			kill -0 "${pids[$i]}" 2>/dev/null || break
			sleep 0.1
		done
	done
	args=("${sargs[@]/#BIND/$a3}")
	netns_exec 3 timeout -k 5 "$secs" "$IBEMU" run -- "${args[@]}" \
		>"$dir/s.out" 2>&1 </dev/null
	rc=$?
	[ "$rc" = 0 ] && grep -qE "$done_re" "$dir/s.out" || ok=0
	for i in 1 2; do
		wait "${pids[$i]}"
		a=$?
		[ "$a" = 0 ] && grep -qE "$done_re" "$dir/r$i.out" || ok=0
	done
	if [ "$ok" = 1 ]; then
		pass "$name"
	else
		fail "$name: sender exit $rc"
		for f in "$dir"/r1.out "$dir"/r2.out "$dir"/s.out; do
			sed "s|^|    $(basename "$f" .out): |" "$f" | tail -n 8
		done
	fi
}

count=20
if command -v mckey >/dev/null; then
	# mckey waits for count messages on each of its QPs and checks them.
	mc_group "mckey 239.1.2.3: receivers in nodes 1 and 2 (2 QPs each), sender in node 3" \
		"^mckey: joined" 2 "^data transfers complete" \
		mckey -m 239.1.2.3 -b BIND -c 2 -C $count ::: \
		mckey -m 239.1.2.3 -b BIND -s -c 1 -C $count
	mc_group "mckey 239.1.2.4 without a bound address" \
		"^mckey: joined" 1 "^data transfers complete" \
		mckey -m 239.1.2.4 -c 1 -C $count ::: \
		mckey -m 239.1.2.4 -s -c 1 -C $count
else
	fail "mckey is not installed"
fi

mcx=$IBEMU_BUILDDIR/examples/mc_example
if [ -x "$mcx" ]; then
	mc_group "mc_example 239.1.2.5: receivers in nodes 1 and 2, sender in node 3, 200 messages" \
		"^joined" 1 "^sent 200 messages|^received 200 messages.*every byte checked" \
		"$mcx" -m 239.1.2.5 -b BIND -c 2 -C 200 -S 1000 ::: \
		"$mcx" -s -m 239.1.2.5 -b BIND -c 2 -C 200 -S 1000
else
	fail "$mcx was not built"
fi
finish
