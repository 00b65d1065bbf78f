# kube-fledged: one binary (operator, controller, Job helpers), a Helm chart,
# an OLM bundle, and a local sandbox cluster to run and test them on.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

VERSION ?= 0.11.0
IMG ?= ghcr.io/kubefledged/kubefledged:v$(VERSION)
LOCALBIN ?= $(CURDIR)/bin
export KUBEFLEDGED_BIN_DIR := $(LOCALBIN)
SANDBOX_DIR ?= $(CURDIR)/.sandbox
SANDBOX_NODES ?= 3
# SANDBOX_REAL_NODE=1 adds a real node (kubelet on containerd, registry on
# 127.0.0.1) beside the fake ones in sandbox-up; it needs root and `make realnode-tools`.
SANDBOX_REAL_NODE ?=
# The kubectl of install, uninstall, deploy and undeploy: the user's (on the
# PATH), else bin/kubectl, built with the other Kubernetes tools when missing
# (KUBECTL_BUILD). KUBECTL=... picks another.
KUBECTL ?= $(or $(shell command -v kubectl 2>/dev/null),$(LOCALBIN)/kubectl)
KUBECTL_BUILD = $(if $(filter $(LOCALBIN)/kubectl,$(KUBECTL)),$(LOCALBIN)/kubectl)
# Integration tests start several control planes; give them time on 2 cores.
TEST_TIMEOUT ?= 30m
FUZZTIME ?= 10s
# Files written by generators; 'verify' regenerates them and fails on any difference.
GENERATED = api/v1alpha2/zz_generated.deepcopy.go config/crd/bases helm-charts/kubefledged/crds test/golden/testdata \
	config/rbac/role.yaml config/rbac/leader_election_role.yaml

