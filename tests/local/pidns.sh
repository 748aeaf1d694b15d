#!/bin/bash
# A server and a client in different pid namespaces that share /dev/shm
# and the network namespace, as two containers of one Kubernetes pod do:
# one side runs under `unshare -p -f --mount-proc`, where it has other pids
# and cannot see the other side's processes.  Neither may take the other
# for dead, and data must arrive intact (cross-memory attach is not used
# across pid namespaces: the data goes in packets).  Both orientations;
# ibv_rc_pingpong with the data checked, SENDs of 64 KiB and more, and
# ib_write_bw.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need unshare
need timeout
need ibv_rc_pingpong
if ! unshare -p -f --mount-proc --kill-child true 2>/dev/null; then
	echo "SKIP: unshare -p -f --mount-proc is not permitted here"
	exit 77
fi
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((24000 + ($$ % 200) * 32))
# The namespace's first process is its init, which ignores SIGTERM:
# --kill-child kills it with unshare, which timeout kills.
ns=(unshare -p -f --mount-proc --kill-child)

# check NAME WHERE SUMMARY PROGRAM [ARGS...]: WHERE is "server" or
# "client", the side that runs in a pid namespace of its own.
check()
{
	local name=$1 where=$2 summary=$3 prog=$4 s=() c=()
	shift 4
	port=$(sc_pick_port $((port + 1)))
	if [ "$where" = server ]; then s=("${ns[@]}"); else c=("${ns[@]}"); fi
	if sc_pair "$dir" "$secs" "$port" \
		"${s[@]}" "$IBEMU" run -- "$prog" -p "$port" "$@" ::: \
		"${c[@]}" "$IBEMU" run -- "$prog" -p "$port" "$@" localhost; then
		pass "$name ($where in its own pid namespace): $(eval "$summary")"
	else
		fail "$name ($where in its own pid namespace): server exited $SC_SERVER_RC, client $SC_CLIENT_RC (124: timed out after ${secs}s)"
		sed 's/^/    server: /' "$dir/server.out" | tail -n 8
		sed 's/^/    client: /' "$dir/client.out" | tail -n 8
	fi
}

pp='grep -m1 "bytes in" "$dir/client.out"'
for where in server client; do
	check "rc_pingpong" $where "$pp" ibv_rc_pingpong -d ibemu0 -n 200 -c
	check "rc_pingpong -s 65536" $where "$pp" \
		ibv_rc_pingpong -d ibemu0 -n 50 -s 65536 -c
	check "rc_pingpong -s 1048576" $where "$pp" \
		ibv_rc_pingpong -d ibemu0 -n 20 -s 1048576 -c
done
if command -v ib_write_bw >/dev/null; then
	check "ib_write_bw -s 65536" server \
		"awk '/#bytes/ { getline; \$1 = \$1; print; exit }' \"\$dir/client.out\"" \
		ib_write_bw -d ibemu0 -i 1 -F -n 200 -s 65536
fi
finish
