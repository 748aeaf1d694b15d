# Run a server and a client program on loopback, each bounded by timeout.
# Sourced by the shell tests, examples/run-rc-example.sh and bench/.
#
#   sc_pick_port BASE          print the first port >= BASE nobody listens on
#   sc_pair DIR SECS PORT SERVER-ARGV... ::: CLIENT-ARGV...
#       starts the server, waits until TCP PORT is listening (PORT "-":
#       programs that meet without TCP, as through the RDMA CM), runs the
#       client (again, 20 times at most, while its output matches
#       SC_RETRY_RE, by default a failure to connect, and the server is
#       still alive), then waits for the server.  Outputs in
#       DIR/server.out and DIR/client.out; exit statuses in SC_SERVER_RC
#       and SC_CLIENT_RC (124: killed by timeout); returns 0 when both
#       exited 0.
#   sc_cm_pair DIR SECS SERVER-ARGV... ::: CLIENT-ARGV...
#       sc_pair with both sides under `$IBEMU run`, meeting through the
#       RDMA CM (no TCP port).  When the server is given "-p PORT", the
#       client starts once `$IBEMU status` lists an RDMA CM listener on
#       PORT: a client of several connections (ucmatose -c 4) that met
#       the listener halfway through its connects would fail one of them
#       and leave the server waiting on another.  Otherwise, and besides,
#       the client is run again while it finds nobody listening yet
#       (REJECTED, refused, UNREACHABLE).
#   sc_wait_cm_listen PORT PID SECS [PREFIX...]
#       wait up to SECS for an RDMA CM listener on PORT in the node where
#       PREFIX runs a program, while process PID lives
#   sc_check SUMMARY NAME PROGRAM [ARGS...]
#       PROGRAM as server and client under `$IBEMU run` (see below)
#   sc_fail_pair WHAT          fail WHAT with the exit statuses of the last
#                              sc_pair and the last lines of its outputs
#   sc_cleanup                 kill a server still running, by its PID
#   sc_listening PORT [PREFIX...]
#       true when a TCP socket listens on PORT, where the command prefix
#       PREFIX runs a program (none: here)
#   sc_wait_listen PORT PID SECS [PREFIX...]
#       wait up to SECS for it, while PID lives (PID "": no PID)
#
# SC_SERVER_IN and SC_CLIENT_IN are command prefixes sc_pair puts before
# the server and the client (and the server's sc_listening): empty, both
# run here; tests/lib/netns-lib.sh's netns_sc_nodes sets them to enter nodes,
# and SC_PEER, the address sc_check's client is given, to the server's.
SC_SERVER_IN=()
SC_CLIENT_IN=()
SC_PEER=localhost
SC_SERVER_PID=
SC_SERVER_RC=
SC_CLIENT_RC=
SC_RETRY_RE="couldn't connect|connection refused|unable to (connect|init the socket)"

# Is anybody listening on TCP port $1 (IPv4 or IPv6)?
sc_listening()
{
	local hex
	hex=$(printf '%04X' "$1")
	shift
	"$@" cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v p="$hex" '
		$4 == "0A" { n = split($2, a, ":"); if (toupper(a[n]) == p) f = 1 }
		END { exit !f }'
}

sc_pick_port()
{
	local p=$1
	while sc_listening "$p"; do
		p=$((p + 1))
	done
	echo "$p"
}

# Wait up to $3 seconds for port $1 to listen (where the command prefix
# $4... runs a program) while process $2 lives.
sc_wait_listen()
{
	local port=$1 pid=$2 secs=$3 i
	shift 3
	for i in $(seq $((secs * 20))); do
		sc_listening "$port" "$@" && return 0
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}

sc_wait_cm_listen()
{
	local port=$1 pid=$2 secs=$3 i
	shift 3
	for i in $(seq $((secs * 10))); do
		"$@" "$IBEMU" status 2>/dev/null |
			grep -qE "^ +listen .* port $port, pid " && return 0
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && return 1
		sleep 0.1
	done
	return 1
}

# sc_wait_server PORT: as sc_pair waits for its server ("-": not at all,
# cm:N: an RDMA CM listener on N, N: TCP port N).
sc_wait_server()
{
	case $1 in
	-) return 0 ;;
	cm:*) sc_wait_cm_listen "${1#cm:}" "$SC_SERVER_PID" 20 \
		"${SC_SERVER_IN[@]}" ;;
	*) sc_wait_listen "$1" "$SC_SERVER_PID" 20 "${SC_SERVER_IN[@]}" ;;
	esac
}

