#!/bin/bash
# The real programs of the test suite under the checking mode
# (emulator/base/check.c, ibemu(1) CHECKS): ibverbs-utils, perftest,
# rdmacm-utils, UCX, Open MPI and pyverbs, short runs over ibemu0 with
# IBEMU_CHECK=1, each process's report in a file of its own.  Every
# process must end with a summary; every report must be listed in the
# allow-list below with the program's bug it shows, and an unexplained
# report fails the check (and is printed).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/serverclient.sh"
need ibv_rc_pingpong
need timeout
dir=$(mktemp -d)
trap 'sc_cleanup; rm -rf "$dir"; ibemu_cleanup' EXIT
secs=${IBEMU_TEST_TIMEOUT:-60}
port=$((24000 + ($$ % 200) * 32))
# `ibemu run` passes the environment on: every process reports.
export IBEMU_CHECK=1

# The allow-list: allow PROGRAM KIND MESSAGE-ERE REASON.  A report of
# KIND (check.c's names) by PROGRAM whose first line matches MESSAGE-ERE
# is a bug of PROGRAM, which REASON states with its evidence; it is
# printed as a note.  Any other report fails.
allow_prog=() allow_kind=() allow_re=() allow_why=() allow_used=()
allow()
{
	allow_prog+=("$1") allow_kind+=("$2") allow_re+=("$3")
	allow_why+=("$4") allow_used+=(0)
}

# judge PROGRAM KIND MESSAGE BLOCK: one report; UNEXPLAINED counts the
# ones no entry allows.
UNEXPLAINED=0
judge()
{
	local prog=$1 kind=$2 msg=$3 block=$4 i
	for i in "${!allow_prog[@]}"; do
		[ "${allow_prog[$i]}" = "$prog" ] || continue
		[ "${allow_kind[$i]}" = "$kind" ] || continue
		[[ $msg =~ ${allow_re[$i]} ]] || continue
		allow_used[$i]=1
		echo "note: $prog: $kind, allowed: ${allow_why[$i]}"
		return
	done
	UNEXPLAINED=$((UNEXPLAINED + 1))
	echo "unexplained report of $prog:"
	printf '%s\n' "$block" | sed 's/^/    /'
}

# scan_log PROGRAM FILE: judge each report of FILE; SUMMARIES counts
# the processes' summaries ("no misuse found" or "summary: ...").
SUMMARIES=0
scan_log()
{
	local prog=$1 f=$2 line kind= msg= block= head_re cont_re
	head_re='^==[0-9]+== ibemu check: ([a-z-]+): (.*)$'
	cont_re='^==[0-9]+==   '
	while IFS= read -r line || [ -n "$line" ]; do
		if [ -n "$kind" ] && [[ $line =~ $cont_re ]]; then
			block+=$'\n'"$line"
			continue
		fi
		[ -n "$kind" ] && judge "$prog" "$kind" "$msg" "$block"
		kind=
		if [[ $line =~ ^==[0-9]+==\ ibemu\ check:\ (no\ misuse\ found|summary:) ]]; then
			SUMMARIES=$((SUMMARIES + 1))
		elif [[ $line =~ $head_re ]]; then
			kind=${BASH_REMATCH[1]} msg=${BASH_REMATCH[2]} block=$line
		fi
	done <"$f"
	[ -n "$kind" ] && judge "$prog" "$kind" "$msg" "$block"
}

# The judge itself: a report nobody allows counts, an allowed one does
# not, and a summary is seen.
mkdir "$dir/self"
cat >"$dir/self/check-1.log" <<'EOF'
==1== ibemu check: rnr: QP 0x11 received a SEND with no receive posted
==1==   rule: a SEND arrived with no receive posted
==1==   at:
==1==     #0 0x1 in main+0x1 (prog)
==1== ibemu check: summary: rnr 1
EOF
UNEXPLAINED=0 SUMMARIES=0
scan_log self-test "$dir/self/check-1.log" >"$dir/self/out"
[ $UNEXPLAINED = 1 ] && [ $SUMMARIES = 1 ] &&
	grep -q "#0 0x1 in main" "$dir/self/out" &&
	pass "an unexplained report is counted and printed" ||
	fail "the judge missed an unexplained report ($UNEXPLAINED, $SUMMARIES)"
