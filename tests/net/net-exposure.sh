#!/bin/bash
# What a node exposes (ibemu(7), SECURITY): a program that has not been
# told to use the network listens on nothing another host can reach; with
# IBEMU_TRANSPORT=tcp alone it listens on loopback; in network mode
# (IBEMU_NET=1) on the node's fabric address only, never on every
# address.  And a node without network mode does not reach one with it:
# the client says why.  One node is a network namespace (netns-lib.sh)
# with lo and eth0 = 10.47.0.1; the program is ibv_rc_pingpong's server,
# which holds the device open while it waits for a client on its own
# port (excluded from the count).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need ibv_rc_pingpong
need ss
need timeout
port=18515
addr=$(netns_addr 1)
netns_setup 2 --own-shm
dir=$NETNS_DIR

# listening NAME ENV...: the server with ENV in node 1; its listening
# sockets other than its own port, one "proto local-address" a line, in
# $dir/NAME.ls.
listening()
{
	local name=$1 pid i
	shift
	netns_bg 1 env "$@" LD_PRELOAD="$IBEMU_LIB_PATH" \
		timeout 20 ibv_rc_pingpong -d ibemu0 -p $port \
		>"$dir/$name.out" 2>&1
	pid=$NETNS_PID
	netns_wait_listen 1 $port 10 "$pid" || {
		fail "$name: the server did not start"
		cat "$dir/$name.out"
	}
	# The device is open before the program listens on its port.
	for i in 1 2 3 4 5 6 7 8 9 10; do
		netns_exec 1 ss -H -ltun >"$dir/$name.ss"
		grep -v ":$port " "$dir/$name.ss" |
			awk '{ print $1, $5 }' >"$dir/$name.ls"
		[ -s "$dir/$name.ls" ] && break
		sleep 0.2
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}

# Nothing at all without the network.
listening plain IBEMU_NET=
if [ -s "$dir/plain.ls" ]; then
	fail "a single-node program listens: $(tr '\n' ' ' <"$dir/plain.ls")"
else
	pass "a single-node program listens on nothing"
fi

# only NAME REGEX: every socket NAME listed is on an address REGEX matches,
# and there is one at least.
only()
{
	local name=$1 re=$2 bad
	bad=$(awk -v re="$re" '$2 !~ re' "$dir/$name.ls")
	if [ ! -s "$dir/$name.ls" ]; then
		fail "$name: nothing listens"
	elif [ -n "$bad" ]; then
		fail "$name: listens on $(echo "$bad" | tr '\n' ' ')"
	else
		pass "$name: listens on $(awk '{ print $2 }' "$dir/$name.ls" |
			tr '\n' ' ')only"
	fi
}

listening loopback IBEMU_NET= IBEMU_TRANSPORT=tcp
only loopback '^127\.0\.0\.1:[0-9]+$'
listening net IBEMU_NET=1
only net "^${addr//./\\.}:[0-9]+\$"
listening net-tcp IBEMU_NET=1 IBEMU_TRANSPORT=tcp
only net-tcp "^${addr//./\\.}:[0-9]+\$"

# A client without network mode, the server with it: refused, and said.
netns_bg 1 env IBEMU_NET=1 LD_PRELOAD="$IBEMU_LIB_PATH" \
	timeout 20 ibv_rc_pingpong -d ibemu0 -p $port >"$dir/srv.out" 2>&1
spid=$NETNS_PID
netns_wait_listen 1 $port 10 "$spid"
netns_exec 2 env IBEMU_NET= LD_PRELOAD="$IBEMU_LIB_PATH" \
	timeout 20 ibv_rc_pingpong -d ibemu0 -p $port "$addr" \
	>"$dir/cli.out" 2>&1
rc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
if [ $rc = 0 ]; then
	fail "a client without network mode reached another node"
elif grep -q "IBEMU_NET=1" "$dir/cli.out"; then
	pass "a client without network mode fails and names IBEMU_NET=1"
else
	fail "a client without network mode fails without saying why"
	cat "$dir/cli.out"
fi
finish
