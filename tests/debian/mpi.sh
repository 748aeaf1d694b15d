#!/bin/bash
# Open MPI over ibemu: a ping-pong with every byte checked
# (tests/progs/mpi_pingpong.c), two ranks: pml ucx on UCX's rc and ud
# transports, and pml ob1 on Open MPI's own verbs component (btl openib,
# which takes an InfiniBand port only with btl_openib_allow_ib set, and
# with self as the only other btl, so nothing else can carry the data).
. "$(dirname "$0")/../lib/lib.sh"
need mpicc
need mpirun
tmp=$(mktemp -d)
trap 'ibemu_cleanup; rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_pingpong" "$IBEMU_SRCDIR/tests/progs/mpi_pingpong.c" ||
	{ fail "mpicc"; finish; }
# Root in CI: Open MPI asks for it to be said.
as_root=
[ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
for tls in rc ud; do
	out=$(timeout 180 mpirun $as_root --oversubscribe -np 2 \
		-x LD_PRELOAD="$IBEMU_LIB_PATH" -x IBEMU_NODE \
		--mca pml ucx -x UCX_TLS=$tls,self -x UCX_NET_DEVICES=ibemu0:1 \
		"$tmp/mpi_pingpong" 2>&1)
	echo "$out" | grep -q "^PASS:" &&
		pass "mpirun -np 2, pml ucx, UCX_TLS=$tls: $(echo "$out" | grep '^PASS:')" ||
		{ fail "mpirun -np 2, pml ucx, UCX_TLS=$tls"; echo "$out" | tail -n 20; }
done
if ompi_info 2>/dev/null | grep -q 'MCA btl: openib'; then
	out=$(timeout 180 mpirun $as_root --oversubscribe -np 2 \
		-x LD_PRELOAD="$IBEMU_LIB_PATH" -x IBEMU_NODE \
		--mca pml ob1 --mca btl openib,self \
		--mca btl_openib_allow_ib 1 \
		--mca btl_openib_warn_no_device_params_found 0 \
		"$tmp/mpi_pingpong" 2>&1)
	echo "$out" | grep -q "^PASS:" &&
		pass "mpirun -np 2, pml ob1, btl openib: $(echo "$out" | grep '^PASS:')" ||
		{ fail "mpirun -np 2, pml ob1, btl openib"; echo "$out" | tail -n 20; }
else
	echo "skipped: this Open MPI has no btl openib"
fi
finish
