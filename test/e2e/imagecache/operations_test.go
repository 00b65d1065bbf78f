package imagecache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// opTimeout bounds a wait for an operation: Jobs scheduled, run by kwok, finished by the
// Job controller, and the status written.
const opTimeout = framework.ClusterTimeout

func events(g Gomega, ns, name string) []corev1.Event {
	l := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns))).To(Succeed())
	var out []corev1.Event
	for _, e := range l.Items {
		if e.InvolvedObject.Name == name && e.InvolvedObject.Kind == "ImageCache" {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(g Gomega, ns, name, typ, reason, msg string) {
	g.Eventually(func() []string {
		var got []string
		for _, e := range events(g, ns, name) {
			got = append(got, e.Type+" "+e.Reason+" "+e.Message)
		}
		return got
	}).WithTimeout(framework.ClusterTimeout).Should(ContainElement(HavePrefix(typ + " " + reason + " " + msg)))
}

// followed starts a test that follows one cache, named name, through its
// operations: a namespace of its own, the controller with the suite's
// settings, and the records of the Jobs and the statuses the cache will go
// through, both started before the cache exists so that they miss nothing.
func followed(t *testing.T, name string) (key client.ObjectKey, rec *framework.JobLog, statuses func(upTo client.Object) []v1alpha2.ImageCacheStatus) {
	t.Helper()
	key = client.ObjectKey{Namespace: namespace(t), Name: name}
	rec = framework.RecordCacheJobs(t, kube, key.Namespace)
	runController(t, nil)
	return key, rec, watchStatuses(t, key.Namespace, name)
}

// TestOperations walks one cache through every operation of the original:
// create, update (pull only what a list gains, delete what it loses), refresh
// on demand on a warm cluster (the nodes report the images: nothing to pull,
// and that is a success), purge, and delete; each with the original's
// messages, word for word.
func TestOperations(t *testing.T) {
	g := NewWithT(t)
	key, rec, statuses := followed(t, "web")
	ns := key.Namespace
	processing := func(reason, message string) v1alpha2.ImageCacheStatus {
		return v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusProcessing, Reason: reason, Message: message}
	}

	// create
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "web", list("nginx:1.21", "redis:7")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagesPulledSuccessfully))
	g.Expect(c.Status.StartTime).NotTo(BeNil())
	g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
	rec.Await(g, ConsistOf(append(each("pull", "nginx:1.21", allNodes()...), each("pull", "redis:7", allNodes()...)...)))
	g.Expect(statuses(c)).To(ContainElement(processing(v1alpha2.ImageCacheReasonImageCacheCreate, "Images are being pulled on to the nodes. Please view the status after some time")))
	hasEvent(g, ns, "web", "Normal", v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessagePullingImages)
	hasEvent(g, ns, "web", "Normal", v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagesPulledSuccessfully)
	// delete policy: no Job of the operation is left.
	g.Eventually(func() int { return len(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "web"})) }).WithTimeout(framework.ClusterTimeout).Should(BeZero())

	// update: redis:7 leaves the list, postgres:16 joins it; nginx:1.21,
	// kept, is not pulled again once the nodes report it.
	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21")
	t1 := framework.Tick()
	c.Spec.CacheSpec[0].Images = []string{"nginx:1.21", "postgres:16"}
	g.Expect(k8s.Update(context.Background(), c)).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.ProcessedSpec.CacheSpec[0].Images).To(Equal([]string{"nginx:1.21", "postgres:16"}))
	rec.Await(g, ConsistOf(append(each("pull", "postgres:16", allNodes()...), each("delete", "redis:7", allNodes()...)...)))
	g.Expect(statuses(c)).To(ContainElement(processing(v1alpha2.ImageCacheReasonImageCacheUpdate, "Image cache is being updated. Please view the status after some time")))

	// refresh on demand on a warm cluster: every node reports both images,
	// so no Job runs, and the cache has every image in place: Succeeded,
	// as the original's "alreadypulled" was.
	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21", "docker.io/library/postgres:16")
	t2 := framework.Annotate(g, k8s, key, v1alpha2.RefreshAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, t2, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Message).To(Equal("All requested images pulled succesfully to respective nodes"))
	g.Expect(c.Status.Counts.AlreadyPresent).To(Equal(int32(2 * nodes)))
	g.Expect(c.Status.Progress).To(Equal(fmt.Sprintf("%d/%d", 2*nodes, 2*nodes)))
	g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation))
	g.Expect(rec.Take()).To(BeEmpty())
	g.Expect(statuses(c)).To(ContainElement(processing(v1alpha2.ImageCacheReasonImageCacheRefresh, "Image cache is being refreshed. Please view the status after some time")))

	// A node that lost the images (garbage-collected by its kubelet) gets
	// them again; the others are left alone.
	g.Expect(sandbox.Get().SetNodeImages(context.Background(), "sandbox-node-1", nil)).To(Succeed())
	c = refreshAfterLoss(g, key)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	rec.Await(g, ConsistOf(each("pull", "nginx:1.21", "sandbox-node-1")[0], each("pull", "postgres:16", "sandbox-node-1")[0]))

	// purge: every image deleted from every node
	t4 := framework.Annotate(g, k8s, key, v1alpha2.PurgeAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCachePurge, t4, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Message).To(Equal("All cached images succesfully deleted from respective nodes"))
	g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.PurgeAnnotation))
	rec.Await(g, ConsistOf(append(each("delete", "nginx:1.21", allNodes()...), each("delete", "postgres:16", allNodes()...)...)))
	g.Expect(statuses(c)).To(ContainElement(processing(v1alpha2.ImageCacheReasonImageCachePurge, "Image cache is being purged. Please view the status after some time")))
	hasEvent(g, ns, "web", "Normal", v1alpha2.ImageCacheReasonImageCachePurge, v1alpha2.ImageCacheMessageImagesDeletedSuccessfully)

	// delete: nothing runs; the cache is simply gone
	g.Expect(k8s.Delete(context.Background(), c)).To(Succeed())
	g.Consistently(rec.Take).WithTimeout(2 * time.Second).Should(BeEmpty())
}

