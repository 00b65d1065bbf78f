# The real node (kubelet + Debian's containerd + bridge CNI + kube-proxy) beside the
# kwok nodes. test/sandbox/realnode starts it; test/e2e/realnode and test/e2e/install
# run on it. They skip, naming what is missing, on a machine without these parts.

# Built from the same wrapper module and with the same version stamps as the
# control plane: the node must report the cluster's version, not v0.0.0-master. Keep
# it pinned with the control plane: 1.35 still runs on this machine's cgroup v1 when
# told to (failCgroupV1: false), which later kubelets may not.
$(LOCALBIN)/kubelet-$(KUBE_VERSION):
	mkdir -p $(LOCALBIN)
	cd hack/tools/kube && go build -trimpath -ldflags='-s -w $(KUBE_VERSION_LDFLAGS)' -o $@ \
		k8s.io/kubernetes/cmd/kubelet
$(eval $(call versioned-link,kubelet,$(KUBE_VERSION)))

# kube-proxy for the real node, so that its pods reach Services (the API
# server's `kubernetes` Service above all) as on any cluster. Same module, same
# version stamps and the same pin as the kubelet beside it.
$(LOCALBIN)/kube-proxy-$(KUBE_VERSION):
	mkdir -p $(LOCALBIN)
	cd hack/tools/kube && go build -trimpath -ldflags='-s -w $(KUBE_VERSION_LDFLAGS)' -o $@ \
		k8s.io/kubernetes/cmd/kube-proxy
$(eval $(call versioned-link,kube-proxy,$(KUBE_VERSION)))

.PHONY: realnode-deps
realnode-deps: ## Install the real node's Debian packages (containerd, CNI plugins, iptables, iproute2, nftables) when missing.
	hack/realnode-deps.sh

.PHONY: realnode-tools
realnode-tools: realnode-deps $(LOCALBIN)/kubelet $(LOCALBIN)/kube-proxy ## Everything the real-node tests need.

.PHONY: test-realnode
test-realnode: tools realnode-tools ## Run only the real-node tests (as root), the installs on the real node among them.
	go test -count=1 -timeout $(TEST_TIMEOUT) ./test/sandbox/realnode/... ./test/e2e/realnode/... ./test/e2e/install/...
