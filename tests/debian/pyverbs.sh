#!/bin/bash
# A verbs program written with pyverbs runs over ibemu (tests/progs/pyverbs_rc.py).
. "$(dirname "$0")/../lib/lib.sh"
[ -x /usr/bin/python3 ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
LD_PRELOAD=$IBEMU_LIB_PATH timeout 120 /usr/bin/python3 \
	"$IBEMU_SRCDIR/tests/progs/pyverbs_rc.py"
case $? in
0) pass "pyverbs RC program" ;;
77) exit 77 ;;
*) fail "pyverbs RC program" ;;
esac
finish
