// Package cachetrim slims the pods and nodes the controller keeps in its
// informer caches (its Jobs are kept by jobwatch). At 1000 nodes × 10 images
// the cache may hold 10,000 pods, each with a pod spec, conditions and
// managed fields the controller never reads, and 1000 nodes with their
// capacity, addresses and heartbeats. What is kept is what settling a Job's
// result and choosing nodes read.
package cachetrim

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// Pod keeps what settling reads of a pod: its name, the labels it is found
// by (its operation and its Job), creation time, node, phase and container
// states (they carry the runtime's pull errors). A Job's pod carries eleven
// labels, and conditions, addresses, images and the rest of the spec: at
// 10,000 pods they were most of what the cache held after the Jobs were
// kept small.
func Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ObjectMeta = identity(p.ObjectMeta, keep(p.Labels, jobs.LabelOperation, batchv1.JobNameLabel, legacyJobNameLabel))
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
	p.Status = corev1.PodStatus{
		Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
		InitContainerStatuses: states(p.Status.InitContainerStatuses),
		ContainerStatuses:     states(p.Status.ContainerStatuses),
	}
	return p, nil
}

// identity keeps of an object's metadata what the informer and the
// controller need of any object: who it is, its version, when it was created
// and deleted; and the labels given.
func identity(m metav1.ObjectMeta, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Labels: labels,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
	}
}

// legacyJobNameLabel is what the Job controller labelled pods with before
// batch.kubernetes.io/job-name; clusters still set both.
const legacyJobNameLabel = "job-name"

func keep(in map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := in[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

func states(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State}
	}
	return out
}

// Node keeps what deciding a node's eligibility and its images reads: its
// labels (node selectors), creation time (new nodes), cordon and taints,
// Ready condition, image names, container runtime (delete Jobs) and
// operating system (our helpers run on Linux only). A
// node's capacity, addresses, other conditions and annotations are most of
// its size, and at 1000 nodes every List of them from the cache copied them.
func Node(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ObjectMeta = identity(n.ObjectMeta, n.Labels)
	n.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}
	var ready []corev1.NodeCondition
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	var imgs []corev1.ContainerImage
	if len(n.Status.Images) > 0 {
		imgs = make([]corev1.ContainerImage, len(n.Status.Images))
		for i, img := range n.Status.Images {
			imgs[i] = corev1.ContainerImage{Names: img.Names}
		}
	}
	n.Status = corev1.NodeStatus{
		Conditions: ready, Images: imgs,
		NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: n.Status.NodeInfo.ContainerRuntimeVersion,
			OperatingSystem: n.Status.NodeInfo.OperatingSystem},
	}
	return n, nil
}

var (
	_ cache.TransformFunc = Pod
	_ cache.TransformFunc = Node
)
