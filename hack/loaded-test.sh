#!/usr/bin/env bash
# Runs `make test` RUNS times in a row (default 5) in a fresh clone of HEAD,
# with hack/cpuhog keeping every core busy the whole time: the proof that no
# test waits a fixed time for another process (docs/reliability.md). It stops
# at the first failing run. Tools already built in bin/ are hard-linked into
# the clone, so a run costs what CI's warm run costs; without them the first
# run builds them, as CI does on a cold machine.
#
#   hack/loaded-test.sh [RUNS]      (HOG_PROCS: busy loops, default nproc)
set -euo pipefail
runs=${1:-5}
procs=${HOG_PROCS:-$(nproc)}
src=$(git rev-parse --show-toplevel)
rev=$(git -C "$src" rev-parse --short HEAD)
scratch=$(mktemp -d /tmp/kubefledged-loaded.XXXXXX)
clone=$scratch/kube-fledged
git clone -q "$src" "$clone"
git -C "$clone" checkout -q "$rev"
if [ -d "$src/bin" ]; then
	cp -al "$src/bin" "$clone/bin"
	rm -rf "$clone/bin/test-logs"
fi
go build -C "$src" -o "$scratch/cpuhog" ./hack/cpuhog

"$scratch/cpuhog" -procs "$procs" -for 0 >"$scratch/cpuhog.log" 2>&1 &
hog=$!
trap 'kill $hog 2>/dev/null || true' EXIT

summary=$scratch/summary.txt
echo "loaded make test at $rev, $procs busy loops on $(nproc) cores, in $clone" | tee "$summary"
passed=0
for i in $(seq 1 "$runs"); do
	start=$(date +%s)
	if (cd "$clone" && make test) >"$scratch/run-$i.log" 2>&1; then rc=0; else rc=$?; fi
	secs=$(($(date +%s) - start))
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "run $i: exit $rc in ${secs}s (load $load); log $scratch/run-$i.log" | tee -a "$summary"
	if [ "$rc" -ne 0 ]; then
		grep -E '^(--- FAIL|FAIL)' "$scratch/run-$i.log" | tee -a "$summary" || true
		break
	fi
	passed=$((passed + 1))
done
echo "$passed passed, $((runs - passed)) failed" | tee -a "$summary"
[ "$passed" -eq "$runs" ]
