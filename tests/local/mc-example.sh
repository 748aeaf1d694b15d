#!/bin/bash
# The manual's multicast example (examples/mc_example.c, chapters 7.3 and
# 8.2) through examples/run-mc-example.sh under `ibemu run`: three
# receiver processes of two QPs each join the group through the RDMA CM,
# one sender sends; every receiver checks every byte of every message.
# Without a bind address, bound to 127.0.0.1, and to the node's own
# non-loopback address.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need timeout
[ -x "$IBEMU_BUILDDIR/examples/mc_example" ] ||
	{ echo "FAIL: $IBEMU_BUILDDIR/examples/mc_example was not built"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
# 100 messages of 1000 bytes, every byte checked by every receiver.
count=100 size=1000

# mc_run NAME RUN-MC-EXAMPLE-ARGS...
mc_run() {
	local name=$1 rc n
	shift
	MC_EXAMPLE=$IBEMU_BUILDDIR/examples/mc_example \
		bash "$IBEMU_SRCDIR/examples/run-mc-example.sh" \
		-w "$IBEMU run --" -r 3 -c 2 -C $count -S $size "$@" \
		>"$dir/out" 2>&1
	rc=$?
	n=$(grep -c "^receiver [0-9] (exit 0): joined: 2 connection(s) received $count messages of $size bytes on 2 connection(s), every byte checked" "$dir/out")
	if [ "$rc" = 0 ] && [ "$n" = 3 ] &&
	   grep -q "^sender (exit 0): .*sent $count messages" "$dir/out"; then
		pass "$name: 3 receivers x 2 QPs, $count messages each, every byte checked"
	else
		fail "$name: run-mc-example.sh exit $rc, $n receivers complete"
		sed 's/^/    /' "$dir/out"
	fi
}

mc_run "multicast example 239.1.3.1" -m 239.1.3.1
mc_run "multicast example 239.1.3.2, bound to 127.0.0.1" -m 239.1.3.2 -b 127.0.0.1
# An unmapped group (-M): the MGID itself, joined on the bound id.
mc_run "multicast example, unmapped MGID ff12:401b:ffff::3:4, bound to 127.0.0.1" \
	-M ff12:401b:ffff::3:4 -b 127.0.0.1
addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -n "$addr4" ]; then
	mc_run "multicast example 239.1.3.3, bound to $addr4" -m 239.1.3.3 -b "$addr4"
else
	echo "note: no global IPv4 address on this node"
fi
finish
