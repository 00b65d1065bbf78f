package imagecache_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// TestKubectlColumns reads two caches as users do, with `kubectl get ic`:
// READY is their Ready condition, one True and one False, and `-o wide`
// adds the pairs held pinned (empty: these caches do not pin) and the
// condition's message, which says what failed. test/golden holds
// the CRD's columns; this checks what kubectl makes of them.
func TestKubectlColumns(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	runController(t, nil)

	t0 := framework.Tick()
	g.Expect(k8s.Create(context.Background(), newCache(ns, "good", list("nginx:1.27")))).To(Succeed())
	g.Expect(k8s.Create(context.Background(), newCache(ns, "bad", list(sandbox.FailPrefix+"columns:1")))).To(Succeed())
	good := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "good"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	bad := framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "bad"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	badReady := meta.FindStatusCondition(bad.Status.Conditions, v1alpha2.ConditionReady)
	g.Expect(badReady).NotTo(BeNil())
	g.Expect(badReady.Message).NotTo(BeEmpty())
	g.Expect(meta.IsStatusConditionTrue(good.Status.Conditions, v1alpha2.ConditionReady)).To(BeTrue())

	out, ok := framework.Kubectl(t, "-n", ns, "get", "ic")
	if !ok {
		return
	}
	t.Logf("kubectl get ic:\n%s", out)
	g.Expect(out).To(MatchRegexp(`(?m)^NAME\s+READY\s+STATUS\s+REASON\s+PROGRESS\s+AGE$`))
	g.Expect(out).To(MatchRegexp(`(?m)^good\s+True\s+Succeeded\s+ImageCacheCreate\s+\S+\s+\S+$`))
	g.Expect(out).To(MatchRegexp(`(?m)^bad\s+False\s+Failed\s+ImageCacheCreate\s+\S+\s+\S+$`))
	g.Expect(out).NotTo(ContainSubstring(badReady.Message))

	wide, _ := framework.Kubectl(t, "-n", ns, "get", "ic", "-o", "wide")
	t.Logf("kubectl get ic -o wide:\n%s", wide)
	g.Expect(wide).To(MatchRegexp(`(?m)^NAME\s+READY\s+STATUS\s+REASON\s+PROGRESS\s+AGE\s+PINNED\s+MESSAGE$`))
	g.Expect(wide).To(MatchRegexp(`(?m)^bad\s+False\s+Failed\s+ImageCacheCreate\s+\S+\s+\S+\s+` + regexp.QuoteMeta(firstLine(badReady.Message))))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
