#!/bin/bash
# Run the manual's APM program (examples/apm_example) over ibemu, on a
# two-port ibemu0 (IBEMU_PORTS=2, unless already set): a server
# on ADDRESS and a client to it, each bounded by a timeout, meeting
# through the RDMA CM.  Prints both outputs and exits non-zero when either
# side failed.  Run from the top of the build tree:
#
#   bash examples/run-apm-example.sh [-a ADDRESS] [-w WRAPPER]
#        [-S 'server options'] [-C 'client options'] [-- options for both]
#
# ADDRESS: the server's (default 127.0.0.1).  WRAPPER runs each process
# (default "IBEMU run --"; "none" for a real device).  -S and -C: options
# for one side only; the rest go to both sides (-n): see
# examples/apm_example.c.
#
# Environment: IBEMU_BUILDDIR (build tree, default the current directory if
# it holds the ibemu command, else this script's parent), APM_EXAMPLE_PORT
# (port, default 18000 + PID % 1000), APM_EXAMPLE_TIMEOUT (seconds per
# process, default 60).
set -u
export IBEMU_PORTS=${IBEMU_PORTS:-2}
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IBEMU_BUILDDIR:-}" ]; then
	if [ -x ./ibemu ] && [ -x ./examples/apm_example ]; then
		IBEMU_BUILDDIR=$(pwd)
	else
		IBEMU_BUILDDIR=$(cd "$here/.." && pwd)
	fi
fi
IBEMU=$IBEMU_BUILDDIR/ibemu
prog=$IBEMU_BUILDDIR/examples/apm_example
. "$here/../tests/lib/serverclient.sh"

addr=127.0.0.1 wrapper="" srv_opts="" cli_opts=""
while getopts "a:w:S:C:" o; do
	case $o in
	a) addr=$OPTARG ;;
	w) wrapper=$OPTARG ;;
	S) srv_opts=$OPTARG ;;
	C) cli_opts=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ -z "$wrapper" ]; then
	wrap=("$IBEMU" run --)
	need=("$IBEMU" "$prog")
elif [ "$wrapper" = none ]; then
	wrap=()
	need=("$prog")
else
	read -r -a wrap <<<"$wrapper"
	need=("$prog")
fi
for f in "${need[@]}"; do
	if [ ! -x "$f" ]; then
		echo "run-apm-example: $f is missing: build first (make)" >&2
		exit 2
	fi
done

# The server listens through the RDMA CM, not on a TCP port: pick a port
# nobody uses over TCP either, and run the client again while its connect
# finds nobody listening yet (REJECTED: no listener).
port=$(sc_pick_port "${APM_EXAMPLE_PORT:-$((18000 + $$ % 1000))}")
secs=${APM_EXAMPLE_TIMEOUT:-60}
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086
SC_RETRY_RE="rdma_connect.*(rejected|refused|unreachable)" \
sc_pair "$dir" "$secs" - \
	"${wrap[@]}" "$prog" -l -p "$port" $srv_opts "$@" "$addr" ::: \
	"${wrap[@]}" "$prog" -p "$port" $cli_opts "$@" "$addr"
rc=$?

echo "=== server (exit $SC_SERVER_RC) ==="
cat "$dir/server.out"
echo "=== client (exit $SC_CLIENT_RC) ==="
cat "$dir/client.out"
[ "$SC_SERVER_RC" = 124 ] && echo "run-apm-example: the server timed out after ${secs}s" >&2
[ "$SC_CLIENT_RC" = 124 ] && echo "run-apm-example: the client timed out after ${secs}s" >&2
if [ $rc = 0 ]; then
	echo "run-apm-example: server and client exited 0"
else
	echo "run-apm-example: FAILED (server $SC_SERVER_RC, client $SC_CLIENT_RC)" >&2
fi
exit $rc
