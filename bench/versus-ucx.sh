#!/bin/bash
# ibemu beside the best peer on one node, UCX over shared memory
# (ucx_perftest, UCX_TLS=sm,self), measured in the same run, processes
# pinned to two CPUs (server on the first, client on the second): the
# figures of the table of doc/design.md §18 "What is measured, and where",
# each the MEDIAN of BENCH_RUNS runs, ibemu's and UCX's taken in turn, with
# the ratio ibemu / UCX and the goal.  Nothing here asserts a time: it
# prints a table.
#
#   bash bench/versus-ucx.sh        (make bench runs it)
#
# Environment: IBEMU_BUILDDIR, BENCH_RUNS (5), BENCH_TIMEOUT (60 s a
# process), BENCH_PORT, BENCH_OUT (keep every raw output there),
# BENCH_CPUS ("0 1": the server's and the client's CPU), BENCH_ONLY (an
# extended regular expression: only the rows whose figure matches it).
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bench-lib.sh"
port=${BENCH_PORT:-$((31000 + $$ % 1000))}
read -r cpu_s cpu_c <<<"${BENCH_CPUS:-0 1}"

for c in ucx_perftest ib_send_lat taskset; do
	command -v "$c" >/dev/null ||
		{ echo "versus-ucx: $c is not installed (ucx-utils, perftest, util-linux)" >&2; exit 2; }
done
bench_setup bench-ucx
# Each side pinned to its CPU (tests/lib/serverclient.sh's command prefixes).
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

# perftest's clock rate in MHz: the first "cpu MHz" of /proc/cpuinfo,
# which perftest divides its cycle counts by.
cpu_mhz=$(awk -F: '/^cpu MHz/ { print $2 + 0; exit }' /proc/cpuinfo)

# ibemu KIND PROGRAM SIZE ITERS: one run of perftest over ibemu; KIND lat
# (t_typical, us), rate (MsgRate, Mpps) or bw (GB/s).  A latency is read
# in cycles (-C) and divided as perftest would: its microseconds are
# printed to 10 ns, too coarse beside UCX's.
ibemu()
{
	local kind=$1 prog=$2 size=$3 iters=$4 col div=1
	local -a extra=()
	case $prog in
	ucx:*)	# UCX's own test over ibemu's verbs (its RC transport)
		pair "ibemu-$prog-$size" \
			env UCX_TLS=rc,self UCX_NET_DEVICES=ibemu0:1 "$IBEMU" run -- \
			ucx_perftest -t "${prog#ucx:}" -s "$size" -n "$iters" -p "\$PORT" ::: \
			env UCX_TLS=rc,self UCX_NET_DEVICES=ibemu0:1 "$IBEMU" run -- \
			ucx_perftest 127.0.0.1 -t "${prog#ucx:}" -s "$size" -n "$iters" -p "\$PORT" ||
			{ echo failed; return; }
		awk '/^Final:/ { print $3; exit }' "$dir/client.out"
		return ;;
	esac
	case $kind in
	lat) col=5
		if [ -n "$cpu_mhz" ]; then extra=(-C); div=$cpu_mhz; fi ;;
	rate) col=5 ;;
	bw) col=4; div=8; extra=(--report_gbits) ;;
	esac
	pair "ibemu-$prog-$size" \
		"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "\$PORT" ::: \
		"$IBEMU" run -- "$prog" -d ibemu0 -i 1 -F -s "$size" -n "$iters" "${extra[@]}" -p "\$PORT" localhost ||
		{ echo failed; return; }
	awk -v c="$col" -v d="$div" '/#bytes/ { getline; print $c / d; exit }' \
		"$dir/client.out"
}

