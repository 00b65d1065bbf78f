package imagecache_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pacing"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

func results(g Gomega, ns, cache string) map[string]int {
	out := map[string]int{}
	// Delete Jobs run in the controller's namespace.
	deletes := jobsOf(g, controllerNamespace, client.MatchingLabels{jobs.LabelImageCache: cache, jobs.LabelCacheNamespace: ns})
	for _, j := range append(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: cache}), deletes...) {
		out[j.Labels[jobs.LabelKind]+"/"+j.Labels[jobs.LabelResult]]++
	}
	return out
}

// TestRetentionMatrix: with retain, every Job of an operation stays —
// succeeded, failed and still running at the deadline, pull and delete alike
// — labelled with its result; the next operation of the cache removes them.
// With delete, none is left (see TestOperations and TestFailedPull).
func TestRetentionMatrix(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	good, bad, crash := "httpd:2.4", sandbox.FailPrefix+"nope:1", sandbox.RunFailPrefix+"crash:1"
	images := []string{good, bad, crash}
	// An image that cannot be pulled is settled at once: it is one that
	// never finishes pulling that is still running at the deadline. One pull
	// at a time per node, on nodes declared to pull a pod's images all at
	// once (so that each counts), gives each image a node Job of its own,
	// whose label is that image's result (kwok's stages render one kind of
	// trouble per pod).
	hang := sandbox.HangPrefix + "forever:1"
	images = append(images, hang)
	want := map[string]int{"pull/succeeded": nodes, "pull/expired": nodes, "pull/failed": 2 * nodes}
	waiting, perNodeCap := "ContainerCreating", 1 // of the expired Jobs' pods
	labelNodes(t, g, pacing.LabelParallelPulls, strconv.Itoa(len(images)))
	stop := runController(t, func(o *commands.ControllerOptions) {
		o.Retention = jobs.Retain
		o.MaxJobsPerNode.Value = perNodeCap
	})
	key := client.ObjectKey{Namespace: ns, Name: "kept"}

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "kept", list(images...)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Failures[crash][0].Reason).To(Equal("Error"))
	g.Expect(results(g, ns, "kept")).To(Equal(want))

	// The Jobs still running at the deadline keep running: their pods show why.
	expired := jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "kept", jobs.LabelResult: jobs.ResultExpired})
	for _, j := range expired {
		g.Expect(j.Status.Active).To(Equal(int32(1)))
		if !perNode() {
			g.Expect(j.Annotations[jobs.AnnotationResultMsg]).To(ContainSubstring("still pending"))
		}
		pods := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: j.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Status.ContainerStatuses[0].State.Waiting.Reason).To(Equal(waiting))
	}

	// Purge: the create's Jobs go (a cache keeps only its latest
	// operation's), the purge's delete Jobs stay.
	t1 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(results(g, ns, "kept")).To(Equal(map[string]int{"delete/succeeded": len(images) * nodes}))

	// Delete Jobs that fail, and that are still running at the deadline: the
	// helper image cannot be pulled (at once), fails to run, or never
	// finishes pulling. Each restart in between also deletes the Jobs
	// retained so far.
	stop()
	cases := []struct{ helper, want string }{
		{sandbox.FailPrefix + "kubefledged:e2e", "delete/failed"},
		{sandbox.RunFailPrefix + "kubefledged:e2e", "delete/failed"},
		{sandbox.HangPrefix + "kubefledged:e2e", "delete/expired"},
	}
	for i, tc := range cases {
		stop := runController(t, func(o *commands.ControllerOptions) {
			o.Retention = jobs.Retain
			o.HelperImage = tc.helper
			o.MaxJobsPerNode.Value = len(images)
		})
		t2 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
		c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t2, opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
		g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImageDeleteFailedForSomeImages))
		g.Expect(results(g, ns, "kept")).To(Equal(map[string]int{tc.want: len(images) * nodes}))
		// The last controller stays, for the cache's deletion below.
		if i < len(cases)-1 {
			stop()
		}
	}

	// Deleting the cache takes its retained Jobs with it: those in its
	// namespace by their owner references, its delete Jobs in the
	// controller's namespace by the running controller.
	g.Expect(k8s.Delete(context.Background(), c)).To(Succeed())
	g.Eventually(func() map[string]int { return results(g, ns, "kept") }).WithTimeout(framework.ClusterTimeout).Should(BeEmpty())
}

// TestRestart: a restarted controller deletes every leftover Job (retained
// ones of finished operations and running ones alike) before anything else,
// marks caches found Processing as Aborted, and runs them again.
func TestRestart(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	retainLong := func(o *commands.ControllerOptions) {
		o.Retention = jobs.Retain
		o.Deadline.Value = 5 * time.Minute
	}
	stop := runController(t, retainLong)

	// A finished operation with retained Jobs...
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "done", list("httpd:2.4")))).To(Succeed())
	framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "done"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	// ...and one still running.
	g.Expect(k8s.Create(context.Background(), newCache(ns, "running", list(sandbox.HangPrefix+"hang:1", "redis:7")))).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "running"}
	running := 2 * nodes
	if perNode() {
		running = nodes
	}
	g.Eventually(func() int { return len(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "running"})) }).WithTimeout(opTimeout).Should(Equal(running))
	stop()

	old := map[string]bool{}
	for _, j := range jobsOf(g, ns, client.MatchingLabels{}) {
		old[j.Name] = true
	}
	g.Expect(old).To(HaveLen(nodes + running))
	statuses := watchStatuses(t, ns, "running")

	t1 := framework.Tick()
	runController(t, func(o *commands.ControllerOptions) { o.Retention = jobs.Retain }) // deadline 8s
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(statuses(c)).To(ContainElement(v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusAborted,
		Reason: v1alpha2.ImageCacheReasonImagePullAborted, Message: v1alpha2.ImageCacheMessagePullingAborted}))
	for _, j := range jobsOf(g, ns, client.MatchingLabels{}) {
		g.Expect(old).NotTo(HaveKey(j.Name), "job %s survived the restart", j.Name)
	}
}

// watchStatuses records every status, reason and message a cache passes
// through. The returned function gives them up to the cache as upTo holds it
// (read by a Get, as Final does): the watch runs beside that Get and may not
// have delivered the last changes yet, so it waits until it has.
func watchStatuses(t *testing.T, ns, name string) func(upTo client.Object) []v1alpha2.ImageCacheStatus {
	w, err := k8s.Watch(context.Background(), &v1alpha2.ImageCacheList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []v1alpha2.ImageCacheStatus
	versions := map[string]bool{}
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			c, ok := ev.Object.(*v1alpha2.ImageCache)
			if ok && c.Name == name {
				mu.Lock()
				seen = append(seen, v1alpha2.ImageCacheStatus{Status: c.Status.Status, Reason: c.Status.Reason, Message: c.Status.Message})
				versions[c.ResourceVersion] = true
				mu.Unlock()
			}
		}
	}()
	return func(upTo client.Object) []v1alpha2.ImageCacheStatus {
		NewWithT(t).Eventually(func() bool {
			mu.Lock()
			defer mu.Unlock()
			return versions[upTo.GetResourceVersion()]
		}).WithTimeout(framework.ClusterTimeout).Should(BeTrue(), "the watch delivers %s at resourceVersion %s", name, upTo.GetResourceVersion())
		mu.Lock()
		defer mu.Unlock()
		return append([]v1alpha2.ImageCacheStatus{}, seen...)
	}
}
