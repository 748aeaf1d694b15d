#!/bin/bash
# Unmodified librdmacm programs (rdma-core's rping, ucmatose, udaddy,
# rdma_server/rdma_client, rdma_xserver/rdma_xclient, cmtime) as server
# and client processes on one node under `ibemu run`, on 127.0.0.1 and on the node's own
# addresses; a connect nobody answers is refused, not left hanging; a
# peer that dies is seen as DISCONNECTED.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need rping
need timeout
dir=$(mktemp -d)
SRV_PID=
cleanup() {
	sc_cleanup
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID" 2>/dev/null
	rm -rf "$dir"
	ibemu_cleanup
}
trap cleanup EXIT
secs=30

# cm_pair SERVER-ARGV... ::: CLIENT-ARGV...: sc_cm_pair (serverclient.sh);
# RC_S, RC_C: exit codes.
cm_pair() {
	sc_cm_pair "$dir" "$secs" "$@"
	RC_S=$SC_SERVER_RC
	RC_C=$SC_CLIENT_RC
}

show() {
	sed 's/^/    server: /' "$dir/server.out" | tail -n 6
	sed 's/^/    client: /' "$dir/client.out" | tail -n 6
}

# cm_verdict NAME SERVER-RE CLIENT-RE: after cm_pair, both ended 0 and
# each output has its pattern (an empty one: no check).
cm_verdict() {
	if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] &&
	   { [ -z "$2" ] || grep -q "$2" "$dir/server.out"; } &&
	   { [ -z "$3" ] || grep -q "$3" "$dir/client.out"; }; then
		pass "$1"
	else
		fail "$1: server $RC_S, client $RC_C"
		show
	fi
}

# cm_refused NAME RE CLIENT-ARGV...: a client of a port nobody listens
# on ends by itself (no hang) and says RE.
cm_refused() {
	local name=$1 re=$2 rc
	shift 2
	timeout -k 5 20 "$IBEMU" run -- "$@" >"$dir/client.out" 2>&1
	rc=$?
	if [ "$rc" != 124 ] && grep -q "$re" "$dir/client.out"; then
		pass "$name"
	else
		fail "$name: exit $rc"
		sed 's/^/    client: /' "$dir/client.out" | tail -n 6
	fi
}

# rping -v prints each ping's data on both sides: ten, the same ten, in
# rping's pattern ("rdma-ping-N: " and the rotating alphabet).
# rping_run SADDR CADDR PORT: one rping pair; RPING_OK says whether it
# passed, RPING_EXIT_RACE whether it failed only as rping of rdma-core 44
# may on its exit path: its CM thread calls rdma_get_cm_event on the
# channel the main thread destroyed (fixed upstream in rdma-core commit
# f3ae6534a, "rping: terminate CM event thread before exiting"), which
# fails with EBADF on librdmacm as on ibemu.  That is: all ten pings
# done and identical on both sides, and each side that exited non-zero
# said "rdma_get_cm_event: Bad file descriptor".
rping_run() {
	local saddr=$1 caddr=$2 port=$3 same=no side rc
	cm_pair rping -s -a "$saddr" -p "$port" -v -C 10 ::: \
		rping -c -a "$caddr" -p "$port" -v -C 10
	n=$(LC_ALL=C grep -cE '^ping data: rdma-ping-[0-9]+: [A-z]{50}$' \
		"$dir/client.out")
	if [ "$n" = 10 ] &&
	   diff <(sed -n 's/^ping data: //p' "$dir/client.out") \
		<(sed -n 's/^server ping data: //p' "$dir/server.out") >/dev/null
	then
		same=yes
	fi
	RPING_OK=no
	RPING_EXIT_RACE=no
	if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] && [ $same = yes ]; then
		RPING_OK=yes
		return
	fi
	[ $same = yes ] || return
	for side in server client; do
		if [ $side = server ]; then rc=$RC_S; else rc=$RC_C; fi
		[ "$rc" = 0 ] && continue
		grep -q '^rdma_get_cm_event: Bad file descriptor$' \
			"$dir/$side.out" || return
	done
	RPING_EXIT_RACE=yes
}

rping_check() {
	local name=$1 saddr=$2 caddr=$3 port=$4 n
	rping_run "$saddr" "$caddr" "$port"
	if [ $RPING_EXIT_RACE = yes ]; then
		echo "note: $name: rping's own exit race (server $RC_S," \
			"client $RC_C, rdma_get_cm_event: Bad file" \
			"descriptor after 10 identical pings): once more"
		rping_run "$saddr" "$caddr" "$port"
	fi
	if [ $RPING_OK = yes ]; then
		pass "$name: 10 pings, data identical on both sides"
	else
		fail "$name: server $RC_S, client $RC_C, $n pings"
		show
	fi
}

