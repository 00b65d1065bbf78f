package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	kfplatform "github.com/kubefledged/kube-fledged/internal/platform"
)

// The image's shape, as the Dockerfile gives it.
const (
	binaryPath = "/kubefledged" // the Jobs call the helpers by this path
	workDir    = "/opt/kubefledged"
	user       = "65532:65532"
	// versionVar is what -X sets, as in the Dockerfile.
	versionVar = "github.com/kubefledged/kube-fledged/internal/commands.Version"
)

// What the distroless static:nonroot base gives the Dockerfile's image and
// the product relies on: the nonroot user and group (65532), so that names
// resolve and runAsNonRoot sees a numeric user; its home, where Helm keeps
// its caches; and a /tmp anyone can write, where controller-runtime keeps
// the webhook's certificates when no volume is mounted there. Left out: its
// CA bundle and zone data, as the binary talks only to the API server
// (whose CA comes with the service account) and to the CRI socket, and
// loads no time zones.
const (
	nonrootUID = 65532
	homeDir    = "/home/nonroot"
	passwd     = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
)

// license is the SPDX name of the project's licence. The tree has no
// LICENSE file, and neither the chart nor the bundle names one; the source
// headers (hack/boilerplate.go.txt) say the Apache License 2.0.
const license = "Apache-2.0"

// platform is internal/platform's, the list the plan reads too: a platform
// built here is one the controller serves nodes of.
type platform = kfplatform.Platform

// ociPlatform is p as an index entry names it; arm/v7's variant is what
// containerd on an ARMv7 node matches.
func ociPlatform(p platform) *v1.Platform {
	return &v1.Platform{OS: p.OS, Architecture: p.Arch, Variant: p.Variant}
}

type buildOptions struct {
	out, version, ref string
	platforms         []platform
}

// build writes the image index for every platform into an OCI layout at
// o.out and returns its digest.
func build(ctx context.Context, o buildOptions) (string, error) {
	src, err := readSource()
	if err != nil {
		return "", err
	}
	// The image is named by digest in the checked-in bundle (`make bundle`
	// pins it), and a commit cannot hold its own hash or time: so, unlike
	// the bundle and catalog images, this one carries neither. Its
	// timestamps are SOURCE_DATE_EPOCH's, else 1970 (as ko and rules_oci
	// stamp theirs), and its digest follows from the files alone.
	epoch, err := sourceDateEpoch(false)
	if err != nil {
		return "", err
	}
	// Beside the output rather than in /tmp: a binary per platform is tens
	// of MB, and /tmp may be a small tmpfs.
	parent := filepath.Dir(o.out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	work, err := os.MkdirTemp(parent, ".image-work-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)

	// Two of the three layers are the same for every platform: one blob each
	// in the layout and the registry.
	base, err := layer(filepath.Join(work, "base.tar"), epoch,
		entry{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		entry{name: "/etc/group", mode: 0o644, data: []byte(group)},
		entry{name: homeDir, dir: true, mode: 0o700, uid: nonrootUID, gid: nonrootUID},
		entry{name: "/tmp", dir: true, mode: 0o1777},
	)
	if err != nil {
		return "", err
	}
	var appEntries []entry
	for _, f := range src.files {
		appEntries = append(appEntries, entry{name: path.Join(workDir, f.path), mode: f.mode, src: filepath.FromSlash(f.path)})
	}
	app, err := layer(filepath.Join(work, "app.tar"), epoch, appEntries...)
	if err != nil {
		return "", err
	}

	labels := map[string]string{
		"org.opencontainers.image.title":       "kube-fledged",
		"org.opencontainers.image.description": src.chart.Description,
		"org.opencontainers.image.source":      src.chart.Home,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.licenses":    license,
		"org.opencontainers.image.created":     epoch.Format(time.RFC3339),
	}

	revision, err := sourceRevision(ctx, ".", src.files)
	if err != nil {
		return "", err
	}
	ldflags := "-s -w -X " + versionVar + "=" + o.version + " -X " + revisionVar + "=" + revision
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.platforms {
		bin := filepath.Join(work, strings.ReplaceAll(p.String(), "/", "-"), "kubefledged")
		if err := goBuild(ctx, p, ".", ldflags, bin); err != nil {
			return "", err
		}
		binLayer, err := layer(bin+".tar", epoch, entry{name: binaryPath, mode: 0o755, src: bin})
		if err != nil {
			return "", err
		}
		img, err := image(p, epoch, labels, []mutate.Addendum{
			{Layer: base, History: history(epoch, "users, /tmp and home as distroless/static:nonroot has them")},
			{Layer: app, History: history(epoch, "COPY watches.yaml helm-charts/ "+workDir+"/")},
			{Layer: binLayer, History: history(epoch, "go build -o "+binaryPath+" ("+p.String()+")")},
		})
		if err != nil {
			return "", err
		}
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: ociPlatform(p)},
		})
	}
	// The labels again on the index, where registries that list a
	// multi-platform image (ghcr.io among them) read them.
	index = mutate.Annotations(index, labels).(v1.ImageIndex)
	digest, err := index.Digest()
	if err != nil {
		return "", err
	}

	if err := writeLayout(work, o.out, index, o.ref); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "image: %s (%s) in %s, sources %s, from revision %q, time %s\n",
		digest, platformList(o.platforms), o.out, revision, src.revision, epoch.Format(time.RFC3339))
	return digest.String(), nil
}

