#!/bin/bash
# The RDMA CM across nodes: unmodified librdmacm programs (rdma-core's
# rping, udaddy, ucmatose) with the server on one node and the client on
# another (network namespaces joined by a bridge, each with its own
# /dev/shm, as containers have; tests/lib/netns-lib.sh).  Another node's
# address resolves, its listener is reached by address and port, the
# connection carries data both ways (rping -V: every ping read back
# intact); SIDR and UD datagrams (udaddy); several connections at once
# (ucmatose -c 4).  A port nobody listens on there is REJECTED (IBA
# 12.6.7.2 reason 8), an address where no node answers ADDR_ERROR, never
# a hang; a peer killed with SIGKILL is seen as DISCONNECTED.  A
# connection costs at most one door lookup per side.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need rping
need udaddy
need ucmatose
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
secs=30
srv=$(netns_addr 1)
door=${IBEMU_TCP_PORT:-4791}
SPID=

# The last lines of both outputs, rping's ping lines left out: its
# error, written unbuffered, comes before them in the file.
show() {
	grep -v 'ping data: ' "$dir/server.out" | sed 's/^/    server: /' |
		tail -n 6
	grep -v 'ping data: ' "$dir/client.out" | sed 's/^/    client: /' |
		tail -n 6
}

# wait_line PATTERN FILE PID TENTHS: true once FILE has a line matching
# PATTERN; false when PID ended first or after TENTHS tenths of a second.
wait_line() {
	local k
	for k in $(seq "$4"); do
		grep -q "$1" "$2" && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# server ARGV...: the server program on node 1, in the background
# (SPID), once its process holds the node's door (it opened the device).
server() {
	netns_bg 1 timeout "$secs" "$IBEMU" run -- "$@" >"$dir/server.out" 2>&1
	SPID=$NETNS_PID
	netns_wait_listen 1 "$door" 10 "$SPID"
}

# server_end: wait for the server (at most secs), RC_S its exit status.
server_end() {
	wait "$SPID"
	RC_S=$?
	SPID=
}

# server_kill: a server that serves until killed.
server_kill() {
	kill "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
	SPID=
}

# client ARGV...: the client on node 2; RC_C its exit status.  A client
# that came before the server's listen (REJECTED; UD: UNREACHABLE) tries
# again, a bounded number of times.
client() {
	local try
	for try in $(seq 20); do
		netns_exec 2 timeout "$secs" "$IBEMU" run -- "$@" \
			>"$dir/client.out" 2>&1
		RC_C=$?
		grep -qE "REJECTED|UNREACHABLE" "$dir/client.out" || break
		sleep 0.3
	done
}

# client_once ARGV...: the client once, whatever it gets.
client_once() {
	netns_exec 2 timeout "$secs" "$IBEMU" run -- "$@" \
		>"$dir/client.out" 2>&1
	RC_C=$?
}

# both_ok NAME SERVER-RE CLIENT-RE
both_ok() {
	if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] &&
	   grep -q "$2" "$dir/server.out" && grep -q "$3" "$dir/client.out"
	then
		pass "$1"
	else
		fail "$1: server $RC_S, client $RC_C"
		show
	fi
}

# rping: ten pings, each read by the server from the client's buffer and
# written back (-V: the client checks every byte); both print what they
# saw (-v), which must be the same ten lines.
server rping -s -v -C 10 -a "$srv"
client rping -c -v -V -C 10 -a "$srv"
server_end
sed -n 's/^server ping data: //p' "$dir/server.out" >"$dir/s.pings"
sed -n 's/^ping data: //p' "$dir/client.out" >"$dir/c.pings"
if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] && [ "$(wc -l <"$dir/c.pings")" = 10 ] &&
   cmp -s "$dir/s.pings" "$dir/c.pings" &&
   grep -q '^rdma-ping-9: JKLMNOPQRSTUVWXYZ' "$dir/c.pings"; then
	pass "rping -v -V -C 10 across nodes: the same ten pings on both sides"
else
	fail "rping across nodes: server $RC_S, client $RC_C"
	show
fi

# Door lookups: a connection through the CM asks a node's door at most
# once per side (the client's lookup of the listener; each QP's move to
# RTR finds its peer in the route the CM learnt from the connection's
# messages), beside the probe that rdma_resolve_addr makes.  Counted from
# the TCP transport's debug lines, one per lookup.
server env IBEMU_DEBUG=1 rping -s -C 2 -a "$srv"
client env IBEMU_DEBUG=1 rping -c -V -C 2 -a "$srv"
server_end
ls=$(grep -c 'door lookup (\(cm\|qpn\))' "$dir/server.out")
lc=$(grep -c 'door lookup (\(cm\|qpn\))' "$dir/client.out")
if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] && [ "$ls" -le 1 ] && [ "$lc" -le 1 ]
then
	pass "rping across nodes: door lookups server $ls, client $lc (<= 1)"
