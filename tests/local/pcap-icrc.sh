#!/bin/bash
# ibemu pcap check and the ICRC of IBEMU_PCAP captures (IBA 7.8.1, Annex
# A17.3.3): a capture of Linux's rxe (tests/data/rxe0-roce.pcap) checks
# good; a bit flipped in a payload or a BTH is named, one in a field the
# ICRC masks (TTL) is not; the file's other byte order and nanosecond
# timestamps read the same; garbage never crashes the check; and perftest
# over ibemu, every operation as packets, captures only good ICRCs that
# tshark still dissects as InfiniBand.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need perl
need timeout
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
rxe=$IBEMU_SRCDIR/tests/data/rxe0-roce.pcap
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-30}
port=$((25000 + ($$ % 200) * 16))

# check FILE...: `ibemu pcap check`'s output in $dir/check.out, its status.
check()
{
	timeout "$secs" "$IBEMU" pcap check "$@" >"$dir/check.out" 2>&1
}

# flip FILE OUT PACKET OFFSET MASK: a copy with the byte OFFSET bytes into
# record PACKET's data (the first is 1; 0: into the file) xored with MASK;
# the pcap file is in this machine's byte order.
flip()
{
	perl -e '
		my ($in, $out, $n, $off, $mask) = @ARGV;
		open(my $f, "<:raw", $in) or die; local $/; my $d = <$f>;
		my $pos = 0;
		if ($n > 0) {
			$pos = 24;
			for (my $i = 1; $i < $n; $i++) {
				$pos += 16 + unpack("L", substr($d, $pos + 8, 4));
			}
			die "short" if $off >= unpack("L", substr($d, $pos + 8, 4));
			$pos += 16;
		}
		$pos += $off;
		die "past the end" if $pos >= length($d);
		substr($d, $pos, 1) = chr(ord(substr($d, $pos, 1)) ^ $mask);
		open(my $o, ">:raw", $out) or die; print $o $d;
	' "$@"
}

# swap FILE OUT: the same capture with its headers in the other byte
# order and nanosecond timestamps.
swap()
{
	perl -e '
		my ($in, $out) = @ARGV;
		open(my $f, "<:raw", $in) or die; local $/; my $d = <$f>;
		my @h = unpack("L S S l L L L", substr($d, 0, 24));
		my $r = pack("N n n N N N N", 0xa1b23c4d, @h[1 .. 6]);
		my $pos = 24;
		while ($pos + 16 <= length($d)) {
			my ($s, $u, $l, $o) = unpack("L4", substr($d, $pos, 16));
			$r .= pack("N4", $s, $u * 1000, $l, $o);
			$r .= substr($d, $pos + 16, $l);
			$pos += 16 + $l;
		}
		open(my $o, ">:raw", $out) or die; print $o $r;
	' "$@"
}

# relink FILE OUT sll|sll2|vlan: the Ethernet capture FILE as tcpdump -i
# any writes it (Linux cooked SLL or SLL2), or with an 802.1Q tag.
relink()
{
	perl -e '
		my ($in, $out, $kind) = @ARGV;
		open(my $f, "<:raw", $in) or die; local $/; my $d = <$f>;
		my $lt = { sll => 113, sll2 => 276, vlan => 1 }->{$kind};
		my $r = substr($d, 0, 20) . pack("L", $lt);
		my $pos = 24;
		while ($pos + 16 <= length($d)) {
			my ($s, $u, $l, $o) = unpack("L4", substr($d, $pos, 16));
			my $fr = substr($d, $pos + 16, $l);
			my ($src, $type) = (substr($fr, 6, 6), substr($fr, 12, 2));
			my $hdr = $kind eq "sll" ?
				pack("n n n", 0, 1, 6) . $src . "\0\0" . $type :
				$kind eq "sll2" ?
				$type . pack("n N n C C", 0, 2, 1, 0, 6) . $src . "\0\0" :
				substr($fr, 0, 12) . pack("n n", 0x8100, 5) . $type;
			$fr = $hdr . substr($fr, 14);
			$r .= pack("L4", $s, $u, length($fr), $o - $l + length($fr)) . $fr;
			$pos += 16 + $l;
		}
		open(my $o, ">:raw", $out) or die; print $o $r;
	' "$@"
}

# The kernel's packets.  A record: Ethernet, IPv4, UDP, BTH headers,
# then the payload.
eth=14 ip=20 udp=8 bth=12
RXE_SEND=1 # an RC SEND_FIRST of tests/data/rxe0-roce.pcap
if check "$rxe"; then
	pass "rxe0: $(tail -n 1 "$dir/check.out")"
else
	fail "rxe0: exit $?: $(tail -n 3 "$dir/check.out")"
fi
n=$(grep -o '[0-9]* ICRC good' "$dir/check.out" | cut -d' ' -f1)
[ "${n:-0}" = 80 ] && pass "rxe0: all $n packets RoCEv2 and good" ||
	fail "rxe0: ${n:-0} RoCEv2 packets, not 80"

flip "$rxe" "$dir/payload.pcap" $RXE_SEND $((eth + ip + udp + bth + 5)) $((0x10))
check "$dir/payload.pcap"
rc=$?
[ $rc = 1 ] && grep -q "packet $RXE_SEND: .*ICRC" "$dir/check.out" &&
	grep -q " 1 bad" "$dir/check.out" &&
	pass "payload bit flipped: packet $RXE_SEND named, exit 1" ||
	fail "payload bit flipped: exit $rc: $(cat "$dir/check.out")"

