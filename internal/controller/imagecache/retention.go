package imagecache

// What becomes of an operation's Jobs, by --job-retention-policy
// (Config.Retention), lives in this file:
//
//   - delete (jobs.RetainNone, the default): a Job goes, with its pods, as soon
//     as every pair it runs is settled (deletesSettled), and the operation's
//     end sweeps what that missed (applyRetention). Two writes per pair, what
//     runs stays within the caps, and a large operation leaves no mass
//     deletion to wait for.
//   - retain (jobs.Retain): every Job of an operation stays, labelled with
//     its result (labelResult; a node Job with its worst, worse), for the
//     user to read, until its (image, node) pair, or its node for a node Job,
//     runs again (deleteReplacedJobs). So a cache keeps at most the latest
//     Job of each pair; the start-up clean-up still deletes them all.

import (
	"context"
	"encoding/json"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// deletesSettled says whether a Job is deleted as soon as every pair it
// runs is settled (settleJob; release frees its slot only then), as under
// the delete policy, rather than with the rest at the operation's end: its
// result is known, what runs in the cluster stays within the caps, and a
// large operation has no mass deletion left to wait for (one
// deletecollection of 10,000 Jobs outlasted the API server's request
// timeout).
func (r *Reconciler) deletesSettled() bool { return r.Config.Retention == jobs.RetainNone }

// applyRetention is the end of an operation's Jobs. Under delete, each
// went when it was settled, so only what that may have missed (op.sweep: a
// delete failed, or a Job vanished from the cache only) is deleted now, with
// its pods, by the operation's label. Under retain, every Job the operation
// made stays, running ones included, and those with a result are labelled
// with it for `kubectl get jobs -l`.
func (r *Reconciler) applyRetention(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	if r.deletesSettled() {
		if !op.sweep {
			return nil
		}
		for _, ns := range r.jobNamespaces(cache) {
			err := r.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
				client.MatchingLabels{jobs.LabelOperation: op.id},
				client.PropagationPolicy(metav1.DeletePropagationBackground))
			if client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		return nil
	}
	var names []string
	outcome := map[string]results.Outcome{}
	for i := range op.table.pairs {
		p := &op.table.pairs[i]
		if !p.settled() || p.job == nil || p.job.created.IsZero() {
			continue
		}
		job := p.job.name
		before, seen := outcome[job]
		if !seen {
			names = append(names, job)
		}
		outcome[job] = worse(before, p.outcome, seen)
	}
	_, first := inParallel(len(names), r.Config.WriteParallelism, func(i int) error {
		return r.labelResult(ctx, r.jobNamespace(cache, op, names[i]), names[i], outcome[names[i]])
	})
	return first
}

// worse is the one result a node Job stands for, given the result so far
// (a; none unless seen) and one more container's (b): the first failure of
// its containers, expired ones first, or success if all pulled. A retained
// node Job is labelled with it, and the Jobs-finished metric counts it;
// each container's own state stays in the retained pod.
func worse(a, b results.Outcome, seen bool) results.Outcome {
	switch {
	case !seen:
		return b
	case a.State == results.Succeeded:
		return b
	case b.Expired && !a.Expired:
		return b
	}
	return a
}

// labelResult labels a retained Job with its result (jobs.LabelResult, the
// words of resultOf) and annotates it with the reason and message, so that
// `kubectl get jobs -l imagecache=NAME,kubefledged.io/result=failed` lists a
// cache's latest failures and says why without reading the pods. A Job
// deleted meanwhile has nothing left to label.
func (r *Reconciler) labelResult(ctx context.Context, ns, name string, o results.Outcome) error {
	msg := o.Reason
	if o.Message != "" {
		msg += ": " + o.Message
	}
	patch := map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{jobs.LabelResult: resultOf(o)},
		"annotations": map[string]string{jobs.AnnotationResultMsg: msg},
	}}
	body, _ := json.Marshal(patch)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return client.IgnoreNotFound(r.Client.Patch(ctx, job, client.RawPatch(types.MergePatchType, body)))
}

// deleteReplacedJobs deletes, under retain, the kept Jobs of the cache whose
// (image, node) pair the work is about to run again, and the kept node Jobs
// of the nodes it works on, before any new Job exists. The rest stay: a user
// retained them to look at them, and a new-node operation on one node says
// nothing new about the others.
func (r *Reconciler) deleteReplacedJobs(ctx context.Context, cache *v1alpha2.ImageCache, work []jobs.Work) error {
	if r.deletesSettled() || len(work) == 0 {
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
