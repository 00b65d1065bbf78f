# OLM bundle, kustomize deployment, and the tools they need. Included by the
# Makefile, whose LOCALBIN, VERSION, IMG and KUBECTL it uses.

OPERATOR_SDK_VERSION ?= v1.42.2
# The Kubernetes version operator-sdk v1.42.2 is released with; only printed
# by `operator-sdk version`.
OPERATOR_SDK_K8S_VERSION ?= v1.33.1
OPERATOR_SDK ?= $(LOCALBIN)/operator-sdk
KUSTOMIZE ?= $(LOCALBIN)/kustomize

# The OLM package. Its CSV is $(BUNDLE_PACKAGE).v$(VERSION).
BUNDLE_PACKAGE ?= kube-fledged
CHANNELS ?= stable
DEFAULT_CHANNEL ?= stable
BUNDLE_GEN_FLAGS ?= -q --overwrite --package $(BUNDLE_PACKAGE) --version $(VERSION) \
	--channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
BUNDLE_IMG ?= ghcr.io/kubefledged/kubefledged-bundle:v$(VERSION)
# The OpenShift releases the bundle is offered on, as Red Hat's catalogs read
# com.redhat.openshift.versions ("v4.14": 4.14 and later). 4.14 is the first
# on Kubernetes 1.27, the CSV's minKubeVersion (the chart's kubeVersion);
# raise both together. operator-sdk does not write this annotation, so
# `make bundle` adds it to bundle/metadata/annotations.yaml and, as a label,
# to bundle.Dockerfile.
OPENSHIFT_VERSIONS ?= v4.14
BUNDLE_CSV = bundle/manifests/$(BUNDLE_PACKAGE).clusterserviceversion.yaml
# Scratch space in the work tree (ignored by git), so that setting IMG never
# edits the checked-in config/, and two work trees sharing one bin/ can each
# build their bundle at once.
OLM_SCRATCH = $(CURDIR)/.olm
# The bundle names our image by digest, as OpenShift's mirroring needs
# (ImageDigestMirrorSet and `oc adm catalog mirror` remap digests only):
# IMG's repository at the digest of the image `make image` builds from this
# tree, every platform. The build is reproducible and holds no trace of the
# commit (hack/image/main.go), so the digest is known before the image is
# pushed, and regenerating the bundle gives the same one. It is recorded in
# IMAGE_LOCK with a key of the build's inputs (hack/image/lock.go): while
# the key matches, the bundle takes it from there without a build, and
# bundle-verify (IMAGE_LOCK_CHECK) fails at once, without building, when
# the key differs. IMG's tag (or digest) is dropped.
IMG_NAME = $(shell echo '$(IMG)' | sed -E 's/@.*$$//; s|:[^:/]*$$||')
# How long deploy waits for the operator, and undeploy for the releases to go.
DEPLOY_TIMEOUT ?= 120s

# Every version ldflag operator-sdk's own Makefile sets: the version becomes
# the bundle's builder label, the image version the scorecard image tag.
OPERATOR_SDK_LDFLAGS = $(foreach v,Version GitVersion ImageVersion,-X 'github.com/operator-framework/operator-sdk/internal/version.$(v)=$(OPERATOR_SDK_VERSION)') \
	-X 'github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=$(OPERATOR_SDK_K8S_VERSION)'

##@ OLM bundle

