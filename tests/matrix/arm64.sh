#!/bin/bash
# ibemu on arm64: cross-built with Debian's aarch64 toolchain against the
# arm64 packages of libibverbs, librdmacm and CUnit (multiarch), its
# programs and Debian's arm64 ibverbs-utils run under qemu-aarch64
# user-mode emulation.
#
#   bash tests/matrix/arm64.sh
#
# Checks: libibemu.so's access and stat interposers carry the versions
# arm64's C library gives them, and a program's own stat and access reach
# them (tests/progs/devnode_probe); the emulator's unit tests (tests/unit)
# and the conformance suite (conformance/); then tests/matrix/smoke.sh:
# ibv_devinfo lists ibemu0, ibv_rc_pingpong -c and ibv_ud_pingpong -c
# pass, and the manual's RC example does its three transfers.  qemu-user
# runs arm64 code with this CPU's stronger memory order, so it proves the
# build, the ABI and the logic, not the absence of weak-order races
# (doc/design.md §16 "Memory order").  It also lacks two kernel features
# two unit tests need (robust futexes, MADV_DONTFORK): they say so and
# skip.
#
# Needs, once, as root:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install gcc-aarch64-linux-gnu libibverbs-dev:arm64 \
#       librdmacm-dev:arm64 libcunit1-dev:arm64 qemu-user-static
# Debian's ibverbs-utils:arm64 would replace the amd64 one, so its .deb
# is fetched with apt-get download and unpacked into the work directory.
#
# Environment:
#   IBEMU_ARM64_DIR  work directory: src/ (the work tree's files,
#                    tests/matrix/tree.sh), build/, utils/ (default
#                    ${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/arm64); a tree
#                    built there before is rebuilt by make; remove the
#                    directory for a build from nothing
#   IBEMU_TEST_TIMEOUT  seconds per program (default 120)
# Run time on 2 CPUs (loaded): 6 minutes from nothing, 2 when built.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tree.sh"
host=aarch64-linux-gnu
: "${IBEMU_ARM64_DIR:=${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/arm64}"
work=$IBEMU_ARM64_DIR
export IBEMU_TEST_TIMEOUT=${IBEMU_TEST_TIMEOUT:-120}
fails=0

log() { printf 'arm64: %s\n' "$*" >&2; }
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
skip() { echo "SKIP: $*"; exit 77; }

qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64) ||
	skip "qemu-aarch64 is not installed (apt-get install qemu-user-static)"
command -v $host-gcc >/dev/null ||
	skip "$host-gcc is not installed (apt-get install gcc-$host)"
pcdir=/usr/lib/$host/pkgconfig
for pc in libibverbs librdmacm cunit; do
	[ -f "$pcdir/$pc.pc" ] ||
		skip "$pcdir/$pc.pc is missing (dpkg --add-architecture arm64; apt-get install libibverbs-dev:arm64 librdmacm-dev:arm64 libcunit1-dev:arm64)"
done
# The arm64 dynamic loader: multiarch libc6:arm64's, else the cross
# toolchain's under QEMU_LD_PREFIX.
[ -e /lib/ld-linux-aarch64.so.1 ] || export QEMU_LD_PREFIX=/usr/$host
mkdir -p "$work" || exit 1
step() {
	local t0=$SECONDS
	"$@"
	local rc=$?
	log "$1: $((SECONDS - t0)) s"
	return $rc
}

# Debian's arm64 ibv_* programs, unpacked beside the amd64 ones.
fetch_utils() {
	[ -x "$work/utils/usr/bin/ibv_devinfo" ] && return 0
	rm -rf "$work/utils" "$work"/ibverbs-utils_*.deb
	(cd "$work" && apt-get download ibverbs-utils:arm64) >"$work/utils.log" 2>&1 &&
		dpkg-deb -x "$work"/ibverbs-utils_*_arm64.deb "$work/utils" ||
		{ cat "$work/utils.log" >&2; return 1; }
}

# The tree into src/ (tests/matrix/tree.sh; files that did not change
# keep their times, so make rebuilds only what did), then configure for
# arm64 in build/ once.  The work tree may hold an in-tree build, which
# rules out a VPATH build from it.
prepare() {
	tree_export "$top" "$work/src" || return 1
	echo "tree: $(tree_describe "$top")"
	[ -f "$work/build/Makefile" ] && return 0
	(cd "$work/src" && autoreconf -fi) >"$work/autoreconf.log" 2>&1 ||
		{ log "autoreconf failed, see $work/autoreconf.log"; return 1; }
	mkdir -p "$work/build" &&
		(cd "$work/build" && "$work/src/configure" --host="$host" --enable-werror \
			PKG_CONFIG=pkg-config \
			PKG_CONFIG_LIBDIR="$pcdir:/usr/share/pkgconfig") \
			>"$work/configure.log" 2>&1 ||
		{ log "configure failed, see $work/configure.log"; rm -f "$work/build/Makefile"; return 1; }
}

