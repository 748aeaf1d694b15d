#!/bin/bash
# A responder that exits, destroys its QP, moves it to the error state or
# calls no verb for a while right after its last receive completion has
# acknowledged every message it received: the requester's SENDs all
# succeed (tests/progs/ack_exit.c); with 32-byte messages and with 64 KiB ones,
# which ibemu's responder copies from the sender's memory and acknowledges
# apart (doc/design.md §14 "Large SENDs pulled by the responder"); and
# in a ping-pong, where the last ACK was held for an answer that does
# not come.
. "$(dirname "$0")/../lib/lib.sh"
# With "reply", a ping-pong: the responder answers all but the last
# message, so the ACK of the last has no answer to ride with
# (doc/design.md §9, "An ACK rides with the answer"); run with the fast
# paths, with them and the ACK bundling, and without either.
for fast in "IBEMU_FAST=1 IBEMU_ACK_BUNDLE=1" IBEMU_FAST=1 IBEMU_FAST=0; do
	for how in "" reply; do
		for len in 32 65536; do
			for mode in exit destroy error idle; do
				env $fast LD_PRELOAD=$IBEMU_LIB_PATH \
					"$IBEMU_BUILDDIR/tests/progs/ack_exit" $mode $len $how
				case $? in
				0) pass "ack-exit $mode $len $how ($fast)" ;;
				77) exit 77 ;;
				*) fail "ack-exit $mode $len $how ($fast)" ;;
				esac
			done
		done
	done
done
finish
