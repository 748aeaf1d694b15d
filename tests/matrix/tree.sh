# shellcheck shell=bash
# The tree the matrix scripts build, sourced by tests/matrix/arm64.sh and
# tests/matrix/chroots.sh: the work tree's files as they are, tracked or
# new (what git does not ignore), without its build products.
#
#   tree_export TOP DEST   copy them into DEST (existing files are
#                          overwritten, their times kept)
#   tree_describe TOP      one line: the commit, and whether the work
#                          tree differs from it

tree_files() {
	local f
	git -C "$1" ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[ -e "$1/$f" ] && printf '%s\0' "$f"
		done
}

tree_export() {
	mkdir -p "$2" &&
		tree_files "$1" | tar -C "$1" --null -T - -c | tar -C "$2" -x
}

tree_describe() {
	local dirty
	dirty=$(git -C "$1" status --porcelain --untracked-files=normal | head -n1)
	echo "$(git -C "$1" rev-parse --short HEAD)${dirty:+ with uncommitted changes}"
}
