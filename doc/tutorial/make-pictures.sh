#!/bin/bash
# Run every lesson of the tutorial (tests/local/tutorial.sh) and draw each
# lesson's traces with `ibemu trace show -o` into doc/tutorial/pictures/
# of the build tree: NN-name/TRACE.html, one page per trace, from a real
# run, and NN-name/TRACE.png, its screenshot, where chromium is installed.
# Run from the top of the build tree:
#   bash doc/tutorial/make-pictures.sh [BUILDDIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-.}" && pwd)
ibemu=$build/ibemu
[ -x "$ibemu" ] || { echo "make-pictures: $ibemu is missing: build first, or name the build tree" >&2; exit 2; }
out=$build/doc/tutorial/pictures
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
chmod 755 "$runs"
IBEMU_BUILDDIR=$build IBEMU_SRCDIR=$src TUTORIAL_KEEP=$runs/lessons \
	bash "$src/tests/local/tutorial.sh" || echo "make-pictures: some lessons failed (above)" >&2
chromium=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chromium" ] || echo "make-pictures: chromium is not installed: pages only, no PNG" >&2
rc=0
for d in "$runs"/lessons/*/; do
	name=$(basename "$d")
	mkdir -p "$out/$name"
	for t in "$d"*.trace; do
		[ -f "$t" ] || continue
		html=$out/$name/$(basename "$t" .trace).html
		if ! "$ibemu" trace show -o "$html" "$t" 2>/dev/null; then
			echo "make-pictures: cannot draw $t" >&2
			rc=1
			continue
		fi
		echo "make-pictures: $html"
		[ -n "$chromium" ] || continue
		# As root chromium needs --no-sandbox; the page loads nothing.
		if timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
			--no-first-run --hide-scrollbars --window-size=1000,800 \
			--user-data-dir="$runs/profile" --screenshot="${html%.html}.png" \
			"file://$html" >/dev/null 2>&1; then
			echo "make-pictures: ${html%.html}.png"
		else
			echo "make-pictures: no screenshot of $html" >&2
			rc=1
		fi
	done
done
exit $rc
