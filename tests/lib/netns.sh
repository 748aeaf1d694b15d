#!/bin/bash
# Run one shell command in each of N nodes (network namespaces joined by a
# bridge, tests/lib/netns-lib.sh), e.g. a server and a client on two nodes:
#
#   tests/lib/netns.sh -n 2 --own-shm -- \
#       './ibemu run -- ibv_rc_pingpong' \
#       'sleep 1; ./ibemu run -- ibv_rc_pingpong 10.47.0.1'
#
# Command I runs in node I (address 10.47.0.I) through `bash -c`, in the
# current directory, with the environment; NETNS_NODE is set to I.  All
# commands but the last run in the background; the last in the foreground.
# Then the others are waited for (at most -t SECS each, default 60, after
# the last ended).  Exit status 0 when every command exited 0, else 1; 77
# when namespaces cannot be made here.  Everything is torn down at the
# end, on failure and on a signal too.
#
# Options: -n N (nodes, default: the number of commands), -t SECS,
# --own-shm (each node its own /dev/shm), --own-pid (each node its own pid
# namespace), -q (no per-command status lines).
set -u
. "$(dirname "$0")/netns-lib.sh"

usage()
{
	sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

n=
secs=60
quiet=0
opts=()
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=$2; shift 2 ;;
	-t) secs=$2; shift 2 ;;
	--own-shm|--own-pid) opts+=("$1"); shift ;;
	-q) quiet=1; shift ;;
	--) shift; break ;;
	-h|--help) usage ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || usage
[ -n "$n" ] || n=$#
if [ $# -gt "$n" ]; then
	echo "netns.sh: $# commands for $n nodes" >&2
	exit 2
fi

netns_setup "$n" "${opts[@]}"
pids=()
rcs=()
i=0
for cmd in "$@"; do
	i=$((i + 1))
	if [ "$i" -lt $# ]; then
		NETNS_NODE=$i netns_bg "$i" bash -c "$cmd"
		pids[$i]=$NETNS_PID
	else
		NETNS_NODE=$i netns_exec "$i" bash -c "$cmd"
		rcs[$i]=$?
	fi
done
# The background commands get SECS more seconds, then are killed.
for i in $(seq $(($# - 1))); do
	for k in $(seq $((secs * 10))); do
		kill -0 "${pids[$i]}" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "${pids[$i]}" 2>/dev/null
	wait "${pids[$i]}" 2>/dev/null
	rcs[$i]=$?
done
rc=0
for i in $(seq $#); do
	[ "$quiet" = 1 ] || echo "netns.sh: node $i exited ${rcs[$i]}" >&2
	[ "${rcs[$i]}" = 0 ] || rc=1
done
exit $rc
