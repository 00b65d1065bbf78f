package plan

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pacing"
)

// Plan is the work of one operation.
type Plan struct {
	Work []jobs.Work
	// Present counts pulls skipped because the node already reports the image.
	Present int
	// Desired counts the (image, node) pairs on eligible nodes; Skipped
	// those on nodes left out (see Skip).
	Desired, Skipped int
	// SkippedNodes are the nodes left out, with the reason of each.
	SkippedNodes map[string]string
	// Lacking are the skipped nodes (with their reason) that do not report
	// an image a list wants on them: a pull operation cannot call the cache
	// Ready while one exists, however well its own Jobs did. A skipped node
	// that reports every image (a cordoned node drained after its pulls)
	// holds the cache and is not here.
	Lacking map[string]string
	// Unmatched describes each list that has no eligible node at all, so
	// that "nothing to do" says why (#233).
	Unmatched []string
	// Invalid lists spec images that do not parse; they fail on every node
	// without a Job (the webhook refuses them, but the controller must not rely
	// on it).
	Invalid map[string]string
	// Unreachable are pairs that fail without a Job: a delete on a node that
	// is not Ready, which keeps the image (a purge must not report it gone).
	Unreachable []Unreachable
}

// Unreachable is a pair no Job can serve, and why.
type Unreachable struct {
	Image, Node, Reason, Message string
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
	// StartupTaint is --node-startup-taint, or nil: the pull Jobs tolerate
	// it, so it leaves no node out (see SkipWith).
	StartupTaint *StartupTaint
}

// skipDelete is Skip for delete Jobs. They tolerate every taint and run on
// cordoned nodes: those still hold the images, and the original's Jobs
// reached them. A node that is not Ready is not skipped but unreachable
// (see Plan.Unreachable); one that is not Linux, or of an architecture our
// image does not hold, or virtual, never got our images and could not run
// the Job.
func skipDelete(n *corev1.Node, _ *v1alpha2.CacheSpecImages) string {
	switch {
	case !Linux(n):
		return v1alpha2.SkipNotLinux
	case !ArchSupported(n):
		return v1alpha2.SkipUnsupportedArch
	case Virtual(n):
		return v1alpha2.SkipVirtualNode
	}
	return ""
}

// Build computes the operation's work: one item per (image, node), never two
// for the same normalised image on the same node.
func Build(in Input) Plan { return build(in, map[string]bool{}) }

