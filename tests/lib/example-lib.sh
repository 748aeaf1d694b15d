# Running the manual's example programs through their runners
# (examples/run-NAME-example.sh), for the test scripts that check them.
#
# ex_run NAME LABEL [runner arguments]: the runner's output in $dir/out,
# split into $dir/server and $dir/client; RC is the runner's exit status,
# RC_S and RC_C the server's and the client's.  The output is echoed,
# headed with LABEL.  The runner's timeout is IBEMU_TEST_TIMEOUT.
ex_run() {
	local name=$1 label=$2 var
	shift 2
	var=$(echo "$name" | tr '[:lower:]' '[:upper:]')_EXAMPLE_TIMEOUT
	env IBEMU_BUILDDIR="$IBEMU_BUILDDIR" \
		"$var=${IBEMU_TEST_TIMEOUT:-60}" \
		bash "$IBEMU_SRCDIR/examples/run-$name-example.sh" "$@" \
		>"$dir/out" 2>&1
	RC=$?
	awk '/^=== server/ { f = 1; next } /^=== client/ { f = 0 } f' \
		"$dir/out" >"$dir/server"
	awk -v end="^run-$name-example:" \
		'/^=== client/ { f = 1; next } $0 ~ end { f = 0 } f' \
		"$dir/out" >"$dir/client"
	RC_S=$(sed -n 's/^=== server (exit \([0-9]*\)) ===$/\1/p' "$dir/out")
	RC_C=$(sed -n 's/^=== client (exit \([0-9]*\)) ===$/\1/p' "$dir/out")
	echo "--- ${label}run-$name-example.sh $* (exit $RC)"
	sed 's/^/    /' "$dir/out"
}
