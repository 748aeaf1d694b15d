#!/bin/bash
# Run every lesson of the tutorial (tests/local/tutorial.sh) and draw each
# lesson's traces with `ibemu trace show -o` into doc/tutorial/pictures/
# of the build tree: NN-name/TRACE.html, one page per trace, from a real
# run.  Run from the top of the build tree:
#   bash doc/tutorial/make-pictures.sh [BUILDDIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-.}" && pwd)
ibemu=$build/ibemu
[ -x "$ibemu" ] || { echo "make-pictures: $ibemu is missing: build first, or name the build tree" >&2; exit 2; }
if ! "$ibemu" trace show --help >/dev/null 2>&1; then
	echo "make-pictures: this ibemu has no 'ibemu trace show': no pictures drawn" >&2
	exit 0
fi
out=$build/doc/tutorial/pictures
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
chmod 755 "$runs"
IBEMU_BUILDDIR=$build IBEMU_SRCDIR=$src TUTORIAL_KEEP=$runs/lessons \
	bash "$src/tests/local/tutorial.sh" || echo "make-pictures: some lessons failed (above)" >&2
rc=0
for d in "$runs"/lessons/*/; do
	name=$(basename "$d")
	mkdir -p "$out/$name"
	for t in "$d"*.trace; do
		[ -f "$t" ] || continue
		html=$out/$name/$(basename "$t" .trace).html
		if "$ibemu" trace show -o "$html" "$t"; then
			echo "make-pictures: $html"
		else
			echo "make-pictures: cannot draw $t" >&2
			rc=1
		fi
	done
done
exit $rc
