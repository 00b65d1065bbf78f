#!/usr/bin/env bash
# make's SHELL for hack/cold-ci/run.sh: runs a recipe as the Makefile's own
# SHELL and .SHELLFLAGS would (bash -o pipefail -ec), under /usr/bin/time,
# which appends to $COLD_CI_TIMES its wall, user and system seconds (its
# children's included), its start (Unix seconds) and its last line.
label=$(printf '%s' "${@: -1}" | tr '\n' ' ' | cut -c1-200)
# time's format reads % and \ as escapes.
label=${label//\\/\\\\}
label=${label//%/%%}
exec /usr/bin/time -a -o "$COLD_CI_TIMES" -f "%e %U %S $(date +%s) ${label}" /usr/bin/env bash -o pipefail "$@"