.PHONY: bundle
bundle: $(OPERATOR_SDK) $(KUSTOMIZE) ## Regenerate bundle/ and bundle.Dockerfile from config/; the image is IMG's repository at the digest of this tree's build.
	@# `generate kustomize manifests` only reads a PROJECT file for the project's
	@# name and type; a stand-in one lets it normalise the hand-written CSV base
	@# without scaffolding this hybrid (Helm operator + Go) project.
	@rm -rf $(OLM_SCRATCH) && mkdir -p $(OLM_SCRATCH)/project
	@printf 'domain: kubefledged.io\nlayout:\n- helm.sdk.operatorframework.io/v1\nprojectName: $(BUNDLE_PACKAGE)\nversion: "3"\n' >$(OLM_SCRATCH)/project/PROJECT
	cd $(OLM_SCRATCH)/project && $(OPERATOR_SDK) generate kustomize manifests -q --interactive=false \
		--package $(BUNDLE_PACKAGE) --input-dir $(CURDIR)/config/manifests --output-dir $(CURDIR)/config/manifests
	cp -r config $(OLM_SCRATCH)/
	$(IMAGE_DIGEST) -out $(OLM_SCRATCH)/image $(if $(IMAGE_LOCK_CHECK),-check) >$(OLM_SCRATCH)/image.digest
	cd $(OLM_SCRATCH)/config/manager && $(KUSTOMIZE) edit set image controller=$(IMG_NAME)@$$(cat $(OLM_SCRATCH)/image.digest)
	@# createdAt says when this version's bundle was first generated: it is
	@# kept while VERSION stays, so that regenerating an unchanged bundle
	@# gives no diff.
	@created=$$(sed -n 's/^    createdAt: //p' $(BUNDLE_CSV) 2>/dev/null || true); \
	 oldversion=$$(sed -n 's/^  version: //p' $(BUNDLE_CSV) 2>/dev/null || true); \
	 rm -rf bundle/manifests bundle/metadata bundle/tests; \
	 echo "kustomize build config/manifests | operator-sdk generate bundle $(BUNDLE_GEN_FLAGS)"; \
	 $(KUSTOMIZE) build $(OLM_SCRATCH)/config/manifests | $(OPERATOR_SDK) generate bundle $(BUNDLE_GEN_FLAGS); \
	 if [ -n "$$created" ] && [ "$$oldversion" = "$(VERSION)" ]; then \
		sed -i "s/^    createdAt: .*/    createdAt: $$created/" $(BUNDLE_CSV); fi
	printf '\n  # The OpenShift releases to offer the bundle on (hack/olm.mk says why).\n  com.redhat.openshift.versions: "$(OPENSHIFT_VERSIONS)"\n' >>bundle/metadata/annotations.yaml
	sed -i -e '/^LABEL com.redhat.openshift.versions=/d' \
		-e '/^LABEL operators.operatorframework.io.bundle.channel.default.v1=/a LABEL com.redhat.openshift.versions=$(OPENSHIFT_VERSIONS)' bundle.Dockerfile
	$(OPERATOR_SDK) bundle validate ./bundle

# One warning is known to be wrong and let through: the removed-APIs check
# flags any RBAC rule on cronjobs, since a rule names no API version, as if
# it granted batch/v1beta1 (removed in 1.25). fromWorkloads lists and watches
# batch/v1 CronJobs, served since 1.21; the warning must name cronjobs in the
# CSV's permissions and nothing else to pass.
BUNDLE_KNOWN_WARNING := Migrate the API\(s\) for cronjobs: \(\[\\"ClusterServiceVersion\.Spec\.InstallStrategy\.StrategySpec\.ClusterPermissions\[[0-9]+\]\.Rules\[[0-9]+\]\\"\]\)"$$

