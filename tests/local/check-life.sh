#!/bin/bash
# The checking mode's registration and lifetime checks (ibemu run
# --check; emulator/hca/check_reg.c, provider/verbs/check_life.c): each
# misuse of tests/progs/check_life.c is reported as its kind, naming its
# object, the rule and the offending function; its correct twin is
# reported clean, and a clean RDMA CM program is reported clean.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/check-lib.sh"
out=$(mktemp)
trap 'rm -f "$out"; ibemu_cleanup' EXIT
check_cases "$IBEMU_BUILDDIR/tests/progs/check_life" <<'CASES'
reg-conflict reg-conflict MR.lkey.0x[0-9a-f]*.*access.0x2).registers.bytes.of.MR.lkey.*access.0) IBA.10.6.3.1 reg_twice
async-unacked destroy-async-events QP.0x[0-9a-f]*.destroyed.with.1.of.its.1.asynchronous ibv_ack_async_event destroy_qp_unacked
srq-busy destroy-busy ibv_destroy_srq.with.1.QPs ibv_destroy_srq destroy_srq_busy
cq-rearm cq-not-armed CQ.0x[0-9a-f]*.has.completions.waiting.and.was.not.re-armed ibv_get_cq_event(3) wait_event_unarmed
CASES

# The RDMA CM's own device context and PD (provider/rdmacm/rdmacm_qp.c's
# face_init, kept for the process's life as librdmacm keeps its devices)
# are not the program's leaks: a program that destroys its id and channel
# and frees its device list is clean.
cm_route=$IBEMU_BUILDDIR/tests/progs/cm_route
timeout 60 "$IBEMU" run --check -- "$cm_route" 127.0.0.1=ibemu0 >"$out" 2>&1
if [ $? = 0 ] && grep -q "ibemu check: no misuse found" "$out"; then
	pass "rdma_cm: its own context and PD are not leaks"
else
	fail "rdma_cm: not clean"; cat "$out"
fi
finish
