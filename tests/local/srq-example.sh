#!/bin/bash
# The manual's SRQ program (examples/srq_example, chapter 8.3) over ibemu
# through examples/run-srq-example.sh: several RC QPs connected through
# the RDMA CM receive through one SRQ on each side; every message and
# reply is checked, with the QP its completion names.  On 127.0.0.1 and on
# the node's own non-loopback address; then with one message broken on
# purpose (-x), the side that checks it must fail and say why.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/example-lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need timeout
[ -x "$IBEMU_BUILDDIR/examples/srq_example" ] ||
	{ echo "FAIL: $IBEMU_BUILDDIR/examples/srq_example was not built"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT

# run NAME [run-srq-example.sh arguments]: ex_run (tests/lib/example-lib.sh).
run() {
	local name=$1
	shift
	ex_run srq "$name: " "$@"
}

# check NAME ADDR QPS MAX_WR COUNT SIZE: a good run, counts verified.
check() {
	local name=$1 addr=$2 q=$3 m=$4 n=$5 s=$6 i per="" bursts
	run "$name" -a "$addr" -- -q "$q" -m "$m" -n "$n" -s "$s"
	# Message k goes on the client's QP k % q; the server accepts the
	# connections in the order the client makes them.
	for i in $(seq 0 $((q - 1))); do
		per="$per $(((n - i + q - 1) / q))"
	done
	bursts=$(((n + m - 1) / m))
	if [ "$RC" = 0 ] && [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ]; then
		pass "$name: server and client exited 0"
	else
		fail "$name: script $RC, server ${RC_S:-?}, client ${RC_C:-?}"
	fi
	grep -qx "server: one SRQ of [0-9]* receives for $q QPs" "$dir/server" &&
	grep -qx "client: one SRQ of [0-9]* receives for $q QPs" "$dir/client" &&
		pass "$name: one SRQ for the $q QPs on each side" ||
		fail "$name: SRQ set-up lines"
	[ "$(grep -c "^server: QP [0-9]* connected" "$dir/server")" = "$q" ] &&
	[ "$(grep -c "^client: QP [0-9]* (number [0-9]*) connected" "$dir/client")" = "$q" ] &&
		pass "$name: $q connections on each side" ||
		fail "$name: connections"
	grep -qxF "server: $n messages of $s bytes on $q QPs through one SRQ, every byte checked; $bursts bursts replied to; per QP:$per" "$dir/server" &&
		pass "$name: the server checked $n messages, per QP:$per" ||
		fail "$name: server's count (expected per QP:$per, $bursts bursts)"
	grep -qxF "client: $n messages of $s bytes sent on $q QPs in $bursts bursts of up to $m; $((bursts * q)) replies through one SRQ, every byte checked" "$dir/client" &&
		pass "$name: the client checked $((bursts * q)) replies" ||
		fail "$name: client's count"
}

check "127.0.0.1" 127.0.0.1 4 64 1000 256
addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
if [ -n "$addr4" ]; then
	check "$addr4" "$addr4" 7 10 333 4000
else
	echo "note: no global IPv4 address on this node"
	check "127.0.0.1, 7 QPs" 127.0.0.1 7 10 333 4000
fi

# fault NAME WHO EXPECT SIDE-OPTION: one message broken on purpose; the
# script and WHO (the side that checks) exit non-zero, WHO saying EXPECT.
fault() {
	local name=$1 who=$2 expect=$3 opt=$4 st
	run "$name" "$opt" "-x $name" -- -t 3 -n 200 -m 16
	[ "$who" = server ] && st=$RC_S || st=$RC_C
	if [ "$RC" != 0 ] && [ "$st" = 1 ] && grep -qE "$expect" "$dir/$who"; then
		pass "-x $name: the $who exits 1: $(grep -E "$expect" "$dir/$who" | head -n 1)"
	else
		fail "-x $name: script $RC, $who ${st:-?}, no '$expect'"
	fi
}
fault size server "a message on QP number [0-9]+: success, 255 bytes \(256 expected\)" -C
fault byte server "a damaged, repeated or unexpected message \(number 100\)" -C
fault qp server "message 100, sent for the client's QP 0, came on QP [0-9]+ \(the client's QP 1\)" -C
fault drop client "burst 0: the server counted 3 messages on QP 0, 4 were sent" -S
finish
