# The real node (kubelet + containerd + bridge CNI + kube-proxy) beside the
# kwok nodes. test/sandbox/realnode starts it; test/e2e/realnode and test/e2e/install
# run on it. They skip, naming what is missing, on a machine without these parts.

# kubelet and kube-proxy (so that the node's pods reach Services, the API
# server's `kubernetes` Service above all, as on any cluster), built from the
# same wrapper module and with the same version stamps as the control plane:
# the node must report the cluster's version, not v0.0.0-master. After the
# control plane's build, whose packages they mostly share. Keep them pinned
# with the control plane: 1.35 still runs on this machine's cgroup v1 when
# told to (failCgroupV1: false), which later kubelets may not.
KUBE_NODE_CMDS := kubelet kube-proxy
$(eval $(call kube-tools,kube,$(KUBE_VERSION),$(KUBE_NODE_CMDS),TOOL_NICE,$(LOCALBIN)/kube-apiserver-$(KUBE_VERSION)))
$(foreach c,$(KUBE_NODE_CMDS),$(eval $(call versioned-link,$(c),$(KUBE_VERSION))))

# containerd and its runc shim, CONTAINERD_VERSION, from the Go module proxy: Debian's
# (1.6.20 in bookworm) ignores the pinned label, so a pin test there proves nothing
# (docs/pinning.md). Built from a writable copy of the module (the module cache is
# read-only) without the snapshotters that need C headers; the version stamp is the
# release's, as CRI's RuntimeVersion and the node's containerRuntimeVersion report
# it. One build for both, through a directory of its own, so that a failed build
# leaves no file behind that would pass for a built one. runc and the CNI plugins
# stay Debian's.
CONTAINERD_BUILD := $(LOCALBIN)/.build-containerd
$(LOCALBIN)/containerd-$(CONTAINERD_VERSION) $(LOCALBIN)/containerd-shim-runc-v2-$(CONTAINERD_VERSION) &:
	rm -rf $(CONTAINERD_BUILD) && mkdir -p $(CONTAINERD_BUILD)/out
	src=$$(cd / && GOFLAGS= go mod download -json github.com/containerd/containerd@$(CONTAINERD_VERSION) | \
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	 [ -n "$$src" ] || { echo "go mod download named no source for containerd $(CONTAINERD_VERSION)"; exit 1; }; \
	 cp -r "$$src" $(CONTAINERD_BUILD)/src && chmod -R u+w $(CONTAINERD_BUILD)/src
	cd $(CONTAINERD_BUILD)/src && GOFLAGS= $(TOOL_NICE) go build -trimpath -tags 'no_btrfs no_devmapper no_zfs no_aufs' \
		-ldflags='-s -w -X github.com/containerd/containerd/version.Version=$(CONTAINERD_VERSION)' \
		-o $(CONTAINERD_BUILD)/out/ ./cmd/containerd ./cmd/containerd-shim-runc-v2
	mv $(CONTAINERD_BUILD)/out/containerd-shim-runc-v2 $(LOCALBIN)/containerd-shim-runc-v2-$(CONTAINERD_VERSION)
	mv $(CONTAINERD_BUILD)/out/containerd $(LOCALBIN)/containerd-$(CONTAINERD_VERSION)
	rm -rf $(CONTAINERD_BUILD)
$(eval $(call versioned-link,containerd,$(CONTAINERD_VERSION)))
$(eval $(call versioned-link,containerd-shim-runc-v2,$(CONTAINERD_VERSION)))

.PHONY: realnode-deps
realnode-deps: ## Install the real node's Debian packages (runc, CNI plugins, iptables, iproute2, nftables) when missing.
	hack/realnode-deps.sh

.PHONY: realnode-tools
realnode-tools: realnode-deps $(LOCALBIN)/kubelet $(LOCALBIN)/kube-proxy $(LOCALBIN)/containerd $(LOCALBIN)/containerd-shim-runc-v2 ## Everything the real-node tests need.

.PHONY: test-realnode
test-realnode: tools realnode-tools ## Run only the real-node tests (as root), the installs on the real node among them.
	go test -count=1 -timeout $(TEST_TIMEOUT) ./test/sandbox/realnode/... ./test/e2e/realnode/... ./test/e2e/install/...