.PHONY: bundle-validate
bundle-validate: $(OPERATOR_SDK) ## Validate bundle/ with OperatorHub's checks; any warning but BUNDLE_KNOWN_WARNING fails.
	@out=$$($(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework 2>&1) || { echo "$$out"; exit 1; }; \
	 echo "$$out"; \
	 if grep -iE 'level=warn|warning' <<<"$$out" | grep -qvE '$(BUNDLE_KNOWN_WARNING)'; then echo "bundle validate reported warnings"; exit 1; fi

.PHONY: bundle-verify
bundle-verify: $(OPERATOR_SDK) $(KUSTOMIZE) ## Fail when bundle/ or bundle.Dockerfile drifts from config/ (regenerates them in place).
	@# One line, which `make -n` runs too (it names $(MAKE)), so that a dry run has a folder to log to.
	@rm -rf $(CURDIR)/.verify-bundle && mkdir -p $(CURDIR)/.verify-bundle && \
	 cp -r bundle bundle.Dockerfile config/manifests/bases $(CURDIR)/.verify-bundle/ && \
	 { $(MAKE) -s bundle IMAGE_LOCK_CHECK=1 >$(CURDIR)/.verify-bundle/log 2>&1 || { cat $(CURDIR)/.verify-bundle/log; exit 1; }; }
	@for f in bundle bundle.Dockerfile; do \
		if ! diff -r $(CURDIR)/.verify-bundle/$$f $$f >/dev/null; then \
			echo "the OLM bundle drifted from its sources: $$f (run 'make bundle' and commit)"; \
			if diff -r $(CURDIR)/.verify-bundle/$$f $$f | grep -q '@sha256:'; then \
				echo "(the image this tree builds has another digest than the bundle names: the code, the chart or IMAGE_GO changed since)"; fi; \
			diff -r $(CURDIR)/.verify-bundle/$$f $$f | head -40; exit 1; fi; done
	@if ! diff -r $(CURDIR)/.verify-bundle/bases config/manifests/bases >/dev/null; then \
		echo "config/manifests/bases is not in operator-sdk's form (run 'make bundle' and commit)"; \
		diff -r $(CURDIR)/.verify-bundle/bases config/manifests/bases | head -40; exit 1; fi
	@echo "the OLM bundle matches its sources"

.PHONY: bundle-build
bundle-build: ## Build the bundle image with Docker (none on the dev machines: make bundle-image builds it without).
	docker build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

##@ Deployment with kustomize

.PHONY: deploy
deploy: $(KUSTOMIZE) $(KUBECTL_BUILD) ## Install the CRDs and the operator (config/default) into the cluster in KUBECONFIG; IMG sets the image.
	rm -rf $(OLM_SCRATCH) && mkdir -p $(OLM_SCRATCH) && cp -r config $(OLM_SCRATCH)/
	cd $(OLM_SCRATCH)/config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build $(OLM_SCRATCH)/config/default | $(KUBECTL) apply --server-side -f -
	$(KUBECTL) -n kube-fledged-system rollout status deployment/kube-fledged-operator --timeout=$(DEPLOY_TIMEOUT)

.PHONY: undeploy
undeploy: $(KUSTOMIZE) $(KUBECTL_BUILD) ## Remove what deploy installed, ImageCaches and KubeFledged releases first.
	@# A cache that pins holds the finalizer kubefledged.io/unpin until the
	@# controller has unpinned its images: delete the caches while it runs,
	@# or they (and their CRD) never go.
	if $(KUBECTL) get crd imagecaches.kubefledged.io >/dev/null 2>&1; then \
		$(KUBECTL) delete imagecaches.kubefledged.io --all --all-namespaces --wait --timeout=$(DEPLOY_TIMEOUT); fi
	@# The operator holds a finalizer on each KubeFledged and removes it once
	@# the release is uninstalled: delete them while it still runs, or they
	@# (and their CRD, and the namespace) never go.
	if $(KUBECTL) get crd kubefledgeds.charts.helm.kubefledged.io >/dev/null 2>&1; then \
		$(KUBECTL) delete kubefledgeds.charts.helm.kubefledged.io --all --all-namespaces --wait --timeout=$(DEPLOY_TIMEOUT); fi
	$(KUSTOMIZE) build config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ OLM tools

# The Go module proxy refuses operator-sdk's version list, so `go install
# ...@version` fails: hack/tools/operator-sdk pins it. The openpgp tag avoids
# the gpgme C library.
#
# scorecard-test is the program of operator-sdk's scorecard-test image
# (images/scorecard-test in its module), which runs the tests
# bundle/tests/scorecard names in a pod, reading the bundle there. Nothing
# here can pull quay.io's image, so test/e2e/install puts this binary into
# an image of hack/image's and runs `operator-sdk scorecard` with it on the
# real node. Same module and version as operator-sdk, which writes the
# config, and static, as the image has no C library: both are built static
# in one go command, which compiles the packages they share once.
TOOL_MODULES += OPERATOR_SDK_VERSION:operator-sdk:github.com/operator-framework/operator-sdk
SCORECARD_TEST ?= $(LOCALBIN)/scorecard-test
OPERATOR_SDK_BUILD = $(LOCALBIN)/.build-operator-sdk
$(LOCALBIN)/operator-sdk-$(OPERATOR_SDK_VERSION) $(LOCALBIN)/scorecard-test-$(OPERATOR_SDK_VERSION) &:
	rm -rf $(OPERATOR_SDK_BUILD) && mkdir -p $(OPERATOR_SDK_BUILD)
	cd hack/tools/operator-sdk && CGO_ENABLED=0 $(TOOL_NICE) go build -trimpath -tags containers_image_openpgp \
		-ldflags="-s -w $(OPERATOR_SDK_LDFLAGS)" -o $(OPERATOR_SDK_BUILD)/ \
		github.com/operator-framework/operator-sdk/cmd/operator-sdk github.com/operator-framework/operator-sdk/images/scorecard-test
	for c in operator-sdk scorecard-test; do mv $(OPERATOR_SDK_BUILD)/$$c $(LOCALBIN)/$$c-$(OPERATOR_SDK_VERSION); done
	rm -rf $(OPERATOR_SDK_BUILD)
$(eval $(call versioned-link,operator-sdk,$(OPERATOR_SDK_VERSION)))
$(eval $(call versioned-link,scorecard-test,$(OPERATOR_SDK_VERSION)))

.PHONY: olm-tools
olm-tools: $(OPERATOR_SDK) $(KUSTOMIZE) ## Build operator-sdk and kustomize into bin/.

# OLM itself and the catalog tools, from the wrapper module hack/tools/olm
# (whose go.mod says why these versions): opm for catalog-image, the rest
# for the OLM e2e and the images it pushes. All are static (CGO_ENABLED=0), so that the same binary runs on
# the host and in an image on an empty base; opm then lacks the sqlite
# driver (mattn/go-sqlite3 needs cgo), which only its deprecated sqlite
# index commands use: file-based catalogs (render, validate, serve) and
# `opm alpha bundle extract` never open a database. netgo and osusergo keep
# name and user lookups in Go, as upstream's release builds do;
# containers_image_openpgp avoids the gpgme C library.
OLM_VERSION ?= v0.38.0
OPM_VERSION ?= v1.61.0
GRPC_HEALTH_PROBE_VERSION ?= v0.4.41
OLM_TOOLS_DIR = hack/tools/olm
OLM_TOOLS_BUILD = cd $(OLM_TOOLS_DIR) && CGO_ENABLED=0 $(TOOL_NICE) go build -trimpath -tags containers_image_openpgp,netgo,osusergo
OLM_VERSION_LDFLAGS = -X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=$(OLM_VERSION)
OPM ?= $(LOCALBIN)/opm
TOOL_MODULES += OLM_VERSION:olm:github.com/operator-framework/operator-lifecycle-manager \
	OPM_VERSION:olm:github.com/operator-framework/operator-registry \
	GRPC_HEALTH_PROBE_VERSION:olm:github.com/grpc-ecosystem/grpc-health-probe

# OLM_BINS NAME:PACKAGE:VERSION, all five built by one go command, which
# compiles the packages they share once (and names each binary after its
# package's last element: grpc-health-probe); each is stamped with its
# version.
OLM_BINS = opm:github.com/operator-framework/operator-registry/cmd/opm:$(OPM_VERSION) \
	olm:github.com/operator-framework/operator-lifecycle-manager/cmd/olm:$(OLM_VERSION) \
	catalog:github.com/operator-framework/operator-lifecycle-manager/cmd/catalog:$(OLM_VERSION) \
	cpb:github.com/operator-framework/operator-lifecycle-manager/util/cpb:$(OLM_VERSION) \
	grpc_health_probe:github.com/grpc-ecosystem/grpc-health-probe:$(GRPC_HEALTH_PROBE_VERSION)
# olm-bin-file NAME:PACKAGE:VERSION: where it goes (bin/NAME-VERSION).
olm-bin-file = $(LOCALBIN)/$(word 1,$(subst :, ,$(1)))-$(word 3,$(subst :, ,$(1)))
OLM_BUILD = $(LOCALBIN)/.build-olm
$(foreach b,$(OLM_BINS),$(call olm-bin-file,$(b))) &:
	rm -rf $(OLM_BUILD) && mkdir -p $(OLM_BUILD)
	$(OLM_TOOLS_BUILD) -ldflags='-s -w $(OLM_VERSION_LDFLAGS) -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)' \
		-o $(OLM_BUILD)/ $(foreach b,$(OLM_BINS),$(word 2,$(subst :, ,$(b))))
	$(foreach b,$(OLM_BINS),mv $(OLM_BUILD)/$(notdir $(word 2,$(subst :, ,$(b)))) $(call olm-bin-file,$(b));)
	rm -rf $(OLM_BUILD)
$(foreach b,$(OLM_BINS),$(eval $(call versioned-link,$(word 1,$(subst :, ,$(b))),$(word 3,$(subst :, ,$(b))))))

.PHONY: opm
opm: $(OPM) ## Build opm (operator-registry, pinned in hack/tools/olm) into bin/.

.PHONY: olm-e2e-tools
olm-e2e-tools: $(OPM) $(LOCALBIN)/olm $(LOCALBIN)/catalog $(LOCALBIN)/cpb $(LOCALBIN)/grpc_health_probe $(SCORECARD_TEST) ## Build what the real OLM e2e and the scorecard run: OLM's olm and catalog operators, opm, cpb, grpc_health_probe, scorecard-test.
