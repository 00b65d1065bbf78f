package plan

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// Plan is the work of one operation.
type Plan struct {
	Work []jobs.Work
	// Present counts pulls skipped because the node already reports the image.
	Present int
	// Desired counts the (image, node) pairs on eligible nodes; Skipped
	// those on nodes left out (see Eligible).
	Desired, Skipped int
	// Unmatched describes each list that has no eligible node at all, so
	// that "nothing to do" says why (#233).
	Unmatched []string
	// Invalid lists spec images that do not parse; they fail on every node
	// without a Job (the webhook refuses them, but the controller must not rely
	// on it).
	Invalid map[string]string
}

// Input is what planning reads.
type Input struct {
	Op    Operation
	Spec  v1alpha2.ImageCacheSpec
	Prior *v1alpha2.ImageCacheSpec // the spec the last finished operation left on the nodes
	Nodes []corev1.Node
	// AlwaysPull is --image-pull-policy=Always: no pull is skipped.
	AlwaysPull bool
	// Only, when set, restricts the work to these nodes (new nodes).
	Only map[string]bool
}

// Build computes the operation's work: one item per (image, node), never two
// for the same normalised image on the same node.
func Build(in Input) Plan {
	p := Plan{Invalid: map[string]string{}}
	seen := map[string]bool{}
	nodes := in.Nodes
	if in.Only != nil {
		nodes = nil
		for _, n := range in.Nodes {
			if in.Only[n.Name] {
				nodes = append(nodes, n)
			}
		}
	}
	add := func(kind jobs.Kind, image string, l *v1alpha2.CacheSpecImages) {
		ref, err := images.Parse(image)
		if err != nil {
			p.Invalid[image] = err.Error()
			return
		}
		eligible, skipped := split(nodes, l)
		p.Skipped += skipped
		for _, n := range eligible {
			w := jobs.Work{Kind: kind, Image: image, Ref: ref, Tolerations: l.Tolerations,
				Node: jobs.Node{Name: n.Name, Runtime: n.Status.NodeInfo.ContainerRuntimeVersion}}
			if seen[w.Key()] {
				continue
			}
			seen[w.Key()] = true
			p.Desired++
			if kind == jobs.Pull && !in.AlwaysPull && !ref.Floating() && images.PresentOn(n, ref) {
				p.Present++
				continue
			}
			p.Work = append(p.Work, w)
		}
	}

	if in.Op != Update && in.Op != NewNodes {
		for i := range in.Spec.CacheSpec {
			l := &in.Spec.CacheSpec[i]
			if eligible, skipped := split(nodes, l); len(eligible) == 0 {
				p.Unmatched = append(p.Unmatched, describeUnmatched(i, l, skipped))
			}
		}
	}
	switch in.Op {
	case Create, Refresh, NewNodes:
		for i := range in.Spec.CacheSpec {
			l := &in.Spec.CacheSpec[i]
			for _, img := range l.Images {
				add(jobs.Pull, img, l)
			}
		}
	case Purge:
		for i := range in.Spec.CacheSpec {
			l := &in.Spec.CacheSpec[i]
			for _, img := range l.Images {
				add(jobs.Delete, img, l)
			}
		}
	case Update:
		var prior []v1alpha2.CacheSpecImages
		if in.Prior != nil {
			prior = in.Prior.CacheSpec
		}
		// Lists are matched by index, as the original did; a list the spec
		// gained pulls all its images, a list it lost deletes all of its.
		for i := 0; i < max(len(in.Spec.CacheSpec), len(prior)); i++ {
			var now, was v1alpha2.CacheSpecImages
			if i < len(in.Spec.CacheSpec) {
				now = in.Spec.CacheSpec[i]
			}
			if i < len(prior) {
				was = prior[i]
			}
			gained, lost := Diff(was.Images, now.Images)
			for _, img := range gained {
				add(jobs.Pull, img, &now)
			}
			for _, img := range lost {
				add(jobs.Delete, img, &was)
			}
		}
	default:
		panic(fmt.Sprintf("plan: unknown operation %q", in.Op))
	}
	return p
}

// Diff returns the images of now that were not in was, and those of was no
// longer in now, compared after normalisation. Unparsable images compare as
// written.
func Diff(was, now []string) (gained, lost []string) {
	key := func(s string) string {
		if n, err := images.Normalize(s); err == nil {
			return n
		}
		return s
	}
	in := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, s := range list {
			m[key(s)] = true
		}
		return m
	}
	wasSet, nowSet := in(was), in(now)
	for _, s := range now {
		if !wasSet[key(s)] {
			gained = append(gained, s)
		}
	}
	for _, s := range was {
		if !nowSet[key(s)] {
			lost = append(lost, s)
		}
	}
	return gained, lost
}

func describeUnmatched(i int, l *v1alpha2.CacheSpecImages, skipped int) string {
	sel := "no nodeSelector"
	if len(l.NodeSelector) > 0 {
		sel = "nodeSelector " + labels.SelectorFromSet(l.NodeSelector).String()
	}
	if skipped > 0 {
		return fmt.Sprintf("cacheSpec[%d] (%s) matches %d node(s), none eligible (cordoned, NotReady or with a taint not tolerated)", i, sel, skipped)
	}
	return fmt.Sprintf("cacheSpec[%d] (%s) matches no node", i, sel)
}
