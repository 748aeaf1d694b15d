# shellcheck shell=bash
# Several nodes on one machine: each node is a network namespace, the
# nodes are joined by veth pairs to a Linux bridge that lives in a "switch"
# namespace of its own.  Nothing of the root namespace's network is touched.
# Sourced by bash test scripts (after lib.sh, if they use it).
#
#   netns_setup N [--own-shm] [--own-pid]
#       Create nodes 1..N, named ibemu-<pid>-1..N (the switch:
#       ibemu-<pid>-sw), unique per run.  Node I has lo up and eth0 with
#       10.47.0.I/24, an IPv6 link-local address usable at once (no DAD),
#       and a route for IPv4 multicast (224.0.0.0/4) on eth0.  The bridge
#       keeps the kernel's default multicast snooping; setup checks that a
#       UDP multicast datagram from node 1 reaches the others, and that
#       node 1 reaches every other node by ping.
#       --own-shm: every command of node I sees a private /dev/shm (a
#       directory bind-mounted over /dev/shm, the same for all commands
#       of the node, as in a container); IBEMU_SHM_DIR is unset.
#       --own-pid: the commands of node I run in one pid namespace of the
#       node (with its own /proc); killing a command's PID then kills the
#       command with SIGKILL, whatever the signal.
#       Installs a trap on EXIT, INT and TERM that tears everything down,
#       then runs the EXIT trap that was set before (lib.sh's cleanup):
#       set your own EXIT trap before netns_setup, not after.  A guard
#       process tears down when the shell is killed by SIGKILL.
#       Exits 77 (skip) when not root or network namespaces are not
#       available; exits 99 when the network does not work.
#   netns_exec I CMD [ARGS...]
#       Run CMD in node I in the foreground, in the current directory,
#       with the caller's environment and in network mode (IBEMU_NET=1,
#       unless the caller set IBEMU_NET); returns CMD's exit status.
#   netns_bg I CMD [ARGS...]
#       The same in the background: sets NETNS_PID to the PID to wait for
#       or kill (killing it ends CMD) and records it for teardown.
#   netns_argv I
#       Set the array NETNS_ARGV to the command prefix that runs a program
#       in node I, for use where a shell function cannot go:
#           netns_argv 2; timeout 10 "${NETNS_ARGV[@]}" ping -c1 10.47.0.1
#   netns_addr I           print node I's IPv4 address (10.47.0.I)
#   netns_name I           print node I's namespace name (for ip -n)
#   netns_link I down|up   pull or plug node I's cable (the switch side of
#                          its veth pair; node I's eth0 loses its carrier)
#   netns_listening I PORT true when a TCP socket listens on PORT in node I
#   netns_wait_listen I PORT SECS [PID]
#                          wait up to SECS for it (while PID lives)
#   netns_pair DIR SECS PORT SI SERVER-ARGV... ::: CI CLIENT-ARGV...
#       A server in node SI and a client in node CI, as sc_pair
#       (serverclient.sh) runs them on one node: the server first, the
#       client once TCP PORT listens in node SI (PORT "-": at once, for
#       programs that meet through the RDMA CM), again (20 times at most)
#       while its output matches NETNS_RETRY_RE and the server lives;
#       each bounded by timeout SECS.  Outputs in DIR/server.out and
#       DIR/client.out, exit statuses in NETNS_SERVER_RC and
#       NETNS_CLIENT_RC, as in SC_SERVER_RC and SC_CLIENT_RC (124: timed
#       out); returns 0 when both exited 0.
#   netns_sc_nodes SI CI   make sc_pair and sc_check (serverclient.sh) run
#                          the server in node SI, the client in node CI
#                          (sc_check's given node SI's address), retrying
#                          on NETNS_RETRY_RE
#   netns_teardown         kill every process still in the nodes, delete
#                          the namespaces and the temporary directories;
#                          safe to call more than once
#
# NETNS_DIR is a private temporary directory of the run (removed at
# teardown) for the caller's logs.
#
# tests/lib/netns.sh is a command-line front end:
#   tests/lib/netns.sh -n N [--own-shm] [--own-pid] -- 'cmd for node 1' ...

NETNS_N=0
NETNS_PREFIX=
NETNS_DIR=
NETNS_SHM_DIR=
NETNS_OWN_SHM=0
NETNS_OWN_PID=0
NETNS_PID=
NETNS_ARGV=()
NETNS_BG_PIDS=()
NETNS_HOLDERS=()	# per node: PID whose namespaces a command enters
NETNS_HOLDER_TOPS=()	# per node: the process to kill at teardown
NETNS_OLD_EXIT_TRAP=
NETNS_UP=0
NETNS_GUARD=
NETNS_SERVER_RC=
NETNS_CLIENT_RC=
# netns_pair runs sc_pair.
# shellcheck source=tests/lib/serverclient.sh
. "$(dirname "${BASH_SOURCE[0]}")/serverclient.sh"

