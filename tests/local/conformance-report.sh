#!/bin/bash
# The conformance runner's reports for CI systems (conformance/report.c,
# capability.c, expect.c).  TAP (-T) and JUnit XML (-J) name every test of
# the run with its verdict as CUnit counted it: passed, failed (with the failed assertions), a
# known deviation (listed with -E, conformance/expect.c), or skipped (with
# the reason: a missing capability, -x).  A failure is provoked by losing
# every packet (IBEMU_FAULTS=drop:1) under a UD test.  Beside them: the
# deviation report (-D) and the device's capability matrix (-C).
. "$(dirname "$0")/../lib/lib.sh"
need python3
conf=$IBEMU_BUILDDIR/ibemu-conformance
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT

# The UD suite: one test left to run and fail, the rest out.
IBEMU_FAULTS=drop:1 timeout 120 "$IBEMU" run -- "$conf" -d ibemu0 -s ud \
	-x ud/send_lid -x ud/send_grh -x ud/qkey_mismatch \
	-x ud/no_recv_no_rnr -x ud/longer_than_mtu -x ud/qkey_high_bit \
	-T "$dir/ud.tap" -J "$dir/ud.xml" -D "$dir/ud.dev" >"$dir/ud.out" 2>&1
rc=$?
[ "$rc" = 1 ] && pass "a failing run exits 1" || fail "exit $rc, expected 1"
grep -q "^1\.\.7$" "$dir/ud.tap" && pass "TAP plan: 7 tests" || fail "TAP plan: $(grep '^1\.\.' "$dir/ud.tap")"
grep -q "^not ok 7 - ud/loopback$" "$dir/ud.tap" && pass "TAP: ud/loopback not ok" || fail "TAP: no 'not ok' for ud/loopback"
[ "$(grep -c '^ok [0-9]* - ud/.* # SKIP excluded by -x$' "$dir/ud.tap")" = 6 ] &&
	pass "TAP: the 6 excluded tests as SKIP" || fail "TAP skips: $(grep -c SKIP "$dir/ud.tap")"
grep -A4 "^not ok 7" "$dir/ud.tap" | grep -q "at: conformance/.*:[0-9]" &&
	pass "TAP: the failed assertion's place" || fail "TAP: no place of the failure"
grep -A2 "^not ok 7" "$dir/ud.tap" | grep -q '^  rule: "a UD QP reaches another QP .*(IBA' &&
	pass "TAP: the failed test's rule, with its clause" || fail "TAP: no rule of the failed test"
grep -A1 "^ud/loopback: NEW" "$dir/ud.dev" | grep -q "^  the spec: .*(IBA" &&
	pass "deviation report: what the spec says" || fail "deviation report: no rule"

# JUnit: well-formed, and its counts are CUnit's.
python3 - "$dir/ud.xml" "$dir/ud.out" <<'PY' >"$dir/junit.txt" 2>&1
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
out = open(sys.argv[2]).read()
m = re.search(r"tests\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", out)
total, failed = int(m.group(1)), int(m.group(4))
suites = root.findall("testsuite")
cases = root.findall(".//testcase")
fails = [c for c in cases if c.find("failure") is not None]
skips = [c for c in cases if c.find("skipped") is not None]
assert len(suites) == 1 and suites[0].get("name") == "ud", suites
assert len(cases) == total == 7, (len(cases), total)
assert len(fails) == failed == 1 and fails[0].get("name") == "loopback", fails
assert suites[0].get("failures") == "1" and suites[0].get("skipped") == "6"
assert len(skips) == 6 and all(s.find("skipped").get("message") == "excluded by -x" for s in skips)
print("junit ok")
PY
grep -q "junit ok" "$dir/junit.txt" && pass "JUnit XML: 7 testcases, 1 failure, 6 skipped, as CUnit counted" || fail "JUnit: $(cat "$dir/junit.txt")"

