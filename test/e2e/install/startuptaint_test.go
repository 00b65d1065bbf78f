package install_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// startupTaintKey is the key docs/startup-taint.md suggests.
const startupTaintKey = "kubefledged.io/caching"

// TestHelmStartupTaint replaces the node pool under a controller installed by the chart
// with --node-startup-taint, as issue 28 tells it: the old node drains, taking the
// controller's pod with it, and the new node registers with the startup taint. The
// controller is the only thing that removes that taint, so unless its pod tolerates it,
// it stays Pending and no node is ever released. The real node plays both nodes: it is
// cordoned while the pod is deleted (the old pool going), then given the taint and
// uncordoned in one write (the new node). The pod must land there while the taint is on,
// and the controller it runs must release the node once the cache that selects it is on
// it, not at the timeout. Once per effect the flag takes that holds pods back: NoExecute
// also evicts what runs, the controller's pod included, unless it tolerates it.
func TestHelmStartupTaint(t *testing.T) {
	framework.NeedRealNode(t)
	chrt := pushedChart(t)
	for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
		t.Run(string(effect), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			cfg := helmConfig(t)
			taint := corev1.Taint{Key: startupTaintKey, Effect: effect}
			vals := helmValues("delete")
			c := vals["controller"].(map[string]any)
			c["nodeStartupTaint"] = startupTaintKey + ":" + string(effect)
			// Far beyond the test: a release must come from the cache, and the timeout
			// counts from the node's creation, which is as old as the sandbox.
			c["nodeStartupTaintTimeout"] = "24h"
			// What docs/install.md recommends; the sandbox has no quota that limits it.
			c["priorityClassName"] = "system-cluster-critical"

			begin := time.Now()
			install := action.NewInstall(cfg)
			install.ReleaseName = helmRelease
			install.Namespace = helmNamespace
			install.CreateNamespace = true
			install.Timeout = time.Minute
			if _, err := install.Run(chrt, vals); err != nil {
				t.Fatalf("helm install: %v", err)
			}
			t.Cleanup(func() { helmUninstall(t, cfg) })
			t.Cleanup(func() { setNode(t, false, nil) })
			in := installation{how: "helm, startup taint " + string(effect), began: begin,
				namespace: helmNamespace, deployment: helmFullname + "-controller"}
			old := rolledOut(g, in, "delete", readyTimeout)
			t.Logf("%s: install to a Ready controller in %s", in.how, time.Since(begin).Round(time.Millisecond))

			// A cache that selects the node, so that its release waits for the controller
			// to find the cache's image on it. The webhook must be up to admit it.
			tag := strings.ToLower(string(effect))
			ref := "ghcr.io/kubefledged/e2e-install-taint:" + tag
			l, err := realnode.NewLayer(realnode.File{Path: "/data/which", Data: []byte(ref + "\n")})
			g.Expect(err).NotTo(HaveOccurred())
			img, err := realnode.NewImage(nil, l)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(node.PushAs(ctx, ref, img)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(k8s.Create(ctx, framework.CacheOnNode(helmNamespace, "taint-"+tag, node.Name(), ref))).To(Succeed())
			}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed(), "the webhook did not admit the cache")

			// The old pool drains: no pod may land on the node, and the controller's pod
			// goes. Its ReplicaSet makes another, which has nowhere to go yet.
			setNode(t, true, nil)
			g.Expect(k8s.Delete(ctx, old)).To(Succeed())
			pending := waitPod(g, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.UID).NotTo(Equal(old.UID))
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "scheduled onto a cordoned node: %s", podState(p))
			})
			g.Eventually(func(g Gomega) {
				err := k8s.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
				g.Expect(client.IgnoreNotFound(err)).To(Succeed())
				g.Expect(err).To(HaveOccurred(), "the old controller pod is still there")
			}).WithTimeout(rollTimeout).WithPolling(poll).Should(Succeed())
			pc := &schedulingv1.PriorityClass{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "system-cluster-critical"}, pc)).To(Succeed())
			g.Expect(pending.Spec.PriorityClassName).To(Equal(pc.Name))
			g.Expect(pending.Spec.Priority).To(HaveValue(Equal(pc.Value)))

			// The new node registers, carrying the startup taint.
			tainted := time.Now()
			setNode(t, false, &taint)
			t.Logf("%s: node %s tainted %s and uncordoned; controller pod %s pending", in.how, node.Name(), taint.ToString(), pending.Name)

			var scheduled time.Time
			pod := waitPod(g, func(g Gomega, p *corev1.Pod) {
				g.Expect(p.UID).To(Equal(pending.UID), "the pending pod was replaced: %s", podState(p))
				g.Expect(p.Spec.NodeName).To(Equal(node.Name()), "not scheduled: %s", podState(p))
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
						scheduled = c.LastTransitionTime.Time
					}
				}
				g.Expect(scheduled).NotTo(BeZero())
			})
			t.Logf("%s: controller pod %s scheduled onto the tainted node %s after the taint", in.how, pod.Name, time.Since(tainted).Round(time.Millisecond))
			g.Expect(pod.Spec.Tolerations).To(ContainElement(corev1.Toleration{Key: startupTaintKey, Operator: corev1.TolerationOpExists, Effect: effect}))

			var released *corev1.Event
			g.Eventually(func(g Gomega) {
				n := &corev1.Node{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Name: node.Name()}, n)).To(Succeed())
				g.Expect(n.Spec.Taints).NotTo(ContainElement(HaveField("Key", startupTaintKey)), "still held")
				released = nodeEvent(g, "StartupTaintRemoved", tainted)
			}).WithTimeout(cacheTimeout).WithPolling(poll).Should(Succeed(), "the node was not released")
			t.Logf("%s: node released %s after the taint: %s %s: %s", in.how, time.Since(tainted).Round(time.Millisecond),
				released.Type, released.Reason, released.Message)
			g.Expect(released.Type).To(Equal(corev1.EventTypeNormal))
			g.Expect(released.Message).To(ContainSubstring("The images of ImageCache " + helmNamespace + "/taint-" + tag + " are on the node"))
			// The release came from the controller pod on that node: the only one there is,
			// scheduled while the taint was on (Event times are whole seconds).
			g.Expect(scheduled.Truncate(time.Second)).NotTo(BeTemporally(">", eventTime(released)), "the pod was scheduled after the release")
			g.Expect(ownPods(g)).To(ConsistOf(HaveField("UID", pending.UID)))
			g.Expect(nodeEventsSince(g, "StartupTaintTimeout", tainted)).To(BeEmpty())
			onlyOnTheRealNode(g, helmNamespace)
		})
	}
}

