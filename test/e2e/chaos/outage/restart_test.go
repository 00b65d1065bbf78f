package outage

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/e2e/chaos"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestControlPlaneRestarts restarts kube-apiserver, then etcd, while
// operations run. Every watch and request of the controller breaks at once;
// an upgrade of the control plane does that to every cluster. The
// controller must ride it out in the same process (no exit, no second
// start-up clean-up, which would abort and re-run everything) and every
// operation must still finish: Jobs created before the outage are found
// again through the re-listed informers, and those that fail to create during
// it are created on retry under the same fixed names.
func TestControlPlaneRestarts(t *testing.T) {
	e := chaos.Setup(t)
	ctx := context.Background()
	// Pulls must not run out of time while the apiserver is away, and the
	// lead must not either: with client-go's 10 s renew deadline the
	// controller stops, as it should, whenever a restart takes longer,
	// which a loaded machine's does (a loaded `make test` failed so). The
	// longer timings are what a single-API-server cluster sets
	// (--leader-election-renew-deadline); what is under test is riding
	// out the outage within them.
	p := e.StartController(t, "controller-outage", map[string]string{"image-pull-deadline-duration": "3m",
		"leader-election-lease-duration": "2m", "leader-election-renew-deadline": "90s"})
	if _, err := chaos.Preflight(ctx, p); err != nil {
		t.Fatal(err)
	}
	jobLog := e.RecordJobs(t)
	rounds := 1
	if chaos.Long() {
		rounds = 3
	}

	for _, c := range []struct {
		name    string
		restart func(context.Context) error
	}{
		{"kube-apiserver", e.SB.RestartAPIServer},
		{"etcd", e.SB.RestartEtcd},
	} {
		t.Run(c.name, func(t *testing.T) {
			for round := 0; round < rounds; round++ {
				restartDuring(t, e, p, jobLog, c.name, c.restart)
			}
		})
	}
	g := NewWithT(t)
	g.Expect(p.Exited()).To(BeFalse(), "the controller exited:\n%s", p.Tail(40))
	cleanUps := 0
	for _, l := range p.Lines() {
		if l.Msg() == "start-up clean-up done" {
			cleanUps++
		}
	}
	g.Expect(cleanUps).To(Equal(1), "the controller started over")
}

func restartDuring(t *testing.T, e *chaos.Env, p *chaos.Process, jobLog *framework.JobLog, what string, restart func(context.Context) error) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := e.Namespace(t, "outage")
	events, unsubscribe := jobLog.Subscribe()
	defer unsubscribe()

	var keys []client.ObjectKey
	for i := 0; i < 3; i++ {
		var imgs []string
		for j := 0; j < 3; j++ {
			imgs = append(imgs, fmt.Sprintf("example.test/outage/%s-c%d-%d:v1", what, i, j))
		}
		ic := chaos.NewCache(ns, fmt.Sprintf("c%d", i), imgs)
		g.Expect(e.Client.Create(ctx, ic)).To(Succeed())
		keys = append(keys, client.ObjectKeyFromObject(ic))
	}
	// Restart once the first Jobs exist and the rest are still to come: 27
	// pulls at three per node take several rounds.
	created := 0
	timeout := time.After(framework.ClusterTimeout)
	for created < 4 {
		select {
		case ev := <-events:
			if ev.Type == watch.Added && ev.Job.Namespace == ns {
				created++
			}
		case <-timeout:
			t.Fatalf("only %d Jobs created in %s", created, framework.ClusterTimeout)
		}
	}
	starts := map[client.ObjectKey]time.Time{}
	for _, k := range keys {
		ic := &v1alpha2.ImageCache{}
		g.Expect(e.Client.Get(ctx, k, ic)).To(Succeed())
		if ic.Status.StartTime != nil {
			starts[k] = ic.Status.StartTime.Time
		}
	}
	begin := time.Now()
	g.Expect(restart(ctx)).To(Succeed())
	down := time.Since(begin)

	retried, unstarted := 0, 0
	for _, k := range keys {
		ic := e.WaitFinal(t, k, "", 3*time.Minute)
		st := ic.Status
		g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "%s: %s %q %v", k, st.Status, st.Message, st.Failures)
		g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate))
		g.Expect(st.Counts.Succeeded).To(Equal(st.Counts.Desired))
		switch s, ok := starts[k]; {
		case !ok:
			unstarted++
		case !s.Equal(st.StartTime.Time):
			retried++
		}
	}
	var mine []framework.JobRecord
	for _, r := range jobLog.Records() {
		if r.Namespace == ns {
			mine = append(mine, r)
		}
	}
	g.Expect(chaos.Duplicates(mine)).To(BeEmpty())
	live, err := e.LiveJobs(ctx, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(live).To(BeEmpty(), "labelled Jobs left after the operations finished")
	g.Expect(p.Exited()).To(BeFalse(), "the controller exited:\n%s", p.Tail(40))
	t.Logf("FIGURES restart %s: restart-took=%s caches=%d jobs=%d jobs-before-restart=%d operations-retried=%d not-started-before=%d",
		what, down.Round(time.Millisecond), len(keys), len(mine), created, retried, unstarted)
}
