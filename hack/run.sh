#!/usr/bin/env bash
# `make run`: runs kube-fledged against the cluster in KUBECONFIG when one
# answers, otherwise on a fresh sandbox cluster with 3 fake nodes; applies the
# samples and says how to watch them. Ctrl-C stops everything it started.
#
# Where it runs:
# - On KUBECONFIG's cluster, the controller and the operator run here, as
#   processes, and only the sample ImageCaches are applied.
# - On a sandbox of kwok nodes only (the default), the same, and the sample
#   KubeFledged too: no pod runs on a kwok node, so no pod of ours could serve
#   a webhook there, and the operator here installs the chart with the webhook
#   off (the watches file written below), so that the sample does not make
#   every ImageCache write fail.
# - With SANDBOX_REAL_NODE=1, the sandbox gets the real node (a kubelet on
#   containerd, with kube-proxy; root only, see docs/real-node.md), and
#   kube-fledged runs there as pods, installed the way users install it: the
#   image is built as `make image` builds it and pushed to the node's registry
#   under its own name ($IMG), the operator is deployed from config/default,
#   and the sample KubeFledged makes it install the chart, whose controller
#   serves the webhook that checks the sample ImageCaches. Opt-in because the
#   node holds the host (one real node per machine: a make run left open would
#   keep every real-node test waiting) and changes it while it runs.
#
# RUN_UNTIL_SETTLED=1 exits once the samples have reached a final status (used
# by `make run-smoke`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
sandbox_dir=${SANDBOX_DIR:-$root/.sandbox}
img=${IMG:-ghcr.io/kubefledged/kubefledged:v0.11.0}
version=${VERSION:-${img##*:v}}
case "${SANDBOX_REAL_NODE:-}" in
1 | true | yes) real_node=1 ;;
*) real_node= ;;
esac
mode=kwok # cluster (KUBECONFIG's), kwok (a sandbox) or real (a sandbox with the real node)
pids=()
started_sandbox=

cleanup() {
  trap - EXIT INT TERM
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -n "$started_sandbox" ]; then "$root/hack/sandbox.sh" down "$sandbox_dir" || true; fi
}
trap cleanup EXIT INT TERM

kubectl() { "$bin/kubectl" "$@"; }
# sandbox is hack/sandbox, built into the sandbox's own dir: bin/ may be shared
# with other checkouts.
sandbox() { "$sandbox_dir/bin/sandbox" "$@"; }

mkdir -p "$sandbox_dir/bin"
logs=$sandbox_dir/logs
if [ -n "${KUBECONFIG:-}" ] && kubectl version --request-timeout=3s >/dev/null 2>&1; then
  echo "using the cluster in KUBECONFIG=$KUBECONFIG"
  mode=cluster
  if [ -n "$real_node" ]; then
    echo "SANDBOX_REAL_NODE applies to a sandbox only; running here as processes against KUBECONFIG's cluster"
  fi
else
  go build -o "$sandbox_dir/bin/sandbox" "$root/hack/sandbox"
  if [ -n "$real_node" ]; then
    if ! why=$(sandbox check-real-node); then
      echo "SANDBOX_REAL_NODE=1: this machine cannot run the real node: $why" >&2
      exit 1
    fi
    mode=real
    # The image builds while the cluster starts; it is most of the wait.
    image_dir=$sandbox_dir/image
    mkdir -p "$image_dir" "$logs"
    (cd "$root" && exec go run ./hack/image build -out "$image_dir/oci" -version "v$version" -ref "$img") >"$logs/image-build.log" 2>&1 &
    image_pid=$!
    pids+=("$image_pid")
    echo "no cluster answers in KUBECONFIG; starting a sandbox cluster with the real node in $sandbox_dir"
    "$root/hack/sandbox.sh" up "$sandbox_dir" "${SANDBOX_NODES:-3}" --real-node
  else
    if why=$(sandbox check-real-node); then
      echo "note: this machine can run the real node: SANDBOX_REAL_NODE=1 make run runs kube-fledged there as pods"
    else
      echo "note: kube-fledged runs here as processes, not as pods: $why"
    fi
    echo "no cluster answers in KUBECONFIG; starting a sandbox cluster in $sandbox_dir"
    "$root/hack/sandbox.sh" up "$sandbox_dir" "${SANDBOX_NODES:-3}"
  fi
  started_sandbox=1
  export KUBECONFIG=$sandbox_dir/kubeconfig
fi
mkdir -p "$logs"

kubectl apply --server-side -f "$root/config/crd/bases" >/dev/null
kubectl wait --for=condition=Established --timeout=60s crd/imagecaches.kubefledged.io crd/kubefledgeds.charts.helm.kubefledged.io >/dev/null
kubectl create namespace kube-fledged --dry-run=client -o yaml | kubectl apply -f - >/dev/null

