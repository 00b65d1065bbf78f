package imagecache

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/cachestatus"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/pacing"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/podimages"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// processingMessage is the original's status message while an operation of
// kind runs. A new-node operation, ours, pulls as a create does.
func processingMessage(kind plan.Operation) string {
	switch kind {
	case plan.Update:
		return v1alpha2.ImageCacheMessageUpdatingCache
	case plan.Refresh:
		return v1alpha2.ImageCacheMessageRefreshingCache
	case plan.Purge:
		return v1alpha2.ImageCacheMessagePurgingCache
	}
	return v1alpha2.ImageCacheMessagePullingImages
}

// start begins an operation: it plans the work, clears the retained Jobs the
// work replaces, records Processing and creates the first Jobs. only
// restricts a NewNodes operation to those nodes.
func (r *Reconciler) start(ctx context.Context, cache *v1alpha2.ImageCache, kind plan.Operation, only map[string]bool) (ctrl.Result, error) {
	if why := specTooLarge(&cache.Spec); why != "" {
		return ctrl.Result{}, r.decline(ctx, cache, kind, "SpecTooLarge", why)
	}
	in, res, err := r.prepare(ctx, cache, kind, only)
	if in == nil {
		return res, err
	}
	op := r.newOperation(cache, kind, only, in)
	detail := markProcessing(cache, op, in.pods)
	// The resourceVersion of our read guards this write: on a stale read it
	// conflicts and nothing has started.
	if err := r.statusWriter().WriteTransition(ctx, cache); err != nil {
		return ctrl.Result{}, err
	}
	op.pace = cachestatus.Paced(op.counts, op.start)
	r.ops.put(client.ObjectKeyFromObject(cache), op)
	r.startHeld(cache, op, in.nodes, &in.plan)
	r.announceStart(ctx, cache, op, in, detail)
	return r.progress(ctx, cache, op)
}

// startInput is what an operation starts from, as the cluster stood when
// it was planned.
type startInput struct {
	nodes []corev1.Node
	// record are the images of the pods fromPods selects, and pods how
	// listing them went (nil: the cache selects no pods, or the operation
	// does not look at them).
	record []v1alpha2.ListPodImages
	pods   *podsResult
	// spec is what the operation acts on: the named images and those of
	// record.
	spec v1alpha2.ImageCacheSpec
	plan plan.Plan
	user int64
}

// prepare reads the cluster, plans the operation and clears the way for
// its Jobs. A nil input means the operation cannot start yet: the caller
// returns res and err as they are.
func (r *Reconciler) prepare(ctx context.Context, cache *v1alpha2.ImageCache, kind plan.Operation, only map[string]bool) (*startInput, ctrl.Result, error) {
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	// The operation acts on the named images and those of the pods that
	// fromPods selects; an update compares them with what the cache holds,
	// less the pod images no pod runs any more, which are dropped, not
	// deleted (see podimages.Prior).
	record, pods := r.podsOf(cache, kind)
	if pods != nil && pods.cond.Reason == podsNotListedYet {
		// The pods are being listed (for podwatch.SyncGrace at most):
		// started now, the operation would leave them to a second one.
		return nil, ctrl.Result{RequeueAfter: pods.retry}, nil
	}
	in := &startInput{nodes: nodes.Items, record: record, pods: pods, spec: podimages.Effective(cache.Spec, record)}
	in.plan = plan.Build(plan.Input{
		Op: kind, Spec: in.spec, Prior: podimages.Prior(cache.Status.ProcessedSpec, cache.Status.PodImages, record),
		Nodes: in.nodes, AlwaysPull: r.Config.AlwaysPull, Only: only, StartupTaint: r.Config.StartupTaint,
	})
	if err := r.deleteReplacedJobs(ctx, cache, in.plan.Work); err != nil {
		return nil, ctrl.Result{}, err
	}
	if in.user, err = r.pullUser(ctx, cache); err != nil {
		return nil, ctrl.Result{}, err
	}
	return in, ctrl.Result{}, nil
}

