#!/bin/bash
# ibemu on other Debian releases, with their own packages: for each suite
# a chroot made with debootstrap from the host's Debian mirror and kept in
# a cache; the tree (the work tree's files, tests/matrix/tree.sh) is built
# inside it with the suite's compiler and rdma-core, then
# tests/matrix/smoke.sh runs there: the suite's own ibv_devinfo lists
# ibemu0, ibv_rc_pingpong -c and ibv_ud_pingpong -c pass, and the
# manual's RC example does its three transfers.
#
#   bash tests/matrix/chroots.sh [SUITE...]    default: trixie sid
#
# Root only (debootstrap, chroot, mounts).  Each suite's mounts (/proc and
# a /dev/shm of its own) are made in a mount namespace of their own
# and unmounted on every way out.  One verdict line per check, then one
# per suite (PASS, FAIL, or REFUSED: ibemu does not carry the suite's
# rdma-core, with the line of configure or of the preload that says so);
# exit 0 when every suite passed.
#
# Environment:
#   IBEMU_CHROOT_CACHE   the chroots, <cache>/<suite>, and their creation
#                        logs, <cache>/<suite>.log (default
#                        ${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/chroot)
#   IBEMU_CHROOT_MIRROR  the Debian mirror (default: the host's, from
#                        /etc/apt/sources.list and sources.list.d)
#   IBEMU_CHROOT_UPDATE=1  apt-get upgrade a cached chroot first
#   IBEMU_TEST_TIMEOUT   seconds per program (default 60)
# Measured on 2 CPUs: making a chroot, 2 to 4 minutes; then the build
# (2 minutes) and the checks (seconds) at every run.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/tree.sh"
: "${IBEMU_CHROOT_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/chroot}"
packages="build-essential autoconf automake libtool pkg-config
	libibverbs-dev librdmacm-dev libcunit1-dev ibverbs-utils rdmacm-utils"

log() { printf 'chroots: %s\n' "$*" >&2; }

# host_mirror: the first Debian archive URI among the host's apt sources
# (one-line and deb822 formats), not the security archive.
host_mirror() {
	local m
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^deb / { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; break } }
		     /^URIs:/ { print $2 }' |
		grep -E '/debian/?$' | grep -v security | head -n1)
	echo "${m:-http://deb.debian.org/debian}"
}

# make_chroot SUITE DIR: debootstrap SUITE into DIR (minbase), then the
# build's packages with the suite's own apt.  Run in a private mount
# namespace: whatever debootstrap or apt mount ends with it.
make_chroot() {
	local suite=$1 root=$2 mirror
	mirror=${IBEMU_CHROOT_MIRROR:-$(host_mirror)}
	rm -rf "$root.new" || return 1
	log "$suite: debootstrap from $mirror into $root (log: $root.log)"
	unshare -m --propagation private bash -c '
		set -e
		debootstrap --variant=minbase "$1" "$2.new" "$3"
		# No service starts in the chroot.
		printf "#!/bin/sh\nexit 101\n" >"$2.new/usr/sbin/policy-rc.d"
		chmod +x "$2.new/usr/sbin/policy-rc.d"
		mount -t proc proc "$2.new/proc"
		chroot "$2.new" env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y --no-install-recommends $4
		chroot "$2.new" apt-get clean
		umount "$2.new/proc"' _ "$suite" "$root" "$mirror" "$packages" \
		>"$root.log" 2>&1 ||
		{ log "$suite: chroot creation failed, see $root.log"; return 1; }
	mv "$root.new" "$root"
}

# The mounts in_ns made, unmounted last first.
mounted=()
unmount_all() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[i]}" 2>/dev/null
	done
}

