package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// What happens to a cache during the kill run, and so what it must end as.
type role int

const (
	plain   role = iota // created once: Succeeded, ImageCacheCreate
	updated             // an image added midway: Succeeded, spec processed
	refresh             // refresh asked once it finished: Succeeded, ImageCacheRefresh
	failing             // one image never pulls: Failed, that image on every node
	purged              // purge asked once it finished: Succeeded, ImageCachePurge
	roles
	// busy is refreshed whenever every cache has finished, so that each
	// restart finds an operation to cut short: without it, a run whose
	// operations all finish early (a fast machine) spends its remaining
	// restarts on an idle controller and proves nothing more.
	busy = roles
)

func (r role) String() string {
	return [...]string{"plain", "updated", "refresh", "failing", "purged", "busy"}[r]
}

type killCache struct {
	key     client.ObjectKey
	role    role
	images  []string
	bad     string // the image that never pulls (failing)
	applied bool   // the mid-run change was made
	after   int    // ... not before this kill
}

// Kill points: each restart's process is killed at one of these moments of
// its life, chosen at random, so that over a run the kills land in the
// start-up clean-up, the creation of Jobs, their settling and the finish.
var killPoints = []string{"startup", "jobs-created", "job-finished", "jobs-deleted", "running"}

// TestControllerKilled SIGKILLs the controller process again and again while
// several caches run their operations, restarting it each time. The contract
// under test is the original's: a restart aborts what ran and runs it again,
// after a clean-up that leaves none of the dead process's Jobs. So every
// cache must still end in the status its spec calls for, no Job may ever be
// created twice for the same work of an operation, and no labelled Job may
// outlive a finished operation (retention policy delete).
// killFlags give every pull far longer than it takes: no image of this test
// hangs, so a Job still running at the chaos suite's 6 s deadline is only a
// loaded machine's slow Job controller, scheduler or kwok (a loaded
// `make test` failed the busy cache that way), never what is under test.
var killFlags = map[string]string{"image-pull-deadline-duration": "2m"}