NETNS_RETRY_RE="couldn't connect|connection refused|unable to (connect|init the socket)|REJECTED|refused|UNREACHABLE"

netns_skip() { echo "SKIP: $*"; exit 77; }

netns_name() { echo "$NETNS_PREFIX-$1"; }
netns_addr() { echo "10.47.0.$1"; }

netns_argv()
{
	local i=$1
	if [ -n "${NETNS_HOLDERS[$i]:-}" ]; then
		NETNS_ARGV=(nsenter -t "${NETNS_HOLDERS[$i]}" -n -m "--wd=$PWD")
		# nsenter forks into a pid namespace: its child must not
		# outlive it when the caller kills it.
		[ "$NETNS_OWN_PID" = 1 ] &&
			NETNS_ARGV+=(-p -- setpriv --pdeathsig KILL)
		NETNS_ARGV+=(--)
	else
		NETNS_ARGV=(ip netns exec "$NETNS_PREFIX-$i")
	fi
	# The nodes are on the network: network mode, unless asked not.
	NETNS_ARGV+=(env "IBEMU_NET=${IBEMU_NET-1}")
}

netns_exec()
{
	local i=$1
	shift
	netns_argv "$i"
	"${NETNS_ARGV[@]}" "$@"
}

netns_bg()
{
	local i=$1
	shift
	netns_argv "$i"
	"${NETNS_ARGV[@]}" "$@" &
	NETNS_PID=$!
	NETNS_BG_PIDS+=("$NETNS_PID")
}

netns_link()
{
	ip -n "$NETNS_PREFIX-sw" link set "p$1" "$2"
}

netns_listening()
{
	netns_argv "$1"
	sc_listening "$2" "${NETNS_ARGV[@]}"
}

netns_wait_listen()
{
	netns_argv "$1"
	sc_wait_listen "$2" "${4:-}" "$3" "${NETNS_ARGV[@]}"
}

netns_sc_nodes()
{
	netns_argv "$1"
	SC_SERVER_IN=("${NETNS_ARGV[@]}")
	netns_argv "$2"
	SC_CLIENT_IN=("${NETNS_ARGV[@]}")
	SC_RETRY_RE=$NETNS_RETRY_RE
	SC_PEER=$(netns_addr "$1")
}

# sc_pair with the server entering node SI, the client node CI.
netns_pair()
{
	local dir=$1 secs=$2 port=$3 si=$4 ci="" a ret
	local -a args=() sin=("${SC_SERVER_IN[@]}") cin=("${SC_CLIENT_IN[@]}")
	local re=$SC_RETRY_RE peer=$SC_PEER
	shift 4
	for a in "$@"; do
		if [ "$ci" = ":::" ]; then
			ci=$a
			continue
		fi
		[ "$a" = ":::" ] && [ -z "$ci" ] && ci=$a
		args+=("$a")
	done
	netns_sc_nodes "$si" "$ci"
	sc_pair "$dir" "$secs" "$port" "${args[@]}"
	ret=$?
	SC_SERVER_IN=("${sin[@]}")
	SC_CLIENT_IN=("${cin[@]}")
	SC_RETRY_RE=$re
	SC_PEER=$peer
	NETNS_SERVER_RC=$SC_SERVER_RC
	NETNS_CLIENT_RC=$SC_CLIENT_RC
	return $ret
}

