#!/bin/bash
# Programs that get libibverbs by dlopen find ibemu0; the preload loads
# no libibverbs into a program that does not use it.
. "$(dirname "$0")/../lib/lib.sh"
plugin=$IBEMU_BUILDDIR/tests/progs/.libs/verbs_plugin.so

LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/dlopen_plugin" "$plugin" &&
	pass "a RTLD_LOCAL plug-in linked with libibverbs lists ibemu0" ||
	fail "a RTLD_LOCAL plug-in linked with libibverbs"
LD_PRELOAD=$IBEMU_LIB_PATH "$IBEMU_BUILDDIR/tests/progs/dlopen_plugin" "$plugin" late &&
	pass "a plug-in loaded after a verbs call (dlsym(RTLD_DEFAULT)) lists ibemu0" ||
	fail "a plug-in loaded after a verbs call"
# RTLD_DEEPBIND binds the plug-in to libibverbs before the global scope:
# only the audit module, which `ibemu run` sets, reaches those bindings.
"$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/dlopen_plugin" "$plugin" deepbind &&
	pass "a RTLD_DEEPBIND plug-in lists ibemu0 under ibemu run" ||
	fail "a RTLD_DEEPBIND plug-in under ibemu run"

# A program that dlopens libibverbs and dlsym()s its functions itself:
# the audit module, set by `ibemu run`, and by hand.
"$IBEMU" run -- "$IBEMU_BUILDDIR/tests/progs/dlopen_verbs" &&
	pass "dlopen(libibverbs) and dlsym() list ibemu0 under ibemu run" ||
	fail "dlopen(libibverbs) and dlsym() under ibemu run"
LD_PRELOAD=$IBEMU_LIB_PATH LD_AUDIT=$IBEMU_BUILDDIR/.libs/libibemu-audit.so \
	"$IBEMU_BUILDDIR/tests/progs/dlopen_verbs" &&
	pass "dlopen(libibverbs) and dlsym() list ibemu0 with LD_PRELOAD and LD_AUDIT" ||
	fail "dlopen(libibverbs) and dlsym() with LD_PRELOAD and LD_AUDIT"
out=$(LD_AUDIT=$IBEMU_BUILDDIR/.libs/libibemu-audit.so LD_PRELOAD=$IBEMU_LIB_PATH /bin/true 2>&1) &&
	[ -z "$out" ] && pass "/bin/true under the preload and the audit module" ||
	fail "/bin/true under the preload and the audit module: $out"

# rdma-core's Python binding: an extension module loaded RTLD_LOCAL.
if /usr/bin/python3 -c "import pyverbs" 2>/dev/null; then
	out=$(LD_PRELOAD=$IBEMU_LIB_PATH /usr/bin/python3 -c \
		"import pyverbs.device as d; print([x.name.decode() for x in d.get_device_list()])" 2>&1)
	echo "$out" | grep -q "'ibemu0'" && pass "pyverbs lists ibemu0: $out" ||
		fail "pyverbs: $out"
else
	fail "pyverbs is not installed (python3-pyverbs)"
fi

maps=$(LD_PRELOAD=$IBEMU_LIB_PATH cat /proc/self/maps)
echo "$maps" | grep -q libibverbs &&
	fail "the preload loaded libibverbs into cat" ||
	pass "the preload loads no libibverbs into a program without it"
finish
