#!/bin/bash
# The checks each platform of the matrix must pass (issue 27): Debian's
# ibv_devinfo lists ibemu0, ibv_rc_pingpong -c and ibv_ud_pingpong -c
# (every message's data checked) pass between two processes, and the
# manual's RC example (examples/rc_example.c) does its three transfers.
# Run by tests/matrix/arm64.sh (under qemu-aarch64) and
# tests/matrix/chroots.sh (inside each chroot).
#
#   bash tests/matrix/smoke.sh BUILDDIR
#
# BUILDDIR holds the built ibemu command, its libraries and
# examples/rc_example.  Environment:
#   SMOKE_EMU     a command prefix that runs the build's programs (empty:
#                 run them here; "qemu-aarch64-static": under emulation);
#                 it also runs the ibv_* programs
#   SMOKE_BINDIR  where ibv_devinfo and the ping-pongs are (default: PATH)
#   IBEMU_TEST_TIMEOUT  seconds per process (default 60)
# One "ok:" or "FAIL:" line per check, "REFUSED:" with ibemu's own line
# when the preload offers no device; exit 0 when every check passed.
here=$(cd "$(dirname "$0")" && pwd)
IBEMU_BUILDDIR=$(cd "${1:?usage: smoke.sh BUILDDIR}" && pwd) || exit 2
. "$here/../lib/lib.sh"
. "$here/../lib/serverclient.sh"
build=$IBEMU_BUILDDIR
read -r -a emu <<<"${SMOKE_EMU:-}"
bindir=${SMOKE_BINDIR:-}
secs=${IBEMU_TEST_TIMEOUT:-60}
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT

# tool NAME: the ibv_* program NAME, from SMOKE_BINDIR or PATH.
tool() { if [ -n "$bindir" ]; then echo "$bindir/$1"; else command -v "$1"; fi; }

# ibemu_argv PROGRAM [ARGS...]: argv, the command that runs PROGRAM
# under the build's `ibemu run`, both through SMOKE_EMU.
ibemu_argv() { argv=("${emu[@]}" "$build/ibemu" run -- "${emu[@]}" "$@"); }

# pair NAME SUMMARY-RE PROGRAM [ARGS...]: PROGRAM as server and as client
# of localhost on a free port; pass when both exit 0, with the client's
# line matching SUMMARY-RE.
port=$(sc_pick_port $((21000 + $$ % 500 * 8)))
pair() {
	local name=$1 re=$2 prog=$3
	local -a argv srv
	shift 3
	port=$(sc_pick_port $((port + 1)))
	ibemu_argv "$prog" -p "$port" "$@"
	srv=("${argv[@]}")
	ibemu_argv "$prog" -p "$port" "$@" localhost
	if sc_pair "$dir" "$secs" "$port" "${srv[@]}" ::: "${argv[@]}"; then
		pass "$name: $(grep -m1 -E "$re" "$dir/client.out")"
		return 0
	fi
	fail "$name: server exited $SC_SERVER_RC, client $SC_CLIENT_RC (124: timed out after ${secs}s)"
	sed 's/^/    server: /' "$dir/server.out" | tail -n 8
	sed 's/^/    client: /' "$dir/client.out" | tail -n 8
	return 1
}

# The device probe.  A preload that finds a libibverbs it does not know
# says so in one line beginning "ibemu:" and offers no device.
devinfo=$(tool ibv_devinfo) || { fail "ibv_devinfo is not installed"; exit 1; }
ibemu_argv "$devinfo"
timeout -k 5 "$secs" "${argv[@]}" >"$dir/devinfo" 2>&1 </dev/null
if grep -q "hca_id:[[:space:]]*ibemu0" "$dir/devinfo"; then
	pass "ibv_devinfo lists ibemu0 ($(awk '/transport:|port_lid:/ { $1 = $1; printf "%s%s", n++ ? ", " : "", $0 }' "$dir/devinfo"))"
elif grep -q '^ibemu:' "$dir/devinfo"; then
	echo "REFUSED: $(grep -m1 '^ibemu:' "$dir/devinfo")"
	fail "ibv_devinfo: no ibemu0"
	exit 1
else
	fail "ibv_devinfo does not list ibemu0"
	sed 's/^/    /' "$dir/devinfo" | tail -n 8
	exit 1
fi

pair "ibv_rc_pingpong -c" "bytes in" "$(tool ibv_rc_pingpong)" -d ibemu0 -n 200 -c
pair "ibv_ud_pingpong -c" "bytes in" "$(tool ibv_ud_pingpong)" -d ibemu0 -n 200 -c

# The manual's RC example: the client receives the server's SEND, RDMA
# READs the server's buffer, then RDMA WRITEs into it while the server
# sits in a TCP read.
if pair "rc_example" "test result" "$build/examples/rc_example" -d ibemu0; then
	for want in "client:Message is: 'SEND operation '" \
		"client:Contents of server's buffer: 'RDMA read operation '" \
		"server:Contents of server buffer: 'RDMA write operation'"; do
		if grep -qF "${want#*:}" "$dir/${want%%:*}.out"; then
			pass "rc_example ${want%%:*}: ${want#*:}"
		else
			fail "rc_example ${want%%:*} did not print: ${want#*:}"
		fi
	done
fi

finish
