package imagecache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestRefusedJobs: a Job create refused for good (a ResourceQuota allowing
// no Job, an admission policy denying it) fails its (image, node) with the
// API's answer, by the deadline at the latest, and frees its pacing slot: a
// cache in another namespace, on the same nodes, still gets its Jobs. On an
// API server without admission policies (below 1.30) only the quota refuses.
func TestRefusedJobs(t *testing.T) {
	g := NewWithT(t)
	quotaNS := namespace(t)
	freeNS := namespace(t)
	ctx := context.Background()
	type refusal struct{ ns, reason, says string }
	refusals := []refusal{{quotaNS, "Forbidden", "exceeded quota"}}

	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: quotaNS, Name: "no-jobs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}}}
	g.Expect(k8s.Create(ctx, quota)).To(Succeed())
	if why := noPolicies(g); why == "" {
		policyNS := namespace(t, "e2e.kubefledged.io/deny-jobs")
		denyJobs(t, g, "e2e.kubefledged.io/deny-jobs")
		refusals = append(refusals, refusal{policyNS, "Invalid", "jobs are denied here"})
	} else {
		t.Logf("no refusal by an admission policy: %s", why)
	}
	// Every refusal is in force before the controller tries.
	for _, r := range refusals {
		g.Eventually(func() error {
			return k8s.Create(ctx, probeJob(r.ns), client.DryRunAll)
		}).WithTimeout(framework.ClusterTimeout).Should(Satisfy(func(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) }))
	}

	// One Job per node at a time: a slot held by a refused create would
	// keep the free cache's Jobs off every node for good.
	runController(t, func(o *commands.ControllerOptions) { o.MaxJobsPerNode.Value = 1 })
	t0 := framework.Tick()
	for _, r := range append(refusals, refusal{ns: freeNS}) {
		g.Expect(k8s.Create(ctx, newCache(r.ns, "refused", list("nginx:1.27", "redis:7.2")))).To(Succeed())
	}
	for _, tc := range refusals {
		c := framework.Final(g, k8s, client.ObjectKey{Namespace: tc.ns, Name: "refused"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), tc.ns)
		g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages))
		g.Expect(c.Status.Failures).To(HaveLen(2))
		for img, l := range c.Status.Failures {
			g.Expect(l).To(HaveLen(nodes), img)
			for _, f := range l {
				g.Expect(f.Reason).To(Equal(tc.reason), img)
				g.Expect(f.Message).To(ContainSubstring(tc.says), img)
			}
		}
		// Refused at once, not at the deadline (8 s).
		g.Expect(c.Status.CompletionTime.Sub(c.Status.StartTime.Time)).To(BeNumerically("<", 8*time.Second))
		hasEvent(g, tc.ns, "refused", "Warning", "JobCreateRefused", "")
	}
	c := framework.Final(g, k8s, client.ObjectKey{Namespace: freeNS, Name: "refused"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
}

// noPolicies says why the API server cannot take a ValidatingAdmissionPolicy
// (admissionregistration.k8s.io/v1, Kubernetes 1.30 and later; earlier ones
// serve it as beta or alpha, off by default), or "" when it can.
func noPolicies(g Gomega) string {
	gv := admissionregistrationv1.SchemeGroupVersion.String()
	l, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
	g.Expect(err).NotTo(HaveOccurred())
	for _, r := range l.APIResources {
		if r.Name == "validatingadmissionpolicies" {
			return ""
		}
	}
	v, err := kube.Discovery().ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	return fmt.Sprintf("Kubernetes %s serves no validatingadmissionpolicies in %s", v.GitVersion, gv)
}

// denyJobs installs a ValidatingAdmissionPolicy, as Kyverno or Gatekeeper
// users have, that denies every Job in namespaces carrying label.
func denyJobs(t *testing.T, g Gomega, label string) {
	installPolicy(t, g, label, admissionregistrationv1.Create,
		admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
		admissionregistrationv1.Validation{Expression: "false", Message: "jobs are denied here (e2e policy)"})
}

// installPolicy installs a ValidatingAdmissionPolicy with one validation
// for one operation on rule's resources, bound to the namespaces carrying
// label, and removes it at the test's end.
func installPolicy(t *testing.T, g Gomega, label string, op admissionregistrationv1.OperationType, rule admissionregistrationv1.Rule, v admissionregistrationv1.Validation) {
	name := "e2e-policy-" + rand.String(6)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{op}, Rule: rule},
			}}},
			Validations: []admissionregistrationv1.Validation{v},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{label: "true"}}},
		},
	}
	g.Expect(k8s.Create(context.Background(), policy)).To(Succeed())
	g.Expect(k8s.Create(context.Background(), binding)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), policy)
	})
}

func probeJob(ns string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}}}
}

