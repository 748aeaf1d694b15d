#!/usr/bin/env python3
"""Check a run trace (doc/trace.md) of the manual's RC example.

usage: trace_rc.py TRACE [--faulted]

The example (manual 7.1): the server posts one SEND; the client, having
received it, posts an RDMA READ and then an RDMA WRITE.  Each work request
must appear as: its post, the request packet sent naming it, that packet
received by the peer QP, the response (ACK or READ response) sent and
received, and one successful completion, in that order; the SEND also
completes a receive at the client.  Without --faulted, no packet may be
lost and nothing may be resent; with it, at least one packet must be
dropped and the lost packet resent after a retry event (IBA 9.7.6.1.3).
Prints one "ok:" or "FAIL:" line per check; exits 1 if any failed.
"""
import sys

fails = 0


def check(ok, what):
    global fails
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        fails += 1


def parse(path):
    evs = []
    with open(path, encoding="ascii", errors="replace") as f:
        for n, line in enumerate(f):
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "t" in fields and "ev" in fields:
                fields["_n"] = n
                evs.append(fields)
    evs.sort(key=lambda e: int(e["t"]))
    return evs


def first(evs, start, pred):
    for i in range(start, len(evs)):
        if pred(evs[i]):
            return i
    return None


def main():
    faulted = "--faulted" in sys.argv[2:]
    evs = parse(sys.argv[1])
    posts = [i for i, e in enumerate(evs) if e["ev"] == "post_send"]
    ops = [evs[i]["op"] for i in posts]
    check(ops == ["SEND", "RDMA_READ", "RDMA_WRITE"],
          "exactly the three operations, in order: SEND, RDMA_READ, RDMA_WRITE (got %s)" % ops)
    if len(posts) != 3:
        return
    srv, cli = evs[posts[0]], evs[posts[1]]
    check(srv["pid"] != cli["pid"] and evs[posts[2]]["pid"] == cli["pid"],
          "the SEND is the server's, the READ and WRITE the client's")
    lanes = {(e["pid"], e["qp"]) for e in evs if e["ev"] == "qp_create"}
    check(len(lanes) == 2, "two QPs, one per process (got %d)" % len(lanes))
    request = {"SEND": "RC_SEND_ONLY", "RDMA_READ": "RC_RDMA_READ_REQUEST",
               "RDMA_WRITE": "RC_RDMA_WRITE_ONLY"}
    response = {"SEND": "RC_ACKNOWLEDGE", "RDMA_READ": "RC_RDMA_READ_RESPONSE_ONLY",
                "RDMA_WRITE": "RC_ACKNOWLEDGE"}
    for i in posts:
        p = evs[i]
        op, qp, pid = p["op"], p["qp"], p["pid"]

        def is_req(e, kind):
            return (e["ev"] == kind and e.get("sqp") == qp and
                    e.get("op") == request[op])
        tx = first(evs, i, lambda e: is_req(e, "tx") and e["pid"] == pid and
                   e.get("wr") == p["wr"])
        check(tx is not None, "%s: its request packet %s was sent naming wr %s" %
              (op, request[op], p["wr"]))
        if tx is None:
            continue
        psn, dqp = evs[tx]["psn"], evs[tx]["dqp"]
        rx = first(evs, tx, lambda e: is_req(e, "rx") and e["pid"] != pid and
                   e["psn"] == psn)
        check(rx is not None, "%s: the peer QP %s received it (psn %s)" % (op, dqp, psn))
        if rx is None:
            continue
        rtx = first(evs, rx, lambda e: e["ev"] == "tx" and e.get("sqp") == dqp and
                    e.get("op") == response[op] and e.get("aeth") == "ACK")
        check(rtx is not None, "%s: the responder sent %s" % (op, response[op]))
        if rtx is None:
            continue
        rrx = first(evs, rtx, lambda e: e["ev"] == "rx" and e["pid"] == pid and
                    e.get("dqp") == qp and e.get("op") == response[op] and
                    e["psn"] == evs[rtx]["psn"])
        check(rrx is not None, "%s: the requester received the %s" % (op, response[op]))
        if rrx is None:
            continue
        cqe = first(evs, rrx, lambda e: e["ev"] == "cqe" and e["pid"] == pid and
                    e.get("qp") == qp and e.get("op") == op.replace("RDMA_", "RDMA_"))
        check(cqe is not None and evs[cqe]["status"] == "SUCCESS",
              "%s: then its completion, status SUCCESS" % op)
        if op == "SEND":
            rcqe = first(evs, rx, lambda e: e["ev"] == "cqe" and e["pid"] != pid and
                         e.get("op") == "RECV")
            check(rcqe is not None and evs[rcqe]["status"] == "SUCCESS" and
                  evs[rcqe]["len"] == p["len"],
                  "SEND: the client's receive completed with its %s bytes" % p["len"])
    drops = [e for e in evs if e["ev"] == "drop"]
    retries = [e for e in evs if e["ev"] == "retry"]
    if not faulted:
        check(not drops and not retries, "no packet lost, nothing resent")
        return
    check(bool(drops), "packets were dropped (%d)" % len(drops))
    resent = 0
    for d in drops:
        key = (d["sqp"], d["dqp"], d["op"], d["psn"])
        later_tx = [e for e in evs if e["ev"] == "tx" and int(e["t"]) > int(d["t"]) and
                    (e["sqp"], e["dqp"], e["op"], e["psn"]) == key]
        retry = [e for e in retries if int(e["t"]) > int(d["t"])]
        if later_tx and retry:
            resent += 1
    check(resent > 0, "a dropped packet was sent again after a retry event")


main()
sys.exit(1 if fails else 0)
