package realnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a test image's layer.
type File struct {
	Path string // absolute path in the image
	Data []byte
	Mode int64 // permission bits; 0 means 0644
}

// epoch keeps layers byte-for-byte reproducible, so an image built twice has one digest.
var epoch = time.Unix(0, 0).UTC()

// NewLayer makes a layer holding files, with their parent directories.
func NewLayer(files ...File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	sorted := append([]File{}, files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" {
			return nil, fmt.Errorf("realnode: layer file without a path")
		}
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, err
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(f.Data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	// BestSpeed: the product binary is tens of MB, and default compression costs seconds
	// per start for nothing a test measures.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
}

// NewImage stacks layers on an empty base. The platform is set explicitly: an empty base
// leaves os and architecture blank, and containerd refuses to unpack an image that does
// not match its platform.
func NewImage(entrypoint []string, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = entrypoint
	cf.Created = v1.Time{Time: epoch}
	return mutate.ConfigFile(img, cf)
}

// BinaryImage is an image holding one executable, bin, at the path at, which is also its
// entrypoint.
func BinaryImage(bin, at string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	l, err := NewLayer(File{Path: at, Data: data, Mode: 0o755})
	if err != nil {
		return nil, err
	}
	return NewImage([]string{at}, l)
}

// registryServer is an OCI registry in the test process, on loopback: images are pushed by
// the tests and pulled by containerd, with no Docker and no internet.
type registryServer struct {
	host string // 127.0.0.1:port
	srv  *http.Server

	mu sync.Mutex
	// failing are the manifests (by request path) answered with an error for a while.
	failing map[string]*failure
	// requests is every request served, in order, for tests that must show what the node
	// asked for (and what it never did).
	requests []RegistryRequest
}

// RegistryRequest is one request to the node's registry.
type RegistryRequest struct {
	Time   time.Time
	Method string
	Path   string // /v2/<repository>/manifests/<reference>, /v2/<repository>/blobs/<digest>, ...
	// Name is the image name the request is for: for containerd pulling a mirrored
	// registry's image, that registry and the repository (containerd names the registry
	// in the ns query parameter); otherwise the registry's own host and the repository.
	// Empty for requests outside a repository (/v2/).
	Name string
}

// request records req, naming the image it is for.
func (r *registryServer) request(req *http.Request) {
	rr := RegistryRequest{Time: time.Now(), Method: req.Method, Path: req.URL.Path}
	rest, ok := strings.CutPrefix(req.URL.Path, "/v2/")
	for _, kind := range []string{"/manifests/", "/blobs/", "/tags/", "/referrers/"} {
		if repo, _, found := strings.Cut(rest, kind); ok && found {
			host := r.host
			if ns := req.URL.Query().Get("ns"); ns != "" {
				host = ns
			}
			rr.Name = host + "/" + repo
			break
		}
	}
	r.mu.Lock()
	r.requests = append(r.requests, rr)
	r.mu.Unlock()
}

// failure is a manifest the registry answers with status, from its first request on, for
// window; served counts the answers.
type failure struct {
	status int
	window time.Duration
	until  time.Time
	served int
}

func startRegistry() (*registryServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &registryServer{host: ln.Addr().String(), failing: map[string]*failure{}}
	serve := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.request(req)
		if status, ok := r.fails(req.URL.Path); ok {
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(status), status)
			return
		}
		serve.ServeHTTP(w, req)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "realnode: registry: %v\n", err)
		}
	}()
	return r, nil
}

// fails says whether a request for path is to be answered with an error, and which.
func (r *registryServer) fails(path string) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.failing[path]
	if !ok {
		return 0, false
	}
	now := time.Now()
	if f.until.IsZero() {
		f.until = now.Add(f.window)
	}
	if now.After(f.until) {
		return 0, false
	}
	f.served++
	return f.status, true
}

// RegistryRequests is every request the node's registry served since the given time, in
// order: what containerd pulled, and by which name.
func (n *Node) RegistryRequests(since time.Time) []RegistryRequest {
	n.reg.mu.Lock()
	defer n.reg.mu.Unlock()
	var out []RegistryRequest
	for _, rr := range n.reg.requests {
		if !rr.Time.Before(since) {
			out = append(out, rr)
		}
	}
	return out
}

// FailManifest makes the node's registry answer every request for the manifest of ref (a
// reference Push returned) with status (429, 503, ...) from the first such request on, for
// window, and then serve it again: a registry that rate limits or fails for a moment. The
// kubelet's first attempt fails; one after its back-off (10 s) finds the image. The returned
// function counts the error answers so far.
func (n *Node) FailManifest(ref string, status int, window time.Duration) (func() int, error) {
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return nil, err
	}
	if parsed.Context().RegistryStr() != n.reg.host {
		return nil, fmt.Errorf("realnode: %s is not in the node's registry %s", ref, n.reg.host)
	}
	path := "/v2/" + parsed.Context().RepositoryStr() + "/manifests/" + parsed.Identifier()
	f := &failure{status: status, window: window}
	n.reg.mu.Lock()
	n.reg.failing[path] = f
	n.reg.mu.Unlock()
	return func() int {
		n.reg.mu.Lock()
		defer n.reg.mu.Unlock()
		return f.served
	}, nil
}

