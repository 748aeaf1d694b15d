#!/bin/bash
# Run the manual's APM program (examples/apm_example) over ibemu, on a
# two-port ibemu0 (IBEMU_PORTS=2, unless already set): a server
# on ADDRESS and a client to it, each bounded by a timeout, meeting
# through the RDMA CM.  Prints both outputs and exits non-zero when either
# side failed.  Run from the top of the build tree:
#
#   bash examples/run-apm-example.sh [-a ADDRESS] [-w WRAPPER]
#        [-S 'server options'] [-C 'client options'] [-- options for both]
#
# ADDRESS: the server's (default 127.0.0.1).  WRAPPER runs each process
# (default "IBEMU run --"; "none" for a real device).  -S and -C: options
# for one side only; the rest go to both sides (-n): see
# examples/apm_example.c.
#
# Environment: IBEMU_BUILDDIR (build tree, default the current directory if
# it holds the ibemu command, else this script's parent), APM_EXAMPLE_PORT
# (port, default 18000 + PID % 1000), APM_EXAMPLE_TIMEOUT (seconds per
# process, default 60).
export IBEMU_PORTS=${IBEMU_PORTS:-2}
exec bash "$(dirname "$0")/run-cm-example.sh" apm 18000 "$@"