// writeLayout writes index as the one image index of an OCI layout at out,
// named by ref in index.json. It is written in work and moved into place, so
// that a failed build leaves the last good layout, and blobs of earlier
// builds do not pile up in it.
func writeLayout(work, out string, index v1.ImageIndex, ref string) error {
	refAnnotations, err := layoutAnnotations(ref)
	if err != nil {
		return err
	}
	tmp := filepath.Join(work, "oci")
	lp, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(index, layout.WithAnnotations(refAnnotations)); err != nil {
		return err
	}
	// go-containerregistry leaves blobs 0600 and index.json executable; a
	// layout others read (skopeo, an import into containerd as another user)
	// wants plain modes.
	err = filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// goBuild cross-compiles the package pkg of this module into a static
// binary with the Dockerfile's flags (ldflags are -ldflags). Beyond them:
// -buildvcs=false, since the Dockerfile's build sees no .git and a
// checkout's state should not reach the binary (nor the digest the bundle
// pins); and the per-architecture levels pinned at Go's defaults, so
// that a GOAMD64, GOARM64 or GOPPC64 in someone's environment cannot change
// the image. GOARM is the platform's variant (arm/v7: 7, hardware floating
// point), so that the binary runs on every node the index offers it to.
func goBuild(ctx context.Context, p platform, pkg, ldflags, out string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOPPC64=power8", "GOARM="+p.GOARM(),
		// Nor the caller's Go settings (make test's GOFLAGS=-trimpath, an
		// experiment): the image, and the key of its inputs in the lock, are
		// the same whoever builds it.
		"GOFLAGS=", "GOEXPERIMENT=", "GOFIPS140=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s: %w", pkg, p, err)
	}
	fmt.Fprintf(os.Stderr, "image: built %s for %s in %s\n", path.Base(out), p, time.Since(start).Round(time.Second))
	return nil
}

func image(p platform, epoch time.Time, labels map[string]string, layers []mutate.Addendum) (v1.Image, error) {
	img, err := configured(p, epoch, v1.Config{
		User:       user,
		WorkingDir: workDir,
		Entrypoint: []string{binaryPath},
		// HOME is set rather than left to the runtime's lookup in
		// /etc/passwd, which not every runtime makes: Helm keeps its
		// caches under it.
		Env:    []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + homeDir},
		Labels: labels,
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, layers...)
}

// configured is an empty OCI image for p with config c, created at epoch.
func configured(p platform, epoch time.Time, c v1.Config) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.ConfigFile(img, &v1.ConfigFile{
		OS:           p.OS,
		Architecture: p.Arch,
		Variant:      p.Variant,
		Created:      v1.Time{Time: epoch},
		Config:       c,
		RootFS:       v1.RootFS{Type: "layers"},
	})
}

func history(epoch time.Time, createdBy string) v1.History {
	return v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "hack/image: " + createdBy}
}

// layoutAnnotations name the index in index.json the way BuildKit's OCI
// exporter does, so that tools reading the layout (skopeo's oci:DIR:TAG,
// containerd's import) find it by the tag and the full name.
func layoutAnnotations(ref string) (map[string]string, error) {
	if ref == "" {
		return nil, nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("-ref: %w", err)
	}
	a := map[string]string{"io.containerd.image.name": r.Name()}
	if t, ok := r.(name.Tag); ok {
		a["org.opencontainers.image.ref.name"] = t.TagStr()
	}
	return a, nil
}

func platformList(ps []platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
