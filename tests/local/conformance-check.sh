#!/bin/bash
# The conformance suite under the checking mode (ibemu(1) CHECKS): the
# suite still passes, and every report is a misuse that one of its tests
# commits on purpose, as conformance-check.expect lists, each named by
# the test function on its stack (tests/lib/check_judge.py); the misuses
# committed on every run must each be reported.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need python3
need addr2line
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT

IBEMU_CHECK=1 IBEMU_CHECK_LOG="$dir/check-%p.log" \
	timeout 600 "$IBEMU" run -- "$IBEMU_BUILDDIR/ibemu-conformance" \
	-d ibemu0 -a 127.0.0.1 >"$dir/out" 2>&1
rc=$?
[ "$rc" = 77 ] && { echo "SKIP: no device"; exit 77; }
if [ "$rc" = 0 ]; then
	pass "the suite passes under the checking mode"
else
	fail "the suite exited $rc under the checking mode"; tail -40 "$dir/out"
fi
if grep -q "ibemu check" "$dir/out"; then
	fail "reports on stderr, not in IBEMU_CHECK_LOG"
	grep "ibemu check" "$dir/out" | head
fi
python3 "$IBEMU_SRCDIR/tests/lib/check_judge.py" \
	"$IBEMU_SRCDIR/tests/local/conformance-check.expect" "$dir"/check-*.log
if [ $? = 0 ]; then
	pass "every report is a misuse the suite commits on purpose"
else
	fail "reports the list does not explain, or a misuse not reported"
fi
finish
