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
	"k8s.io/client-go/tools/cache"
)

// Job keeps a Job's metadata (labels, annotations, owner, times) and its
// status, and drops its spec: results are read from status and conditions.
// Objects that are not Jobs pass through untouched.
func Job(obj any) (any, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return obj, nil
	}
	j.ManagedFields = nil
	j.Spec = batchv1.JobSpec{}
	return j, nil
}

// Pod keeps a pod's metadata, its node and its status (container states
// carry the runtime's pull errors), and drops the rest of its spec.
func Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.Spec = corev1.PodSpec{NodeName: p.Spec.NodeName}
	return p, nil
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
