#!/bin/bash
# make install (into a DESTDIR): the ibemu command, the preload, audit
# and checking libraries, ibemu-conformance and the man pages land in the configured
# directories; the installed ibemu runs programs with the installed
# libraries, not the build tree's; make uninstall takes every file away.
# debian/ibemu.install names the same files for the package, and
# debian/changelog carries the version configure.ac gives.
. "$(dirname "$0")/../lib/lib.sh"
need ibv_devices
unset LD_PRELOAD LD_AUDIT IBEMU_LIB
dest=$(mktemp -d /tmp/ibemu-install.XXXXXX)
trap 'ibemu_cleanup; rm -rf "$dest"' EXIT
# A make of its own, not a job of the make check that runs this test.
mk() { env -u MAKEFLAGS -u MFLAGS make -s --no-print-directory -C "$IBEMU_BUILDDIR" "$@"; }

# The configured directories, as make expands them.
read -r bindir libdir mandir pkgdatadir < <(mk -f Makefile -f - print-dirs <<'MK'
print-dirs:
	@echo '$(bindir) $(libdir) $(mandir) $(pkgdatadir)'
MK
)
[ -n "$pkgdatadir" ] || { echo "cannot read the configured directories"; exit 99; }

mk install DESTDIR="$dest" >"$dest.log" 2>&1 && pass "make install DESTDIR=..." ||
	{ cat "$dest.log"; fail "make install"; }
rm -f "$dest.log"
for f in "$bindir/ibemu" "$bindir/ibemu-conformance" "$libdir/libibemu.so" \
	"$libdir/libibemu-audit.so" "$libdir/libibemu-check.so" \
	"$mandir/man1/ibemu.1" "$mandir/man7/ibemu.7" \
	"$pkgdatadir/conformance/ibemu.txt"; do
	[ -f "$dest$f" ] && pass "installed $f" || fail "$f not installed"
done

cmd=$dest$bindir/ibemu
out=$("$cmd" run -- sh -c 'echo "$LD_PRELOAD $LD_AUDIT"' 2>&1)
[ "$out" = "$dest$libdir/libibemu.so $dest$libdir/libibemu-audit.so" ] &&
	pass "the installed ibemu preloads the installed libraries" ||
	fail "the installed ibemu preloads: $out"
out=$("$cmd" run --check -- sh -c 'echo "$LD_PRELOAD"' 2>&1)
[ "$out" = "$dest$libdir/libibemu.so:$dest$libdir/libibemu-check.so" ] &&
	pass "checking, the installed ibemu preloads the installed libibemu-check.so" ||
	fail "the installed ibemu --check preloads: $out"
out=$("$cmd" run -- ibv_devices 2>&1)
echo "$out" | grep -q "ibemu0" && pass "installed: ibv_devices lists ibemu0" ||
	fail "installed: ibv_devices: $out"
"$dest$bindir/ibemu-conformance" -h 2>&1 | grep -qi "usage" &&
	pass "installed ibemu-conformance runs" || fail "installed ibemu-conformance"

mk uninstall DESTDIR="$dest" >/dev/null 2>&1 || fail "make uninstall"
left=$(find "$dest" ! -type d)
[ -z "$left" ] && pass "make uninstall leaves no file" || fail "left after uninstall: $left"

# The package lists what make install installs (dh_missing checks it
# again when the package is built).
src=${IBEMU_SRCDIR:-$IBEMU_BUILDDIR}
for f in bin/ibemu bin/ibemu-conformance 'lib/*/libibemu.so' \
	'lib/*/libibemu-audit.so' 'lib/*/libibemu-check.so' share/man/man1/ibemu.1 share/man/man7/ibemu.7 \
	share/ibemu/conformance/; do
	grep -Fqx "usr/$f" "$src/debian/ibemu.install" && pass "debian/ibemu.install: usr/$f" ||
		fail "debian/ibemu.install lacks usr/$f"
done
if command -v dpkg-parsechangelog >/dev/null 2>&1; then
	deb=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
	ver=$("$IBEMU" --version | awk 'NR == 1 { print $2 }')
	[ "$deb" = "$ver" ] && pass "debian/changelog is at version $ver" ||
		fail "debian/changelog at $deb, configure.ac at $ver"
fi
finish
