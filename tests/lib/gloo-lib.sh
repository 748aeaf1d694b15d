# shellcheck shell=bash
# gloo's collectives over its ibverbs transport (tests/progs/gloo_collectives,
# built where configure found Debian's libgloo-dev), one process per rank,
# the ranks meeting through a gloo FileStore in a directory of the run.
# Sourced by bash test scripts, after lib.sh.
#
#   gloo_need                skip (exit 77) when the program was not built
#   gloo_ranks N MIN MAX START
#       Run ranks 0..N-1 on buffers of MIN to MAX bytes (each size four
#       times the last; the program checks every element of every result)
#       and give one verdict, pass or fail, with the outputs of the ranks
#       that failed.  START RANK CMD... is a function that starts CMD in
#       the background, bounded by GLOO_SECS, and sets GLOO_PID to wait for:
#       gloo_start_local runs it on this node.
#
# GLOO_SECS (IBEMU_TEST_TIMEOUT_GLOO, default 300) bounds each rank.

GLOO_PROG=$IBEMU_BUILDDIR/tests/progs/gloo_collectives
GLOO_SECS=${IBEMU_TEST_TIMEOUT_GLOO:-300}
GLOO_PID=

gloo_need()
{
	[ -x "$GLOO_PROG" ] && return 0
	echo "SKIP: gloo (Debian's libgloo-dev) was not found by configure: $GLOO_PROG was not built"
	exit 77
}

gloo_start_local()
{
	shift
	timeout "$GLOO_SECS" "$IBEMU" run -- "$@" &
	GLOO_PID=$!
}

gloo_ranks()
{
	local n=$1 min=$2 max=$3 start=$4 dir r rc bad=0 t0=$SECONDS
	local -a pids=()

	dir=$(mktemp -d "${TMPDIR:-/tmp}/ibemu-gloo.XXXXXX") || return 1
	mkdir "$dir/store"
	for ((r = 0; r < n; r++)); do
		"$start" "$r" "$GLOO_PROG" "$r" "$n" "$dir/store" "$min" "$max" \
			>"$dir/rank$r.out" 2>&1
		pids+=("$GLOO_PID")
	done
	for ((r = 0; r < n; r++)); do
		wait "${pids[r]}"
		rc=$?
		grep -q ": ok$" "$dir/rank$r.out" && [ "$rc" = 0 ] && continue
		bad=$((bad + 1))
		echo "rank $r of $n exited $rc$([ "$rc" = 124 ] && echo ' (timed out)'):"
		tail -n 5 "$dir/rank$r.out" | sed 's/^/  /'
	done
	rm -rf "$dir"
	if [ "$bad" = 0 ]; then
		pass "gloo: $n ranks, $min to $max bytes, every result checked ($((SECONDS - t0)) s)"
	else
		fail "gloo: $n ranks, $min to $max bytes: $bad rank(s) failed"
	fi
}
