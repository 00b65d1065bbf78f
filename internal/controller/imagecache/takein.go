package imagecache

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/podimages"
	"github.com/kubefledged/kube-fledged/internal/results"
)

// podsImagesAdded is the reason of the Event that says a running operation
// took in images its pods or workload templates gained.
const podsImagesAdded = "PodImagesAdded"

// grow takes into a running operation what changed since it started and
// concerns it: the images its pods and workload templates gained (takeIn)
// and the nodes that became eligible (extend). Events mark the cache for
// each; a failure marks it again, so that the retry looks again. The images
// go first, so that a node joining now gets them with the rest.
func (r *Reconciler) grow(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	key := client.ObjectKeyFromObject(cache)
	if r.ops.takeFollowedChanged(key) {
		if err := r.takeIn(ctx, cache, op); err != nil {
			r.ops.followedChanged(key)
			return err
		}
	}
	if r.ops.takeNodesChanged(key) {
		if err := r.extend(ctx, cache, op); err != nil {
			r.ops.nodeChanged(key)
			return err
		}
	}
	return nil
}

// takeIn adds to a running operation the images that the pods and workload
// templates its lists follow gained since it started: their pulls start now
// on the nodes it covers, as a joining node's do (extend), not once it has
// ended (a large operation, or one held by a pull the kubelet keeps
// retrying, runs for minutes, and a paused rollout may be resumed
// meanwhile). Its end records them and counts them with the others. What
// the pods lost is left to the end, as before. Nothing is taken in by a
// purge (it pulls nothing), after a spec edit (the update that follows
// acts on the new lists) or while the pods cannot be read.
func (r *Reconciler) takeIn(ctx context.Context, cache *v1alpha2.ImageCache, op *operation) error {
	if op.kind == plan.Purge || op.final != nil || cache.Generation != op.generation || !podimages.Uses(&op.named) {
		return nil
	}
	pods := r.resolvePods(cache)
	if !pods.ok() || !podimages.Gained(op.podImages, pods.record) {
		return nil
	}
	nodes, err := r.listNodes(ctx)
	if err != nil {
		return err
	}
	record := podimages.Grow(op.podImages, pods.record)
	spec := podimages.Effective(op.named, record)
	p := plan.Added(plan.Input{Spec: spec, Nodes: nodes.Items, AlwaysPull: r.Config.AlwaysPull, StartupTaint: r.Config.StartupTaint},
		op.spec, op.eligible)
	if err := r.deleteReplacedJobs(ctx, cache, p.Work); err != nil {
		return err
	}
	gained := gainedImages(&op.spec, &spec)
	op.spec, op.podImages, op.grown = spec, record, true
	before := len(op.table.pairs)
	r.addPlanned(cache, op, &p)
	r.holdNodes(client.ObjectKeyFromObject(cache), op, nodes.Items, op.eligible, p.Work, p.Invalid, true)
	log.FromContext(ctx).Info("images the pods gained joined the running operation", "id", op.id, "images", gained, "jobs", len(op.table.pairs)-before)
	r.Recorder.Event(cache, corev1.EventTypeNormal, podsImagesAdded,
		"the running operation pulls the images the selected pods or workload templates gained since it started: "+strings.Join(gained, ", "))
	return nil
}

// addPlanned adds the work and the counts of what takeIn planned to the
// operation, as its start would have had them.
func (r *Reconciler) addPlanned(cache *v1alpha2.ImageCache, op *operation, p *plan.Plan) {
	op.table.addUnrun(p.Present, p.Desired, p.Skipped)
	for n, why := range p.SkippedNodes {
		if _, ok := op.skippedNodes[n]; !ok {
			if op.skippedNodes == nil {
				op.skippedNodes = map[string]string{}
			}
			op.skippedNodes[n] = why
		}
	}
	for n, why := range p.Lacking {
		if _, ok := op.lacking[n]; !ok {
			if op.lacking == nil {
				op.lacking = map[string]string{}
			}
			op.lacking[n] = why
		}
	}
	for img, why := range p.Invalid {
		op.table.unstarted = append(op.table.unstarted, results.Item{Image: img, Node: "(all nodes)",
			Outcome: results.Outcome{State: results.Failed, Reason: "InvalidImageName", Message: why}})
	}
	r.addWork(op, p.Work)
	op.counts = op.table.counts()
}

// gainedImages are the images now's lists hold and was's do not, each once.
func gainedImages(was, now *v1alpha2.ImageCacheSpec) []string {
	var out []string
	seen := map[string]bool{}
	for i := range now.CacheSpec {
		var had []string
		if i < len(was.CacheSpec) {
			had = was.CacheSpec[i].Images
		}
		gained, _ := plan.Diff(had, now.CacheSpec[i].Images)
		for _, img := range gained {
			if k := podimages.Key(img); !seen[k] {
				seen[k] = true
				out = append(out, img)
			}
		}
	}
	return out
}