else
	fail "rping across nodes: server $RC_S, client $RC_C," \
		"door lookups server $ls, client $lc (want <= 1 each)"
	grep 'door lookup' "$dir/server.out" "$dir/client.out" | sed 's/^/    /'
fi

server udaddy
client udaddy -s "$srv"
server_end
both_ok "udaddy across nodes: SIDR, UD datagrams both ways" \
	"return status 0" "return status 0"

server ucmatose -c 4
client ucmatose -c 4 -s "$srv"
server_end
both_ok "ucmatose -c 4 across nodes: four connections, data, disconnects" \
	"return status 0" "return status 0"

# Nobody listens on the port there: the other node's CM refuses it
# (REJECTED, reason 8: invalid service ID), at once.
server rping -s -C 1 -a "$srv"
client_once ucmatose -s "$srv" -p 7999
if [ "$RC_C" != 0 ] && [ "$RC_C" != 124 ] &&
   grep -q "RDMA_CM_EVENT_REJECTED, error: 8" "$dir/client.out"; then
	pass "ucmatose to a port nobody listens on there: REJECTED, reason 8"
else
	fail "ucmatose to a port nobody listens on there: client $RC_C"
	show
fi
client_once rping -c -a "$srv" -p 7999 -C 1
if [ "$RC_C" != 124 ] && grep -q "RDMA_CM_EVENT_REJECTED" "$dir/client.out"
then
	pass "rping to a port nobody listens on there: REJECTED"
else
	fail "rping to a port nobody listens on there: client $RC_C"
	show
fi
server_kill

# No node answers at the address (none of node 1's processes has the
# device open; nothing at all at .9): the address does not resolve
# (ADDR_ERROR once rping's timeout passed), not a hang.
for a in "$srv" 10.47.0.9; do
	client_once rping -c -a "$a" -C 1
	if [ "$RC_C" != 124 ] &&
	   grep -q "RDMA_CM_EVENT_ADDR_ERROR" "$dir/client.out"; then
		pass "rping to $a, where no node answers: ADDR_ERROR"
	else
		fail "rping to $a, where no node answers: client $RC_C"
		show
	fi
done

# A client killed (SIGKILL) while connected: its server on the other
# node sees DISCONNECTED (the end of the connection to that process) and
# ends by itself.  The client is killed once pings flow.
server rping -s -v -C 1000000 -a "$srv"
killed=0
for try in $(seq 5); do
	netns_bg 2 "$IBEMU" run -- rping -c -v -C 1000000 -a "$srv" \
		>"$dir/client.out" 2>&1
	cpid=$NETNS_PID
	if wait_line "rdma-ping-20:" "$dir/client.out" "$cpid" 100 &&
	   kill -KILL "$cpid" 2>/dev/null; then
		killed=1
	fi
	wait "$cpid" 2>/dev/null
	[ "$killed" = 1 ] && break
	grep -q REJECTED "$dir/client.out" || break
	sleep 0.3
done
ended=0
for k in $(seq 100); do
	kill -0 "$SPID" 2>/dev/null || { ended=1; break; }
	sleep 0.1
done
server_end
if [ "$killed" = 1 ] && [ "$ended" = 1 ] && [ "$RC_S" != 124 ] &&
   grep -q "DISCONNECT" "$dir/server.out"; then
	pass "rping across nodes: the client killed, its server sees DISCONNECTED"
else
	fail "rping with a killed client across nodes: killed $killed," \
		"server ended $ended ($RC_S)"
	show
fi

# An idle connection to a process of another node costs its server no
# wake-ups (the end of the peer is watched through its connection, not
# looked at periodically), and the client's death is still seen; the
# path and the address vector each end's CM gives name the other node
# (its LID, derived from its address in the subnet: the host part, and
# its address's GID) (tests/progs/cm_idle.c).
netns_bg 1 timeout "$secs" "$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/cm_idle" \
	server "$srv" 2 >"$dir/server.out" 2>&1
SPID=$NETNS_PID
wait_line "listening" "$dir/server.out" "$SPID" 100
netns_bg 2 "$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/cm_idle" client "$srv" 1 \
	>"$dir/client.out" 2>&1
cpid=$NETNS_PID
wait_line "idle measured" "$dir/server.out" "$SPID" 200
kill -KILL "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
server_end
if [ "$RC_S" = 0 ] && grep -q "^cm-idle: DISCONNECTED" "$dir/server.out" &&
   grep -q "^cm-idle: path and address vector to LID 2" "$dir/server.out" &&
   grep -q "^cm-idle: path and address vector to LID 1" "$dir/client.out"
then
	pass "$(grep "context switches" "$dir/server.out"), then DISCONNECTED;" \
		"paths and address vectors name the other node"
else
	fail "cm-idle across nodes: server $RC_S"
	show
fi

finish
