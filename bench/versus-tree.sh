#!/bin/bash
# Two builds of ibemu side by side: perftest rows over this build and over
# another (an older commit built in its own worktree, say), runs taken in
# turn, each with the machine's one-way cache-line hand-off measured just
# before and after it (bench/shm_pingpong), and the medians given apart
# for each placement of the two vCPUs: "1 core" (its two threads, tens of
# ns) and "2 cores" (140 ns or more); a run whose two hand-offs disagree
# is left out.  A change's before and after, measured in one run
# (doc/design.md §18).  Nothing here asserts a time: it prints a table.
#
#   bash bench/versus-tree.sh OTHER_BUILDDIR
#
# Environment: IBEMU_BUILDDIR (this build), BENCH_RUNS (10 runs of each
# row and build), BENCH_TIMEOUT (60 s a process), BENCH_CPUS ("0 1").
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
other=${1:?usage: versus-tree.sh OTHER_BUILDDIR}
other=$(cd "$other" && pwd) || exit 2
[ -x "$other/ibemu" ] || { echo "versus-tree: $other/ibemu is not built" >&2; exit 2; }
command -v ib_send_lat >/dev/null ||
	{ echo "versus-tree: perftest is not installed" >&2; exit 2; }
read -r cpu_s cpu_c <<<"${BENCH_CPUS:-0 1}"
runs=${BENCH_RUNS:-10}
bench_setup bench-tree
port=$((33000 + $$ % 1000))
cpu_mhz=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)

handoff()
{
	taskset -c "$cpu_s,$cpu_c" "$IBEMU_BUILDDIR/bench/shm_pingpong" -q -r 1 -n 5000 \
		2>/dev/null || echo failed
}

# one BUILD KIND PROGRAM SIZE ITERS: one perftest run over BUILD's ibemu;
# KIND lat (t_typical, us, read in cycles) or rate (MsgRate, Mpps).
one()
{
	local build=$1 kind=$2 prog=$3 size=$4 iters=$5 col=5 div=1
	local -a extra=()

	[ "$kind" = lat ] && [ -n "$cpu_mhz" ] && { extra=(-C); div=$cpu_mhz; }
	port=$(sc_pick_port $((port + 1)))
	SC_SERVER_IN=(taskset -c "$cpu_s")
	SC_CLIENT_IN=(taskset -c "$cpu_c")
	sc_pair "$dir" "$secs" "$port" \
		"$build/ibemu" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "$port" ::: \
		"$build/ibemu" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "$port" localhost ||
		{ echo failed; return; }
	awk -v c="$col" -v d="$div" '/#bytes/ { getline; print $c / d; exit }' "$dir/client.out"
}

# The median of the figures of one build and placement in $dir/raw.
pick() # ROW BUILD PLACEMENT
{
	awk -v r="$1" -v b="$2" -v p="$3" '$1 == r && $2 == b && $5 != "failed" {
		one = $3 < 100 && $4 < 100; two = $3 >= 140 && $4 >= 140
		if ((p == "1" && one) || (p == "2" && two)) print $5 }' "$dir/raw" | median
}

rows=("lat ib_send_lat 8 50000" "lat ib_send_lat 4096 20000"
	"rate ib_send_bw 64 1000000" "lat ib_write_lat 8 50000"
	"rate ib_write_bw 64 2000000")
: >"$dir/raw"
for r in $(seq "$runs"); do
	for row in "${rows[@]}"; do
		read -r kind prog size iters <<<"$row"
		for build in "$IBEMU_BUILDDIR" "$other"; do
			h=$(handoff)
			v=$(one "$build" "$kind" "$prog" "$size" "$iters")
			echo "$prog-$size $build $h $(handoff) $v" >>"$dir/raw"
		done
	done
done
echo "this build ($IBEMU_BUILDDIR) beside $other, medians of up to $runs runs each, taken in turn"
printf '%-22s %-8s %12s %12s %8s\n' row CPUs this other ratio
for row in "${rows[@]}"; do
	read -r kind prog size iters <<<"$row"
	for p in 1 2; do
		a=$(pick "$prog-$size" "$IBEMU_BUILDDIR" $p)
		b=$(pick "$prog-$size" "$other" $p)
		[ "$a$b" = "--" ] && continue
		ratio=-
		[ "$a" != - ] && [ "$b" != - ] &&
			ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3g", a / b }')
		printf '%-22s %-8s %12s %12s %8s\n' "$prog $size" \
			"$([ $p = 1 ] && echo "1 core" || echo "2 cores")" "$a" "$b" "$ratio"
	done
done
echo "latencies in us (one way), rates in Mpps; ratio = this / other; runs whose two hand-offs disagree are left out."
