package imagecache

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// byOriginal returns a cache as the original kube-fledged left it: its six
// status fields and no more, and a generation moved by its status writes
// (its CRD had no status subresource), which no edit made.
func byOriginal(name, reason string, images ...string) *v1alpha2.ImageCache {
	c := imageCache(name, images...)
	c.Generation = 3
	then := metav1.NewTime(epoch.Add(-30 * time.Minute)) // after the nodes joined
	c.Status = v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusSucceeded, Reason: reason,
		Message: v1alpha2.ImageCacheMessageImagesPulledSuccessfully, StartTime: &then, CompletionTime: &then}
	return c
}

// With the periodic refresh on, a cache the original left is taken over by
// the refresh at start-up, as the original's own start-up did: not by an
// update, which its generation would otherwise suggest.
func TestOriginalCacheRefreshedAtStartUp(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, RefreshEvery: 15 * time.Minute}, byOriginal("c", v1alpha2.ImageCacheReasonImageCacheCreate, "nginx:1.25", "redis:7.2"))
	h.addNode(node("a", holding("docker.io/library/nginx:1.25"), holding("docker.io/library/redis:7.2")))
	h.settleDown("c")

	st := h.status("c")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheRefresh,
		v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
	g.Expect(st.ObservedGeneration).To(BeEquivalentTo(3))
	g.Expect(h.writesOf("create", "jobs")).To(BeEmpty())
}

// With the periodic refresh off, nothing runs, as with the original; the
// cache is adopted with one status write, so that an edit afterwards runs as
// an update of what the edit changed.
func TestOriginalCacheAdoptedWithoutRefresh(t *testing.T) {
	g := NewWithT(t)
	orig := byOriginal("c", v1alpha2.ImageCacheReasonImageCacheCreate, "nginx:1.25", "redis:7.2")
	h := newHarness(t, Config{Granularity: jobs.PerImage}, orig)
	h.addNode(node("a", holding("docker.io/library/nginx:1.25"), holding("docker.io/library/redis:7.2")))
	h.settleDown("c")

	g.Expect(h.writes()).To(HaveLen(1))
	g.Expect(h.writes()[0].String()).To(Equal("update imagecaches/status/c"))
	st := h.status("c")
	g.Expect(outcomeOf(st)).To(Equal(outcomeOf(orig.Status)), "the original's status is kept")
	g.Expect(st.StartTime.Time).To(BeTemporally("==", orig.Status.StartTime.Time))
	g.Expect(st.ObservedGeneration).To(BeEquivalentTo(3))
	g.Expect(st.ProcessedSpec).To(Equal(&orig.Spec))

	h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = []string{"nginx:1.25", "busybox:1.36"} })
	h.settleDown("c")
	g.Expect(h.newJobs("c", map[string]bool{})).To(ConsistOf("pull busybox:1.36 a", "delete redis:7.2 a"))
	g.Expect(h.status("c").Reason).To(Equal(v1alpha2.ImageCacheReasonImageCacheUpdate))
}

// A cache the original last purged stays purged: no refresh brings its
// images back, and an edit pulls the whole spec, as nothing of it is left.
func TestOriginalPurgedCacheLeftAlone(t *testing.T) {
	g := NewWithT(t)
	orig := byOriginal("c", v1alpha2.ImageCacheReasonImageCachePurge, "nginx:1.25")
	orig.Status.Message = v1alpha2.ImageCacheMessageImagesDeletedSuccessfully
	h := newHarness(t, Config{Granularity: jobs.PerImage, RefreshEvery: 15 * time.Minute}, orig)
	h.addNode(node("a"))
	h.settleDown("c")

	g.Expect(h.writesOf("create", "jobs")).To(BeEmpty())
	st := h.status("c")
	g.Expect(outcomeOf(st)).To(Equal(outcomeOf(orig.Status)))
	g.Expect(st.ObservedGeneration).To(BeEquivalentTo(3))
	g.Expect(st.ProcessedSpec).To(BeNil())

	h.edit("c", func(c *v1alpha2.ImageCache) { c.Spec.CacheSpec[0].Images = []string{"nginx:1.25", "redis:7.2"} })
	h.settleDown("c")
	g.Expect(h.newJobs("c", map[string]bool{})).To(ConsistOf("pull nginx:1.25 a", "pull redis:7.2 a"))
}
