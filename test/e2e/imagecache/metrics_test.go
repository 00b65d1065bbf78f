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

// TestMetrics scrapes the controller's metrics endpoint around one operation
// and checks the figures against what happened: 3 nodes x (2 good + 1 failing
// image) = 9 pull Jobs (or 3 node Jobs), 6 pulls succeeded, 3 failed at once.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	addr := framework.FreeAddr(t)
	// No cap binds: a node's Job then pulls all three images.
	runController(t, func(o *commands.ControllerOptions) {
		o.MetricsAddr, o.SecureMetrics = addr, false
		o.MaxJobsPerNode.Value = 3
	})
	var before map[string]float64
	g.Eventually(func(g Gomega) { before = framework.Scrape(g, addr) }).WithTimeout(framework.ClusterTimeout).Should(Succeed())

	t0 := framework.Tick()
	bad := sandbox.FailPrefix + "metrics:1"
	g.Expect(k8s.Create(context.Background(), newCache(ns, "measured", list("traefik:3.1", "haproxy:3.0", bad)))).To(Succeed())
	framework.Final(g, k8s, client.ObjectKey{Namespace: ns, Name: "measured"}, v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
	// The final status is written before the operation's duration is
	// observed (a failed write is retried and must not count twice): the
	// scrape waits for that last figure, and every other was counted before.
	var after map[string]float64
	delta := func(name string) float64 { return after[name] - before[name] }
	g.Eventually(func(g Gomega) {
		after = framework.Scrape(g, addr)
		g.Expect(delta(`kubefledged_operation_duration_seconds_count{operation="ImageCacheCreate",result="Failed"}`)).To(Equal(1.0))
		// Counted from the informer's copy, which follows the write.
		g.Expect(after[`kubefledged_imagecaches{status="Failed"}`]).To(BeNumerically(">=", 1))
	}).WithTimeout(framework.ClusterTimeout).Should(Succeed())

	if perNode() {
		// A node's Job is failed by its image that cannot be pulled, as
		// soon as the kubelet says so.
		g.Expect(delta(`kubefledged_jobs_created_total{kind="pull"}`)).To(Equal(float64(nodes)))
		g.Expect(delta(`kubefledged_jobs_finished_total{kind="pull",result="failed"}`)).To(Equal(float64(nodes)))
	} else {
		g.Expect(delta(`kubefledged_jobs_created_total{kind="pull"}`)).To(Equal(float64(3 * nodes)))
		g.Expect(delta(`kubefledged_jobs_finished_total{kind="pull",result="succeeded"}`)).To(Equal(float64(2 * nodes)))
		// A Job per (image, node) too is failed at once by its pod:
		// a missing image cannot heal, so nothing waits for the deadline.
		g.Expect(delta(`kubefledged_jobs_finished_total{kind="pull",result="failed"}`)).To(Equal(float64(nodes)))
	}
	g.Expect(delta(`kubefledged_image_pulls_total{result="succeeded"}`)).To(Equal(float64(2 * nodes)))
	g.Expect(delta(`kubefledged_image_pulls_total{result="failed"}`)).To(Equal(float64(nodes)))
	g.Expect(after[`kubefledged_jobs_in_flight`]).To(BeZero())
	// controller-runtime's own metrics are served too.
	g.Expect(after).To(HaveKey(`controller_runtime_reconcile_total{controller="imagecache",result="success"}`))
}
