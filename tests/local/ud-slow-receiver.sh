#!/bin/bash
# A UD receiver that runs but is seldom scheduled (a loaded machine; here
# a CPU cgroup gives it 1 ms of every 100 ms) loses no datagram: its
# senders wait for its inbox to drain, as they do not for a stopped or
# dead one (tests/local/ud-dead-peer.sh).  udaddy, 16 ids x 1000 datagrams each
# way, every one of which its receiver waits for.
. "$(dirname "$0")/../lib/lib.sh"
need udaddy

cg=
SRV_PID=
cleanup() {
	[ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null && wait "$SRV_PID"
	[ -n "$cg" ] && rmdir "$cg" 2>/dev/null
	ibemu_cleanup
}
trap cleanup EXIT

# A CPU cgroup of our own: cgroup v2 (cpu.max) or v1 (CFS quota).
if [ -w /sys/fs/cgroup/cgroup.subtree_control ] &&
   grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	cg=/sys/fs/cgroup/ibemu-slow-$$
	mkdir "$cg" 2>/dev/null && echo "1000 100000" >"$cg/cpu.max" ||
		cg=
elif [ -w /sys/fs/cgroup/cpu ]; then
	cg=/sys/fs/cgroup/cpu/ibemu-slow-$$
	mkdir "$cg" 2>/dev/null &&
		echo 100000 >"$cg/cpu.cfs_period_us" &&
		echo 1000 >"$cg/cpu.cfs_quota_us" || cg=
fi
if [ -z "$cg" ]; then
	echo "SKIP: no CPU cgroup can be made here (needs root and the cpu controller)"
	exit 77
fi

dir=$(mktemp -d)
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
	timeout -k 5 60 stdbuf -oL "$IBEMU" run -- udaddy -c 16 -C 1000 \
	>"$dir/server.out" 2>&1 </dev/null &
SRV_PID=$!
# The client starts once the server listens (ibemu status lists it).
for try in $(seq 300); do
	"$IBEMU" status 2>/dev/null | grep -q "listen udp .* port 7174," &&
		break
	sleep 0.1
done
timeout -k 5 60 stdbuf -oL "$IBEMU" run -- udaddy -s 127.0.0.1 -c 16 -C 1000 \
	>"$dir/client.out" 2>&1 </dev/null
RC_C=$?
wait "$SRV_PID"
RC_S=$?
SRV_PID=
if [ "$RC_C" = 0 ] && [ "$RC_S" = 0 ] &&
   grep -q "data transfers complete" "$dir/server.out"; then
	pass "udaddy to a receiver with 1% of a CPU: every datagram arrived"
else
	fail "udaddy to a throttled receiver: client $RC_C, server $RC_S"
	tail -n 5 "$dir/client.out" "$dir/server.out" | sed 's/^/    /'
fi
rm -rf "$dir"
finish
