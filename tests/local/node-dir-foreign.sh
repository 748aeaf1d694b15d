#!/bin/bash
# The user's node directory made first by another user (doc/design.md §6
# "The node segment"): /dev/shm/ibemu-UID of uid 65534 does not deny the
# device.  Every process of the user moves to the same private place
# instead, says so in one warning line, and leaves the other user's
# directory alone:
#
#   - another user's directory: an rc ping-pong between two processes
#     works in /dev/shm/ibemu-UID-1; `ibemu dir` and `ibemu status` find
#     the node there;
#   - a symbolic link, then an open directory of ours: the node moves on
#     to /dev/shm/ibemu-UID-2, nothing is written through the link;
#   - every place in /dev/shm taken: $XDG_RUNTIME_DIR/ibemu; without it,
#     a clear error.
#
# Each case runs in a /dev/shm of its own (a tmpfs in a mount namespace of
# this test's), so other tests' /dev/shm/ibemu-UID is never touched.
# Needs root (mount, chown) and unshare -m; skipped otherwise.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need timeout
own_mount_ns "making another user's directory" "$@"
need ibv_devinfo
need ibv_rc_pingpong
unset IBEMU_SHM_DIR XDG_RUNTIME_DIR
holder=$IBEMU_BUILDDIR/tests/progs/shm_holder
dir=$(mktemp -d)
trap 'sc_cleanup; touch "$dir/stop"; rm -rf "$dir"' EXIT
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((25000 + ($$ % 200) * 16))
other=65534
top=/dev/shm/ibemu-0
mounted=0

# A fresh, empty /dev/shm, in place of the previous one.
fresh_shm()
{
	[ "$mounted" = 1 ] && umount /dev/shm
	mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm ||
		{ echo "cannot mount a tmpfs on /dev/shm"; exit 99; }
	mounted=1
}

# What the other user's directory looks like: owner, mode, entries.
looks() { stat -c '%u:%g %a %Y' "$1"; ls -lA --time-style=+%s "$1"; }

# warned FILE FROM TO: FILE has exactly one warning moving FROM to TO.
warned()
{
	[ "$(grep -c "^ibemu: warning: $1 .*: the node lives in $2 instead$" "$3")" = 1 ]
}

# --- another user's directory ---
fresh_shm
mkdir -m 0700 "$top"
echo theirs >"$top/v9-$IBEMU_NODE"
chown -R "$other:$other" "$top"
before=$(looks "$top")
port=$(sc_pick_port "$port")
if sc_pair "$dir" "$secs" "$port" \
	"$IBEMU" run -- ibv_rc_pingpong -p "$port" -n 200 -s 4096 -c ::: \
	"$IBEMU" run -- ibv_rc_pingpong -p "$port" -n 200 -s 4096 -c localhost; then
	pass "another user's $top: rc ping-pong works: $(grep -m1 'bytes in' "$dir/client.out")"
else
	sc_fail_pair "another user's $top: rc ping-pong"
fi
for side in server client; do
	if warned "$top belongs to uid $other, not to uid 0" "$top-1" "$dir/$side.out"; then
		pass "the $side says once where the node lives: $(grep -m1 warning "$dir/$side.out")"
	else
		fail "the $side's warnings: $(grep -c warning "$dir/$side.out")"
		sed 's/^/    /' "$dir/$side.out" | head -n 5
	fi
done
if [ "$(looks "$top")" = "$before" ] && [ "$(cat "$top/v9-$IBEMU_NODE")" = theirs ]; then
	pass "the other user's directory is untouched ($(stat -c '%U %a' "$top"))"
else
	fail "the other user's directory changed"
	looks "$top" | sed 's/^/    /'
fi
if [ "$(stat -c '%u %a' "$top-1")" = "0 700" ] && [ -n "$(find "$top-1" -name "v*-$IBEMU_NODE")" ]; then
	pass "the node lives in $top-1 (uid 0, mode 0700)"
else
	fail "no node in $top-1: $(stat -c '%u %a' "$top-1" 2>&1)"
fi
[ "$("$IBEMU" dir 2>&1)" = "$top-1" ] && pass "ibemu dir: $top-1" ||
	fail "ibemu dir: $("$IBEMU" dir 2>&1)"
rm -f "$dir/stop"
timeout -k 5 "$secs" "$IBEMU" run -- "$holder" "$dir/stop" "$secs" \
	>"$dir/holder.out" 2>&1 </dev/null &
holder_pid=$!
for i in $(seq $((secs * 10))); do
	grep -q '^ready\|^fail' "$dir/holder.out" && break
	sleep 0.1
done
out=$(timeout -k 5 "$secs" "$IBEMU" status 2>&1)
if echo "$out" | grep -q "^node .*($top-1/v[0-9]*-$IBEMU_NODE)$" &&
	echo "$out" | grep -q "^processes *1$"; then
	pass "ibemu status finds the node and its process in $top-1"
else
	fail "ibemu status: $(echo "$out" | grep -E '^node|^processes|error' | tr '\n' ' ')"
fi
touch "$dir/stop"
wait "$holder_pid" || fail "the holder exited $?: $(head -n 3 "$dir/holder.out")"
[ "$(ls "$top-1" 2>/dev/null | grep -c .)" = 1 ] &&
	pass "one node segment, no inbox left" || fail "in $top-1: $(ls "$top-1")"

# --- a symbolic link, then an open directory of ours ---
fresh_shm
mkdir -m 0700 "$dir/elsewhere"
ln -s "$dir/elsewhere" "$top"
chown -h "$other:$other" "$top"
mkdir -m 0777 "$top-1"
out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
echo "$out" >"$dir/devinfo.out"
if [ "$rc" = 0 ] && warned "$top is a symbolic link of uid $other" "$top-2" "$dir/devinfo.out" &&
	[ -z "$(find "$dir/elsewhere" "$top-1" -mindepth 1)" ] && [ -n "$(find "$top-2" -name "v*-$IBEMU_NODE")" ]; then
	pass "a symbolic link and an open directory are passed over: the node lives in $top-2"
else
	fail "a symbolic link, an open directory: exit $rc, $(find "$dir/elsewhere" "$top-1" -mindepth 1 | wc -l) files behind them"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi

# --- every place in /dev/shm taken ---
fresh_shm
mkdir -m 0700 "$top" "$top"-{1..8}
chown "$other:$other" "$top" "$top"-{1..8}
mkdir -m 0700 "$dir/run"
out=$(XDG_RUNTIME_DIR=$dir/run timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
echo "$out" >"$dir/devinfo.out"
if [ "$rc" = 0 ] && warned "$top belongs to uid $other, not to uid 0" "$dir/run/ibemu" "$dir/devinfo.out" &&
	[ -n "$(find "$dir/run/ibemu" -name "v*-$IBEMU_NODE")" ]; then
	pass "with /dev/shm taken, the node lives in \$XDG_RUNTIME_DIR/ibemu"
else
	fail "with /dev/shm taken and XDG_RUNTIME_DIR: exit $rc"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
out=$(timeout -k 5 "$secs" "$IBEMU" run -- ibv_devinfo 2>&1)
rc=$?
if [ "$rc" != 0 ] && [ "$rc" -lt 128 ] &&
	echo "$out" | grep -q "error: $top belongs to uid $other, not to uid 0, and $top-1 to -8 and \$XDG_RUNTIME_DIR/ibemu will not do either"; then
	pass "with no place left, a clear error: $(echo "$out" | grep -m1 error:)"
else
	fail "with no place left: exit $rc"
	echo "$out" | sed 's/^/    /' | tail -n 3
fi
umount /dev/shm
mounted=0
finish
