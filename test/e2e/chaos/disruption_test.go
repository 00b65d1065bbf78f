package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestDisruptions takes away what an operation depends on while it runs:
// its Jobs, its pods, a node. Others act on the cluster too (an admin
// cleaning up, the cluster autoscaler removing a node), and an operation
// that waited forever for a Job that is gone would hold its cache in
// Processing for good, refusing every edit. Each cache must reach a final
// status that says, per image and node, what went wrong.
func TestDisruptions(t *testing.T) {
	e := Setup(t)
	ctx := context.Background()
	ns := e.Namespace(t, "disrupt")
	jobLog := e.RecordJobs(t)
	events, unsubscribe := jobLog.Subscribe()
	defer unsubscribe()

	// Two nodes of its own for the node loss, so the other caches and tests
	// keep their three. Their taint keeps the other caches off them: those
	// tolerate only an unrelated taint, and so no taint of these nodes.
	id := rand.String(4)
	keep, lost := "chaos-keep-"+id, "chaos-lost-"+id
	sel := map[string]string{"chaos.kubefledged.io/disruption": id}
	taint := []corev1.Taint{{Key: "chaos.kubefledged.io/disruption", Value: id, Effect: corev1.TaintEffectNoSchedule}}
	if err := e.SB.CreateNodes(ctx, sandbox.NodeSpec{Name: keep, Labels: sel, Taints: taint},
		sandbox.NodeSpec{Name: lost, Labels: sel, Taints: taint}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{keep, lost} {
			_ = e.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	bad := func(s string) string { return sandbox.FailPrefix + "disrupt/" + s + ":v1" }
	good := func(s string) string { return "example.test/disrupt/" + s + ":v1" }
	jobsDeleted := NewCache(ns, "jobs-deleted", []string{good("a"), bad("a")})
	podsDeleted := NewCache(ns, "pods-deleted", []string{good("b"), bad("b")})
	nodeLost := NewCache(ns, "node-lost", []string{good("c"), bad("c")})
	nodeLost.Spec.CacheSpec[0].NodeSelector = sel
	for _, ic := range []*v1alpha2.ImageCache{jobsDeleted, podsDeleted} {
		ic.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "unrelated", Operator: corev1.TolerationOpExists}}
	}

	p := e.StartController(t, "controller-disrupt", nil)
	if _, err := Preflight(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, ic := range []*v1alpha2.ImageCache{jobsDeleted, podsDeleted, nodeLost} {
		if err := e.Client.Create(ctx, ic); err != nil {
			t.Fatal(err)
		}
	}

	// Act on the Jobs as they appear: delete the never-pulling Jobs of one
	// cache, the pods of another's, and the node of the third's first Job.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	// disrupt acts beside the loop, which must go on reading events meanwhile.
	disrupt := func(act func() error) {
		wg.Go(func() {
			if err := act(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	deletedJobs, deletedPods, nodeGone := 0, 0, false
	// disrupted holds "image@node" for every image a deleted Job, or a Job
	// whose pod was deleted, was to pull: a node's pull Job holds the good
	// image beside the bad one, and so takes it along when it goes before
	// the good image's container has a result.
	disrupted := map[string]bool{}
	hit := func(j framework.JobRecord) {
		for _, img := range j.Images {
			disrupted[img+"@"+j.Node] = true
		}
	}
	timeout := time.After(framework.ClusterTimeout)
	for deletedJobs < 3 || deletedPods < 3 || !nodeGone {
		var ev framework.JobEvent
		select {
		case ev = <-events:
		case <-timeout:
			t.Fatalf("disruptions not all made in %s: jobs %d, pods %d, node %v", framework.ClusterTimeout, deletedJobs, deletedPods, nodeGone)
		}
		if ev.Type != watch.Added || ev.Job.Namespace != ns {
			continue
		}
		j := framework.RecordOf(&ev.Job)
		switch {
		case strings.HasPrefix(j.Name, "jobs-deleted") && j.Pulls(bad("a")):
			deletedJobs++
			hit(j)
			disrupt(func() error { return deleteJob(ctx, e, ns, j.Name) })
		case strings.HasPrefix(j.Name, "pods-deleted") && j.Pulls(bad("b")):
			deletedPods++
			hit(j)
			disrupt(func() error { return deletePodsOf(ctx, e, ns, j.Name) })
		case strings.HasPrefix(j.Name, "node-lost") && j.Node == lost && !nodeGone:
			nodeGone = true
			disrupt(func() error {
				if err := e.SB.DeleteNode(ctx, lost); err != nil {
					return fmt.Errorf("deleting node %s: %w", lost, err)
				}
				return nil
			})
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}

	g := NewWithT(t)
	reasons := map[string][]string{}
	for _, ic := range []*v1alpha2.ImageCache{jobsDeleted, podsDeleted, nodeLost} {
		got := e.WaitFinal(t, client.ObjectKeyFromObject(ic), "", framework.ClusterTimeout)
		st := got.Status
		what := fmt.Sprintf("%s: %s %q failures=%v counts=%+v", ic.Name, st.Status, st.Message, st.Failures, st.Counts)
		g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), what)
		g.Expect(st.Counts.InFlight+st.Counts.Waiting).To(BeZero(), what)
		g.Expect(st.Counts.Succeeded+st.Counts.Failed+st.Counts.AlreadyPresent).To(Equal(st.Counts.Desired), what)
		for img, l := range st.Failures {
			for _, f := range l {
				g.Expect(f.Reason).NotTo(BeEmpty(), what)
				g.Expect(f.Message).NotTo(BeEmpty(), what)
				reasons[ic.Name] = append(reasons[ic.Name], fmt.Sprintf("%s@%s=%s", shortImage(img), f.Node, f.Reason))
			}
		}
		switch ic.Name {
		case "jobs-deleted":
			g.Expect(st.Failures).To(HaveKey(bad("a")), what)
			g.Expect(st.Failures[bad("a")]).To(HaveLen(3), what)
			// The good image fails only where its Job was deleted under it
			// (a node's pull Job, before its container finished), and then
			// for that reason; a Job of its own is never touched.
			for img, l := range st.Failures {
				for _, f := range l {
					g.Expect(f.Reason).To(Equal("JobDeleted"), what)
					g.Expect(disrupted).To(HaveKey(img+"@"+f.Node), what)
				}
			}
		case "pods-deleted":
			g.Expect(st.Failures).To(HaveKey(bad("b")), what)
			g.Expect(st.Failures[bad("b")]).To(HaveLen(3), what)
			for img, l := range st.Failures {
				for _, f := range l {
					g.Expect(disrupted).To(HaveKey(img+"@"+f.Node), what)
				}
			}
		case "node-lost":
			g.Expect(st.Failures).To(HaveKey(bad("c")), what)
			g.Expect(st.Failures[bad("c")]).To(HaveLen(2), what)
			// The good image either made it to the lost node before it went,
			// or failed there, and only there.
			for _, f := range st.Failures[good("c")] {
				g.Expect(f.Node).To(Equal(lost), what)
			}
		}
	}
	live, err := e.LiveJobs(ctx, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(live)).To(BeEmpty(), "labelled Jobs left after the operations finished")
	g.Expect(p.Exited()).To(BeFalse(), "the controller exited:\n%s", p.Tail(30))
	t.Logf("FIGURES disruption: jobs-deleted=%d pods-deleted=%d nodes-deleted=1 pairs-disrupted=%d reasons=%v", deletedJobs, deletedPods, len(disrupted), reasons)
}

func deleteJob(ctx context.Context, e *Env, ns, name string) error {
	err := e.Kube.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)})
	if err != nil {
		return fmt.Errorf("deleting Job %s: %w", name, err)
	}
	return nil
}

// deletePodsOf waits for a Job's pod and deletes it, as `kubectl delete pod`
// would. The Job controller creates the pod when its queue gets to it, which
// on a loaded machine takes tens of seconds; and the controller may settle and
// delete the Job first (its bad image fails at the first pull), which leaves
// no pod to delete and is no fault.
func deletePodsOf(ctx context.Context, e *Env, ns, job string) error {
	var deleted bool
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, framework.ClusterTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
		if err != nil {
			return false, nil
		}
		for _, p := range pods.Items {
			if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deleting pod %s: %w", p.Name, err)
			}
			deleted = true
		}
		if deleted {
			return true, nil
		}
		_, err = e.Kube.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("no pod of Job %s to delete: %w", job, err)
	}
	return nil
}

func shortImage(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }
