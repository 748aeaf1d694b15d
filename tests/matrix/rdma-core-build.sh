#!/bin/bash
# Build rdma-core releases from their sources into a cache, once each:
# only libibverbs, librdmacm and the example programs the matrix runs
# (tests/matrix/rdma-core.sh).  A release is complete when its READY file
# exists; READY holds the path of its libibverbs.so.1, so another process
# can wait for it.
#
#   tests/matrix/rdma-core-build.sh [VERSION...]     (default: the matrix's)
#
# VERSION is a tag (v61.0), a release number (61, 61.0) or a branch
# (main).  Environment:
#   RDMA_CORE_GIT    a git URL, or the path of a local clone or bare mirror
#                    (default https://github.com/linux-rdma/rdma-core.git)
#   RDMA_CORE_CACHE  the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/ibemu/rdma-core)
#   RDMA_CORE_JOBS   each build's -j (default 2)
#   RDMA_CORE_CONFIGURE_SECS, RDMA_CORE_BUILD_SECS
#                    bounds on one configure (600) and one build (1800)
set -u
. "$(dirname "$0")/rdma-core-lib.sh"

[ $# -gt 0 ] || set -- $RDMA_CORE_VERSIONS
rc=0
for v in "$@"; do
	rdma_core_build "$(rdma_core_tag "$v")" || rc=1
done
exit $rc
