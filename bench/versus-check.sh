#!/bin/bash
# What the checking mode costs (IBEMU_CHECK, `ibemu run --check`, ibemu(1)
# CHECKS): the same perftest runs over ibemu with checking off and on,
# taken in turn, each figure the MEDIAN of BENCH_RUNS runs, side by side
# with the ratio checked / unchecked (doc/design.md §18).  Nothing here
# asserts a time: it prints a table.
#
#   bash bench/versus-check.sh      (make bench runs it)
#
# Environment: IBEMU_BUILDDIR, BENCH_RUNS (5), BENCH_TIMEOUT (60 s a
# process), BENCH_PORT, BENCH_OUT (keep every raw output there).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
port=${BENCH_PORT:-$((32000 + $$ % 1000))}
command -v ib_send_lat >/dev/null ||
	{ echo "versus-check: perftest is not installed" >&2; exit 2; }
bench_setup bench-check
# The checking mode's reports go to a file: the figures stay readable.
export IBEMU_CHECK_LOG=$dir/check-%p.log

# row KIND PROGRAM SIZE ITERS UNIT [ARGS...]: unchecked, checked, ratio.
row()
{
	local kind=$1 prog=$2 size=$3 iters=$4 unit=$5 off on ratio=-
	shift 5
	bench_run_opts=()
	off=$(figure "$kind" "$prog" "$size" "$iters" -s "$size" "$@")
	bench_run_opts=(--check)
	on=$(figure "$kind" "$prog" "$size" "$iters" -s "$size" "$@")
	case $off$on in
	*failed* | *-*) ;;
	*)
		ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3g", a / b }')
		off=$(awk -v a="$off" 'BEGIN { printf "%.3g", a }')
		on=$(awk -v a="$on" 'BEGIN { printf "%.3g", a }')
		;;
	esac
	printf '%-14s %8s %14s %14s %8s\n' "$prog" "$size" "$off $unit" \
		"$on $unit" "$ratio"
}

echo "the checking mode's cost: perftest with IBEMU_CHECK unset and with --check"
printf '%-14s %8s %14s %14s %8s\n' test size unchecked checked ratio
row lat ib_send_lat 8 5000 us
row lat ib_write_lat 8 5000 us
row lat ib_send_lat 4096 5000 us
row bw ib_send_bw 4096 5000 GB/s --report_gbits
row bw ib_send_bw 65536 2000 GB/s --report_gbits
row bw ib_write_bw 65536 2000 GB/s --report_gbits
row bw ib_read_bw 65536 2000 GB/s --report_gbits
echo "ratio = checked / unchecked: above 1 for a latency is slower, below 1"
echo "for a bandwidth is that fraction of it.  Medians of $runs runs."
reports=$(cat "$dir"/check-*.log 2>/dev/null | grep -c ' ibemu check: summary:')
echo "processes with a report under --check: $reports"
