package imagecache_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// addNodes creates fake nodes for one test and deletes them at its end, so
// that the other tests keep seeing the sandbox's own three nodes.
func addNodes(t *testing.T, g Gomega, specs ...sandbox.NodeSpec) {
	t.Helper()
	g.Expect(sandbox.Get().CreateNodes(context.Background(), specs...)).To(Succeed())
	t.Cleanup(func() {
		for _, s := range specs {
			_ = sandbox.Get().DeleteNode(context.Background(), s.Name)
		}
	})
}

// nodePool adds nodes labelled pool=<prefix>-xxxx and returns the pool's name and
// selector. Each spec names a node by its suffix (<pool>-<Name>) and may add labels and
// whatever else a NodeSpec says; with none, two Ready nodes, a and b. Other tests of the
// package add and remove nodes meanwhile: a test that counts nodes counts its own.
func nodePool(t *testing.T, g Gomega, prefix string, specs ...sandbox.NodeSpec) (string, map[string]string) {
	t.Helper()
	pool := prefix + "-" + rand.String(4)
	sel := map[string]string{"pool": pool}
	if len(specs) == 0 {
		specs = []sandbox.NodeSpec{{Name: "a"}, {Name: "b"}}
	}
	for i := range specs {
		specs[i].Name = pool + "-" + specs[i].Name
		labels := maps.Clone(sel)
		maps.Copy(labels, specs[i].Labels)
		specs[i].Labels = labels
	}
	addNodes(t, g, specs...)
	return pool, sel
}

// numberedNodes are n plain nodes, n00, n01 and on, for nodePool.
func numberedNodes(n int) []sandbox.NodeSpec {
	specs := make([]sandbox.NodeSpec, n)
	for i := range specs {
		specs[i].Name = fmt.Sprintf("n%02d", i)
	}
	return specs
}

// mixedNodes are a node of each state a Job can or cannot reach, ok, cordoned and
// notready, for nodePool, and then more.
func mixedNodes(more ...sandbox.NodeSpec) []sandbox.NodeSpec {
	return append([]sandbox.NodeSpec{
		{Name: "ok"},
		{Name: "cordoned", Unschedulable: true},
		{Name: "notready", NotReady: true},
	}, more...)
}

func withSelector(sel map[string]string, images ...string) v1alpha2.CacheSpecImages {
	return v1alpha2.CacheSpecImages{Images: images, NodeSelector: sel}
}

