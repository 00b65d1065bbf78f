// Package containerdtest is an in-memory containerd as far as pinning sees
// it, served on a unix socket for the tests of containerdpin and of the
// helpers that run it. It is a fake server, not a mock: our client speaks
// the real protocols to it.
package containerdtest

import (
	"context"
	"maps"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubefledged/kube-fledged/internal/pin"
)

// Runtime answers CRI ImageStatus and RemoveImage from a table and keeps
// containerd image records' labels with containerd's field-mask semantics
// ("labels.k" sets k to the request's value; an empty value removes it). It
// refuses a call outside the k8s.io namespace and an update without a mask,
// as either would be a bug of ours on a real node. Lock Mu to read its maps
// while a client may be calling.
type Runtime struct {
	runtimeapi.UnimplementedImageServiceServer
	imagesapi.UnimplementedImagesServer

	Mu      sync.Mutex
	Version string
	// CRI maps a reference, as a client sends it, to the CRI image.
	CRI map[string]*runtimeapi.Image
	// Records maps a containerd image record's name to its labels.
	Records   map[string]map[string]string
	UpdateErr error
	// RemoveErr refuses CRI RemoveImage, as a runtime does for an image in use.
	RemoveErr error
	// Meddle runs once, before the first update is applied: another helper
	// writing the same record between our read and our write.
	Meddle  func(records map[string]map[string]string)
	Updates int
}

// Namespace is the only containerd namespace the fake serves.
const Namespace = "k8s.io"

// versionOf reads Version under the lock.
func (r *Runtime) versionOf() string {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.Version
}

// Serve runs r on a fresh unix socket until the test ends and returns its
// endpoint. containerd=false serves CRI only, as CRI-O and cri-dockerd do.
func Serve(t *testing.T, r *Runtime, containerd bool) string {
	sock := filepath.Join(t.TempDir(), "containerd.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, r)
	runtimeapi.RegisterRuntimeServiceServer(srv, runtimeServer{})
	if containerd {
		imagesapi.RegisterImagesServer(srv, r)
		versionapi.RegisterVersionServer(srv, versionServer{r: r})
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

// versionServer is apart from Runtime because containerd's version service
// and Runtime's Version field share a name.
type versionServer struct {
	versionapi.UnimplementedVersionServer
	r *Runtime
}

func (v versionServer) Version(context.Context, *emptypb.Empty) (*versionapi.VersionResponse, error) {
	return &versionapi.VersionResponse{Version: v.r.versionOf()}, nil
}

// ImageStatus reports the CRI image, pinned when any of its records carries
// the runtime's pinned label, as containerd's CRI plugin derives it.
func (r *Runtime) ImageStatus(_ context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	img := r.CRI[req.GetImage().GetImage()]
	if img == nil {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	out := proto.Clone(img).(*runtimeapi.Image)
	for _, n := range append(append([]string{img.GetId()}, img.GetRepoTags()...), img.GetRepoDigests()...) {
		if r.Records[n][pin.RuntimeLabel] == pin.RuntimeValue {
			out.Pinned = true
		}
	}
	return &runtimeapi.ImageStatusResponse{Image: out}, nil
}

// runtimeServer is CRI's runtime service of a node that runs no
// containers (apart from Runtime, whose Version field would hide the
// service's Version method).
type runtimeServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

// ListContainers lists none.
func (runtimeServer) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{}, nil
}

// RemoveImage drops the CRI image and every record of it, as containerd's
// CRI plugin does: the labels go with the records.
func (r *Runtime) RemoveImage(_ context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if r.RemoveErr != nil {
		return nil, r.RemoveErr
	}
	img := r.CRI[req.GetImage().GetImage()]
	if img == nil {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	for _, n := range append(append([]string{img.GetId()}, img.GetRepoTags()...), img.GetRepoDigests()...) {
		delete(r.Records, n)
	}
	for ref, i := range r.CRI {
		if i == img {
			delete(r.CRI, ref)
		}
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// target is a record's descriptor: made up, but never nil, as containerd's never are.
func target(name string) *types.Descriptor {
	return &types.Descriptor{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: "sha256:" + strings.Repeat("0", 64), Size: int64(len(name))}
}

func namespaced(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("containerd-namespace"); len(v) != 1 || v[0] != Namespace {
		return status.Errorf(codes.FailedPrecondition, "namespace is required (got %v)", v)
	}
	return nil
}

func (r *Runtime) Get(ctx context.Context, req *imagesapi.GetImageRequest) (*imagesapi.GetImageResponse, error) {
	if err := namespaced(ctx); err != nil {
		return nil, err
	}
	r.Mu.Lock()
	defer r.Mu.Unlock()
	l, ok := r.Records[req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "image %q: not found", req.GetName())
	}
	return &imagesapi.GetImageResponse{Image: &imagesapi.Image{Name: req.GetName(), Labels: maps.Clone(l), Target: target(req.GetName())}}, nil
}

func (r *Runtime) Update(ctx context.Context, req *imagesapi.UpdateImageRequest) (*imagesapi.UpdateImageResponse, error) {
	if err := namespaced(ctx); err != nil {
		return nil, err
	}
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if r.UpdateErr != nil {
		return nil, r.UpdateErr
	}
	if r.Meddle != nil {
		r.Meddle(r.Records)
		r.Meddle = nil
	}
	name := req.GetImage().GetName()
	l, ok := r.Records[name]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "image %q: not found", name)
	}
	if req.GetImage().GetTarget() == nil {
		// containerd 1.7 converts the request's target before it reads the mask: a
		// nil one is a nil-pointer panic that takes the whole daemon down.
		return nil, status.Error(codes.Internal, "nil target: containerd 1.7 would crash")
	}
	if len(req.GetUpdateMask().GetPaths()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "an update without a mask replaces every label")
	}
	for _, p := range req.GetUpdateMask().GetPaths() {
		k, ok := strings.CutPrefix(p, "labels.")
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "cannot update %q", p)
		}
		if v := req.GetImage().GetLabels()[k]; v != "" {
			l[k] = v
		} else {
			delete(l, k)
		}
	}
	r.Updates++
	return &imagesapi.UpdateImageResponse{Image: &imagesapi.Image{Name: name, Labels: maps.Clone(l)}}, nil
}