# ucx KIND TEST SIZE ITERS: one run of ucx_perftest over shared memory;
# KIND lat (50th percentile, us), rate (overall, Mpps) or bw (overall,
# GB/s).
ucx()
{
	local kind=$1 test=$2 size=$3 iters=$4
	pair "ucx-$test-$size" \
		env UCX_TLS=sm,self ucx_perftest -t "$test" -s "$size" -n "$iters" -p "\$PORT" ::: \
		env UCX_TLS=sm,self ucx_perftest 127.0.0.1 -t "$test" -s "$size" -n "$iters" -p "\$PORT" ||
		{ echo failed; return; }
	awk -v k="$kind" '/^Final:/ {
		print (k == "lat" ? $3 : k == "rate" ? $9 / 1e6 : $7 / 1000); exit }' "$dir/client.out"
}

# The machine's one-way cache-line hand-off between the two CPUs, in ns
# (bench/shm_pingpong, pinned as the pairs are): the floor of a message's
# latency, and the figure that shows where the host put the vCPUs.  With
# -t, polled in a tight loop as ib_write_lat polls its buffer (the line
# then moves more slowly than when a loop does other work between two
# looks, as ucx_perftest's put_lat does: it calls ucp_worker_progress).
handoff()
{
	taskset -c "$cpu_s,$cpu_c" "$IBEMU_BUILDDIR/bench/shm_pingpong" "$@" -q -r 1 -n 20000 \
		2>/dev/null || echo failed
}

# both KIND PROGRAM ITERS TEST UCX_ITERS SIZE: the two in turn, BENCH_RUNS
# times, so that both see the machine as it is (the vCPUs' placement on
# the host changes the figures of both by up to 3x from one minute to
# the next), each pair with the hand-off measured beside it, polled both
# ways: "ibemu-median ucx-median hand-off-median tight-median".
both()
{
	local kind=$1 prog=$2 iters=$3 test=$4 uiters=$5 size=$6 r
	local -a a=() b=() h=() t=()
	for r in $(seq "$runs"); do
		a+=("$(ibemu "$kind" "$prog" "$size" "$iters")")
		b+=("$(ucx "$kind" "$test" "$size" "$uiters")")
		h+=("$(handoff)")
		t+=("$(handoff -t)")
	done
	echo "$(printf '%s\n' "${a[@]}" | grep -v failed | median)" \
		"$(printf '%s\n' "${b[@]}" | grep -v failed | median)" \
		"$(printf '%s\n' "${h[@]}" | grep -v failed | median)" \
		"$(printf '%s\n' "${t[@]}" | grep -v failed | median)"
}

# A figure with its unit, or the word that says why there is none.
value() { case $1 in failed | - | "") echo "${1:--}" ;; *) printf '%.4g %s' "$1" "$2" ;; esac; }

# Where the host put the two vCPUs during a row, from its hand-off: tens
# of ns, one core's two threads ("1 core"); 140 ns or more, two cores;
# between, the runs of the row saw both.
placement()
{
	case $1 in
	failed | - | "") echo - ;;
	*) awk -v h="$1" 'BEGIN { print (h < 100 ? "1 core" : h >= 140 ? "2 cores" : "mixed") }' ;;
	esac
}

row() # FIGURE IBEMU UCX UNIT GOAL HAND-OFF TIGHT
{
	local ratio=-
	case "$2$3" in
	*failed* | *-*) ;;
	*) ratio=$(awk -v a="$2" -v b="$3" 'BEGIN { printf "%.3g", a / b }') ;;
	esac
	printf '%-54s %12s %12s %8s %7s %9s %9s %8s\n' "$1" "$(value "$2" "$4")" \
		"$(value "$3" "$4")" "$ratio" "$5" "$(value "$6" ns)" "$(value "$7" ns)" \
		"$(placement "$6")"
}

echo "ibemu beside UCX over shared memory ($(ucx_info -v 2>/dev/null | sed -n 's/^# Version /UCX /p' | head -1)," \
	"UCX_TLS=sm,self), server on CPU $cpu_s, client on CPU $cpu_c, median of $runs runs"
