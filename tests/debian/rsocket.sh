#!/bin/bash
# rsockets (rsocket(7)) under `ibemu run`: unmodified rdma-core rstream
# and riostream as server and client processes, on 127.0.0.1 and on the
# node's own non-loopback address, in their default run and in their
# blocking, non-blocking and rpoll modes with data verified; then
# tests/progs/rsocket_app.c (stream integrity, EAGAIN, rpoll/rselect, end of
# stream, riomap/riowrite, names, errors).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
dir=$(mktemp -d)
cleanup() {
	sc_cleanup
	rm -rf "$dir"
	ibemu_cleanup
}
trap cleanup EXIT

out=$(timeout -k 5 120 "$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/rsocket_app" 2>&1)
rc=$?
if [ "$rc" = 0 ]; then
	pass "rsocket_app: $(grep -c '^ok:' <<<"$out") checks"
else
	fail "rsocket_app exited $rc"
	grep -v '^ok:' <<<"$out" | sed 's/^/    /' | tail -n 20
fi

if ! command -v rstream >/dev/null || ! command -v riostream >/dev/null; then
	echo "note: rstream/riostream (rdmacm-utils) not installed"
	finish
fi

# rs_pair NAME LINES SECS SERVER-ARGV... ::: CLIENT-ARGV...: both under
# `ibemu run`, meeting through the CM (the client is run again while it
# finds nobody listening yet); passes when both exit 0, each printed
# LINES result lines and neither saw its data differ.
rs_pair() {
	local name=$1 lines=$2 secs=$3 ns nc
	shift 3
	sc_cm_pair "$dir" "$secs" "$@"
	ns=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]' "$dir/server.out")
	nc=$(grep -cE '^[0-9a-z_]+ +[0-9.]+[kmg]? +[0-9]' "$dir/client.out")
	if [ "$SC_SERVER_RC" = 0 ] && [ "$SC_CLIENT_RC" = 0 ] &&
	   [ "$ns" = "$lines" ] && [ "$nc" = "$lines" ] &&
	   ! grep -qi "verification failed" "$dir/server.out" "$dir/client.out"
	then
		pass "$name: $(tail -n 1 "$dir/client.out" | tr -s ' ')"
	else
		fail "$name: server $SC_SERVER_RC, client $SC_CLIENT_RC (124: timed out after ${secs}s), $ns/$nc result lines of $lines"
		sed 's/^/    server: /' "$dir/server.out" | tail -n 6
		sed 's/^/    client: /' "$dir/client.out" | tail -n 6
	fi
}

addr4=$(ip -o -4 addr show scope global 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')

# The default runs: latency and bandwidth at 64 B, 4 KiB, 64 KiB, 1 MiB
# (rstream: non-blocking calls, spinning; riostream: blocking, riowrite
# into the peer's riomap'ed buffer).
rs_pair "rstream 127.0.0.1" 8 240 rstream -p 7801 ::: \
	rstream -s 127.0.0.1 -p 7801
rs_pair "riostream 127.0.0.1" 8 240 riostream -p 7802 ::: \
	riostream -s 127.0.0.1 -p 7802

# Modes, sizes across the protocol's 16 KiB messages, data verified.
rs_pair "rstream -T b -T v, server bound (-b)" 1 120 \
	rstream -b 127.0.0.1 -p 7803 -T b -T v -S 100000 -C 200 ::: \
	rstream -s 127.0.0.1 -p 7803 -T b -T v -S 100000 -C 200
rs_pair "rstream -T n -T v" 1 120 \
	rstream -p 7804 -T n -T v -S 16385 -C 500 ::: \
	rstream -s 127.0.0.1 -p 7804 -T n -T v -S 16385 -C 500
rs_pair "riostream -T n -T v" 1 120 \
	riostream -p 7805 -T n -T v -S 4096 -C 1000 ::: \
	riostream -s 127.0.0.1 -p 7805 -T n -T v -S 4096 -C 1000

if [ -n "$addr4" ]; then
	rs_pair "rstream $addr4 -T a -T v (rpoll)" 1 120 \
		rstream -b "$addr4" -p 7806 -T a -T v -S 1000000 -C 30 ::: \
		rstream -s "$addr4" -p 7806 -T a -T v -S 1000000 -C 30
	rs_pair "rstream $addr4 -T v, 64 B" 1 120 \
		rstream -p 7807 -T v -S 64 -C 5000 ::: \
		rstream -s "$addr4" -p 7807 -T v -S 64 -C 5000
	rs_pair "riostream $addr4 -T a -T v (rpoll)" 1 120 \
		riostream -p 7808 -T a -T v -S 100000 -C 100 ::: \
		riostream -s "$addr4" -p 7808 -T a -T v -S 100000 -C 100
	rs_pair "riostream $addr4 -T b" 1 120 \
		riostream -p 7809 -T b -S 1000000 -C 20 -I 2 ::: \
		riostream -s "$addr4" -p 7809 -T b -S 1000000 -C 20 -I 2
else
	echo "note: no global IPv4 address on this node"
fi

# Nobody listens: refused at once, not a hang.
timeout -k 5 20 "$IBEMU" run -- rstream -s 127.0.0.1 -p 7899 -S 64 -C 1 \
	>"$dir/client.out" 2>&1
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] &&
   grep -qiE "refused|unreachable|timed out" "$dir/client.out"; then
	pass "rstream to a port nobody listens on: $(grep -iE 'refused|unreachable|timed out' "$dir/client.out" | head -n 1)"
else
	fail "rstream to a port nobody listens on: exit $rc"
	sed 's/^/    client: /' "$dir/client.out" | tail -n 4
fi
finish