sc_cleanup()
{
	if [ -n "$SC_SERVER_PID" ] && kill -0 "$SC_SERVER_PID" 2>/dev/null; then
		kill "$SC_SERVER_PID" 2>/dev/null
		wait "$SC_SERVER_PID" 2>/dev/null
	fi
	SC_SERVER_PID=
}

sc_pair()
{
	local dir=$1 secs=$2 port=$3 a seen=0 try
	local -a srv=() cli=() pre=()
	shift 3
	# Line-buffered output survives a kill by timeout: keep it for the log.
	command -v stdbuf >/dev/null && pre=(stdbuf -oL -eL)
	for a in "$@"; do
		if [ $seen = 0 ] && [ "$a" = ":::" ]; then
			seen=1
		elif [ $seen = 0 ]; then
			srv+=("$a")
		else
			cli+=("$a")
		fi
	done
	: >"$dir/client.out"
	"${SC_SERVER_IN[@]}" timeout -k 5 "$secs" "${pre[@]}" "${srv[@]}" \
		>"$dir/server.out" 2>&1 </dev/null &
	SC_SERVER_PID=$!
	SC_CLIENT_RC=125
	if sc_wait_server "$port"; then
		for try in $(seq 20); do
			"${SC_CLIENT_IN[@]}" timeout -k 5 "$secs" "${pre[@]}" \
				"${cli[@]}" >"$dir/client.out" 2>&1 </dev/null
			SC_CLIENT_RC=$?
			[ "$SC_CLIENT_RC" = 0 ] && break
			kill -0 "$SC_SERVER_PID" 2>/dev/null || break
			grep -qiE "$SC_RETRY_RE" "$dir/client.out" || break
			sleep 0.2
		done
	else
		echo "server did not listen on port $port" >"$dir/client.out"
	fi
	# A server whose client failed would wait for its timeout: stop it.
	[ "$SC_CLIENT_RC" = 0 ] || kill "$SC_SERVER_PID" 2>/dev/null
	wait "$SC_SERVER_PID"
	SC_SERVER_RC=$?
	SC_SERVER_PID=
	[ "$SC_SERVER_RC" = 0 ] && [ "$SC_CLIENT_RC" = 0 ]
}

# sc_check SUMMARY NAME PROGRAM [ARGS...]: run PROGRAM as server and client
# (of $SC_PEER) under ibemu on the next free port, with $SC_OPTS before ARGS
# and "-p PORT"; pass with the client's line the shell command SUMMARY
# prints from $dir/client.out, or fail with both sides' last lines.
# Needs dir, secs and port set by the caller.
sc_check()
{
	local summary=$1 name=$2 prog=$3
	shift 3
	if ! command -v "$prog" >/dev/null; then
		fail "$name: $prog is not installed"
		return
	fi
	port=$(sc_pick_port $((port + 1)))
	# shellcheck disable=SC2086
	if sc_pair "$dir" "$secs" "$port" \
		"$IBEMU" run -- "$prog" $SC_OPTS -p "$port" "$@" ::: \
		"$IBEMU" run -- "$prog" $SC_OPTS -p "$port" "$@" "$SC_PEER"; then
		pass "$name: $(eval "$summary")"
	else
		sc_fail_pair "$name"
	fi
}

# Needs dir and secs set by the caller.
sc_fail_pair()
{
	fail "$1: server exited $SC_SERVER_RC, client $SC_CLIENT_RC (124: timed out after ${secs}s)"
	sed 's/^/    server: /' "$dir/server.out" | tail -n 8
	sed 's/^/    client: /' "$dir/client.out" | tail -n 8
}

sc_cm_pair()
{
	local dir=$1 secs=$2 a prev= port=- client=0
	local -a args=("$IBEMU" run --)
	shift 2
	for a in "$@"; do
		args+=("$a")
		if [ "$a" = ":::" ]; then
			args+=("$IBEMU" run --)
			client=1
		fi
		[ $client = 0 ] && [ "$prev" = -p ] &&
			[ -n "$a" ] && [ -z "${a//[0-9]/}" ] && port=cm:$a
		prev=$a
	done
	SC_RETRY_RE="REJECTED|refused|UNREACHABLE" sc_pair "$dir" "$secs" \
		"$port" "${args[@]}"
}
