package imagecache

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

var jobsResource = schema.GroupResource{Group: "batch", Resource: "jobs"}

// quotaExceeded is the API server's answer to a Job over a ResourceQuota.
func quotaExceeded(obj client.Object) error {
	return apierrors.NewForbidden(jobsResource, obj.GetName(),
		errors.New("exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=10, limited: count/jobs.batch=10"))
}

func serverTimeout(client.Object) error { return apierrors.NewServerTimeout(jobsResource, "create", 1) }

func tooManyRequests(client.Object) error {
	return apierrors.NewTooManyRequests("the server has received too many requests and has asked us to try again later", 1)
}

// of limits a fault to the objects of one cache.
func of(cache string, err func(client.Object) error) func(client.Object) error {
	return func(obj client.Object) error {
		if obj.GetLabels()[jobs.LabelImageCache] != cache {
			return nil
		}
		return err(obj)
	}
}

// A Job create refused for good fails its (image, node) with the API's own
// words and ends the operation; an error that may pass is retried with
// backoff, and only until the pull deadline: the operation always ends.
func TestJobCreateErrors(t *testing.T) {
	const img = "nginx:1.25"
	pulling := "Normal ImageCacheCreate " + v1alpha2.ImageCacheMessagePullingImages
	failed := outcome{v1alpha2.ImageCacheActionStatusFailed, v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages}
	succeeded := outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagesPulledSuccessfully}
	tests := []struct {
		name  string
		fault fault
		want  outcome
		// failure is the pair's failure, given the last error of its
		// creates; nil: none.
		failure func(err error) *v1alpha2.NodeReasonMessage
		// attempts are the reasons the creates were answered with, "" for
		// success; nil: not checked.
		attempts []string
		// events after the Processing one, given the last create error.
		events func(err error) []string
		// took bounds the fake time the operation took.
		took [2]time.Duration
	}{{
		name:  "refused for good: the quota is exceeded",
		fault: fault{verb: "create", resource: "jobs", err: quotaExceeded},
		want:  failed,
		failure: func(err error) *v1alpha2.NodeReasonMessage {
			return &v1alpha2.NodeReasonMessage{Node: "a", Reason: "Forbidden", Message: "the API server refused the Job: " + err.Error()}
		},
		attempts: []string{"Forbidden"},
		events: func(err error) []string {
			return []string{
				fmt.Sprintf("Warning JobCreateRefused 1 Job(s) refused by the API server, their images fail on their nodes: %v", err),
				"Warning ImageCacheCreate " + v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			}
		},
	}, {
		name:     "a server timeout passes",
		fault:    fault{verb: "create", resource: "jobs", n: 1, err: serverTimeout},
		want:     succeeded,
		attempts: []string{"ServerTimeout", ""},
		events: func(error) []string {
			return []string{"Normal ImageCacheCreate " + v1alpha2.ImageCacheMessageImagesPulledSuccessfully}
		},
		took: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
	}, {
		name:     "throttling passes",
		fault:    fault{verb: "create", resource: "jobs", n: 1, err: tooManyRequests},
		want:     succeeded,
		attempts: []string{"TooManyRequests", ""},
		events: func(error) []string {
			return []string{"Normal ImageCacheCreate " + v1alpha2.ImageCacheMessageImagesPulledSuccessfully}
		},
		took: [2]time.Duration{500 * time.Millisecond, 2 * time.Second},
	}, {
		name:  "a server timeout that outlasts the pull deadline fails the pair",
		fault: fault{verb: "create", resource: "jobs", err: serverTimeout},
		want:  failed,
		failure: func(err error) *v1alpha2.NodeReasonMessage {
			return &v1alpha2.NodeReasonMessage{Node: "a", Reason: "ServerTimeout",
				Message: "creating the Job failed for 1m0s, the pull deadline: " + err.Error()}
		},
		events: func(err error) []string {
			return []string{
				fmt.Sprintf("Warning JobCreateFailed 1 Job(s) could not be created within the pull deadline, their images fail on their nodes: %v", err),
				"Warning ImageCacheCreate " + v1alpha2.ImageCacheMessageImagePullFailedForSomeImages,
			}
		},
		took: [2]time.Duration{time.Minute, time.Minute + 2*time.Second},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, Deadline: time.Minute}, node("a"), imageCache("c", img))
			h.inject(tt.fault)

			h.runToEnd("c", 200, func() bool { return h.completeAll("c") })

			creates := h.writesOf("create", "jobs")
			g.Expect(creates).NotTo(BeEmpty())
			last := creates[len(creates)-1].Err
			if tt.attempts != nil {
				var got []string
				for _, a := range creates {
					got = append(got, string(apierrors.ReasonForError(a.Err)))
				}
				g.Expect(got).To(Equal(tt.attempts))
			}
			st := h.status("c")
			g.Expect(outcomeOf(st)).To(Equal(tt.want))
			if tt.failure == nil {
				g.Expect(st.Failures).To(BeEmpty())
			} else {
				g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{img: {*tt.failure(last)}}))
			}
			g.Expect(h.events()).To(Equal(append([]string{pulling}, tt.events(last)...)))
			took := h.clock.Since(epoch)
			g.Expect(took).To(BeNumerically(">=", tt.took[0]))
			g.Expect(took).To(BeNumerically("<=", tt.took[1]))
			g.Expect(h.r.limiter.InFlight()).To(BeZero(), "no slot is left held")
		})
	}
}

