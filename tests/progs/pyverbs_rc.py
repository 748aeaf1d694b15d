#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""
A verbs program written with rdma-core's Python binding (pyverbs): open
the device, a PD, an MR, a CQ and two RC QPs connected to each other
(INIT, RTR, RTS, IBA 10.3.1), then a SEND and an RDMA WRITE with their
data checked and their completions' status and opcode checked.

Exit: 0 pass, 1 fail, 77 skip (no pyverbs, no device).
"""
import sys
import time

try:
    import pyverbs.enums as e
    from pyverbs.addr import AHAttr
    from pyverbs.cq import CQ
    from pyverbs.device import Context, get_device_list
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, RecvWR, SendWR
except ImportError as exc:
    print(f"SKIP: pyverbs is not available: {exc}")
    sys.exit(77)

LEN = 65536
PSN = 0x1234


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def poll(cq, what, timeout=5.0):
    """The next completion of cq, within timeout seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        time.sleep(0.0005)
    fail(f"no completion for {what} within {timeout} s")


def connect(qp, port_attr, remote_qpn):
    attr = QPAttr(qp_state=e.IBV_QPS_INIT, cur_qp_state=e.IBV_QPS_RESET)
    attr.pkey_index = 0
    attr.port_num = 1
    attr.qp_access_flags = (e.IBV_ACCESS_LOCAL_WRITE |
                            e.IBV_ACCESS_REMOTE_WRITE)
    qp.to_init(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTR)
    attr.path_mtu = e.IBV_MTU_1024
    attr.dest_qp_num = remote_qpn
    attr.rq_psn = PSN
    attr.max_dest_rd_atomic = 1
    attr.min_rnr_timer = 12
    attr.ah_attr = AHAttr(dlid=port_attr.lid, port_num=1)
    qp.to_rtr(attr)
    attr = QPAttr(qp_state=e.IBV_QPS_RTS)
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    attr.sq_psn = PSN
    attr.max_rd_atomic = 1
    qp.to_rts(attr)


def main():
    names = [d.name.decode() for d in get_device_list()]
    if not names:
        print("SKIP: no RDMA device")
        sys.exit(77)
    ctx = Context(name=names[0])
    port = ctx.query_port(1)
    pd = PD(ctx)
    access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
    src, dst = MR(pd, LEN, access), MR(pd, LEN, access)
    cq = CQ(ctx, 16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1)
    init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap,
                      sq_sig_all=1)
    a, b = QP(pd, init), QP(pd, init)
    connect(a, port, b.qp_num)
    connect(b, port, a.qp_num)

    # SEND: a's buffer into the receive b posted.
    msg = bytes((i * 7 + 3) & 0xff for i in range(LEN))
    src.write(msg, LEN)
    b.post_recv(RecvWR(wr_id=2, num_sge=1,
                       sg=[SGE(dst.buf, LEN, dst.lkey)]))
    a.post_send(SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                       sg=[SGE(src.buf, LEN, src.lkey)]))
    got = {}
    for _ in range(2):
        wc = poll(cq, "the SEND")
        got[wc.wr_id] = wc
    if got.get(1) is None or got[1].status != e.IBV_WC_SUCCESS or \
            got[1].opcode != e.IBV_WC_SEND:
        fail(f"SEND completion: {got.get(1)}")
    if got.get(2) is None or got[2].status != e.IBV_WC_SUCCESS or \
            got[2].opcode != e.IBV_WC_RECV or got[2].byte_len != LEN:
        fail(f"receive completion: {got.get(2)}")
    if dst.read(LEN, 0) != msg:
        fail("the received data differ from what was sent")

    # RDMA WRITE: new data straight into b's MR.
    msg = bytes((i * 13 + 1) & 0xff for i in range(LEN))
    src.write(msg, LEN)
    wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(src.buf, LEN, src.lkey)])
    wr.set_wr_rdma(dst.rkey, dst.buf)
    a.post_send(wr)
    wc = poll(cq, "the RDMA WRITE")
    if wc.wr_id != 3 or wc.status != e.IBV_WC_SUCCESS or \
            wc.opcode != e.IBV_WC_RDMA_WRITE:
        fail(f"RDMA WRITE completion: {wc}")
    if dst.read(LEN, 0) != msg:
        fail("the written data differ from the source")
    print(f"PASS: pyverbs RC SEND and RDMA WRITE of {LEN} bytes on "
          f"{names[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