// TestNewNodes: a node that joins, or gains the labels a list selects, gets
// the cache's images within seconds, without a refresh and without a Job on
// any other node; the status and an Event say so.
func TestNewNodes(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "web")
	rec := framework.RecordJobs(t, kube, ns, nil)
	stop := runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "fleet"}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "fleet", withSelector(sel, "nginx:1.27", "redis:7.2")))).To(Succeed())
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	rec.Await(g, ConsistOf(append(each("pull", "nginx:1.27", pool+"-a", pool+"-b"), each("pull", "redis:7.2", pool+"-a", pool+"-b")...)))

	// A node that joins while the controller is down is caught up when it
	// is back, and only that node: a new process has no memory of what the
	// last operation covered, so the nodes' creation times tell. (The
	// nodes above were created a second before the operation started, so
	// the time of each is unambiguous.)
	stop()
	framework.Tick()
	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-g", Labels: sel})
	t3 := framework.Tick()
	runController(t, actsWhileHanging) // for the hanging pull below
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheNewNodes, t3, opTimeout)
	rec.Await(g, ConsistOf(each("pull", "nginx:1.27", pool+"-g")[0], each("pull", "redis:7.2", pool+"-g")[0]))

	// A node joins.
	t1 := framework.Tick()
	joined := time.Now()
	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-c", Labels: sel})
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheNewNodes, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	firstJob := firstCreated(rec.Await(g, ConsistOf(each("pull", "nginx:1.27", pool+"-c")[0], each("pull", "redis:7.2", pool+"-c")[0])))
	t.Logf("new node: first Job %s after the node was created", firstJob.Sub(joined))
	g.Expect(firstJob.Sub(joined)).To(BeNumerically("<", 10*time.Second))
	hasEvent(g, ns, "fleet", "Normal", v1alpha2.ImageCacheReasonImageCacheNewNodes, "Images are being pulled on to new nodes: "+pool+"-c")

	// A node comes to match the selector.
	t2 := framework.Tick()
	n := &corev1.Node{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: "sandbox-node-1"}, n)).To(Succeed())
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels["pool"] = pool
	g.Expect(k8s.Patch(context.Background(), n, patch)).To(Succeed())
	t.Cleanup(func() {
		n := &corev1.Node{}
		if k8s.Get(context.Background(), client.ObjectKey{Name: "sandbox-node-1"}, n) == nil {
			patch := client.MergeFrom(n.DeepCopy())
			delete(n.Labels, "pool")
			_ = k8s.Patch(context.Background(), n, patch)
		}
	})
	framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheNewNodes, t2, opTimeout)
	rec.Await(g, ConsistOf(each("pull", "nginx:1.27", "sandbox-node-1")[0], each("pull", "redis:7.2", "sandbox-node-1")[0]))

	// Several nodes join in a burst, some while the operation for the
	// first ones runs: each still gets every image, once.
	burst := []sandbox.NodeSpec{{Name: pool + "-d", Labels: sel}, {Name: pool + "-e", Labels: sel}, {Name: pool + "-f", Labels: sel}}
	var wg sync.WaitGroup
	for _, spec := range burst {
		wg.Add(1)
		go func(spec sandbox.NodeSpec) {
			defer wg.Done()
			addNodes(t, g, spec)
		}(spec)
	}
	wg.Wait()
	var want, got []string
	for _, spec := range burst {
		want = append(want, each("pull", "nginx:1.27", spec.Name)[0], each("pull", "redis:7.2", spec.Name)[0])
	}
	g.Eventually(func() []string { got = append(got, rec.Take()...); return got }).WithTimeout(opTimeout).Should(ConsistOf(want))

	// Nothing else happens: no refresh, no Job.
	g.Consistently(rec.Take).WithTimeout(3 * time.Second).Should(BeEmpty())

	// A node that joins while an operation runs is added to it: its Jobs
	// start at once, not when the operation ends (here at the deadline of a
	// pull that never finishes), and no second operation follows for it.
	slow := client.ObjectKey{Namespace: ns, Name: "slow"}
	never := sandbox.HangPrefix + "never:1"
	t4 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "slow", withSelector(sel, never, "busybox:1.36")))).To(Succeed())
	g.Eventually(func() int { return len(rec.Take()) }).WithTimeout(opTimeout).Should(BeNumerically(">", 0))
	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-h", Labels: sel})
	onH := each("pull", "busybox:1.36", pool+"-h")[0]
	var seen []string
	g.Eventually(func() []string { seen = append(seen, rec.Take()...); return seen }).WithTimeout(opTimeout).Should(ContainElement(onH))
	sc := &v1alpha2.ImageCache{}
	g.Expect(k8s.Get(context.Background(), slow, sc)).To(Succeed())
	g.Expect(sc.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing), "the Job on the new node started while the operation ran")
	sc = framework.Final(g, k8s, slow, v1alpha2.ImageCacheReasonImageCacheCreate, t4, opTimeout)
	var failedOn []string
	for _, f := range sc.Status.Failures[never] {
		failedOn = append(failedOn, f.Node)
	}
	g.Expect(failedOn).To(ContainElement(pool+"-h"), "the new node was part of the operation")
	g.Expect(sc.Status.Progress).To(Equal(fmt.Sprintf("%d/%d", sc.Status.Counts.Desired/2, sc.Status.Counts.Desired)))
	g.Consistently(func() string {
		g.Expect(k8s.Get(context.Background(), slow, sc)).To(Succeed())
		return sc.Status.Reason
	}).
		WithTimeout(3*time.Second).Should(Equal(v1alpha2.ImageCacheReasonImageCacheCreate), "no new-nodes operation followed")
}

