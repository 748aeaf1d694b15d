#!/bin/bash
# The node's place on the IP fabric (emulator/node/fabric.c) in a network
# namespace with a known address, 10.47.0.5/24 on a dummy interface:
# `ibemu status` and `ibv_devinfo -v` show LID 5 (the host part) and GID 1
# ::ffff:10.47.0.5; a fabric file (IBEMU_FABRIC) that lists the address
# gives LID 77; IBEMU_SUBNET and IBEMU_IFACE choose another address; and
# ibv_rc_pingpong / ibv_ud_pingpong -g 1 between two processes of the node
# still work.  Needs root (ip netns); the namespace is always removed.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
secs=${IBEMU_TEST_TIMEOUT:-30}

# Inside the namespace (the script runs itself there): two processes of
# one node, GRH-addressed through GID 1, the node's IPv4 address.
if [ "${1:-}" = --pingpong ]; then
	dir=$(mktemp -d)
	trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
	port=18515
	SC_OPTS="-d ibemu0"
	sc_check 'grep -m1 "bytes in" "$dir/client.out"' \
		"rc -g 1 in the namespace" ibv_rc_pingpong -n 200 -g 1 -c
	sc_check 'grep -m1 "bytes in" "$dir/client.out"' \
		"ud -g 1 in the namespace" ibv_ud_pingpong -n 200 -g 1 -c
	finish
fi

[ "$(id -u)" = 0 ] || { echo "SKIP: ip netns needs root"; exit 77; }
need ip
need timeout
ns=ibemu-fabric-$$
dir=$(mktemp -d)
cleanup()
{
	ip netns del "$ns" 2>/dev/null
	rm -rf "$dir"
	rm -f "$(ibemu_shm_dir)"/v*-"$IBEMU_NODE"-*
	ibemu_cleanup
}
trap cleanup EXIT
if ! ip netns add "$ns" 2>/dev/null; then
	echo "SKIP: ip netns add is not permitted here"
	exit 77
fi
in_ns() { timeout "$secs" ip netns exec "$ns" "$@"; }
if ! in_ns ip link add fab0 type dummy 2>/dev/null; then
	# No dummy driver: one end of a veth pair does as well.
	in_ns ip link add fab0 type veth peer name fab1 ||
		{ echo "SKIP: no dummy or veth interface"; exit 77; }
fi
in_ns ip link set lo up
in_ns ip addr add 10.47.0.5/24 dev fab0
in_ns ip addr add 10.48.0.9/16 dev fab0
in_ns ip addr add fd47::5/64 dev fab0 nodad
in_ns ip link set fab0 up
# A subnet larger than the LID space, the address high in it.
in_ns ip link add fab2 type dummy 2>/dev/null ||
	in_ns ip link add fab2 type veth peer name fab3
in_ns ip addr add 10.200.3.4/8 dev fab2
in_ns ip link set fab2 up

# status NODE [VAR=VALUE...]: `ibemu status` of a new node in the namespace.
status()
{
	local node=$1
	shift
	in_ns env IBEMU_NODE="$IBEMU_NODE-$node" "$@" "$IBEMU" status \
		>"$dir/$node.out" 2>"$dir/$node.err"
}

# expect NODE WHAT REGEX: a line of NODE's output matches.
expect()
{
	if grep -Eq "$3" "$dir/$1.out"; then
		pass "$2"
	else
		fail "$2: no line matches '$3' in:"
		cat "$dir/$1.out" "$dir/$1.err"
	fi
}

status derived
expect derived "address from the interface" '^address +10\.47\.0\.5/24 on fab0$'
expect derived "LID 5 is the host part" '^LID +5 \(0x0005\), derived from the address$'
expect derived "port LID" '^port 1 +LID 0x0005,'
expect derived "GID 0 is fe80::/64 + port GUID (IBA 4.1.1)" '^GID\[ 0\] +fe80::'
expect derived "GID 1 is the IPv4 address" '^GID\[ 1\] +::ffff:10\.47\.0\.5$'
expect derived "GID 2 is the other IPv4 address" '^GID\[ 2\] +::ffff:10\.48\.0\.9$'
expect derived "GID 3 is the other interface's address" '^GID\[ 3\] +::ffff:10\.200\.3\.4$'
expect derived "GID 4 is the global IPv6 address" '^GID\[ 4\] +fd47::5$'
expect derived "door" '^door +TCP port 4791$'

