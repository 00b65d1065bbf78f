package framework

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// TestJobLog drives a JobLog through a fake API server whose first watch hears nothing,
// as if the API server went away right after the log listed, and then expires, as a
// restarted API server's does.
func TestJobLog(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pairJob := func(name, image string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Labels:      map[string]string{jobs.LabelKind: "pull", jobs.LabelOperation: "op1"},
			Annotations: map[string]string{jobs.AnnotationImage: image, jobs.AnnotationNode: "n1"}}}
	}
	kube := fake.NewClientset(pairJob("before", "busybox:1"))
	gap := watch.NewRaceFreeFake()
	// Later watches are the fake's own, which opens no matter the resource version it is
	// asked for: what is created before it opens is lost, so the test waits for it.
	watches := 0
	opened := make(chan struct{}, 10)
	kube.PrependWatchReactor("jobs", func(a k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		if watches == 1 {
			return true, gap, nil
		}
		w, err := kube.Tracker().Watch(a.GetResource(), a.GetNamespace())
		opened <- struct{}{}
		return true, w, err
	})
	l := RecordJobs(t, kube, "ns", nil)
	events, unsubscribe := l.Subscribe()
	defer unsubscribe()

	_, err := kube.BatchV1().Jobs("ns").Create(ctx, pairJob("a", "nginx:1"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kube.BatchV1().Jobs("ns").Delete(ctx, "before", metav1.DeleteOptions{})).To(Succeed())
	g.Consistently(l.Events).Should(BeEmpty(), "the watch is down")
	gap.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired})
	g.Eventually(opened).WithTimeout(30*time.Second).Should(Receive(), "the log lists and watches again (after a back-off)")
	g.Eventually(l.Events).Should(HaveLen(2), "what changed while the watch was down shows once the log has listed again")
	g.Expect(l.Take()).To(Equal([]string{"pull nginx:1 n1"}), "the Job created since, not the one there before")
	g.Expect(l.Events()).To(BeEmpty(), "Take sets aside what it returned")
	g.Expect([]watch.EventType{(<-events).Type, (<-events).Type}).To(ConsistOf(watch.Added, watch.Deleted), "a subscriber hears them too")

	b := pairJob("b", "redis:7")
	_, err = kube.BatchV1().Jobs("ns").Create(ctx, b, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	b.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}
	_, err = kube.BatchV1().Jobs("ns").UpdateStatus(ctx, b, metav1.UpdateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kube.BatchV1().Jobs("ns").Delete(ctx, "b", metav1.DeleteOptions{})).To(Succeed())
	var seen []watch.EventType
	for range 3 {
		var ev JobEvent
		g.Eventually(events).Should(Receive(&ev))
		g.Expect(ev.Job.Name).To(Equal("b"))
		seen = append(seen, ev.Type)
	}
	g.Expect(seen).To(Equal([]watch.EventType{watch.Added, watch.Modified, watch.Deleted}), "a subscriber hears each change")
	g.Expect(JobOutcome(&l.Events()[1].Job)).To(Equal(batchv1.JobFailed))
	g.Expect(l.Take()).To(Equal([]string{"pull redis:7 n1"}))
	g.Expect(l.Take()).To(BeEmpty(), "a deletion is no Job created")

	rs := l.Records()
	g.Expect(rs).To(HaveLen(3), "Take sets no record aside")
	g.Expect(rs[2].Name).To(Equal("b"), "in the order the log heard of them")
	byName := map[string]JobRecord{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	a, before, rb := byName["a"], byName["before"], byName["b"]
	g.Expect(a.Op).To(Equal("op1"))
	g.Expect(a.Pulls("nginx:1")).To(BeTrue())
	g.Expect(a.Seen).NotTo(BeZero())
	g.Expect(a.Settled.IsZero() && a.Deleted.IsZero()).To(BeTrue(), "a runs on")
	g.Expect(before.Deleted).NotTo(BeZero(), "deleted while the watch was down")
	g.Expect(rb.Settled).NotTo(BeZero())
	g.Expect(rb.Deleted).To(BeTemporally(">=", rb.Settled))

	node := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{jobs.LabelKind: "pull"},
		Annotations: map[string]string{jobs.AnnotationNode: "n2"}}}
	node.Spec.Template.Spec.Containers = []corev1.Container{{Image: "a:1"}, {Image: "b:2"}}
	g.Expect(Work(*node)).To(Equal([]string{"pull a:1 n2", "pull b:2 n2"}), "a node Job's work is one per container")
}
