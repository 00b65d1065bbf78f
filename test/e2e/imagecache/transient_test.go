package imagecache_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestTransientPullErrorsRetried: a registry that answers 429 to the first
// attempts (FlakyPrefix: ErrImagePull, then ImagePullBackOff, then pulled)
// fails nothing, since the kubelet's next attempt pulls within the deadline;
// an image that does not exist still fails at once. The pull deadline here
// is longer than the test waits, so only a failure before the deadline ends
// the second cache in time.
func TestTransientPullErrorsRetried(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	runController(t, func(o *commands.ControllerOptions) { o.Deadline.Value = 3 * opTimeout })
	flaky, bad := sandbox.FlakyPrefix+"busy:1", sandbox.FailPrefix+"gone:1"

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "flaky", list("nginx:1.21", flaky)))).To(Succeed())
	c := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "flaky"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Failures).To(BeEmpty())
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	g.Expect(c.Status.Counts.Succeeded).To(Equal(int32(2 * nodes)))

	t0 = framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "missing", list(bad)))).To(Succeed())
	c = framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "missing"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect(c.Status.Failures[bad]).To(HaveLen(nodes))
	for _, f := range c.Status.Failures[bad] {
		g.Expect(f.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
		g.Expect(f.Message).To(ContainSubstring("not found"))
	}
}
