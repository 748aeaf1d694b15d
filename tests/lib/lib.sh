# Shared by the shell tests: find the build tree, run under the preload.
# Exit codes follow automake: 0 pass, 1 fail, 77 skip, 99 hard error.
set -u
: "${IBEMU_BUILDDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
IBEMU_LIB_PATH=$IBEMU_BUILDDIR/.libs/libibemu.so
IBEMU=$IBEMU_BUILDDIR/ibemu
# Every test gets its own emulated node, so parallel tests do not meet.
IBEMU_NODE=${IBEMU_NODE:-check-$(basename "$0" .sh)-$$}
export IBEMU_NODE
# The node's files, the segment and the inboxes, are in the directory
# `ibemu dir` names (emulator/base/shmfile.h): /dev/shm/ibemu-UID unless
# another user made that first.
ibemu_shm_dir() { "$IBEMU" dir 2>/dev/null || echo "${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)"; }
ibemu_cleanup() { local d; d=$(ibemu_shm_dir); rm -f "$d"/v*-"$IBEMU_NODE" "$d"/v*-"$IBEMU_NODE"-p*; }
trap ibemu_cleanup EXIT
fails=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
need() { command -v "$1" >/dev/null 2>&1 || { echo "SKIP: $1 is not installed"; exit 77; }; }
finish() { [ "$fails" = 0 ] && exit 0; echo "$fails check(s) failed"; exit 1; }
# both_placements NAME COMMAND...: run COMMAND under the preload three
# ways: one-sided operations placed by loads and stores into the target's
# memory (the default), by cross-memory attach only (IBEMU_MAP=0), and
# through packets only (IBEMU_CMA=0); one verdict each, exit 77 if COMMAND
# says so.
both_placements() {
	local name=$1 how
	shift
	for how in "IBEMU_MAP=1 IBEMU_CMA=1" "IBEMU_MAP=0 IBEMU_CMA=1" \
		"IBEMU_MAP=1 IBEMU_CMA=0"; do
		env $how LD_PRELOAD=$IBEMU_LIB_PATH "$@"
		case $? in
		0) pass "$name $how" ;;
		77) exit 77 ;;
		*) fail "$name $how" ;;
		esac
	done
}
# own_mount_ns WHAT "$@": re-run this script in a mount namespace of its
# own (root only), to mount over /dev/shm without touching the host's;
# skip, naming WHAT, where that cannot be.
own_mount_ns() {
	local what=$1
	shift
	[ -n "${IBEMU_OWN_MOUNT_NS:-}" ] && return 0
	[ "$(id -u)" = 0 ] || { echo "SKIP: $what needs root"; exit 77; }
	need unshare
	unshare -m --propagation private true 2>/dev/null ||
		{ echo "SKIP: unshare -m (a mount namespace) is not allowed here"; exit 77; }
	IBEMU_OWN_MOUNT_NS=1 exec unshare -m --propagation private bash "$0" "$@"
}