# Pinned tool versions. Every tool is built from the Go module proxy into bin/
# once and reused: a cold build takes many minutes, so nothing is rebuilt when
# its binary is there. Each carries its version in its file name
# (versioned-link below), so bumping one here rebuilds it. Those built from a
# wrapper module in hack/tools build what its go.mod pins: the variable names
# the file, and `make verify` fails when the two disagree (TOOL_MODULES).
KUBE_VERSION ?= v1.35.4
# The oldest Kubernetes the chart and the CSV claim (docs/install.md,
# "Kubernetes versions"): `make test-oldest` runs the ImageCache suite on
# its control plane, built from hack/tools/kube-oldest.
KUBE_OLDEST_VERSION ?= v1.27.16
ETCD_VERSION ?= v3.6.16
KWOK_VERSION ?= v0.8.0
CONTROLLER_GEN_VERSION ?= v0.20.1
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.21.4
# The real node's containerd and its runc shim (hack/realnode.mk): 1.7 or newer,
# whose CRI plugin reports pinned images to the kubelet (docs/pinning.md).
CONTAINERD_VERSION ?= v1.7.32
# kube-version-ldflags VERSION: what Kubernetes' own build stamps into its
# binaries, so that /version and the version checks see VERSION.
kube-version-ldflags = $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(1) -X $(p).gitMajor=1 -X $(p).gitMinor=$(word 2,$(subst ., ,$(1))) -X $(p).gitTreeState=clean)
KUBE_VERSION_LDFLAGS = $(call kube-version-ldflags,$(KUBE_VERSION))

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(LOCALBIN)/controller-gen ## Generate deepcopy code.
	$(LOCALBIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

# The operator's RBAC is derived from the chart's (hack/gen-rbac says how):
# `make bundle` then copies it into the CSV.
.PHONY: manifests
manifests: $(LOCALBIN)/controller-gen ## Generate the CRDs (config/ and the chart's crds/) and the operator's RBAC (config/rbac).
	$(LOCALBIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	mkdir -p helm-charts/kubefledged/crds
	cp config/crd/bases/kubefledged.io_imagecaches.yaml helm-charts/kubefledged/crds/
	go run ./hack/gen-kubefledged-crd -schema helm-charts/kubefledged/values.schema.json \
		-out config/crd/bases/charts.helm.kubefledged.io_kubefledgeds.yaml
	go run ./hack/gen-rbac -out config/rbac

.PHONY: verify
# verify regenerates in a copy of the work tree (what git tracks, and new
# files it does not ignore), never in the tree itself: `make test` lints and
# tests that tree while verify runs beside them, and the tests read the
# golden files and the bundle verify rewrites. The copy is its own tree to
# git (GIT_CEILING_DIRECTORIES), as a source archive would be.
VERIFY_DIR := $(CURDIR)/.verify
verify: $(LOCALBIN)/controller-gen olm-tools ## Fail when generated files drift from their sources (checked in a copy of the tree).
	@# One line, which `make -n` runs too (it names $(MAKE)), so that a dry run has a copy to read.
	@rm -rf $(VERIFY_DIR) && mkdir -p $(VERIFY_DIR)/tree && \
	 git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(VERIFY_DIR)/tree && \
	 GIT_CEILING_DIRECTORIES=$(VERIFY_DIR) $(GO_FLAGS_ENV) $(BUILD_NICE) $(MAKE) -s --no-print-directory -C $(VERIFY_DIR)/tree verify-in-place LOCALBIN=$(LOCALBIN)

# verify-in-place regenerates the generated files where it runs and fails
# on any difference; `make verify` runs it in a copy. Its own scratch
# folder: VERIFY_DIR may come from a parent make's command line.
VERIFY_IN_PLACE_DIR := $(CURDIR)/.verify-in-place
.PHONY: verify-in-place
verify-in-place:
	@rm -rf $(VERIFY_IN_PLACE_DIR) && mkdir -p $(VERIFY_IN_PLACE_DIR)
	@cp -r $(GENERATED) $(VERIFY_IN_PLACE_DIR)/ 2>/dev/null || true
	@$(MAKE) -s generate manifests golden
	@for f in $(GENERATED); do \
		if ! diff -r $(VERIFY_IN_PLACE_DIR)/$$(basename $$f) $$f >/dev/null 2>&1; then \
			echo "generated file drifted from its sources: $$f (run 'make generate manifests golden' and commit)"; \
			diff -r $(VERIFY_IN_PLACE_DIR)/$$(basename $$f) $$f | head -20; exit 1; fi; done
	@echo "generated files match their sources"
	@go run ./hack/chart-readme -chart helm-charts/kubefledged -check
	@echo "the chart's README matches its values"
	@go test -count=1 -run '^TestRBAC' ./test/golden >/dev/null || { echo "RBAC drift between the chart, config/rbac and the CSV:"; go test -count=1 -run '^TestRBAC' ./test/golden; exit 1; }
	@echo "the chart's roles, config/rbac and the CSV's permissions agree"
	@cd test/monitoring && go mod tidy -diff >/dev/null 2>&1 || { echo "test/monitoring/go.mod is not tidy (cd test/monitoring && go mod tidy):"; go mod tidy -diff; exit 1; }
	@echo "test/monitoring's go.mod and go.sum are tidy"
	@$(MAKE) -s tool-versions-verify
	@$(MAKE) -s bundle-verify

# The chart's renderings for each test/golden/testdata/*.values.yaml, which
# test/golden compares the chart with and test/monitoring evaluates: written
# by the chart, never by hand, and so part of what verify regenerates.
.PHONY: golden
golden: ## Render the chart for each test/golden/testdata/*.values.yaml into its .golden file.
	go test -count=1 -run '^(TestGolden|TestKustomizeGolden)$$' ./test/golden -update

.PHONY: chart-readme
chart-readme: ## Write the chart's README.md from Chart.yaml, values.yaml and README.md.gotmpl (helm-docs' layout).
	go run ./hack/chart-readme -chart helm-charts/kubefledged

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

# golangci-lint runs go vet, gofmt and the few linters .golangci.yml
# explains, on the main module; test/monitoring, a module of its own, gets
# go vet. Another golangci-lint running on this machine (another checkout's
# make test) is waited for, not an error.
.PHONY: lint
lint: $(LOCALBIN)/golangci-lint ## golangci-lint (vet, gofmt and the linters in .golangci.yml).
	$(GO_FLAGS_ENV) $(BUILD_NICE) $(LOCALBIN)/golangci-lint run --allow-serial-runners ./...
	cd test/monitoring && $(GO_FLAGS_ENV) $(BUILD_NICE) go vet ./...

# `make test` runs in parts at once (TEST_JOBS make jobs). On a new machine
# most of its work is compiling (the tools, the test binaries, the image for
# every platform), which wants both cores, while the suites mostly wait on
# the control plane. So the ImageCache suite, the longest, starts as soon as
# the control plane it runs on is built, and every other tool, the lint and
# verify are built and run at BUILD_NICE (nice 19), on the cores the suites
# leave idle; the suites themselves run at normal priority.
# docs/reliability.md ("CI's time on a new machine") has the figures. Each
# part's output comes when it ends (-Otarget); bin/test-logs/ has each suite's
# log as it runs. A part that fails stops no other (-k): the run reports
# every failure, and fails. Job slots are many: a build at nice 19 costs
# the suites nothing, but a slot it holds is one the first suite's next
# small step (a tool's link in bin/) would wait for; a build takes about
# 100 MB.
TEST_JOBS ?= 24
# How make test builds the tests: as the product's binaries are built
# (static and -trimpath, as repo.Build, make build and the image build them),
# so that the packages they share compile once, and linked without symbols
# or DWARF, which a test's stack trace does not need. A new machine spent
# minutes compiling the shared packages twice and linking each test binary
# with gcc.
# GO_FLAGS_ENV is the same for the go commands make test runs beside them
# (verify's generators and go test, the monitoring module, the lint's
# package loading): with other flags, each compiled its own copy of Helm
# and client-go.
GO_FLAGS_ENV = CGO_ENABLED=0 GOFLAGS=-trimpath
TEST_GO = $(GO_FLAGS_ENV) go test -ldflags='-s -w'

TEST_LOGS = $(LOCALBIN)/test-logs
.PHONY: test
test: ## Build everything; run unit, fuzz-seed and sandbox integration tests (in parts at once).
	@mkdir -p $(TEST_LOGS)
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) -k -Otarget BUILD_NICE='nice -n 19' TOOL_NICE='nice -n 10' test-parts

# In the order make starts them: the longest suite and the parts that need
# the most tools first.
.PHONY: test-parts
test-parts: test-imagecache test-node test-sandbox test-oldest-part lint verify bundle-validate test-monitoring run-smoke

# The packages that run the real node, OLM's own tools or the image for
# every platform (test-node); every other package needs only the sandbox's
# control plane, etcd and kwok (test-sandbox), and the ImageCache suite is a
# part of its own (test-imagecache).
NODE_PKGS = ./test/sandbox/realnode/... ./test/e2e/realnode/... ./test/e2e/install/... ./test/dockerfile/...
SANDBOX_PKGS = $$(go list ./... | grep -v -E '/test/(sandbox/realnode|e2e/realnode|e2e/install|dockerfile|e2e/imagecache)(/|$$)')

.PHONY: test-imagecache
test-imagecache: sandbox-tools test-imagecache-compiled ## The ImageCache suite on KUBE_VERSION with node pull Jobs (the default).
	$(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/imagecache/ 2>&1 | tee $(TEST_LOGS)/imagecache.log

# The ImageCache suite's packages compiled before the other suites compile
# theirs (order-only below): they share most packages, and two go commands
# compiling them at once compile each twice, while the first suite waits.
.PHONY: test-imagecache-compiled
test-imagecache-compiled:
	$(TEST_GO) -c -o /dev/null ./test/e2e/imagecache/

.PHONY: test-sandbox
test-sandbox: sandbox-tools | test-imagecache-compiled ## Every package but the ImageCache suite and the real-node ones: unit, fuzz seeds, sandbox suites.
	$(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) $(SANDBOX_PKGS) 2>&1 | tee $(TEST_LOGS)/sandbox.log

.PHONY: test-node
test-node: sandbox-tools realnode-tools olm-e2e-tools olm-tools | test-imagecache-compiled ## The real-node, install and image packages (as root).
	$(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) $(NODE_PKGS) 2>&1 | tee $(TEST_LOGS)/node.log

# test/dockerfile with the image built for every platform: `make test`
# builds this machine's alone and holds it to the record `make bundle` made
# of every platform (hack/image/lock).
.PHONY: test-image
test-image: olm-e2e-tools ## The image tests (test/dockerfile) with the image built for every platform.
	IMAGE_TEST_PLATFORMS=all $(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) ./test/dockerfile/

# What the oldest Kubernetes claimed (KUBE_OLDEST_VERSION) can break, run
# there by `make test` with a Job per (image, node): the tests of the API
# surface whose behaviour moved between 1.27 and KUBE_VERSION. Jobs, their
# pods and the Job controller's failure, back-off and deletion handling
# (operations, failed and transient pulls, Jobs deleted, retention); node
# taints and joining nodes; admission (Pod Security, LimitRange and quota
# refusals, the webhook); printer columns; finalizers; Leases; the workload
# APIs fromWorkloads reads; request size limits. `make test-oldest` runs the
# whole suite there; test/sandbox checks each name is a test of the suite.
OLDEST_TESTS = TestOperations TestFailedPull TestTransientPullErrorsRetried TestJobsDeletedMidOperation \
	TestRetentionMatrix TestStartupTaint TestNewNodes TestRestrictedNamespace TestDeleteNamespaceRefusedAtStart \
	TestRefusedJobs TestJobResourcesMeetLimits TestKubectlColumns TestPinBookkeeping TestSecondInstallStandsBy \
	TestFromWorkloadsPullsBeforeAPausedRollout TestStatusTooLarge
# The pull Job granularity of the suite's runs on KUBE_OLDEST_VERSION: the
# other one than test-imagecache's, so that each runs on a real control plane.
OLDEST_GRANULARITY ?= image
OLDEST_RUN = $(shell echo '$(strip $(OLDEST_TESTS))' | sed 's/ /|/g')

# print-VARIABLE prints a variable's value, for the tests that check one.
print-%:
	@echo '$($*)'

.PHONY: test-oldest-part
test-oldest-part: sandbox-tools kube-oldest-tools | test-imagecache-compiled ## The ImageCache suite's OLDEST_TESTS on KUBE_OLDEST_VERSION, with a Job per (image, node).
	E2E_KUBE_VERSION=$(KUBE_OLDEST_VERSION) E2E_PULL_JOB_GRANULARITY=$(OLDEST_GRANULARITY) $(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) \
		-run '^($(OLDEST_RUN))$$' ./test/e2e/imagecache/ 2>&1 | tee $(TEST_LOGS)/oldest.log

# The whole ImageCache suite on the control plane of the oldest Kubernetes
# the chart and the CSV claim, with a Job per (image, node) by default.
.PHONY: test-oldest
test-oldest: sandbox-tools kube-oldest-tools ## The whole ImageCache suite on KUBE_OLDEST_VERSION's apiserver, kcm and scheduler (OLDEST_GRANULARITY).
	E2E_KUBE_VERSION=$(KUBE_OLDEST_VERSION) E2E_PULL_JOB_GRANULARITY=$(OLDEST_GRANULARITY) $(TEST_GO) -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/imagecache/

# The chart's alerts and dashboard, tested with Prometheus's own libraries in
# a module of their own (test/monitoring/go.mod), so that the product never
# builds against Prometheus's dependencies. The alerts are evaluated on the
# scrapes test/e2e/imagecache recorded (TestAlertsOnScrapedSeries, which
# also runs this on its own fresh scrapes; -update-scrapes keeps them).
.PHONY: test-monitoring
test-monitoring: ## The chart's alerts on recorded controller scrapes, and its dashboard's queries (Prometheus's libraries).
	cd test/monitoring && $(GO_FLAGS_ENV) $(BUILD_NICE) go test -ldflags='-s -w' -count=1 ./...

# Fuzz targets: package and function. Each runs FUZZTIME in `make fuzz`,
# FUZZTIME_LONG in `make fuzz-long`; their seed corpora, and every input a
# run found (testdata/fuzz), run in every `go test`, so in `make test`.
# `make test` runs no fuzzing itself: it needs every package the targets
# import built again with the fuzzer's instrumentation (Kubernetes' API
# types, controller-runtime, Helm), about 7 CPU-minutes on a new machine,
# for ten seconds of search each.
FUZZ_TARGETS = ./internal/images:FuzzNormalize ./internal/results:FuzzAtDeadline \
	./internal/results:FuzzSettle ./internal/webhook:FuzzAdmissionDecode \
	./internal/operator:FuzzTranslate ./internal/jobs:FuzzNames ./internal/jobs:FuzzParseUIDRange

# The packages that need no sandbox: the pure decisions, the reconciler on a
# fake client, the webhook's rules, the commands. The inner loop.
UNIT_PKGS = $$(go list ./... | grep -v -E '/test/|/e2e(/|$$)')

.PHONY: test-unit
test-unit: ## Unit tests only (no sandbox, no tools): seconds, for the inner loop.
	go test -count=1 $(UNIT_PKGS)

.PHONY: fuzz
fuzz: ## Short fuzz runs of the parsers and decoders.
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
		$(BUILD_NICE) go test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) $${t%%:*} || exit 1; done

.PHONY: run-smoke
# The kwok sandbox (SANDBOX_REAL_NODE empty): fast, and it proves that the
# sample KubeFledged, applied before the caches, leaves ImageCache writes
# working there. In the checkout's .sandbox/, not bin/, which may be shared.
# A node pull Job reads a failed pull at the kubelet's first ErrImagePull;
# a Job per (image, node) may first see ImagePullBackOff: either is the kubelet's.
RUN_SMOKE_DIR = $(CURDIR)/.sandbox/run-smoke
run-smoke: build sandbox-tools ## `make run` on a fresh sandbox, until the samples settle; checks their final status.
	rm -rf $(RUN_SMOKE_DIR) && mkdir -p $(RUN_SMOKE_DIR)
	RUN_UNTIL_SETTLED=1 SANDBOX_DIR=$(RUN_SMOKE_DIR)/sandbox SANDBOX_REAL_NODE= KUBECONFIG= hack/run.sh 2>&1 | tee $(RUN_SMOKE_DIR)/run-smoke.log
	grep -Eq '^kubefledged +True +InstallSuccessful' $(RUN_SMOKE_DIR)/run-smoke.log
	grep -Eq '^imagecache1 +True +Succeeded' $(RUN_SMOKE_DIR)/run-smoke.log
	grep -Eq '^imagecache-failing +False +Failed' $(RUN_SMOKE_DIR)/run-smoke.log
	grep -Eq 'ErrImagePull|ImagePullBackOff' $(RUN_SMOKE_DIR)/run-smoke.log

# The control planes `make bench` measures, one full run each: stock (the figures; what
# managed clusters run) and tuned (the page's second column). The tuned run adds a full
# run to the stock one (its scenarios 1-4 took 40 minutes at the default scale in the last
# tuned runs); BENCH_PROFILES=stock skips it.
BENCH_PROFILES ?= stock tuned

.PHONY: bench
bench: tools ## Benchmarks on the sandbox, stock then tuned; writes docs/benchmarks.md, .json and -tuned.json (BENCH_* variables set the scale).
	for p in $(BENCH_PROFILES); do \
		SANDBOX_PROFILE=$$p KUBEFLEDGED_BENCH=1 go test -count=1 -run '^TestBench$$' -v -timeout $${BENCH_TIMEOUT:-180m} ./test/bench/ 2>&1 | tee $(CURDIR)/bin/bench-$$p.log; \
	done
	go run ./hack/benchreport

##@ Build

.PHONY: build
build: ## Build the kubefledged binary into bin/.
	CGO_ENABLED=0 $(TOOL_NICE) go build -trimpath -o $(LOCALBIN)/kubefledged .

# Where make chart-push puts the chart: REGISTRY/PATH, under which it lands
# as NAME:VERSION (helm install oci://REGISTRY/PATH/kubefledged --version V).
CHART_REPO ?= oci://ghcr.io/kubefledged/charts
# Where it keeps the packaged chart.
CHART_OUT ?= $(LOCALBIN)/chart

.PHONY: chart-push
chart-push: ## Package the chart into CHART_OUT (bin/chart) and push it to CHART_REPO as an OCI artifact (Helm's credentials; plain HTTP for localhost, 127.0.0.1 or INSECURE=1).
	go run ./hack/chart-push -chart helm-charts/kubefledged -repo $(CHART_REPO) -out $(CHART_OUT) \
		-source-date-epoch $$(git log -1 --format=%ct) $(if $(INSECURE),-plain-http)

.PHONY: run
run: build tools $(if $(SANDBOX_REAL_NODE),realnode-tools) ## Run the product: against KUBECONFIG's cluster if one answers, else on a fresh sandbox (SANDBOX_REAL_NODE=1: as pods on the real node).
	IMG=$(IMG) VERSION=$(VERSION) SANDBOX_REAL_NODE=$(SANDBOX_REAL_NODE) hack/run.sh

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine; none on the dev machines).
	docker build -t $(IMG) .

