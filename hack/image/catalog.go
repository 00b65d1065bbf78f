package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework/files"
)

// A file-based catalog image, as upstream's index images are made
// (`opm generate dockerfile`): the opm image, the catalog under /configs,
// the label that tells OLM and opm where the catalog is, and `opm serve
// /configs` to run. Upstream's images also carry the serve cache, built at
// image build time (`opm serve --cache-only`); this one does not, because
// that cache is not reproducible: opm v1.61.0's pogreb cache starts from a
// random hash seed, and two builds of one catalog differ in
// pogreb.v1/db/db.pmt and main.pix. The registry pod builds it at start
// instead, in /tmp (a quarter of a second for this catalog), and the build
// still runs `opm serve --cache-only`, to fail here on a catalog opm cannot
// serve.
const (
	configsDir     = "/configs"
	configsLabel   = "operators.operatorframework.io.index.configs.v1"
	annotationPkg  = "operators.operatorframework.io.bundle.package.v1"
	annotationChs  = "operators.operatorframework.io.bundle.channels.v1"
	annotationDefC = "operators.operatorframework.io.bundle.channel.default.v1"
	// containerdName is the annotation layoutAnnotations names an index by.
	containerdName = "io.containerd.image.name"
)

type catalogOptions struct {
	out, ref, opm, probe string
	bundles              []string // OCI layouts `image bundle` wrote, oldest first
	configs              string   // where to leave a copy of the catalog (optional)
}

// catalogBundle is what the package and channel blobs need of one bundle.
type catalogBundle struct {
	ref         string // as the catalog names it: the layout's image name
	layout      v1.ImageIndex
	annotations map[string]string
	csv         struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version  string   `json:"version"`
			Replaces string   `json:"replaces"`
			Skips    []string `json:"skips"`
			Icon     []struct {
				Data      string `json:"base64data"`
				MediaType string `json:"mediatype"`
			} `json:"icon"`
		} `json:"spec"`
	}
}

