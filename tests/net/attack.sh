#!/bin/bash
# Attacks with raw TCP on a victim across nodes (network namespaces with
# their own /dev/shm, tests/lib/netns-lib.sh): an RC pair of
# tests/progs/victim.c, server in node 1 and client in node 3, checks its
# SENDs, RDMA WRITEs and READs and its region's final content while
# tests/progs/attacker.c in node 2 attacks the server, knowing what the
# server's INFO file says (QPNs, the region's address, length and R_Key,
# the PSNs).  Each check runs against a fresh pair and passes when the
# pair's messages and memory are untouched and its connection survives
# (and the attacker could deliver its attack at all):
#   baseline   no attack: the pair itself works
#   inject     SENDs and WRITEs as the peer, PSNs and R_Keys swept, at
#              most 100000 packets a second
#   flood      the same as fast as the attacker can send
#   dupread    READ requests as the peer, PSNs behind, bogus R_Key/VA
#   doorhold   64 silent connections held at node 1's door while the
#              client starts (its lookups there must be answered)
#   doorhalf   the same, each after half a LOOKUP
#   connflood  64 connections held without HELLO and 1100 connect/close
#              cycles (15 s at most) at the server's data port: its
#              descriptors back
#              within 32 of where they were, a new client still served
#   enum       door lookups of 4096 QPNs (how many answered is said)
#   udspoof    a UD SEND to a UD victim claiming another LID: its wc.slid
#              is the attacker's node's LID; two before it with GRHs
#              naming other sources (a global IPv6 SGID over IPv4,
#              another node's IPv4 address) are dropped
#   attack.sh [CHECK...]   runs the given checks (default, or "all":
#   every one).  Where the door does not answer for the victim's QP (it
#   answers a connected QP to its peer's node alone), the attacker is
#   given the data port a port scan of node 1 finds.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need timeout
all="baseline inject flood dupread doorhold doorhalf connflood enum udspoof"
default=$all
checks=${*:-$default}
[ "$checks" = all ] && checks=$all
for c in $checks; do
	case " $all " in
	*" $c "*) ;;
	*) echo "attack.sh: no check $c (of: $all)"; exit 99 ;;
	esac
done
victim=$IBEMU_BUILDDIR/tests/progs/victim
attacker=$IBEMU_BUILDDIR/tests/progs/attacker
for p in "$victim" "$attacker"; do
	[ -x "$p" ] || { echo "FAIL: $p was not built"; exit 1; }
done
netns_setup 3 --own-shm
dir=$NETNS_DIR
port=18700
vsecs=6 # the pair's traffic
asecs=3 # an attack's, within it
srv=$(netns_addr 1)
run=(env "LD_PRELOAD=$IBEMU_LIB_PATH" "$victim")

