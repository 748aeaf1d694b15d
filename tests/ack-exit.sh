#!/bin/bash
# A responder that exits, destroys its QP, moves it to the error state or
# calls no verb for a while right after its last receive completion has
# acknowledged every message it received: the requester's SENDs all
# succeed (tests/ack_exit.c).
. "$(dirname "$0")/lib.sh"
for mode in exit destroy error idle; do
	LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/ack_exit" $mode
	case $? in
	0) pass "ack-exit $mode" ;;
	77) exit 77 ;;
	*) fail "ack-exit $mode" ;;
	esac
done
finish