printf '%-54s %12s %12s %8s %7s %9s %9s %8s\n' figure ibemu "UCX shm" ratio goal hand-off tight CPUs
figure() # FIGURE UNIT GOAL KIND PROGRAM ITERS TEST UCX_ITERS SIZE
{
	local name=$1 unit=$2 goal=$3 a b h t
	shift 3
	[ -n "${BENCH_ONLY:-}" ] && ! grep -Eq -- "$BENCH_ONLY" <<<"$name" && return
	read -r a b h t <<<"$(both "$@")"
	row "$name" "$a" "$b" "$unit" "$goal" "$h" "$t"
}
# Iterations: each run lasts 50 ms or more, so that no single moment of
# the host's scheduling decides a figure.
figure "8 B send latency (ib_send_lat / tag_lat)" us "<= 1.0" \
	lat ib_send_lat 100000 tag_lat 200000 8
figure "8 B RDMA write latency (ib_write_lat / ucp_put_lat)" us "<= 1.0" \
	lat ib_write_lat 100000 ucp_put_lat 200000 8
# The same figure with one harness on both sides: ucp_put_lat over
# ibemu's RC QPs (an inline RDMA WRITE, the lean path) against
# ucp_put_lat over shared memory.  ib_write_lat polls its buffer in a
# tight loop, ucx_perftest with a progress call between two looks, and
# the line moves faster to the second (the hand-off and tight columns).
figure "8 B RDMA write latency (ucp_put_lat on ibemu / on sm)" us "<= 1.0" \
	lat ucx:ucp_put_lat 200000 ucp_put_lat 200000 8
# The send latency with one harness, tag_lat over ibemu's RC QPs (UCX's
# rc transport: a SEND of each tagged message, posted receives) against
# tag_lat over shared memory.
figure "8 B send latency (tag_lat on ibemu / on sm)" us "<= 1.0" \
	lat ucx:tag_lat 200000 tag_lat 200000 8
figure "4 KiB send latency (ib_send_lat / tag_lat)" us "<= 1.0" \
	lat ib_send_lat 50000 tag_lat 100000 4096
figure "64 B send rate (ib_send_bw / tag_bw)" Mpps ">= 1.3" \
	rate ib_send_bw 1000000 tag_bw 1000000 64
figure "64 B RDMA write rate (ib_write_bw / ucp_put_bw)" Mpps ">= 1.0" \
	rate ib_write_bw 4000000 ucp_put_bw 8000000 64
figure "1 MiB RDMA write bandwidth (ib_write_bw / ucp_put_bw)" GB/s ">= 1.0" \
	bw ib_write_bw 2000 ucp_put_bw 5000 1048576
figure "1 MiB RDMA read bandwidth (ib_read_bw / ucp_get)" GB/s ">= 1.0" \
	bw ib_read_bw 2000 ucp_get 5000 1048576
figure "1 MiB send bandwidth (ib_send_bw / tag_bw)" GB/s ">= 1.0" \
	bw ib_send_bw 2000 tag_bw 5000 1048576
echo "ratio = ibemu / UCX: below 1 for a latency is faster than UCX, above 1 for a rate or a bandwidth."
echo "hand-off = the machine's one-way cache-line hand-off between the two CPUs during the row's runs (bench/shm_pingpong):"
echo "  where the host puts the two vCPUs (tens of ns: one core's two threads; hundreds: two cores) moves every figure."
echo "CPUs = that placement: \"1 core\" (its two threads), \"2 cores\", or \"mixed\" (the row's runs saw both); the goals are"
echo "  judged at two cores."
echo "tight = the same, each side polling in a tight loop, as ib_write_lat polls its buffer (the line moves more slowly than when"
echo "  a loop does other work between looks, as ucx_perftest's and ibv_poll_cq's do): ib_write_lat's floor, where hand-off is ucp_put_lat's."
echo "UCX's latency is the median of its last 2048 iterations (ucx_perftest's 50.0%ile); perftest's, of all of them."
