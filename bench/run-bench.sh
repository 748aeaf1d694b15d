#!/bin/bash
# ibemu's performance beside the machine's own limits, measured in one run
# (doc/design.md §18 "What is measured, and where"): Debian's perftest
# over ibemu on loopback, and the floor any shared-memory transport has on
# this machine, from our programs bench/shm_pingpong (one-way cache-line
# hand-off between two processes) and bench/memcpy_bw (memcpy bandwidth).
# Every figure is the MEDIAN of BENCH_RUNS runs.  Nothing here asserts a
# time: it prints a table.
#
#   make bench            or, from the top of the build tree,
#   bash bench/run-bench.sh
#
# Environment: IBEMU_BUILDDIR (build tree), BENCH_RUNS (5), BENCH_TIMEOUT
# (seconds per perftest process, 60), BENCH_LAT_SIZES ("8 4096 65536 1048576"),
# BENCH_BW_SIZES ("8 4096 65536 1048576"), BENCH_OUT (keep every raw output
# in this directory), BENCH_PORT (first TCP port, default 30000 + PID % 1000),
# BENCH_NETNS (0: no section across network namespaces), BENCH_ONLY_NETNS
# (1: only that section), BENCH_UCX (0: no section beside UCX,
# bench/versus-ucx.sh), BENCH_CHECK (0: no section on the checking mode's
# cost, bench/versus-check.sh).
#
# Limits, per row: send/write latency >= one-way hand-off + one copy of the
# message; read latency >= a round trip + one copy; atomic latency >= a
# round trip; bandwidth <= memcpy bandwidth at that size.  ratio = ibemu /
# limit: above 1 for a latency means slower than the limit, below 1 for a
# bandwidth means short of it.
#
# Then, across nodes (root only): ib_write_bw and ib_send_bw 1 MiB and
# ib_send_lat 8 B between two network namespaces beside iperf3 (one stream) and a TCP
# ping-pong (bench/tcp_pingpong) between the same two, and the CPU an idle
# process with a cross-node RC QP uses.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IBEMU_BUILDDIR:-}" ]; then
	if [ -x ./ibemu ] && [ -x ./bench/shm_pingpong ]; then
		IBEMU_BUILDDIR=$(pwd)
	else
		IBEMU_BUILDDIR=$(cd "$here/.." && pwd)
	fi
fi
. "$here/bench-lib.sh"
lat_sizes=${BENCH_LAT_SIZES:-8 4096 65536 1048576}
bw_sizes=${BENCH_BW_SIZES:-8 4096 65536 1048576}
port=${BENCH_PORT:-$((30000 + $$ % 1000))}

for f in "$IBEMU" "$IBEMU_BUILDDIR/bench/shm_pingpong" "$IBEMU_BUILDDIR/bench/memcpy_bw"; do
	[ -x "$f" ] || { echo "run-bench: $f is missing: build first (make)" >&2; exit 2; }
done
command -v ib_send_lat >/dev/null ||
	{ echo "run-bench: perftest is not installed (apt-get install perftest)" >&2; exit 2; }

# A node of our own, removed at the end (every node of this run is named
# bench-$$ or bench-idle-$$).
bench_setup bench

