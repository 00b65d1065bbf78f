// Package realnode_test runs the ImageCache controller in-process against the sandbox with a
// real node beside its kwok node: images come from a registry in the test process and are
// really pulled by containerd, really fail, and are really removed through CRI by our own
// helper image, built from this repository by the test.
//
// The package skips, naming what is missing, on a machine that cannot run a real node (see
// realnode.Check); the kwok suites cover the controller's flow there.
package realnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

var (
	sb   *sandbox.Sandbox
	node *realnode.Node
	k8s  client.WithWatch
	kube kubernetes.Interface
	// helperImage is our own image in the node's registry: the binary built by TestMain.
	helperImage string
	// refs maps a test image's short name and tag (e.g. "small-a:v1") to its reference in
	// the registry; ref looks up the tag of the round running.
	refs = map[string]string{}
)

// Test images. Each has content of its own, so that removing one through CRI (which
// removes by image ID) can never take another with it.
var (
	smallImages = []string{"small-a", "small-b", "small-c", "small-d", "small-e", "small-f", "small-g", "small-h"}
	multiLayer  = "multi"
	// missing is never pushed: pulls of it fail with the registry's 404.
	missing = "does-not-exist"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RealNodeSuite{
		Name: "e2e/realnode",
		// Our binary, for the helper image.
		Prepare: func(ctx context.Context, dir string) error {
			t0 := time.Now()
			err := repo.Build(ctx, ".", filepath.Join(dir, "kubefledged"))
			fmt.Fprintf(os.Stderr, "e2e/realnode: kubefledged built (static) in %s\n", time.Since(t0).Round(time.Millisecond))
			return err
		},
		Setup: func(ctx context.Context, c *framework.RealNodeCluster, dir string) error {
			sb, node = c.SB, c.Node
			if err := pushImages(ctx, filepath.Join(dir, "kubefledged")); err != nil {
				return err
			}
			return connect(ctx)
		},
	}.Run(m))
}

func pushImages(ctx context.Context, bin string) error {
	helper, err := realnode.BinaryImage(bin, "/kubefledged")
	if err != nil {
		return err
	}
	if helperImage, err = node.Push(ctx, "kubefledged:test", helper); err != nil {
		return err
	}
	for _, tag := range tags {
		for _, name := range smallImages {
			l, err := realnode.NewLayer(realnode.File{Path: "/data/" + name + ".txt", Data: []byte("test image " + name + ":" + tag + "\n")})
			if err != nil {
				return err
			}
			if err := push(ctx, name, tag, l); err != nil {
				return err
			}
		}
		var layers []v1.Layer
		for i := range 3 {
			l, err := realnode.NewLayer(realnode.File{Path: fmt.Sprintf("/layer-%d/data", i), Data: []byte(fmt.Sprintf("layer %d of %s:%s\n", i, multiLayer, tag))})
			if err != nil {
				return err
			}
			layers = append(layers, l)
		}
		if err := push(ctx, multiLayer, tag, layers...); err != nil {
			return err
		}
		refs[missing+":"+tag] = node.Registry() + "/" + missing + ":" + tag
	}
	return nil
}

func push(ctx context.Context, name, tag string, layers ...v1.Layer) error {
	img, err := realnode.NewImage(nil, layers...)
	if err != nil {
		return err
	}
	ref, err := node.Push(ctx, name+":"+tag, img)
	refs[name+":"+tag] = ref
	return err
}

// tags are the rounds of TestRealNode, one per pull Job granularity: each round pulls images
// of its own, with content of their own, since the round before left its images on the node.
var tags = []string{"v1", "v2"}

// tag is the round running.
var tag = tags[0]

// ref is the reference of a test image in the round running.
func ref(name string) string { return refs[name+":"+tag] }

// connect makes the clients and installs the CRD.
func connect(ctx context.Context) error {
	if err := framework.LogToFile(filepath.Join(sb.Dir(), "controller.log")); err != nil {
		return err
	}
	var err error
	if k8s, kube, err = framework.Connect(sb.Config()); err != nil {
		return err
	}
	return framework.InstallCRDs(ctx, sb.Config(), framework.ImageCacheCRD)
}
