package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// push sends the index `image build` wrote to ref and returns ref's
// repository@digest. Credentials come from the Docker config
// (~/.docker/config.json, or $DOCKER_CONFIG) as `docker login`, `crane auth
// login` or a CI's login step leave them.
func push(ctx context.Context, dir, ref string, insecure bool) (string, error) {
	index, _, err := layoutIndex(dir, "make image")
	if err != nil {
		return "", err
	}
	r, err := parseRef(ref, insecure)
	if err != nil {
		return "", err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if err := remote.WriteIndex(r, index, opts...); err != nil {
		return "", fmt.Errorf("push %s: %w", r, err)
	}
	want, err := index.Digest()
	if err != nil {
		return "", err
	}
	// Asked back, so that a registry that rewrote the index (converted its
	// media types, say) is caught here rather than by a digest pin later.
	got, err := remote.Head(r, opts...)
	if err != nil {
		return "", fmt.Errorf("pushed %s, but cannot read it back: %w", r, err)
	}
	if got.Digest != want {
		return "", fmt.Errorf("pushed %s as %s, but the registry serves %s", r, want, got.Digest)
	}
	fmt.Fprintf(os.Stderr, "image: pushed %s\n", r)
	return r.Context().Name() + "@" + want.String(), nil
}

// layoutIndex is the one image index the layout's index.json names, and the
// image name index.json gives it (empty when it gives none). madeBy is the
// command that writes such a layout, for the error a missing or foreign one
// gets.
func layoutIndex(dir, madeBy string) (v1.ImageIndex, string, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w (run `%s` first)", dir, err, madeBy)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return nil, "", err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, "", err
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		return nil, "", fmt.Errorf("%s: want one image index in index.json, as `%s` writes", dir, madeBy)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	return idx, m.Manifests[0].Annotations[containerdName], err
}

// parseRef allows plain HTTP when asked to, and always for a registry on
// this machine, which is how test and sandbox registries run.
func parseRef(ref string, insecure bool) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	if insecure || isLocal(r.Context().RegistryStr()) {
		return name.ParseReference(ref, name.Insecure)
	}
	return r, nil
}

func isLocal(registry string) bool {
	host, _, err := net.SplitHostPort(registry)
	if err != nil {
		host = strings.Trim(registry, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