// TestStatusTooLarge: when the API server refuses the final status (here a
// policy on status.failures stands for etcd's size limit), the cache still
// ends: the failures list shrinks until it is taken, and failuresOmitted
// counts the rest.
func TestStatusTooLarge(t *testing.T) {
	g := NewWithT(t)
	label := "e2e.kubefledged.io/small-status"
	if why := noPolicies(g); why != "" {
		t.Skipf("an admission policy stands for etcd's limit here: %s", why)
	}
	ns := namespace(t, label)
	installPolicy(t, g, label, admissionregistrationv1.Update,
		admissionregistrationv1.Rule{APIGroups: []string{v1alpha2.GroupVersion.Group}, APIVersions: []string{v1alpha2.GroupVersion.Version},
			Resources: []string{"imagecaches/status"}},
		admissionregistrationv1.Validation{
			Expression: "!has(object.status.failures) || object.status.failures.map(k, size(object.status.failures[k])).sum() <= 4",
			Reason:     ptr.To(metav1.StatusReasonRequestEntityTooLarge),
			Message:    "the status is too large (an e2e policy standing for etcd's limit)",
		})
	runController(t, nil) // deadline 8s; it serves the webhook
	// The API server loads a new policy a moment after it is created: it is
	// in force, for a status of 5 failures, before the controller writes one.
	ctx := context.Background()
	probe := newCache(ns, "probe", list("busybox:1.36"))
	g.Expect(k8s.Create(ctx, probe)).To(Succeed())
	five := make([]v1alpha2.NodeReasonMessage, 5)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"status": v1alpha2.ImageCacheActionStatusFailed,
		"reason": "Probe", "message": "probe", "failures": map[string]any{"probe": five}}})
	g.Expect(err).NotTo(HaveOccurred())
	// A merge patch without a resourceVersion: the controller works on the
	// probe meanwhile.
	g.Eventually(func() error {
		return k8s.Status().Patch(ctx, probe.DeepCopy(), client.RawPatch(types.MergePatchType, body), client.DryRunAll)
	}).WithTimeout(framework.ClusterTimeout).Should(Satisfy(apierrors.IsRequestEntityTooLargeError))
	g.Expect(k8s.Delete(ctx, probe)).To(Succeed())
	key := client.ObjectKey{Namespace: ns, Name: "many-failures"}
	var bad []string
	for i := range 3 {
		bad = append(bad, fmt.Sprintf("%smissing-%d:1", sandbox.FailPrefix, i))
	}
	t0 := framework.Tick()
	g.Expect(k8s.Create(ctx, newCache(ns, key.Name, list(bad...)))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	kept := 0
	for _, l := range c.Status.Failures {
		kept += len(l)
	}
	g.Expect(kept).To(BeNumerically("<=", 4))
	g.Expect(kept).To(BeNumerically(">", 0))
	g.Expect(int(c.Status.FailuresOmitted)).To(Equal(3*nodes - kept))
	g.Expect(c.Status.Counts.Failed).To(Equal(int32(3 * nodes)))
	g.Expect(meta.FindStatusCondition(c.Status.Conditions, v1alpha2.ConditionReady).Message).To(ContainSubstring("left out of status.failures"))
}

// TestSpecTooLarge: a spec too large to be stored with its status is
// handled without the webhook: the controller declines it, saying why,
// instead of running an operation whose status could never be written,
// whether images (which the CRD cannot bound in total on every version we
// claim) or selectors make it large.
func TestSpecTooLarge(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t, noWebhookLabel)
	rec := framework.RecordJobs(t, kube, ns, nil)
	runController(t, nil)
	ctx := context.Background()

	// 3 lists of 240 images of about 380 characters: 270 KiB.
	var lists []v1alpha2.CacheSpecImages
	for l := range 3 {
		var imgs []string
		for i := range 240 {
			imgs = append(imgs, fmt.Sprintf("registry.example.com/%s/image-%d-%d:%s", strings.Repeat("a", 220), l, i, strings.Repeat("t", 128)))
		}
		lists = append(lists, v1alpha2.CacheSpecImages{Images: imgs})
	}
	// Few images, but a node selector of 300 KiB.
	sel := map[string]string{}
	for i := range 30 {
		sel[fmt.Sprintf("example.com/%s-%d", strings.Repeat("k", 10000), i)] = "x"
	}
	for _, c := range []*v1alpha2.ImageCache{
		newCache(ns, "too-many-images", lists...),
		newCache(ns, "huge-selector", withSelector(sel, "nginx:1.27")),
	} {
		t0 := framework.Tick()
		g.Expect(k8s.Create(ctx, c)).To(Succeed(), c.Name)
		c = framework.Final(g, k8s, client.ObjectKeyFromObject(c), v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), c.Name)
		g.Expect(c.Status.Message).To(Equal(v1alpha2.ImageCacheMessageImagePullFailedForSomeImages), c.Name)
		g.Expect(c.Status.Failures["(spec)"]).To(HaveLen(1), c.Name)
		g.Expect(c.Status.Failures["(spec)"][0].Reason).To(Equal("SpecTooLarge"), c.Name)
		g.Expect(c.Status.Failures["(spec)"][0].Message).To(ContainSubstring("over the limit of 256 KiB"), c.Name)
		hasEvent(g, ns, c.Name, "Warning", "SpecTooLarge", c.Status.Failures["(spec)"][0].Message)
		// Declined once, not again and again.
		done := c.Status.CompletionTime
		g.Consistently(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(c.Status.CompletionTime).To(Equal(done))
		}).WithTimeout(3 * time.Second).Should(Succeed())
	}
	g.Expect(rec.Take()).To(BeEmpty())
}
