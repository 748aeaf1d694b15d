#!/bin/bash
# The fabric key (ibemu(7), SECURITY): nodes with the same
# IBEMU_FABRIC_KEY (here one from a key file of mode 0600, the other
# from the environment) work as without one: RC by LID and the RDMA CM;
# a node without the key, or with another, is refused, and the side that
# sees why says so in one line; a key file others may read, or a key too
# short, refuses network mode.  Nodes are network namespaces
# (tests/lib/netns-lib.sh), 10.47.0.1 and 10.47.0.2, in network mode.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need timeout
need ibv_rc_pingpong
netns_setup 2 --own-shm
dir=$NETNS_DIR
srv=$(netns_addr 1)
port=18515
key=0123456789abcdef-fabric
printf '%s\n' "$key" >"$dir/key"
chmod 600 "$dir/key"

# pair NAME SERVER-KEY-ENV CLIENT-KEY-ENV: ibv_rc_pingpong, server in
# node 1, client in node 2, each with its key setting ("-": none);
# outputs in $dir/NAME.s and $dir/NAME.c, the client's status in $rc.
pair()
{
	local name=$1 skey=$2 ckey=$3 spid
	local -a se=() ce=()
	[ "$skey" = - ] || se=("$skey")
	[ "$ckey" = - ] || ce=("$ckey")
	netns_bg 1 env "${se[@]}" LD_PRELOAD="$IBEMU_LIB_PATH" \
		timeout 20 ibv_rc_pingpong -d ibemu0 -p $port -n 50 \
		>"$dir/$name.s" 2>&1
	spid=$NETNS_PID
	netns_wait_listen 1 $port 10 "$spid"
	netns_exec 2 env "${ce[@]}" LD_PRELOAD="$IBEMU_LIB_PATH" \
		timeout 20 ibv_rc_pingpong -d ibemu0 -p $port -n 50 "$srv" \
		>"$dir/$name.c" 2>&1
	rc=$?
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
}

pair same "IBEMU_FABRIC_KEY_FILE=$dir/key" "IBEMU_FABRIC_KEY=$key"
if [ $rc = 0 ] && grep -q "50 iters" "$dir/same.c"; then
	pass "RC across nodes with the same key (a file and the text)"
else
	fail "RC across nodes with the same key: client $rc"
	cat "$dir/same.s" "$dir/same.c"
fi

# refused NAME SERVER-KEY CLIENT-KEY RE: the client fails, and RE is
# said once in the client's or the server's output.
refused()
{
	local name=$1 re=$4 n
	pair "$name" "$2" "$3"
	n=$(cat "$dir/$name.s" "$dir/$name.c" | grep -c "$re")
	if [ $rc != 0 ] && [ "$n" -ge 1 ]; then
		pass "$name: refused, and said: $(cat "$dir/$name.s" \
			"$dir/$name.c" | grep -m1 "$re" | sed 's/^.*tcp: //')"
	else
		fail "$name: client $rc, '$re' said $n times"
		cat "$dir/$name.s" "$dir/$name.c"
	fi
}

refused no-key-client "IBEMU_FABRIC_KEY=$key" - \
	"has a fabric key and this process none"
refused no-key-server - "IBEMU_FABRIC_KEY=$key" "has no fabric key"
refused other-key "IBEMU_FABRIC_KEY=$key" \
	"IBEMU_FABRIC_KEY=another-key-of-16-bytes" \
	"does not prove the fabric key"

# Settings that cannot be used refuse network mode, in one line.
chmod 644 "$dir/key"
netns_exec 1 env "IBEMU_FABRIC_KEY_FILE=$dir/key" \
	LD_PRELOAD="$IBEMU_LIB_PATH" timeout 10 ibv_devinfo -d ibemu0 \
	>"$dir/open.out" 2>&1
if grep -q "network mode refused" "$dir/open.out"; then
	pass "a key file others may read refuses network mode"
else
	fail "a key file others may read: $(head -3 "$dir/open.out")"
fi
finish
