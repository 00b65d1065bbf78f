#!/usr/bin/env bash
# `make run`: runs the controller (and the operator) on this machine against
# the cluster in KUBECONFIG when one answers, otherwise on a fresh sandbox
# cluster with 3 fake nodes; applies the samples and says how to watch them.
# Ctrl-C stops everything it started. RUN_UNTIL_SETTLED=1 exits once the
# samples have reached a final status (used by the tests of this script).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
sandbox_dir=${SANDBOX_DIR:-$root/.sandbox}
pids=()
started_sandbox=

cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$started_sandbox" ]; then "$root/hack/sandbox.sh" down "$sandbox_dir" || true; fi
}
trap cleanup EXIT INT TERM

if [ -n "${KUBECONFIG:-}" ] && "$bin/kubectl" version --request-timeout=3s >/dev/null 2>&1; then
  echo "using the cluster in KUBECONFIG=$KUBECONFIG"
else
  echo "no cluster answers in KUBECONFIG; starting a sandbox cluster in $sandbox_dir"
  "$root/hack/sandbox.sh" up "$sandbox_dir" "${SANDBOX_NODES:-3}"
  started_sandbox=1
  export KUBECONFIG=$sandbox_dir/kubeconfig
fi
kubectl() { "$bin/kubectl" "$@"; }

kubectl apply --server-side -f "$root/config/crd/bases" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/imagecaches.kubefledged.io >/dev/null
kubectl create namespace kube-fledged --dry-run=client -o yaml | kubectl apply -f - >/dev/null

logs=$sandbox_dir/logs
mkdir -p "$logs"
KUBEFLEDGED_NAMESPACE=kube-fledged "$bin/kubefledged" controller --kubeconfig "$KUBECONFIG" \
  --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address=0 --enable-webhook=false \
  --image-pull-deadline-duration=20s >"$logs/controller.log" 2>&1 &
pids+=($!)
if [ -f "$root/watches.yaml" ] && kubectl get crd kubefledgeds.charts.helm.kubefledged.io >/dev/null 2>&1; then
  # exec, so that $! is the operator itself and the clean-up's kill reaches
  # it (a subshell killed in its place left the operator running).
  (cd "$root" && KUBEFLEDGED_NAMESPACE=kube-fledged exec "$bin/kubefledged" operator --kubeconfig "$KUBECONFIG" --leader-elect=false \
    --metrics-bind-address=0 --health-probe-bind-address=0 >"$logs/operator.log" 2>&1) &
  pids+=($!)
fi

kubectl apply -n kube-fledged -f "$root/config/samples/kubefledged_v1alpha2_imagecache.yaml" \
  -f "$root/config/samples/kubefledged_v1alpha2_imagecache_failing.yaml"
echo
echo "The controller runs (log: $logs/controller.log). Watch the sample caches with:"
echo "  KUBECONFIG=$KUBECONFIG $bin/kubectl get ic -n kube-fledged -w"
echo

settled() {
  local out
  out=$(kubectl get ic -n kube-fledged -o jsonpath='{range .items[*]}{.metadata.name}={.status.status}{"\n"}{end}')
  ! grep -qE '=(Processing)?$' <<<"$out"
}
for _ in $(seq 1 240); do
  if settled; then break; fi
  sleep 1
done
kubectl get ic -n kube-fledged
kubectl get ic -n kube-fledged imagecache-failing -o jsonpath='{range .status.failures.*}{range .*}{.node}: {.reason}: {.message}{"\n"}{end}{end}' || true
[ -n "${RUN_UNTIL_SETTLED:-}" ] && exit 0
echo "Ctrl-C stops the controller$([ -n "$started_sandbox" ] && echo " and the sandbox")."
wait "${pids[0]}"
