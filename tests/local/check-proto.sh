#!/bin/bash
# The checking mode's queue, protocol and thread checks: each misuse of
# tests/progs/check_proto.c is reported under `ibemu run --check` with its
# kind (and no other but what the misuse leads to), the object, its rule
# and (for checks at post) a stack naming the offending function; each
# correct twin is reported clean.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/check-lib.sh"
P=$IBEMU_BUILDDIR/tests/progs/check_proto

check_cases "$P" <<'CASES'
sq-overflow sq-overflow QP.0x[0-9a-f]*:.*max_send_wr.4 ibv_post_send(3) post_write_chain
rq-overflow rq-overflow QP.0x[0-9a-f]*:.*max_recv_wr.4 ibv_post_recv(3) post_recv_chain
unsignaled unsignaled-full,destroy-qp-busy QP.0x[0-9a-f]*:.4.unsignaled IBV_SEND_SIGNALED post_unsignaled
cq-overflow cq-overflow CQ.0x[0-9a-f]*:.*2.entries ibv_create_cq(3) verbs_open
rnr rnr QP.0x[0-9a-f]*:.a.SEND.from.QPN.*waited.[0-9.]*.ms,.[0-9]*.RNR.NAKs*.of.min_rnr_timer.1.(10.us),.until.a.receive.was.posted IBA.9.7.5.2.8 -
remote-access remote-access QP.0x[0-9a-f]*.refused.*without.IBV_ACCESS_REMOTE_WRITE IBA.9.7.5.2.5 -
atomic-align atomic-align QP.0x[0-9a-f]*:.ATOMIC_FETCH_AND_ADD.*not.8-byte IBA.9.4.5 fetch_add_unaligned
inline-size inline-size QP.0x[0-9a-f]*:.IBV_SEND_INLINE.of.1024.*max_inline_data.64 max_inline_data send_inline_too_big
qkey qkey QP.0x[0-9a-f]*.(Q_Key.0x2222).*Q_Key.0x3333 IBA.10.2.5 -
ud-ah-pd ud-ah-pd QP.0x[0-9a-f]*:.a.UD.send.through.AH IBA.10.2.3 ud_send
threads-cq threads-cq CQ.0x[0-9a-f]*:.a.second.thread ibv_create_td(3) poll_from_two_threads
srq-empty srq-empty SRQ.0x[0-9a-f]*:.QP.0x[0-9a-f]*.took.its.last.receive,.no.srq_limit IBV_EVENT_SRQ_LIMIT_REACHED -
threads-qp threads-qp QP.0x[0-9a-f]*:.a.second.thread.entered.ibv_post_send ibv_create_td(3) post_from_two_threads
CASES
finish
