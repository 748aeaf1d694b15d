#!/bin/bash
# ibemu trace show draws run traces (doc/trace.md) as a ladder: from the
# fixtures in tests/data (the RC example's SEND, RDMA READ and RDMA WRITE
# between two processes; a faulted RDMA WRITE between two nodes, one file
# each, with a drop, a NAK_SEQ and a retry), the HTML page is loaded in a
# headless chromium and its self-check counts are read back from the DOM;
# the page loads nothing; its screenshot is a PNG of the asked size with
# something drawn; --text shows the lanes and the arrows; garbage input
# ends with an exit status, within bounds.
. "$(dirname "$0")/../lib/lib.sh"
data=${IBEMU_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/data
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
command -v chromium >/dev/null 2>&1 ||
	{ echo "SKIP: chromium is not installed (apt-get install chromium)"; exit 77; }
need timeout
# As root chromium needs --no-sandbox; every request goes to a proxy that
# is not there and no name resolves.
chrome() {
	timeout 120 chromium --headless --no-sandbox --disable-gpu \
		--no-first-run --disable-extensions --disable-sync \
		--proxy-server=127.0.0.1:9 --host-resolver-rules='MAP * ~NOTFOUND' \
		--user-data-dir="$dir/profile" "$@" 2>>"$dir/chromium.err"
}
# count PAGE.dom NAME: the body's data-NAME
count() { grep -o "<body[^>]*>" "$1" | grep -o "data-$2=\"[^\"]*\"" | cut -d'"' -f2; }
# expect DOM NAME VALUE
expect() {
	local got
	got=$(count "$1" "$2")
	[ "$got" = "$3" ] && pass "$(basename "$1" .dom) data-$2=$got" ||
		fail "$(basename "$1" .dom) data-$2 is '$got', want $3"
}

"$IBEMU" trace show -o "$dir/rc.html" "$data/trace-rc.trace" &&
	pass "trace show -o rc.html" || fail "trace show -o rc.html"
"$IBEMU" trace show -o "$dir/nak.html" "$data/trace-nak-alpha.trace" \
	"$data/trace-nak-beta.trace" &&
	pass "trace show -o nak.html (two files)" || fail "trace show -o nak.html"

# Nothing from outside: no URL but the SVG namespace, no src/href, no
# url(), and a policy that forbids any load.
for p in rc nak; do
	urls=$(grep -oE "(https?|ftp)://[^\"' )]*" "$dir/$p.html" | grep -vx 'http://www.w3.org/2000/svg')
	refs=$(grep -ciE "(src|href|action)=|url\(|@import|fetch\(|XMLHttpRequest|WebSocket" "$dir/$p.html")
	[ -z "$urls" ] && [ "$refs" = 0 ] && grep -q "default-src 'none'" "$dir/$p.html" &&
		pass "$p.html loads nothing" || fail "$p.html refers outside: $urls ($refs src/href/url)"
done

# The self-check, as the page's script wrote it after drawing.  The RC
# example: 2 lanes, the 3 send WRs and the receive the SEND consumes, 6
# packets of which 2 ACKs, no error.
chrome --dump-dom "file://$dir/rc.html" > "$dir/rc.dom"
expect "$dir/rc.dom" selfcheck ok
expect "$dir/rc.dom" lanes 2
expect "$dir/rc.dom" wrs 4
expect "$dir/rc.dom" arrows 6
expect "$dir/rc.dom" acks 2
expect "$dir/rc.dom" errors 0
expect "$dir/rc.dom" folded 0
# The faulted run: SEND, its receive and the WRITE; 9 packets (one
# dropped), ACK, NAK_SEQ, ACK; errors: the drop, the NAK, the retry.
chrome --dump-dom "file://$dir/nak.html" > "$dir/nak.dom"
expect "$dir/nak.dom" selfcheck ok
expect "$dir/nak.dom" lanes 2
expect "$dir/nak.dom" wrs 3
expect "$dir/nak.dom" arrows 9
expect "$dir/nak.dom" acks 3
expect "$dir/nak.dom" errors 3

# --qp keeps one lane: its arrows lose their other end.
"$IBEMU" trace show --qp 18 -o "$dir/qp.html" "$data/trace-rc.trace"
chrome --dump-dom "file://$dir/qp.html" > "$dir/qp.dom"
expect "$dir/qp.dom" lanes 1
expect "$dir/qp.dom" arrows 0

# A long run: 1500 WRITEs after the RC example's lines (9000 events).
# The page folds the repeated pattern, draws fewer than 2000 events, and
# says so.
awk -v T=1733150000004000000 '{ print }
END {
	for (i = 0; i < 1500; i++) {
		t = T + i * 6000; p = i + 2
		printf "t=%d node=ibemu pid=4243 ev=post_send qp=19 wr=0x1 op=RDMA_WRITE len=8 sig=1\n", t
		printf "t=%d node=ibemu pid=4243 ev=tx sqp=19 dqp=18 slid=1 dlid=1 op=RC_RDMA_WRITE_ONLY psn=%d len=8 ack=1 wr=0x1\n", t + 1000, p
		printf "t=%d node=ibemu pid=4242 ev=rx sqp=19 dqp=18 slid=1 dlid=1 op=RC_RDMA_WRITE_ONLY psn=%d len=8 ack=1\n", t + 2000, p
		printf "t=%d node=ibemu pid=4242 ev=tx sqp=18 dqp=19 slid=1 dlid=1 op=RC_ACKNOWLEDGE psn=%d len=0 aeth=ACK msn=%d\n", t + 3000, p, p
		printf "t=%d node=ibemu pid=4243 ev=rx sqp=18 dqp=19 slid=1 dlid=1 op=RC_ACKNOWLEDGE psn=%d len=0 aeth=ACK msn=%d\n", t + 4000, p, p
		printf "t=%d node=ibemu pid=4243 ev=cqe qp=19 cq=2 wr=0x1 status=SUCCESS op=RDMA_WRITE len=8\n", t + 5000
	}
}' "$data/trace-rc.trace" > "$dir/long.trace"
"$IBEMU" trace show -o "$dir/long.html" "$dir/long.trace"
chrome --dump-dom "file://$dir/long.html" > "$dir/long.dom"
expect "$dir/long.dom" selfcheck ok
f=$(count "$dir/long.dom" folded); n=$(count "$dir/long.dom" events)
[ "${f:-0}" -ge 8000 ] && [ "${n:-9999}" -lt 2000 ] &&
	grep -q "events folded into repeated patterns" "$dir/long.dom" &&
	pass "long run folded ($f events, $n drawn)" || fail "long run: folded '$f', drawn '$n'"

# A real trace of the manual's RC example draws as the fixture does.
if IBEMU_TRACE="$dir/real.trace" IBEMU_BUILDDIR=$IBEMU_BUILDDIR \
	bash "$data/../../examples/run-rc-example.sh" > "$dir/real.out" 2>&1; then
	"$IBEMU" trace show -o "$dir/real.html" "$dir/real.trace"
	chrome --dump-dom "file://$dir/real.html" > "$dir/real.dom"
	expect "$dir/real.dom" lanes 2
	expect "$dir/real.dom" wrs 4
	expect "$dir/real.dom" arrows 6
	expect "$dir/real.dom" acks 2
	# The two QPs' work requests in the order posted, each completed.
	expect "$dir/real.dom" wrlist "RECV:SUCCESS SEND:SUCCESS RDMA_READ:SUCCESS RDMA_WRITE:SUCCESS"
else
	fail "the RC example did not run: $(tail -3 "$dir/real.out")"
fi

# The screenshot: a PNG (signature, IHDR) of the window's size, not one
# flat colour (more than a few hundred bytes compressed).
chrome --hide-scrollbars --window-size=1000,700 \
	--screenshot="$dir/nak.png" "file://$dir/nak.html" >/dev/null
sig=$(head -c 16 "$dir/nak.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')
wh=$(dd if="$dir/nak.png" bs=1 skip=16 count=8 2>/dev/null | od -An -tu1 |
	awk '{ printf "%d %d", (($1 * 256 + $2) * 256 + $3) * 256 + $4, (($5 * 256 + $6) * 256 + $7) * 256 + $8 }')
size=$(stat -c %s "$dir/nak.png" 2>/dev/null || echo 0)
[ "$sig" = 89504e470d0a1a0a0000000d49484452 ] && pass "screenshot is a PNG" ||
	fail "screenshot is not a PNG ($sig)"
[ "$wh" = "1000 700" ] && pass "screenshot 1000x700" || fail "screenshot is $wh"
[ "$size" -gt 5000 ] && pass "screenshot has a drawing ($size bytes)" ||
	fail "screenshot is nearly empty ($size bytes)"

# --text: a header per lane, the arrows both ways, the errors marked.
"$IBEMU" trace show --text "$data/trace-rc.trace" > "$dir/rc.txt"
grep -q "ibemu/4242/18.*ibemu/4243/19" "$dir/rc.txt" && pass "text lane headers" ||
	fail "text lane headers"
grep -q -- "*--*>|" "$dir/rc.txt" && grep -q -- "|<--*\*" "$dir/rc.txt" &&
	pass "text arrows both ways" || fail "text arrows"
w=$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$dir/rc.txt")
[ "$w" -le 100 ] && pass "text fits 100 columns ($w)" || fail "text is $w columns wide"
"$IBEMU" trace show --text "$data/trace-nak-alpha.trace" "$data/trace-nak-beta.trace" > "$dir/nak.txt"
[ "$(grep -c '^ .* !! ' "$dir/nak.txt")" = 3 ] && grep -q "X--*\*" "$dir/nak.txt" &&
	pass "text marks the 3 errors and the drop" || fail "text errors"

# Garbage: bounded random bytes, over-long lines, fields that do not
# parse.  An exit status (0 with events, 1 without), no crash, no hang.
for seed in 1 2 3 4 5 6 7 8; do
	head -c 200000 /dev/urandom > "$dir/garbage"
	timeout 60 "$IBEMU" trace show --text "$dir/garbage" > /dev/null 2>&1
	rc=$?
	[ $rc = 0 ] || [ $rc = 1 ] || { fail "random input $seed: exit $rc"; break; }
done
[ $seed = 8 ] && [ $rc -le 1 ] && pass "random input: exit status, no crash"
{
	head -c 5000 /dev/zero | tr '\0' x; echo
	echo "t=5 node=n pid=1 ev=tx sqp=x dqp=0x dlid=99999999999999 op=<script> psn=-1"
	echo "t=18446744073709551616 node=n pid=1 ev=cqe"
	echo "t=6 node=n pid=1 ev=post_send qp=1 wr=0x0 op=SEND sig=1"
	sed -n 12,18p "$data/trace-rc.trace"
} > "$dir/bad.trace"
timeout 60 "$IBEMU" trace show -o "$dir/bad.html" "$dir/bad.trace" 2> "$dir/bad.err"
rc=$?
[ $rc = 0 ] && grep -q "skipped 1 lines longer than" "$dir/bad.err" &&
	grep -q "1 malformed lines, 4 bad fields" "$dir/bad.err" &&
	pass "bad lines skipped and counted" || fail "bad lines: exit $rc, $(cat "$dir/bad.err")"
grep -q "u003cscript" "$dir/bad.html" && ! grep -q "op=<script>" "$dir/bad.html" &&
	pass "names escaped in the page" || fail "names not escaped in the page"
chrome --dump-dom "file://$dir/bad.html" > "$dir/bad.dom"
expect "$dir/bad.dom" selfcheck ok
timeout 60 "$IBEMU" trace show --text /dev/null > /dev/null 2>&1
[ $? = 1 ] && pass "empty trace: exit 1" || fail "empty trace: not exit 1"
"$IBEMU" trace show > /dev/null 2>&1
[ $? = 2 ] && pass "no FILE: usage, exit 2" || fail "no FILE: not exit 2"
finish
