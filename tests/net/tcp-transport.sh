#!/bin/bash
# The TCP transport itself (doc/design.md §22 "Several nodes: the TCP
# transport"): on one node with IBEMU_TRANSPORT=tcp, across two nodes after
# the door's holder died (another process takes the door over), and with
# garbage sent to the door and to a process's own port (the node stays up
# and serves).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need ibv_rc_pingpong
need ibv_ud_pingpong
netns_setup 2 --own-shm
log=$NETNS_DIR

# The node's door port and a process's own port, as `ibemu status` and ss
# show them.
door_port=4791

# 1. One node, every packet over TCP: the exchange works and `ibemu
# status` shows the connection with its traffic.
run_pair_tcp()
{
	local prog=$1 port=$2
	netns_bg 1 env IBEMU_TRANSPORT=tcp timeout 20 "$IBEMU" run -- $prog -p "$port" -n 200
	local spid=$NETNS_PID
	netns_wait_listen 1 "$port" 10 "$spid"
	netns_exec 1 env IBEMU_TRANSPORT=tcp timeout 20 "$IBEMU" run -- $prog -p "$port" -n 200 127.0.0.1 >"$log/c.$port" 2>&1
	local c=$?
	wait "$spid"
	local s=$?
	[ "$c" = 0 ] && [ "$s" = 0 ]
}
run_pair_tcp ibv_rc_pingpong 18711 && pass "rc_pingpong on one node over TCP" || fail "rc_pingpong over TCP: $(tail -3 "$log/c.18711")"
run_pair_tcp ibv_ud_pingpong 18712 && pass "ud_pingpong on one node over TCP" || fail "ud_pingpong over TCP: $(tail -3 "$log/c.18712")"

# The status of a node while a TCP connection carries traffic.
netns_bg 1 env IBEMU_TRANSPORT=tcp timeout 30 "$IBEMU" run -- ibv_rc_pingpong -p 18713 -n 200000
spid=$NETNS_PID
netns_wait_listen 1 18713 10 "$spid"
netns_bg 1 env IBEMU_TRANSPORT=tcp timeout 30 "$IBEMU" run -- ibv_rc_pingpong -p 18713 -n 200000 127.0.0.1
cpid=$NETNS_PID
st=
for i in $(seq 50); do
	st=$(netns_exec 1 "$IBEMU" status 2>&1)
	echo "$st" | grep -q "tcp pid .* up: tx [1-9]" && break
	sleep 0.2
done
echo "$st" | grep -q "tcp pid .* up: tx [1-9][0-9]* pkts" && pass "ibemu status shows the TCP connection and its traffic" || fail "status: $st"
kill "$cpid" "$spid" 2>/dev/null
wait "$cpid" "$spid" 2>/dev/null

# 2. Garbage to the door and to a process's own port: the node goes on.
netns_bg 1 timeout 30 "$IBEMU" run -- ibv_rc_pingpong -p 18714 -n 500
spid=$NETNS_PID
netns_wait_listen 1 18714 10 "$spid"
netns_wait_listen 1 "$door_port" 10 "$spid"
own=$(netns_exec 1 ss -Htlnp 2>/dev/null | grep "pid=$spid\b\|ibv_rc_pingpong" | awk '{print $4}' | sed 's/.*://' | grep -v "^18714$\|^$door_port$" | head -1)
netns_exec 2 bash -c "
	head -c 100000 /dev/urandom > /dev/tcp/10.47.0.1/$door_port
	printf 'ibmf\001\001\000\000\377\377\377\377' > /dev/tcp/10.47.0.1/$door_port
	[ -n '$own' ] && head -c 100000 /dev/urandom > /dev/tcp/10.47.0.1/$own
	[ -n '$own' ] && printf 'ibmf\001\001\000\000\000\000\020\000' > /dev/tcp/10.47.0.1/$own
	true" 2>/dev/null
[ -n "$own" ] && pass "found the server's own port ($own)" || fail "no own port of the server in: $(netns_exec 1 ss -Htlnp)"
netns_exec 2 timeout 20 "$IBEMU" run -- ibv_rc_pingpong -p 18714 -n 500 10.47.0.1 >"$log/c.g" 2>&1
c=$?
wait "$spid"
s=$?
[ "$c" = 0 ] && [ "$s" = 0 ] && pass "the node serves after garbage at its door and its port" || fail "after garbage: client $c server $s: $(tail -3 "$log/c.g")"

# 3. The door's holder exits: another process of the node takes the door
# over, and a node that looks up its QPs still finds them.
netns_bg 1 timeout 40 "$IBEMU" run -- ibv_rc_pingpong -p 18715 -n 10
holder=$NETNS_PID
netns_wait_listen 1 18715 10 "$holder"
netns_bg 1 timeout 40 "$IBEMU" run -- ibv_rc_pingpong -p 18716 -n 500
spid=$NETNS_PID
netns_wait_listen 1 18716 10 "$spid"
netns_exec 1 "$IBEMU" status | grep "door holder" >"$log/door.before"
kill "$holder"
wait "$holder" 2>/dev/null
for i in $(seq 50); do
	netns_listening 1 "$door_port" && break
	sleep 0.1
done
netns_exec 1 "$IBEMU" status | grep "door holder" >"$log/door.after"
netns_exec 2 timeout 20 "$IBEMU" run -- ibv_rc_pingpong -p 18716 -n 500 10.47.0.1 >"$log/c.d" 2>&1
c=$?
wait "$spid"
s=$?
cat "$log/door.before" "$log/door.after"
[ "$(cat "$log/door.before")" != "$(cat "$log/door.after")" ] && pass "the door changed hands" || fail "door holder unchanged"
[ "$c" = 0 ] && [ "$s" = 0 ] && pass "the node is reached after its door holder exited" || fail "after takeover: client $c server $s: $(tail -3 "$log/c.d")"

# 4. A LID collision is reported: node 1 takes LID 2 from a fabric file,
# which node 2 derives from its address.
netns_bg 2 timeout 20 "$IBEMU" run -- ibv_rc_pingpong -p 18717 -n 10
other=$NETNS_PID
netns_wait_listen 2 "$door_port" 10 "$other"
echo "2 10.47.0.1" >"$log/fabric"
netns_bg 1 env IBEMU_NODE="$IBEMU_NODE-clash" IBEMU_FABRIC="$log/fabric" timeout 3 "$IBEMU" run -- ibv_rc_pingpong -p 18718 -n 10 2>"$log/clash.err"
wait "$NETNS_PID"
kill "$other" 2>/dev/null
wait "$other" 2>/dev/null
grep -q "LID collision: LID 2 is this node's and that of the node at 10.47.0.2" "$log/clash.err" && pass "a LID collision is reported" || fail "no collision reported: $(cat "$log/clash.err")"
finish