// TestNodeChoice: cordoned and NotReady nodes are skipped and counted; by
// default Jobs tolerate every taint; a list's tolerations replace that, and
// then only nodes whose taints they tolerate are used.
func TestNodeChoice(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	pool, sel := nodePool(t, g, "choice", mixedNodes(
		sandbox.NodeSpec{Name: "gpu", Taints: []corev1.Taint{{Key: "gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}}},
		sandbox.NodeSpec{Name: "nohost", NoHostnameLabel: true},
	)...)
	rec := framework.RecordJobs(t, kube, ns, nil)
	runController(t, nil)

	gpu := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
	other := []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}
	cases := []struct {
		name        string
		tolerations []corev1.Toleration
		want        []string
		skipped     int32
	}{
		{name: "default", want: []string{"-ok", "-gpu", "-nohost"}, skipped: 2},
		{name: "tolerates-gpu", tolerations: gpu, want: []string{"-ok", "-gpu", "-nohost"}, skipped: 2},
		{name: "tolerates-other", tolerations: other, want: []string{"-ok", "-nohost"}, skipped: 3},
	}
	for _, tc := range cases {
		// An image of its own per case: the nodes report what the case
		// before pulled.
		image := "busybox:" + tc.name
		l := withSelector(sel, image)
		l.Tolerations = tc.tolerations
		t0 := framework.Tick()
		g.Expect(k8s.Create(context.Background(), newCache(ns, tc.name, l))).To(Succeed())
		c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: tc.name}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), tc.name)
		var want []string
		for _, suffix := range tc.want {
			want = append(want, "pull "+image+" "+pool+suffix)
		}
		rec.Await(g, ConsistOf(want), tc.name)
		g.Expect(c.Status.Counts.Skipped).To(Equal(tc.skipped), tc.name)
		g.Expect(c.Status.Counts.Desired).To(Equal(int32(len(tc.want))), tc.name)
	}
}

// TestPacing: the caps on Jobs in flight hold, observed from the API server
// (not from the controller's own counters), and Jobs held back by the caps do
// not fail for lack of time: each Job's deadline counts from its creation.
func TestPacing(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	rec := framework.RecordJobs(t, kube, ns, nil)
	runController(t, func(o *commands.ControllerOptions) {
		o.MaxJobs.Value = 3
		o.MaxJobsPerNode.Value = 1
		o.Deadline.Value = 3 * time.Second
	})
	// Per cache: two hanging images (each holds a slot for the whole
	// deadline) and two good ones, on the three nodes: 12 Jobs, at most 3 at
	// a time, so about 4 waves of 3 s; measured from the start of the
	// operation, the good Jobs of the late waves would be failures. Node
	// Jobs pull their images one at a time, so each holds one slot: a Job
	// per node of the four images, 3 Jobs per cache in about 2 waves.
	perCache := 4 * nodes
	if perNode() {
		perCache = nodes
	}
	t0 := framework.Tick()
	for _, name := range []string{"pace-a", "pace-b"} {
		g.Expect(k8s.Create(context.Background(), newCache(ns, name, list(sandbox.FailPrefix+name+"-1:1", sandbox.FailPrefix+name+"-2:1", "alpine:3.20", "alpine:3.19")))).To(Succeed())
	}
	for _, name := range []string{"pace-a", "pace-b"} {
		c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: name}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, 3*opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
		g.Expect(c.Status.Failures).To(HaveLen(2), "only the hanging images fail")
		g.Expect(c.Status.Counts.Succeeded).To(Equal(int32(2 * nodes)))
		g.Expect(c.Status.Counts.Failed).To(Equal(int32(2 * nodes)))
	}
	// The log's watch can trail the final statuses read through Gets.
	g.Eventually(func() int { _, _, total := inFlight(rec.Events()); return total }).WithTimeout(framework.ClusterTimeout).Should(Equal(2 * perCache))
	peak, peakPerNode, total := inFlight(rec.Events())
	t.Logf("pacing: %d Jobs, peak in flight %d (cap 3), peak per node %d (cap 1)", total, peak, peakPerNode)
	g.Expect(total).To(Equal(2 * perCache))
	g.Expect(peak).To(BeNumerically("<=", 3))
	g.Expect(peak).To(Equal(3), "the cap was reached, so it was what held them back")
	g.Expect(peakPerNode).To(Equal(1))
}