# Is PID still a child of this shell?  A child already reaped may have
# given its PID to a process that is none of ours.
netns_is_child()
{
	local stat
	read -r stat <"/proc/$1/stat" 2>/dev/null || return 1
	stat=${stat##*) }
	set -- $stat
	[ "$2" = "${BASHPID:-$$}" ]
}

netns_teardown()
{
	local i ns p pids
	[ "$NETNS_UP" = 1 ] || return 0
	NETNS_UP=0
	# (Inside braces with stderr closed, bash does not report the kills.)
	{
	for p in "${NETNS_BG_PIDS[@]}" "${NETNS_HOLDER_TOPS[@]}" \
		 ${SC_SERVER_PID:+"$SC_SERVER_PID"}; do
		netns_is_child "$p" && kill -9 "$p"
	done
	# Whatever else still runs in a node (children of the commands).
	for i in $(seq "$NETNS_N") sw; do
		ns=$NETNS_PREFIX-$i
		[ -e "/run/netns/$ns" ] || continue
		for p in 1 2 3; do
			pids=$(ip netns pids "$ns" 2>/dev/null)
			[ -z "$pids" ] && break
			# shellcheck disable=SC2086
			kill -9 $pids 2>/dev/null
			sleep 0.1
		done
	done
	for p in "${NETNS_BG_PIDS[@]}" "${NETNS_HOLDER_TOPS[@]}" \
		 ${SC_SERVER_PID:+"$SC_SERVER_PID"}; do
		wait "$p"
	done
	} 2>/dev/null
	for i in $(seq "$NETNS_N") sw; do
		ip netns del "$NETNS_PREFIX-$i" 2>/dev/null
	done
	if [ -n "$NETNS_GUARD" ]; then
		{ kill "$NETNS_GUARD"; wait "$NETNS_GUARD"; } 2>/dev/null
		NETNS_GUARD=
	fi
	[ -n "$NETNS_SHM_DIR" ] && rm -rf "$NETNS_SHM_DIR"
	[ -n "$NETNS_DIR" ] && rm -rf "$NETNS_DIR"
	NETNS_BG_PIDS=()
	NETNS_HOLDERS=()
	NETNS_HOLDER_TOPS=()
	return 0
}

netns_on_exit()
{
	local rc=$?
	netns_teardown
	eval "$NETNS_OLD_EXIT_TRAP"
	exit "$rc"
}

netns_on_signal()
{
	trap - EXIT INT TERM
	netns_teardown
	eval "$NETNS_OLD_EXIT_TRAP"
	exit "$1"
}

NETNS_REAPER='
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
while True:
    signal.sigwait([signal.SIGCHLD])
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
'

# A shell killed by SIGKILL runs no trap: a guard in a session of its own
# waits for it to go, then kills what runs in the nodes and deletes them.
# (Polling once a second: no other way to wait for a process that is not
# our child.)  The switch and the shm directory are made after this, so
# the guard cleans what may exist.
netns_start_guard()
{
	local me=${BASHPID:-$$}
	setsid bash -c '
		while kill -0 "$1" 2>/dev/null; do sleep 1; done
		for ns in $(ip netns list | awk "{ print \$1 }"); do
			case $ns in "$2"-*) ;; *) continue ;; esac
			pids=$(ip netns pids "$ns" 2>/dev/null)
			[ -n "$pids" ] && kill -9 $pids
			ip netns del "$ns"
		done
		rm -rf "$3" /dev/shm/ibemu-netns-"$4".*' \
		netns-guard "$me" "$NETNS_PREFIX" "$NETNS_DIR" "$me" \
		</dev/null >/dev/null 2>&1 &
	NETNS_GUARD=$!
}

# Start node I's holder: a process in the node's network namespace and in
# a mount namespace of its own where /dev/shm is the node's directory (and
# in a pid namespace of its own with --own-pid).  Commands enter its
# namespaces with nsenter.
netns_start_holder()
{
	local i=$1 ready=$NETNS_DIR/holder-$1.ready top k shm=/dev/shm
	local -a pidns=()
	[ "$NETNS_OWN_SHM" = 1 ] && shm=$NETNS_SHM_DIR/n$i
	[ "$NETNS_OWN_PID" = 1 ] && pidns=(-p -f --kill-child --mount-proc)
	ip netns exec "$NETNS_PREFIX-$i" unshare -m --propagation private \
		"${pidns[@]}" sh -c '
		if [ "$1" != /dev/shm ]; then
			mount --bind "$1" /dev/shm || exit 1
		fi
		: >"$2"
		# As the init of a pid namespace, reap the orphans: a
		# zombie would look alive to kill(pid, 0).
		if [ "$$" = 1 ] && command -v python3 >/dev/null; then
			exec python3 -c "$3"
		fi
		exec sleep 2147483647' sh "$shm" "$ready" "$NETNS_REAPER" \
		</dev/null &
	top=$!
	NETNS_HOLDER_TOPS[$i]=$top
	for k in $(seq 100); do
		[ -e "$ready" ] && break
		kill -0 "$top" 2>/dev/null || break
		sleep 0.05
	done
	[ -e "$ready" ] || return 1
	if [ "$NETNS_OWN_PID" = 1 ]; then
		# The namespace's init is unshare's only child.
		read -r NETNS_HOLDERS[$i] _ <"/proc/$top/task/$top/children"
	else
		NETNS_HOLDERS[$i]=$top
	fi
	[ -n "${NETNS_HOLDERS[$i]}" ]
}

# A UDP datagram from node 1 to an IPv4 multicast group must reach every
# other node through the bridge.
netns_check_mcast()
{
	local i group=239.47.0.1 port=47999 ok=0
	local -a mcpids=()
	command -v python3 >/dev/null || return 0
	for i in $(seq 2 "$NETNS_N"); do
		netns_bg "$i" timeout 10 python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[2])))