# Everything make builds, and the programs of make check.
build() {
	make -C "$work/build" -j2 >"$work/make.log" 2>&1 &&
		make -C "$work/build" -j2 check TESTS= >>"$work/make.log" 2>&1 ||
		{ log "make failed, see $work/make.log"; return 1; }
}

# emulated PROGRAM [ARGS...]: PROGRAM of the arm64 build under qemu.
emulated() { "$qemu" "$@"; }

# The interposers' versions in libibemu.so, against the C library's own.
check_versions() {
	local so=$work/build/.libs/libibemu.so libc sym want got
	libc=$("$host-gcc" -print-file-name=libc.so.6)
	file -L "$so" | grep -q "ARM aarch64" && pass "libibemu.so is arm64" ||
		fail "libibemu.so: $(file -L "$so")"
	for sym in access stat; do
		want=$(LC_ALL=C "$host-objdump" -T "$libc" |
			awk -v s="$sym" '$NF == s && $(NF - 1) !~ /^\(/ { print $(NF - 1) }')
		got=$(LC_ALL=C "$host-objdump" -T "$so" |
			awk -v s="$sym" '$NF == s && $4 != "*UND*" { print $(NF - 1) }')
		if [ -n "$want" ] && [ "$got" = "$want" ]; then
			pass "libibemu.so exports $sym@$got, as $libc does"
		else
			fail "libibemu.so exports $sym@${got:-nothing}, $libc has $sym@${want:-nothing}"
		fi
	done
	if out=$(emulated "$work/build/ibemu" run -- "$qemu" \
		"$work/build/tests/progs/devnode_probe" 2>&1); then
		pass "devnode_probe: $out"
	else
		fail "devnode_probe: $out"
	fi
}

# The emulator's unit tests, each under qemu.
check_units() {
	local t out rc t0
	for t in "$work"/build/tests/unit/test_*; do
		case $t in *.o | *.c) continue ;; esac
		[ -x "$t" ] || continue
		t0=$SECONDS
		out=$(cd "$work/build" && IBEMU_BUILDDIR=$work/build \
			IBEMU_SRCDIR=$work/src timeout -k 5 300 "$qemu" "$t" 2>&1)
		rc=$?
		if [ "$rc" = 0 ]; then
			pass "${t##*/}: $(echo "$out" | awk '/^ *asserts/ { print $3 " asserts, " $5 " failed" }'), $((SECONDS - t0)) s"
			echo "$out" | grep -o 'skipped: [^)]*)' | sed 's/^/    /'
		else
			fail "${t##*/} exited $rc"
			echo "$out" | tail -n 15 | sed 's/^/    /'
		fi
	done
}

# The conformance suite (conformance/) on ibemu0, its peers forked, under
# qemu.  Its examples suite starts the example programs with exec, which
# an arm64 program cannot do here (qemu-user without binfmt_misc runs
# only the program it was given): left out, as the manual's RC example
# runs in smoke.sh.
check_conformance() {
	local out=$work/conformance.out rc shm
	(cd "$work/build" && IBEMU_NODE=arm64-conformance-$$ \
		CF_EXPECT_PD_ALLOCATORS=1 timeout -k 5 1200 "$qemu" \
		-E LD_PRELOAD="$work/build/.libs/libibemu.so" ./ibemu-conformance \
		-d ibemu0 -a 127.0.0.1 -E "$work/src/conformance/expect/ibemu.txt" \
		-x examples/rc_example -x examples/mc_example) >"$out" 2>&1
	rc=$?
	if [ "$rc" = 0 ]; then
		pass "ibemu-conformance: $(awk '/^ *tests / { print $3 " tests, " $5 " failed"; exit }' "$out")"
	else
		fail "ibemu-conformance exited $rc (see $out)"
		grep -A3 "FAILED" "$out" | head -n 30 | sed 's/^/    /'
	fi
	shm=${IBEMU_SHM_DIR:-/dev/shm}/ibemu-$(id -u)
	rm -f "$shm"/v*-arm64-conformance-$$ "$shm"/v*-arm64-conformance-$$-p*
}

# Debian's arm64 ibv_* programs and the RC example (tests/matrix/smoke.sh).
check_smoke() {
	SMOKE_EMU=$qemu SMOKE_BINDIR=$work/utils/usr/bin \
		bash "$here/smoke.sh" "$work/build" || fails=$((fails + 1))
}

step fetch_utils || { fail "ibverbs-utils:arm64: apt-get download or dpkg-deb failed"; exit 1; }
step prepare || { fail "arm64 configure"; exit 1; }
step build || { fail "arm64 build"; tail -n 20 "$work/make.log"; exit 1; }
pass "cross-built with $("$host-gcc" -dumpfullversion) $host-gcc against $(PKG_CONFIG_LIBDIR=$pcdir pkg-config --modversion libibverbs) libibverbs:arm64"
step check_versions
step check_units
step check_conformance
step check_smoke
[ "$fails" = 0 ] && { echo "arm64: all checks passed"; exit 0; }
echo "arm64: $fails check(s) failed"
exit 1
