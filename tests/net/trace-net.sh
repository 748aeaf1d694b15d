#!/bin/bash
# The run trace across nodes: the manual's RC example with its server in
# one network namespace and its client in another (tests/lib/netns-lib.sh),
# IBEMU_TRACE with %n, so that each node writes a file of its own.  Each
# file holds its node's events only; merged by time, the two hold the
# three operations with their packets and completions in order
# (tests/lib/trace_rc.py), the packets sent on one node received on the
# other.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need python3
need timeout
netns_setup 2 --own-shm
dir=$NETNS_DIR
secs=${IBEMU_TEST_TIMEOUT:-30}
port=18530
srv=$(netns_addr 1)
rcx=$IBEMU_BUILDDIR/examples/rc_example
[ -x "$rcx" ] || { fail "$rcx was not built"; finish; }

export IBEMU_TRACE="$dir/node-%n.trace"
netns_pair "$dir" "$secs" "$port" \
	1 "$IBEMU" run -- "$rcx" -d ibemu0 -p "$port" ::: \
	2 "$IBEMU" run -- "$rcx" -d ibemu0 -p "$port" "$srv"
unset IBEMU_TRACE
[ "$NETNS_SERVER_RC" = 0 ] && [ "$NETNS_CLIENT_RC" = 0 ] &&
	pass "rc_example across nodes under IBEMU_TRACE" ||
	sc_fail_pair "rc_example across nodes under IBEMU_TRACE"

files=("$dir"/node-*.trace)
[ "${#files[@]}" = 2 ] && [ -s "${files[0]}" ] && [ -s "${files[1]}" ] &&
	pass "one trace file per node: $(basename -a "${files[@]}" | tr '\n' ' ')" ||
	fail "expected two trace files, got: ${files[*]}"
for f in "${files[@]}"; do
	n=$(awk '{ print $2 }' "$f" | sort -u | wc -l)
	[ "$n" = 1 ] && pass "$(basename "$f") holds the events of one node" ||
		fail "$(basename "$f") names $n nodes"
done
cat "${files[@]}" >"$dir/merged.trace"
if python3 "$IBEMU_SRCDIR/tests/lib/trace_rc.py" "$dir/merged.trace" >"$dir/check.out"; then
	pass "merged by time: the three operations with their packets and completions in order"
else
	fail "the merged trace of the two nodes:"
fi
sed 's/^/    /' "$dir/check.out"
# The client's READ request left one node and arrived at the other.
txn=$(grep -h " ev=tx .*op=RC_RDMA_READ_REQUEST" "${files[@]}" | awk '{ sub("node=", "", $2); print $2 }' | sort -u)
rxn=$(grep -h " ev=rx .*op=RC_RDMA_READ_REQUEST" "${files[@]}" | awk '{ sub("node=", "", $2); print $2 }' | sort -u)
[ -n "$txn" ] && [ -n "$rxn" ] && [ "$txn" != "$rxn" ] &&
	[ "$(echo "$txn" | wc -l)" = 1 ] && [ "$(echo "$rxn" | wc -l)" = 1 ] &&
	pass "the READ request was sent on node $txn and received on node $rxn" ||
	fail "READ request: sent on '$txn', received on '$rxn'"
finish