flip "$rxe" "$dir/bth.pcap" $RXE_SEND $((eth + ip + udp + 2)) 1 # P_Key
check "$dir/bth.pcap"
rc=$?
[ $rc = 1 ] && grep -q "packet $RXE_SEND: .*ICRC" "$dir/check.out" &&
	pass "BTH bit flipped: packet $RXE_SEND named, exit 1" ||
	fail "BTH bit flipped: exit $rc: $(cat "$dir/check.out")"

# TTL: a variant field (A17.3.3); the IP checksum is no longer right
# either, and is masked too.
flip "$rxe" "$dir/ttl.pcap" $RXE_SEND $((eth + 8)) $((0x20))
check "$dir/ttl.pcap" && pass "TTL changed: still good" ||
	fail "TTL changed: $(cat "$dir/check.out")"

swap "$rxe" "$dir/swapped.pcap"
if check "$dir/swapped.pcap" && grep -q " $n ICRC good" "$dir/check.out"; then
	pass "other byte order, nanoseconds: $n good"
else
	fail "other byte order: $(tail -n 3 "$dir/check.out")"
fi
for kind in sll sll2 vlan; do
	relink "$rxe" "$dir/$kind.pcap" $kind
	if check "$dir/$kind.pcap" && grep -q " $n ICRC good" "$dir/check.out"; then
		pass "$kind: $n good"
	else
		fail "$kind: $(tail -n 3 "$dir/check.out")"
	fi
done

# A snapshot length shorter than the packet: cut short, not good.
perl -e '
	open(my $f, "<:raw", $ARGV[0]) or die; local $/; my $d = <$f>;
	my $l = unpack("L", substr($d, 24 + 8, 4));
	substr($d, 24 + 8, 4) = pack("L", 100);
	substr($d, 24 + 16 + 100, $l - 100) = "";
	open(my $o, ">:raw", $ARGV[1]) or die; print $o $d;
' "$rxe" "$dir/snap.pcap"
check "$dir/snap.pcap"
rc=$?
[ $rc = 1 ] && grep -q "packet 1: cut short" "$dir/check.out" &&
	pass "snapped: packet 1 cut short, exit 1" ||
	fail "snapped: exit $rc: $(head -n 2 "$dir/check.out")"

# Untrusted input: cut short anywhere, bytes changed anywhere, or a
# header and then noise, the check ends with 0, 1 or 2 and no crash.
crashed=0
size=$(stat -c %s "$rxe")
RANDOM=4791
for i in $(seq 40); do
	head -c $(((RANDOM * 32768 + RANDOM) % size)) "$rxe" >"$dir/g.pcap"
	check "$dir/g.pcap"
	[ $? -le 2 ] || crashed=$((crashed + 1))
	flip "$rxe" "$dir/g.pcap" 0 $(((RANDOM * 32768 + RANDOM) % size)) \
		$((RANDOM % 255 + 1))
	check "$dir/g.pcap"
	[ $? -le 2 ] || crashed=$((crashed + 1))
	{ head -c 24 "$rxe"; head -c $((RANDOM % 4096)) /dev/urandom; } >"$dir/g.pcap"
	check "$dir/g.pcap"
	[ $? -le 2 ] || crashed=$((crashed + 1))
done
[ $crashed = 0 ] && pass "garbage: 120 files, no crash" ||
	fail "garbage: $crashed crashes"
check "$dir/missing.pcap"
rc=$?
[ $rc = 2 ] && pass "missing file: exit 2" || fail "missing file: exit $rc"

# perftest over ibemu, every operation as packets (IBEMU_CMA=0).
SC_OPTS="-d ibemu0 -i 1 -F"
export IBEMU_CMA=0 IBEMU_PCAP="$dir/perf-%p.pcap"
sc_check "echo both exited 0" "ib_send_bw" ib_send_bw -n 5 -s 2050 -m 1024
sc_check "echo both exited 0" "ib_write_bw" ib_write_bw -n 5 -s 2050 -m 1024
sc_check "echo both exited 0" "ib_read_bw" ib_read_bw -n 5 -s 2050 -m 1024
sc_check "echo both exited 0" "ib_atomic_bw" ib_atomic_bw -n 5
unset IBEMU_PCAP IBEMU_CMA
check "$dir"/perf-*.pcap
rc=$?
good=$(grep -o '[0-9]* ICRC good' "$dir/check.out" | awk '{ n += $1 } END { print n + 0 }')
if [ $rc = 0 ] && [ "$good" -gt 0 ]; then
	pass "perftest over ibemu: $good packets good"
else
	fail "perftest over ibemu: $(grep -v ' 0 bad' "$dir/check.out" | head -n 5)"
fi
if command -v tshark >/dev/null; then
	for f in "$dir"/perf-*.pcap "$rxe"; do
		all=$(tshark -r "$f" 2>/dev/null | wc -l)
		ib=$(tshark -r "$f" -Y infiniband 2>/dev/null | wc -l)
		[ "$all" -gt 0 ] && [ "$ib" = "$all" ] &&
			pass "tshark: ${f##*/}: $ib InfiniBand packets" ||
			fail "tshark: ${f##*/}: $ib of $all InfiniBand packets"
	done
else
	echo "note: tshark is not installed: dissection not checked"
fi
finish