# All of librdmacm's API or none of it (doc/design.md section 21): every
# function the installed librdmacm exports, at its version, is the
# preload's, so no call of librdmacm's own reaches its internals.
rdmacm_so=$(ldconfig -p 2>/dev/null | awk '/librdmacm\.so\.1 .*x86-64|librdmacm\.so\.1 \(/ {print $NF; exit}')
if command -v objdump >/dev/null && [ -n "$rdmacm_so" ] && [ -r "$rdmacm_so" ]; then
	exports() { objdump -T "$1" | awk '$2 == "g" && $4 == ".text" && $(NF-1) ~ /^RDMACM_/ {print $(NF-1), $NF}' | sort; }
	missing=$(comm -23 <(exports "$rdmacm_so") <(exports "$IBEMU_LIB_PATH"))
	if [ -z "$(exports "$rdmacm_so")" ]; then
		fail "no RDMACM_* functions read from $rdmacm_so"
	elif [ -z "$missing" ]; then
		pass "every function of $rdmacm_so is exported at its version"
	else
		fail "librdmacm functions the preload does not export:" $missing
	fi
else
	echo "note: no objdump or librdmacm.so.1 to compare the exports with"
fi

rping_check "rping 127.0.0.1" 127.0.0.1 127.0.0.1 7501
rping_check "rping, server on any address" 0.0.0.0 127.0.0.1 7502

# The node's own non-loopback addresses resolve to ibemu0 as well.
addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
addr6=$(ip -o -6 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -n "$addr4" ]; then
	rping_check "rping $addr4" 0.0.0.0 "$addr4" 7503
else
	echo "note: no global IPv4 address on this node"
fi
if [ -n "$addr6" ]; then
	rping_check "rping $addr6" :: "$addr6" 7504
else
	echo "note: no global IPv6 address on this node"
fi