# Across nodes: two network namespaces joined by veth pairs and a bridge,
# each with its own /dev/shm (tests/lib/netns-lib.sh; needs root, skipped
# otherwise or with BENCH_NETNS=0).  The machine's TCP between them,
# iperf3 with one stream and bench/tcp_pingpong (8 bytes one way, busy
# polling and blocking), beside ib_write_bw and ib_send_bw 1 MiB and
# ib_send_lat 8 B over ibemu between the same two nodes, then the CPU an idle process
# with a connected cross-node RC QP uses (tests/progs/net_break idle).
cross_nodes()
{
	local ip=5201 tp=47911 r v busy block wbw sbw slat tcp_gbs tcp_busy
	local tcp_block idle
	local -a vals=()
	# Not the EXIT trap of the parent shell: this runs in a subshell.
	trap - EXIT
	. "$here/../tests/lib/netns-lib.sh"
	netns_setup 2 --own-shm
	local a1 load_before
	a1=$(netns_addr 1)
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)
	# iperf3, one stream, node 2 to node 1: Mbit/s received.
	if command -v iperf3 >/dev/null; then
		netns_bg 1 iperf3 -s -p "$ip" >/dev/null 2>&1
		netns_wait_listen 1 "$ip" 10 "$NETNS_PID"
		for r in $(seq "$runs"); do
			v=$(netns_exec 2 timeout "$secs" iperf3 -c "$a1" -p "$ip" \
				-t 2 -f m 2>/dev/null | awk '/receiver/ {
				for (i = 2; i <= NF; i++)
					if ($i == "Mbits/sec") print $(i - 1) / 8000 }')
			[ -n "$v" ] && vals+=("$v")
		done
		tcp_gbs=$(printf '%s\n' "${vals[@]}" | median)
	else
		echo "run-bench: iperf3 is not installed (apt-get install iperf3)" >&2
		tcp_gbs=-
	fi
	# TCP ping-pong, 8 bytes: medians of busy polling and blocking.
	netns_bg 1 "$IBEMU_BUILDDIR/bench/tcp_pingpong" -s -p "$tp"
	netns_wait_listen 1 "$tp" 10 "$NETNS_PID"
	read -r tcp_busy tcp_block < <(netns_exec 2 timeout "$secs" \
		"$IBEMU_BUILDDIR/bench/tcp_pingpong" -c "$a1" -p "$tp" -q \
		-r "$runs" || echo "- -")
	# xfigure KIND PROGRAM ITERS ARGS...: figure() between the nodes.
	xfigure()
	{
		local kind=$1 prog=$2 iters=$3 r val
		local -a vals=()
		shift 3
		for r in $(seq "$runs"); do
			port=$((port + 1))
			if ! netns_pair "$dir" "$secs" "$port" \
				1 "$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" ::: \
				2 "$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" "$a1"; then
				echo "run-bench: $prog across nodes: server exited $NETNS_SERVER_RC," \
					"client $NETNS_CLIENT_RC (124: timed out after ${secs}s)" >&2
				tail -n 3 "$dir/client.out" | sed 's/^/    client: /' >&2
				echo failed
				return
			fi
			[ -n "${BENCH_OUT:-}" ] && cp "$dir/client.out" "$BENCH_OUT/net-$prog-$r.out"
			if [ "$kind" = lat ]; then
				val=$(awk '/#bytes/ { getline; print $5; exit }' "$dir/client.out")
			else
				val=$(awk '/#bytes/ { getline; print $4 / 8; exit }' "$dir/client.out")
			fi
			[ -n "$val" ] && vals+=("$val")
		done
		printf '%s\n' "${vals[@]}" | median
	}
	wbw=$(xfigure bw ib_write_bw 1000 -s 1048576 --report_gbits)
	sbw=$(xfigure bw ib_send_bw 1000 -s 1048576 --report_gbits)
	slat=$(xfigure lat ib_send_lat 5000 -s 8)
	xrow()
	{
		local test=$1 size=$2 value=$3 tcp=$4 unit=$5 goal=$6 ratio=-
		if [ "$value" != failed ] && [ "$value" != - ] && [ "$tcp" != - ]; then
			ratio=$(awk -v a="$value" -v b="$tcp" 'BEGIN { printf "%.3g", a / b }')
		fi
		[ "$value" != failed ] && [ "$value" != - ] &&
			value="$(awk -v a="$value" 'BEGIN { printf "%.3g", a }') $unit"
		[ "$tcp" != - ] && tcp="$(awk -v a="$tcp" 'BEGIN { printf "%.3g", a }') $unit"
		printf '%-14s %8s %16s %22s %8s %8s\n' "$test" "$size" "$value" "$tcp" "$ratio" "$goal"
	}
	echo "across nodes: two network namespaces joined by veth and a bridge, each its own /dev/shm"
	# Busy pollers suffer most from other load on the CPUs: say it.
	echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-14s %8s %16s %22s %8s %8s\n' test size ibemu "TCP, same run" ratio goal
	xrow ib_write_bw 1048576 "$wbw" "$tcp_gbs" GB/s ">= 0.9"
	printf '%-14s %8s %16s %22s\n' "" "" "" "(iperf3, 1 stream)"
	xrow ib_send_bw 1048576 "$sbw" "$tcp_gbs" GB/s ">= 0.9"
	printf '%-14s %8s %16s %22s\n' "" "" "" "(iperf3, 1 stream)"
	xrow ib_send_lat 8 "$slat" "$tcp_busy" us "<= 1.2"
	printf '%-14s %8s %16s %22s\n' "" "" "" "(ping-pong, busy poll)"
	xrow "" "" "$slat" "$tcp_block" us ""
	printf '%-14s %8s %16s %22s\n' "" "" "" "(ping-pong, blocking)"
	# An idle process with a cross-node connection.
	port=$((port + 1))
	netns_pair "$dir" "$secs" "$port" \
		1 env "LD_PRELOAD=$IBEMU_BUILDDIR/.libs/libibemu.so" \
		"$IBEMU_BUILDDIR/tests/progs/net_break" survivor "$port" idle ::: \
		2 env "LD_PRELOAD=$IBEMU_BUILDDIR/.libs/libibemu.so" \
		"$IBEMU_BUILDDIR/tests/progs/net_break" peer "$a1" "$port"
	idle=$(sed -n 's/^idle: //p' "$dir/server.out")
	echo "idle process with a cross-node RC QP: ${idle:-failed (node 1 exited $NETNS_SERVER_RC, node 2 $NETNS_CLIENT_RC)}"
	echo "ratio: ib_write_bw and ib_send_bw / iperf3, ib_send_lat / TCP busy-polling one-way latency."
}
echo "ibemu benchmark: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -sr), $(nproc) CPUs," \
	"$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "$("$IBEMU" --version 2>&1 | head -1); perftest $(ib_send_lat -V 2>&1 | grep -o '[0-9][0-9.]*' | head -1);" \
	"median of $runs runs per figure"