# The deviation report: the failed test, new, and what it did.
grep -q "^ud/loopback: NEW (not in the list)$" "$dir/ud.dev" &&
	grep -q "^  - conformance/test_ud.c:[0-9]*: " "$dir/ud.dev" &&
	grep -q "^# 1 deviation(s)$" "$dir/ud.dev" &&
	pass "deviation report: ud/loopback, new, with its failures" || fail "deviation report: $(cat "$dir/ud.dev")"

# The same run with the failure listed as a known deviation of the device
# kind (-E): expected, the run is green, the reports give the reason.
cat >"$dir/known" <<'KNOWN'
# a deviation list: SUITE/TEST, then why
ud/loopback every packet is dropped on purpose in this test
KNOWN
IBEMU_FAULTS=drop:1 timeout 120 "$IBEMU" run -- "$conf" -d ibemu0 -s ud \
	-x ud/send_lid -x ud/send_grh -x ud/qkey_mismatch \
	-x ud/no_recv_no_rnr -x ud/longer_than_mtu -x ud/qkey_high_bit \
	-E "$dir/known" -T "$dir/known.tap" -J "$dir/known.xml" \
	-D "$dir/known.dev" \
	>"$dir/known.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q "^KNOWN DEVIATION: ud/loopback: every packet" "$dir/known.out" &&
	pass "a listed failure is a known deviation: exit 0" || fail "known deviation: exit $rc"
grep -q "^not ok 7 - ud/loopback # TODO known deviation: every packet is dropped" "$dir/known.tap" &&
	pass "TAP: the known deviation as TODO" || fail "TAP: no TODO for the known deviation"
grep -q 'skipped message="known deviation: every packet' "$dir/known.xml" &&
	! grep -q "<failure" "$dir/known.xml" &&
	pass "JUnit: the known deviation is no failure" || fail "JUnit: known deviation"
grep -q "^ud/loopback: known: every packet is dropped on purpose" "$dir/known.dev" &&
	pass "deviation report: the known deviation with the list's reason" || fail "known deviation report: $(cat "$dir/known.dev")"
# Two runs compared test by test (conformance/compare-verdicts.sh, what
# conformance/rxe-compare.sh does with ibemu0's and rxe0's).
cmp=$IBEMU_BUILDDIR/conformance/compare-verdicts.sh
[ -x "$cmp" ] || cmp=$(dirname "$0")/../../conformance/compare-verdicts.sh
"$cmp" plain "$dir/ud.tap" listed "$dir/known.tap" >"$dir/cmp.out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "^ud/loopback  *FAIL  *known *$" "$dir/cmp.out" &&
	grep -q "^7 tests: 6 the same, 1 differ$" "$dir/cmp.out" &&
	pass "compare-verdicts: the one test that differs" || fail "compare-verdicts: exit $rc: $(cat "$dir/cmp.out")"
"$cmp" a "$dir/ud.tap" b "$dir/ud.tap" >/dev/null 2>&1 &&
	pass "compare-verdicts: a run agrees with itself" || fail "compare-verdicts of a run with itself"
# A listed test that passes is said; a malformed list is refused.
printf 'pd/alloc_dealloc an entry that no longer fails\n' >"$dir/stale"
timeout 60 "$IBEMU" run -- "$conf" -d ibemu0 -s pd -E "$dir/stale" >"$dir/stale.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q "^LISTED BUT PASSED: pd/alloc_dealloc" "$dir/stale.out" &&
	pass "a listed test that passes is said" || fail "stale entry: exit $rc"
printf 'ud/loopback\n' >"$dir/bad"
timeout 60 "$IBEMU" run -- "$conf" -d ibemu0 -s pd -E "$dir/bad" >"$dir/bad.out" 2>&1
rc=$?
[ "$rc" = 99 ] && grep -q "bad:1: expected" "$dir/bad.out" &&
	pass "a list line without a reason: exit 99, file:line" || fail "bad list: exit $rc"
