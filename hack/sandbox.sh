#!/usr/bin/env bash
# Starts the sandbox cluster in the background (up) or stops it (down).
# up waits until <dir>/ready exists, so the next command can use the cluster.
set -euo pipefail
cmd=${1:?usage: sandbox.sh up DIR NODES [--real-node] | down DIR}
dir=${2:?sandbox dir}
root=$(cd "$(dirname "$0")/.." && pwd)
case "$cmd" in
up)
  nodes=${3:-3}
  extra=${4:-} # --real-node: a kubelet on containerd beside the fake nodes (root)
  # Built into the sandbox's own dir: bin/ may be shared with other checkouts,
  # whose sandbox would then run this one's code.
  mkdir -p "$dir/bin"
  go build -o "$dir/bin/sandbox" "$root/hack/sandbox"
  rm -f "$dir/ready" # a stale one from a killed run would fool the wait below
  nohup "$dir/bin/sandbox" up --dir "$dir" --nodes "$nodes" $extra >"$dir/sandbox.log" 2>&1 &
  # The real node may first wait for another one to give the host back
  # (realnode.Start gives up after 8 minutes); say so rather than hang mutely.
  wait_min=2
  [ -n "$extra" ] && wait_min=10
  told=
  for _ in $(seq 1 $((wait_min * 120))); do
    [ -f "$dir/ready" ] && { echo "sandbox up: export KUBECONFIG=$dir/kubeconfig"; exit 0; }
    kill -0 $! 2>/dev/null || { echo "sandbox failed to start:"; tail -20 "$dir/sandbox.log"; exit 1; }
    if [ -z "$told" ] && grep -q "waiting for the real node" "$dir/sandbox.log"; then
      grep "waiting for the real node" "$dir/sandbox.log" | head -1
      told=1
    fi
    sleep 0.5
  done
  echo "sandbox did not become ready in $wait_min minutes:"; tail -20 "$dir/sandbox.log"; exit 1
  ;;
down)
  go run "$root/hack/sandbox" down --dir "$dir"
  ;;
*)
  echo "usage: sandbox.sh up DIR NODES | down DIR" >&2; exit 2 ;;
esac
