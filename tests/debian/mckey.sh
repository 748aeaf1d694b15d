#!/bin/bash
# rdma-core's mckey, unmodified, under `ibemu run`: three receivers of two
# QPs each join an IP multicast group through the RDMA CM, then one
# sender sends to it; every receiver must get every message on each of
# its QPs (mckey waits for message_count completions per QP and checks
# the data, so a lost message leaves it waiting until our timeout).
# Without a bind address, bound to 127.0.0.1, to the node's own
# non-loopback address, in the IPoIB port space, IPv6, an MGID given
# as such (AF_IB), and with a send-only sender.  Every process must see the same MGID (the kernel's
# IPoIB mapping of the address) and the same MLID.
. "$(dirname "$0")/../lib/lib.sh"
need mckey
need timeout
need stdbuf
dir=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$dir"
	ibemu_cleanup
}
trap cleanup EXIT
secs=${IBEMU_TEST_TIMEOUT:-40}
count=20

# run_mckey NAME MGID MCKEY-ARGS... [--sender SENDER-ONLY-ARGS...]
run_mckey() {
	local name=$1 mgid=$2 i rc ok=1 mlids
	shift 2
	local -a args=() sargs=()
	while [ $# -gt 0 ] && [ "$1" != --sender ]; do args+=("$1"); shift; done
	[ $# -gt 0 ] && { shift; sargs=("$@"); }
	rm -f "$dir"/*.out
	pids=()
	for i in 1 2 3; do
		timeout "$secs" stdbuf -oL "$IBEMU" run -- mckey "${args[@]}" -c 2 -C $count \
			>"$dir/r$i.out" 2>&1 &
		pids+=($!)
	done
	# The sender starts once every receiver joined: its QPs are attached
	# and their receives posted before the join.
	for i in 1 2 3; do
		local n=0
		until [ "$(grep -c '^mckey: joined' "$dir/r$i.out" 2>/dev/null)" = 2 ]; do
			n=$((n + 1))
			if [ $n -gt $((secs * 10)) ] || ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
				break
			fi
			sleep 0.1
		done
	done
	timeout "$secs" "$IBEMU" run -- mckey "${args[@]}" -s -c 1 -C $count "${sargs[@]}" \
		>"$dir/s.out" 2>&1
	rc=$?
	[ "$rc" = 0 ] && grep -q "^data transfers complete" "$dir/s.out" || ok=0
	for i in 1 2 3; do
		wait "${pids[$((i - 1))]}"
		r=$?
		if [ "$r" != 0 ] || ! grep -q "^data transfers complete" "$dir/r$i.out" ||
		   ! grep -q "^return status 0" "$dir/r$i.out"; then
			ok=0
		fi
	done
	pids=()
	mlids=$(sed -n 's/^mckey: joined dgid: \([^ ]*\) mlid \(0x[0-9a-f]*\) .*/\1 \2/p' \
		"$dir"/*.out | sort -u)
	if [ "$ok" = 1 ] && [ "$(echo "$mlids" | wc -l)" = 1 ] &&
	   [ "${mlids%% *}" = "$mgid" ] && [ "$(grep -c '^mckey: joined' "$dir"/*.out | awk -F: '{s += $2} END {print s}')" = 7 ]; then
		pass "$name: 3 receivers x 2 QPs got all $count messages; one group $mlids"
	else
		fail "$name: sender exit $rc; groups seen: $(echo $mlids)"
		for f in "$dir"/*.out; do sed "s|^|    $(basename "$f" .out): |" "$f" | tail -n 8; done
	fi
}

# IPv4 on RDMA_PS_UDP: ff12:4001:<P_Key>::<low 28 bits> (cma_set_mgid)
run_mckey "mckey 239.1.2.3" ff12:4001:ffff::f01:203 -m 239.1.2.3
run_mckey "mckey 239.1.2.4, bound to 127.0.0.1" ff12:4001:ffff::f01:204 \
	-m 239.1.2.4 -b 127.0.0.1
addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -n "$addr4" ]; then
	run_mckey "mckey 239.1.2.5, bound to $addr4" ff12:4001:ffff::f01:205 \
		-m 239.1.2.5 -b "$addr4"
else
	echo "note: no global IPv4 address on this node"
fi
# The IPoIB port space keeps IPoIB's signature 0x401b.
run_mckey "mckey 239.1.2.6, port space IPoIB" ff12:401b:ffff::f01:206 \
	-m 239.1.2.6 -p 0x0002
# IPv6: ff12:6001:<P_Key> and the address's last 80 bits.
run_mckey "mckey ff05::1:2:7, bound to ::1" ff12:6001:ffff::1:2:7 \
	-m ff05::1:2:7 -b ::1
# An MGID given as such (-M, AF_IB) is joined as is.
run_mckey "mckey -M ff12:401b:ffff::1:2:9, bound to 127.0.0.1" \
	ff12:401b:ffff::1:2:9 -M ff12:401b:ffff::1:2:9 -b 127.0.0.1
# A send-only full member sends to the group without being attached.
run_mckey "mckey 239.1.2.8, send-only sender" ff12:4001:ffff::f01:208 \
	-m 239.1.2.8 --sender -o
finish
