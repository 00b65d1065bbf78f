package jobs

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// MaxPinImages bounds the images of one pin or unpin Job: each is an
// argument of its command, and its report must name the ones that failed
// within the 4096 bytes of a termination message (pin.MaxReportBytes). A
// node with more gets more Jobs.
const MaxPinImages = 64

// PinContainer is the one container of a pin or unpin Job.
const PinContainer = "pin"

// imageFlag is how a pin or unpin Job is given each image.
const imageFlag = "--image="

// PinJobName is the fixed name of the pin or unpin Job of images on node:
// the cache name cut to fit and a hash of the operation, kind, node and
// images, so that a retried create names the same Job.
func PinJobName(cacheName, operation string, kind Kind, node string, images []string) string {
	sorted := slices.Clone(images)
	slices.Sort(sorted)
	h := shortHash(operation, string(kind)+"|"+node+"|"+strings.Join(sorted, "\n"))
	prefix := cacheName
	if max := 63 - len(h) - 1 - 6; len(prefix) > max {
		prefix = prefix[:max]
	}
	return strings.TrimRight(prefix, "-.") + "-" + h
}

// BuildPin returns the Job that pins (kind Pin) or unpins (kind Unpin) the
// images on node for the cache: `kubefledged pin|unpin --owner=<cache UID>`
// with one --image each, in a pod like a delete Job's (the controller's
// namespace, root, the runtime socket). The owner is the cache's UID, not
// its name: a cache deleted and created again under the same name must not
// release the pins of the old one's images, nor take them over.
func BuildPin(o Owner, kind Kind, node Node, images []string, tolerations []corev1.Toleration, opts Options) (*batchv1.Job, error) {
	if kind != Pin && kind != Unpin {
		return nil, fmt.Errorf("BuildPin builds pin and unpin Jobs, not %s", kind)
	}
	if len(images) == 0 || len(images) > MaxPinImages {
		return nil, fmt.Errorf("a %s Job takes 1 to %d images, not %d", kind, MaxPinImages, len(images))
	}
	args := []string{string(kind), "--owner=" + string(o.Cache.UID)}
	for _, img := range images {
		args = append(args, imageFlag+img)
	}
	pod, err := runtimePod(node, opts, PinContainer, args)
	if err != nil {
		return nil, err
	}
	ann := map[string]string{AnnotationNode: node.Name, AnnotationRuntime: node.Runtime}
	name := PinJobName(o.Cache.Name, o.Operation, kind, node.Name, images)
	return wrap(o, kind, node.Name, tolerations, name, ann, pod, opts), nil
}

// PinImagesOf is what a pin or unpin Job was given, read back from its
// command: the report it leaves names only the images it could not do.
func PinImagesOf(job *batchv1.Job) []string {
	var out []string
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name != PinContainer {
			continue
		}
		for _, arg := range c.Command {
			if img, ok := strings.CutPrefix(arg, imageFlag); ok {
				out = append(out, img)
			}
		}
	}
	return out
}
