# The product image, built without a Docker engine by hack/image (Go and
# go-containerregistry, from go.mod): the Dockerfile's image, for every
# platform of IMAGE_PLATFORMS, in one OCI image index. Included by the
# Makefile, whose LOCALBIN, VERSION and IMG it uses.

# The OCI layout and the index digest land here.
IMAGE_DIR ?= $(LOCALBIN)/image
# Empty for every platform of internal/platform (linux/amd64, arm64, arm/v7,
# ppc64le, s390x), the nodes the controller serves; a subset of them
# (IMAGE_PLATFORMS=linux/amd64) builds in a fifth of the time, each platform
# being one cross-compile.
IMAGE_PLATFORMS ?=
# INSECURE=1 lets image-push use plain HTTP to any registry; registries on
# localhost and loopback addresses get it without asking.
INSECURE ?=

# The Go release that compiles our image, for `make image` and for the
# digest `make bundle` pins alike: another Go makes another binary, so
# another digest, and the pushed image would not be the one the bundle
# names. GOTOOLCHAIN fetches it from the module proxy when the local go is
# another release. Raise it with go.mod's go line.
IMAGE_GO ?= go1.26.8
IMAGE_BUILD = GOTOOLCHAIN=$(IMAGE_GO) go run ./hack/image build
# The digest of `make image`'s index, from IMAGE_LOCK while the key of its
# inputs matches the tree, else built for every platform and recorded there
# (hack/image/lock.go; `make bundle` pins it in the CSV).
IMAGE_LOCK ?= hack/image/digest.lock
IMAGE_DIGEST = GOTOOLCHAIN=$(IMAGE_GO) go run ./hack/image digest -version v$(VERSION) -lock $(IMAGE_LOCK)

##@ Image (no Docker engine)

.PHONY: image
image: ## Build the multi-arch image into bin/image/oci (OCI layout); prints the index digest, also in bin/image/digest.
	$(IMAGE_BUILD) -out $(IMAGE_DIR)/oci -digest-file $(IMAGE_DIR)/digest \
		-version v$(VERSION) -ref $(IMG) $(if $(IMAGE_PLATFORMS),-platforms $(IMAGE_PLATFORMS))

.PHONY: image-push
image-push: image ## Build, then push the index to IMG=registry/repo:tag (HTTPS; plain HTTP for localhost, 127.0.0.1 or INSECURE=1).
	go run ./hack/image push -layout $(IMAGE_DIR)/oci $(if $(INSECURE),-insecure) $(IMG)

# The OLM bundle and a file-based catalog of it, as images, by the same
# program (see hack/image/bundle.go and catalog.go). BUNDLE_IMG comes from
# hack/olm.mk. The catalog names the bundle by BUNDLE_IMG, so pushing the
# catalog pushes the bundle first: a catalog whose bundle cannot be pulled
# installs nothing.
BUNDLE_IMAGE_DIR ?= $(LOCALBIN)/bundle-image
CATALOG_IMAGE_DIR ?= $(LOCALBIN)/catalog-image
CATALOG_IMG ?= ghcr.io/kubefledged/kubefledged-catalog:v$(VERSION)

.PHONY: bundle-image
bundle-image: ## Build the bundle image from bundle/ into bin/bundle-image/oci (BUNDLE_IMG names it); prints its digest.
	go run ./hack/image bundle -dir bundle -out $(BUNDLE_IMAGE_DIR)/oci -digest-file $(BUNDLE_IMAGE_DIR)/digest \
		-ref $(BUNDLE_IMG) $(if $(IMAGE_PLATFORMS),-platforms $(IMAGE_PLATFORMS))

.PHONY: bundle-image-push
bundle-image-push: bundle-image ## Build, then push the bundle image to BUNDLE_IMG.
	go run ./hack/image push -layout $(BUNDLE_IMAGE_DIR)/oci $(if $(INSECURE),-insecure) $(BUNDLE_IMG)

.PHONY: catalog-image
catalog-image: bundle-image $(OPM) $(LOCALBIN)/grpc_health_probe ## Build a file-based catalog of the bundle (opm render, validate) into bin/catalog-image/oci; CATALOG_IMG names it.
	go run ./hack/image catalog -out $(CATALOG_IMAGE_DIR)/oci -configs $(CATALOG_IMAGE_DIR)/configs \
		-digest-file $(CATALOG_IMAGE_DIR)/digest -ref $(CATALOG_IMG) \
		-opm $(OPM) -probe $(LOCALBIN)/grpc_health_probe -bundle $(BUNDLE_IMAGE_DIR)/oci

.PHONY: catalog-image-push
catalog-image-push: catalog-image bundle-image-push ## Build, then push the bundle to BUNDLE_IMG and the catalog to CATALOG_IMG.
	go run ./hack/image push -layout $(CATALOG_IMAGE_DIR)/oci $(if $(INSECURE),-insecure) $(CATALOG_IMG)
