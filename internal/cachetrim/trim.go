// Package cachetrim slims the objects the controller keeps in its informer
// caches. At 1000 nodes × 10 images the cache holds 10,000 Jobs and as many
// pods, and each carries a full pod template, volumes and managed fields the
// controller never reads: kept whole they were most of its memory, and every
// List from the cache deep-copied them (half its CPU in the benchmark's
// profile). What is kept is what settling a Job's result needs.
package cachetrim

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Job keeps a Job's identity, labels and controller (the cache it wakes) and
// its conditions, and drops its spec and the rest of its status: results are
// read from the conditions alone. Objects that are not Jobs pass through
// untouched.
func Job(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	j.ObjectMeta = metav1.ObjectMeta{
		Name: j.Name, Namespace: j.Namespace, UID: j.UID, ResourceVersion: j.ResourceVersion,
		Labels: j.Labels, OwnerReferences: j.OwnerReferences,
		CreationTimestamp: j.CreationTimestamp, DeletionTimestamp: j.DeletionTimestamp,
	}
	j.Spec = batchv1.JobSpec{}
	j.Status = batchv1.JobStatus{Conditions: j.Status.Conditions}
	return j, nil
}

// Pod keeps what settling reads of a pod: its name, labels (the Job it
// belongs to), creation time, node, phase and container states (they carry
// the runtime's pull errors). Conditions, addresses, images and the rest of
// the spec go: at 10,000 pods they were most of what the cache held after
// the Jobs were trimmed.
func Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ObjectMeta = metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
	}
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
	p.Status = corev1.PodStatus{
		Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message,
		InitContainerStatuses: states(p.Status.InitContainerStatuses),
		ContainerStatuses:     states(p.Status.ContainerStatuses),
	}
	return p, nil
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

// Node keeps everything a node selector, a toleration check or the list of
// images already on the node may look at; managed fields are the only bulk
// that goes.
func Node(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	return n, nil
}

var (
	_ cache.TransformFunc = Job
	_ cache.TransformFunc = Pod
	_ cache.TransformFunc = Node
)
