#!/bin/bash
# `ibemu top` (doc/man/ibemu.1): a live view of the node that disturbs
# nothing.
#
#   - with no node segment, top says so and exits 1;
#   - with an RC ping-pong running, `top -b -n 3 -d 1` shows both QPs in
#     RTS, each with its owner's pid, and packets moving out and in on
#     each in its last frame;
#   - top maps the segment read-only (its /proc/PID/maps), and the
#     segment's bytes are the same before and after a run of top while
#     nothing else runs.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need ibv_rc_pingpong
need timeout
need sha256sum
dir=$(mktemp -d)
spid= cpid=
stop_pair()
{
	local p
	for p in $spid $cpid; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	spid= cpid=
}
trap 'stop_pair; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$(sc_pick_port $((25000 + ($$ % 200) * 16)))

# --- no node ---
out=$(IBEMU_NODE=$IBEMU_NODE-none timeout -k 5 "$secs" "$IBEMU" top -b -n 1 2>&1)
rc=$?
if [ "$rc" = 1 ] && echo "$out" | grep -q "^ibemu top: no node"; then
	pass "no node: exit 1, $(echo "$out" | head -n 1)"
else
	fail "no node: exit $rc, output: $out"
fi

# --- a ping-pong under way ---
# Run directly (ibemu run executes the program), so $! is its pid;
# stopped by pid once top has looked.
"$IBEMU" run -- ibv_rc_pingpong -d ibemu0 -p "$port" -n 100000000 \
	>"$dir/server.out" 2>&1 &
spid=$!
if ! sc_wait_listen "$port" "$spid" "$secs"; then
	fail "the ping-pong server did not listen"
	cat "$dir/server.out"
	finish
fi
"$IBEMU" run -- ibv_rc_pingpong -d ibemu0 -p "$port" -n 100000000 localhost \
	>"$dir/client.out" 2>&1 &
cpid=$!
# Both QPs in RTS before top's first frame: bounded wait on top itself.
for i in $(seq 100); do
	n=$(timeout -k 5 "$secs" "$IBEMU" top -b -n 1 2>/dev/null | awk '$4 == "RTS"' | wc -l)
	[ "$n" -ge 2 ] && break
	kill -0 "$cpid" 2>/dev/null || break
	sleep 0.1
done

timeout -k 5 "$secs" "$IBEMU" top -b -n 3 -d 1 >"$dir/top.out" 2>&1 &
tpid=$!
seg=$(ibemu_shm_dir)/v*-$IBEMU_NODE
maps=
for i in $(seq 100); do
	tp=$(ps -o pid= --ppid "$tpid" 2>/dev/null | head -n 1)
	tp=${tp// /}
	[ -n "$tp" ] && maps=$(grep -F -- "-$IBEMU_NODE" "/proc/$tp/maps" 2>/dev/null)
	[ -n "$maps" ] && break
	sleep 0.05
done
wait "$tpid"
rc=$?
if [ -n "$maps" ] && ! echo "$maps" | awk '{ print $2 }' | grep -qv '^r--s$'; then
	pass "top maps the segment read-only: $(echo "$maps" | awk '{ print $2, $6 }' | head -n 1)"
else
	fail "top's mapping of the segment: ${maps:-none seen}"
fi
# The last frame: from the last header line on.
awk '/^ibemu top - /{ f = "" } { f = f $0 "\n" } END { printf "%s", f }' \
	"$dir/top.out" >"$dir/last"
frames=$(grep -c "^ibemu top - " "$dir/top.out")
[ "$rc" = 0 ] && [ "$frames" = 3 ] && pass "top -b -n 3: exit 0, 3 frames" ||
	fail "top -b -n 3: exit $rc, $frames frames"
for who in server:$spid client:$cpid; do
	pid=${who#*:}
	row=$(awk -v p="$pid" '$2 == p && $4 == "RTS"' "$dir/last")
	if [ -z "$row" ]; then
		fail "${who%%:*}: no QP of pid $pid in RTS in the last frame"
		continue
	fi
	set -- $row
	if [ "${10}" -gt 0 ] 2>/dev/null && [ "${11}" -gt 0 ] 2>/dev/null; then
		pass "${who%%:*}: QP $1 of pid $pid in RTS, ${10} packets/s out, ${11} in"
	else
		fail "${who%%:*}: QP $1 of pid $pid: rates out '${10}' in '${11}'"
	fi
done
if [ "$fails" != 0 ]; then
	sed 's/^/    /' "$dir/top.out"
	tail -n 3 "$dir/server.out" "$dir/client.out"
fi
stop_pair

# --- nothing else runs: top changes no byte of the segment ---
before=$(sha256sum $seg | awk '{ print $1 }')
timeout -k 5 "$secs" "$IBEMU" top -b -n 3 -d 0.1 >"$dir/idle.out" 2>&1
rc=$?
after=$(sha256sum $seg | awk '{ print $1 }')
if [ "$rc" = 0 ] && [ -n "$before" ] && [ "$before" = "$after" ]; then
	pass "the segment is unchanged by top (sha256 ${before:0:16}...)"
else
	fail "top exit $rc; segment sha256 before $before, after $after"
fi
finish
