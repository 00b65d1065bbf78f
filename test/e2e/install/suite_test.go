// Package install_test installs kube-fledged as users do and checks that what lands runs:
// our image, built as `make image` builds it, runs as pods on the sandbox's real node (a
// kubelet on containerd, with kube-proxy), serves its webhook through its Service, and
// caches images that containerd really pulls.
//
// One file per way in (helm_test.go: the Helm chart); the end they share, from "the
// controller is running" to "a changed retention policy shows", is common_test.go, so
// that every install path is held to the same proof.
//
// The package skips, naming what is missing, on a machine that cannot run a real node
// (see realnode.Check): on kwok's fake nodes no pod of ours would run at all.
package install_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/hack/image/lock"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

var (
	sb      *sandbox.Sandbox
	node    *realnode.Node
	k8s     client.WithWatch
	kube    kubernetes.Interface
	repoDir = filepath.Join("..", "..", "..")
	// images is hack/image, built once by TestMain: our image and every OLM image are
	// made by the program `make image` and its siblings run.
	images *imageTool

	// ourImage is the chart's default image, which the test pushed to the node's registry
	// under that very name, built from this tree.
	ourImage string
	// built is what the node should run: the index we pushed, and the manifest and config
	// of this machine's platform in it.
	built struct {
		index, manifest, config v1.Hash
	}
)

// Test images, pushed to the node's registry under names of the registries it mirrors:
// the caches name them as users name theirs. Each has content of its own, and each way in
// has images of its own (tagged with its name): the node keeps what one install pulled,
// and under IfNotPresent the next would rightly find nothing to pull.
var installs = []string{"helm", "kustomize", "olm", "airgap-helm", "airgap-kustomize"}

func retainedImages(how string) []string {
	return []string{"ghcr.io/kubefledged/e2e-install-a:" + how, "docker.io/library/e2e-install-b:" + how}
}

func deletedImages(how string) []string {
	return []string{"us.gcr.io/kubefledged/e2e-install-c:" + how, "quay.io/kubefledged/e2e-install-d:" + how}
}

func TestMain(m *testing.M) {
	os.Exit(framework.RealNodeSuite{
		Name: "e2e/install",
		// Our image, built as `make image` builds it: cold, the cross-compiles are
		// most of the setup.
		Prepare: func(ctx context.Context, dir string) error {
			var err error
			if ourImage, err = chartImage(); err != nil {
				return err
			}
			if images, err = buildImageTool(ctx, dir); err != nil {
				return err
			}
			return buildImage(ctx, filepath.Join(dir, "oci"))
		},
		Setup: func(ctx context.Context, c *framework.RealNodeCluster, dir string) error {
			sb, node = c.SB, c.Node
			if err := pushImages(ctx, filepath.Join(dir, "oci")); err != nil {
				return err
			}
			var err error
			k8s, kube, err = framework.Connect(sb.Config())
			return err
		},
	}.Run(m))
}

// chartImage is the image the chart installs when told nothing about images: its
// image.repository at its appVersion. The controller's own default helper image must be
// the same, or the Jobs of a default install would pull something else.
func chartImage() (string, error) {
	chrt, err := loader.Load(filepath.Join(repoDir, "helm-charts", "kubefledged"))
	if err != nil {
		return "", err
	}
	img, _ := chrt.Values["image"].(map[string]any)
	repository, _ := img["repository"].(string)
	ref := repository + ":" + chrt.Metadata.AppVersion
	if ref != commands.DefaultHelperImage {
		return "", fmt.Errorf("the chart's default image %s is not the controller's default helper image %s", ref, commands.DefaultHelperImage)
	}
	return ref, nil
}

// buildImage runs hack/image as `make image` does into a layout of the test's own
// (bin/image may hold another tree's build), for this machine's platform: the node runs
// no other. The other platforms' manifests come from hack/image/digest.lock, which `make
// bundle` wrote from a build of every platform (pushImages), so that the node's registry
// serves the very index the CSV pins, which TestOLM installs by that digest.
func buildImage(ctx context.Context, out string) error {
	tag, _ := name.NewTag(ourImage)
	t0 := time.Now()
	host := "linux/" + runtime.GOARCH
	if err := images.run(ctx, "build", "-out", out, "-version", tag.TagStr(), "-ref", ourImage, "-platforms", host); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "e2e/install: image built (%s) in %s\n", host, time.Since(t0).Round(time.Millisecond))
	return nil
}

// lockedIndex is what pushImages stores for our image: the index's manifest, the image
// built here and the manifests of the other platforms, as the lock records them.
var lockedIndex struct {
	raw       []byte
	built     []v1.Image
	manifests [][]byte
}

// pushImages pushes our index under the chart's image name, so that the node pulls it by
// that name, and the test images the caches name. The index is the one the lock records,
// once this machine's image, built here, is the very one recorded for its platform.
func pushImages(ctx context.Context, oci string) error {
	lp, err := layout.FromPath(oci)
	if err != nil {
		return err
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	tm, err := top.IndexManifest()
	if err != nil {
		return err
	}
	if len(tm.Manifests) != 1 {
		return fmt.Errorf("%s: %d entries in index.json, want the one index hack/image writes", oci, len(tm.Manifests))
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		return err
	}
	recorded, err := lock.Read(filepath.Join(repoDir, filepath.FromSlash(lock.File)))
	if err != nil {
		return err
	}
	if recorded.Key == "" {
		return fmt.Errorf("no %s: run `make bundle`", lock.File)
	}
	if err := recorded.Matches(idx); err != nil {
		return fmt.Errorf("this tree builds another image than %s records (%v): run `make bundle` (the product's code or chart changed since), "+
			"or run the tests with the Go release of IMAGE_GO in hack/image.mk (this is %s)", lock.File, err, runtime.Version())
	}
	if built.index, err = v1.NewHash(recorded.Digest); err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		return fmt.Errorf("%s: want the one image of linux/%s, buildImage's", oci, runtime.GOARCH)
	}
	host := im.Manifests[0]
	img, err := idx.Image(host.Digest)
	if err != nil {
		return err
	}
	if built.config, err = img.ConfigName(); err != nil {
		return err
	}
	built.manifest = host.Digest
	lockedIndex.raw, lockedIndex.built = recorded.Index, []v1.Image{img}
	for p, m := range recorded.Manifests {
		if p != host.Platform.String() {
			lockedIndex.manifests = append(lockedIndex.manifests, m)
		}
	}
	if err := node.PushLockedIndexAs(ctx, ourImage, lockedIndex.raw, lockedIndex.built, lockedIndex.manifests); err != nil {
		return err
	}
	if err := pushMirror(ctx); err != nil {
		return err
	}
	var refs []string
	for _, how := range installs {
		refs = append(append(refs, retainedImages(how)...), deletedImages(how)...)
	}
	for _, ref := range refs {
		l, err := realnode.NewLayer(realnode.File{Path: "/data/which", Data: []byte(ref + "\n")})
		if err != nil {
			return err
		}
		img, err := realnode.NewImage(nil, l)
		if err != nil {
			return err
		}
		if err := node.PushAs(ctx, ref, img); err != nil {
			return err
		}
	}
	return nil
}
