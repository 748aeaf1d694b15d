#!/bin/bash
# The run trace (IBEMU_TRACE, doc/trace.md) of the manual's RC example:
# exactly its three operations, each with its packets and completions in
# order (tests/lib/trace_rc.py); a run with dropped packets shows the
# drop, the retry and the resent packet; the trace and the pcap of one
# run name the same packets; IBEMU_TRACE_MAX bounds a process's events.
. "$(dirname "$0")/../lib/lib.sh"
: "${IBEMU_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
need python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"; ibemu_cleanup' EXIT
check=$IBEMU_SRCDIR/tests/lib/trace_rc.py

# rc_example OUT [ENV...]: the example over ibemu under ENV.
rc_example() {
	local out=$1
	shift
	env "$@" IBEMU_BUILDDIR=$IBEMU_BUILDDIR \
		RC_EXAMPLE_TIMEOUT=${IBEMU_TEST_TIMEOUT:-60} \
		bash "$IBEMU_SRCDIR/examples/run-rc-example.sh" >"$out" 2>&1
}

rc_example "$dir/plain.out" IBEMU_TRACE="$dir/rc.trace" &&
	pass "the example ran with IBEMU_TRACE" ||
	{ cat "$dir/plain.out"; fail "the example failed under IBEMU_TRACE"; }
if python3 "$check" "$dir/rc.trace" >"$dir/check.out"; then
	pass "the trace holds the three operations with their packets and completions in order"
else
	fail "the trace of the RC example:"
fi
sed 's/^/    /' "$dir/check.out"
bad=$(grep -cvE '^t=[0-9]+ node=[!-~]+ pid=[0-9]+ ev=[a-z_]+( [a-z_]+=[!-~]+)*$' "$dir/rc.trace")
[ "$bad" = 0 ] && pass "every line has the format of doc/trace.md" ||
	fail "$bad line(s) not in the format of doc/trace.md"

# Dropped packets (IBEMU_FAULTS): drop decisions follow the QPNs the run
# gets, so a few seeds are tried until one drops a packet.
faulted=
for seed in 1 2 3 4 5 6; do
	rm -f "$dir/f.trace"
	rc_example "$dir/f.out" IBEMU_TRACE="$dir/f.trace" \
		IBEMU_FAULTS="drop:0.3,seed=$seed" || continue
	grep -q " ev=drop " "$dir/f.trace" && { faulted=$seed; break; }
done
if [ -n "$faulted" ]; then
	if python3 "$check" "$dir/f.trace" --faulted >"$dir/fcheck.out"; then
		pass "seed $faulted: the drops, the retries and the resent packets are in the trace"
	else
		fail "seed $faulted: the faulted trace:"
	fi
	sed 's/^/    /' "$dir/fcheck.out"
else
	fail "no run with dropped packets completed (seeds 1 to 6)"
fi

