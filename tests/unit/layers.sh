#!/bin/bash
# The emulator's layers as its built objects show them (emulator/
# Makefile.include): a layer references no function or object defined
# by a layer above it, the engine and the HCA objects none defined by a
# transport or the CM but the transports' ops tables, the CM none of a
# transport's, and the two transports none of each other's.
. "$(dirname "$0")/../lib/lib.sh"
need nm
libs=$IBEMU_BUILDDIR/.libs
for l in base wire node hca engine shm tcp cm; do
	[ -f "$libs/libemu-$l.a" ] || { echo "no $libs/libemu-$l.a"; exit 99; }
done

# defined LIB...: the global symbols the layers' archives define.
defined() {
	local l
	for l in "$@"; do
		nm -g --defined-only "$libs/libemu-$l.a" | awk 'NF == 3 { print $3 }'
	done | sort -u
}

# used LIB...: the symbols the layers' archives reference.
used() {
	local l
	for l in "$@"; do
		nm -u "$libs/libemu-$l.a" | awk 'NF == 2 { print $2 }'
	done | sort -u
}

# check NAME 'LOWER...' 'UPPER...' [ALLOWED-RE]: LOWER references none of
# UPPER's symbols, but those ALLOWED-RE matches.
check() {
	local bad
	bad=$(comm -12 <(used $2) <(defined $3) | grep -Ev "^(${4:-^$})\$")
	if [ -z "$bad" ]; then
		pass "$1"
	else
		fail "$1: $(echo $bad)"
	fi
}

check "base references nothing above it" base "wire node hca engine shm tcp cm"
check "wire references nothing above it" wire "node hca engine shm tcp cm"
check "node references nothing above it" node "hca engine shm tcp cm"
check "the engine and the objects: no transport, no CM, but the ops tables" \
	"hca engine" "shm tcp cm" "tp_shm_ops|tp_tcp_ops|tp_mcast_ip_ops"
check "the CM references no transport" cm "shm tcp"
check "the TCP transport references nothing of the shm transport" tcp shm
check "the shm transport references nothing of the TCP transport" shm tcp
check "the transports reference nothing of the CM" "shm tcp" cm
# The check can fail: the engine does reference the ops tables.
if comm -12 <(used engine) <(defined shm) | grep -qx tp_shm_ops; then
	pass "the engine's reference to tp_shm_ops is seen"
else
	fail "the engine's reference to tp_shm_ops is not seen: the check sees nothing"
fi
finish
