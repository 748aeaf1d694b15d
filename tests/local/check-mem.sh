#!/bin/bash
# The checking mode's memory and lifetime checks (ibemu run --check,
# emulator/engine/check_mem.c, provider/verbs/check_verbs.c): each misuse
# of tests/progs/check_mem.c is reported as its kind, naming its object,
# the rule and the offending function (and the post's, where there is
# one); its correct twin is reported clean; IBEMU_CHECK=abort stops at
# the first report, IBEMU_CHECK_LOG writes to a file, and without the
# checking mode nothing is said.
. "$(dirname "$0")/../lib/lib.sh"
prog=$IBEMU_BUILDDIR/tests/progs/check_mem
out=$(mktemp)
trap 'rm -f "$out" "$out".log; ibemu_cleanup' EXIT

# misuse  kind  object pattern  function at  function posted at ('-': none)
while read -r cmd kind obj at posted; do
	"$IBEMU" run --check -- "$prog" "$cmd" >"$out" 2>&1
	rc=$?
	[ "$rc" = 77 ] && { echo "SKIP: no device"; exit 77; }
	kinds=$(grep -o 'ibemu check: [a-z-]*:' "$out" | grep -v summary | sort -u | tr '\n' ' ')
	if [ "$rc" = 0 ] && [ "$kinds" = "ibemu check: $kind: " ] &&
		grep -q "ibemu check: $kind: .*$obj" "$out" &&
		grep -q "rule: " "$out" &&
		sed -n '/  at[ :]/,/  posted at:/p' "$out" | grep -q " in $at+" &&
		{ [ "$posted" = - ] ||
			sed -n '/  posted at:/,$p' "$out" | grep -q " in $posted+"; }; then
		pass "$cmd: $kind, naming $at"
	else
		fail "$cmd: rc $rc, kinds '$kinds'"; cat "$out"
	fi
	"$IBEMU" run --check -- "$prog" "$cmd-ok" >"$out" 2>&1
	if [ $? = 0 ] && grep -q "ibemu check: no misuse found" "$out" &&
		! grep -v summary "$out" | grep -q "ibemu check: [a-z-]*:"; then
		pass "$cmd-ok: clean"
	else
		fail "$cmd-ok: not clean"; cat "$out"
	fi
done <<'LIST'
send-reuse send-buffer-changed SGE.0.*lkey main post_send_a
send-reuse-idle send-buffer-changed SGE.0.*lkey main post_send_a
send-reuse-again send-buffer-changed SGE.0.*lkey main post_via_second
dereg-busy dereg-in-flight wr_id.0xa0.*send.queue dereg_busy post_send_a
dereg-bound dereg-window-bound window.rkey dereg_bound -
destroy-qp-busy destroy-qp-busy 1.send.work.request.*wr_id.0xa0 destroy_qp_busy post_send_a
dealloc-pd-busy destroy-busy ibv_dealloc_pd.*2.MRs dealloc_pd_busy -
destroy-cq-events destroy-cq-events CQ.*destroyed.with.1.of.its.1.completion.events.not.acknowledged destroy_cq_events -
recv-written recv-buffer-written wr_id.0xb0:.SGE.0.*of.a.receive main post_recv_b
read-dest-written recv-buffer-written wr_id.0xa2:.SGE.0.*RDMA.READ main post_read_a
unmap-registered unmap-registered munmap(.*still.registered.as.MR.*wr_id.0xb1.on.QP unmap_registered -
free-registered unmap-registered free(.*still.registered.as.MR.*wr_id.0xb1.on.QP free_registered -
LIST

# Found on the device's own thread while the program slept: reported at
# the program's next verbs call, with that call's stack.
"$IBEMU" run --check -- "$prog" send-reuse-idle >"$out" 2>&1
if grep -q "  at (found by the HCA, reported at the program's next verbs" "$out"; then
	pass "send-reuse-idle: reported at the program's next call"
else
	fail "send-reuse-idle: not deferred"; cat "$out"
fi

# Leaks: the QPs and MRs never destroyed, in the summary at exit.
"$IBEMU" run --check -- "$prog" leak >"$out" 2>&1
if grep -q "ibemu check: leak: .*2 MRs.*2 QPs.* not destroyed" "$out"; then
	pass "leak: QPs and MRs named"
else
	fail "leak: not reported"; cat "$out"
fi

# abort: stops at the first report, by SIGABRT (128 + 6).
IBEMU_CHECK=abort "$IBEMU" run -- "$prog" destroy-qp-busy >"$out" 2>&1
rc=$?
if [ "$rc" = 134 ] && grep -q "IBEMU_CHECK=abort" "$out" &&
	! grep -q "summary" "$out"; then
	pass "abort: SIGABRT at the first report"
else
	fail "abort: rc $rc"; cat "$out"
fi

# The log file gets the reports; stderr does not.
IBEMU_CHECK_LOG=$out.log "$IBEMU" run --check -- "$prog" dereg-busy >"$out" 2>&1
if grep -q "dereg-in-flight" "$out.log" && ! grep -q "ibemu check" "$out"; then
	pass "IBEMU_CHECK_LOG: to the file"
else
	fail "IBEMU_CHECK_LOG"; cat "$out" "$out.log"
fi

# Off: not a word.
(unset IBEMU_CHECK; "$IBEMU" run -- "$prog" send-reuse) >"$out" 2>&1
if ! grep -q "ibemu check" "$out"; then
	pass "off: nothing said"
else
	fail "off: reported"; cat "$out"
fi
finish