// TestPeriodicRefresh: with a refresh period, a finished cache is refreshed
// again without any annotation.
func TestPeriodicRefresh(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	runController(t, func(o *commandsOptions) { o.RefreshEvery.Value = 3 * time.Second })
	key := client.ObjectKey{Namespace: ns, Name: "periodic"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "periodic", list("nginx:1.21")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	done := c.Status.CompletionTime.Time
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, done.Add(2*time.Second), opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.StartTime.Time.Sub(done)).To(BeNumerically(">=", 2*time.Second))
}

// TestFailedPull: an image that cannot be pulled fails on every node with the
// runtime's reason and message, within the deadline plus a small margin, and
// the delete policy leaves no Job behind.
func TestFailedPull(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "broken"}
	bad := sandbox.FailPrefix + "missing:1"
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "broken", list("nginx:1.21", bad)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages))
	g.Expect(c.Status.Failures).To(HaveLen(1))
	g.Expect(c.Status.Failures[bad]).To(HaveLen(nodes))
	for _, f := range c.Status.Failures[bad] {
		g.Expect(f.Node).To(BeElementOf(allNodes()))
		g.Expect(f.Reason).To(BeElementOf("ImagePullBackOff", "ErrImagePull"))
		g.Expect(f.Message).To(ContainSubstring(bad))
	}
	took := c.Status.CompletionTime.Sub(c.Status.StartTime.Time)
	g.Expect(took).To(BeNumerically("<=", pullDeadline+10*time.Second), "took %s", took)
	hasEvent(g, ns, "broken", "Warning", v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages)
	g.Eventually(func() int { return len(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "broken"})) }).WithTimeout(framework.ClusterTimeout).Should(BeZero())
}

