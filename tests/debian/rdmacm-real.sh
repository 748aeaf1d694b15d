#!/bin/bash
# ibemu beside a kernel RDMA device (a real HCA, or the kernel's rxe):
# loopback goes to ibemu0, the kernel device's addresses to it, through
# the real librdmacm (ibemu(7), "RDMA connection manager").  Runs where
# the kernel's rdma_cm is (the rxe VM of doc/testing.md); skipped here.
. "$(dirname "$0")/../lib/lib.sh"
need rping
if [ ! -c /dev/infiniband/rdma_cm ]; then
	echo "SKIP: no kernel rdma_cm (/dev/infiniband/rdma_cm): nothing to tell ibemu0 from"
	exit 77
fi
dev=
for d in /sys/class/infiniband/*; do
	[ -e "$d" ] && dev=${d##*/} && break
done
netdev=$(rdma link show 2>/dev/null | sed -n "s/^link $dev\/1 .* netdev \([^ ]*\).*/\1/p" | head -n 1)
addr=$(ip -4 -o addr show dev "${netdev:-none}" 2>/dev/null |
	awk '{print $4}' | cut -d/ -f1 | head -n 1)
if [ -z "$dev" ] || [ -z "$addr" ]; then
	echo "SKIP: no kernel RDMA device with an IPv4 address"
	exit 77
fi
echo "kernel device $dev, netdev $netdev, address $addr"

# Which device each address resolves to, and rdma_get_devices.
if out=$("$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/cm_route" \
		127.0.0.1=ibemu0 "$addr=$dev" 2>&1); then
	pass "rdma_resolve_addr: 127.0.0.1 on ibemu0, $addr on $dev"
else
	fail "rdma_resolve_addr routing"
fi
echo "$out" | sed 's/^/    /'

# Packets the kernel device sent (its hardware counters), or empty.
sent() {
	local c
	for c in /sys/class/infiniband/"$dev"/ports/1/hw_counters/sent_pkts \
		 /sys/class/infiniband/"$dev"/ports/1/counters/port_xmit_packets; do
		[ -r "$c" ] && { cat "$c"; return; }
	done
}

# rping -v, unmodified, under ibemu: server address, client address and
# the device that must carry it (a server on any address takes both);
# the kernel device's counters say which device did.
dir=$(mktemp -d)
for case in "$addr $addr $dev" "127.0.0.1 127.0.0.1 ibemu0" \
	    "0.0.0.0 $addr $dev" "0.0.0.0 127.0.0.1 ibemu0"; do
	set -- $case
	saddr=$1 caddr=$2 want_dev=$3
	before=$(sent)
	timeout -k 5 120 "$IBEMU" run -- rping -s -v -a "$saddr" -p 7472 \
		-C 10 >"$dir/server.out" 2>&1 </dev/null &
	SRV_PID=$!
	for try in $(seq 50); do
		timeout -k 5 120 "$IBEMU" run -- rping -c -v -a "$caddr" \
			-p 7472 -C 10 >"$dir/client.out" 2>&1 </dev/null
		RC_C=$?
		[ "$RC_C" = 0 ] && break
		sleep 0.5
	done
	wait "$SRV_PID"
	RC_S=$?
	after=$(sent)
	n=$(grep -c "ping data: rdma-ping-" "$dir/client.out")
	carried=$(( ${after:-0} - ${before:-0} ))
	what="rping -v -C 10, server on $saddr, client to $caddr"
	if [ "$RC_C" != 0 ] || [ "$RC_S" != 0 ] || [ "$n" != 10 ]; then
		fail "$what: client $RC_C, server $RC_S, $n pings"
		tail -n 5 "$dir/client.out" "$dir/server.out" | sed 's/^/    /'
	elif [ -n "$before" ] &&
	     { { [ "$want_dev" = "$dev" ] && [ "$carried" -lt 20 ]; } ||
	       { [ "$want_dev" = ibemu0 ] && [ "$carried" -ge 20 ]; }; }; then
		fail "$what: $dev sent $carried packets; it should be $want_dev's"
	else
		pass "$what: on $want_dev ($dev sent $carried packets)"
	fi
done
rm -rf "$dir"
finish