# Inside one suite's mount namespace (chroots.sh --in-ns SUITE ROOT):
# mount, copy the tree in, build, run the checks; unmount on exit.
in_ns() {
	local suite=$1 root=$2
	mounted=()
	trap unmount_all EXIT
	trap 'exit 130' INT TERM
	mount -t proc proc "$root/proc" && mounted+=("$root/proc") || return 1
	mount -t tmpfs -o mode=1777 shm "$root/dev/shm" &&
		mounted+=("$root/dev/shm") || return 1
	# The programs meet on localhost; debootstrap writes no hosts file.
	[ -e "$root/etc/hosts" ] ||
		printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
			>"$root/etc/hosts"
	rm -rf "$root/build" && tree_export "$top" "$root/build/ibemu" || return 1
	echo "tree: $(tree_describe "$top")"
	chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 IBEMU_TEST_TIMEOUT="${IBEMU_TEST_TIMEOUT:-60}" \
		bash -c '
		cd /build/ibemu || exit 1
		echo "rdma-core: $(dpkg-query -W -f="\${Version}" libibverbs-dev), gcc $(gcc -dumpfullversion), glibc $(dpkg-query -W -f="\${Version}" libc6)"
		autoreconf -fi >/build/autoreconf.log 2>&1 ||
			{ echo "FAIL: autoreconf"; tail -n 20 /build/autoreconf.log; exit 1; }
		if ! ./configure --enable-werror >/build/configure.log 2>&1; then
			grep -q "does not export IBVERBS_PRIVATE" /build/configure.log &&
				{ echo "REFUSED: $(grep -m1 "error:" /build/configure.log)"; exit 2; }
			echo "FAIL: configure"
			tail -n 20 /build/configure.log
			exit 1
		fi
		echo "ok: configure ($(grep -m1 "versions of access" /build/configure.log | sed "s/.*\.\.\. //"))"
		make -j2 >/build/make.log 2>&1 ||
			{ echo "FAIL: make"; grep -m10 -E "error|Error" /build/make.log; exit 1; }
		echo "ok: make"
		bash tests/matrix/smoke.sh . >/build/smoke.out 2>&1
		rc=$?
		cat /build/smoke.out
		grep -q "^REFUSED:" /build/smoke.out && exit 2
		exit $rc'
}

# run_suite SUITE: make its chroot if it is not cached, then the checks
# in a mount namespace of their own.
run_suite() {
	local suite=$1 root=$IBEMU_CHROOT_CACHE/$1
	mkdir -p "$IBEMU_CHROOT_CACHE" || return 1
	(
		flock 9 || exit 1
		if [ ! -x "$root/usr/bin/ibv_devinfo" ]; then
			make_chroot "$suite" "$root" || exit 1
		elif [ "${IBEMU_CHROOT_UPDATE:-0}" = 1 ]; then
			log "$suite: apt-get upgrade"
			unshare -m --propagation private bash -c '
				mount -t proc proc "$1/proc" &&
				chroot "$1" env DEBIAN_FRONTEND=noninteractive \
					sh -c "apt-get update && apt-get upgrade -y"' \
				_ "$root" >>"$root.log" 2>&1 ||
				{ log "$suite: upgrade failed, see $root.log"; exit 1; }
		fi
		unshare -m --propagation private bash "$0" --in-ns "$suite" "$root"
	) 9>"$root.lock"
}

if [ "${1:-}" = --in-ns ]; then
	in_ns "$2" "$3"
	exit
fi
[ "$(id -u)" = 0 ] || { log "needs root (debootstrap, chroot, mount)"; exit 77; }
for t in debootstrap unshare flock git; do
	command -v "$t" >/dev/null ||
		{ log "$t is missing (apt-get install -y debootstrap util-linux git)"; exit 77; }
done

suites=${*:-trixie sid}
verdicts=()
rc=0
for suite in $suites; do
	start=$(date +%s)
	echo "=== $suite"
	run_suite "$suite"
	case $? in
	0) v=PASS ;;
	2) v=REFUSED rc=1 ;; # ibemu does not carry the suite's rdma-core
	*) v=FAIL rc=1 ;;
	esac
	verdicts+=("$v: $suite ($(($(date +%s) - start)) s)")
done
echo "==="
printf '%s\n' "${verdicts[@]}"
exit $rc
