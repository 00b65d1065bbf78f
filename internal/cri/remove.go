// Package cri removes an image from a node through the container runtime's
// CRI socket. It replaces the original's crictl and docker CLIs: one small
// client in our own image, no shell, the same code for containerd, CRI-O and
// cri-dockerd.
package cri

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Result is the runtime's answer, written to the termination log so that a
// failure in the cache's status carries it.
type Result struct {
	Removed bool
	// Absent is true when the runtime did not have the image: the goal
	// (image not on the node) is met, so it is not a failure.
	Absent bool
	// Kept says why the image was left on the node although asked to
	// remove it (v1alpha2.KeptReasonInUse, v1alpha2.KeptReasonPinned):
	// removing it would break what runs there or what another cache, or
	// the runtime itself, keeps. Not a failure either.
	Kept    string
	Message string
}

// maxNamed bounds the containers a kept image's message names.
const maxNamed = 3

// RemoveImage asks the runtime at endpoint (unix:///path) to remove image,
// unless the image is pinned (by the runtime, as its sandbox image, or by a
// cache's pin: the caller drops its own cache's pin first) or a container
// on the node that has not exited uses it. A tenant's purge must not take
// away an image that another workload runs or that the node needs: the
// kubelet would have to pull it again to restart that container, from a
// registry that may be gone. When the runtime cannot say which containers
// it runs, nothing is removed.
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
	img := st.GetImage()
	if img == nil {
		return Result{Absent: true, Message: fmt.Sprintf("image %s is not on this node; nothing to remove", image)}, nil
	}
	if img.GetPinned() {
		return Result{Kept: v1alpha2.KeptReasonPinned, Message: fmt.Sprintf("image %s (%s) is pinned on this node, by the runtime (its sandbox image) "+
			"or by another cache's pin: kept", image, img.GetId())}, nil
	}
	users, err := containersUsing(ctx, runtimeapi.NewRuntimeServiceClient(conn), img)
	if err != nil {
		return Result{}, fmt.Errorf("runtime at %s: cannot tell which containers use image %s, so it is kept: %w", endpoint, image, err)
	}
	if len(users) > 0 {
		named := users[:min(len(users), maxNamed)]
		more := ""
		if len(users) > maxNamed {
			more = fmt.Sprintf(" and %d more", len(users)-maxNamed)
		}
		return Result{Kept: v1alpha2.KeptReasonInUse, Message: fmt.Sprintf("image %s (%s) is used by %d container(s) on this node that have not exited (%s%s): kept",
			image, img.GetId(), len(users), strings.Join(named, ", "), more)}, nil
	}
	_, err = images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if status.Code(err) == codes.NotFound {
		return Result{Absent: true, Message: fmt.Sprintf("image %s was already gone", image)}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("runtime at %s: remove image %s: %w", endpoint, image, err)
	}
	return Result{Removed: true, Message: fmt.Sprintf("image %s (%s) removed", image, img.GetId())}, nil
}

// containersUsing names the containers of the runtime that run img or may
// still start it (every state but exited), as pod namespace/name/container
// where the kubelet's labels say so. A container names its image by id, by
// the reference it was created from or by a digest; any of the image's
// names counts.
func containersUsing(ctx context.Context, rt runtimeapi.RuntimeServiceClient, img *runtimeapi.Image) ([]string, error) {
	resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, err
	}
	names := append([]string{img.GetId()}, img.GetRepoTags()...)
	names = append(names, img.GetRepoDigests()...)
	var users []string
	for _, c := range resp.GetContainers() {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		refs := []string{c.GetImageRef(), c.GetImage().GetImage(), c.GetImageId()}
		if !slices.ContainsFunc(refs, func(r string) bool { return r != "" && slices.Contains(names, r) }) {
			continue
		}
		users = append(users, containerName(c))
	}
	slices.Sort(users)
	return users, nil
}

func containerName(c *runtimeapi.Container) string {
	l := c.GetLabels()
	ns, pod, name := l["io.kubernetes.pod.namespace"], l["io.kubernetes.pod.name"], l["io.kubernetes.container.name"]
	if pod == "" {
		return "container " + c.GetMetadata().GetName()
	}
	return ns + "/" + pod + "/" + name
}
