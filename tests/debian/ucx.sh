#!/bin/bash
# UCX as users run it: its verbs transports on ibemu0, and ucx_perftest
# between two processes over them (uct rc_verbs and ud_verbs, ucp with
# UCX_TLS=rc and ud).
. "$(dirname "$0")/../lib/lib.sh"
need ucx_info
need ucx_perftest
tmp=$(mktemp -d)
trap 'ibemu_cleanup; rm -rf "$tmp"' EXIT

info=$(LD_PRELOAD=$IBEMU_LIB_PATH ucx_info -d 2>&1)
for tl in rc_verbs ud_verbs; do
	echo "$info" | grep -A3 "Transport: $tl" | grep -q "Device: ibemu0:1" &&
		pass "ucx_info -d: $tl on ibemu0:1" || fail "ucx_info -d: no $tl on ibemu0:1"
done

port=$((20000 + $$ % 20000))
# One ucx_perftest pair; the server is bounded by timeout, like the client.
perf() {
	local what=$1 spid rc
	shift
	port=$((port + 1))
	LD_PRELOAD=$IBEMU_LIB_PATH timeout 60 ucx_perftest -p "$port" "$@" \
		>"$tmp/ucx-server.log" 2>&1 &
	spid=$!
	sleep 0.5
	LD_PRELOAD=$IBEMU_LIB_PATH timeout 60 ucx_perftest -p "$port" "$@" \
		127.0.0.1 >"$tmp/ucx-client.log" 2>&1
	rc=$?
	wait "$spid" || rc=1
	if [ "$rc" = 0 ] && grep -q "^Final:" "$tmp/ucx-client.log"; then
		pass "ucx_perftest $what: $(grep '^Final:' "$tmp/ucx-client.log" | tr -s ' ')"
	else
		fail "ucx_perftest $what"
		tail -n 5 "$tmp/ucx-client.log" "$tmp/ucx-server.log"
	fi
}
perf "am_lat rc_verbs" -t am_lat -x rc_verbs -d ibemu0:1 -n 20000
perf "put_bw rc_verbs zcopy" -t put_bw -x rc_verbs -d ibemu0:1 -D zcopy -s 65536 -n 2000
perf "am_lat ud_verbs" -t am_lat -x ud_verbs -d ibemu0:1 -n 20000
UCX_TLS=rc,self UCX_NET_DEVICES=ibemu0:1 perf "ucp tag_lat rc" -t tag_lat -n 20000
UCX_TLS=rc,self UCX_NET_DEVICES=ibemu0:1 perf "ucp tag_bw rc" -t tag_bw -s 65536 -n 2000
UCX_TLS=ud,self UCX_NET_DEVICES=ibemu0:1 perf "ucp tag_lat ud" -t tag_lat -n 20000
finish
