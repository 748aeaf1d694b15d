#!/bin/bash
# Compare the verdicts of two conformance runs test by test, from their TAP
# files (ibemu-conformance -T): one line per test whose verdict differs,
# then the counts.  A verdict is pass, FAIL, known (a failure listed with
# -E) or skip.
#
#   conformance/compare-verdicts.sh NAME_A A.tap NAME_B B.tap
#
# Exit status: 0 when the two agree on every test both ran, 1 when they
# differ, 2 on a usage error.  conformance/rxe-compare.sh runs the suite on
# ibemu0 and on the kernel's rxe0 (in the rxe VM) and calls this.
set -u
if [ $# -ne 4 ] || [ ! -r "$2" ] || [ ! -r "$4" ]; then
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
	exit 2
fi
verdicts() {
	sed -n -E \
		-e 's/^not ok [0-9]+ - ([^ ]+) # TODO .*/\1 known/p' \
		-e 's/^not ok [0-9]+ - ([^ ]+)$/\1 FAIL/p' \
		-e 's/^ok [0-9]+ - ([^ ]+) # SKIP .*/\1 skip/p' \
		-e 's/^ok [0-9]+ - ([^ ]+)$/\1 pass/p' "$1" | sort
}
a=$(mktemp) b=$(mktemp)
trap 'rm -f "$a" "$b"' EXIT
verdicts "$2" >"$a"
verdicts "$4" >"$b"
printf '%-44s %-8s %-8s\n' test "$1" "$3"
join -a 1 -a 2 -e - -o 0,1.2,2.2 "$a" "$b" | awk -v A="$1" -v B="$3" '
	{ n++; if ($2 == $3) { same++; next } }
	{ printf "%-44s %-8s %-8s\n", $1, $2, $3; diff++ }
	END { printf "%d tests: %d the same, %d differ\n", n, same, diff;
	      exit diff ? 1 : 0 }'
