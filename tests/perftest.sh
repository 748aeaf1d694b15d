#!/bin/bash
# Debian's unmodified perftest over ibemu: each benchmark's server and
# client on loopback with few iterations, each bounded by a timeout; a check
# passes when both exit 0.  Figures are printed, never asserted (bench/
# measures performance).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serverclient.sh"
need ib_send_lat
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((27000 + ($$ % 200) * 32))

# perf NAME PROGRAM [ARGS...]: server and client with the same ARGS; the
# summary is the result line, the first one after the column headers.
SC_OPTS="-d ibemu0 -i 1 -F"
perf()
{
	sc_check "awk '/#bytes/ { getline; \$1 = \$1; print; exit }' \"\$dir/client.out\"" "$@"
}

for size in 8 4096; do
	perf "ib_send_lat -s $size" ib_send_lat -n 1000 -s "$size"
	perf "ib_write_lat -s $size" ib_write_lat -n 1000 -s "$size"
	perf "ib_read_lat -s $size" ib_read_lat -n 1000 -s "$size"
done
perf "ib_atomic_lat fetch&add" ib_atomic_lat -n 1000
perf "ib_atomic_lat cmp&swap" ib_atomic_lat -n 1000 -A CMP_AND_SWAP
for size in 8 65536; do
	perf "ib_send_bw -s $size" ib_send_bw -n 1000 -s "$size"
	perf "ib_write_bw -s $size" ib_write_bw -n 1000 -s "$size"
	perf "ib_read_bw -s $size" ib_read_bw -n 1000 -s "$size"
done
perf "ib_atomic_bw fetch&add" ib_atomic_bw -n 1000
perf "ib_atomic_bw cmp&swap" ib_atomic_bw -n 1000 -A CMP_AND_SWAP
finish
