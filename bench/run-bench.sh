#!/bin/bash
# ibemu's performance beside the machine's own limits, measured in one run
# (doc/design.md §18): Debian's perftest over ibemu on loopback, and the
# floor any shared-memory transport has on this machine, from our programs
# bench/shm_pingpong (one-way cache-line hand-off between two processes) and
# bench/memcpy_bw (memcpy bandwidth).  Every figure is the MEDIAN of
# BENCH_RUNS runs.  Nothing here asserts a time: it prints a table.
#
#   make bench            or, from the top of the build tree,
#   bash bench/run-bench.sh
#
# Environment: IBEMU_BUILDDIR (build tree), BENCH_RUNS (5), BENCH_TIMEOUT
# (seconds per perftest process, 60), BENCH_LAT_SIZES ("8 4096 65536 1048576"),
# BENCH_BW_SIZES ("8 4096 65536 1048576"), BENCH_OUT (keep every raw output
# in this directory), BENCH_PORT (first TCP port, default 30000 + PID % 1000).
#
# Limits, per row: send/write latency >= one-way hand-off + one copy of the
# message; read latency >= a round trip + one copy; atomic latency >= a
# round trip; bandwidth <= memcpy bandwidth at that size.  ratio = ibemu /
# limit: above 1 for a latency means slower than the limit, below 1 for a
# bandwidth means short of it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IBEMU_BUILDDIR:-}" ]; then
	if [ -x ./ibemu ] && [ -x ./bench/shm_pingpong ]; then
		IBEMU_BUILDDIR=$(pwd)
	else
		IBEMU_BUILDDIR=$(cd "$here/.." && pwd)
	fi
fi
IBEMU=$IBEMU_BUILDDIR/ibemu
. "$here/../tests/serverclient.sh"

runs=${BENCH_RUNS:-5}
secs=${BENCH_TIMEOUT:-60}
lat_sizes=${BENCH_LAT_SIZES:-8 4096 65536 1048576}
bw_sizes=${BENCH_BW_SIZES:-8 4096 65536 1048576}
port=${BENCH_PORT:-$((30000 + $$ % 1000))}

for f in "$IBEMU" "$IBEMU_BUILDDIR/bench/shm_pingpong" "$IBEMU_BUILDDIR/bench/memcpy_bw"; do
	[ -x "$f" ] || { echo "run-bench: $f is missing: build first (make)" >&2; exit 2; }
done
command -v ib_send_lat >/dev/null ||
	{ echo "run-bench: perftest is not installed (apt-get install perftest)" >&2; exit 2; }

# A node of our own, removed at the end.
IBEMU_NODE=bench-$$
export IBEMU_NODE
dir=$(mktemp -d)
# Every node of this run is named bench-$$ or bench-idle-$$: remove them all.
shmdir=${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)
trap 'sc_cleanup; rm -rf "$dir"; rm -f "$shmdir"/v*-"$IBEMU_NODE"* "$shmdir"/v*-bench-idle-$$*' EXIT
trap 'exit 130' INT TERM
[ -n "${BENCH_OUT:-}" ] && mkdir -p "$BENCH_OUT"

