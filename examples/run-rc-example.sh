#!/bin/bash
# Run the manual's RC example (examples/rc_example) over ibemu: a server and
# a client on loopback, each bounded by a timeout.  Prints both outputs and
# exits non-zero when either side failed.  Run from the top of the build
# tree:  bash examples/run-rc-example.sh [extra rc_example options]
#
# Environment: IBEMU_BUILDDIR (build tree, default the current directory if
# it holds the ibemu command, else this script's parent), RC_EXAMPLE_PORT
# (TCP port, default 18000 + PID % 1000), RC_EXAMPLE_TIMEOUT (seconds per
# process, default 60).
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IBEMU_BUILDDIR:-}" ]; then
	if [ -x ./ibemu ] && [ -x ./examples/rc_example ]; then
		IBEMU_BUILDDIR=$(pwd)
	else
		IBEMU_BUILDDIR=$(cd "$here/.." && pwd)
	fi
fi
IBEMU=$IBEMU_BUILDDIR/ibemu
prog=$IBEMU_BUILDDIR/examples/rc_example
. "$here/../tests/lib/serverclient.sh"

for f in "$IBEMU" "$prog"; do
	if [ ! -x "$f" ]; then
		echo "run-rc-example: $f is missing: build first (make)" >&2
		exit 2
	fi
done

port=$(sc_pick_port "${RC_EXAMPLE_PORT:-$((18000 + $$ % 1000))}")
secs=${RC_EXAMPLE_TIMEOUT:-60}
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"' EXIT
trap 'exit 130' INT TERM

sc_pair "$dir" "$secs" "$port" \
	"$IBEMU" run -- "$prog" -d ibemu0 -p "$port" "$@" ::: \
	"$IBEMU" run -- "$prog" -d ibemu0 -p "$port" "$@" localhost
rc=$?

echo "=== server (exit $SC_SERVER_RC) ==="
cat "$dir/server.out"
echo "=== client (exit $SC_CLIENT_RC) ==="
cat "$dir/client.out"
for who in server client; do
	eval "st=\$SC_$(echo $who | tr a-z A-Z)_RC"
	[ "$st" = 124 ] && echo "run-rc-example: the $who timed out after ${secs}s" >&2
done
if [ $rc = 0 ]; then
	echo "run-rc-example: server and client exited 0"
else
	echo "run-rc-example: FAILED (server $SC_SERVER_RC, client $SC_CLIENT_RC)" >&2
fi
exit $rc
