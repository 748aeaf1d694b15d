#!/bin/bash
# ibemu beside the best peer on one node, UCX over shared memory
# (ucx_perftest, UCX_TLS=sm,self), measured in the same run, processes
# pinned to two CPUs (server on the first, client on the second): the
# seven figures of doc/design.md §18's table, each the MEDIAN of
# BENCH_RUNS runs, with the ratio ibemu / UCX and the goal.  Nothing here
# asserts a time: it prints a table.
#
#   bash bench/versus-ucx.sh        (make bench runs it)
#
# Environment: IBEMU_BUILDDIR, BENCH_RUNS (5), BENCH_TIMEOUT (60 s a
# process), BENCH_PORT, BENCH_OUT (keep every raw output there),
# BENCH_CPUS ("0 1": the server's and the client's CPU).
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${IBEMU_BUILDDIR:=$(cd "$here/.." && pwd)}"
IBEMU=$IBEMU_BUILDDIR/ibemu
. "$here/../tests/serverclient.sh"
runs=${BENCH_RUNS:-5}
secs=${BENCH_TIMEOUT:-60}
port=${BENCH_PORT:-$((31000 + $$ % 1000))}
read -r cpu_s cpu_c <<<"${BENCH_CPUS:-0 1}"

for c in ucx_perftest ib_send_lat taskset; do
	command -v "$c" >/dev/null ||
		{ echo "versus-ucx: $c is not installed (ucx-utils, perftest, util-linux)" >&2; exit 2; }
done
. "$here/bench-lib.sh"
bench_setup bench-ucx
# Each side pinned to its CPU (tests/serverclient.sh's command prefixes).
SC_SERVER_IN=(taskset -c "$cpu_s")
SC_CLIENT_IN=(taskset -c "$cpu_c")

# pair NAME SERVER... ::: CLIENT...: one run, pinned, each '$PORT' given
# the run's TCP port; the client's output in $dir/client.out; false
# (said) when either side failed.
pair()
{
	local name=$1 a
	local -a args=()
	shift
	port=$(sc_pick_port $((port + 1)))
	for a in "$@"; do
		[ "$a" = '$PORT' ] && a=$port
		args+=("$a")
	done
	if ! sc_pair "$dir" "$secs" "$port" "${args[@]}"; then
		echo "versus-ucx: $name: server exited $SC_SERVER_RC, client $SC_CLIENT_RC" >&2
		tail -n 3 "$dir/client.out" | sed 's/^/    client: /' >&2
		return 1
	fi
	[ -n "${BENCH_OUT:-}" ] && cp "$dir/client.out" "$BENCH_OUT/$name-$r.out"
	return 0
}

# ibemu KIND PROGRAM SIZE ITERS: perftest over ibemu; KIND lat (t_typical,
# us), rate (MsgRate, Mpps) or bw (GB/s).
ibemu()
{
	local kind=$1 prog=$2 size=$3 iters=$4 r col
	local -a vals=() extra=()
	case $kind in
	lat) col=5 ;;
	rate) col=5 ;;
	bw) col=4; extra=(--report_gbits) ;;
	esac
	for r in $(seq "$runs"); do
		pair "ibemu-$prog-$size" \
			"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "\$PORT" ::: \
			"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "\$PORT" localhost ||
			{ echo failed; return; }
		vals+=("$(awk -v c="$col" -v k="$kind" '/#bytes/ { getline;
			print (k == "bw" ? $c / 8 : $c); exit }' "$dir/client.out")")
	done
	printf '%s\n' "${vals[@]}" | median
}

# ucx KIND TEST SIZE ITERS: ucx_perftest over shared memory; KIND lat
# (50th percentile, us), rate (overall, Mpps) or bw (overall, GB/s).
ucx()
{
	local kind=$1 test=$2 size=$3 iters=$4 r
	local -a vals=()
	for r in $(seq "$runs"); do
		pair "ucx-$test-$size" \
			env UCX_TLS=sm,self ucx_perftest -t "$test" -s "$size" -n "$iters" -p "\$PORT" ::: \
			env UCX_TLS=sm,self ucx_perftest 127.0.0.1 -t "$test" -s "$size" -n "$iters" -p "\$PORT" ||
			{ echo failed; return; }
		vals+=("$(awk -v k="$kind" '/^Final:/ {
			print (k == "lat" ? $3 : k == "rate" ? $9 / 1e6 : $7 / 1000); exit }' "$dir/client.out")")
	done
	printf '%s\n' "${vals[@]}" | median
}

# A figure with its unit, or the word that says why there is none.
value() { case $1 in failed | - | "") echo "${1:--}" ;; *) printf '%.4g %s' "$1" "$2" ;; esac; }

row() # FIGURE IBEMU UCX UNIT GOAL
{
	local ratio=-
	case "$2$3" in
	*failed* | *-*) ;;
	*) ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.3g", a / b }') ;;
	esac
	printf '%-54s %12s %12s %8s %7s\n' "$1" "$(value "$2" "$4")" \
		"$(value "$3" "$4")" "$ratio" "$5"
}

echo "ibemu beside UCX over shared memory ($(ucx_info -v 2>/dev/null | sed -n 's/^# Version /UCX /p' | head -1)," \
	"UCX_TLS=sm,self), server on CPU $cpu_s, client on CPU $cpu_c, median of $runs runs"
printf '%-54s %12s %12s %8s %7s\n' figure ibemu "UCX shm" ratio goal
row "8 B send latency (ib_send_lat / tag_lat)" \
	"$(ibemu lat ib_send_lat 8 20000)" "$(ucx lat tag_lat 8 100000)" us "<= 1.0"
row "8 B RDMA write latency (ib_write_lat / ucp_put_lat)" \
	"$(ibemu lat ib_write_lat 8 20000)" "$(ucx lat ucp_put_lat 8 100000)" us "<= 1.0"
row "4 KiB send latency (ib_send_lat / tag_lat)" \
	"$(ibemu lat ib_send_lat 4096 20000)" "$(ucx lat tag_lat 4096 100000)" us "-"
row "64 B send rate (ib_send_bw / tag_bw)" \
	"$(ibemu rate ib_send_bw 64 200000)" "$(ucx rate tag_bw 64 1000000)" Mpps ">= 1.3"
row "64 B RDMA write rate (ib_write_bw / ucp_put_bw)" \
	"$(ibemu rate ib_write_bw 64 200000)" "$(ucx rate ucp_put_bw 64 1000000)" Mpps ">= 0.5"
row "1 MiB RDMA write bandwidth (ib_write_bw / ucp_put_bw)" \
	"$(ibemu bw ib_write_bw 1048576 2000)" "$(ucx bw ucp_put_bw 1048576 5000)" GB/s ">= 1.0"
row "1 MiB RDMA read bandwidth (ib_read_bw / ucp_get)" \
	"$(ibemu bw ib_read_bw 1048576 2000)" "$(ucx bw ucp_get 1048576 5000)" GB/s ">= 1.0"
row "1 MiB send bandwidth (ib_send_bw / tag_bw)" \
	"$(ibemu bw ib_send_bw 1048576 2000)" "$(ucx bw tag_bw 1048576 5000)" GB/s ">= 1.0"
echo "ratio = ibemu / UCX: below 1 for a latency is faster than UCX, above 1 for a rate or a bandwidth."
