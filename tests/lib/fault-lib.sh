# Shared by the fault-injection tests (tests/local/fault-inject.sh,
# tests/local/fault-inject-rc.sh): run tests/progs/fault_inject under the preload.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
prog=$IBEMU_BUILDDIR/tests/progs/fault_inject
faults="drop:0.01,dup:0.01,reorder:0.01"
tmp=$(mktemp -d)
trap 'ibemu_cleanup; rm -rf "$tmp"' EXIT

# run NAME COMMAND...: pass if it exits 0; its output is in $tmp/out.
run() {
	local name=$1
	shift
	LD_PRELOAD=$IBEMU_LIB_PATH "$@" > "$tmp/out" 2>&1
	local rc=$?
	[ "$rc" = 77 ] && { echo "SKIP: no device"; exit 77; }
	if [ "$rc" = 0 ]; then
		pass "$name"
	else
		sed 's/^/    /' "$tmp/out" | tail -20
		fail "$name (exit $rc)"
	fi
}