##@ Sandbox

.PHONY: sandbox-up
sandbox-up: tools $(if $(SANDBOX_REAL_NODE),realnode-tools) ## Start the sandbox cluster in the background (kubeconfig in .sandbox/kubeconfig).
	hack/sandbox.sh up $(SANDBOX_DIR) $(SANDBOX_NODES) $(if $(SANDBOX_REAL_NODE),--real-node)

.PHONY: sandbox-down
sandbox-down: ## Stop the sandbox cluster.
	hack/sandbox.sh down $(SANDBOX_DIR)

##@ Deployment

.PHONY: install
install: manifests $(KUBECTL_BUILD) ## Install the CRDs into the cluster in KUBECONFIG (kubectl: the PATH's, else bin/).
	$(KUBECTL) apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: $(KUBECTL_BUILD) ## Remove the CRDs.
	$(KUBECTL) delete --ignore-not-found -f config/crd/bases

##@ Tools

# versioned-link NAME, VERSION: bin/NAME, a symlink to bin/NAME-VERSION,
# which a rule of its own builds. The version is in the file's name, so a
# bumped VERSION names a file that is not there yet and is built, while an
# unchanged one is found and reused. The symlink is checked at every run
# (phony), not by time: going back to a version built before must point it
# at that file again, though that file is the older one. Scripts and tests
# keep calling bin/NAME.
define versioned-link
.PHONY: $(LOCALBIN)/$(1)
$(LOCALBIN)/$(1): $(LOCALBIN)/$(1)-$(2)
	@[ "$$$$(readlink $$@)" = "$(1)-$(2)" ] || { echo "bin/$(1) -> $(1)-$(2)"; ln -sfn $(1)-$(2) $$@; }