func (r *registryServer) push(ctx context.Context, repoTag string, img v1.Image) (string, error) {
	ref := r.host + "/" + repoTag
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(parsed, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("realnode: push %s: %w", ref, err)
	}
	return ref, nil
}

func (r *registryServer) close() {
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

// PushIndex stores idx in the local registry as repoRef ("name:tag" or "name@digest", the
// digest then idx's own) and returns its full reference: a mirror of an image, under a
// name of the registry's own.
func (n *Node) PushIndex(ctx context.Context, repoRef string, idx v1.ImageIndex) (string, error) {
	ref := n.reg.host + "/" + repoRef
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.MultiWrite(map[name.Reference]remote.Taggable{parsed: idx}, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("realnode: push %s: %w", ref, err)
	}
	return ref, nil
}

// PushLockedIndexAs is PushIndexAs for an index of which only some images were built
// here: index is its manifest, byte for byte; built are the images of it at hand, pushed
// whole; manifests are the manifests of the others, stored without their layers. A node
// pulls only its own platform's image, so it runs as from the whole index, and the index
// keeps the digest the bundle pins though this machine built one platform of it.
func (n *Node) PushLockedIndexAs(ctx context.Context, ref string, index []byte, built []v1.Image, manifests [][]byte) error {
	local, err := n.mirrored(ref)
	if err != nil {
		return err
	}
	return pushLocked(ctx, local, index, built, manifests)
}

// PushLockedIndex is PushIndex for an index of which only some images were built here
// (PushLockedIndexAs).
func (n *Node) PushLockedIndex(ctx context.Context, repoRef string, index []byte, built []v1.Image, manifests [][]byte) (string, error) {
	ref := n.reg.host + "/" + repoRef
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	return ref, pushLocked(ctx, parsed, index, built, manifests)
}

func pushLocked(ctx context.Context, ref name.Reference, index []byte, built []v1.Image, manifests [][]byte) error {
	repo := ref.Context()
	for _, img := range built {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		if err := remote.Write(repo.Digest(d.String()), img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("realnode: push %s@%s: %w", repo, d, err)
		}
	}
	for _, m := range manifests {
		d, _, err := v1.SHA256(bytes.NewReader(m))
		if err != nil {
			return err
		}
		if err := remote.Put(repo.Digest(d.String()), rawManifest{m, types.OCIManifestSchema1}, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("realnode: push the manifest %s@%s: %w", repo, d, err)
		}
	}
	if err := remote.Put(ref, rawManifest{index, types.OCIImageIndex}, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("realnode: push the index %s: %w", ref, err)
	}
	return nil
}

// rawManifest is a manifest to store as it is.
type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// PushAs stores img in the node's registry under ref, a full name in one of the mirrored
// registries (Options.Mirrors), e.g. docker.io/library/busybox:1.36: a pod naming ref pulls
// it from there, by that name, as from the real registry.
func (n *Node) PushAs(ctx context.Context, ref string, img v1.Image) error {
	return n.push(ctx, ref, img)
}

// PushIndexAs is PushAs for a multi-platform image: the node's containerd picks the
// manifest of its own platform, as it would from the real registry.
func (n *Node) PushIndexAs(ctx context.Context, ref string, idx v1.ImageIndex) error {
	return n.push(ctx, ref, idx)
}

// push stores an image or an index, with all it refers to, under ref's name in the node's
// registry.
func (n *Node) push(ctx context.Context, ref string, t remote.Taggable) error {
	local, err := n.mirrored(ref)
	if err != nil {
		return err
	}
	if err := remote.MultiWrite(map[name.Reference]remote.Taggable{local: t}, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("realnode: push %s as %s: %w", local, ref, err)
	}
	return nil
}

// mirrored is where ref lives in the node's registry.
func (n *Node) mirrored(ref string) (name.Reference, error) {
	return MirrorRef(n.reg.host, n.mirrors, ref)
}

// MirrorRef is where a node whose registry is at registry (host:port) and which mirrors
// the given registries finds ref: the same repository path and tag or digest, which is
// what containerd asks the mirror for. For a process other than the node's, such as `make
// run` pushing to a node that `hack/sandbox up` runs.
func MirrorRef(registry string, mirrors []string, ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	from := r.Context().RegistryStr()
	if from == name.DefaultRegistry {
		// go-containerregistry's name for Docker Hub; containerd's hosts dir is docker.io.
		from = "docker.io"
	}
	if !slices.Contains(mirrors, from) {
		return nil, fmt.Errorf("realnode: %s is not a mirrored registry (%s): the node would look for %s elsewhere", from, strings.Join(mirrors, ", "), ref)
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	return name.ParseReference(registry+"/"+r.Context().RepositoryStr()+sep+r.Identifier(), name.Insecure)
}