allow self-test rnr '^QP 0x[0-9a-f]+ received' "the judge's own test"
UNEXPLAINED=0 SUMMARIES=0
scan_log self-test "$dir/self/check-1.log" >"$dir/self/out"
[ $UNEXPLAINED = 0 ] && pass "an allowed report is not counted" ||
	fail "the judge counted an allowed report"

# checked PROCS NAME PROGRAM: before a run of PROGRAM, IBEMU_CHECK_LOG
# names a directory of its own; after it, verdict judges its logs.
runs=0
checked()
{
	runs=$((runs + 1))
	RUN_DIR=$dir/run-$runs RUN_PROCS=$1 RUN_NAME=$2 RUN_PROG=$3
	mkdir "$RUN_DIR"
	export IBEMU_CHECK_LOG=$RUN_DIR/check-%p.log
}

# verdict: RUN_PROCS processes at least left a report file each (more
# when a client was run again, sc_pair), each with its summary, and each
# report is allowed.  A run that failed is the other tests'
# business (ibverbs-utils.sh, perftest.sh...): its logs are still judged.
verdict()
{
	local f n=0
	UNEXPLAINED=0 SUMMARIES=0
	for f in "$RUN_DIR"/check-*.log; do
		[ -e "$f" ] || continue
		n=$((n + 1))
		scan_log "$RUN_PROG" "$f"
	done
	if [ $UNEXPLAINED != 0 ]; then
		fail "$RUN_NAME: $UNEXPLAINED unexplained report(s) under --check"
	elif [ $n -lt "$RUN_PROCS" ] || [ $SUMMARIES != $n ]; then
		fail "$RUN_NAME: $n report file(s), $SUMMARIES summaries, of $RUN_PROCS process(es) at least"
	else
		pass "$RUN_NAME under --check: every report explained ($(cat "$RUN_DIR"/check-*.log | grep -c ' ibemu check: no misuse found') of $n clean)"
	fi
	unset IBEMU_CHECK_LOG
}

# pair NAME SUMMARY PROGRAM [ARGS...]: sc_check of serverclient.sh
# under the checking mode.
pair()
{
	local name=$1 summary=$2
	shift 2
	checked 2 "$name" "$1"
	sc_check "$summary" "$name" "$@"
	verdict
}

# --- The allow-list: what the programs do that the checks rightly see ---
# udaddy (rdma-core librdmacm/examples/udaddy.c): its client's
# post_sends(node, 0) posts message_count (10) sends with send_flags 0
# on a QP created with sq_sig_all 0 and max_send_wr = message_count:
# a full send queue of unsignaled work requests, whose slots no
# completion ever frees; it then polls for receives only and exits, so
# only its next post would fail (ENOMEM on hardware).  A latent bug.
allow udaddy unsignaled-full '^QP 0x[0-9a-f]+: [0-9]+ unsignaled work requests in a row' \
	"udaddy's client fills its send queue with unsignaled sends (post_sends(node, 0), max_send_wr = message_count, sq_sig_all 0)"
# rdma-core's test_mr commits remote access errors on purpose and asserts
# them: test_mr_rereg_access_bad_flow re-registers the server's MR
# without IBV_ACCESS_REMOTE_WRITE and writes to it; test_invalidate_mw_type1
# and test_mw_type2_invalidate_{local,remote,dealloc} write through a
# window they have just invalidated or freed (each in assertRaisesRegex
# 'Remote access error').  Not bugs: the tests of an error status.
allow pyverbs remote-access 'registered without IBV_ACCESS_REMOTE_WRITE$' \
	"test_mr_rereg_access_bad_flow writes to an MR re-registered without remote write, on purpose"
allow pyverbs remote-access 'a memory window that is not bound' \
	"test_mr's MW invalidate/dealloc tests write through an invalidated window, on purpose"

