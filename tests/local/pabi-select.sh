#!/bin/bash
# The preload chooses the layout of libibverbs' private interface from
# the version nodes of the libibverbs in the process (doc/design.md §2
# "The private ABI"), shown with stand-ins (tests/progs/fake_verbs.c)
# whose private functions abort if called: a release ibemu carries gets
# ibemu0; one it does not, older or newer, even one that keeps a known
# private node, gets one "ibemu:" line naming the release found and the
# ones supported, no device, and the output and exit status the program
# has without the preload.
. "$(dirname "$0")/../lib/lib.sh"
need ibv_devices
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
supported="ibemu supports rdma-core 36 to 64 and the main branch (65); no ibemu device is offered"

# fake NAME FILE: the stand-in NAME as DIR/NAME/FILE, as libibverbs.so.1
fake() {
	mkdir -p "$dir/$1" &&
		cp "$IBEMU_BUILDDIR/tests/progs/.libs/fake_verbs_$1.so" "$dir/$1/$2" &&
		ln -s "$2" "$dir/$1/libibverbs.so.1"
}
fake 35 libibverbs.so.1.13.35.0 &&
	fake 36 libibverbs.so.1.14.36.0 &&
	fake 37 libibverbs.so.1.14.37.0 &&
	fake 65_new libibverbs.so.1.19.66.0 &&
	fake 66 libibverbs.so.1.19.66.0 || { echo "no stand-ins"; exit 99; }

# run NAME [ENV...]: ibv_devices with stand-in NAME, with and without the
# preload; outputs in $dir/{with,without}.{out,err}, statuses in rc_*.
run() {
	local name=$1
	shift
	env "$@" LD_LIBRARY_PATH="$dir/$name" ibv_devices \
		>"$dir/without.out" 2>"$dir/without.err"
	rc_without=$?
	env "$@" LD_LIBRARY_PATH="$dir/$name" LD_PRELOAD="$IBEMU_LIB_PATH" \
		ibv_devices >"$dir/with.out" 2>"$dir/with.err"
	rc_with=$?
}

# refused WHAT NAME LINE [ENV...]: the preload stands aside with LINE.
refused() {
	local what=$1 name=$2 line=$3 n
	shift 3
	run "$name" "$@"
	n=$(grep -c '^ibemu:' "$dir/with.err")
	if [ "$n" != 1 ] || ! grep -qxF "ibemu: $line; $supported" "$dir/with.err"; then
		fail "$what: refusal: $(cat "$dir/with.err")"
	elif grep -q ibemu0 "$dir/with.out"; then
		fail "$what: ibemu0 offered"
	elif [ "$rc_with" != "$rc_without" ] ||
		! cmp -s "$dir/with.out" "$dir/without.out" ||
		! diff <(grep -v '^ibemu:' "$dir/with.err") "$dir/without.err" >/dev/null; then
		fail "$what: the program runs otherwise under the preload (exit $rc_with, $rc_without without)"
	else
		pass "$what: $(cat "$dir/with.err")"
	fi
}

run 37
grep -q ibemu0 "$dir/with.out" && [ "$rc_with" = 0 ] && ! grep -q . "$dir/with.err" &&
	pass "37's nodes: ibemu0 listed, nothing called" ||
	fail "37's nodes: exit $rc_with: $(cat "$dir/with.out" "$dir/with.err")"
# 36: 37's nodes without __verbs_log and its ibv_qp_ex (20 wr ops), the
# row where ibemu opens its own device; it is chosen, nothing is called.
run 36 FAKE_VERBS_QP_EX_WR_OPS=20
grep -q ibemu0 "$dir/with.out" && [ "$rc_with" = 0 ] && ! grep -q . "$dir/with.err" &&
	pass "36's nodes: ibemu0 listed, nothing called" ||
	fail "36's nodes: exit $rc_with: $(cat "$dir/with.out" "$dir/with.err")"
for n in 20 21; do
	run 37 FAKE_VERBS_QP_EX_WR_OPS=$n
	grep -q ibemu0 "$dir/with.out" && [ "$rc_with" = 0 ] &&
		pass "37's nodes, an ibv_qp_ex of $n wr ops: ibemu0 listed" ||
		fail "ibv_qp_ex of $n wr ops: $(cat "$dir/with.err")"
done

at="($dir/35/libibverbs.so.1.13.35.0)"
refused "35" 35 "rdma-core 35.0 $at defines IBVERBS_1.13 and IBVERBS_PRIVATE_34, a layout ibemu does not carry"
at="($dir/65_new/libibverbs.so.1.19.66.0)"
refused "a new public node on PRIVATE_65" 65_new \
	"rdma-core 66.0 $at defines IBVERBS_1.19 and IBVERBS_PRIVATE_65, a layout ibemu does not carry"
at="($dir/66/libibverbs.so.1.19.66.0)"
refused "a new private node" 66 \
	"rdma-core 66.0 $at defines IBVERBS_1.19 and IBVERBS_PRIVATE_66, a layout ibemu does not carry"
at="($dir/37/libibverbs.so.1.14.37.0)"
refused "an ibv_qp_ex of 23 wr ops" 37 \
	"rdma-core 37.0 $at has a struct ibv_qp_ex of a size ibemu does not carry" \
	FAKE_VERBS_QP_EX_WR_OPS=23
finish