printf '# a typo must not hide a deviation\nud/loopbak every packet dropped\n' >"$dir/typo"
timeout 60 "$IBEMU" run -- "$conf" -d ibemu0 -s pd -E "$dir/typo" >"$dir/typo.out" 2>&1
rc=$?
[ "$rc" = 99 ] && grep -q "typo:2: ud/loopbak is no test of the suite" "$dir/typo.out" &&
	pass "a list naming no test: exit 99, file:line" || fail "typo list: exit $rc"
# The lists kept in the tree name tests that exist.
for f in "$(dirname "$0")"/../../conformance/expect/*.txt; do
	"$conf" -E "$f" -l >/dev/null 2>"$dir/list.err" &&
		pass "$(basename "$f"): every line a test and a reason" ||
		fail "$(basename "$f"): $(cat "$dir/list.err")"
done

# Tests that pass: plain ok lines, testcases with nothing inside.
timeout 120 "$IBEMU" run -- "$conf" -d ibemu0 -s pd -T "$dir/pd.tap" \
	-J "$dir/pd.xml" >"$dir/pd.out" 2>&1
rc=$?
n=$(sed -n 's/^1\.\.//p' "$dir/pd.tap")
[ "$rc" = 0 ] && [ -n "$n" ] && [ "$n" -ge 1 ] &&
	[ "$(grep -c '^ok [0-9]* - pd/[a-z_]*$' "$dir/pd.tap")" = "$n" ] &&
	[ "$(grep -c '<testcase ' "$dir/pd.xml")" = "$n" ] &&
	! grep -q "<failure\|<skipped" "$dir/pd.xml" &&
	pass "passing tests: $n plain ok lines and testcases" || fail "pd: exit $rc, TAP plan ${n:-none}"

# A capability the device lacks: the RDMA CM suite without an address.
timeout 120 "$IBEMU" run -- "$conf" -d ibemu0 -s cm -T "$dir/cm.tap" \
	-J "$dir/cm.xml" -C "$dir/cm.caps" >"$dir/cm.out" 2>&1
rc=$?
[ "$rc" = 0 ] && pass "a run of skips exits 0" || fail "cm: exit $rc"
n=$(grep -c "^ok .* # SKIP no address to test the RDMA CM with (-a ADDR)$" "$dir/cm.tap")
[ "$n" -ge 1 ] && [ "$n" = "$(sed -n 's/^1\.\.//p' "$dir/cm.tap")" ] &&
	pass "TAP: every cm test skipped with its reason ($n)" || fail "cm TAP: $n skips of $(sed -n 's/^1\.\.//p' "$dir/cm.tap")"
grep -q 'skipped message="no address to test the RDMA CM with (-a ADDR)"' "$dir/cm.xml" &&
	pass "JUnit: the skip's reason" || fail "cm JUnit has no skip reason"

# The capability matrix: the device's attributes as verbs report them,
# and what the run found missing, by reason.
grep -q "^device: ibemu0$" "$dir/cm.caps" &&
	grep -q "^port.link_layer: InfiniBand$" "$dir/cm.caps" &&
	grep -q "^cap.xrc: yes$" "$dir/cm.caps" &&
	grep -q "^cap.atomic: hca$" "$dir/cm.caps" &&
	grep -q "^port.gid\[0\]: fe80::.* IB$" "$dir/cm.caps" &&
	pass "capability matrix: the device's attributes" || fail "capability matrix: $(head -5 "$dir/cm.caps")"
grep -q "^skipped: $n: no address to test the RDMA CM with (-a ADDR): cm/" "$dir/cm.caps" &&
	pass "capability matrix: the $n tests skipped for want of an address" || fail "capability matrix skips: $(grep '^skipped' "$dir/cm.caps")"

# A report that cannot be written is a broken run.
timeout 60 "$IBEMU" run -- "$conf" -d ibemu0 -s td -T /nonexistent/dir/x.tap >"$dir/bad.out" 2>&1
rc=$?
[ "$rc" = 99 ] && grep -q "/nonexistent/dir/x.tap" "$dir/bad.out" &&
	pass "an unwritable report: exit 99, said" || fail "unwritable report: exit $rc"
finish
