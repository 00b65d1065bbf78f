# The product image, built without a Docker engine by hack/image (Go and
# go-containerregistry, from go.mod): the Dockerfile's image, for every
# platform of IMAGE_PLATFORMS, in one OCI image index. Included by the
# Makefile, whose LOCALBIN, VERSION and IMG it uses.

# The OCI layout and the index digest land here.
IMAGE_DIR ?= $(LOCALBIN)/image
# Empty for hack/image's own list, linux/amd64 and linux/arm64; one platform
# (IMAGE_PLATFORMS=linux/amd64) halves the build time.
IMAGE_PLATFORMS ?=
# INSECURE=1 lets image-push use plain HTTP to any registry; registries on
# localhost and loopback addresses get it without asking.
INSECURE ?=

##@ Image (no Docker engine)

.PHONY: image
image: ## Build the multi-arch image into bin/image/oci (OCI layout); prints the index digest, also in bin/image/digest.
	go run ./hack/image build -out $(IMAGE_DIR)/oci -digest-file $(IMAGE_DIR)/digest \
		-version v$(VERSION) -ref $(IMG) $(if $(IMAGE_PLATFORMS),-platforms $(IMAGE_PLATFORMS))

.PHONY: image-push
image-push: image ## Build, then push the index to IMG=registry/repo:tag (HTTPS; plain HTTP for localhost, 127.0.0.1 or INSECURE=1).
	go run ./hack/image push -layout $(IMAGE_DIR)/oci $(if $(INSECURE),-insecure) $(IMG)