// A refused create frees its pacing slot at once, not when its operation
// ends: held for a Job that will never exist, it would keep every other
// cache's Jobs off the node while the rest of the operation runs. With one
// Job per node, c1's create on a is refused while its Job on b runs; c2,
// on a only, gets its Job whether it asked before the refusal (and is woken
// by it) or after.
func TestRefusedCreateFreesItsSlot(t *testing.T) {
	const img = "nginx:1.25"
	onA := func(err func(client.Object) error) func(client.Object) error {
		return of("c1", func(obj client.Object) error {
			if obj.GetAnnotations()[jobs.AnnotationNode] != "a" {
				return nil
			}
			return err(obj)
		})
	}
	tests := []struct {
		name string
		// faults on c1's create on a, in the order they answer.
		faults []fault
		// c2AsksFirst has c2 ask for its slot while c1's create on a is
		// being retried, holding the node's only slot.
		c2AsksFirst bool
	}{
		{name: "the second cache asks after the refusal",
			faults: []fault{{verb: "create", resource: "jobs", err: onA(quotaExceeded)}}},
		{name: "the second cache waits for the slot when the create is refused",
			faults: []fault{
				{verb: "create", resource: "jobs", n: 1, err: onA(serverTimeout)},
				{verb: "create", resource: "jobs", err: onA(quotaExceeded)},
			},
			c2AsksFirst: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c2 := imageCache("c2", img)
			c2.Spec.CacheSpec[0].NodeSelector = map[string]string{corev1.LabelHostname: "a"}
			h := newHarness(t, Config{Granularity: jobs.PerImage, MaxJobsPerNode: 1}, node("a"), node("b"), imageCache("c1", img), c2)
			for _, f := range tt.faults {
				h.inject(f)
			}

			res, err := h.step("c1")
			g.Expect(err).NotTo(HaveOccurred())
			if tt.c2AsksFirst {
				h.settleDown("c2")
				g.Expect(h.jobs("c2")).To(BeEmpty(), "c2 waits for the node's slot")
				g.Expect(h.status("c2").Counts.Waiting).To(Equal(int32(1)))
				h.advance(res.RequeueAfter)
				h.settleDown("c1")
				g.Expect(h.woken()).To(ContainElement("c2"), "the freed slot wakes the cache waiting for it")
			}
			h.settleDown("c2")
			h.advance(time.Second) // past the progress writes' interval
			h.settleDown("c2")

			g.Expect(h.running("c1")).To(BeTrue(), "c1's Job on b still runs")
			g.Expect(h.jobs("c2")).To(HaveLen(1), "c2 got the slot")
			g.Expect(h.status("c2").Counts.InFlight).To(Equal(int32(1)))
			h.complete("c1", img, "b")
			h.settleDown("c1")
			g.Expect(outcomeOf(h.status("c1"))).To(Equal(outcome{v1alpha2.ImageCacheActionStatusFailed,
				v1alpha2.ImageCacheReasonImageCacheCreate, v1alpha2.ImageCacheMessageImagePullFailedForSomeImages}))
			g.Expect(h.status("c1").Failures[img]).To(HaveExactElements(
				And(HaveField("Node", "a"), HaveField("Reason", "Forbidden"))))
		})
	}
}

// A take with no slot left reads one run of the pending pairs, not all of
// them: laying out every waiting pair at every settle while the window let
// one Job through was, with its garbage, most of the controller's CPU in
// benchmark scenario 1's profile (1000 nodes). What a take allocates stands for the work it reads, figures no
// slower machine changes: with 3000 nodes waiting it is what it is with
// 600 (before, five times as much).
func TestTakeWithNoSlotReadsOneRun(t *testing.T) {
	imgs := []string{"registry.example/a:1", "registry.example/b:1", "registry.example/c:1", "registry.example/d:1", "registry.example/e:1"}
	for _, tc := range []struct {
		name        string
		granularity jobs.Granularity
	}{
		{"node Jobs", jobs.PerNode},
		{"a Job per (image, node)", jobs.PerImage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			cost := func(nodes int) (allocs, bytes float64) {
				objs := []client.Object{imageCache("c", imgs...)}
				for i := range nodes {
					objs = append(objs, node(fmt.Sprintf("n%05d", i)))
				}
				h := newHarness(t, Config{Granularity: tc.granularity, MaxJobs: 10}, objs...)
				h.settleDown("c")
				g.Expect(h.jobs("c")).To(HaveLen(10), "the cap's worth of Jobs")
				op, cache := h.r.ops.get(h.req("c").NamespacedName), h.cache("c")
				take := func() {
					todo, waiting := h.r.take(cache, op)
					g.Expect(todo).To(BeEmpty())
					g.Expect(waiting).To(BeTrue())
				}
				const runs = 5
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				for range runs {
					take()
				}
				goruntime.ReadMemStats(&after)
				return testing.AllocsPerRun(runs, take), float64(after.TotalAlloc-before.TotalAlloc) / runs
			}
			fewAllocs, fewBytes := cost(600)
			manyAllocs, manyBytes := cost(3000)
			t.Logf("a take with 600 nodes waiting: %.0f allocations, %.0f bytes; with 3000: %.0f, %.0f", fewAllocs, fewBytes, manyAllocs, manyBytes)
			g.Expect(manyAllocs).To(BeNumerically("<", 1.2*fewAllocs+10), "allocations")
			g.Expect(manyBytes).To(BeNumerically("<", 1.2*fewBytes+4096), "bytes allocated")
		})
	}
}
