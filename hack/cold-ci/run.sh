#!/usr/bin/env bash
# What CI's .ci/run costs on a new machine: a fresh clone of HEAD, its Go
# module, build and lint caches empty in a scratch folder, every make recipe
# timed through a SHELL (timed-shell.sh) that runs it under /usr/bin/time.
# Prints the wall time, the CPU time of the whole run and its recipes by CPU;
# docs/reliability.md ("CI's time on a new machine") keeps the figures. It
# takes as long as a cold CI run (about 40 minutes on 2 cores): run it on an
# otherwise idle machine, as root (the real node), with the Debian packages of
# hack/realnode-deps.sh installed or installable.
#
#   hack/cold-ci/run.sh [SCRATCH]
set -euo pipefail
root=$(git rev-parse --show-toplevel)
scratch=${1:-$(mktemp -d /tmp/cold-ci.XXXXXX)}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
rm -rf "$scratch/src" "$scratch/times.log"
git clone -q "$root" "$scratch/src"
start=$(date +%s)
rc=0
(cd "$scratch/src" && env CI=true GOMODCACHE="$scratch/mod" GOCACHE="$scratch/cache" GOLANGCI_LINT_CACHE="$scratch/lint" \
  COLD_CI_TIMES="$scratch/times.log" MAKEFLAGS="SHELL=$root/hack/cold-ci/timed-shell.sh" \
  bash .ci/run >"$scratch/run.log" 2>&1) || rc=$?
end=$(date +%s)
echo ".ci/run exited $rc after $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (log: $scratch/run.log)"
echo "CPU seconds, wall seconds, started at (s from the start) and the recipe, most CPU first:"
awk -v s="$start" 'NF > 4 && $4 ~ /^[0-9]+$/ {
    line = ""; for (i = 5; i <= NF; i++) line = line " " $i
    printf "%6.0f %6.0f %6d %s\n", $2 + $3, $1, $4 - s, substr(line, 1, 120) }' "$scratch/times.log" | sort -rn | head -40
# The module cache is read-only; leave the scratch folder removable.
chmod -R u+w "$scratch/mod" 2>/dev/null || true
exit "$rc"
