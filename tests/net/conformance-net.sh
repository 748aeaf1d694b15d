#!/bin/bash
# The conformance suite with the peer of every two-process test on
# another node: the parent in one network namespace, the peer moved into
# another (ibemu-conformance -n), each with its own node, so every packet
# between them crosses the TCP transport (doc/design.md §22 "Several
# nodes: the TCP transport").
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
netns_setup 2 --own-shm
out=$NETNS_DIR/conformance.out
# Each process's node is its network namespace's (no IBEMU_NODE).
netns_exec 1 env -u IBEMU_NODE timeout 900 "$IBEMU" run -- "$IBEMU_BUILDDIR/ibemu-conformance" \
	-d ibemu0 -n "/var/run/netns/$(netns_name 2)" >"$out" 2>&1
rc=$?
grep -E "FAIL|^ +[0-9]+\. |Run Summary|tests |asserts" "$out"
[ "$rc" = 0 ] && pass "conformance with its peers on another node" || fail "conformance across nodes: exit $rc"
finish