echo "77 10.47.0.5 # this node" >"$dir/fabric"
echo "78 10.47.0.6" >>"$dir/fabric"
status file IBEMU_FABRIC="$dir/fabric"
expect file "LID 77 from the fabric file" '^LID +77 \(0x004d\), from the fabric file$'
expect file "GID 1 with a fabric file" '^GID\[ 1\] +::ffff:10\.47\.0\.5$'
if [ -s "$dir/file.err" ]; then
	fail "a good fabric file is reported:"
	cat "$dir/file.err"
else
	pass "a good fabric file is not reported"
fi

echo "78 10.47.0.5" >"$dir/bad-fabric"
echo "not a line" >>"$dir/bad-fabric"
status badfile IBEMU_FABRIC="$dir/bad-fabric"
expect badfile "LID 78 from a fabric file with a bad line" '^LID +78 '
if grep -q "$dir/bad-fabric:2: " "$dir/badfile.err"; then
	pass "a bad line is reported as file:line"
else
	fail "a bad line is not reported as file:line:"
	cat "$dir/badfile.err"
fi

status subnet IBEMU_SUBNET=10.48.0.0/16 IBEMU_TCP_PORT=5791
expect subnet "IBEMU_SUBNET chooses the address" '^address +10\.48\.0\.9/16 on fab0$'
expect subnet "LID 9 in the /16" '^LID +9 \(0x0009\), derived'
expect subnet "GID 1 is the chosen address" '^GID\[ 1\] +::ffff:10\.48\.0\.9$'
expect subnet "IBEMU_TCP_PORT" '^door +TCP port 5791$'

status large IBEMU_IFACE=fab2
expect large "IBEMU_IFACE chooses the interface" '^address +10\.200\.3\.4/8 on fab2$'
expect large "no LID from 10.200.3.4/8: hashed" '^LID +[0-9]+ \(0x[0-9a-f]+\), hashed'
if grep -q "10.200.3.4/8 on fab2 gives no LID" "$dir/large.err"; then
	pass "the hashed LID is said in the log"
else
	fail "the hashed LID is not said in the log:"
	cat "$dir/large.err"
fi

status iface IBEMU_IFACE=lo
expect iface "IBEMU_IFACE=lo chooses loopback" '^address +127\.0\.0\.1/8 on lo$'

if command -v ibv_devinfo >/dev/null; then
	in_ns env IBEMU_NODE="$IBEMU_NODE-devinfo" "$IBEMU" run -- \
		ibv_devinfo -v >"$dir/devinfo.out" 2>&1
	expect devinfo "ibv_devinfo: port_lid 5" $'port_lid:\t+5$'
	expect devinfo "ibv_devinfo: GID 1 ::ffff:10.47.0.5" \
		'GID\[ +1\]:.*0000:0000:0000:0000:0000:ffff:0a2f:0005$'
	if grep -q 'GID\[ *5\]' "$dir/devinfo.out"; then
		fail "ibv_devinfo shows an empty GID 5"
	else
		pass "ibv_devinfo: no GID beyond the node's addresses"
	fi
else
	echo "ibv_devinfo is not installed: its checks are left out"
fi

if command -v ibv_rc_pingpong >/dev/null; then
	if timeout $((3 * secs)) ip netns exec "$ns" \
		env IBEMU_NODE="$IBEMU_NODE-pp" bash "$0" --pingpong; then
		pass "pingpongs with -g 1 in the namespace"
	else
		fail "pingpongs with -g 1 in the namespace"
	fi
fi
finish