endef

# `make test` runs its builds in three tiers, by what waits for them: the
# control plane, etcd and kwok, which the first suite waits for, at normal
# priority (CRITICAL_TOOLS; the control plane's build says so itself);
# the tools of the later suites (the real node's, OLM's, operator-sdk, the
# 1.27 control plane: SUITE_TOOLS, and those whose rules name TOOL_NICE)
# at TOOL_NICE (nice 10); the rest, the lint, verify and their tools, at
# BUILD_NICE (nice 19). A suite started late is what ended a new machine's
# run: at one priority for all, the 1.27 control plane was built last, at
# 45 minutes, and its suite ran after it. Both are empty outside make test.
BUILD_NICE ?=
TOOL_NICE ?=
CRITICAL_TOOLS = kwok
SUITE_TOOLS = kustomize
build-nice = $(if $(filter $(1),$(CRITICAL_TOOLS)),,$(if $(filter $(1),$(SUITE_TOOLS)),$(TOOL_NICE),$(BUILD_NICE)))

# versioned-tool NAME, VERSION, PACKAGE, FLAGS: `go install PACKAGE@VERSION`
# into bin/NAME-VERSION, linked as bin/NAME.
define versioned-tool
$(LOCALBIN)/$(1)-$(2):
	rm -rf $(LOCALBIN)/.install-$(1) && mkdir -p $(LOCALBIN)/.install-$(1)
	GOBIN=$(LOCALBIN)/.install-$(1) $(call build-nice,$(1)) go install $(4) $(3)@$(2)
	mv $(LOCALBIN)/.install-$(1)/$(1) $$@ && rm -rf $(LOCALBIN)/.install-$(1)