func TestControllerKilled(t *testing.T) {
	e := Setup(t)
	g := NewWithT(t)
	kills, perRole := 10, 1
	if Long() {
		kills, perRole = 40, 3
	}
	rng := Rand(t)

	ns := e.Namespace(t, "kill")
	jobLog := e.RecordJobs(t)
	ctx := context.Background()

	var caches []*killCache
	for i := 0; i < perRole*int(roles); i++ {
		r := role(i % int(roles))
		c := &killCache{key: client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("c%02d-%s", i, r)}, role: r}
		for j := 0; j < 3; j++ {
			c.images = append(c.images, fmt.Sprintf("example.test/kill/c%02d-%d:v1", i, j))
		}
		switch r {
		case failing:
			c.bad = sandbox.FailPrefix + fmt.Sprintf("kill/c%02d:v1", i)
			c.images = append(c.images[:2], c.bad)
		case updated:
			c.after = 2
		case refresh:
			c.after = kills / 3
		case purged:
			c.after = kills / 2
		}
		g.Expect(e.Client.Create(ctx, NewCache(ns, c.key.Name, c.images))).To(Succeed())
		caches = append(caches, c)
	}
	spare := &killCache{key: client.ObjectKey{Namespace: ns, Name: "busy"}, role: busy, applied: true,
		images: []string{"example.test/kill/busy-0:v1", "example.test/kill/busy-1:v1", "example.test/kill/busy-2:v1"}}
	g.Expect(e.Client.Create(ctx, NewCache(ns, spare.key.Name, spare.images))).To(Succeed())
	caches = append(caches, spare)

	dead := map[string]bool{} // operations of processes already killed
	points := map[string]int{}
	timeouts, cleanChecks, midOp, interrupted := 0, 0, 0, 0
	var recoveries []time.Duration
	// Kills are counted only when they cut running operations short; a
	// kill before the first operation of a process (some "startup" ones)
	// tests the restart path but not the contract, so more are made.
	var order []string
	k := 0
	for ; midOp < kills && k < 3*kills; k++ {
		if len(order) == 0 {
			order = append([]string{}, killPoints...)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		point := order[0]
		order = order[1:]
		if idle(t, e, caches) {
			keepBusy(t, e, spare)
		}
		p := e.StartController(t, fmt.Sprintf("controller-kill-%02d", k), killFlags)
		events, unsubscribe := jobLog.Subscribe()
		checked := make(chan error, 1)
		preflightCtx, stopWaiting := context.WithCancel(ctx)
		go func() { checked <- checkCleanedUp(preflightCtx, e, p, ns, dead) }()

		points[point]++
		if !waitKillPoint(p, point, rng, events, dead) {
			timeouts++
		}
		p.Kill()
		if running := runningOps(p); running > 0 {
			midOp++
			interrupted += running
		}
		unsubscribe()
		stopWaiting()
		if err := <-checked; err == nil {
			cleanChecks++
			recoveries = append(recoveries, preflightTime(p))
		} else if !strings.Contains(err.Error(), "no awaited line") && !strings.Contains(err.Error(), "exited") {
			t.Errorf("after restart %d: %v", k, err)
		}
		for _, o := range Operations(p) {
			dead[o.ID] = true
		}
		for _, c := range caches {
			if !c.applied && midOp >= c.after && c.role != plain && c.role != failing {
				c.applied = mutate(t, e, c, false)
			}
		}
	}

	// The last process is left alone: everything must now converge.
	final := e.StartController(t, "controller-kill-final", killFlags)
	if err := checkCleanedUp(ctx, e, final, ns, dead); err != nil {
		t.Errorf("after the last restart: %v", err)
	} else {
		cleanChecks++
		recoveries = append(recoveries, preflightTime(final))
	}
	for _, c := range caches {
		if c.role != plain && c.role != failing && !c.applied {
			e.WaitFinal(t, c.key, "", 3*time.Minute)
			c.applied = mutate(t, e, c, true)
		}
	}
	for _, c := range caches {
		expectEnd(t, e, c)
	}

	live, err := e.LiveJobs(ctx, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(live)).To(BeEmpty(), "labelled Jobs left after every operation finished (retention policy delete)")
	records := jobLog.Records()
	var mine []framework.JobRecord
	for _, r := range records {
		if r.Namespace == ns {
			mine = append(mine, r)
		}
	}
	g.Expect(Duplicates(mine)).To(BeEmpty(), "Jobs created twice for the same work of one operation")
	for _, o := range Operations(final) {
		dead[o.ID] = true
	}
	for _, r := range mine {
		g.Expect(dead).To(HaveKey(r.Op), "Job %s belongs to no operation any controller logged", r.Name)
	}
	g.Expect(cleanChecks).To(BeNumerically(">=", 1), "no restart lived long enough to finish its clean-up")

	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	g.Expect(midOp).To(BeNumerically(">=", kills), "too few kills landed in running operations")
	t.Logf("FIGURES kill: kills=%d mid-operation=%d operations-interrupted=%d caches=%d jobs=%d operations=%d kill-points=%v waits-timed-out=%d clean-up-checks=%d clean-up-after-start(median/max)=%s/%s",
		k, midOp, interrupted, len(caches), len(mine), len(dead), points, timeouts, cleanChecks,
		recoveries[len(recoveries)/2].Round(time.Millisecond), recoveries[len(recoveries)-1].Round(time.Millisecond))
}

// runningOps counts the operations a dead process started and never
// finished.
func runningOps(p *Process) int {
	open := map[string]bool{}
	for _, l := range p.Lines() {
		switch l.Msg() {
		case "operation started":
			open[l.Str("id")] = true
		case "operation finished":
			delete(open, l.Str("id"))
		}
	}
	return len(open)
}

