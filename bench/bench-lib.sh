# Shared by the benchmark scripts (sourced): a node and a scratch directory
# of the run's own, removed at the end, and the median of a column.
#
#   bench_setup NAME   IBEMU_NODE=NAME-PID (exported), $dir, $shmdir; every
#                      node whose name starts with NAME-PID or
#                      bench-idle-PID is removed at exit, with $dir
#   median             the median of the numbers on stdin, "-" for none
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