// buildCatalog renders the bundles with opm into a catalog, adds the
// package and its channels, has opm validate it and build its serve cache
// (then dropped, see above), and writes the catalog image.
//
// `opm render` is given each bundle by the name the catalog is to carry
// (BUNDLE_IMG), not by where it is read from: the bundles are served from
// a registry in this process, on loopback, and opm (containers/image) is
// pointed at it by a registries.conf in a HOME of its own, which rewrites
// each bundle's repository to the local one. So the catalog names the
// bundles as a cluster will pull them, and nothing is edited after opm.
// That HOME also holds the signature policy opm needs and this machine
// lacks (/etc/containers/policy.json): accept anything, which is all an
// image in this process's own registry can be.
func buildCatalog(ctx context.Context, o catalogOptions) (string, error) {
	var src source
	if _, err := src.readRevision(); err != nil {
		return "", err
	}
	p, err := samePlatform(o.opm, o.probe)
	if err != nil {
		return "", err
	}
	if len(o.bundles) == 0 {
		return "", errors.New("catalog: no -bundle given")
	}
	var bundles []*catalogBundle
	for _, dir := range o.bundles {
		b, err := readBundleLayout(dir, p)
		if err != nil {
			return "", err
		}
		bundles = append(bundles, b)
	}
	work, err := workDirBeside(o.out)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)

	rendered, err := renderBundles(ctx, work, o.opm, bundles)
	if err != nil {
		return "", err
	}
	blobs, err := packageBlobs(bundles)
	if err != nil {
		return "", err
	}
	pkg := bundles[len(bundles)-1].annotations[annotationPkg]
	if strings.ContainsAny(pkg, `/\`) || pkg == "." || pkg == ".." {
		return "", fmt.Errorf("catalog: package name %q cannot name a directory", pkg)
	}
	configs := filepath.Join(work, "configs")
	catalogFile := filepath.Join(configs, pkg, "catalog.json")
	if err := os.MkdirAll(filepath.Dir(catalogFile), 0o755); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	for _, b := range append(blobs, rendered...) {
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(catalogFile, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := runOPM(ctx, o.opm, "validate", configs); err != nil {
		return "", err
	}
	if err := runOPM(ctx, o.opm, "serve", configs, "--cache-dir="+filepath.Join(work, "cache"), "--cache-only"); err != nil {
		return "", err
	}
	if o.configs != "" {
		if err := os.RemoveAll(o.configs); err != nil {
			return "", err
		}
		if err := files.CopyTree(configs, o.configs, nil); err != nil {
			return "", err
		}
	}

	base, err := opmLayer(work, src.epoch, o.opm, o.probe)
	if err != nil {
		return "", err
	}
	catalogEntries, err := walkDir(configs, configsDir)
	if err != nil {
		return "", err
	}
	content, err := layer(filepath.Join(work, "configs.tar"), src.epoch, catalogEntries...)
	if err != nil {
		return "", err
	}
	img, err := configured(p, src.epoch, opmConfig(map[string]string{configsLabel: configsDir}, "serve", configsDir))
	if err != nil {
		return "", err
	}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: history(src.epoch, "COPY opm grpc_health_probe /bin/ (the opm image)")},
		mutate.Addendum{Layer: content, History: history(src.epoch, "ADD catalog "+configsDir+" (opm render of the bundles, with the package and its channels)")},
	)
	if err != nil {
		return "", err
	}
	return finish(work, o.out, singleIndex(p, img), o.ref, src, "catalog image")
}

// readBundleLayout reads what the catalog needs of a bundle image from its
// OCI layout: its name, its labels (the bundle's annotations: package and
// channels), and its CSV (name, version, the upgrade edges and the icon).
func readBundleLayout(dir string, p platform) (*catalogBundle, error) {
	var (
		b   catalogBundle
		err error
	)
	if b.layout, b.ref, err = layoutIndex(dir, "image bundle"); err != nil {
		return nil, fmt.Errorf("catalog: bundle %w", err)
	}
	if b.ref == "" {
		return nil, fmt.Errorf("catalog: bundle %s: index.json names no image (%s); build it with -ref", dir, containerdName)
	}
	img, err := platformImage(b.layout, p)
	if err != nil {
		return nil, fmt.Errorf("catalog: bundle %s: %w", dir, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	b.annotations = cf.Config.Labels
	if b.annotations[annotationPkg] == "" || b.annotations[annotationChs] == "" {
		return nil, fmt.Errorf("catalog: bundle %s: no %s or %s label", dir, annotationPkg, annotationChs)
	}
	raw, err := findCSV(img, b.annotations[annotationManifests])
	if err != nil {
		return nil, fmt.Errorf("catalog: bundle %s: %w", dir, err)
	}
	if err := yaml.Unmarshal(raw, &b.csv); err != nil {
		return nil, fmt.Errorf("catalog: bundle %s: CSV: %w", dir, err)
	}
	if b.csv.Metadata.Name == "" || b.csv.Spec.Version == "" {
		return nil, fmt.Errorf("catalog: bundle %s: the CSV has no name or version", dir)
	}
	return &b, nil
}

func platformImage(idx v1.ImageIndex, p platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Arch && d.Platform.Variant == p.Variant {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s", p)
}

// findCSV returns the ClusterServiceVersion among the files of the
// manifests directory of img.
func findCSV(img v1.Image, manifests string) ([]byte, error) {
	dir := strings.Trim(path.Clean(manifests), "/") + "/"
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no ClusterServiceVersion under /%s", dir)
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(strings.TrimPrefix(h.Name, "/"), dir) {
			continue
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if yaml.Unmarshal(raw, &meta) == nil && meta.Kind == "ClusterServiceVersion" {
			return raw, nil
		}
	}
}

// renderBundles serves the bundles from a registry on loopback and returns
// the blobs `opm render` makes of them, one olm.bundle each.
func renderBundles(ctx context.Context, work, opm string, bundles []*catalogBundle) ([]json.RawMessage, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	local := ln.Addr().String()

	var conf strings.Builder
	seen := map[string]bool{}
	var refs []string
	for _, b := range bundles {
		r, err := name.ParseReference(b.ref)
		if err != nil {
			return nil, fmt.Errorf("catalog: bundle name %q: %w", b.ref, err)
		}
		repo := r.Context().RepositoryStr()
		to, err := name.ParseReference(local+"/"+repo+refSuffix(r), name.Insecure)
		if err != nil {
			return nil, err
		}
		if err := remote.WriteIndex(to, b.layout, remote.WithContext(ctx)); err != nil {
			return nil, fmt.Errorf("catalog: serving %s to opm: %w", b.ref, err)
		}
		// containers/image spells Docker Hub docker.io, where
		// go-containerregistry says index.docker.io.
		prefix := r.Context().RegistryStr() + "/" + repo
		if r.Context().RegistryStr() == name.DefaultRegistry {
			prefix = "docker.io/" + repo
		}
		if !seen[prefix] {
			seen[prefix] = true
			fmt.Fprintf(&conf, "[[registry]]\nprefix = %q\nlocation = %q\ninsecure = true\n\n", prefix, local+"/"+repo)
		}
		refs = append(refs, b.ref)
	}
	home := filepath.Join(work, "home")
	containers := filepath.Join(home, ".config", "containers")
	if err := os.MkdirAll(containers, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(containers, "registries.conf"), []byte(conf.String()), 0o644); err != nil {
		return nil, err
	}
	policy := `{"default": [{"type": "insecureAcceptAnything"}]}` + "\n"
	if err := os.WriteFile(filepath.Join(containers, "policy.json"), []byte(policy), 0o644); err != nil {
		return nil, err
	}
	var stdout bytes.Buffer
	// --use-http as well: opm sets containers/image's TLS verification
	// explicitly, which overrides the insecure of registries.conf. Only the
	// loopback registry is ever asked, the rewrite has no fallback.
	cmd := exec.CommandContext(ctx, opm, append(append([]string{"render"}, refs...), "--output=json", "--use-http")...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("catalog: opm render %s: %v\n%s", strings.Join(refs, " "), err, stderr.String())
	}
	var out []json.RawMessage
	dec := json.NewDecoder(&stdout)
	for {
		var blob json.RawMessage
		if err := dec.Decode(&blob); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("catalog: opm render's output: %w", err)
		}
		var meta struct {
			Schema, Name, Package, Image string
		}
		if err := json.Unmarshal(blob, &meta); err != nil {
			return nil, err
		}
		if meta.Schema != "olm.bundle" {
			return nil, fmt.Errorf("catalog: opm render gave a %q blob; want only olm.bundle", meta.Schema)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, blob); err != nil {
			return nil, err
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
			return nil, err
		}
		out = append(out, indented.Bytes())
	}
	if len(out) != len(bundles) {
		return nil, fmt.Errorf("catalog: opm render gave %d bundles for %d images", len(out), len(bundles))
	}
	return out, nil
}

func refSuffix(r name.Reference) string {
	if d, ok := r.(name.Digest); ok {
		return "@" + d.DigestStr()
	}
	return ":" + r.Identifier()
}

// packageBlobs are the olm.package blob and one olm.channel blob per
// channel the bundles name, as `opm init` and a hand-written channel would
// give them. The bundles come oldest first; the newest one's default
// channel is the package's, and each entry carries its CSV's replaces and
// skips, which file-based catalogs read from the channel, not the CSV.
func packageBlobs(bundles []*catalogBundle) ([]json.RawMessage, error) {
	type channelEntry struct {
		Name     string   `json:"name"`
		Replaces string   `json:"replaces,omitempty"`
		Skips    []string `json:"skips,omitempty"`
	}
	type channel struct {
		Schema  string         `json:"schema"`
		Name    string         `json:"name"`
		Package string         `json:"package"`
		Entries []channelEntry `json:"entries"`
	}
	type icon struct {
		Data      string `json:"base64data"`
		MediaType string `json:"mediatype"`
	}
	type pkgBlob struct {
		Schema         string `json:"schema"`
		Name           string `json:"name"`
		DefaultChannel string `json:"defaultChannel"`
		Icon           *icon  `json:"icon,omitempty"`
	}
	newest := bundles[len(bundles)-1]
	pkg := pkgBlob{Schema: "olm.package", Name: newest.annotations[annotationPkg], DefaultChannel: newest.annotations[annotationDefC]}
	if ic := newest.csv.Spec.Icon; len(ic) > 0 {
		pkg.Icon = &icon{Data: ic[0].Data, MediaType: ic[0].MediaType}
	}
	var names []string
	channels := map[string]*channel{}
	for _, b := range bundles {
		if got := b.annotations[annotationPkg]; got != pkg.Name {
			return nil, fmt.Errorf("catalog: %s is in package %q, %s in %q: one catalog image holds one package here", b.ref, got, newest.ref, pkg.Name)
		}
		for _, ch := range strings.Split(b.annotations[annotationChs], ",") {
			ch = strings.TrimSpace(ch)
			if channels[ch] == nil {
				channels[ch] = &channel{Schema: "olm.channel", Name: ch, Package: pkg.Name}
				names = append(names, ch)
			}
			channels[ch].Entries = append(channels[ch].Entries, channelEntry{Name: b.csv.Metadata.Name, Replaces: b.csv.Spec.Replaces, Skips: b.csv.Spec.Skips})
		}
	}
	if pkg.DefaultChannel == "" {
		pkg.DefaultChannel = names[0]
	}
	if channels[pkg.DefaultChannel] == nil {
		return nil, fmt.Errorf("catalog: the default channel %q is not among the bundles' channels %v", pkg.DefaultChannel, names)
	}
	slices.Sort(names)
	blobs := []any{pkg}
	for _, n := range names {
		blobs = append(blobs, channels[n])
	}
	var out []json.RawMessage
	for _, b := range blobs {
		raw, err := json.MarshalIndent(b, "", "  ")
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

func runOPM(ctx context.Context, opm string, args ...string) error {
	cmd := exec.CommandContext(ctx, opm, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("catalog: opm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func catalogCommand(ctx context.Context, args []string) error {
	fs := newFlags("catalog")
	out := fs.String("out", "", "the OCI layout directory to write (replaced if it exists)")
	ref := fs.String("ref", "", "the catalog image reference, named in the layout's index.json (CATALOG_IMG)")
	opm := fs.String("opm", "", "the static opm binary (bin/opm): it renders, validates and serves the catalog, and goes into the image")
	probe := fs.String("probe", "", "the static grpc_health_probe binary (bin/grpc_health_probe), for the registry pod's probes")
	configs := fs.String("configs", "", "a directory to leave the rendered catalog in (optional; replaced)")
	digestFile := fs.String("digest-file", "", "a file to write the index digest to (optional)")
	var bundles stringList
	fs.Var(&bundles, "bundle", "a bundle image's OCI layout (`image bundle` output); repeat for more versions, oldest first")
	_ = fs.Parse(args)
	if *out == "" || *ref == "" || *opm == "" || *probe == "" || len(bundles) == 0 || fs.NArg() != 0 {
		usage()
	}
	digest, err := buildCatalog(ctx, catalogOptions{out: *out, ref: *ref, opm: *opm, probe: *probe, bundles: bundles, configs: *configs})
	if err != nil {
		return err
	}
	return report(digest, *digestFile)
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
