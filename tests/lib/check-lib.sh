# The checking mode's misuse tests (check-proto.sh, check-life.sh):
# check_cases PROGRAM reads cases from stdin, one a line:
#   CASE KIND[,KIND IT MAY LEAD TO...] OBJECT-ERE RULE-ERE FUNCTION
# and runs `ibemu run --check -- PROGRAM CASE`: it must exit 0 and be
# reported as KIND with a message starting OBJECT-ERE, a rule matching
# RULE-ERE and a stack naming FUNCTION ('-': none to name), with no kind
# but those listed (not reported for a wrong reason); then PROGRAM
# CASE-ok must be reported clean.  Sourced after lib.sh.
check_cases()
{
	local prog=$1 name out c kinds_ok obj rule fn kind rc other
	name=$(basename "$prog")
	out=$(mktemp)
	while read -r c kinds_ok obj rule fn; do
		kind=${kinds_ok%%,*}
		timeout 60 "$IBEMU" run --check -- "$prog" "$c" >"$out" 2>&1
		rc=$?
		[ $rc = 77 ] && { rm -f "$out"; echo "SKIP: no device"; exit 77; }
		other=$(grep -o 'ibemu check: [a-z-]*:' "$out" | grep -v summary |
			sed 's/ibemu check: \(.*\):/\1/' |
			grep -vxF "$(echo "$kinds_ok" | tr ',' '\n')")
		if [ $rc = 0 ] && [ -z "$other" ] &&
		   grep -q "ibemu check: $kind: $obj" "$out" &&
		   grep -q "rule: .*$rule" "$out" &&
		   { [ "$fn" = - ] || grep -q "#[0-9]* .* in $fn+" "$out"; }; then
			pass "$name $c: $kind"
		else
			fail "$name $c: $kind"; cat "$out"
		fi
		timeout 60 "$IBEMU" run --check -- "$prog" "$c-ok" >"$out" 2>&1
		if [ $? = 0 ] && grep -q "ibemu check: no misuse found" "$out"; then
			pass "$name $c-ok: clean"
		else
			fail "$name $c-ok: clean"; cat "$out"
		fi
	done
	rm -f "$out"
}