// newOperation makes the memory of the operation the plan describes, its
// pairs that cannot run settled as failed from the start.
func (r *Reconciler) newOperation(cache *v1alpha2.ImageCache, kind plan.Operation, only map[string]bool, in *startInput) *operation {
	now := r.Clock.Now()
	p := &in.plan
	eligible := plan.EligibleNodes(&cache.Spec, in.nodes, r.Config.StartupTaint)
	op := &operation{scope: scope{
		id: newOperationID(), kind: kind, uid: cache.UID, generation: cache.Generation,
		spec: in.spec, named: *cache.Spec.DeepCopy(), podImages: in.record, start: now, eligible: eligible, only: only,
		priorCoverage: plan.ExistedAt(in.nodes, eligible, cache.Status.StartTime, r.Config.StartupTaint), joined: map[string]bool{},
		skippedNodes: p.SkippedNodes, lacking: p.Lacking, unmatched: p.Unmatched,
		priorFailures: cache.Status.Failures, consumes: consumedAnnotations(kind, cache.Annotations), pullUser: in.user,
	}, table: newPairTable()}
	op.table.addUnrun(p.Present, p.Desired, p.Skipped)
	for img, why := range p.Invalid {
		op.table.unstarted = append(op.table.unstarted, results.Item{Image: img, Node: "(all nodes)",
			Outcome: results.Outcome{State: results.Failed, Reason: "InvalidImageName", Message: why}})
	}
	for _, u := range p.Unreachable {
		op.table.unstarted = append(op.table.unstarted, results.Item{Image: u.Image, Node: u.Node,
			Outcome: results.Outcome{State: results.Failed, Reason: u.Reason, Message: u.Message}})
	}
	r.addWork(op, p.Work)
	if kind != plan.Purge {
		metrics.ImagePulls.WithLabelValues("already_present").Add(float64(op.table.present))
	}
	op.counts = op.table.counts()
	return op
}

// markProcessing sets the status that says op runs, and returns the detail
// its conditions and Event carry.
func markProcessing(cache *v1alpha2.ImageCache, op *operation, pods *podsResult) string {
	kind := op.kind
	st := &cache.Status
	st.Status = v1alpha2.ImageCacheActionStatusProcessing
	st.Reason = string(kind)
	st.Message = processingMessage(kind)
	t := metav1.NewTime(op.start)
	st.StartTime = &t
	st.CompletionTime = nil
	if kind != plan.NewNodes {
		st.SkippedNodes = skippedNodes(op.skippedNodes)
	}
	if kind != plan.NewNodes && kind != plan.Update {
		// A new-node operation adds to the results of the operations
		// before it; the others replace them, and clear them as they
		// start, as the original did. An update keeps them in sight
		// until its end says which it retried: an edit made to fix them
		// (a pull secret) must not look like it already had.
		st.Failures = nil
		st.FailuresOmitted = 0
	}
	st.Counts = op.counts.DeepCopy()
	st.Progress = progress(op.counts)
	detail := st.Message
	if kind == plan.NewNodes {
		detail = "Images are being pulled on to new nodes: " + nodeList(op.only)
	}
	setConditions(cache, true, string(kind), detail, op.generation)
	if pods != nil {
		setPodsCondition(st, true, pods.cond)
	} else if kind != plan.NewNodes && kind != plan.Purge {
		setPodsCondition(st, false, metav1.Condition{})
	}
	return detail
}

// announceStart logs the operation's start and tells the user, by Event,
// of it and of what in the cluster stands in its way.
func (r *Reconciler) announceStart(ctx context.Context, cache *v1alpha2.ImageCache, op *operation, in *startInput, detail string) {
	log.FromContext(ctx).WithValues("operation", op.kind).Info("operation started", "id", op.id, "jobs", len(op.table.pairs), "alreadyPresent", op.table.present,
		"skippedNodes", len(op.skippedNodes), "failedUnstarted", len(op.table.unstarted))
	r.Recorder.Event(cache, corev1.EventTypeNormal, string(op.kind), detail)
	for _, why := range in.plan.Unmatched {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "NoMatchingNodes", why)
	}
	for _, why := range invalidParallelLabels(in.nodes, in.plan.Work) {
		r.Recorder.Event(cache, corev1.EventTypeWarning, "InvalidNodeLabel", why)
	}
	if in.pods != nil && !in.pods.ok() && in.pods.cond.Reason != podsNotListedYet {
		r.Recorder.Event(cache, corev1.EventTypeWarning, in.pods.cond.Reason, in.pods.cond.Message)
	}
}

// specTooLarge says why a spec is too large to act on, or "". The CRD's rule
// and the webhook refuse such specs as they are written; this guards a cache
// stored without them (an old CRD, the webhook off), which would otherwise
// run and then never fit its final status in etcd.
func specTooLarge(spec *v1alpha2.ImageCacheSpec) string {
	raw, err := json.Marshal(spec)
	if err != nil {
		return err.Error()
	}
	if len(raw) <= v1alpha2.MaxSpecBytes {
		return ""
	}
	return fmt.Sprintf("the spec is %d KiB, over the limit of %d KiB: its status could not be stored beside it in etcd; split the images over several ImageCaches",
		len(raw)>>10, v1alpha2.MaxSpecBytes>>10)
}

