#!/bin/sh
# make check: every libFuzzer harness for a short bounded time (fuzz/run-fuzz
# --check; FUZZ_CHECK_SECONDS in total, 15 by default), after the inputs
# kept in fuzz/regress/.  Skipped (77) when clang's fuzzer runtime is
# missing; `make fuzz` is the long run.
exec bash "${IBEMU_SRCDIR:-$(dirname "$0")/..}/fuzz/run-fuzz" --check