// TestPacingCountsPulls: with the default caps (2 pulls in flight per node)
// a node gets one Job for its ten images, since the kubelet pulls a pod's
// images one after another, and the per-node cap still holds: three caches
// want a Job on every node at once, each held for the whole deadline by a
// hanging image, and no node ever runs more than two. Per image, each of
// the thirty Jobs of a node counts one, as before.
func TestPacingCountsPulls(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	rec := framework.RecordJobs(t, kube, ns, nil)
	runController(t, nil)
	caches := []string{"count-a", "count-b", "count-c"}
	const images = 10
	t0 := framework.Tick()
	for _, name := range caches {
		// Images of its own per cache: the nodes report what another
		// cache pulled, which would then be already present.
		imgs := []string{sandbox.HangPrefix + name + ":1"}
		for i := 1; i < images; i++ {
			imgs = append(imgs, fmt.Sprintf("example.test/%s-%d:1", name, i))
		}
		g.Expect(k8s.Create(context.Background(), newCache(ns, name, list(imgs...)))).To(Succeed())
	}
	for _, name := range caches {
		c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: name}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, 3*opTimeout)
		g.Expect(c.Status.Counts.Succeeded).To(Equal(int32((images-1)*nodes)), name)
		g.Expect(c.Status.Counts.Failed).To(Equal(int32(nodes)), name+": only the hanging image fails")
	}
	perCache := images * nodes
	if perNode() {
		perCache = nodes
	}
	g.Eventually(func() int { _, _, total := inFlight(rec.Events()); return total }).WithTimeout(framework.ClusterTimeout).Should(Equal(len(caches) * perCache))
	peak, peakPerNode, total := inFlight(rec.Events())
	t.Logf("pacing at the default caps: %d Jobs, peak in flight %d (cap 100), peak per node %d (cap 2)", total, peak, peakPerNode)
	g.Expect(peakPerNode).To(Equal(2), "the per-node cap held, and was what held the third cache back")
	g.Expect(peak).To(BeNumerically("<=", 2*nodes))
	if perNode() {
		for _, ev := range rec.Events() {
			if ev.Type == watch.Added {
				g.Expect(ev.Job.Spec.Template.Spec.Containers).To(HaveLen(images), "one Job for all of a node's images: %s", ev.Job.Name)
			}
		}
	}
}

// TestPacingWindow: below --max-concurrent-jobs, the Jobs in flight follow the
// real Job controller (pacing.Window): ten at first, and an eleventh only once the
// Job controller has started one of them (status.startTime, read through the
// controller's own Job informer) or one has ended. Twelve nodes of one image make
// twelve Jobs at either granularity, which no other cap holds back.
func TestPacingWindow(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	rec := framework.RecordJobs(t, kube, ns, nil)
	specs := numberedNodes(12)
	_, sel := nodePool(t, g, "window", specs...)
	runController(t, nil)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "window", withSelector(sel, "example.test/window-"+ns+":1")))).To(Succeed())
	c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "window"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Counts.Succeeded).To(BeEquivalentTo(len(specs)))
	g.Eventually(func() int { _, _, total := inFlight(rec.Events()); return total }).WithTimeout(framework.ClusterTimeout).Should(Equal(len(specs)))

	// The recorder's watch delivers the Jobs' changes in the order the API
	// server made them: a start the controller acted on comes before the
	// Job it then created.
	added, startedOrEnded := 0, false
	for _, ev := range rec.Events() {
		j := &ev.Job
		if ev.Type == watch.Added {
			added++
			if added == 11 {
				break
			}
			continue
		}
		if j.Status.StartTime != nil || finished(j) || ev.Type == watch.Deleted {
			startedOrEnded = true
		}
	}
	g.Expect(added).To(Equal(11))
	g.Expect(startedOrEnded).To(BeTrue(), "the eleventh Job was created before any of the first ten had started or ended")
}

// TestPacingWindowJoiningNode: a node that joins gets its first Job while
// the window is full, at either granularity. A start-delay target no Job
// start can meet keeps the window at its floor of ten; ten nodes' Jobs of a
// pull that never finishes fill it until the pull deadline. The joining
// node's Job must come before any of the ten ends: metered like the others,
// it would wait for that deadline.
func TestPacingWindowJoiningNode(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	rec := framework.RecordJobs(t, kube, ns, nil)
	specs := numberedNodes(10)
	pool, sel := nodePool(t, g, "joining", specs...)
	runController(t, func(o *commands.ControllerOptions) {
		actsWhileHanging(o)
		o.JobStartTarget.Value = time.Nanosecond
	})
	key := client.ObjectKey{Namespace: ns, Name: "joining"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "joining", withSelector(sel, sandbox.HangPrefix+ns+":1")))).To(Succeed())
	g.Eventually(func() int { _, _, total := inFlight(rec.Events()); return total }).WithTimeout(opTimeout).Should(Equal(len(specs)))

	addNodes(t, g, sandbox.NodeSpec{Name: pool + "-new", Labels: sel})
	onNew := func() bool {
		for _, ev := range rec.Events() {
			if ev.Type == watch.Added && ev.Job.Annotations[jobs.AnnotationNode] == pool+"-new" {
				return true
			}
		}
		return false
	}
	g.Eventually(onNew).WithTimeout(opTimeout).Should(BeTrue(), "a Job on the joining node")
	for _, ev := range rec.Events() {
		j := &ev.Job
		if j.Annotations[jobs.AnnotationNode] == pool+"-new" {
			break
		}
		g.Expect(finished(j) || ev.Type == watch.Deleted).To(BeFalse(), "Job %s ended before the joining node's Job was created", j.Name)
	}
	peak, _, total := inFlight(rec.Events())
	t.Logf("joining node: %d Jobs, peak in flight %d (window 10)", total, peak)
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Counts.Failed).To(BeEquivalentTo(len(specs)+1), "the never-ending pull failed at its deadline on every node, the joining one too")
}