mreq = struct.pack("4s4s", socket.inet_aton(sys.argv[1]),
                   socket.inet_aton(sys.argv[3]))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
open(sys.argv[4], "w").close()
s.settimeout(8)
data, _ = s.recvfrom(100)
sys.exit(0 if data == b"ibemu-netns" else 1)
' "$group" "$port" "$(netns_addr "$i")" "$NETNS_DIR/mc-$i.ready"
		mcpids[$i]=$NETNS_PID
	done
	for i in $(seq 2 "$NETNS_N"); do
		for ok in $(seq 100); do
			[ -e "$NETNS_DIR/mc-$i.ready" ] && break
			sleep 0.05
		done
	done
	netns_exec 1 timeout 10 python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
for _ in range(20):
    s.sendto(b"ibemu-netns", (sys.argv[1], int(sys.argv[2])))
    time.sleep(0.05)
' "$group" "$port" || return 1
	ok=0
	for i in $(seq 2 "$NETNS_N"); do
		wait "${mcpids[$i]}" || { echo "netns: node $i got no multicast"; ok=1; }
	done
	return $ok
}

netns_setup()
{
	local n=$1 i ns sw a
	shift
	for a in "$@"; do
		case $a in
		--own-shm) NETNS_OWN_SHM=1 ;;
		--own-pid) NETNS_OWN_PID=1 ;;
		*) echo "netns_setup: unknown option $a" >&2; exit 99 ;;
		esac
	done
	[ "$(id -u)" = 0 ] || netns_skip "network namespaces need root"
	command -v ip >/dev/null || netns_skip "ip (iproute2) is not installed"
	ip netns list >/dev/null 2>&1 || netns_skip "ip netns is not available"
	for a in nsenter unshare setpriv timeout; do
		command -v $a >/dev/null || netns_skip "$a is not installed"
	done
	NETNS_N=$n
	NETNS_PREFIX=ibemu-${BASHPID:-$$}
	# The EXIT trap set before (trap -p prints: trap -- 'CMD' EXIT).
	local -a old=()
	eval "old=($(trap -p EXIT))"
	NETNS_OLD_EXIT_TRAP=${old[2]:-}
	NETNS_UP=1
	trap netns_on_exit EXIT
	trap 'netns_on_signal 130' INT
	trap 'netns_on_signal 143' TERM
	NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ibemu-netns.XXXXXX") || exit 99
	netns_start_guard
	sw=$NETNS_PREFIX-sw
	ip netns add "$sw" 2>/dev/null ||
		netns_skip "cannot create a network namespace"
	ip -n "$sw" link set lo up
	ip -n "$sw" link add br0 type bridge || netns_skip "no bridge support"
	ip -n "$sw" link set br0 up
	for i in $(seq "$n"); do
		ns=$NETNS_PREFIX-$i
		ip netns add "$ns" || exit 99
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0 \
			net.ipv6.conf.default.accept_dad=0 2>/dev/null
		ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns" ||
			netns_skip "no veth support"
		ip -n "$sw" link set "p$i" master br0 up
		ip -n "$ns" link set lo up
		ip -n "$ns" link set eth0 address "02:47:00:00:00:$(printf %02x "$i")"
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.eth0.accept_dad=0 \
			2>/dev/null
		ip -n "$ns" addr add "$(netns_addr "$i")/24" dev eth0
		ip -n "$ns" link set eth0 up
		ip -n "$ns" route add 224.0.0.0/4 dev eth0
	done
	if [ "$NETNS_OWN_SHM" = 1 ]; then
		# A node's files live in its own /dev/shm, not in a directory
		# every node would share.
		unset IBEMU_SHM_DIR
		NETNS_SHM_DIR=$(mktemp -d "/dev/shm/ibemu-netns-${BASHPID:-$$}.XXXXXX") ||
			exit 99
		for i in $(seq "$n"); do
			mkdir -m 1777 "$NETNS_SHM_DIR/n$i"
		done
	fi
	if [ "$NETNS_OWN_SHM" = 1 ] || [ "$NETNS_OWN_PID" = 1 ]; then
		for i in $(seq "$n"); do
			netns_start_holder "$i" ||
				netns_skip "cannot make node $i's namespaces"
		done
	fi
	for i in $(seq 2 "$n"); do
		command -v ping >/dev/null || break
		netns_exec 1 ping -q -c 1 -W 5 "$(netns_addr "$i")" >/dev/null ||
			{ echo "netns: node 1 does not reach node $i"; exit 99; }
	done
	netns_check_mcast || { echo "netns: multicast does not work"; exit 99; }
	return 0
}
