// Package cri removes an image from a node through the container runtime's
// CRI socket. It replaces the original's crictl and docker CLIs: one small
// client in our own image, no shell, the same code for containerd, CRI-O and
// cri-dockerd.
package cri

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Result is the runtime's answer, written to the termination log so that a
// failure in the cache's status carries it.
type Result struct {
	Removed bool
	// Absent is true when the runtime did not have the image: the goal
	// (image not on the node) is met, so it is not a failure.
	Absent  bool
	Message string
}

// RemoveImage asks the runtime at endpoint (unix:///path) to remove image.
func RemoveImage(ctx context.Context, endpoint, image string) (Result, error) {
	if !strings.HasPrefix(endpoint, "unix://") {
		return Result{}, fmt.Errorf("endpoint %q: only unix:// sockets are supported", endpoint)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return Result{}, fmt.Errorf("connecting to the runtime at %s: %w", endpoint, err)
	}
	defer conn.Close()
	images := runtimeapi.NewImageServiceClient(conn)

	st, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		return Result{}, fmt.Errorf("runtime at %s: image status of %s: %w", endpoint, image, err)
	}
	if st.GetImage() == nil {
		return Result{Absent: true, Message: fmt.Sprintf("image %s is not on this node; nothing to remove", image)}, nil
	}
	_, err = images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if status.Code(err) == codes.NotFound {
		return Result{Absent: true, Message: fmt.Sprintf("image %s was already gone", image)}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("runtime at %s: remove image %s: %w", endpoint, image, err)
	}
	return Result{Removed: true, Message: fmt.Sprintf("image %s (%s) removed", image, st.GetImage().GetId())}, nil
}