// inFlight replays a namespace's Job events and tells how many Jobs existed unfinished at
// once, overall and per node, and how many were created.
func inFlight(events []framework.JobEvent) (peak, peakPerNode, total int) {
	open := map[string]string{}
	perNode := map[string]int{}
	for _, ev := range events {
		j := &ev.Job
		_, isOpen := open[j.Name]
		done := finished(j) || ev.Type == watch.Deleted
		switch {
		case ev.Type == watch.Added && !done:
			node := j.Annotations[jobs.AnnotationNode]
			open[j.Name] = node
			total++
			perNode[node]++
			peak = max(peak, len(open))
			peakPerNode = max(peakPerNode, perNode[node])
		case isOpen && done:
			perNode[open[j.Name]]--
			delete(open, j.Name)
		}
	}
	return peak, peakPerNode, total
}

// firstCreated is the creation time of the first of the Jobs.
func firstCreated(js []batchv1.Job) time.Time {
	var first time.Time
	for _, j := range js {
		if first.IsZero() || j.CreationTimestamp.Time.Before(first) {
			first = j.CreationTimestamp.Time
		}
	}
	return first
}

func finished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}

// TestProgressAndConditions: counts, progress and the Ready/Progressing
// conditions while an operation runs and when it ends; and a list that
// selects no node says so (#233).
func TestProgressAndConditions(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	runController(t, actsWhileHanging)
	key := client.ObjectKey{Namespace: ns, Name: "progress"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "progress", list("caddy:2.8", sandbox.HangPrefix+"slow:1")))).To(Succeed())
	c := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
		g.Expect(c.Status.Progress).To(Equal(fmt.Sprintf("%d/%d", nodes, 2*nodes)))
		g.Expect(c.Status.Counts.InFlight).To(Equal(int32(nodes)))
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha2.ConditionProgressing)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha2.ConditionReady)).To(BeFalse())
	}).WithTimeout(opTimeout).Should(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Counts).To(Equal(&v1alpha2.Counts{Desired: 2 * nodes, Succeeded: nodes, Failed: nodes}))
	g.Expect(c.Status.Progress).To(Equal(fmt.Sprintf("%d/%d", nodes, 2*nodes)))
	g.Expect(meta.IsStatusConditionFalse(c.Status.Conditions, v1alpha2.ConditionProgressing)).To(BeTrue())
	g.Expect(meta.IsStatusConditionFalse(c.Status.Conditions, v1alpha2.ConditionReady)).To(BeTrue())

	// A cache that succeeds is Ready.
	t1 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "ready", list("caddy:2.8")))).To(Succeed())
	c = framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "ready"}, v1alpha2.ImageCacheReasonImageCacheCreate, t1, opTimeout)
	g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha2.ConditionReady)).To(BeTrue())
	g.Expect(c.Status.Progress).To(Equal(fmt.Sprintf("%d/%d", nodes, nodes)))

	// Nothing to do: the selector matches no node.
	t2 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "nowhere", withSelector(map[string]string{"pool": "none"}, "caddy:2.8")))).To(Succeed())
	c = framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "nowhere"}, v1alpha2.ImageCacheReasonImageCacheCreate, t2, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted))
	// The original's words in status.message; ours in the condition.
	g.Expect(c.Status.Message).To(Equal("No images were pulled or deleted because nodeSelector specified did not match any nodes"))
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady).Message).To(ContainSubstring("cacheSpec[0] (nodeSelector pool=none) matches no node"))
	hasEvent(g, ns, "nowhere", "Warning", "NoMatchingNodes", "cacheSpec[0] (nodeSelector pool=none) matches no node")
}