// build is Build with the pairs seen already (by jobs.Work.Key) neither
// worked on nor counted.
func build(in Input, seen map[string]bool) Plan {
	p := Plan{Invalid: map[string]string{}}
	nodes := in.Nodes
	if in.Only != nil {
		nodes = nil
		for _, n := range in.Nodes {
			if in.Only[n.Name] {
				nodes = append(nodes, n)
			}
		}
	}
	var byName map[string]*corev1.Node
	lacking := func(image string, ref images.Ref, left skipped) {
		if byName == nil {
			byName = make(map[string]*corev1.Node, len(nodes))
			for i := range nodes {
				byName[nodes[i].Name] = &nodes[i]
			}
		}
		for n, why := range left {
			if _, known := p.Lacking[n]; known || images.PresentOn(byName[n], ref) {
				continue
			}
			if p.Lacking == nil {
				p.Lacking = map[string]string{}
			}
			p.Lacking[n] = why
		}
	}
	skipOf := func(kind jobs.Kind) func(*corev1.Node, *v1alpha2.CacheSpecImages) string {
		if kind == jobs.Delete {
			return skipDelete
		}
		return func(n *corev1.Node, l *v1alpha2.CacheSpecImages) string { return SkipWith(n, l, in.StartupTaint) }
	}
	add := func(kind jobs.Kind, image string, l *v1alpha2.CacheSpecImages) {
		ref, err := images.Parse(image)
		if err != nil {
			p.Invalid[image] = err.Error()
			return
		}
		eligible, left := split(nodes, l, skipOf(kind))
		p.Skipped += len(left)
		if kind == jobs.Pull {
			lacking(image, ref, left)
		}
		for n, why := range left {
			if p.SkippedNodes == nil {
				p.SkippedNodes = map[string]string{}
			}
			if _, ok := p.SkippedNodes[n]; !ok {
				p.SkippedNodes[n] = why
			}
		}
		tolerations := l.Tolerations
		if kind == jobs.Delete {
			tolerations = nil // every taint: see skipDelete
		}
		for _, n := range eligible {
			// A label that is not a number counts every pull; the
			// controller warns about it (InvalidNodeLabel).
			parallel, _ := pacing.ParallelPulls(n.Labels)
			w := jobs.Work{Kind: kind, Image: image, Ref: ref, Tolerations: tolerations,
				Node: jobs.Node{Name: n.Name, Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, Parallel: parallel}}
			if seen[w.Key()] {
				continue
			}
			seen[w.Key()] = true
			p.Desired++
			if kind == jobs.Delete && !Ready(n) {
				p.Unreachable = append(p.Unreachable, Unreachable{Image: image, Node: n.Name, Reason: "NodeNotReady",
					Message: fmt.Sprintf("node %s is not Ready: no Job can delete %s from it, so it keeps the image; purge again once the node is Ready", n.Name, image)})
				continue
			}
			if kind == jobs.Pull && !in.AlwaysPull && !ref.Floating() && images.PresentOn(n, ref) {
				p.Present++
				continue
			}
			p.Work = append(p.Work, w)
		}
	}

	if in.Op != NewNodes {
		kind := jobs.Pull
		if in.Op == Purge {
			kind = jobs.Delete
		}
		for i := range in.Spec.CacheSpec {
			l := &in.Spec.CacheSpec[i]
			if eligible, left := split(nodes, l, skipOf(kind)); len(eligible) == 0 {
				p.Unmatched = append(p.Unmatched, describeUnmatched(i, l, left))
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
		// Lists are matched by index, as the original did. Every image of
		// a list is pulled where its node does not report it, not only
		// those the list gained: a pair the last operation failed, or one
		// a node lost since, would otherwise stay missing behind an update
		// that says it succeeded (an edit of imagePullSecrets, made to fix
		// those very failures, gains no image at all). What the nodes
		// report is skipped as by a refresh, so an update still pulls
		// little more than what was added. A list the spec lost deletes
		// all its images.
		for i := 0; i < max(len(in.Spec.CacheSpec), len(prior)); i++ {
			var now, was v1alpha2.CacheSpecImages
			if i < len(in.Spec.CacheSpec) {
				now = in.Spec.CacheSpec[i]
			}
			if i < len(prior) {
				was = prior[i]
			}
			_, lost := Diff(was.Images, now.Images)
			for _, img := range now.Images {
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

// Added is the work a running operation takes in when the images of its
// lists grow from have to in.Spec (the pods and workload templates it
// follows gained some): the images each list gained, on the nodes the
// operation covers, less the pairs it has already (another list may name
// the same image on the same node). The nodes eligible now that it does not
// cover are left out: they are joining it (the node path), and get the whole
// spec there. The nodes its lists select and leave out are counted, as at
// an operation's start, and those lacking a gained image hold the cache
// back from Ready. Lists are matched by index: the spec did not change.
func Added(in Input, have v1alpha2.ImageCacheSpec, covered map[string]bool) Plan {
	gained := *in.Spec.DeepCopy()
	for i := range gained.CacheSpec {
		var had []string
		if i < len(have.CacheSpec) {
			had = have.CacheSpec[i].Images
		}
		gained.CacheSpec[i].Images, _ = Diff(had, gained.CacheSpec[i].Images)
	}
	joining := EligibleNodes(&in.Spec, in.Nodes, in.StartupTaint)
	only := map[string]bool{}
	for i := range in.Nodes {
		if n := in.Nodes[i].Name; covered[n] || !joining[n] {
			only[n] = true
		}
	}
	seen := map[string]bool{}
	skip := func(n *corev1.Node, l *v1alpha2.CacheSpecImages) string { return SkipWith(n, l, in.StartupTaint) }
	for i := range have.CacheSpec {
		l := &have.CacheSpec[i]
		eligible, _ := split(in.Nodes, l, skip)
		for _, img := range l.Images {
			ref, err := images.Parse(img)
			if err != nil {
				continue
			}
			for _, n := range eligible {
				if covered[n.Name] {
					seen[jobs.Work{Kind: jobs.Pull, Ref: ref, Node: jobs.Node{Name: n.Name}}.Key()] = true
				}
			}
		}
	}
	return build(Input{Op: NewNodes, Spec: gained, Nodes: in.Nodes, AlwaysPull: in.AlwaysPull, Only: only,
		StartupTaint: in.StartupTaint}, seen)
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

func describeUnmatched(i int, l *v1alpha2.CacheSpecImages, left skipped) string {
	sel := "no nodeSelector"
	if len(l.NodeSelector) > 0 {
		sel = "nodeSelector " + labels.SelectorFromSet(l.NodeSelector).String()
	}
	if len(left) == 0 {
		return fmt.Sprintf("cacheSpec[%d] (%s) matches no node", i, sel)
	}
	byReason := map[string]int{}
	for _, why := range left {
		byReason[why]++
	}
	reasons := make([]string, 0, len(byReason))
	for why, n := range byReason {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, why))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("cacheSpec[%d] (%s) matches %d node(s), none eligible: %s", i, sel, len(left), strings.Join(reasons, ", "))
}