median()
{
	sort -g | awk '{ a[NR] = $1 }
		END { if (!NR) print "-"; else if (NR % 2) print a[(NR + 1) / 2];
		      else printf "%.4g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

echo "ibemu benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs," \
	"$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "$("$IBEMU" --version 2>&1 | head -1); perftest $(ib_send_lat -V 2>&1 | grep -o '[0-9][0-9.]*' | head -1);" \
	"median of $runs runs per figure"

# The machine's limits.
one_way=$("$IBEMU_BUILDDIR/bench/shm_pingpong" -q -r "$runs")
declare -A copy_gbs
while read -r size gbs; do
	copy_gbs[$size]=$gbs
done < <("$IBEMU_BUILDDIR/bench/memcpy_bw" -q -r "$runs" $(printf '%s\n' $lat_sizes $bw_sizes | sort -nu))
echo "machine: shm one-way hand-off ${one_way} ns; memcpy GB/s:" \
	"$(for s in $(printf '%s\n' "${!copy_gbs[@]}" | sort -n); do printf '%s=%s ' "$s" "${copy_gbs[$s]}"; done)"
echo

# figure KIND PROGRAM SIZE ITERS [ARGS...]: median over the runs of the
# client's t_typical (usec, latency) or average bandwidth (GB/s).
figure()
{
	local kind=$1 prog=$2 size=$3 iters=$4 r val
	local -a vals=()
	shift 4
	for r in $(seq "$runs"); do
		port=$(sc_pick_port $((port + 1)))
		if ! sc_pair "$dir" "$secs" "$port" \
			"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" ::: \
			"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" localhost; then
			echo "run-bench: $prog -s $size: server exited $SC_SERVER_RC, client $SC_CLIENT_RC" \
				"(124: timed out after ${secs}s)" >&2
			tail -n 3 "$dir/client.out" | sed 's/^/    client: /' >&2
			[ -n "${BENCH_OUT:-}" ] && cat "$dir/server.out" "$dir/client.out" \
				>"$BENCH_OUT/$prog-$size-$r.failed"
			echo failed
			return
		fi
		[ -n "${BENCH_OUT:-}" ] && cp "$dir/client.out" "$BENCH_OUT/$prog-$size-$r.out"
		if [ "$kind" = lat ]; then
			val=$(awk '/#bytes/ { getline; print $5; exit }' "$dir/client.out")
		else # Gbit/s to GB/s
			val=$(awk '/#bytes/ { getline; print $4 / 8; exit }' "$dir/client.out")
		fi
		[ -n "$val" ] && vals+=("$val")
	done
	printf '%s\n' "${vals[@]}" | median
}

row()
{
	local test=$1 size=$2 value=$3 limit=$4 unit=$5 ratio=-
	if [ "$value" != failed ] && [ "$value" != - ]; then
		ratio=$(awk -v a="$value" -v b="$limit" 'BEGIN { printf "%.3g", a / b }')
		value="$(awk -v a="$value" 'BEGIN { printf "%.3g", a }') $unit"
	fi
	printf '%-14s %8s %16s %16s %8s\n' "$test" "$size" "$value" "$limit $unit" "$ratio"
}

printf '%-14s %8s %16s %16s %8s\n' test size ibemu "machine limit" ratio
for size in $lat_sizes; do
	copy_us=$(awk -v s="$size" -v g="${copy_gbs[$size]}" 'BEGIN { print s / g / 1000 }')
	one=$(awk -v o="$one_way" -v c="$copy_us" 'BEGIN { printf "%.3g", o / 1000 + c }')
	two=$(awk -v o="$one_way" -v c="$copy_us" 'BEGIN { printf "%.3g", 2 * o / 1000 + c }')
	iters=$((size >= 65536 ? 1000 : 5000))
	row ib_send_lat "$size" "$(figure lat ib_send_lat "$size" "$iters" -s "$size")" "$one" us
	row ib_write_lat "$size" "$(figure lat ib_write_lat "$size" "$iters" -s "$size")" "$one" us
	row ib_read_lat "$size" "$(figure lat ib_read_lat "$size" "$iters" -s "$size")" "$two" us
done
rtt=$(awk -v o="$one_way" 'BEGIN { printf "%.3g", 2 * o / 1000 }')
row ib_atomic_lat 8 "$(figure lat ib_atomic_lat 8 5000)" "$rtt" us
for size in $bw_sizes; do
	limit=$(awk -v g="${copy_gbs[$size]}" 'BEGIN { printf "%.3g", g }')
	iters=$((size >= 1048576 ? 200 : size >= 65536 ? 2000 : 5000))
	for prog in ib_send_bw ib_write_bw ib_read_bw; do
		row "$prog" "$size" "$(figure bw "$prog" "$size" "$iters" -s "$size" --report_gbits)" "$limit" GB/s
	done
done
echo
# An idle process with connected QPs: the progress thread must sleep.
echo "idle process, two connected RC QPs: $(IBEMU_NODE=bench-idle-$$ "$IBEMU" run -- "$IBEMU_BUILDDIR/bench/idle_cpu" 3 2>&1)"
echo
echo "ratio = ibemu / machine limit: above 1 for a latency is that many times the"
echo "limit; below 1 for a bandwidth is that fraction of it.  Medians of $runs runs."
