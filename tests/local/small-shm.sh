#!/bin/bash
# ibemu in a small /dev/shm, and in a /dev/shm other users write to: each
# case mounts a tmpfs of its own on /dev/shm, in a mount namespace of this
# test's own (as Docker gives a container a 64 MiB /dev/shm).
#
#   - 1 MiB: opening the device fails with ENOSPC and one line giving the
#     size needed and the room left; no process dies of SIGBUS.
#   - 7 MiB: one process holds the device; a second one's open fails
#     cleanly; the first keeps working.
#   - 64 MiB: 64 processes hold the device open at once (with a region, a
#     CQ and a QP each) while a ping-pong moves data; then the conformance
#     suite, its RC stress test included, passes.
#   - a name another user creates first (the node's name, or the user's
#     directory itself) never opens another user's file: the device opens,
#     in a place of the user's own when the directory is taken (one
#     warning naming the culprit; tests/local/node-dir-foreign.sh).
#
# Needs root (mount) and unshare -m; skipped otherwise.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need timeout
holder=$IBEMU_BUILDDIR/tests/progs/shm_holder
own_mount_ns "mounting a small /dev/shm" "$@"
need setpriv
need ibv_devinfo
need ibv_rc_pingpong
unset IBEMU_SHM_DIR
dir=$(mktemp -d)
trap 'sc_cleanup; stop_holders; rm -rf "$dir"' EXIT
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((24000 + ($$ % 200) * 16))
uid=$(id -u)
mounted=0

# A fresh, empty /dev/shm of size $1, in place of the previous one.
shm_size()
{
	[ "$mounted" = 1 ] && umount /dev/shm
	mount -t tmpfs -o "size=$1,mode=1777" tmpfs /dev/shm || { echo "cannot mount a tmpfs on /dev/shm"; exit 99; }
	mounted=1
}

# A process killed by a signal: exit status above 128 (SIGBUS: 135).
signalled() { [ "$1" -gt 128 ] && [ "$1" != 255 ]; }

# start_holders N: N holders, outputs in $dir/h.I, PIDs in holder_pids.
holder_pids=()
start_holders()
{
	local i
	rm -f "$dir/stop" "$dir"/h.*
	holder_pids=()
	for i in $(seq "$1"); do
		timeout -k 5 "$secs" "$IBEMU" run -- "$holder" "$dir/stop" "$secs" \
			>"$dir/h.$i" 2>&1 </dev/null &
		holder_pids+=($!)
	done
}
# wait_ready N: until N holders said ready or one failed (bounded).
wait_ready()
{
	local i
	for i in $(seq $((secs * 10))); do
		[ "$(cat "$dir"/h.* 2>/dev/null | grep -c '^ready')" -ge "$1" ] && return 0
		grep -q '^fail' "$dir"/h.* 2>/dev/null && return 1
		sleep 0.1
	done
	return 1
}
# stop_holders: let them tear down; holder_rcs gets their exit statuses.
holder_rcs=()
stop_holders()
{
	local p
	touch "$dir/stop"
	holder_rcs=()
	for p in "${holder_pids[@]}"; do
		wait "$p"
		holder_rcs+=($?)
	done
	holder_pids=()
}

# --- 1 MiB: too small for the node segment ---
shm_size 1m
out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
if signalled "$rc"; then
	fail "1 MiB /dev/shm: ibv_devinfo killed by signal $((rc - 128))"
elif [ "$rc" = 0 ]; then
	fail "1 MiB /dev/shm: ibv_devinfo opened a device with no room for it"
elif echo "$out" | grep -q "cannot allocate the node segment (.* KiB) in /dev/shm: No space left on device; /dev/shm has .* KiB free of 1024 KiB"; then
	pass "1 MiB /dev/shm: the open fails: $(echo "$out" | grep -m1 'cannot allocate')"
else
	fail "1 MiB /dev/shm: no clear error (exit $rc)"
	echo "$out" | sed 's/^/    /' | tail -n 5
fi

# --- 7 MiB: room for the node and one process ---
shm_size 7168k
start_holders 1
if wait_ready 1; then
	out=$(timeout -k 5 "$secs" "$IBEMU" run -- "$holder" "$dir/stop" "$secs" 2>&1)
	rc=$?
	if signalled "$rc"; then
		fail "7 MiB /dev/shm: the second process was killed by signal $((rc - 128))"
	elif [ "$rc" = 1 ] && echo "$out" | grep -q "^fail: ibv_open_device: No space left on device" &&
		echo "$out" | grep -q "cannot allocate the process inbox (.* KiB) in /dev/shm"; then
		pass "7 MiB /dev/shm: a second process's open fails with ENOSPC"
	else
		fail "7 MiB /dev/shm: the second process exited $rc"
		echo "$out" | sed 's/^/    /' | tail -n 5
	fi
else
	fail "7 MiB /dev/shm: the first process did not get ready"
	sed 's/^/    /' "$dir/h.1" | tail -n 5
fi
stop_holders
if [ "${holder_rcs[0]}" = 0 ]; then
	pass "7 MiB /dev/shm: the first process tore down cleanly"
else
	fail "7 MiB /dev/shm: the first process exited ${holder_rcs[0]}"
	sed 's/^/    /' "$dir/h.1" | tail -n 5
fi

