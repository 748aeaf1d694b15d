#!/bin/bash
# RDMA CM objects torn down while another thread reads their events
# (tests/progs/cm_teardown.c): no crash, no failure on a descriptor that is
# not the channel's.
. "$(dirname "$0")/../lib/lib.sh"
for what in chan id late; do
	out=$(LD_PRELOAD=$IBEMU_LIB_PATH timeout -k 5 60 \
		"$IBEMU_BUILDDIR/tests/progs/cm_teardown" $what 2>&1)
	rc=$?
	case $rc in
	0) echo "$out" ;;
	77) echo "$out"; exit 77 ;;
	*) fail "cm-teardown $what (exit $rc)"; echo "$out" ;;
	esac
done
finish
