#!/bin/bash
# The manual's multicast example (examples/mc_example.c): RECEIVERS
# receiver processes join the group and post their receives, then one
# sender sends COUNT messages to it; every receiver must get every message
# intact on each of its CONNECTIONS.
#
#   run-mc-example.sh [-w WRAPPER] [-b BIND_ADDR]
#                     [-m MCAST_ADDR | -M MGID (with -b)]
#                     [-r RECEIVERS] [-c CONNECTIONS] [-C COUNT] [-S SIZE]
# WRAPPER runs each process (for ibemu: "ibemu run --"; empty for a real
# device).  Exit 0 when every process succeeded.
set -u
here=$(cd "$(dirname "$0")" && pwd)
prog=${MC_EXAMPLE:-$here/mc_example}
wrapper="" bind="" group=(-m 239.1.2.3) receivers=3 conns=2 count=200 size=1000
while getopts "w:b:m:M:r:c:C:S:" o; do
	case $o in
	w) wrapper=$OPTARG ;;
	b) bind=$OPTARG ;;
	m) group=(-m "$OPTARG") ;;
	M) group=(-M "$OPTARG") ;;
	r) receivers=$OPTARG ;;
	c) conns=$OPTARG ;;
	C) count=$OPTARG ;;
	S) size=$OPTARG ;;
	*) exit 2 ;;
	esac
done
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
bopt=()
[ -n "$bind" ] && bopt=(-b "$bind")
for i in $(seq 1 "$receivers"); do
	timeout 60 $wrapper "$prog" "${group[@]}" "${bopt[@]}" -c "$conns" \
		-C "$count" -S "$size" >"$tmp/r$i.out" 2>&1 &
	pids+=($!)
done
# Each receiver says "joined" once its QPs are attached and its receives
# posted; the sender starts after all of them.
deadline=$((SECONDS + 30))
for i in $(seq 1 "$receivers"); do
	until grep -q '^joined' "$tmp/r$i.out" 2>/dev/null; do
		if [ $SECONDS -ge $deadline ] || ! kill -0 "${pids[$((i - 1))]}" 2>/dev/null; then
			echo "receiver $i did not join:"; cat "$tmp/r$i.out"; exit 1
		fi
		sleep 0.1
	done
done
timeout 60 $wrapper "$prog" -s "${group[@]}" "${bopt[@]}" -c "$conns" \
	-C "$count" -S "$size" >"$tmp/s.out" 2>&1
rc=$?
echo "sender (exit $rc): $(cat "$tmp/s.out" | tr '\n' ' ')"
fails=$((rc != 0))
for i in $(seq 1 "$receivers"); do
	wait "${pids[$((i - 1))]}"
	r=$?
	echo "receiver $i (exit $r): $(tr '\n' ' ' <"$tmp/r$i.out")"
	[ "$r" = 0 ] || fails=$((fails + 1))
done
pids=()
exit $((fails != 0))
