package cri

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageService is a narrow in-memory CRI image service: it only checks that
// our client speaks the protocol as a runtime expects. The real runtime is
// exercised on the sandbox's real node.
type imageService struct {
	runtimeapi.UnimplementedImageServiceServer
	mu        sync.Mutex
	images    map[string]string
	pinned    bool
	removeErr error
}

func (s *imageService) ImageStatus(_ context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.images[r.Image.Image]; ok {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: id, RepoTags: []string{r.Image.Image},
			RepoDigests: []string{"docker.io/library/nginx@sha256:def"}, Pinned: s.pinned}}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (s *imageService) RemoveImage(_ context.Context, r *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.removeErr != nil {
		return nil, s.removeErr
	}
	delete(s.images, r.Image.Image)
	return &runtimeapi.RemoveImageResponse{}, nil
}

// runtimeService lists containers, or fails to.
type runtimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	containers []*runtimeapi.Container
	listErr    error
}

func (s *runtimeService) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if s.listErr != nil {
		return nil, s.listErr
	}
	return &runtimeapi.ListContainersResponse{Containers: s.containers}, nil
}

func serve(t *testing.T, svc *imageService) string {
	return serveWith(t, svc, &runtimeService{})
}

func serveWith(t *testing.T, svc *imageService, rt *runtimeService) string {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, svc)
	runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

func TestRemoveImage(t *testing.T) {
	cases := []struct {
		name      string
		have      map[string]string
		removeErr error
		want      Result
		wantErr   string
	}{
		{name: "removes a present image", have: map[string]string{"docker.io/library/nginx:1.21": "sha256:abc"}, want: Result{Removed: true}},
		{name: "absent image is not a failure", have: map[string]string{}, want: Result{Absent: true}},
		{name: "runtime refusal is reported", have: map[string]string{"docker.io/library/nginx:1.21": "sha256:abc"},
			removeErr: status.Error(codes.FailedPrecondition, "image is in use by a container"), wantErr: "image is in use by a container"},
		{name: "gone between status and remove", have: map[string]string{"docker.io/library/nginx:1.21": "sha256:abc"},
			removeErr: status.Error(codes.NotFound, "no such image"), want: Result{Absent: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			svc := &imageService{images: c.have, removeErr: c.removeErr}
			res, err := RemoveImage(context.Background(), serve(t, svc), "docker.io/library/nginx:1.21")
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Removed).To(Equal(c.want.Removed))
			g.Expect(res.Absent).To(Equal(c.want.Absent))
			if c.want.Removed {
				g.Expect(svc.images).NotTo(HaveKey("docker.io/library/nginx:1.21"))
			}
		})
	}
}

func TestRemoveImageRefusesTCP(t *testing.T) {
	g := NewWithT(t)
	_, err := RemoveImage(context.Background(), "tcp://127.0.0.1:1", "nginx")
	g.Expect(err).To(MatchError(ContainSubstring("only unix://")))
}

func container(pod, image, ref string, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{Id: pod + "-c", Image: &runtimeapi.ImageSpec{Image: image}, ImageRef: ref, State: state,
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Labels:   map[string]string{"io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.name": pod, "io.kubernetes.container.name": "app"}}
}

// A tenant's purge must not take an image from under what runs on the
// node, nor one the runtime or another cache pins: each is kept, and says
// why; an image only exited containers used goes.
func TestRemoveImageKeeps(t *testing.T) {
	const img = "docker.io/library/nginx:1.21"
	running, created, exited := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_EXITED
	cases := []struct {
		name       string
		pinned     bool
		containers []*runtimeapi.Container
		listErr    error
		wantKept   string
		wantMsg    string
		wantErr    string
	}{
		{name: "pinned by the runtime or another cache", pinned: true, wantKept: "Pinned", wantMsg: "is pinned on this node"},
		{name: "a running container by image id", containers: []*runtimeapi.Container{container("web-1", "sha256:abc", "", running)},
			wantKept: "InUse", wantMsg: "used by 1 container(s) on this node that have not exited (shop/web-1/app)"},
		{name: "a created container by digest", containers: []*runtimeapi.Container{container("web-2", "docker.io/library/nginx@sha256:def", "", created)},
			wantKept: "InUse", wantMsg: "shop/web-2/app"},
		{name: "a container by its image ref", containers: []*runtimeapi.Container{container("web-3", "other", "sha256:abc", running)},
			wantKept: "InUse", wantMsg: "shop/web-3/app"},
		{name: "many containers are counted, a few named", containers: []*runtimeapi.Container{
			container("a", img, "", running), container("b", img, "", running), container("c", img, "", running), container("d", img, "", running)},
			wantKept: "InUse", wantMsg: "used by 4 container(s) on this node that have not exited (shop/a/app, shop/b/app, shop/c/app and 1 more)"},
		{name: "exited containers do not keep it", containers: []*runtimeapi.Container{container("done", img, "sha256:abc", exited)}},
		{name: "another image's containers do not keep it", containers: []*runtimeapi.Container{container("other", "redis:7", "sha256:999", running)}},
		{name: "no container list, no removal", listErr: status.Error(codes.Unavailable, "runtime busy"), wantErr: "cannot tell which containers use image"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			svc := &imageService{images: map[string]string{img: "sha256:abc"}, pinned: c.pinned}
			res, err := RemoveImage(context.Background(), serveWith(t, svc, &runtimeService{containers: c.containers, listErr: c.listErr}), img)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				g.Expect(svc.images).To(HaveKey(img), "removed though its users are unknown")
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Kept).To(Equal(c.wantKept))
			if c.wantKept == "" {
				g.Expect(res.Removed).To(BeTrue())
				g.Expect(svc.images).NotTo(HaveKey(img))
				return
			}
			g.Expect(res.Removed).To(BeFalse())
			g.Expect(res.Message).To(ContainSubstring(c.wantMsg))
			g.Expect(svc.images).To(HaveKey(img), "a kept image was removed")
		})
	}
}