// TestUpdatePullSecretsRetries: an update that changes only
// imagePullSecrets, as a user fixing a wrong secret after failures does,
// gains no image, yet pulls again every pair its nodes do not report (the
// failed ones), not those they do, and ends on what the retry found, never
// "no node matched".
func TestUpdatePullSecretsRetries(t *testing.T) {
	g := NewWithT(t)
	key, rec, statuses := followed(t, "secret")
	bad := sandbox.FailPrefix + "private:1"
	// The nodes are shared with earlier tests: none may report nginx already,
	// or the create would not pull it there.
	for _, n := range allNodes() {
		g.Expect(sandbox.Get().SetNodeImages(context.Background(), n, nil)).To(Succeed())
	}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(key.Namespace, key.Name, list("nginx:1.21", bad)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Failures[bad]).To(HaveLen(nodes))
	rec.Await(g, ConsistOf(append(each("pull", "nginx:1.21", allNodes()...), each("pull", bad, allNodes()...)...)))
	framework.WaitNodesReport(g, k8s, allNodes(), "docker.io/library/nginx:1.21")

	t1 := framework.Tick()
	c.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-credentials"}}
	g.Expect(k8s.Update(context.Background(), c)).To(Succeed())
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheUpdate, t1, opTimeout)

	rec.Await(g, ConsistOf(each("pull", bad, allNodes()...)), "the failed pairs, and only they, are pulled again")
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), "the retry failed again: the fake registry refuses any secret")
	g.Expect(c.Status.Failures[bad]).To(HaveLen(nodes))
	ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(string(v1alpha2.ImageCacheActionStatusFailed)))
	g.Expect(statuses(c)).To(ContainElement(v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusProcessing,
		Reason: v1alpha2.ImageCacheReasonImageCacheUpdate, Message: v1alpha2.ImageCacheMessageUpdatingCache}))
	g.Expect(statuses(c)).NotTo(ContainElement(HaveField("Status", v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted)))
}

// TestSettledJobsDeletedAtOnce: under the delete policy a Job goes as soon
// as its result is known. The pulls that succeeded are counted and their Jobs
// gone while the failing pulls still hang, long before their deadline ends
// the operation.
func TestSettledJobsDeletedAtOnce(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	_, sel := nodePool(t, g, "half")
	const nodes = 2
	// A deadline past the waits below: the hanging pulls must still run when the good ones
	// are counted, however long kwok takes to run those.
	runController(t, func(o *commands.ControllerOptions) { o.Deadline.Value = 2 * framework.ClusterTimeout })
	key := client.ObjectKey{Namespace: ns, Name: "half"}
	g.Expect(k8s.Create(context.Background(), newCache(ns, "half", withSelector(sel, "nginx:1.21", sandbox.HangPrefix+"hangs:1")))).To(Succeed())
	c := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		g.Expect(c.Status.Counts).NotTo(BeNil())
		g.Expect(c.Status.Counts.Succeeded).To(Equal(int32(nodes)))
	}).WithTimeout(framework.ClusterTimeout).Should(Succeed())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing), "the operation still runs")
	// Only the hanging pulls' Jobs are left (deletion of a Job is at once;
	// its pod goes in the background).
	g.Eventually(func() int { return len(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "half"})) }).
		WithTimeout(framework.ClusterTimeout).Should(Equal(nodes))
}

