#!/bin/bash
# Unmodified verbs programs with the server in one network namespace and
# the client in another, each node with its own /dev/shm and nothing
# configured (tests/lib/netns-lib.sh): the nodes meet over the TCP transport,
# LIDs derived from the addresses 10.47.0.1 and 10.47.0.2.  ibverbs-utils'
# ping-pongs (RC by LID and by GID, UC, UD, SRQ), perftest's send, write,
# read and atomic benchmarks (short runs, figures not asserted) and the
# manual's RC example.  Each pair is bounded by a timeout; a check passes
# when both sides exit 0 (and, where the program checks data, it did).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need ibv_rc_pingpong
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
secs=${IBEMU_TEST_TIMEOUT:-30}
port=18515
srv=$(netns_addr 1)

# xcheck SUMMARY NAME PROGRAM [ARGS...]: sc_check (serverclient.sh) with
# PROGRAM as server in node 1 and as client of $srv in node 2.
netns_sc_nodes 1 2
SC_OPTS="-d ibemu0"
xcheck()
{
	local summary=$1 name=$2
	shift 2
	sc_check "$summary" "$name across nodes" "$@"
}

pingpong() { xcheck 'grep -m1 "bytes in" "$dir/client.out"' "$@"; }

# Each node's LID is its address's host part within the subnet, GID 1 its
# IPv4 address: with them alike on both nodes, a program would talk to
# itself and pass here for nothing.
for i in 1 2; do
	netns_exec "$i" "$IBEMU" run -- ibv_devinfo -v -d ibemu0 \
		>"$dir/devinfo$i" 2>&1
	lid=$(awk '/port_lid:/ { print $2; exit }' "$dir/devinfo$i")
	gid1=$(awk '/GID\[ *1\]/ { print $NF; exit }' "$dir/devinfo$i")
	[ "$lid" = "$i" ] && pass "node $i's LID is $i" ||
		fail "node $i's LID is '$lid', not $i"
	case $gid1 in
	*:ffff:10.47.0.$i|*:ffff:0a2f:000$i)
		pass "node $i's GID 1 is its IPv4 address: $gid1" ;;
	*)
		fail "node $i's GID 1 is '$gid1', not ::ffff:10.47.0.$i" ;;
	esac
done

# LID-addressed: each side's LID is its address's host part.
pingpong "rc" ibv_rc_pingpong -n 500 -c
pingpong "rc -s 65536 events" ibv_rc_pingpong -n 100 -s 65536 -e -c
# GRH-addressed: GID 1 is the node's IPv4 address (::ffff:10.47.0.I).
pingpong "rc -g 1" ibv_rc_pingpong -n 500 -g 1 -c
pingpong "uc" ibv_uc_pingpong -n 500 -c
pingpong "uc -g 1" ibv_uc_pingpong -n 200 -g 1 -c
pingpong "ud" ibv_ud_pingpong -n 500 -c
pingpong "ud -g 1" ibv_ud_pingpong -n 200 -g 1 -c
pingpong "srq" ibv_srq_pingpong -n 200 -c
pingpong "srq -q 4 events" ibv_srq_pingpong -n 100 -q 4 -c -e

SC_OPTS="-d ibemu0 -i 1 -F"
perf()
{
	xcheck "awk '/#bytes/ { getline; \$1 = \$1; print; exit }' \"\$dir/client.out\"" "$@"
}
perf "ib_send_bw" ib_send_bw -n 1000 -s 65536
perf "ib_write_bw" ib_write_bw -n 1000 -s 65536
perf "ib_read_bw" ib_read_bw -n 1000 -s 65536
perf "ib_atomic_bw" ib_atomic_bw -n 1000
perf "ib_send_lat" ib_send_lat -n 1000 -s 8
perf "ib_write_lat" ib_write_lat -n 1000 -s 8
perf "ib_read_lat" ib_read_lat -n 1000 -s 8

# The manual's RC example (as tests/local/rc-example.sh checks it on one node):
# the client receives the server's SEND, RDMA READs the server's buffer
# and RDMA WRITEs a message into it.
rcx=$IBEMU_BUILDDIR/examples/rc_example
if [ -x "$rcx" ]; then
	port=$((port + 1))
	netns_pair "$dir" "$secs" "$port" \
		1 "$IBEMU" run -- "$rcx" -d ibemu0 -p "$port" ::: \
		2 "$IBEMU" run -- "$rcx" -d ibemu0 -p "$port" "$srv"
	if [ "$NETNS_SERVER_RC" = 0 ] && [ "$NETNS_CLIENT_RC" = 0 ] &&
	   grep -qF "Message is: 'SEND operation '" "$dir/client.out" &&
	   grep -qF "Contents of server's buffer: 'RDMA read operation '" "$dir/client.out" &&
	   grep -qF "Contents of server buffer: 'RDMA write operation'" "$dir/server.out" &&
	   grep -q "test result is 0" "$dir/server.out" &&
	   grep -q "test result is 0" "$dir/client.out"; then
		pass "rc_example across nodes: SEND, RDMA READ and RDMA WRITE"
	else
		sc_fail_pair "rc_example across nodes"
	fi
else
	fail "$rcx was not built"
fi
finish
