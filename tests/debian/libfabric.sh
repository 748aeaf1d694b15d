#!/bin/bash
# libfabric's verbs provider, unmodified, on ibemu0: fi_info lists its
# domains for the three endpoint types, and fi_pingpong passes as server
# and client on the node's own non-loopback address with FI_EP_DGRAM
# (UD QPs), FI_EP_MSG (RC QPs connected through the RDMA CM) and
# FI_EP_RDM (RxM over MSG endpoints), every size with its data checked
# (-c).  Figures are printed, never asserted.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need fi_pingpong
need fi_info
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((29000 + ($$ % 200) * 8))
export FI_PROVIDER=verbs,ofi_rxm,ofi_rxd

# fi_info -p verbs: ibemu0 for FI_EP_MSG, ibemu0-dgram for FI_EP_DGRAM,
# and the RxM utility provider on ibemu0 for FI_EP_RDM.
info=$(timeout -k 5 "$secs" "$IBEMU" run -- fi_info -p verbs 2>&1)
# has DOMAIN TYPE PROVIDER: is there an entry of these three?
has() {
	echo "$info" | awk -v d="$1" -v t="$2" -v p="$3" '
		$1 == "provider:" { prov = $2 }
		$1 == "domain:" { dom = $2 }
		$1 == "type:" && prov == p && dom == d && $2 == t { f = 1 }
		END { exit !f }'
}
for want in "ibemu0 FI_EP_MSG verbs" "ibemu0-dgram FI_EP_DGRAM verbs" \
	"ibemu0 FI_EP_RDM verbs;ofi_rxm"; do
	# shellcheck disable=SC2086
	if has $want; then
		pass "fi_info -p verbs lists $want"
	else
		fail "fi_info -p verbs does not list $want"
		echo "$info" | tail -n 20 | sed 's/^/    /'
	fi
done

addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -z "$addr4" ]; then
	echo "note: no global IPv4 address on this node: fi_pingpong on 127.0.0.1"
	addr4=127.0.0.1
fi

# fi_pingpong EP: server and client, the client to $addr4; the control
# port (TCP) is the one sc_pair waits for.  Every size of the default
# list is exchanged 20 times each way and checked (-c).
#
# RxM (FI_EP_RDM) has a race at the end of a run: its connection thread,
# told that the peer disconnected, closes the connection and discards
# what is left in the MSG CQ, which can be the last completion the main
# thread is still waiting for (the peer's "fin", or the send completion
# of its own), and that thread then waits for ever.  On a loaded machine
# whose threads lose their CPU for milliseconds, about 1 run in 15 ends
# so.  A run whose side timed out is made once more; the check fails if
# that one does too.
pingpong() {
	local ep=$1 sizes attempt
	for attempt in 1 2; do
		port=$(sc_pick_port $((port + 1)))
		sc_pair "$dir" "$secs" "$port" \
			"$IBEMU" run -- fi_pingpong -p verbs -e "$ep" -I 20 -c \
			-B "$port" ::: \
			"$IBEMU" run -- fi_pingpong -p verbs -e "$ep" -I 20 -c \
			-P "$port" "$addr4"
		[ "$ep" = rdm ] && [ $attempt = 1 ] &&
			{ [ "$SC_SERVER_RC" = 124 ] || [ "$SC_CLIENT_RC" = 124 ]; } ||
			break
		echo "note: fi_pingpong -e rdm: server $SC_SERVER_RC, client" \
			"$SC_CLIENT_RC (124: timed out after ${secs}s): RxM's" \
			"end-of-run race; once more"
	done
	sizes=$(awk '$2 == "20" && $3 == "=20" { printf "%s ", $1 }' \
		"$dir/client.out")
	if [ "$SC_SERVER_RC" = 0 ] && [ "$SC_CLIENT_RC" = 0 ] &&
	   [ -n "$sizes" ] && ! grep -qi "error" "$dir/client.out"; then
		pass "fi_pingpong -e $ep on $addr4: sizes ${sizes}checked;" \
			"$(awk '$1 == "64" { print $7 " us/xfer at 64 B" }' \
				"$dir/client.out")"
	else
		fail "fi_pingpong -e $ep on $addr4: server $SC_SERVER_RC, client $SC_CLIENT_RC (124: timed out after ${secs}s)"
		grep -v "^libfabric" "$dir/server.out" | tail -n 6 |
			sed 's/^/    server: /'
		grep -v "^libfabric" "$dir/client.out" | tail -n 6 |
			sed 's/^/    client: /'
	fi
}
pingpong dgram
pingpong msg
pingpong rdm

# A client whose server is not there is told so and ends: fi_pingpong
# meets its server over TCP first, so this is its refusal, not a hang.
nport=$(sc_pick_port $((port + 1)))
timeout -k 5 20 "$IBEMU" run -- fi_pingpong -p verbs -e msg -P "$nport" \
	"$addr4" >"$dir/client.out" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]; then
	pass "fi_pingpong -e msg with nobody listening: ends with $rc"
else
	fail "fi_pingpong -e msg with nobody listening: exit $rc"
	tail -n 4 "$dir/client.out" | sed 's/^/    client: /'
fi
finish
