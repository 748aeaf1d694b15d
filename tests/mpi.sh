#!/bin/bash
# Open MPI over UCX over ibemu: a ping-pong with every byte checked
# (tests/mpi_pingpong.c), two ranks, pml ucx on the rc transport.
. "$(dirname "$0")/lib.sh"
need mpicc
need mpirun
tmp=$(mktemp -d)
trap 'ibemu_cleanup; rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/mpi_pingpong" "$IBEMU_SRCDIR/tests/mpi_pingpong.c" ||
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
finish