# retry N CMD... runs CMD once a second until it succeeds, at most N times.
retry() {
  local n=$1 i
  shift
  for ((i = 1; ; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [ "$i" -ge "$n" ]; then
      "$@" # once more, to show why
      return 1
    fi
    sleep 1
  done
}

sample_kf=$root/config/samples/charts_v1alpha2_kubefledged.yaml
samples=("$root/config/samples/kubefledged_v1alpha2_imagecache.yaml" "$root/config/samples/kubefledged_v1alpha2_imagecache_failing.yaml")
apply_caches() { kubectl apply -n kube-fledged -f "${samples[0]}" -f "${samples[1]}"; }
if [ "$mode" = real ]; then
  eval "$(sandbox real-node --dir "$sandbox_dir")"
  echo "building the image (log: $logs/image-build.log)"
  if ! wait "$image_pid"; then
    tail -20 "$logs/image-build.log" >&2
    exit 1
  fi
  pids=()
  sandbox push --dir "$sandbox_dir" --layout "$image_dir/oci" --as "$img" "${samples[@]}"

  # The operator as config/default deploys it, on the real node (a kwok node
  # would only pretend to run it), with $IMG as both its image and the
  # controller's (RELATED_IMAGE_KUBEFLEDGED).
  overlay=$sandbox_dir/operator
  mkdir -p "$overlay"
  # kustomize takes a base by relative path only.
  base=$(realpath --relative-to="$overlay" "$root/config/default")
  cat >"$overlay/kustomization.yaml" <<EOF
# Written by hack/run.sh: config/default on the sandbox's real node.
resources:
- $base
patches:
- target:
    kind: Deployment
    labelSelector: control-plane=kube-fledged-operator
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: operator
    spec:
      template:
        spec:
          nodeSelector:
            kubernetes.io/hostname: $REALNODE_NAME
          containers:
          - name: operator
            image: $img
            env:
            - name: RELATED_IMAGE_KUBEFLEDGED
              value: $img
EOF
  kubectl apply --server-side -k "$overlay" >/dev/null
  echo "waiting for the operator pod on $REALNODE_NAME"
  kubectl -n kube-fledged-system rollout status deployment/kube-fledged-operator --timeout=180s >/dev/null

  # The sample KubeFledged, in the operator's namespace (it installs from no
  # other), with what this node needs: the controller on it,
  # the node's containerd socket for the delete Jobs, and a pull deadline short
  # enough for the failing sample to settle while you watch.
  kubectl patch --local -f "$sample_kf" --type merge -o yaml -p "{\"spec\":{
    \"nodeSelector\":{\"kubernetes.io/hostname\":\"$REALNODE_NAME\"},
    \"controller\":{\"criSocketPath\":\"$REALNODE_CRI_SOCKET\",\"imagePullDeadlineDuration\":\"30s\"}}}" |
    kubectl apply -n kube-fledged-system -f -
  echo "waiting for the controller the operator installs"
  retry 180 kubectl -n kube-fledged-system rollout status deployment/kubefledged-controller --timeout=1s
  # Its webhook is called through its Service: until the endpoint is there,
  # the API server refuses ImageCache writes itself.
  retry 60 apply_caches
  where="as pods on the real node $REALNODE_NAME (kubectl get pods -A -o wide)"
else
  watches=$root/watches.yaml
  if [ "$mode" = kwok ]; then
    # The repository's watches, with the chart at its absolute path and the
    # webhook off: a KubeFledged applied here would otherwise register a
    # webhook whose pods run on kwok nodes, where nothing answers, and every
    # ImageCache write would fail. The controller started below checks
    # nothing either.
    watches=$sandbox_dir/watches.yaml
    awk -v chart="$root/" '
      /^  chart: / && $2 !~ /^\// { print "  chart: " chart $2; next }
      { print }
      /^  overrideValues:/ { print "    webhook.enabled: \"false\"" }
    ' "$root/watches.yaml" >"$watches"
  fi
  KUBEFLEDGED_NAMESPACE=kube-fledged "$bin/kubefledged" controller --kubeconfig "$KUBECONFIG" \
    --leader-elect=false --metrics-bind-address=0 --health-probe-bind-address=0 --enable-webhook=false \
    --image-pull-deadline-duration=20s >"$logs/controller.log" 2>&1 &
  pids+=($!)
  # exec, so that $! is the operator itself and the clean-up's kill reaches
  # it (a subshell killed in its place left the operator running).
  (KUBEFLEDGED_NAMESPACE=kube-fledged exec "$bin/kubefledged" operator --kubeconfig "$KUBECONFIG" --namespace kube-fledged --leader-elect=false \
    --watches-file "$watches" --metrics-bind-address=0 --health-probe-bind-address=0 >"$logs/operator.log" 2>&1) &
  pids+=($!)
  where="on this machine, as processes (logs: $logs/controller.log, $logs/operator.log)"
  if [ "$mode" = kwok ]; then
    # The sample KubeFledged: the operator installs the chart from it (its
    # controller pods land on kwok nodes and only seem to run; the one above
    # does the work). Deployed before the caches are written, so that a
    # webhook registration would have refused them.
    kubectl apply -n kube-fledged -f "$sample_kf"
    kubectl -n kube-fledged wait --for=condition=Deployed --timeout=120s kubefledgeds.charts.helm.kubefledged.io/kubefledged >/dev/null
    where="$where; the chart the sample KubeFledged installed has its webhook off here"
  fi
  apply_caches
fi
echo
echo "kube-fledged runs $where. Watch the sample caches with:"
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
# The sample KubeFledged is in the operator's namespace.
kf_ns=kube-fledged
if [ "$mode" = real ]; then kf_ns=kube-fledged-system; fi
[ "$mode" = cluster ] || kubectl get kubefledgeds.charts.helm.kubefledged.io -n "$kf_ns"
kubectl get ic -n kube-fledged
kubectl get ic -n kube-fledged imagecache-failing -o jsonpath='{range .status.failures.*}{range .*}{.node}: {.reason}: {.message}{"\n"}{end}{end}' || true
[ -n "${RUN_UNTIL_SETTLED:-}" ] && exit 0
echo "Ctrl-C stops kube-fledged$([ -n "$started_sandbox" ] && echo " and the sandbox")."
if [ "$mode" = real ]; then
  # Nothing of ours runs here: wait for the sandbox.
  while kill -0 "$(cat "$sandbox_dir/sandbox.pid" 2>/dev/null)" 2>/dev/null; do sleep 1; done
else
  wait "${pids[0]}"
fi