# The CM's messages are IBA chapter 12 MADs to QP1: a capture shows them
# as CM traffic (the dissector decodes each).
if command -v tshark >/dev/null; then
	cm_pair env IBEMU_PCAP="$dir/server.pcap" rping -s -a 127.0.0.1 -p 7510 -C 2 ::: \
		env IBEMU_PCAP="$dir/client.pcap" rping -c -a 127.0.0.1 -p 7510 -C 2
	msgs=$(for f in "$dir"/*.pcap*; do tshark -r "$f" 2>/dev/null; done |
		grep -o "CM: [A-Za-z]*" | sort -u | tr '\n' ' ')
	want="CM: ConnectReply CM: ConnectRequest CM: DisconnectReply CM: DisconnectRequest CM: ReadyToUse "
	if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] && [ "$msgs" = "$want" ]; then
		pass "captures show REQ, REP, RTU, DREQ and DREP as CM MADs"
	else
		fail "captures of rping: server $RC_S, client $RC_C, CM messages: $msgs"
	fi
	rm -f "$dir"/*.pcap*
fi

if command -v ucmatose >/dev/null; then
	cm_pair ucmatose -p 7505 -c 4 ::: ucmatose -p 7505 -c 4 -s 127.0.0.1
	cm_verdict "ucmatose: 4 connections, data and disconnect" \
		"disconnected" "test complete"
	# Nobody listens: REJECTED (IBA 12.6.7.2 reason 8, invalid service
	# ID) at once, not a hang.
	cm_refused "ucmatose to a port nobody listens on: REJECTED, reason 8" \
		"RDMA_CM_EVENT_REJECTED, error: 8" \
		ucmatose -p 7599 -s 127.0.0.1
fi

cm_refused "rping to a port nobody listens on: REJECTED" \
	"RDMA_CM_EVENT_REJECTED" rping -c -a 127.0.0.1 -p 7598 -C 1

if command -v udaddy >/dev/null; then
	cm_pair udaddy ::: udaddy -s 127.0.0.1
	cm_verdict "udaddy: UD ids, SIDR and datagrams" "" "return status 0"
fi

if command -v rdma_server >/dev/null && command -v rdma_client >/dev/null; then
	cm_pair rdma_server -p 7506 ::: rdma_client -s 127.0.0.1 -p 7506
	cm_verdict "rdma_server/rdma_client: synchronous endpoints" \
		"end 0" "end 0"
fi

# rdma_xserver/rdma_xclient: RC (a 16-byte inline send on a QP of one
# SGE) and XRC through the CM (port space IB; the client's XRC send QP
# to the server's XRC receive QP, the SRQ number in the REP's private
# data), on 127.0.0.1 and on the node's own address.
if command -v rdma_xserver >/dev/null && command -v rdma_xclient >/dev/null; then
	xport=7520
	for xaddr in 127.0.0.1 $addr4; do
		for mode in r x; do
			xport=$((xport + 1))
			cm_pair rdma_xserver -p "$xport" -c "$mode" ::: \
				rdma_xclient -s "$xaddr" -p "$xport" -c "$mode"
			cm_verdict \
				"rdma_xserver/rdma_xclient -c $mode on $xaddr" \
				"end 0" "end 0"
		done
	done
fi

if command -v cmtime >/dev/null; then
	# The server serves until killed: the client's verdict decides.
	timeout -k 5 "$secs" "$IBEMU" run -- cmtime -p 7507 \
		>"$dir/server.out" 2>&1 </dev/null &
	SRV_PID=$!
	for try in $(seq 40); do
		timeout -k 5 "$secs" "$IBEMU" run -- cmtime -p 7507 \
			-s 127.0.0.1 -c 50 >"$dir/client.out" 2>&1 </dev/null
		RC_C=$?
		[ "$RC_C" = 0 ] && break
		grep -qE "REJECTED|refused" "$dir/client.out" || break
		sleep 0.1
	done
	kill "$SRV_PID" 2>/dev/null
	wait "$SRV_PID" 2>/dev/null
	SRV_PID=
	if [ "$RC_C" = 0 ] && grep -q "^connect *:" "$dir/client.out"; then
		pass "cmtime: 50 connections made and torn down"
	else
		fail "cmtime -c 50: client $RC_C"
		sed 's/^/    client: /' "$dir/client.out" | tail -n 8
	fi
fi

# A client that dies while connected: its server sees DISCONNECTED (the
# node's liveness) and ends by itself.  The client is killed once pings
# flow; should it end by itself first (an error of its own under load),
# the case is tried again, at most 3 times.
killed=0
for attempt in 1 2 3; do
	timeout -k 5 "$secs" "$IBEMU" run -- rping -s -v -a 127.0.0.1 -p 7508 \
		-C 100000000 >"$dir/server.out" 2>&1 </dev/null &
	SRV_PID=$!
	cpid=
	for try in $(seq 100); do
		if [ -z "$cpid" ] || ! kill -0 "$cpid" 2>/dev/null; then
			[ -n "$cpid" ] && wait "$cpid" 2>/dev/null
			"$IBEMU" run -- rping -c -a 127.0.0.1 -p 7508 \
				-C 100000000 >"$dir/client.out" 2>&1 </dev/null &
			cpid=$!
		fi
		grep -q "server ping data" "$dir/server.out" && break
		sleep 0.1
	done
	if kill -KILL "$cpid" 2>/dev/null; then
		wait "$cpid" 2>/dev/null
		killed=1
	else
		wait "$cpid" 2>/dev/null
	fi
	wait "$SRV_PID"
	RC_S=$?
	SRV_PID=
	[ "$killed" = 1 ] && break
done
if [ "$killed" = 1 ] && [ "$RC_S" != 124 ] && [ "$RC_S" != 137 ] &&
   grep -q "DISCONNECT" "$dir/server.out"; then
	pass "rping: the client killed, the server sees DISCONNECTED and ends"
else
	fail "rping with a killed client: server $RC_S, client killed: $killed"
	show
fi

# A listener that is stopped (SIGSTOP) answers nothing: the request is
# sent again, then reported UNREACHABLE (-ETIMEDOUT) within its timeout
# (IBA 12.4; about 4.5 s here), never left hanging.
"$IBEMU" run -- rping -s -P -a 127.0.0.1 -p 7509 -C 1 >"$dir/server.out" 2>&1 </dev/null &
SRV_PID=$!
for try in $(seq 40); do
	timeout -k 5 "$secs" "$IBEMU" run -- rping -c -a 127.0.0.1 -p 7509 \
		-C 1 >"$dir/client.out" 2>&1 </dev/null && break
	sleep 0.1
done
kill -STOP "$SRV_PID"
start=$(date +%s)
timeout -k 5 "$secs" "$IBEMU" run -- rping -c -a 127.0.0.1 -p 7509 -C 1 \
	>"$dir/client.out" 2>&1 </dev/null
RC_C=$?
took=$(($(date +%s) - start))
kill -CONT "$SRV_PID"
kill "$SRV_PID" 2>/dev/null
wait "$SRV_PID" 2>/dev/null
SRV_PID=
if [ "$RC_C" != 124 ] &&
   grep -q "RDMA_CM_EVENT_UNREACHABLE, error -110" "$dir/client.out"; then
	pass "connect to a stopped listener: UNREACHABLE (-ETIMEDOUT) after ${took}s"
else
	fail "connect to a stopped listener: client $RC_C after ${took}s"
	sed 's/^/    client: /' "$dir/client.out" | tail -n 6
fi

finish