$(call versioned-link,$(1),$(2))
endef

# TOOL_MODULES: VARIABLE:DIR:MODULE for each tool built from the wrapper
# module hack/tools/DIR, whose go.mod pins MODULE at what VARIABLE must say
# (hack/olm.mk adds its own).
TOOL_MODULES = KUBE_VERSION:kube:k8s.io/kubernetes KUBE_OLDEST_VERSION:kube-oldest:k8s.io/kubernetes ETCD_VERSION:etcd:go.etcd.io/etcd/server/v3

# check-tool-version VARIABLE, DIR, MODULE: a shell command that fails when
# hack/tools/DIR/go.mod pins MODULE at another version than VARIABLE.
check-tool-version = want=$$(awk -v m='$(3)' '/^[ \t]*\/\// {next} {for (i = 1; i < NF; i++) if ($$i == m && $$(i+1) ~ /^v[0-9]/) {print $$(i+1); exit}}' hack/tools/$(2)/go.mod); \
	[ "$$want" = "$($(1))" ] || { echo "$(1) is $($(1)) but hack/tools/$(2)/go.mod pins $(3) at $$want: change both"; exit 1; };

.PHONY: tool-versions-verify
tool-versions-verify: ## Fail when a tool's version variable differs from what its hack/tools module's go.mod pins.
	@$(foreach t,$(TOOL_MODULES),$(call check-tool-version,$(word 1,$(subst :, ,$(t))),$(word 2,$(subst :, ,$(t))),$(word 3,$(subst :, ,$(t)))))
	@echo "the tools' version variables match hack/tools/*/go.mod"
	@claim=$$(sed -n 's/^kubeVersion: *">=\(1\.[0-9]*\)\.0-0"$$/\1/p' helm-charts/kubefledged/Chart.yaml); \
	[ "$$claim" = "$(word 1,$(subst ., ,$(KUBE_OLDEST_VERSION:v%=%))).$(word 2,$(subst ., ,$(KUBE_OLDEST_VERSION)))" ] || \
		{ echo "the chart claims Kubernetes $$claim and later, but KUBE_OLDEST_VERSION, the oldest make test runs on, is $(KUBE_OLDEST_VERSION): change them together"; exit 1; }
	@echo "the oldest Kubernetes claimed is the one make test runs on, $(KUBE_OLDEST_VERSION)"

