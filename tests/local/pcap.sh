#!/bin/bash
# IBEMU_PCAP: the packets ibemu carries are real IB transport headers that
# tshark dissects as RoCEv2 (doc/design.md §15 "Packet capture"):
# opcodes, PSNs, AETH, RETH, AtomicETH/AtomicAckETH and DETH, and not one
# malformed packet.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need tshark
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((24000 + ($$ % 200) * 16))

# capture NAME PROGRAM [ARGS...]: server and client, one capture each.
capture()
{
	local name=$1
	shift
	rm -f "$dir"/*.pcap
	port=$(sc_pick_port $((port + 1)))
	if IBEMU_PCAP="$dir/cap-%p.pcap" sc_pair "$dir" "$secs" "$port" \
		"$IBEMU" run -- "$@" -p "$port" ::: \
		"$IBEMU" run -- "$@" -p "$port" localhost; then
		return 0
	fi
	fail "$name: server exited $SC_SERVER_RC, client $SC_CLIENT_RC"
	tail -n 5 "$dir/server.out" "$dir/client.out"
	return 1
}

# fields FIELD...: the fields of every InfiniBand packet of every capture.
fields()
{
	local f args=()
	for f in "$@"; do args+=(-e "$f"); done
	for f in "$dir"/*.pcap; do
		tshark -r "$f" -Y infiniband -T fields "${args[@]}" 2>/dev/null
	done
}

expect_opcode()
{
	local what=$1 code=$2 n
	n=$(fields infiniband.bth.opcode | grep -cx "$code")
	[ "$n" -gt 0 ] && pass "$what: $n packets with opcode $code" ||
		fail "$what: no packet with opcode $code"
}

no_malformed()
{
	local what=$1 n=0 f
	for f in "$dir"/*.pcap; do
		n=$((n + $(tshark -r "$f" -Y "_ws.malformed || _ws.expert.severity >= 6" 2>/dev/null | wc -l)))
	done
	[ "$n" = 0 ] && pass "$what: no malformed packet" || fail "$what: $n malformed packets"
}

if capture "RC send" ibv_rc_pingpong -d ibemu0 -n 3 -s 5000; then
	[ "$(ls "$dir"/*.pcap | wc -l)" = 2 ] && pass "RC send: one capture per process" ||
		fail "RC send: captures: $(ls "$dir")"
	expect_opcode "RC send" 0    # SEND_FIRST
	expect_opcode "RC send" 1    # SEND_MIDDLE
	expect_opcode "RC send" 2    # SEND_LAST
	expect_opcode "RC send" 17   # ACKNOWLEDGE
	# The packets of one message carry consecutive PSNs (IBA 9.7.1).
	bad=$(for f in "$dir"/*.pcap; do
		tshark -r "$f" -Y "infiniband.bth.opcode <= 2" -T fields \
			-e infiniband.bth.opcode -e infiniband.bth.psn 2>/dev/null
	done | awk '$1 != 0 && $2 != prev + 1 { bad++ } { prev = $2 } END { print bad + 0 }')
	[ "$bad" = 0 ] && pass "RC send: consecutive PSNs within messages" || fail "RC send: $bad PSN gaps"
	syn=$(fields infiniband.aeth.syndrome | grep -c .)
	[ "$syn" -gt 0 ] && pass "RC send: $syn AETH syndromes dissected" || fail "RC send: no AETH"
	no_malformed "RC send"
fi

# RDMA READ and WRITE as packets: requester-placed RDMA sends none.
if IBEMU_CMA=0 capture "RC example" "$IBEMU_BUILDDIR/examples/rc_example" -d ibemu0; then
	expect_opcode "RC example" 12   # RDMA_READ_REQUEST
	expect_opcode "RC example" 16   # RDMA_READ_RESPONSE_ONLY
	expect_opcode "RC example" 10   # RDMA_WRITE_ONLY
	n=$(fields infiniband.reth.dmalen | grep -c .)
	[ "$n" -gt 0 ] && pass "RC example: $n RETHs dissected" || fail "RC example: no RETH"
	no_malformed "RC example"
fi

# Atomics as packets: atomics the requester places itself send none.
if IBEMU_CMA=0 capture "atomics" ib_atomic_lat -d ibemu0 -n 5 -F; then
	expect_opcode "atomics" 20   # FETCH_ADD
	expect_opcode "atomics" 18   # ATOMIC_ACKNOWLEDGE
	no_malformed "atomics"
fi

if capture "UD" ibv_ud_pingpong -d ibemu0 -n 3 -s 512; then
	expect_opcode "UD" 100       # UD SEND_ONLY
	n=$(fields infiniband.deth.srcqp | grep -c .)
	[ "$n" -gt 0 ] && pass "UD: $n DETHs dissected" || fail "UD: no DETH"
	no_malformed "UD"
fi
finish
