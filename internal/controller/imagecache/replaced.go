package imagecache

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// deleteReplacedJobs deletes, under the retain policy, the kept Jobs of the
// cache whose (image, node) pair the work is about to run again, and the
// kept node Jobs of the nodes it works on, before any new Job exists. The
// rest stay: a user retained them to look at them, and a new-node operation on one node says nothing new about the others. So a
// cache keeps at most one Job per pair, the latest; a restart's clean-up
// still deletes them all.
func (r *Reconciler) deleteReplacedJobs(ctx context.Context, cache *v1alpha2.ImageCache, work []jobs.Work) error {
	if r.Config.Retention == jobs.RetainNone || len(work) == 0 {
		return nil
	}
	pairs := make(map[string]bool, len(work))
	nodes := map[string]bool{}
	for _, w := range work {
		pairs[pairKey(w.Ref.String(), w.Node.Name)] = true
		nodes[w.Node.Name] = true
	}
	// Only metadata: the image and node are annotations, and a retained
	// Job's spec and status are of no use here.
	var kept []metav1.PartialObjectMetadata
	for _, ns := range r.jobNamespaces(cache) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("JobList"))
		if err := r.APIReader.List(ctx, list, client.InNamespace(ns),
			client.MatchingLabels{jobs.LabelCacheUID: string(cache.UID)}); err != nil {
			return fmt.Errorf("listing the retained jobs: %w", err)
		}
		kept = append(kept, list.Items...)
	}
	var stale []client.ObjectKey
	for i := range kept {
		a := kept[i].Annotations
		if _, perPair := a[jobs.AnnotationImage]; !perPair {
			// A node Job: it stays until its node has work again.
			if nodes[a[jobs.AnnotationNode]] {
				stale = append(stale, client.ObjectKeyFromObject(&kept[i]))
			}
			continue
		}
		ref, err := images.Normalize(a[jobs.AnnotationImage])
		if err != nil {
			ref = a[jobs.AnnotationImage]
		}
		if pairs[pairKey(ref, a[jobs.AnnotationNode])] {
			stale = append(stale, client.ObjectKeyFromObject(&kept[i]))
		}
	}
	if len(stale) == 0 {
		return nil
	}
	_, first := inParallel(len(stale), r.Config.WriteParallelism, func(i int) error {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: stale[i].Namespace, Name: stale[i].Name}}
		return client.IgnoreNotFound(r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	if first != nil {
		return fmt.Errorf("deleting the retained jobs the operation replaces: %w", first)
	}
	return nil
}

func pairKey(image, node string) string { return image + "|" + node }
