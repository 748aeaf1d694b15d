#!/bin/bash
# Run the manual's SRQ program (examples/srq_example) over ibemu: a server
# on ADDRESS and a client to it, each bounded by a timeout, meeting
# through the RDMA CM.  Prints both outputs and exits non-zero when either
# side failed.  Run from the top of the build tree:
#
#   bash examples/run-srq-example.sh [-a ADDRESS] [-w WRAPPER]
#        [-S 'server options'] [-C 'client options'] [-- options for both]
#
# ADDRESS: the server's (default 127.0.0.1).  WRAPPER runs each process
# (default "IBEMU run --"; "none" for a real device).  -S and -C: options
# for one side only (the faults: -S '-x drop', -C '-x size'); the rest go
# to both sides (-q, -m, -n, -s, -t): see examples/srq_example.c.
#
# Environment: IBEMU_BUILDDIR (build tree, default the current directory if
# it holds the ibemu command, else this script's parent), SRQ_EXAMPLE_PORT
# (port, default 17000 + PID % 1000), SRQ_EXAMPLE_TIMEOUT (seconds per
# process, default 60).
exec bash "$(dirname "$0")/run-cm-example.sh" srq 17000 "$@"
