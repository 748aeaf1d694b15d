#!/bin/bash
# Automatic path migration on a two-port ibemu0 (IBEMU_PORTS=2), through
# the manual's APM program (examples/apm_example, chapter 8.1) and
# examples/run-apm-example.sh:
#  - as the manual runs it: alternate paths loaded, both QPs ARMED,
#    software migration by the client, IBV_EVENT_PATH_MIG on the server,
#    messages checked on the new path;
#  - a port taken down under traffic (`ibemu port down 1` while 1000
#    messages flow each way): IBV_EVENT_PORT_ERR and IBV_EVENT_PATH_MIG
#    on both sides, every message once and in order, every completion
#    successful, both QPs on port 2 after;
#  - the same with no alternate path: the traffic ends in a transport
#    retry error (RETRY_EXC_ERR) on one side;
#  - on a one-port ibemu0 the program says it needs two ports, and
#    `ibemu port down 2` is refused;
#  - the conformance suite's apm tests (conformance/test_apm.c) pass on
#    two ports and skip, saying why, on one (make check's conformance run
#    has one port).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/example-lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need timeout
[ -x "$IBEMU_BUILDDIR/examples/apm_example" ] ||
	{ echo "FAIL: $IBEMU_BUILDDIR/examples/apm_example was not built"; exit 1; }
[ -x "$IBEMU_BUILDDIR/ibemu-conformance" ] ||
	{ echo "FAIL: $IBEMU_BUILDDIR/ibemu-conformance was not built"; exit 1; }
dir=$(mktemp -d)
base_node=$IBEMU_NODE
downer=""
trap '[ -n "$downer" ] && kill "$downer" 2>/dev/null; rm -rf "$dir"; for n in a b c d e; do IBEMU_NODE=$base_node-$n ibemu_cleanup; done' EXIT

# run NODE PORTS [run-apm-example.sh arguments]: ex_run
# (tests/lib/example-lib.sh) on node NODE with PORTS ports.
run() {
	export IBEMU_NODE=$base_node-$1 IBEMU_PORTS=$2
	shift 2
	ex_run apm "" "$@"
}

# has WHO LINE: WHO's output holds LINE exactly.
has() { grep -qxF "$2" "$dir/$1"; }

# down_later SECONDS: port 1 of the current node goes down then.
down_later() {
	(sleep "$1"; "$IBEMU" port down 1 >/dev/null) &
	downer=$!
}

# 1. Software migration, as the manual's program does it.
run a 2 -- -n 100
[ "$RC" = 0 ] && pass "software migration: server and client exited 0" ||
	fail "software migration: script $RC, server ${RC_S:-?}, client ${RC_C:-?}"
has client "client: migrated by software" &&
has server "server: async event path migrated" &&
has server "server: primary path now port 2 to LID $(sed -n 's/^client: connected, port-2 LID //p' "$dir/client"), MIGRATED" &&
has client "client: 100 messages each way on the alternate path, every one checked; PATH_MIG events 0" &&
	pass "software migration: the server's HCA followed (PATH_MIG), 100 messages checked on port 2" ||
	fail "software migration: output"

# 2. Port 1 down under traffic, alternate paths armed.
IBEMU_NODE=$base_node-b IBEMU_PORTS=2 "$IBEMU" status >/dev/null
IBEMU_NODE=$base_node-b down_later 1
run b 2 -- -a -n 1000 -i 2000
wait "$downer"; downer=""
[ "$RC" = 0 ] && pass "port down: server and client exited 0" ||
	fail "port down: script $RC, server ${RC_S:-?}, client ${RC_C:-?}"
for who in server client; do
	has $who "$who: async event port error" &&
	has $who "$who: async event path migrated" &&
	has $who "$who: 1000 messages each way on the alternate path, every one checked; PATH_MIG events 1" &&
		pass "port down: the $who saw PORT_ERR and PATH_MIG, 1000 messages in order" ||
		fail "port down: the $who's output"
done
grep -q "^port 1 .*PORT_DOWN" <("$IBEMU" status) &&
	pass "ibemu status shows port 1 down" || fail "ibemu status: port 1"

# 3. Port 1 down under traffic, no alternate path.
IBEMU_NODE=$base_node-c IBEMU_PORTS=2 "$IBEMU" status >/dev/null
IBEMU_NODE=$base_node-c down_later 1
run c 2 -- -a -N -n 1000 -i 2000
wait "$downer"; downer=""
# Both stream: whichever side's send meets the dead path first ends in
# the retry error, and the other waits for messages that never come.
retry_exc="apm_example: send: transport retry counter exceeded"
[ "$RC" != 0 ] && { has client "$retry_exc" || has server "$retry_exc"; } &&
	pass "port down, no alternate path: a send ends in RETRY_EXC_ERR" ||
	fail "port down, no alternate path: script $RC, client ${RC_C:-?}"

# 4. One port.
run d 1 -- -n 10
[ "$RC" != 0 ] && grep -q "has one port: APM needs two" "$dir/out" &&
	pass "one port: the program says APM needs two" ||
	fail "one port: script $RC"
if IBEMU_NODE=$base_node-d "$IBEMU" port down 2 2>"$dir/err"; then
	fail "ibemu port down 2 on a one-port HCA succeeded"
else
	pass "ibemu port down 2 on one port: $(cat "$dir/err")"
fi

# 5. The conformance suite's APM tests, on NODE with PORTS ports: output
# in $dir/conf, RC its exit status.
conformance() {
	IBEMU_NODE=$base_node-$1 IBEMU_PORTS=$2 LD_PRELOAD=$IBEMU_LIB_PATH \
		timeout "${IBEMU_TEST_TIMEOUT:-60}" \
		"$IBEMU_BUILDDIR/ibemu-conformance" -d ibemu0 -s apm \
		>"$dir/conf" 2>&1
	RC=$?
	echo "--- ibemu-conformance -s apm, $2 port(s) (exit $RC)"
	sed 's/^/    /' "$dir/conf"
}
apm_tests="alt_path_arms software_migration bad_mig_state"
conformance e 2
ok=1
for t in $apm_tests; do
	grep -q "Test: $t \.\.\.passed" "$dir/conf" || ok=0
done
[ "$RC" = 0 ] && [ $ok = 1 ] && ! grep -q "^SKIP: apm/" "$dir/conf" &&
	pass "conformance apm suite on two ports: $apm_tests passed" ||
	fail "conformance apm suite on two ports (exit $RC)"
conformance d 1
[ "$RC" = 0 ] && [ "$(grep -c "^SKIP: apm/.*: the device has 1 port" "$dir/conf")" = 3 ] &&
	pass "conformance apm suite on one port: its 3 tests skip, saying why" ||
	fail "conformance apm suite on one port (exit $RC)"
finish