# ibv_srq_pingpong (rdma-core libibverbs/examples/srq_pingpong.c, main):
# its loop posts a QP's next send whenever scnt < iters, on each of its
# num_qp QPs, but scnt counts send completions over all of them and the
# loop ends once scnt and rcnt reach iters: sends posted in the last
# round on other QPs are still outstanding when pp_close_ctx destroys
# the QPs, never polled.  Whether one is left depends on timing.
allow ibv_srq_pingpong destroy-qp-busy '^QP 0x[0-9a-f]+ destroyed with [0-9]+ send work requests? outstanding, the first wr_id 0x2$' \
	"srq_pingpong.c's main ends its loop on the total of send completions while the last round's sends on other QPs are outstanding (PINGPONG_SEND_WRID 2)"
# ib_send_bw (perftest src/perftest_resources.c): create_cqs sets
# need_recv_cq for every SEND test and create_reg_cqs makes ctx->recv_cq,
# but destroy_ctx destroys it only when tst == LAT, machine == SERVER,
# duplex or ctx->channel: the bandwidth client without -e never does and
# closes the device with it open (a run under gdb sees two
# ibv_create_cq and one ibv_destroy_cq).
allow ib_send_bw destroy-busy '^ibv_close_device of context 0x[0-9a-f]+ with 0 PDs, 1 CQs, 0 QPs, 0 SRQs and 0 AHs still open$' \
	"perftest's destroy_ctx skips the SEND client's recv_cq (BW, not duplex, no events) that create_cqs made, then ibv_close_device"
allow ib_send_bw leak '^1 CQs not destroyed$' \
	"the same recv_cq of the ib_send_bw client, never destroyed (perftest_resources.c destroy_ctx)"
# ibv_rc_pingpong and ibv_uc_pingpong -c (rdma-core
# libibverbs/examples/rc_pingpong.c, uc_pingpong.c, main): the client
# posts its rx_depth receives into ctx->buf (pp_post_recv at start) and
# then, for -c, writes the pattern it sends into the same ctx->buf
# ("ctx->buf[i] = i / page_size % sizeof(char)") before its first send.
allow ibv_rc_pingpong recv-buffer-written '^QP 0x[0-9a-f]+ wr_id 0x1: SGE 0 .* of a receive changed between ibv_post_recv and the placement' \
	"rc_pingpong.c's client writes its -c pattern into ctx->buf, where its rx_depth receives (PINGPONG_RECV_WRID 1) are already posted"
allow ibv_uc_pingpong recv-buffer-written '^QP 0x[0-9a-f]+ wr_id 0x1: SGE 0 .* of a receive changed between ibv_post_recv and the placement' \
	"uc_pingpong.c's client writes its -c pattern into ctx->buf, where its receives (PINGPONG_RECV_WRID 1) are already posted"
allow ibv_ud_pingpong recv-buffer-written '^QP 0x[0-9a-f]+ wr_id 0x1: SGE 0 .* of a receive changed between ibv_post_recv and the placement' \
	"ud_pingpong.c's client writes its -c pattern into ctx->buf + 40, where its receives (PINGPONG_RECV_WRID 1) are already posted"
# rdma-core's tests/utils.py traffic(): each round posts the server's
# receive into server.mr (post_recv) and then get_send_elements writes
# the reply into the same MR (mem_write) before sending it; the client
# likewise.
allow pyverbs recv-buffer-written '^QP 0x[0-9a-f]+ wr_id 0: SGE 0 .* of a receive changed between ibv_post_recv and the placement' \
	"tests/utils.py traffic() writes each reply (get_send_elements, mem_write) into the MR its receive was just posted in"
# UCX's rc_verbs iface cleanup (the stack: ucp_worker_destroy,
# ucs_mpool_cleanup, uct_iface_mp_chunk_release, uct_mem_free) frees its
# receive descriptors' chunk while its QP still has receives posted in
# it; the region is still registered, kept by UCX's registration cache.
allow ucx_perftest unmap-registered '^free\(0x[0-9a-f]+\) of memory still registered as MR lkey 0x[0-9a-f]+ .*, and wr_id 0x[0-9a-f]+ on QP 0x[0-9a-f]+ uses it$' \
	"UCX's iface cleanup frees its receive pool's chunk (uct_iface_mp_chunk_release) before its QP and the receives posted in it are destroyed"