// idle reports whether every cache has finished, so that a controller
// started now would have no operation to be killed in.
func idle(t *testing.T, e *Env, caches []*killCache) bool {
	t.Helper()
	for _, c := range caches {
		ic := &v1alpha2.ImageCache{}
		if err := e.Client.Get(context.Background(), c.key, ic); err != nil {
			t.Fatal(err)
		}
		if !Final(ic.Status.Status) || ic.Generation != ic.Status.ObservedGeneration ||
			hasKey(ic.Annotations, v1alpha2.RefreshAnnotation) ||
			hasKey(ic.Annotations, v1alpha2.PurgeAnnotation) {
			return false
		}
	}
	return true
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// keepBusy asks for a refresh of the busy cache; a write that meets the
// controller's own is simply left for the next restart.
func keepBusy(t *testing.T, e *Env, c *killCache) {
	t.Helper()
	ic := &v1alpha2.ImageCache{}
	if err := e.Client.Get(context.Background(), c.key, ic); err != nil {
		t.Fatal(err)
	}
	if ic.Annotations == nil {
		ic.Annotations = map[string]string{}
	}
	ic.Annotations[v1alpha2.RefreshAnnotation] = ""
	if err := e.Client.Update(context.Background(), ic); err != nil {
		t.Logf("asking %s for a refresh: %v", c.key, err)
	}
}

// waitKillPoint waits for the chosen moment of a process's life. It reports
// false when the moment did not come in time (the process is killed anyway).
func waitKillPoint(p *Process, point string, rng *rand.Rand, events <-chan framework.JobEvent, dead map[string]bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	// Jobs of dead processes are deleted by this one's clean-up: only its
	// own Jobs count.
	ours := func(ev framework.JobEvent) bool { return !dead[ev.Job.Labels[jobs.LabelOperation]] }
	// count waits for n units of what happens to the process's Jobs, each
	// event weighing what weight says (0: not counted).
	count := func(n int, weight func(framework.JobEvent) int) bool {
		for {
			select {
			case ev := <-events:
				if ours(ev) {
					if n -= weight(ev); n <= 0 {
						return true
					}
				}
			case <-p.Done():
				return false
			case <-ctx.Done():
				return false
			}
		}
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-time.After(d):
			return true
		case <-p.Done():
			return false
		}
	}
	switch point {
	case "startup":
		return sleep(time.Duration(rng.Intn(2000)) * time.Millisecond)
	case "jobs-created":
		// Pulls, not Jobs: a node's pull Job holds several, and an
		// operation makes a third as many Jobs as with a Job per (image,
		// node), often fewer than 12, and the wait would outlast it.
		return count(1+rng.Intn(12), func(ev framework.JobEvent) int {
			if ev.Type == watch.Added {
				return len(jobs.ImagesOf(&ev.Job))
			}
			return 0
		})
	case "job-finished":
		// A Job whose work all has a result: it finished, or (a node's
		// pull Job, under delete) the controller deleted it once every
		// container had a result, often before kcm marked it finished.
		settled := map[types.UID]bool{}
		return count(1+rng.Intn(4), func(ev framework.JobEvent) int {
			if (framework.JobOutcome(&ev.Job) != "" || ev.Type == watch.Deleted) && !settled[ev.Job.UID] {
				settled[ev.Job.UID] = true
				return 1
			}
			return 0
		})
	case "jobs-deleted":
		return count(1, func(ev framework.JobEvent) int {
			if ev.Type == watch.Deleted {
				return 1
			}
			return 0
		})
	default:
		if _, err := Preflight(ctx, p); err != nil {
			return false
		}
		return sleep(time.Duration(500+rng.Intn(3500)) * time.Millisecond)
	}
}

