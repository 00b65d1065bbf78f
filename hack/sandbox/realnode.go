package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// The real node lives in the `up` process, its registry on a loopback port of that
// process. What other processes (`make run`) need to use it, up writes to this file in
// the sandbox dir while the node runs.
const nodeFile = "realnode.json"

type nodeInfo struct {
	Name      string   `json:"name"`
	Registry  string   `json:"registry"`
	CRISocket string   `json:"criSocket"`
	Mirrors   []string `json:"mirrors"`
}

func writeNodeInfo(dir string, n *realnode.Node) error {
	data, err := json.MarshalIndent(nodeInfo{Name: n.Name(), Registry: n.Registry(), CRISocket: n.CRISocket(), Mirrors: n.Mirrors()}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, nodeFile), append(data, '\n'), 0o644)
}

func readNodeInfo(dir string) (*nodeInfo, error) {
	data, err := os.ReadFile(filepath.Join(dir, nodeFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no real node runs in %s (start one with: hack/sandbox.sh up %s N --real-node)", dir, dir)
	}
	if err != nil {
		return nil, err
	}
	var n nodeInfo
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, nodeFile), err)
	}
	return &n, nil
}

// checkRealNode says whether this machine can run a real node: "ok", or what it lacks,
// with exit status 1. It changes nothing (realnode.Check).
func checkRealNode(args []string) error {
	fs := flag.NewFlagSet("check-real-node", flag.ExitOnError)
	binDir := fs.String("bin-dir", "", "dir with kubelet and kube-proxy (default: $KUBEFLEDGED_BIN_DIR or <repo>/bin)")
	_ = fs.Parse(args)
	if err := realnode.Check(realnode.Options{BinDir: *binDir}); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("ok")
	return nil
}

// realNodeEnv prints the running node's facts as shell assignments, for eval.
func realNodeEnv(args []string) error {
	fs := flag.NewFlagSet("real-node", flag.ExitOnError)
	dir := fs.String("dir", ".sandbox", "the dir given to up")
	_ = fs.Parse(args)
	n, err := readNodeInfo(*dir)
	if err != nil {
		return err
	}
	for _, kv := range [][2]string{
		{"REALNODE_NAME", n.Name},
		{"REALNODE_REGISTRY", n.Registry},
		{"REALNODE_CRI_SOCKET", n.CRISocket},
		{"REALNODE_MIRRORS", strings.Join(n.Mirrors, " ")},
	} {
		fmt.Printf("%s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// push stores images in the running node's registry under names the node pulls by:
// --layout with --as pushes an image index (`make image`'s layout) as that name, and each
// ImageCache file given gets a stand-in for every image it names, so that the samples'
// images (nginx, redis, ...), which this machine cannot fetch, pull on the real node as
// they would anywhere. Images meant to fail (under fail.invalid/) get none.
func push(args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("dir", ".sandbox", "the dir given to up")
	layoutDir := fs.String("layout", "", "an OCI layout holding one image index, as hack/image build writes it")
	as := fs.String("as", "", "the name to push the layout's index as, e.g. ghcr.io/kubefledged/kubefledged:v0.11.0")
	_ = fs.Parse(args)
	if (*layoutDir == "") != (*as == "") {
		return errors.New("push: --layout and --as go together")
	}
	n, err := readNodeInfo(*dir)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if *layoutDir != "" {
		lp, err := layout.FromPath(*layoutDir)
		if err != nil {
			return fmt.Errorf("%s: %w", *layoutDir, err)
		}
		top, err := lp.ImageIndex()
		if err != nil {
			return err
		}
		m, err := top.IndexManifest()
		if err != nil {
			return err
		}
		if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
			return fmt.Errorf("%s: want one image index in index.json, as hack/image build writes", *layoutDir)
		}
		idx, err := top.ImageIndex(m.Manifests[0].Digest)
		if err != nil {
			return err
		}
		ref, err := realnode.MirrorRef(n.Registry, n.Mirrors, *as)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s as %s: %w", ref, *as, err)
		}
		fmt.Printf("pushed %s (%s) to the real node's registry\n", *as, m.Manifests[0].Digest)
	}
	for _, file := range fs.Args() {
		images, err := cacheImages(file)
		if err != nil {
			return err
		}
		for _, image := range images {
			if strings.HasPrefix(image, "fail.invalid/") {
				continue
			}
			ref, err := realnode.MirrorRef(n.Registry, n.Mirrors, image)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			l, err := realnode.NewLayer(realnode.File{Path: "/stand-in", Data: []byte("a stand-in for " + image + ", pushed by make run to the sandbox's real node\n")})
			if err != nil {
				return err
			}
			img, err := realnode.NewImage(nil, l)
			if err != nil {
				return err
			}
			if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
				return fmt.Errorf("push a stand-in for %s: %w", image, err)
			}
			fmt.Printf("pushed a stand-in for %s to the real node's registry\n", image)
		}
	}
	return nil
}

// cacheImages lists the images of the ImageCaches in a YAML file.
func cacheImages(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []string
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var c v1alpha2.ImageCache
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if c.Kind != "ImageCache" {
			continue
		}
		for _, l := range c.Spec.CacheSpec {
			out = append(out, l.Images...)
		}
	}
}
