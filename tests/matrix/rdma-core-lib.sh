# shellcheck shell=bash
# The rdma-core release cache shared by tests/matrix/rdma-core-build.sh
# and tests/matrix/rdma-core.sh: where a release's sources and build are,
# and how one is fetched and built.
#
# <cache>/<tag>/src      the release's sources
# <cache>/<tag>/build    its cmake build: lib/libibverbs.so.1, bin/ibv_*,
#                        include/infiniband/*.h (rdma-core's build layout)
# <cache>/<tag>/build.log
# <cache>/<tag>/COMMIT   the commit built (the tag's, or the branch's then)
# <cache>/<tag>/READY    written last; holds lib/libibverbs.so.1's path
: "${RDMA_CORE_GIT:=https://github.com/linux-rdma/rdma-core.git}"
: "${RDMA_CORE_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/rdma-core}"
: "${RDMA_CORE_JOBS:=2}"
# Bounds, in seconds, on one configure and one build.
: "${RDMA_CORE_CONFIGURE_SECS:=600}"
: "${RDMA_CORE_BUILD_SECS:=1800}"
# The releases the matrix covers, the distributions' first (issue 27):
# each private ABI (34: 35-56, 57: 57-58, 59: 59-63, 64, and main) and
# each layout of struct verbs_context_ops inside one (35, 36, 59, 62, 64).
: "${RDMA_CORE_VERSIONS:=v61.0 v64.0 main v57.0 v36.0 v39.0 v59.0 v62.0 v56.1 v35.0 v44.0}"
# What the matrix needs of each release: ninja targets, as named by
# rdma_library() and rdma_executable() in every release's CMakeLists.
RDMA_CORE_TARGETS="ibverbs rdmacm ibv_devinfo ibv_devices ibv_rc_pingpong ibv_ud_pingpong"

# rdma_core_tag VERSION: the git ref for 61, 61.0, v61.0 or a branch name.
rdma_core_tag() {
	case $1 in
	v[0-9]*) echo "$1" ;;
	[0-9]*.*) echo "v$1" ;;
	[0-9]*) echo "v$1.0" ;;
	*) echo "$1" ;;
	esac
}

rdma_core_dir() { echo "$RDMA_CORE_CACHE/$1"; }

# rdma_core_fetch TAG DIR: the sources of TAG into DIR/src.  A local
# repository (bare or not) is read with git archive; a URL is cloned at
# depth 1.  TAG main is the repository's default branch (rdma-core calls
# it master), the next release in the making.
rdma_core_fetch() {
	local tag=$1 dir=$2 gitdir branch
	[ "$tag" = main ] && branch= || branch="--branch $tag"
	rm -rf "$dir/src" && mkdir -p "$dir/src" || return 1
	if [ -d "$RDMA_CORE_GIT" ]; then
		gitdir=$(git -C "$RDMA_CORE_GIT" rev-parse --git-dir) || return 1
		case $gitdir in /*) ;; *) gitdir=$RDMA_CORE_GIT/$gitdir ;; esac
		[ "$tag" = main ] && tag=HEAD
		git --git-dir="$gitdir" rev-parse --verify -q "$tag^{commit}" >"$dir/COMMIT" ||
			{ echo "rdma-core: no $tag in $RDMA_CORE_GIT" >&2; return 1; }
		git --git-dir="$gitdir" archive --format=tar "$tag" | tar -x -C "$dir/src"
	else
		git -c advice.detachedHead=false clone -q --depth 1 $branch \
			"$RDMA_CORE_GIT" "$dir/src" &&
			git -C "$dir/src" rev-parse HEAD >"$dir/COMMIT"
	fi
}

# rdma_core_build TAG: fetch and build TAG unless its READY exists.  The
# log is DIR/build.log; one line on stderr says what was done and how long
# it took.  DIR.lock (flock) keeps two processes from building one TAG.
rdma_core_build() {
	local tag=$1 dir
	dir=$(rdma_core_dir "$tag")
	[ -f "$dir/READY" ] && return 0
	mkdir -p "$dir" || return 1
	(
		flock -w "$RDMA_CORE_BUILD_SECS" 9 ||
			{ echo "rdma-core $tag: $dir.lock is held" >&2; exit 1; }
		[ -f "$dir/READY" ] || rdma_core_build_locked "$tag" "$dir"
	) 9>"$dir.lock"
}

rdma_core_build_locked() {
	local tag=$1 dir=$2 start
	start=$(date +%s)
	echo "rdma-core $tag: building in $dir/build" >&2
	rm -f "$dir/READY"
	{
		rdma_core_fetch "$tag" "$dir" &&
		rm -rf "$dir/build" && mkdir "$dir/build" &&
		(cd "$dir/build" && timeout "$RDMA_CORE_CONFIGURE_SECS" cmake -GNinja -DIN_PLACE=1 -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo ../src) &&
		timeout "$RDMA_CORE_BUILD_SECS" \
			ninja -C "$dir/build" -j "$RDMA_CORE_JOBS" $RDMA_CORE_TARGETS
	} >"$dir/build.log" 2>&1 ||
		{ echo "rdma-core $tag: build failed, see $dir/build.log" >&2; return 1; }
	[ -e "$dir/build/lib/libibverbs.so.1" ] ||
		{ echo "rdma-core $tag: no build/lib/libibverbs.so.1" >&2; return 1; }
	echo $(($(date +%s) - start)) >"$dir/SECONDS"
	echo "$dir/build/lib/libibverbs.so.1" >"$dir/READY"
	echo "rdma-core $tag: built in $(cat "$dir/SECONDS") s" >&2
}
