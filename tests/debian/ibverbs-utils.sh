#!/bin/bash
# Debian's unmodified ibverbs-utils over ibemu: each ping-pong's server and
# client on loopback, each bounded by a timeout; a check passes when both
# exit 0.  Every transport is its own check and none is skipped: one that
# ibemu does not carry yet fails.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need ibv_rc_pingpong
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((20000 + ($$ % 200) * 32))

# pingpong NAME PROGRAM [ARGS...]: server and client with the same ARGS.
SC_OPTS="-d ibemu0"
pingpong()
{
	sc_check 'grep -m1 "bytes in" "$dir/client.out"' "$@"
}

pingpong "rc default" ibv_rc_pingpong -n 500
pingpong "rc events" ibv_rc_pingpong -n 500 -e
pingpong "rc check" ibv_rc_pingpong -n 500 -c
pingpong "rc new send API" ibv_rc_pingpong -n 500 -N
for size in 1 4096 65536 1048576; do
	pingpong "rc -s $size" ibv_rc_pingpong -n 100 -s "$size" -c
done
pingpong "rc -s 4096 events" ibv_rc_pingpong -n 100 -s 4096 -e -c
pingpong "uc default" ibv_uc_pingpong -n 500
pingpong "uc -s 65536 check" ibv_uc_pingpong -n 100 -s 65536 -c
# ibemu0's active MTU is 4096: a UD message must fit in one packet.
pingpong "ud default" ibv_ud_pingpong -n 500
pingpong "ud -s 1 check" ibv_ud_pingpong -n 500 -s 1 -c
pingpong "ud -s 4056 events" ibv_ud_pingpong -n 200 -s 4056 -e
pingpong "srq default" ibv_srq_pingpong -n 200
pingpong "srq -q 4 check events" ibv_srq_pingpong -n 100 -q 4 -c -e
# XRC: one client (-c, its client count, stays 1: ibemu does not share an
# XRC domain between processes, ibemu(7)); it has no data check option
# and says "success" when every message came back.
xsrq_pingpong()
{
	sc_check 'grep -m1 success "$dir/client.out"' "$@"
}
xsrq_pingpong "xsrq default" ibv_xsrq_pingpong -n 200
xsrq_pingpong "xsrq -s 65536 events" ibv_xsrq_pingpong -n 50 -s 65536 -e
xsrq_pingpong "xsrq -s 1 -m 256" ibv_xsrq_pingpong -n 100 -s 1 -m 256
finish
