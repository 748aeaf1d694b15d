#!/bin/bash
# UMR over indirect mkeys through libmlx5's API (tests/progs/dv_umr.c): a
# strided WRITE through an interleaved mkey lands in the pattern byte for
# byte, READ and SEND/receive through mkeys, the MLX5DV_WC_UMR completion,
# libmlx5's limits, and what an invalidated mkey or a range past the
# layout gives (doc/design.md, "Indirect mkeys and UMR").
. "$(dirname "$0")/../lib/lib.sh"
prog=$IBEMU_BUILDDIR/tests/progs/dv_umr
[ -x "$prog" ] || { echo "SKIP: built without libmlx5's mlx5dv.h"; exit 77; }
trap ibemu_cleanup EXIT
for fast in IBEMU_FAST=1 IBEMU_FAST=0; do
	env $fast LD_PRELOAD=$IBEMU_LIB_PATH timeout 60 "$prog"
	case $? in
	0) pass "dv_umr ($fast)" ;;
	77) exit 77 ;;
	*) fail "dv_umr ($fast)" ;;
	esac
done
finish
