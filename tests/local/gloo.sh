#!/bin/bash
# gloo's collectives over its ibverbs transport on ibemu0 (Debian's
# libgloo-dev, tests/progs/gloo_collectives): AllreduceRing,
# AllreduceRingChunked, AllreduceHalvingDoubling, BroadcastOneToAll from
# every root, AllgatherRing and BarrierAllToAll, with 2, 4 and 8 ranks in
# as many processes of one node, every element of every result checked.
# Buffers from 4 KiB to 16 MiB (8 ranks take about 8 s on two cores).
# gloo posts its receives in INIT and starts sending as soon as its side
# is in RTS, while the peer may still be in INIT: what that peer drops
# is resent.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/gloo-lib.sh"
need timeout
gloo_need
gloo_ranks 2 4096 16777216 gloo_start_local
gloo_ranks 4 4096 16777216 gloo_start_local
gloo_ranks 8 4096 16777216 gloo_start_local
finish