// setNode cordons or uncordons the real node and puts the startup taint on it (taint
// non-nil) or takes it off, in one write, as a node registers with its taints.
func setNode(t *testing.T, unschedulable bool, taint *corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: node.Name()}, n); err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, x := range n.Spec.Taints {
			if x.Key != startupTaintKey {
				taints = append(taints, x)
			}
		}
		if taint != nil {
			taints = append(taints, *taint)
		}
		n.Spec.Taints, n.Spec.Unschedulable = taints, unschedulable
		return k8s.Update(ctx, n)
	})
	if err != nil {
		t.Fatalf("node %s: %v", node.Name(), err)
	}
}

// ownPods are the controller's pods, by the chart's selector labels.
func ownPods(g Gomega) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), pods, client.InNamespace(helmNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": helmRelease, "app.kubernetes.io/component": "controller"})).To(Succeed())
	return pods.Items
}

// waitPod waits until the one controller pod meets check, and returns it.
func waitPod(g Gomega, check func(g Gomega, p *corev1.Pod)) *corev1.Pod {
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		var live []corev1.Pod
		for _, p := range ownPods(g) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		g.Expect(live).To(HaveLen(1))
		check(g, &live[0])
		pod = &live[0]
	}).WithTimeout(readyTimeout).WithPolling(poll).Should(Succeed())
	return pod
}

// nodeEventsSince are the real node's Events of one reason last seen at or after since.
func nodeEventsSince(g Gomega, reason string, since time.Time) []corev1.Event {
	l := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(metav1.NamespaceDefault),
		client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
			"involvedObject.kind": "Node", "involvedObject.name": node.Name(), "reason": reason})})).To(Succeed())
	var out []corev1.Event
	for _, e := range l.Items {
		if !eventTime(&e).Before(since.Truncate(time.Second)) {
			out = append(out, e)
		}
	}
	return out
}

// nodeEvent is the one Event of a reason on the real node since a time.
func nodeEvent(g Gomega, reason string, since time.Time) *corev1.Event {
	es := nodeEventsSince(g, reason, since)
	g.Expect(es).To(HaveLen(1), "Events %s on node %s", reason, node.Name())
	return &es[0]
}

// eventTime is when an Event was last recorded, whichever API wrote it.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