// checkCleanedUp waits for a process's start-up clean-up and checks, at
// once, that no Job of a dead process is left in ns.
func checkCleanedUp(ctx context.Context, e *Env, p *Process, ns string, dead map[string]bool) error {
	if _, err := Preflight(ctx, p); err != nil {
		return err
	}
	live, err := e.LiveJobs(context.Background(), ns)
	if err != nil {
		return err
	}
	var left []string
	for _, j := range live {
		if dead[j.Labels["kubefledged.io/operation"]] {
			left = append(left, j.Name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("%d Jobs of killed processes outlived the clean-up: %v", len(left), left)
	}
	return nil
}

// preflightTime is how long after its start a process finished its clean-up.
func preflightTime(p *Process) time.Duration {
	for _, l := range p.Lines() {
		if l.Msg() == "start-up clean-up done" {
			return l.At.Sub(p.Started)
		}
	}
	return 0
}

// mutate makes a cache's mid-run change between its operations, so that
// each change is one operation the run can account for (edits made while
// Processing are admitted and queued, which TestSpecEditDuringOperation in
// e2e/imagecache covers). It reports whether it was made.
func mutate(t *testing.T, e *Env, c *killCache, must bool) bool {
	t.Helper()
	ctx := context.Background()
	ic := &v1alpha2.ImageCache{}
	if err := e.Client.Get(ctx, c.key, ic); err != nil {
		t.Fatal(err)
	}
	st := ic.Status.Status
	switch c.role {
	case updated:
		if st == v1alpha2.ImageCacheActionStatusProcessing {
			return false
		}
		ic.Spec.CacheSpec[0].Images = append(ic.Spec.CacheSpec[0].Images, c.images[0]+"-added")
		c.images = ic.Spec.CacheSpec[0].Images
	case refresh, purged:
		if !Final(st) {
			if must {
				t.Fatalf("%s is %q, not finished: cannot ask for %s", c.key, st, c.role)
			}
			return false
		}
		if ic.Annotations == nil {
			ic.Annotations = map[string]string{}
		}
		if c.role == refresh {
			ic.Annotations[v1alpha2.RefreshAnnotation] = ""
		} else {
			ic.Annotations[v1alpha2.PurgeAnnotation] = ""
		}
	}
	if err := e.Client.Update(ctx, ic); err != nil {
		if must {
			t.Fatalf("changing %s: %v", c.key, err)
		}
		return false // a write of the controller came between: next time
	}
	return true
}

// expectEnd checks a cache's final state against its role.
func expectEnd(t *testing.T, e *Env, c *killCache) {
	t.Helper()
	var ic *v1alpha2.ImageCache
	switch c.role {
	case refresh:
		ic = e.WaitFinal(t, c.key, v1alpha2.ImageCacheReasonImageCacheRefresh, 3*time.Minute)
	case purged:
		ic = e.WaitFinal(t, c.key, v1alpha2.ImageCacheReasonImageCachePurge, 3*time.Minute)
	default:
		ic = e.WaitFinal(t, c.key, "", 3*time.Minute)
		// An update arriving before the create ever finished is folded
		// into a re-run create.
		if c.role == updated && ic.Generation != ic.Status.ObservedGeneration {
			ic = e.WaitFinal(t, c.key, v1alpha2.ImageCacheReasonImageCacheUpdate, 3*time.Minute)
		}
	}
	g := NewWithT(t)
	st := ic.Status
	what := fmt.Sprintf("%s (%s): %s/%s %q failures=%v", c.key.Name, c.role, st.Status, st.Reason, st.Message, st.Failures)
	g.Expect(ic.Annotations).NotTo(HaveKey(v1alpha2.RefreshAnnotation), what)
	g.Expect(ic.Annotations).NotTo(HaveKey(v1alpha2.PurgeAnnotation), what)
	g.Expect(st.Counts).NotTo(BeNil(), what)
	g.Expect(st.Counts.InFlight).To(BeZero(), what)
	g.Expect(st.Counts.Waiting).To(BeZero(), what)
	switch c.role {
	case failing:
		g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed), what)
		g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate), what)
		g.Expect(st.Failures).To(HaveLen(1), what)
		g.Expect(st.Failures).To(HaveKey(c.bad), what)
		g.Expect(st.Failures[c.bad]).To(HaveLen(3), what)
		for _, f := range st.Failures[c.bad] {
			g.Expect(f.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"), what)
		}
		return
	case purged:
		g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), what)
		g.Expect(st.ProcessedSpec).To(BeNil(), what)
		return
	case plain:
		g.Expect(st.Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheCreate), what)
	case updated:
		g.Expect(st.Reason).To(BeElementOf(v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheReasonImageCacheUpdate), what)
	case busy:
		g.Expect(st.Reason).To(BeElementOf(v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheReasonImageCacheRefresh), what)
	}
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), what)
	g.Expect(st.Failures).To(BeEmpty(), what)
	g.Expect(st.ObservedGeneration).To(Equal(ic.Generation), what)
	g.Expect(st.ProcessedSpec).NotTo(BeNil(), what)
	g.Expect(st.ProcessedSpec.CacheSpec[0].Images).To(Equal(c.images), what)
	g.Expect(st.Counts.Succeeded+st.Counts.AlreadyPresent).To(Equal(st.Counts.Desired), what)
}

func names(l []batchv1.Job) []string {
	var out []string
	for _, j := range l {
		out = append(out, j.Name)
	}
	return out
}