KUBE_CMDS := kube-apiserver kube-controller-manager kube-scheduler kubectl
KUBE_BINS := $(addprefix $(LOCALBIN)/,$(KUBE_CMDS))
# The oldest version's control plane: no link, the sandbox picks these files
# by name when E2E_KUBE_VERSION is KUBE_OLDEST_VERSION (test/sandbox).
KUBE_OLDEST_CMDS := kube-apiserver kube-controller-manager kube-scheduler
KUBE_OLDEST_BINS := $(foreach c,$(KUBE_OLDEST_CMDS),$(LOCALBIN)/$(c)-$(KUBE_OLDEST_VERSION))

# Targets name kube-oldest-tools, never $(KUBE_OLDEST_BINS): make expands a
# rule's prerequisites where it reads the rule, and a variable defined further
# down is empty there, which is how make test once ran without them (stop 37).
# test/sandbox's TestMakeBuildsEveryControlPlaneItRuns keeps it so.
.PHONY: kube-oldest-tools
kube-oldest-tools: $(KUBE_OLDEST_BINS) ## Build KUBE_OLDEST_VERSION's apiserver, kcm and scheduler into bin/.

# What every sandbox needs: the control plane, etcd and kwok. Named by this
# target, not a variable: a rule above this line would read the variable
# empty (see kube-oldest-tools).
.PHONY: sandbox-tools
sandbox-tools: $(KUBE_BINS) $(LOCALBIN)/etcd $(LOCALBIN)/kwok

