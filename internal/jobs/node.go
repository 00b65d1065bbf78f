package jobs

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// MaxContainers bounds the pull containers of one node Job; a node with
// more work gets another Job. It keeps a pod's spec and status well within
// what the API server and the kubelet handle without strain.
const MaxContainers = 32

// PullContainer is the pull container of a per-(image, node) Job.
const PullContainer = "pull"

// ContainerName is the name of the k-th pull container of a node Job.
func ContainerName(k int) string { return PullContainer + "-" + strconv.Itoa(k) }

// NodeJobName is the fixed name of the node Job that pulls ws: like Name,
// the cache name cut to fit and a hash, here of the operation and every
// work item, so that a retried create names the same Job.
func NodeJobName(cacheName, operation string, ws []Work) string {
	keys := make([]string, len(ws))
	for i, w := range ws {
		keys[i] = w.Key()
	}
	sort.Strings(keys)
	h := shortHash(operation, "node|"+strings.Join(keys, "\n"))
	prefix := cacheName
	if max := 63 - len(h) - 1 - 6; len(prefix) > max {
		prefix = prefix[:max]
	}
	return strings.TrimRight(prefix, "-.") + "-" + h
}

// BuildNode returns the Job that pulls every image of ws onto their node:
// one pod whose k-th container pulls ws[k]. All of ws must be pulls onto
// one node, at most MaxContainers of them. Its tolerations are those of
// all its lists together (every taint if one list names none): each pair
// was found to fit the node before the Job was built.
func BuildNode(o Owner, ws []Work, opts Options) (*batchv1.Job, error) {
	if len(ws) == 0 || len(ws) > MaxContainers {
		return nil, fmt.Errorf("a node Job pulls 1 to %d images, not %d", MaxContainers, len(ws))
	}
	node := ws[0].Node
	var tolerations []corev1.Toleration
	all := false
	for _, w := range ws {
		if w.Kind != Pull || w.Node.Name != node.Name {
			return nil, fmt.Errorf("a node Job only pulls onto one node: %s of %s onto %s with %s onto %s",
				w.Kind, w.Image, w.Node.Name, Pull, node.Name)
		}
		if len(w.Tolerations) == 0 {
			all = true
		}
		for _, t := range w.Tolerations {
			if !slices.ContainsFunc(tolerations, func(have corev1.Toleration) bool { return have.MatchToleration(&t) }) {
				tolerations = append(tolerations, t)
			}
		}
	}
	if all {
		tolerations = nil
	}
	ann := map[string]string{
		AnnotationNode:    node.Name,
		AnnotationRuntime: node.Runtime,
	}
	return wrap(o, Pull, node.Name, tolerations, NodeJobName(o.Cache.Name, o.Operation, ws), ann, pullPod(ws, opts, o.pullUser(), true), opts), nil
}

// ImagesOf is what a Job of ours works on: the image of a Job per (image,
// node), each container's image of a node's pull Job, the images a pin or
// unpin Job was given.
func ImagesOf(job *batchv1.Job) []string {
	if img, ok := job.Annotations[AnnotationImage]; ok {
		return []string{img}
	}
	if k := Kind(job.Labels[LabelKind]); k == Pin || k == Unpin {
		return PinImagesOf(job)
	}
	var out []string
	for _, c := range job.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}