// TestSameNameInTwoNamespaces: results are keyed by namespace, so two caches
// named alike never mix their results.
func TestSameNameInTwoNamespaces(t *testing.T) {
	g := NewWithT(t)
	ns1, ns2 := namespace(t), namespace(t)
	runController(t, nil)
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns1, "app", list("nginx:1.21")))).To(Succeed())
	g.Expect(k8s.Create(context.Background(), newCache(ns2, "app", list(sandbox.FailPrefix+"app:1")))).To(Succeed())
	c1 := framework.Final(g, k8s, client.ObjectKey{Namespace: ns1, Name: "app"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	c2 := framework.Final(g, k8s, client.ObjectKey{Namespace: ns2, Name: "app"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c1.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c1.Status.Failures).To(BeEmpty())
	g.Expect(c2.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c2.Status.Failures).To(HaveKey(sandbox.FailPrefix + "app:1"))
}

// TestSpecEditDuringOperation: GitOps tools apply edits at any moment. An
// edit or a refresh annotation made while an operation runs is admitted by
// the webhook and not lost: the edit runs as an update when the operation
// ends, and the annotation is kept until a refresh has acted on it. What the
// original refused in place (a list's selector, now its tolerations) is
// still refused.
func TestSpecEditDuringOperation(t *testing.T) {
	g := NewWithT(t)
	key, rec, statuses := followed(t, "edited")
	ns := key.Namespace
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "edited", list(sandbox.HangPrefix+"slow:1")))).To(Succeed())
	c := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
	}).WithTimeout(opTimeout).Should(Succeed())
	c.Spec.CacheSpec[0].Images = append(c.Spec.CacheSpec[0].Images, "busybox:1.36")
	g.Expect(k8s.Update(context.Background(), c)).To(Succeed())
	framework.Annotate(g, k8s, key, v1alpha2.RefreshAnnotation)

	// A patch, as kubectl apply sends: the controller's progress writes
	// move the resourceVersion under an update.
	moved := c.DeepCopy()
	moved.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	err := k8s.Patch(context.Background(), moved, client.MergeFrom(c))
	g.Expect(err).To(MatchError(ContainSubstring("tolerations cannot change")))
	g.Expect(k8s.Get(context.Background(), key, c)).To(Succeed())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing), "the edits came while the create ran")

	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, t0, 3*opTimeout)
	g.Expect(c.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation), "the refresh acted on it")
	g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
	g.Expect(c.Status.ProcessedSpec.CacheSpec[0].Images).To(ContainElement("busybox:1.36"))
	var reasons []string
	for _, s := range statuses(c) {
		if s.Status == v1alpha2.ImageCacheActionStatusProcessing && (len(reasons) == 0 || reasons[len(reasons)-1] != s.Reason) {
			reasons = append(reasons, s.Reason)
		}
	}
	g.Expect(reasons).To(Equal([]string{v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheReasonImageCacheUpdate, v1alpha2.ImageCacheReasonImageCacheRefresh}))
	pulls := rec.Take()
	g.Expect(pulls).To(ContainElements(append(each("pull", sandbox.HangPrefix+"slow:1", allNodes()...), each("pull", "busybox:1.36", allNodes()...)...)))
}

// TestJobsDeletedMidOperation: someone deletes the Jobs while they run; the
// cache still reaches a final status by the deadline, with the reason.
func TestJobsDeletedMidOperation(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	// A deleted Job is settled at the deadline. The suite's pullDeadline could pass before a loaded
	// machine has let the test see every Job and delete it; the Jobs would then be settled
	// as running at their deadline, not as deleted.
	const deadline = 30 * time.Second
	runController(t, func(o *commands.ControllerOptions) { o.Deadline.Value = deadline })
	key := client.ObjectKey{Namespace: ns, Name: "tampered"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "tampered", list(sandbox.HangPrefix+"x:1")))).To(Succeed())
	g.Eventually(func() int { return len(jobsOf(g, ns, client.MatchingLabels{jobs.LabelImageCache: "tampered"})) }).WithTimeout(opTimeout).Should(Equal(nodes))
	g.Expect(k8s.DeleteAllOf(context.Background(), jobsObj(), client.InNamespace(ns), client.MatchingLabels{jobs.LabelImageCache: "tampered"}, client.PropagationPolicy("Background"))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	for _, f := range c.Status.Failures[sandbox.HangPrefix+"x:1"] {
		g.Expect(f.Reason).To(Equal("JobDeleted"))
	}
	g.Expect(c.Status.CompletionTime.Sub(c.Status.StartTime.Time)).To(BeNumerically("<=", deadline+10*time.Second))
}

// refreshAfterLoss asks for a refresh of key until one pulls what a node lost, and returns
// its final status. A refresh plans from the controller's cache of nodes, which a node's
// status update reaches after the API server has answered SetNodeImages, seconds later on
// a loaded machine (and a kubelet's report is later still): a refresh that started before
// finds every image present and rightly pulls nothing. The wait is on the event, a refresh
// that saw the loss, with the operations' deadline.
func refreshAfterLoss(g Gomega, key client.ObjectKey) *v1alpha2.ImageCache {
	var c *v1alpha2.ImageCache
	g.Eventually(func(g Gomega) {
		t := framework.Annotate(g, k8s, key, v1alpha2.RefreshAnnotation)
		c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, t, opTimeout)
		g.Expect(c.Status.Counts.Succeeded+c.Status.Counts.Failed).NotTo(BeZero(), "the refresh found every image present")
	}).WithTimeout(opTimeout).Should(Succeed())
	return c
}
