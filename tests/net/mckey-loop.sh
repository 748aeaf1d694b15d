#!/bin/bash
# The manual's multicast example (chapter 8.2; its options, listed in the
# synopsis of 7.3, are those of rdma-core's mckey, which is that program)
# run as the issue of a lost last message had it: a receiver of four
# connections (`-m 239.255.77.1 -b ADDR -c 4`) and a sender of the same
# options with `-s`, which posts its sends, leaves the group and exits at
# once.  Each receiver QP posts every receive before it joins and waits
# for all message_count completions, so one lost datagram leaves it
# waiting until the bound: every one of the runs must deliver every
# message.  MCKEY_RUNS runs (default 25) on one node, then as many with
# the receiver and the sender in two nodes (network namespaces with their
# own /dev/shm): 50 in all.  mckey's sender sleeps 3 s after it joined,
# so a run takes about 3 s.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need mckey
need stdbuf
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
runs=${MCKEY_RUNS:-25}

# loop NAME RECV-NODE SEND-NODE: runs of the pair; one verdict.
loop() {
	local name=$1 rn=$2 sn=$3 i k ok=0 rpid rc
	local -a opts=(-m 239.255.77.1 -c 4)
	for i in $(seq "$runs"); do
		netns_bg "$rn" timeout 20 stdbuf -oL "$IBEMU" run -- mckey \
			"${opts[@]}" -b "$(netns_addr "$rn")" >"$dir/r.log" 2>&1
		rpid=$NETNS_PID
		for k in $(seq 200); do
			[ "$(grep -c '^mckey: joined' "$dir/r.log")" = 4 ] && break
			kill -0 "$rpid" 2>/dev/null || break
			sleep 0.05
		done
		netns_exec "$sn" timeout 20 "$IBEMU" run -- mckey "${opts[@]}" \
			-b "$(netns_addr "$sn")" -s >"$dir/s.log" 2>&1
		rc=$?
		wait "$rpid" || rc=1
		if [ "$rc" = 0 ] && grep -q '^return status 0' "$dir/r.log"; then
			ok=$((ok + 1))
		else
			echo "run $i:"
			tail -n 3 "$dir/r.log" "$dir/s.log" | sed 's/^/    /'
		fi
	done
	if [ "$ok" = "$runs" ]; then
		pass "$name: $ok of $runs runs delivered every message to 4 QPs"
	else
		fail "$name: $ok of $runs runs delivered every message"
	fi
}

loop "mckey -c 4, one node" 1 1
loop "mckey -c 4, receiver and sender in two nodes" 1 2
finish