.PHONY: tools
tools: $(KUBE_BINS) $(LOCALBIN)/etcd $(LOCALBIN)/kwok $(LOCALBIN)/controller-gen olm-tools ## Build the pinned tools into bin/.

# kube-tools DIR, VERSION, CMDS, NICE, AFTER: bin/CMD-VERSION for each of
# CMDS, in one build from the wrapper module hack/tools/DIR (they share most
# of their packages), through a directory of its own so that a failed build
# leaves no file behind that would pass for a built one. NICE names the
# variable it runs under (TOOL_NICE), empty for none; AFTER are files it
# waits for, built by another go command that compiles the same packages:
# two go commands compiling them at once compile each twice (the build
# cache is filled, not shared, while they run).
define kube-tools
$(foreach c,$(3),$(LOCALBIN)/$(c)-$(2)) &: | $(5)
	rm -rf $(LOCALBIN)/.build-$(1)-$(firstword $(3)) && mkdir -p $(LOCALBIN)/.build-$(1)-$(firstword $(3))
	cd hack/tools/$(1) && $(if $(4),$$($(4))) go build -trimpath -ldflags='-s -w $(call kube-version-ldflags,$(2))' -o $(LOCALBIN)/.build-$(1)-$(firstword $(3))/ \
		$(addprefix k8s.io/kubernetes/cmd/,$(3))
	for c in $(3); do mv $(LOCALBIN)/.build-$(1)-$(firstword $(3))/$$$$c $(LOCALBIN)/$$$$c-$(2); done
	rm -rf $(LOCALBIN)/.build-$(1)-$(firstword $(3))
