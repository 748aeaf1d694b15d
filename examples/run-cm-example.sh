#!/bin/bash
# Run one of the manual's RDMA CM example programs (examples/NAME_example:
# srq, apm) over ibemu: a server on ADDRESS and a client to it, each
# bounded by a timeout, meeting through the RDMA CM.  Prints both outputs
# and exits non-zero when either side failed.  What run-srq-example.sh
# and run-apm-example.sh share; called by them as
#
#   bash examples/run-cm-example.sh NAME BASE_PORT [-a ADDRESS]
#        [-w WRAPPER] [-S 'server options'] [-C 'client options']
#        [-- options for both]
#
# Environment: IBEMU_BUILDDIR, NAME_EXAMPLE_PORT (port, default BASE_PORT
# + PID % 1000), NAME_EXAMPLE_TIMEOUT (seconds per process, default 60),
# NAME in capitals.
name=$1 base_port=$2
NAME=${name^^}
shift 2
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IBEMU_BUILDDIR:-}" ]; then
	if [ -x ./ibemu ] && [ -x "./examples/${name}_example" ]; then
		IBEMU_BUILDDIR=$(pwd)
	else
		IBEMU_BUILDDIR=$(cd "$here/.." && pwd)
	fi
fi
IBEMU=$IBEMU_BUILDDIR/ibemu
prog=$IBEMU_BUILDDIR/examples/${name}_example
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
		echo "run-$name-example: $f is missing: build first (make)" >&2
		exit 2
	fi
done

# The server listens through the RDMA CM, not on a TCP port: pick a port
# nobody uses over TCP either, and run the client again while its connect
# finds nobody listening yet (REJECTED: no listener).
port_var=${NAME}_EXAMPLE_PORT timeout_var=${NAME}_EXAMPLE_TIMEOUT
port=$(sc_pick_port "${!port_var:-$((base_port + $$ % 1000))}")
secs=${!timeout_var:-60}
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
[ "$SC_SERVER_RC" = 124 ] && echo "run-$name-example: the server timed out after ${secs}s" >&2
[ "$SC_CLIENT_RC" = 124 ] && echo "run-$name-example: the client timed out after ${secs}s" >&2
if [ $rc = 0 ]; then
	echo "run-$name-example: server and client exited 0"
else
	echo "run-$name-example: FAILED (server $SC_SERVER_RC, client $SC_CLIENT_RC)" >&2
fi
exit $rc
