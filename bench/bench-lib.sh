# Shared by the benchmark scripts (sourced): a node and a scratch directory
# of the run's own, removed at the end, and the median of a column.
#
#   bench_setup NAME   IBEMU_NODE=NAME-PID (exported), $dir, $shmdir; every
#                      node whose name starts with NAME-PID or
#                      bench-idle-PID is removed at exit, with $dir
#   median             the median of the numbers on stdin, "-" for none
#   figure ...         a perftest figure, the median of the runs (below)
# Sourcing it also gives: IBEMU_BUILDDIR (default: the tree above bench/),
# IBEMU, serverclient.sh's functions, runs (BENCH_RUNS, 5) and secs
# (BENCH_TIMEOUT, 60 s a process).
bench_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${IBEMU_BUILDDIR:=$(cd "$bench_lib_dir/.." && pwd)}"
IBEMU=$IBEMU_BUILDDIR/ibemu
. "$bench_lib_dir/../tests/lib/serverclient.sh"
runs=${BENCH_RUNS:-5}
secs=${BENCH_TIMEOUT:-60}

bench_setup()
{
	IBEMU_NODE=$1-$$
	export IBEMU_NODE
	dir=$(mktemp -d)
	# The node's directory (ibemu(1), dir).
	shmdir=$("$IBEMU" dir 2>/dev/null) ||
		shmdir=${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)
	trap 'sc_cleanup; rm -rf "$dir"; rm -f "$shmdir"/v*-"$IBEMU_NODE"* "$shmdir"/v*-bench-idle-$$*' EXIT
	trap 'exit 130' INT TERM
	[ -n "${BENCH_OUT:-}" ] && mkdir -p "$BENCH_OUT"
}

median()
{
	sort -g | awk '{ a[NR] = $1 }
		END { if (!NR) print "-"; else if (NR % 2) print a[(NR + 1) / 2];
		      else printf "%.4g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

bench_run_opts=()
# figure KIND PROGRAM SIZE ITERS [ARGS...]: median over the runs of the
# client's t_typical (usec, latency) or average bandwidth (GB/s), both
# sides under `ibemu run "${bench_run_opts[@]}"` (say, --check).  Needs
# runs, secs, port, dir and IBEMU; "failed" when a run failed.
figure()
{
	local kind=$1 prog=$2 size=$3 iters=$4 r val
	local -a vals=()
	shift 4
	for r in $(seq "$runs"); do
		port=$(sc_pick_port $((port + 1)))
		if ! sc_pair "$dir" "$secs" "$port" \
			"$IBEMU" run "${bench_run_opts[@]}" -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" ::: \
			"$IBEMU" run "${bench_run_opts[@]}" -- "$prog" -d ibemu0 -i 1 -F -p "$port" -n "$iters" "$@" localhost; then
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
