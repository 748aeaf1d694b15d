#!/bin/bash
# The preload and the ibemu command: never stop a program from starting,
# inject ibemu0 (a libibverbs it does not carry: tests/local/pabi-select.sh).
. "$(dirname "$0")/../lib/lib.sh"
need ibv_devices

LD_PRELOAD=$IBEMU_LIB_PATH /bin/true && pass "/bin/true under the preload exits 0" \
	|| fail "/bin/true under the preload"

out=$("$IBEMU" run -- ibv_devices 2>&1)
guid=$(echo "$out" | awk '$1 == "ibemu0" { print $2 }')
[ -n "$guid" ] && [ "$guid" != 0000000000000000 ] && pass "ibv_devices lists ibemu0 ($guid)" \
	|| fail "ibv_devices: $out"

info=$("$IBEMU" run -- ibv_devinfo -v 2>&1)
echo "$info" | grep -q "hca_id:.*ibemu0" && pass "ibv_devinfo shows ibemu0" || fail "hca_id"
echo "$info" | grep -q "state:.*PORT_ACTIVE" && pass "PORT_ACTIVE" || fail "port state"
lid=$(echo "$info" | awk '/port_lid:/ { print $2 }')
[ -n "$lid" ] && [ "$lid" != 0 ] && pass "LID $lid" || fail "port_lid: $lid"
echo "$info" | grep -q "GID\[  0\]:.*fe80:0000:0000:0000:" && pass "GID 0 is fe80::/64" || fail "GID 0"
dguid=$(echo "$info" | awk '/node_guid:/ { gsub(":", "", $2); print $2 }')
[ "$dguid" = "$guid" ] && pass "node_guid matches ibv_devices" || fail "node_guid $dguid != $guid"

# The device node UCX probes, through the program's own stat and access:
# the interposers carry this architecture's C library versions.
probe=$IBEMU_BUILDDIR/tests/progs/devnode_probe
out=$("$IBEMU" run -- "$probe" 2>&1) && pass "devnode_probe: $out" || fail "devnode_probe: $out"
"$probe" >/dev/null 2>&1 && fail "devnode_probe passes without the preload" ||
	pass "no device node without the preload"

# ibemu0's net interface where rdma-core's tests look for it
# (provider/verbs/sysfs_net.c): the interface the node's address is on,
# for ls (statx, opendir, readdir) and Python (stat64) under the preload;
# nothing else under the device, and nothing without the preload.
net=/sys/class/infiniband/ibemu0/device/net
iface=$("$IBEMU" status | sed -n 's/^address .* on \([^ ]*\)$/\1/p')
if [ -n "$iface" ]; then
	out=$("$IBEMU" run -- ls "$net" 2>&1)
	[ "$out" = "$iface" ] && pass "ls $net: $out" || fail "ls $net: $out"
	"$IBEMU" run -- ls -d "$net/$iface" >/dev/null 2>&1 &&
		pass "$net/$iface is there" || fail "$net/$iface"
	"$IBEMU" run -- ls -d "$net/$iface-not" >/dev/null 2>&1 &&
		fail "$net/$iface-not is there" || pass "no other interface"
	"$IBEMU" run -- ls /sys/class/infiniband/ibemu0/device >/dev/null 2>&1 &&
		fail "the device directory is answered" || pass "nothing else of the device"
	ls "$net" >/dev/null 2>&1 && fail "$net without the preload" ||
		pass "no $net without the preload"
	if [ -x /usr/bin/python3 ]; then
		out=$("$IBEMU" run -- /usr/bin/python3 -c "import os, sys
print(os.path.isdir(sys.argv[1]), os.listdir(sys.argv[1]))" "$net" 2>&1)
		[ "$out" = "True ['$iface']" ] && pass "python3 sees $net: $out" ||
			fail "python3: $out"
	fi
else
	echo "the node has no address: its net directory is not checked"
fi

# The command line.
"$IBEMU" --version | grep -q "^ibemu [0-9]" && pass "ibemu --version" || fail "--version"
"$IBEMU" --help | grep -q "ibemu run" && pass "ibemu --help" || fail "--help"
"$IBEMU" run >/dev/null 2>&1; [ $? = 2 ] && pass "run without a command exits 2" || fail "run without command"
"$IBEMU" run -- /nonexistent/program 2>/dev/null; [ $? = 127 ] && pass "missing program exits 127" || fail "127"
"$IBEMU" bogus >/dev/null 2>&1; [ $? = 2 ] && pass "unknown subcommand exits 2" || fail "unknown subcommand"
"$IBEMU" run -- sh -c 'echo "$LD_PRELOAD"' | grep -q "libibemu.so" && pass "run sets LD_PRELOAD" || fail "LD_PRELOAD"
IBEMU_LIB=/nonexistent "$IBEMU" run -- true 2>/dev/null; [ $? = 1 ] && pass "bad IBEMU_LIB refused" || fail "IBEMU_LIB"
"$IBEMU" status | grep -q "node_guid" && pass "ibemu status" || fail "status"
finish