// addWork adds work items to an operation's table, waiting for their Jobs.
// A delete on a node whose runtime we cannot reach fails at once, without a
// Job.
func (r *Reconciler) addWork(op *operation, work []jobs.Work) {
	run := make([]jobs.Work, 0, len(work))
	for _, w := range work {
		if w.Kind == jobs.Delete && r.Config.Jobs.CRISocketPath == "" {
			if _, err := jobs.DefaultSocket(w.Node.Runtime); err != nil {
				op.table.unstarted = append(op.table.unstarted, results.Item{Image: w.Image, Node: w.Node.Name,
					Outcome: results.Outcome{State: results.Failed, Reason: "UnsupportedRuntime", Message: err.Error()}})
				continue
			}
		}
		run = append(run, w)
	}
	op.table.add(run, r.perNode())
}

// extend adds to a running operation the nodes that became eligible since it
// started: they get every image of the operation's spec, as a new-nodes
// operation would give them, but now, not once the operation has ended (a
// large operation runs for minutes). A purge wants nothing on new nodes.
func (r *Reconciler) extend(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	if op.kind == plan.Purge || op.final != nil {
		return nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return err
	}
	joined := map[string]bool{}
	for n := range plan.EligibleNodes(&op.spec, nodes.Items, r.Config.StartupTaint) {
		if !op.eligible[n] {
			joined[n] = true
		}
	}
	if len(joined) == 0 {
		return nil
	}
	p := plan.Build(plan.Input{Op: plan.NewNodes, Spec: op.spec, Nodes: nodes.Items, AlwaysPull: r.Config.AlwaysPull, Only: joined,
		StartupTaint: r.Config.StartupTaint})
	if err := r.deleteReplacedJobs(ctx, cache, p.Work); err != nil {
		return err
	}
	for n := range joined {
		op.eligible[n] = true
		op.joined[n] = true
		// No longer left out, if it was at the start.
		delete(op.skippedNodes, n)
		delete(op.lacking, n)
	}
	// Invalid images were reported for all nodes when the operation started.
	op.table.addUnrun(p.Present, p.Desired, p.Skipped)
	before := len(op.table.pairs)
	r.addWork(op, p.Work)
	r.holdNodes(client.ObjectKeyFromObject(cache), op, nodes.Items, joined, p.Work, p.Invalid, false)
	log.FromContext(ctx).Info("nodes joined the running operation", "id", op.id, "nodes", nodeList(joined), "jobs", len(op.table.pairs)-before)
	r.Recorder.Event(cache, corev1.EventTypeNormal, string(plan.NewNodes), "Images are being pulled on to new nodes: "+nodeList(joined))
	return nil
}

func nodeList(nodes map[string]bool) string {
	var names []string
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// skippedNodes turns the plan's node -> reason into the status's report:
// per reason, how many nodes and the first names.
func skippedNodes(left map[string]string) []v1alpha2.SkippedNodes {
	if len(left) == 0 {
		return nil
	}
	byReason := map[string][]string{}
	for n, why := range left {
		byReason[why] = append(byReason[why], n)
	}
	out := make([]v1alpha2.SkippedNodes, 0, len(byReason))
	for why, names := range byReason {
		sort.Strings(names)
		s := v1alpha2.SkippedNodes{Reason: why, Count: int32(len(names))}
		s.Nodes = names[:min(len(names), v1alpha2.MaxSkippedNames)]
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Reason < out[j].Reason })
	return out
}

// invalidParallelLabels says, for each node the work goes to whose
// pacing.LabelParallelPulls is not a number, that its pulls are all counted:
// the label is a user's, and the earliest we can tell them is here.
func invalidParallelLabels(nodes []corev1.Node, work []jobs.Work) []string {
	on := map[string]bool{}
	for _, w := range work {
		on[w.Node.Name] = true
	}
	var out []string
	for i := range nodes {
		if !on[nodes[i].Name] {
			continue
		}
		if _, err := pacing.ParallelPulls(nodes[i].Labels); err != nil {
			out = append(out, "node "+nodes[i].Name+": "+err.Error())
		}
	}
	return out
}
