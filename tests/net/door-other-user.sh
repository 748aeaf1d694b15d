#!/bin/bash
# A door of another user is never believed (ibemu(7), SECURITY): in a
# node (a network namespace, tests/lib/netns-lib.sh) where uid 65534
# bound the door port first, a pair of this user's processes that sends
# through the door (IBEMU_TRANSPORT=tcp, on loopback) asks it nothing,
# says why in one line, and fails (RETRY_EXC_ERR) rather than talk to
# whoever holds the port.  Needs root (namespaces, setpriv).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
need timeout
need /usr/bin/python3
need setpriv
need ibv_rc_pingpong
netns_setup 1
dir=$NETNS_DIR
port=18515
chmod 755 "$dir"
cat >"$dir/door.py" <<'PY'
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 4791))
s.listen(16)
s.settimeout(0.2)
print("holding", flush=True)
n, end = 0, time.time() + float(sys.argv[1])
while time.time() < end:
    try:
        c, _ = s.accept()
        n += 1
        c.close()
    except socket.timeout:
        pass
print("connections", n, flush=True)
PY
netns_bg 1 setpriv --reuid=65534 --regid=65534 --clear-groups \
	/usr/bin/python3 "$dir/door.py" 12 >"$dir/door.out" 2>&1
dpid=$NETNS_PID
for _ in $(seq 50); do
	grep -q holding "$dir/door.out" && break
	sleep 0.1
done
export IBEMU_NET= IBEMU_TRANSPORT=tcp
netns_bg 1 env LD_PRELOAD="$IBEMU_LIB_PATH" timeout 10 \
	ibv_rc_pingpong -d ibemu0 -p $port -n 10 >"$dir/srv.out" 2>&1
spid=$NETNS_PID
netns_wait_listen 1 $port 10 "$spid"
netns_exec 1 env LD_PRELOAD="$IBEMU_LIB_PATH" timeout 10 \
	ibv_rc_pingpong -d ibemu0 -p $port -n 10 127.0.0.1 \
	>"$dir/cli.out" 2>&1
rc=$?
wait "$spid"
wait "$dpid"
said=$(cat "$dir/srv.out" "$dir/cli.out" |
	grep -c "held by uid 65534, not by this user: not believed")
conns=$(awk '/^connections/ { print $2 }' "$dir/door.out")
if [ "$rc" != 0 ] && [ "$said" -ge 1 ] && [ "${conns:-x}" = 0 ]; then
	pass "another user's door: not asked, said ($said), the pair fails"
else
	fail "another user's door: client $rc, said $said, the door saw" \
		"${conns:-?} connections"
	cat "$dir/door.out" "$dir/srv.out" "$dir/cli.out"
fi
finish
