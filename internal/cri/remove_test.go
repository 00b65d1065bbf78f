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
	removeErr error
}

func (s *imageService) ImageStatus(_ context.Context, r *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.images[r.Image.Image]; ok {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: id}}, nil
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

func serve(t *testing.T, svc *imageService) string {
	sock := filepath.Join(t.TempDir(), "cri.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterImageServiceServer(srv, svc)
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