# rdma-core's test_cq_events (tests/test_cq_events.py): test_cq_events_rc
# and _ud keep their players in local variables and never close them;
# Python frees each player's attributes when the test returns, the MR
# (tests/base.py init_resources makes it before the QPs, and nothing
# else holds it) before the QPs, whose receives utils.traffic reposted
# after each message.
allow pyverbs dereg-in-flight 'deregistered while wr_id 0 on the receive queue of QP' \
	"test_cq_events's players are freed by Python, their MR before the QPs that still hold posted receives"
allow pyverbs unmap-registered '^free\(0x[0-9a-f]+\) of memory still registered as MR lkey 0x[0-9a-f]+ .*, and wr_id 0 on QP 0x[0-9a-f]+ uses it$' \
	"the same players: Python frees the MR's buffer before the QPs whose receives utils.traffic reposted in it"

# --- ibverbs-utils ---
checked 1 "ibv_devinfo" ibv_devinfo
timeout -k 5 "$secs" "$IBEMU" run --check -- ibv_devinfo -d ibemu0 -v \
	>"$dir/devinfo.out" 2>&1 &&
	pass "ibv_devinfo: $(grep -m1 'state:' "$dir/devinfo.out" | tr -s ' \t' ' ')" ||
	fail "ibv_devinfo: exit $?"
verdict

SC_OPTS="-d ibemu0"
bytes='grep -m1 "bytes in" "$dir/client.out"'
pair "ibv_rc_pingpong" "$bytes" ibv_rc_pingpong -n 200 -c
pair "ibv_rc_pingpong events" "$bytes" ibv_rc_pingpong -n 200 -e -c
pair "ibv_uc_pingpong" "$bytes" ibv_uc_pingpong -n 200 -c
pair "ibv_ud_pingpong" "$bytes" ibv_ud_pingpong -n 200 -c
pair "ibv_srq_pingpong" "$bytes" ibv_srq_pingpong -n 100 -q 4 -c

# --- perftest ---
SC_OPTS="-d ibemu0 -i 1 -F"
result="awk '/#bytes/ { getline; \$1 = \$1; print; exit }' \"\$dir/client.out\""
if command -v ib_send_bw >/dev/null; then
	pair "ib_send_bw" "$result" ib_send_bw -n 500 -s 4096
	pair "ib_write_bw" "$result" ib_write_bw -n 500 -s 4096
	pair "ib_read_bw" "$result" ib_read_bw -n 500 -s 4096
	pair "ib_atomic_bw" "$result" ib_atomic_bw -n 500
	pair "ib_send_lat" "$result" ib_send_lat -n 500 -s 8
else
	echo "note: perftest is not installed"
fi

# --- rdmacm-utils, meeting through the RDMA CM (sc_cm_pair) ---
# cm NAME PROGRAM SERVER-RE CLIENT-RE SERVER-ARGS... ::: CLIENT-ARGS...
cm()
{
	local name=$1 prog=$2 sre=$3 cre=$4
	shift 4
	if ! command -v "$prog" >/dev/null; then
		echo "note: $prog is not installed"
		return
	fi
	checked 2 "$name" "$prog"
	if sc_cm_pair "$dir" "$secs" "$@" &&
	   grep -q "$sre" "$dir/server.out" && grep -q "$cre" "$dir/client.out"
	then
		pass "$name: done"
	elif grep -q "$cre" "$dir/client.out" &&
	     grep -q '^rdma_get_cm_event: Bad file descriptor$' \
		"$dir/server.out" "$dir/client.out"; then
		# rping of rdma-core 44's exit race, after its pings
		# (tests/debian/rdmacm.sh): the reports are still judged.
		echo "note: $name: its own exit race after the last ping"
	else
		sc_fail_pair "$name"
	fi
	verdict
}
cm "rping" rping "server DISCONNECT" "ping data: rdma-ping-9:" \
	rping -s -a 127.0.0.1 -p 7601 -v -C 10 ::: \
	rping -c -a 127.0.0.1 -p 7601 -v -C 10