# --- 64 MiB, as Docker gives by default: 64 processes at once ---
shm_size 64m
start_holders 64
if wait_ready 64; then
	pass "64 MiB /dev/shm: 64 processes hold ibemu0 open, $(df -k /dev/shm | awk 'NR == 2 { print $3 }') KiB used"
	dir_pp=$dir/pp
	mkdir -p "$dir_pp"
	port=$(sc_pick_port "$port")
	if sc_pair "$dir_pp" "$secs" "$port" \
		"$IBEMU" run -- ibv_rc_pingpong -d ibemu0 -p "$port" -n 500 -s 65536 -c ::: \
		"$IBEMU" run -- ibv_rc_pingpong -d ibemu0 -p "$port" -n 500 -s 65536 -c localhost; then
		pass "64 MiB /dev/shm, 66 processes: rc ping-pong with data checked: $(grep -m1 'bytes in' "$dir_pp/client.out")"
	else
		fail "64 MiB /dev/shm, 66 processes: rc ping-pong: server $SC_SERVER_RC, client $SC_CLIENT_RC"
		tail -n 5 "$dir_pp/server.out" "$dir_pp/client.out" | sed 's/^/    /'
	fi
else
	fail "64 MiB /dev/shm: $(cat "$dir"/h.* | grep -c '^ready') of 64 processes got ready"
	grep -h -v '^ready' "$dir"/h.* | sort | uniq -c | head -n 5 | sed 's/^/    /'
fi
stop_holders
bad=0
for rc in "${holder_rcs[@]}"; do
	[ "$rc" = 0 ] || bad=$((bad + 1))
done
if [ "$bad" = 0 ]; then
	pass "64 MiB /dev/shm: 64 processes tore down cleanly"
else
	fail "64 MiB /dev/shm: $bad of 64 processes exited non-zero (${holder_rcs[*]})"
fi

# --- 64 MiB: the conformance suite, its RC stress test included ---
shm_size 64m
out=$(CF_RC_STRESS_MSGS=${CF_RC_STRESS_MSGS:-3000} IBEMU_NODE=$IBEMU_NODE-cf \
	timeout -k 5 600 sh "${IBEMU_SRCDIR:-$IBEMU_BUILDDIR}/conformance/run-conformance.sh" 2>&1)
rc=$?
if [ "$rc" = 0 ] && echo "$out" | grep -q "rc_stress: 64 QPs"; then
	pass "64 MiB /dev/shm: conformance suite with rc_stress: $(echo "$out" | grep -m1 -E '^ +tests')"
else
	fail "64 MiB /dev/shm: conformance suite exited $rc"
	echo "$out" | grep -E 'FAILED|^ *[0-9]+\. |fail|tests|Bus' | head -n 20 | sed 's/^/    /'
fi

# --- names another user creates first ---
other="setpriv --reuid=65534 --regid=65534 --clear-groups"
shm_size 64m
# The node's predictable names in /dev/shm, old and new style.
$other touch "/dev/shm/ibemu-v2-$uid-$IBEMU_NODE" "/dev/shm/ibemu-v3-$uid-$IBEMU_NODE"
if out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1); then
	pass "names another user made in /dev/shm do not stop the device"
else
	fail "names another user made in /dev/shm stop the device"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
if $other touch "/dev/shm/ibemu-$uid/v3-$IBEMU_NODE-x" 2>/dev/null ||
	$other ls "/dev/shm/ibemu-$uid" >/dev/null 2>&1; then
	fail "another user can use /dev/shm/ibemu-$uid"
else
	pass "another user can neither list nor create in /dev/shm/ibemu-$uid ($(stat -c '%A %U' "/dev/shm/ibemu-$uid"))"
fi
# The user's directory itself, made first by another user.
shm_size 64m
$other mkdir -m 0777 "/dev/shm/ibemu-$uid"
out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
if [ "$rc" = 0 ] &&
	echo "$out" | grep -q "warning: /dev/shm/ibemu-$uid belongs to uid 65534, not to uid $uid .*: the node lives in /dev/shm/ibemu-$uid-1 instead"; then
	pass "a directory another user made is passed over, naming the culprit"
else
	fail "a directory another user made: exit $rc"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
mkdir -p "$dir/alt"
if out=$(IBEMU_SHM_DIR=$dir/alt timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1); then
	pass "IBEMU_SHM_DIR moves the node out of the way"
else
	fail "IBEMU_SHM_DIR=$dir/alt: ibv_devinfo failed"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
rm -f "$dir/alt/ibemu-$uid"/v*
# A symbolic link in its place.
shm_size 64m
mkdir -p "$dir/elsewhere"
chmod 0700 "$dir/elsewhere"
$other ln -s "$dir/elsewhere" "/dev/shm/ibemu-$uid"
out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
if [ "$rc" = 0 ] &&
	echo "$out" | grep -q "warning: /dev/shm/ibemu-$uid is a symbolic link of uid 65534 .*: the node lives in /dev/shm/ibemu-$uid-1 instead" &&
	[ -z "$(ls -A "$dir/elsewhere")" ]; then
	pass "a symbolic link in the directory's place is passed over, nothing written through it"
else
	fail "a symbolic link in the directory's place: exit $rc, $(ls -A "$dir/elsewhere" | wc -l) files behind it"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
umount /dev/shm
mounted=0
finish
