#!/bin/bash
# The manual's RC example (examples/rc_example) over ibemu on loopback,
# through examples/run-rc-example.sh (the README's demo): the client
# receives the server's SEND, RDMA READs the server's buffer and RDMA
# WRITEs a new message into it while the server sits in a TCP read.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
[ -x "$IBEMU_BUILDDIR/examples/rc_example" ] ||
	{ echo "FAIL: $IBEMU_BUILDDIR/examples/rc_example was not built"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT

# The script bounds each process (RC_EXAMPLE_TIMEOUT) and kills its server.
IBEMU_BUILDDIR=$IBEMU_BUILDDIR RC_EXAMPLE_TIMEOUT=${IBEMU_TEST_TIMEOUT:-60} \
	bash "$IBEMU_SRCDIR/examples/run-rc-example.sh" >"$dir/out" 2>&1
rc=$?
cat "$dir/out"
echo "---"
awk '/^=== server/ { f = 1; next } /^=== client/ { f = 0 } f' "$dir/out" >"$dir/server"
awk '/^=== client/ { f = 1; next } /^run-rc-example:/ { f = 0 } f' "$dir/out" >"$dir/client"
srv=$dir/server cli=$dir/client

[ "$rc" = 0 ] && pass "run-rc-example.sh exited 0" || fail "run-rc-example.sh exited $rc"
grep -q "^=== server (exit 0)" "$dir/out" && pass "server exited 0" || fail "server: $(grep '^=== server' "$dir/out")"
grep -q "^=== client (exit 0)" "$dir/out" && pass "client exited 0" || fail "client: $(grep '^=== client' "$dir/out")"
grep -q "QP state was changed to RTS" "$srv" && grep -q "QP state was changed to RTS" "$cli" &&
	pass "both QPs reached RTS" || fail "QP bring-up"
grep -qF "Message is: 'SEND operation '" "$cli" &&
	pass "client received the server's SEND" || fail "client did not print the SEND message"
grep -qF "Contents of server's buffer: 'RDMA read operation '" "$cli" &&
	pass "client's RDMA READ returned the server's buffer" || fail "RDMA READ result"
grep -qF "Contents of server buffer: 'RDMA write operation'" "$srv" &&
	pass "server's buffer holds the client's RDMA WRITE" || fail "RDMA WRITE did not land in the server's buffer"
grep -q "test result is 0" "$srv" && grep -q "test result is 0" "$cli" &&
	pass "both report test result 0" || fail "test result"
finish
