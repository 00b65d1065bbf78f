package cachestatus

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/controller/fakeapi"
)

// Progress writes are coalesced per operation: counts equal to those last
// written send nothing, and a change within the interval of the last write
// waits for the rest of it. The operation's start counts as a write.
func TestWriteProgressCoalesces(t *testing.T) {
	const interval = time.Second
	done := func(n int32) v1alpha2.Counts { return v1alpha2.Counts{Desired: 4, Succeeded: n} }
	steps := []struct {
		name     string
		after    time.Duration // clock advance before the step
		counts   v1alpha2.Counts
		wait     time.Duration
		progress string // what the cache shows after the step
	}{
		{name: "unchanged since the start", counts: done(0), progress: "0/4"},
		{name: "changed within the interval of the start", after: 300 * time.Millisecond, counts: done(1), wait: 700 * time.Millisecond, progress: "0/4"},
		{name: "due once the interval passed", after: 700 * time.Millisecond, counts: done(1), progress: "1/4"},
		{name: "unchanged, however late", after: time.Hour, counts: done(1), progress: "1/4"},
		{name: "changed after the interval", counts: done(3), progress: "3/4"},
		{name: "changed at once again", after: time.Millisecond, counts: done(4), wait: interval - time.Millisecond, progress: "3/4"},
	}
	g := NewWithT(t)
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cache := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Status: v1alpha2.ImageCacheStatus{Progress: "0/4"}}
	api := fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithObjects(cache).WithStatusSubresource(cache).Build()
	patches := 0
	c := interceptor.NewClient(api, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
	w := Writer{Client: c, Clock: clock, Interval: interval}
	pace := Paced(done(0), clock.Now())
	wantPatches := 0
	for _, s := range steps {
		clock.Step(s.after)
		before := pace
		wait, err := w.WriteProgress(ctx, cache, s.counts, &pace)
		g.Expect(err).NotTo(HaveOccurred(), s.name)
		g.Expect(wait).To(Equal(s.wait), s.name)
		got := &v1alpha2.ImageCache{}
		g.Expect(api.Get(ctx, client.ObjectKeyFromObject(cache), got)).To(Succeed())
		g.Expect(got.Status.Progress).To(Equal(s.progress), s.name)
		if pace != before {
			wantPatches++
			g.Expect(*got.Status.Counts).To(Equal(s.counts), s.name)
		}
		g.Expect(patches).To(Equal(wantPatches), "%s: a patch is sent only when the pace moves", s.name)
	}
	g.Expect(patches).To(Equal(2))
}

// A cache deleted while its operation ran is no error for a progress
// write: the operation is forgotten at its next read.
func TestWriteProgressCacheGone(t *testing.T) {
	g := NewWithT(t)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := fake.NewClientBuilder().WithScheme(fakeapi.Scheme()).WithStatusSubresource(&v1alpha2.ImageCache{}).Build()
	w := Writer{Client: api, Clock: clock, Interval: time.Second}
	pace := Paced(v1alpha2.Counts{}, clock.Now().Add(-time.Hour))
	cache := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone"}}
	wait, err := w.WriteProgress(context.Background(), cache, v1alpha2.Counts{Desired: 1}, &pace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(wait).To(BeZero())
}
