#!/bin/bash
# A UD peer that stops draining its inbox must not hold up the sender's
# other datagrams (tests/progs/ud_dead_peer.c).
. "$(dirname "$0")/../lib/lib.sh"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/ud_dead_peer"
case $? in
0) pass "ud-dead-peer" ;;
77) exit 77 ;;
*) fail "ud-dead-peer" ;;
esac
finish
