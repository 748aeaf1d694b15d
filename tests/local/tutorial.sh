#!/bin/bash
# The tutorial (doc/tutorial/) as its readers run it: each lesson's ```sh
# blocks in order, in one shell, in a scratch directory, in a fresh
# container made with the README's own unshare recipe (as an unprivileged
# user where the build tree lets one run it), bounded in time; each block
# must succeed and end with the ```output block that follows it; each
# `<!-- trace: FILE REGEX -->` of the lesson must match a line of FILE, each
# `<!-- shows: REGEX -->` a line of what the sh block above it printed (the
# ladder of `ibemu trace show --text`: its lanes and packets), and each
# page a block writes with `ibemu trace show ... -o PAGE` must be there,
# an HTML page with its drawing.
#
# TUTORIAL_KEEP=DIR keeps each lesson's scratch directory as DIR/NN-name
# (doc/tutorial/make-pictures.sh); TUTORIAL_LESSONS="01 04" runs some.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need unshare
need ip
need ss
tut=$IBEMU_SRCDIR/doc/tutorial
work=$(mktemp -d)
chmod 755 "$work"
trap 'rm -rf "$work"; ibemu_cleanup' EXIT
secs=${TUTORIAL_TIMEOUT:-240}

# The recipe: the sh block after the README's "<!-- container -->" line,
# its shell given the lesson's script to run.
recipe=$(awk '/^<!-- container -->$/ { c = 1; next }
	c && /^```sh$/ { on = 1; next } on && /^```$/ { exit } on' "$tut/README.md")
[ -n "$recipe" ] || { echo "FAIL: no container recipe in $tut/README.md"; exit 1; }

# As nobody where the namespace and the build tree allow it.
as=()
if [ "$(id -u)" = 0 ]; then
	as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	if ! "${as[@]}" test -x "$IBEMU_BUILDDIR/ibemu" -a \
		-r "$IBEMU_LIB_PATH" -a -r "$tut/README.md" 2>/dev/null ||
		! "${as[@]}" unshare --user --map-root-user true 2>/dev/null; then
		echo "note: the build tree or a user namespace is not open to nobody: lessons run as root"
		as=()
	fi
fi
[ ${#as[@]} -gt 0 ] && echo "note: lessons run as nobody (uid 65534) in a user namespace" ||
	[ "$(id -u)" = 0 ] || echo "note: lessons run as $(id -un) in a user namespace"
unshare --user --map-root-user true 2>/dev/null || [ ${#as[@]} -gt 0 ] ||
	{ echo "SKIP: unprivileged user namespaces are not allowed here"; exit 77; }

# split LESSON DIR: DIR/step-N.sh for each sh block, DIR/step-N.expect for
# an output block right after it, DIR/traces the checks "FILE REGEX" (of
# a shows line: FILE is ../step-N.out, the output of block N), DIR/pages
# the HTML pages.
split() {
	awk -v d="$2" '
		/^<!-- trace: / { sub(/^<!-- trace: /, ""); sub(/ -->$/, "")
			print > (d "/traces"); next }
		/^<!-- shows: / { sub(/^<!-- shows: /, ""); sub(/ -->$/, "")
			print "../step-" n ".out", $0 > (d "/traces"); next }
		/^```sh$/ { n++; f = d "/step-" n ".sh"; on = 1; prev = "sh"; next }
		/^```output$/ && prev == "sh" { f = d "/step-" n ".expect"; on = 2; next }
		/^```/ && !on { prev = ""; next }
		/^```$/ && on { on = 0; next }
		on == 1 && /ibemu trace show .*-o [^ ]/ {
			page = $0; sub(/.*ibemu trace show .*-o /, "", page)
			sub(/ .*/, "", page); print page > (d "/pages") }
		on { print > f; next }
		/[^ ]/ { prev = "" }
	' "$1"
}

for md in "$tut"/[0-9][0-9]-*.md; do
	name=$(basename "$md" .md)
	case " ${TUTORIAL_LESSONS:-${name%%-*}} " in *" ${name%%-*} "*) ;; *) continue ;; esac
	d=$work/$name
	mkdir -p "$d/scratch"
	split "$md" "$d"
	{
		echo "cd '$d/scratch' || exit 1"
		echo "unset IBEMU_NODE IBEMU_TRACE IBEMU_FAULTS"
		echo "export PATH='$IBEMU_BUILDDIR:$IBEMU_BUILDDIR/examples:$IBEMU_SRCDIR/examples':\$PATH"
		echo "export IBEMU_BUILDDIR='$IBEMU_BUILDDIR' MC_EXAMPLE='$IBEMU_BUILDDIR/examples/mc_example'"
		for s in $(ls "$d" | grep -E '^step-[0-9]+\.sh$' | sort -t- -k2n); do
			echo "{ . '$d/$s'; } > '$d/${s%.sh}.out' 2>&1 < /dev/null; echo \$? > '$d/${s%.sh}.rc'"
		done
	} >"$d/run.sh"
	[ ${#as[@]} -gt 0 ] && chown -R 65534:65534 "$d"
	timeout -k 5 "$secs" "${as[@]}" bash -c "$recipe"' "$0"' "$d/run.sh" \
		>"$d/container.out" 2>&1
	rc=$?
	[ $rc = 0 ] || { fail "$name: the container exited $rc:"; sed 's/^/    /' "$d/container.out" | tail -5; }
	steps=0 bad=0
	for s in $(ls "$d" | grep -E '^step-[0-9]+\.sh$' | sort -t- -k2n); do
		b=$d/${s%.sh}
		steps=$((steps + 1))
		why=
		if [ ! -f "$b.rc" ]; then
			why="did not run"
		elif [ "$(cat "$b.rc")" != 0 ]; then
			why="exited $(cat "$b.rc")"
		elif [ -f "$b.expect" ] &&
			! diff -q <(tail -n "$(wc -l <"$b.expect")" "$b.out") "$b.expect" >/dev/null; then
			why="does not end with its output block"
		fi
		[ -z "$why" ] && continue
		bad=$((bad + 1))
		fail "$name: block ${s%.sh} $why:"
		sed 's/^/    $ /' "$d/$s"
		tail -n 8 "$b.out" 2>/dev/null | sed 's/^/    /'
	done
	[ "$bad" = 0 ] && pass "$name: $steps block(s) ran and ended as the lesson says"
	while read -r file re; do
		[ -n "$file" ] || continue
		if grep -qE -- "$re" "$d/scratch/$file" 2>/dev/null; then
			pass "$name: $file has /$re/"
		else
			fail "$name: $file has no line matching /$re/"
		fi
	done < <(cat "$d/traces" 2>/dev/null)
	while read -r page; do
		[ -n "$page" ] || continue
		p=$d/scratch/$page
		if [ -s "$p" ] && grep -q "<svg" "$p" && grep -q "data-selfcheck" "$p"; then
			pass "$name: $page is a ladder page"
		else
			fail "$name: $page is missing or has no drawing"
		fi
	done < <(cat "$d/pages" 2>/dev/null)
	if [ -n "${TUTORIAL_KEEP:-}" ]; then
		mkdir -p "$TUTORIAL_KEEP"
		rm -rf "${TUTORIAL_KEEP:?}/$name"
		cp -r "$d/scratch" "$TUTORIAL_KEEP/$name"
	fi
done
finish
