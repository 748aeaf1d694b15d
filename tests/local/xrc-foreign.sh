#!/bin/bash
# An XRC domain is one process's (ibemu(7) LIMITATIONS): what would need
# another process's XRC SRQ or target QP fails, and ibemu says why
# (tests/progs/xrc_foreign.c).
. "$(dirname "$0")/../lib/lib.sh"
err=$(mktemp)
trap 'rm -f "$err"; ibemu_cleanup' EXIT
LD_PRELOAD=$IBEMU_LIB_PATH timeout 60 "$IBEMU_BUILDDIR/tests/progs/xrc_foreign" 2>"$err"
rc=$?
sed 's/^/    /' "$err"
case $rc in
0) pass "xrc-foreign: the other process's SRQ and QP are refused" ;;
77) exit 77 ;;
*) fail "xrc-foreign" ;;
esac
if grep -q "SRQ .* belongs to another process" "$err" &&
	grep -q "open_qp: QP .* belongs to another process" "$err"; then
	pass "xrc-foreign: both refusals are logged"
else
	fail "xrc-foreign: the refusals are not logged"
fi
finish