cm "udaddy" udaddy "" "return status 0" udaddy ::: udaddy -s 127.0.0.1
cm "ucmatose" ucmatose "disconnected" "test complete" \
	ucmatose -p 7602 -c 2 ::: ucmatose -p 7602 -c 2 -s 127.0.0.1

# --- UCX: ucx_perftest over rc_verbs, and ucp over rc ---
ucx()
{
	local name=$1
	shift
	checked 2 "$name" ucx_perftest
	port=$(sc_pick_port $((port + 1)))
	if sc_pair "$dir" "$secs" "$port" \
		"$IBEMU" run -- ucx_perftest -p "$port" "$@" ::: \
		"$IBEMU" run -- ucx_perftest -p "$port" "$@" 127.0.0.1 &&
	   grep -q "^Final:" "$dir/client.out"; then
		pass "$name: $(grep '^Final:' "$dir/client.out" | tr -s ' ')"
	else
		sc_fail_pair "$name"
	fi
	verdict
}
if command -v ucx_perftest >/dev/null; then
	ucx "ucx_perftest am_lat rc_verbs" -t am_lat -x rc_verbs \
		-d ibemu0:1 -n 2000
	UCX_TLS=rc,self UCX_NET_DEVICES=ibemu0:1 \
		ucx "ucx_perftest ucp tag_lat rc" -t tag_lat -n 2000
else
	echo "note: UCX is not installed"
fi

# --- Open MPI: two ranks of tests/progs/mpi_pingpong.c on pml ucx ---
if command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
   mpicc -O2 -o "$dir/mpi_pingpong" \
	"$IBEMU_SRCDIR/tests/progs/mpi_pingpong.c" 2>"$dir/mpicc.out"; then
	as_root=
	[ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
	checked 2 "mpirun -np 2, pml ucx rc" mpi_pingpong
	out=$(timeout 180 mpirun $as_root --oversubscribe -np 2 \
		-x LD_PRELOAD="$IBEMU_LIB_PATH" -x IBEMU_NODE -x IBEMU_CHECK \
		-x IBEMU_CHECK_LOG --mca pml ucx -x UCX_TLS=rc,self \
		-x UCX_NET_DEVICES=ibemu0:1 "$dir/mpi_pingpong" 2>&1)
	echo "$out" | grep -q "^PASS:" &&
		pass "mpirun -np 2, pml ucx rc: $(echo "$out" | grep '^PASS:')" ||
		{ fail "mpirun -np 2, pml ucx rc"; echo "$out" | tail -n 10; }
	verdict
else
	echo "note: no Open MPI to build tests/progs/mpi_pingpong.c with"
fi

# --- pyverbs: a few of rdma-core's tests, in one process ---
pysrc=/usr/share/doc/rdma-core/tests
if [ -x /usr/bin/python3 ] && [ -f "$pysrc/run_tests.py" ]; then
	cp -r "$pysrc" "$dir/pytests"
	gunzip -f "$dir"/pytests/*.gz 2>/dev/null
	checked 1 "pyverbs tests" pyverbs
	(cd "$dir/pytests" && timeout 300 "$IBEMU" run -- /usr/bin/python3 \
		run_tests.py --dev ibemu0 test_pd test_cq test_qp test_mr \
		test_cq_events) >"$dir/py.out" 2>&1
	rc=$?
	[ $rc = 0 ] && pass "pyverbs tests: $(grep -E '^(OK|Ran)' "$dir/py.out" | tr '\n' ' ')" ||
		{ fail "pyverbs tests: exit $rc"; tail -n 10 "$dir/py.out"; }
	verdict
else
	echo "note: no pyverbs tests in $pysrc"
fi

# The conformance suite under --check is conformance-check.sh's, which
# names each report's test (tests/lib/check_judge.py): its forked
# children (qp_create/null_cq's, peer_run.c's peers) end by _exit(2),
# which runs no atexit(3) handler and so writes no summary; the programs
# here all end by exit(3) or a return from main.

for i in "${!allow_prog[@]}"; do
	[ "${allow_prog[$i]}" = self-test ] && continue
	[ "${allow_used[$i]}" = 1 ] ||
		echo "note: allowed but not reported this time: ${allow_prog[$i]} ${allow_kind[$i]}"
done
finish
