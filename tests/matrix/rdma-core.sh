#!/bin/bash
# The rdma-core matrix: ibemu against real builds of each rdma-core
# release.  For each release, built once from its sources into a cache
# (rdma-core-lib.sh), ibemu is built from this tree against it, and the
# release's own ibv_devinfo, ibv_rc_pingpong -c and ibv_ud_pingpong -c
# (server and client over ibemu0) run with the release's libibverbs
# (LD_LIBRARY_PATH); then the same programs with the tree's own build,
# made against the system's rdma-core, loaded into the release: one build
# of ibemu must serve every release.  A table says, per release, the
# private ABI its libibverbs exports (objdump -T) and what each run did.
#
#   tests/matrix/rdma-core.sh [VERSION...]      (or make check-rdma-core)
#
# VERSION: v61.0, 61.0, 61 or main (the default list is RDMA_CORE_VERSIONS
# in rdma-core-lib.sh).  Not part of make check: a release takes a minute
# or two to build, and ibemu again against it.  Build the tree first.
#
# A release must list ibemu0 and pass both ping-pongs with both builds,
# unless it is in RDMA_CORE_MAY_REFUSE (default v35.0, the issue's "works
# the same or is refused"): then each build may instead refuse it
# cleanly, at configure or at run time, where a refusal at run time is
# clean when it is one "ibemu:" line and the program otherwise prints and
# exits exactly as it does without the preload.  Exit 0 when every
# release meets that, 1 when one does not, 99 when the tree is not built.
#
# Environment: RDMA_CORE_GIT, RDMA_CORE_CACHE, RDMA_CORE_JOBS and the
# bounds on builds (see rdma-core-build.sh), RDMA_CORE_MAY_REFUSE,
# IBEMU_BUILDDIR (the tree's build, default the tree), IBEMU_TEST_TIMEOUT
# (seconds for each program run, default 60).  The nodes live in a directory of their own
# (IBEMU_SHM_DIR), one node per run.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/lib.sh"
. "$here/../lib/serverclient.sh"
. "$here/rdma-core-lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$here/../.." && pwd)}"
: "${RDMA_CORE_MAY_REFUSE:=v35.0}"
for t in git cmake ninja make autoreconf objdump timeout flock; do need "$t"; done
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((21000 + ($$ % 200) * 16))

[ -r "$IBEMU_LIB_PATH" ] && [ -x "$IBEMU" ] ||
	{ echo "ERROR: build the tree first ($IBEMU_LIB_PATH)"; exit 99; }
tree_built=$(sed -n 's/^#define IBEMU_BUILT_RDMA_CORE "\(.*\)"/\1/p' \
	"$IBEMU_BUILDDIR/config.h" 2>/dev/null)

export IBEMU_SHM_DIR
shm=/dev/shm
[ -d "$shm" ] || shm=${TMPDIR:-/tmp}
IBEMU_SHM_DIR=$(mktemp -d "$shm/ibemu-matrix.XXXXXX") || exit 99
trap 'sc_cleanup; rm -rf "$IBEMU_SHM_DIR"' EXIT

# This tree's builds in the cache are kept apart from other trees' by a
# key of its path: a snapshot of its files (mtimes kept, so make rebuilds
# only what changed) that out-of-tree builds configure from; the tree
# itself may be configured in place, which forbids that.
key=$(basename "$IBEMU_SRCDIR")-$(printf %s "$IBEMU_SRCDIR" | cksum | cut -d' ' -f1)
snap=$RDMA_CORE_CACHE/ibemu-src-$key
mkdir -p "$snap" || exit 99
exec 8>"$snap.lock"
flock -w 3600 8 || { echo "ERROR: $snap is in use"; exit 99; }
# Every program's output of the last run is kept here.
dir=$RDMA_CORE_CACHE/matrix-$key
rm -rf "$dir" && mkdir -p "$dir" || exit 99