if [ "${BENCH_ONLY_NETNS:-0}" = 1 ]; then
	( cross_nodes )
	exit
fi

# The machine's limits.
one_way=$("$IBEMU_BUILDDIR/bench/shm_pingpong" -q -r "$runs")
declare -A copy_gbs
while read -r size gbs; do
	copy_gbs[$size]=$gbs
done < <("$IBEMU_BUILDDIR/bench/memcpy_bw" -q -r "$runs" $(printf '%s\n' $lat_sizes $bw_sizes | sort -nu))
echo "machine: shm one-way hand-off ${one_way} ns; memcpy GB/s:" \
	"$(for s in $(printf '%s\n' "${!copy_gbs[@]}" | sort -n); do printf '%s=%s ' "$s" "${copy_gbs[$s]}"; done)"
echo

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
# An idle process with connected QPs: the progress thread must sleep,
# however many QPs; and what a QP costs, up to the 64k QPs of a process.
for pairs in 1 500 32768; do
	echo "idle process: $(IBEMU_NODE=bench-idle-$$ timeout 600 "$IBEMU" run -- \
		"$IBEMU_BUILDDIR/bench/idle_cpu" 3 "$pairs" 2>&1 | tail -n 1)"
	rm -f "$shmdir"/v*-bench-idle-$$*
done
# A node of 256 processes, each with a connected RC QP, then idle.
echo "node: $(IBEMU_NODE=bench-procs-$$ timeout 600 "$IBEMU" run -- \
	"$IBEMU_BUILDDIR/bench/node_procs" 256 3 2>&1 | tail -n 1)"
rm -f "$shmdir"/v*-bench-procs-$$*
echo
echo "ratio = ibemu / machine limit: above 1 for a latency is that many times the"
echo "limit; below 1 for a bandwidth is that fraction of it.  Medians of $runs runs."

# Beside the best peer on one node, UCX over shared memory (BENCH_UCX=0:
# not run).
if [ "${BENCH_UCX:-1}" != 0 ]; then
	echo
	IBEMU_BUILDDIR=$IBEMU_BUILDDIR BENCH_PORT=$((port + 100)) \
		bash "$here/versus-ucx.sh"
fi

# What the checking mode costs (BENCH_CHECK=0: not run).
if [ "${BENCH_CHECK:-1}" != 0 ]; then
	echo
	IBEMU_BUILDDIR=$IBEMU_BUILDDIR BENCH_PORT=$((port + 200)) \
		bash "$here/versus-check.sh"
fi

if [ "${BENCH_NETNS:-1}" != 0 ]; then
	echo
	( cross_nodes )
fi