# The pcap of the same run names the same packets, process by process.
if command -v tshark >/dev/null 2>&1; then
	rm -f "$dir"/both*
	rc_example "$dir/both.out" IBEMU_TRACE="$dir/both.trace" \
		IBEMU_PCAP="$dir/both-%p.pcap" || fail "the example with IBEMU_PCAP and IBEMU_TRACE"
	same=0 differ=0
	for pcap in "$dir"/both-*.pcap; do
		pid=${pcap##*-}
		pid=${pid%.pcap}
		tshark -r "$pcap" -T fields -e infiniband.bth.opcode \
			-e infiniband.bth.destqp -e infiniband.bth.psn 2>/dev/null |
			while read -r op qp psn; do echo "$op $((qp)) $psn"; done >"$dir/pcap.$pid"
		awk -v pid="$pid" '
			BEGIN { split("RC_SEND_ONLY 4 RC_RDMA_WRITE_ONLY 10 RC_RDMA_READ_REQUEST 12 " \
				"RC_RDMA_READ_RESPONSE_ONLY 16 RC_ACKNOWLEDGE 17", a, " ")
				for (i = 1; i < 10; i += 2) code[a[i]] = a[i + 1] }
			$3 == "pid=" pid && $4 == "ev=tx" {
				for (i = 5; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
				print (f["op"] in code ? code[f["op"]] : f["op"]), f["dqp"], f["psn"]
			}' <(sort -t= -k2,2n "$dir/both.trace") >"$dir/trace.$pid"
		if [ -s "$dir/trace.$pid" ] && cmp -s "$dir/pcap.$pid" "$dir/trace.$pid"; then
			same=$((same + 1))
		else
			differ=$((differ + 1))
			diff "$dir/pcap.$pid" "$dir/trace.$pid" | head -5 | sed 's/^/    /'
		fi
	done
	[ "$same" = 2 ] && [ "$differ" = 0 ] &&
		pass "both processes: the pcap and the trace list the same packets (opcode, QP, PSN)" ||
		fail "pcap and trace: $same process(es) agree, $differ differ"
else
	echo "note: tshark is not installed: the pcap is not compared"
fi

# IBEMU_TRACE_MAX: a process stops after that many events and says so.
rc_example "$dir/max.out" IBEMU_TRACE="$dir/max.trace" IBEMU_TRACE_MAX=4 ||
	fail "the example with IBEMU_TRACE_MAX=4"
pids=$(awk '{ print $3 }' "$dir/max.trace" | sort -u | wc -l)
over=$(awk '{ n[$3]++ } END { for (p in n) if (n[p] != 5) c++; print c + 0 }' "$dir/max.trace")
full=$(grep -c " ev=trace_full events=4$" "$dir/max.trace")
[ "$pids" = 2 ] && [ "$over" = 0 ] && [ "$full" = 2 ] &&
	pass "IBEMU_TRACE_MAX=4: each process wrote 4 events and one trace_full" ||
	fail "IBEMU_TRACE_MAX=4: $pids processes, $over with another count than 5 lines, $full trace_full lines"

# ibemu trace -o: the server empties the file, the client appends (-a).
port=$((19000 + $$ % 500))
echo "a line of an earlier run" >"$dir/cmd.trace"
timeout "${IBEMU_TEST_TIMEOUT:-60}" "$IBEMU" trace -o "$dir/cmd.trace" -- \
	"$IBEMU_BUILDDIR/examples/rc_example" -d ibemu0 -p "$port" >"$dir/cmd-s.out" 2>&1 &
spid=$!
for _ in $(seq 100); do
	ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
	sleep 0.1
done
timeout "${IBEMU_TEST_TIMEOUT:-60}" "$IBEMU" trace -a -o "$dir/cmd.trace" -- \
	"$IBEMU_BUILDDIR/examples/rc_example" -d ibemu0 -p "$port" localhost >"$dir/cmd-c.out" 2>&1
crc=$?
wait "$spid"
src=$?
[ "$src" = 0 ] && [ "$crc" = 0 ] && ! grep -q "earlier run" "$dir/cmd.trace" &&
	python3 "$check" "$dir/cmd.trace" >/dev/null &&
	pass "ibemu trace -o then -a: one file with both processes' runs, emptied first" ||
	fail "ibemu trace -o/-a: server $src, client $crc; $(python3 "$check" "$dir/cmd.trace" | grep -m1 FAIL)"
"$IBEMU" trace -- true >/dev/null 2>&1
[ $? = 2 ] && pass "ibemu trace without -o is a usage error" || fail "ibemu trace without -o"

# An unwritable IBEMU_TRACE: the program still runs, one clear line.
rc_example "$dir/nowrite.out" IBEMU_TRACE="$dir/no/such/dir/x.trace" &&
	grep -q "IBEMU_TRACE: cannot open" "$dir/nowrite.out" &&
	pass "an unwritable IBEMU_TRACE is reported and the example still runs" ||
	fail "unwritable IBEMU_TRACE: $(grep -m1 IBEMU_TRACE "$dir/nowrite.out")"
finish
