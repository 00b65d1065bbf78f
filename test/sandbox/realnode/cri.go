package realnode

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criClient talks to the node's containerd as the kubelet does, so that tests see what the
// runtime really holds rather than what the node reports in its status.
type criClient struct {
	conn    *grpc.ClientConn
	runtime runtimeapi.RuntimeServiceClient
	images  runtimeapi.ImageServiceClient
}

func dialCRI(socket string) (*criClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &criClient{conn: conn, runtime: runtimeapi.NewRuntimeServiceClient(conn), images: runtimeapi.NewImageServiceClient(conn)}, nil
}

func (c *criClient) close() {
	if c != nil {
		_ = c.conn.Close()
	}
}

var errNoCRI = errors.New("containerd serves no CRI (its cri plugin failed to load)")

// ready reports whether the runtime and its network (the CNI config) are up.
func (c *criClient) ready(ctx context.Context) (bool, error) {
	st, err := c.runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if status.Code(err) == codes.Unimplemented {
		// containerd serves its socket only after loading its plugins: a missing CRI
		// service will not appear later, and its log says why it failed to load.
		return false, fmt.Errorf("%w: %w", errNoCRI, err)
	}
	if err != nil {
		return false, err
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if !cond.Status {
			return false, fmt.Errorf("%s: %s %s", cond.Type, cond.Reason, cond.Message)
		}
	}
	return true, nil
}

// removePods stops and removes every pod sandbox, all at once. This is what releases the
// pods' network (CNI DEL), mounts and processes cleanly; killing is only the fallback.
func (c *criClient) removePods(ctx context.Context) error {
	pods, err := c.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range pods.GetItems() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id})
			if err == nil {
				_, err = c.runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id})
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.GetMetadata().GetNamespace(), p.GetMetadata().GetName(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ImageStatus is the runtime's record of the image ref (a tag or digest reference), nil
// when the runtime does not have it.
func (n *Node) ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	st, err := n.cri.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return nil, fmt.Errorf("realnode: CRI image status of %s: %w", ref, err)
	}
	return st.GetImage(), nil
}

// ListImages lists every image the runtime holds.
func (n *Node) ListImages(ctx context.Context) ([]*runtimeapi.Image, error) {
	l, err := n.cri.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("realnode: CRI list images: %w", err)
	}
	return l.GetImages(), nil
}

// PullImage pulls ref into the runtime directly, without a pod: for tests that need an
// image present before the controller acts.
func (n *Node) PullImage(ctx context.Context, ref string) error {
	_, err := n.cri.images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return fmt.Errorf("realnode: CRI pull %s: %w", ref, err)
	}
	return nil
}

// RemoveImage removes ref, and every other name of the same image, from the runtime, as
// `crictl rmi` does; an image the runtime does not hold is no error.
func (n *Node) RemoveImage(ctx context.Context, ref string) error {
	img, err := n.ImageStatus(ctx, ref)
	if err != nil || img == nil {
		return err
	}
	if _, err := n.cri.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: img.Id}}); err != nil {
		return fmt.Errorf("realnode: CRI remove %s: %w", ref, err)
	}
	return nil
}
