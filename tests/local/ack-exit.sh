#!/bin/bash
# A responder that exits, destroys its QP, moves it to the error state or
# calls no verb for a while right after its last receive completion has
# acknowledged every message it received: the requester's SENDs all
# succeed (tests/progs/ack_exit.c); with 32-byte messages and with 64 KiB ones,
# which ibemu's responder copies from the sender's memory and acknowledges
# apart (doc/design.md §14 "Large SENDs pulled by the responder").
. "$(dirname "$0")/../lib/lib.sh"
for len in 32 65536; do
	for mode in exit destroy error idle; do
		LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/ack_exit" $mode $len
		case $? in
		0) pass "ack-exit $mode $len" ;;
		77) exit 77 ;;
		*) fail "ack-exit $mode $len" ;;
		esac
	done
done
finish
