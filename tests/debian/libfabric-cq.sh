#!/bin/bash
# fi_cq(3) through Debian's libfabric and its verbs provider on ibemu0
# (tests/progs/fabric_cq.c): for FI_EP_MSG ("verbs") and FI_EP_RDM
# ("verbs;ofi_rxm"), fi_cq_sread with FI_WAIT_FD and FI_WAIT_UNSPEC woken
# by the peer's completion, timing out with -FI_EAGAIN, woken by
# fi_cq_signal; FI_WAIT_MUTEX_COND and FI_WAIT_YIELD the same where the
# provider offers them (verbs and RxM refuse them at fi_cq_open: a
# note); FI_WAIT_NONE refusing it; and the error entries
# fi_cq_readerr gives for a write with a wrong key (IBV_WC_REM_ACCESS_ERR)
# and for receives flushed by fi_shutdown (IBV_WC_WR_FLUSH_ERR) or
# cancelled.  Server and client on the node's own non-loopback address,
# as tests/debian/libfabric.sh runs fi_pingpong; each line of theirs is
# passed on.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
prog=$IBEMU_BUILDDIR/tests/progs/fabric_cq
if [ ! -x "$prog" ]; then
	echo "SKIP: tests/progs/fabric_cq not built (configure found no libfabric-dev)"
	exit 77
fi
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((29400 + ($$ % 200) * 4))
export FI_PROVIDER=verbs,ofi_rxm

addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -z "$addr4" ]; then
	echo "note: no global IPv4 address on this node: endpoints on 127.0.0.1"
	addr4=127.0.0.1
fi

for ep in msg rdm; do
	port=$(sc_pick_port $((port + 1)))
	sc_pair "$dir" "$secs" "$port" \
		"$IBEMU" run -- "$prog" $ep -p "$port" -a "$addr4" ::: \
		"$IBEMU" run -- "$prog" $ep -p "$port" -a "$addr4" localhost
	for side in server client; do
		grep -E "^(ok|FAIL|note|SKIP):" "$dir/$side.out" |
			sed "s/^/$side: /"
	done
	if [ "$SC_SERVER_RC" = 77 ] || [ "$SC_CLIENT_RC" = 77 ]; then
		echo "SKIP: fabric_cq $ep: libfabric has no such provider here"
		exit 77
	fi
	bad=$(cat "$dir/server.out" "$dir/client.out" | grep -c "^FAIL:")
	if [ "$SC_SERVER_RC" = 0 ] && [ "$SC_CLIENT_RC" = 0 ] && [ "$bad" = 0 ]; then
		pass "fabric_cq $ep: $(grep -c "^ok:" "$dir/client.out") client" \
			"and $(grep -c "^ok:" "$dir/server.out") server checks"
	else
		sc_fail_pair "fabric_cq $ep ($bad FAIL lines)"
	fi
done
finish
