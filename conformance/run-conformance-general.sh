#!/bin/sh
# The conformance suite, its RC stress test included, with ibemu's
# two-sided fast paths off (IBEMU_FAST=0, doc/design.md §10): every
# message takes the general requester, responder and completer, which
# the fast paths leave to the cases they do not take.
IBEMU_FAST=0
CF_REPORT_NAME=ibemu0-general
export IBEMU_FAST CF_REPORT_NAME
exec sh "$(dirname "$0")/run-conformance.sh" "$@"
