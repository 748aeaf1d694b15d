#!/bin/bash
# 1 GiB over RC between two network namespaces (each node with its own
# /dev/shm, tests/lib/netns-lib.sh): tests/progs/net_break's bulk mode, 16384
# SENDs of 64 KiB from node 2 to node 1 with every byte checked; and
# unmodified ibv_rc_pingpong with 1024 messages of 1 MiB each way (-c:
# it checks one byte of each page of what it receives).  Bounded by
# timeouts; figures are printed, not asserted.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need ibv_rc_pingpong
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
secs=${IBEMU_TEST_TIMEOUT_BULK:-300}
port=18700
prog=$IBEMU_BUILDDIR/tests/progs/net_break
run=(env "LD_PRELOAD=$IBEMU_LIB_PATH" "$prog")
if [ -x "$prog" ]; then
	if netns_pair "$dir" "$secs" "$port" \
		1 "${run[@]}" survivor "$port" bulk ::: \
		2 "${run[@]}" peer "$(netns_addr 1)" "$port" &&
	   grep -q "^bulk: .* received intact" "$dir/server.out"; then
		pass "1 GiB over RC from node 2 to node 1: $(grep '^bulk' "$dir/server.out")"
	else
		sc_fail_pair "1 GiB over RC from node 2 (client) to node 1 (server), checked"
	fi
else
	fail "$prog was not built"
fi
port=$((port + 1))
args=(ibv_rc_pingpong -d ibemu0 -p "$port" -s 1048576 -n 1024 -c)
if netns_pair "$dir" "$secs" "$port" \
	1 "$IBEMU" run -- "${args[@]}" ::: \
	2 "$IBEMU" run -- "${args[@]}" "$(netns_addr 1)" &&
   grep -q "^2147483648 bytes in" "$dir/client.out" &&
   grep -q "^2147483648 bytes in" "$dir/server.out"; then
	pass "1 GiB each way over RC across nodes, checked: $(grep -m1 'bytes in' "$dir/client.out")"
else
	sc_fail_pair "1 GiB over RC across nodes"
fi
finish
