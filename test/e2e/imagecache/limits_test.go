package imagecache_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestJobResourcesMeetLimits: a namespace whose ResourceQuota demands
// limits.cpu and limits.memory, and whose LimitRange bounds the ratio of a
// container's CPU limit to its request (so demands a CPU limit too),
// refuses the pods of Jobs that name no CPU limit. The cache's failures
// say why, in the API server's words. Given requests and limits by the
// controller's flags, as the binary parses them, a refresh of the same
// cache pulls every image.
func TestJobResourcesMeetLimits(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limits"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceLimitsCPU: resource.MustParse("4"), corev1.ResourceLimitsMemory: resource.MustParse("4Gi")}}}
	g.Expect(k8s.Create(ctx, quota)).To(Succeed())
	ratio := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ratio"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}}}}}
	g.Expect(k8s.Create(ctx, ratio)).To(Succeed())
	// The quota is in force once the quota controller has counted it.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
		g.Expect(quota.Status.Hard).To(HaveKey(corev1.ResourceLimitsCPU))
	}).WithTimeout(framework.ClusterTimeout).Should(Succeed())

	stop := runController(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: "limited"}
	t0 := framework.Tick()
	g.Expect(k8s.Create(ctx, newCache(ns, key.Name, list("nginx:1.27", "redis:7.2")))).To(Succeed())
	c := framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Failures).To(HaveLen(2))
	for img, l := range c.Status.Failures {
		t.Logf("%s on %s: %s: %s", img, l[0].Node, l[0].Reason, l[0].Message)
		g.Expect(l).To(HaveLen(nodes), img)
		for _, f := range l {
			g.Expect(f.Reason).To(Equal("FailedCreate"), img)
			g.Expect(f.Message).To(ContainSubstring("forbidden"), img)
			g.Expect(f.Message).To(Or(ContainSubstring("must specify limits.cpu"), ContainSubstring("but no limit is specified")), img)
		}
	}
	stop()

	runController(t, func(o *commands.ControllerOptions) {
		for flag, v := range map[*cli.Quantity]string{
			&o.JobCPURequest: "10m", &o.JobCPULimit: "100m", &o.JobMemoryRequest: "16Mi", &o.JobMemoryLimit: "64Mi",
		} {
			if err := flag.Set(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.JobResources().Validate(); err != nil {
			t.Fatal(err)
		}
	})
	t1 := framework.Annotate(g, k8s, key, v1alpha2.RefreshAnnotation)
	c = framework.Final(g, k8s, key, v1alpha2.ImageCacheReasonImageCacheRefresh, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "%v", c.Status.Failures)
	g.Expect(c.Status.Failures).To(BeEmpty())
}
