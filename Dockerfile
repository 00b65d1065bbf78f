# The one kube-fledged image: the operator (`kubefledged operator`, with
# watches.yaml and the chart in its working directory), the controller and
# webhook (`kubefledged controller`), and the helpers the pull and delete Jobs
# run (`/kubefledged copy-self`, `exit`, `cri-rmi`).
#
# Multi-arch: docker buildx build --platform linux/amd64,linux/arm64,linux/arm/v7,linux/ppc64le,linux/s390x .
# (internal/platform's list: the controller skips nodes of any other
# architecture.) The Go stage runs on the build machine's platform and
# cross-compiles, so no emulation is needed. test/dockerfile checks this
# file against the tree.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
# Set by buildx to each --platform's; empty (the build machine's) otherwise.
ARG TARGETOS
ARG TARGETARCH
# v7 for linux/arm/v7, the GOARM level; empty for the other platforms.
ARG TARGETVARIANT
ARG VERSION=v0.11.0
WORKDIR /src
# Modules first: they change less often than the code, so the layer caches.
COPY go.mod go.sum ./
RUN go mod download
COPY main.go ./
COPY api/ api/
COPY internal/ internal/
# Static: copy-self puts this binary into the images being pulled, which may
# have no C library at all.
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH GOARM=${TARGETVARIANT#v} go build -trimpath \
    -ldflags "-s -w -X github.com/kubefledged/kube-fledged/internal/commands.Version=${VERSION}" \
    -o /out/kubefledged .

FROM gcr.io/distroless/static:nonroot
# The Jobs call the helpers by this absolute path.
COPY --from=build /out/kubefledged /kubefledged
# The operator's default --watches-file is watches.yaml in the working
# directory, and the watches' chart paths are relative to that file.
WORKDIR /opt/kubefledged
COPY watches.yaml ./
COPY helm-charts/ helm-charts/
USER 65532:65532
ENTRYPOINT ["/kubefledged"]
