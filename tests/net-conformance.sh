#!/bin/bash
# The conformance suite's two-process suites (RC, UC, UD: the peer
# harness, conformance/peer.h) with the parent in node 1 and its peer, the
# forked child, in node 2 (CF_PEER_NS: the child enters node 2's network
# and mount namespaces before it opens its device), each node with its own
# /dev/shm and nothing configured (tests/netns-lib.sh).  Every verb crosses
# the TCP transport between the nodes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/netns-lib.sh"
need timeout
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
netns_setup 2 --own-shm
secs=${IBEMU_TEST_TIMEOUT_CONFORMANCE:-600}
for suite in rc_ uc ud; do
	CF_PEER_NS=$(netns_holder 2) CF_RC_STRESS_MSGS=3000 \
		netns_exec 1 timeout -k 5 "$secs" \
		env "LD_PRELOAD=$IBEMU_LIB_PATH" \
		"$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 -s "$suite" \
		>"$dir/$suite.out" 2>&1
	rc=$?
	if [ "$rc" = 0 ]; then
		pass "suite $suite, peers in two nodes: $(grep -E '^ +tests ' "$dir/$suite.out")"
	else
		fail "suite $suite, peers in two nodes: exit $rc (124: timed out after ${secs}s)"
		grep -E "^ +[0-9]+\. |tests |CF_PEER_NS" "$dir/$suite.out" | head -n 40
	fi
done
# The peers attached node 2: its segment is in node 2's /dev/shm.
if [ -n "$(netns_exec 2 find /dev/shm -name "v*-$IBEMU_NODE" 2>/dev/null)" ]; then
	pass "the peers were node 2's processes (its segment is in node 2's /dev/shm)"
else
	fail "no segment of node $IBEMU_NODE in node 2's /dev/shm: the peers did not run there"
fi
finish
