#!/bin/bash
# gloo's collectives over its ibverbs transport across two nodes (network
# namespaces with their own /dev/shm, tests/lib/netns-lib.sh, IBEMU_NET=1):
# the ranks alternate between node 1 and node 2, so every ring and every
# halving-doubling step crosses the fabric; 2, 4 and 8 ranks, the sizes
# and checks of tests/local/gloo.sh.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/netns-lib.sh"
. "$(dirname "$0")/../lib/gloo-lib.sh"
need timeout
gloo_need
netns_setup 2 --own-shm

# Rank r in node r % 2 + 1.
gloo_start_net()
{
	local node=$(($1 % 2 + 1))
	shift
	netns_bg "$node" timeout "$GLOO_SECS" "$IBEMU" run -- "$@"
	GLOO_PID=$NETNS_PID
}

gloo_ranks 2 4096 16777216 gloo_start_net
gloo_ranks 4 4096 16777216 gloo_start_net
gloo_ranks 8 4096 16777216 gloo_start_net
finish