# wait_pid PID SECS: its exit status, or 124 after SECS (then killed).
wait_pid()
{
	local _
	for _ in $(seq $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && { kill -9 "$1"; wait "$1"; return 124; }
	wait "$1"
}

# wait_for FILE RE PID SECS: until FILE has a line matching RE (RE "":
# exists), while PID lives, SECS at most.
wait_for()
{
	local _
	for _ in $(seq $(($4 * 10))); do
		if [ -z "$2" ]; then
			[ -e "$1" ] && return 0
		else
			grep -q "$2" "$1" 2>/dev/null && return 0
		fi
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

show()
{
	local f
	for f in "$dir"/*.out; do
		[ -e "$f" ] || continue
		sed "s|^|    $(basename "$f" .out): |" "$f" | tail -n 8
	done
}

# start_server [CLIENTS]: the server in node 1 (pid spid), listening.
start_server()
{
	port=$((port + 1))
	rm -f "$dir"/*.out "$dir/info"
	netns_bg 1 "${run[@]}" server "$port" "$dir/info" "$vsecs" "${1:-1}" \
		>"$dir/server.out" 2>&1
	spid=$NETNS_PID
	netns_wait_listen 1 "$port" 20 "$spid"
}

# start_client [NAME [SECS]]: a client in node 3 (pid cpid).
start_client()
{
	netns_bg 3 "${run[@]}" client "$srv" "$port" "${2:-$vsecs}" \
		>"$dir/${1:-client}.out" 2>&1
	cpid=$NETNS_PID
}

# attack MODE ARGS...: the attacker in node 2, bounded; its status in arc.
# scan_port: add to the victim's INFO the data port its process listens
# on, as a port scan of node 1 finds it (the door may not say).
scan_port()
{
	local vpid p
	vpid=$(awk '$1 == "pid" { print $2 }' "$dir/info")
	p=$(netns_exec 1 ss -Hltnp | grep "pid=$vpid," |
		awk '{ n = split($4, a, ":"); print a[n] }' |
		grep -vx -e 4791 -e "$port" | head -1)
	[ -n "$p" ] && echo "vport $p" >>"$dir/info"
}

attack()
{
	if [ "$1" = none ]; then
		echo "no attack" >"$dir/attacker.out"
		arc=0
		return
	fi
	[ -f "$dir/info" ] && ! grep -q '^vport' "$dir/info" && scan_port
	netns_exec 2 timeout 60 "$attacker" "$@" >"$dir/attacker.out" 2>&1
	arc=$?
}

# pair_verdict NAME: wait for the pair; pass when both exited 0, the
# server found everything intact, and the attack was delivered (arc 0).
pair_verdict()
{
	local name=$1 src crc
	wait_pid "$cpid" $((vsecs + 40))
	crc=$?
	wait_pid "$spid" $((vsecs + 40))
	src=$?
	if [ "$src$crc$arc" = 000 ] && grep -q "victim: intact" "$dir/server.out"; then
		pass "$name: $(tail -n 1 "$dir/attacker.out"); victim: $(tail -n 1 "$dir/client.out")"
	elif [ "$arc" != 0 ]; then
		fail "$name: the attack was not delivered (attacker exited $arc)"
		show
	else
		fail "$name: the victim's server exited $src, client $crc (124: timed out)"
		show
	fi
}

# An attack during the pair's traffic, once it flows.
during_traffic()
{
	local name=$1
	shift
	arc=-
	if ! start_server; then
		fail "$name: the victim did not listen"
		show
		return
	fi
	start_client
	if wait_for "$dir/info" "" "$spid" 20; then
		sleep 1
		attack "$@"
	fi
	pair_verdict "$name"
}

# Door connections held while the client starts.
door_hold()
{
	local name=$1 mode=$2 apid
	arc=-
	if ! start_server || ! netns_wait_listen 1 4791 20 "$spid"; then
		fail "$name: the victim did not listen"
		show
		return
	fi
	netns_bg 2 timeout 60 "$attacker" "$mode" "$srv" 10 64 \
		>"$dir/attacker.out" 2>&1
	apid=$NETNS_PID
	if wait_for "$dir/attacker.out" "^holding" "$apid" 20; then
		start_client
		wait_pid "$apid" 30
		arc=$?
		pair_verdict "$name"
	else
		fail "$name: the attacker did not hold the door"
		show
		wait_pid "$apid" 30
		kill -9 "$spid"
		wait "$spid"
	fi
}

nfds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

conn_flood()
{
	local name=connflood vpid fd0 fd1 c2=- src crc
	arc=-
	if ! start_server 2; then
		fail "$name: the victim did not listen"
		show
		return
	fi
	start_client
	if wait_for "$dir/info" "" "$spid" 20; then
		vpid=$(awk '$1 == "pid" { print $2 }' "$dir/info")
		sleep 1
		fd0=$(nfds "$vpid")
		attack connflood "$dir/info" 15 1100
		sleep 1
		fd1=$(nfds "$vpid")
	fi
	wait_pid "$cpid" $((vsecs + 40))
	crc=$?
	if [ "$crc" = 0 ]; then
		start_client client2 2
		wait_pid "$cpid" 40
		c2=$?
	fi
	wait_pid "$spid" 40
	src=$?
	if [ "$src$crc$c2$arc" = 0000 ] && [ "$fd1" -le $((fd0 + 32)) ]; then
		pass "$name: $(tail -n 1 "$dir/attacker.out"); the server's descriptors $fd0 -> $fd1; a new client: $(tail -n 1 "$dir/client2.out")"
	else
		fail "$name: attacker $arc; the server's descriptors ${fd0:-?} before, ${fd1:-?} after (at most +32); server exited $src, client $crc, new client $c2"
		show
	fi
}

# The UD victim's wc.slid must be node 2's LID (2), not the LID 3 the
# attacker claims.
ud_spoof()
{
	local name=udspoof vpid vrc
	rm -f "$dir"/*.out "$dir/info"
	arc=-
	netns_bg 1 "${run[@]}" ud "$dir/info" 20 2 "$(netns_addr 2)" \
		>"$dir/victim.out" 2>&1
	vpid=$NETNS_PID
	wait_for "$dir/info" "" "$vpid" 20 &&
		attack udspoof "$dir/info" "$srv" 3
	wait_pid "$vpid" 30
	vrc=$?
	if [ "$vrc$arc" = 00 ]; then
		pass "$name: $(tail -n 1 "$dir/attacker.out"); $(grep '^ud:' "$dir/victim.out")"
	else
		fail "$name: the UD victim exited $vrc, the attacker $arc"
		show
	fi
}

for c in $checks; do
	case $c in
	baseline) during_traffic baseline none ;;
	inject) during_traffic inject inject "$dir/info" "$asecs" 100000 ;;
	flood) during_traffic flood inject "$dir/info" "$asecs" ;;
	dupread) during_traffic dupread dupread "$dir/info" "$asecs" ;;
	doorhold) door_hold doorhold doorhold ;;
	doorhalf) door_hold doorhalf doorhalf ;;
	connflood) conn_flood ;;
	enum) during_traffic enum enum "$dir/info" "$asecs" 4096 ;;
	udspoof) ud_spoof ;;
	esac
done
finish