endef
$(eval $(call kube-tools,kube,$(KUBE_VERSION),$(KUBE_CMDS),,))
$(foreach c,$(KUBE_CMDS),$(eval $(call versioned-link,$(c),$(KUBE_VERSION))))
$(eval $(call kube-tools,kube-oldest,$(KUBE_OLDEST_VERSION),$(KUBE_OLDEST_CMDS),TOOL_NICE,))

$(LOCALBIN)/etcd-$(ETCD_VERSION):
	mkdir -p $(LOCALBIN)
	cd hack/tools/etcd && go build -trimpath -ldflags='-s -w' -o $@ .
$(eval $(call versioned-link,etcd,$(ETCD_VERSION)))

$(eval $(call versioned-tool,kwok,$(KWOK_VERSION),sigs.k8s.io/kwok/cmd/kwok,-trimpath -ldflags='-s -w'))
$(eval $(call versioned-tool,controller-gen,$(CONTROLLER_GEN_VERSION),sigs.k8s.io/controller-tools/cmd/controller-gen))
$(eval $(call versioned-tool,kustomize,$(KUSTOMIZE_VERSION),sigs.k8s.io/kustomize/kustomize/v5))
$(eval $(call versioned-tool,golangci-lint,$(GOLANGCI_LINT_VERSION),github.com/golangci/golangci-lint/v2/cmd/golangci-lint))

# OLM bundle, kustomize deploy and operator-sdk targets.
include hack/olm.mk
# The real node (kubelet + containerd) beside the kwok nodes.
include hack/realnode.mk
# Long fault-injection runs.
include hack/chaos.mk
include hack/image.mk