snapshot_tree() {
	(cd "$IBEMU_SRCDIR" && git ls-files -z -c -o --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
		tar -x -C "$snap" -f - || return 1
	# autoreconf again when an input of configure or the Makefiles changed.
	if [ ! -x "$snap/configure" ] || [ -n "$(find "$snap" \( -name configure.ac \
		-o -name Makefile.am -o -name Makefile.include -o -path "$snap/m4/*" \) \
		-newer "$snap/configure" | head -n 1)" ]; then
		(cd "$snap" && timeout "$RDMA_CORE_CONFIGURE_SECS" autoreconf -fi) \
			>"$snap/autoreconf.log" 2>&1
	fi
}

# ibemu_build TAG: build the preload and the audit module from the
# snapshot against release TAG (its build/lib/pkgconfig, whose paths with
# IN_PLACE name build/include and build/lib).  Sets built (ok, refused,
# FAIL), built_lib and, but for ok, a note.
ibemu_build() {
	local rel b line
	rel=$(rdma_core_dir "$1")/build
	b=$(rdma_core_dir "$1")/ibemu-$key
	built_lib=$b/.libs/libibemu.so
	mkdir -p "$b" || { built=FAIL; note "$1: cannot make $b"; return; }
	# A new configure is run here, where its refusal is told apart.
	[ "$snap/configure" -nt "$b/config.status" ] && rm -f "$b/Makefile"
	if [ ! -f "$b/Makefile" ]; then
		if ! (cd "$b" && timeout "$RDMA_CORE_CONFIGURE_SECS" "$snap/configure" \
			PKG_CONFIG_PATH="$rel/lib/pkgconfig" \
			CPPFLAGS="-I$rel/include" LDFLAGS="-L$rel/lib") \
			>"$b/configure.log" 2>&1; then
			line=$(sed -n 's/^configure: error: //p' "$b/configure.log" | tail -n 1)
			case $line in
			*rdma-core*) built=refused; note "$1: configure: $line" ;;
			*) built=FAIL; note "$1: configure failed: ${line:-see $b/configure.log}" ;;
			esac
			rm -f "$b/Makefile"
			return
		fi
	fi
	if timeout "$RDMA_CORE_BUILD_SECS" make -C "$b" -j"$RDMA_CORE_JOBS" libibemu.la libibemu-audit.la \
		>"$b/make.log" 2>&1 && [ -r "$built_lib" ]; then
		built=ok
	else
		built=FAIL
		note "$1: make failed, see $b/make.log:"
		grep -m 3 -E 'error|Error' "$b/make.log" | sed 's/^/    /' >>"$dir/notes"
	fi
}

note() { echo "$*" >>"$dir/notes"; }

# status ST: an exit status in words.
status() {
	if [ "$1" = 124 ]; then
		echo "timed out after ${secs}s"
	elif [ "$1" -gt 128 ] && [ "$1" -lt 160 ]; then
		echo "was killed by SIG$(kill -l $(($1 - 128)))"
	else
		echo "exited $1"
	fi
}

# rel ARGV: run ARGV with the release's libraries first.
rel_path() { echo "$rlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; }
rel() { env LD_LIBRARY_PATH="$(rel_path)" "$@"; }

# pingpong NAME PRELOAD PROGRAM: server and client of the release's
# PROGRAM -c under ibemu; sets pp to ok or FAIL (with a note).
pingpong() {
	local name=$1 preload=$2 prog=$3 what
	what="$tag $name ${prog#ibv_}"
	port=$(sc_pick_port $((port + 1)))
	SC_SERVER_IN=(env "LD_LIBRARY_PATH=$(rel_path)")
	# shellcheck disable=SC2034 # read by sc_pair
	SC_CLIENT_IN=("${SC_SERVER_IN[@]}")
	if sc_pair "$dir" "$secs" "$port" \
		"$IBEMU" run -l "$preload" -- "$rbin/$prog" -d ibemu0 -c -n 100 -p "$port" ::: \
		"$IBEMU" run -l "$preload" -- "$rbin/$prog" -d ibemu0 -c -n 100 -p "$port" localhost &&
		grep -q "bytes in" "$dir/client.out" &&
		! grep -q "invalid data" "$dir/server.out" "$dir/client.out"; then
		pp=ok
	else
		pp=FAIL
		sc_fail_pair "$what" >>"$dir/notes"
	fi
	mv "$dir/server.out" "$dir/$tag-$name-$prog.server"
	mv "$dir/client.out" "$dir/$tag-$name-$prog.client"
}

# probe NAME PRELOAD: the release's ibv_devinfo under PRELOAD, on a node of
# its own; then, if it lists ibemu0, the ping-pongs.  Sets dev (ibemu0,
# refused: cleanly, FAIL), rc and ud (ok, FAIL, - not run).
probe() {
	local name=$1 preload=$2 out=$dir/$tag-$1 st lines
	export IBEMU_NODE=matrix-$tag-$name-$$
	rc=- ud=-
	rel timeout -k 5 "$secs" "$IBEMU" run -l "$preload" -- "$rbin/ibv_devinfo" \
		>"$out" 2>&1 </dev/null
	st=$?
	if [ "$st" = 0 ] && grep -q "hca_id:[[:space:]]*ibemu0" "$out"; then
		dev=ibemu0
		pingpong "$name" "$preload" ibv_rc_pingpong; rc=$pp
		pingpong "$name" "$preload" ibv_ud_pingpong; ud=$pp
		return
	fi
	lines=$(grep -c "^ibemu:" "$out")
	grep -v "^ibemu:" "$out" >"$out.rest"
	if [ "$lines" = 1 ] && [ "$st" = "$bare_st" ] && cmp -s "$out.rest" "$dir/$tag-bare"; then
		dev=refused
		note "$tag $name: $(grep "^ibemu:" "$out")"
	else
		dev=FAIL
		note "$tag $name: ibv_devinfo $(status "$st") ($(status "$bare_st") without ibemu), $lines ibemu line(s):"
		grep -v "^$0: line [0-9]*:" "$out" | tail -n 6 | sed 's/^/    /' >>"$dir/notes"
	fi
}

row() { printf '%-8s %-10s %-12s %-7s %-7s %-4s %-4s | %-7s %-4s %-4s  %s\n' "$@"; }

[ $# -gt 0 ] || set -- $RDMA_CORE_VERSIONS
echo "rdma-core cache: $RDMA_CORE_CACHE (sources: $RDMA_CORE_GIT)"
echo "the tree's build: $IBEMU_LIB_PATH (against rdma-core ${tree_built:-unknown})"
snapshot_tree || { echo "ERROR: cannot copy $IBEMU_SRCDIR to $snap (see $snap/autoreconf.log)"; exit 99; }
: >"$dir/notes"
table=$dir/table
printf '%-32s %-25s | %s\n' "" "built against the release" \
	"the tree's build (${tree_built:-?})" >"$table"
row release "private" "public" build devinfo rc ud devinfo rc ud verdict >>"$table"
bad=0
for v in "$@"; do
	tag=$(rdma_core_tag "$v")
	echo "=== rdma-core $tag"
	if ! rdma_core_build "$tag"; then
		row "$tag" - - - - - - - - - "FAIL: rdma-core did not build" >>"$table"
		bad=$((bad + 1))
		continue
	fi
	rlib=$(rdma_core_dir "$tag")/build/lib
	rbin=$(rdma_core_dir "$tag")/build/bin
	syms=$(LC_ALL=C objdump -T "$rlib/libibverbs.so.1")
	pabi=$(echo "$syms" | grep -o 'IBVERBS_PRIVATE_[0-9]*' | sort -u | sed 's/IBVERBS_//' | paste -sd, -)
	pub=$(echo "$syms" | grep -o 'IBVERBS_1\.[0-9]*' | sort -u -t. -k2,2n | tail -n 1)
	# The release's programs must load the release's libibverbs.
	loads=$(rel timeout -k 5 "$secs" ldd "$rbin/ibv_devinfo" | awk '$1 == "libibverbs.so.1" { print $3 }')
	if [ "$(readlink -f "$loads")" != "$(readlink -f "$rlib/libibverbs.so.1")" ]; then
		row "$tag" "$pabi" "$pub" - - - - - - - "FAIL: ibv_devinfo loads $loads" >>"$table"
		bad=$((bad + 1))
		continue
	fi
	rel timeout -k 5 "$secs" "$rbin/ibv_devinfo" \
		>"$dir/$tag-bare" 2>&1 </dev/null
	bare_st=$?

	ibemu_build "$tag"
	own="- - -"
	[ "$built" = ok ] && { probe own "$built_lib"; own="$dev $rc $ud"; }
	probe tree "$IBEMU_LIB_PATH"
	tree="$dev $rc $ud"

	works="ok ibemu0 ok ok ibemu0 ok ok"
	got="$built $own $tree"
	if [ "$got" = "$works" ]; then
		verdict=works
	else
		case " $RDMA_CORE_MAY_REFUSE " in
		*" $tag "*) may=1 ;;
		*) may=0 ;;
		esac
		case "$built $own" in
		"ok ibemu0 ok ok" | "refused - - -" | "ok refused - -") own_ok=1 ;;
		*) own_ok=0 ;;
		esac
		case "$tree" in
		"ibemu0 ok ok" | "refused - -") tree_ok=1 ;;
		*) tree_ok=0 ;;
		esac
		if [ $may = 1 ] && [ $own_ok = 1 ] && [ $tree_ok = 1 ]; then
			verdict="refused cleanly (allowed)"
		elif [ $own_ok = 1 ] && [ $tree_ok = 1 ]; then
			verdict="FAIL: refused cleanly, must work"
			bad=$((bad + 1))
		else
			verdict=FAIL
			bad=$((bad + 1))
		fi
	fi
	# shellcheck disable=SC2086
	row "$tag" "$pabi" "$pub" "$built" $own $tree "$verdict" >>"$table"
done
echo
cat "$table"
[ -s "$dir/notes" ] && { echo; cat "$dir/notes"; }
echo
echo "each program's output: $dir"
[ "$bad" = 0 ] && { echo "every release as it should be"; exit 0; }
echo "$bad release(s) not as they should be"
exit 1
