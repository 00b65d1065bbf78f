package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeSpec describes a fake node. The zero value beyond Name is a plain Ready linux/amd64
// worker with no taints.
type NodeSpec struct {
	Name          string
	Labels        map[string]string // added to the standard ones (hostname, os, arch, type=kwok)
	Taints        []corev1.Taint
	Unschedulable bool
	// Images is status.images, as a kubelet would report the images on the node.
	Images []corev1.ContainerImage
	// ContainerRuntimeVersion defaults to "containerd://1.7.27".
	ContainerRuntimeVersion string
	// NoHostnameLabel omits kubernetes.io/hostname, which some clusters (or a kubelet with
	// --hostname-override) do not set to the node name.
	NoHostnameLabel bool
	// NotReady makes kwok report the node NotReady from the start (see SetNodeReady).
	NotReady bool
}

// Taint keys the node lifecycle controller manages; CreateNodes and SetNodeReady wait for
// them to settle so callers see the node as a real cluster would leave it.
const (
	taintNotReady      = "node.kubernetes.io/not-ready"
	taintUnreachable   = "node.kubernetes.io/unreachable"
	taintUnschedulable = "node.kubernetes.io/unschedulable"
)

// CreateNodes creates fake nodes managed by kwok and waits until each is Ready — or, for
// NotReady ones, reported NotReady — and the node lifecycle controller has tainted it
// accordingly: a NotReady node carries node.kubernetes.io/not-ready:NoSchedule (a NoExecute
// one may follow, rate-limited, or never when most nodes are down) and an Unschedulable one
// node.kubernetes.io/unschedulable:NoSchedule, both beside the given Taints.
func (s *Sandbox) CreateNodes(ctx context.Context, specs ...NodeSpec) error {
	nodes := make([]*corev1.Node, len(specs))
	for i, spec := range specs {
		if spec.Name == "" {
			return errors.New("sandbox: NodeSpec without Name")
		}
		nodes[i] = s.fakeNode(spec)
	}
	// Creation is concurrent because hundreds of nodes one by one would take seconds.
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, 16)
	)
	for _, n := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := s.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("create node %s: %w", n.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	want := make(map[string]NodeSpec, len(specs))
	for _, spec := range specs {
		want[spec.Name] = spec
	}
	var pending []string
	err := s.waitFor(ctx, "fake nodes to settle", func(ctx context.Context) (bool, error) {
		// Served from the watch cache: cheap even when polling a thousand nodes.
		list, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		pending = pending[:0]
		seen := 0
		for i := range list.Items {
			n := &list.Items[i]
			spec, ok := want[n.Name]
			if !ok {
				continue
			}
			seen++
			if !nodeSettled(n, !spec.NotReady, spec.Unschedulable) {
				pending = append(pending, n.Name)
			}
		}
		return seen == len(want) && len(pending) == 0, nil
	})
	if err != nil && len(pending) > 0 {
		sort.Strings(pending)
		if len(pending) > 10 {
			pending = append(pending[:10], "...")
		}
		return fmt.Errorf("%w (not settled: %s; see %s/logs/kwok.log)", err, strings.Join(pending, ", "), s.dir)
	}
	return err
}

// nodeSettled tells whether n reports the wanted readiness and carries exactly the
// lifecycle taints a real control plane gives such a node.
func nodeSettled(n *corev1.Node, ready, unschedulable bool) bool {
	status := corev1.ConditionUnknown
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			status = c.Status
		}
	}
	hasTaint := func(key string, effect corev1.TaintEffect) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == key && (effect == "" || t.Effect == effect)
		})
	}
	if unschedulable != hasTaint(taintUnschedulable, corev1.TaintEffectNoSchedule) {
		return false
	}
	if ready {
		return status == corev1.ConditionTrue && !hasTaint(taintNotReady, "") && !hasTaint(taintUnreachable, "")
	}
	return status == corev1.ConditionFalse && hasTaint(taintNotReady, corev1.TaintEffectNoSchedule)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Sandbox) fakeNode(spec NodeSpec) *corev1.Node {
	labels := map[string]string{
		"kubernetes.io/os":   "linux",
		"kubernetes.io/arch": "amd64",
		"type":               "kwok",
	}
	if !spec.NoHostnameLabel {
		labels["kubernetes.io/hostname"] = spec.Name
	}
	if spec.NotReady {
		labels[NotReadyLabel] = "true"
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	runtime := spec.ContainerRuntimeVersion
	if runtime == "" {
		runtime = defaultRuntimeVersion
	}
	s.mu.Lock()
	s.nodeSeq++
	seq := s.nodeSeq - 1
	s.mu.Unlock()
	// Distinct InternalIPs (10.200.0.2 onwards), as code may key on node addresses.
	ip := fmt.Sprintf("10.200.%d.%d", seq/250, seq%250+2)
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("32"),
		corev1.ResourceMemory:           resource.MustParse("256Gi"),
		corev1.ResourcePods:             resource.MustParse("500"),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	// A NotReady node reports so from its first status, as a kubelet whose runtime network
	// is down registers. Created without conditions, the node lifecycle controller could
	// first see it condition-less and decide to drop the not-ready taint that admission
	// puts on every new node, then apply that stale decision after kwok reported NotReady:
	// the node would briefly be NotReady without the taint, after CreateNodes had seen both.
	var conditions []corev1.NodeCondition
	if spec.NotReady {
		now := metav1.Now()
		conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: notReadyMessage, LastHeartbeatTime: now, LastTransitionTime: now,
		}}
	}
	// Status is accepted on create for nodes (a kubelet registers that way), so the node
	// is complete before kwok first sees it; kwok then only manages its conditions.
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{
			Taints:        spec.Taints,
			Unschedulable: spec.Unschedulable,
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeHostName, Address: spec.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               randomHex(16),
				SystemUUID:              randomHex(16),
				BootID:                  randomHex(16),
				KernelVersion:           "6.1.0-sandbox",
				OSImage:                 "Debian GNU/Linux 12 (bookworm)",
				ContainerRuntimeVersion: runtime,
				KubeletVersion:          kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
			Images:     spec.Images,
			Conditions: conditions,
		},
	}
}

// SetNodeImages replaces status.images, standing in for a kubelet's image report. kwok's
// heartbeat patches only conditions, so the list stays until changed again.
func (s *Sandbox) SetNodeImages(ctx context.Context, name string, images []corev1.ContainerImage) error {
	if images == nil {
		images = []corev1.ContainerImage{}
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"images": images}})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// SetNodeReady makes a fake node NotReady (or Ready again) through the kwok stages, and
// waits until it reports so and the node lifecycle controller has adjusted the not-ready
// taints, so that the next scheduling decision already sees the change.
func (s *Sandbox) SetNodeReady(ctx context.Context, name string, ready bool) error {
	var value any = "true"
	if ready {
		value = nil // removes the label
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{NotReadyLabel: value}}})
	if err != nil {
		return err
	}
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	return s.waitFor(ctx, fmt.Sprintf("node %s ready=%v", name, ready), func(ctx context.Context) (bool, error) {
		n, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeSettled(n, ready, n.Spec.Unschedulable), nil
	})
}

// DeleteNode deletes a node and waits until it is gone. Pods bound to it are left to the
// pod garbage collector, as in a real cluster.
func (s *Sandbox) DeleteNode(ctx context.Context, name string) error {
	if err := s.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return s.waitFor(ctx, "node "+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
