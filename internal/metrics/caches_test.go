package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

var since = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ready(status metav1.ConditionStatus, reason string) []metav1.Condition {
	return []metav1.Condition{{Type: v1alpha2.ConditionReady, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(since)}}
}

func cache(ns, name string, st v1alpha2.ImageCacheStatus) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: st}
}

// collect gathers the collector's series over caches, as one scrape would.
func collect(t *testing.T, caches ...*v1alpha2.ImageCache) *prometheus.Registry {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, c := range caches {
		b = b.WithObjects(c)
	}
	c := newCaches()
	c.reader.set(b.Build())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}

func TestCachesSeries(t *testing.T) {
	failed := cache("team-a", "web", v1alpha2.ImageCacheStatus{
		Status: v1alpha2.ImageCacheActionStatusFailed,
		Counts: &v1alpha2.Counts{Desired: 6, Succeeded: 3, AlreadyPresent: 1, Failed: 2, Skipped: 1},
		Failures: map[string]v1alpha2.NodeReasonMessageList{
			"registry.example/bad:1": {{Node: "n1", Reason: "ImagePullBackOff"}, {Node: "n2", Reason: "ImagePullBackOff"}},
		},
		Conditions: ready(metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed)),
	})
	// Refreshing after a failure: Ready keeps its False from the failure.
	refreshing := cache("team-b", "db", v1alpha2.ImageCacheStatus{
		Status:     v1alpha2.ImageCacheActionStatusProcessing,
		Counts:     &v1alpha2.Counts{Desired: 2, InFlight: 1, Waiting: 1},
		Conditions: ready(metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed)),
	})
	// The first operation runs: no result yet, so not failing.
	first := cache("team-b", "new", v1alpha2.ImageCacheStatus{
		Status:     v1alpha2.ImageCacheActionStatusProcessing,
		Conditions: ready(metav1.ConditionFalse, v1alpha2.ImageCacheReasonImageCacheCreate),
	})
	good := cache("team-a", "ok", v1alpha2.ImageCacheStatus{
		Status:     v1alpha2.ImageCacheActionStatusSucceeded,
		Conditions: ready(metav1.ConditionTrue, string(v1alpha2.ImageCacheActionStatusSucceeded)),
	})
	pending := cache("team-c", "unseen", v1alpha2.ImageCacheStatus{})
	reg := collect(t, failed, refreshing, first, good, pending)

	want := `
# HELP kubefledged_imagecache_failing_since_timestamp_seconds When the ImageCache's Ready condition turned False, for a cache whose latest operation Failed or was Aborted; absent otherwise.
# TYPE kubefledged_imagecache_failing_since_timestamp_seconds gauge
kubefledged_imagecache_failing_since_timestamp_seconds{imagecache="db",imagecache_namespace="team-b"} 1.7487792e+09
kubefledged_imagecache_failing_since_timestamp_seconds{imagecache="web",imagecache_namespace="team-a"} 1.7487792e+09
# HELP kubefledged_imagecache_image_failures Nodes an image failed on in its ImageCache's latest operation, as status.failures lists them (bounded; see failuresOmitted).
# TYPE kubefledged_imagecache_image_failures gauge
kubefledged_imagecache_image_failures{image="registry.example/bad:1",imagecache="web",imagecache_namespace="team-a"} 2
# HELP kubefledged_imagecache_pairs (image, node) pairs of each ImageCache's latest operation, by state, as status.counts: desired, succeeded, already_present, failed, skipped, in_flight, waiting.
# TYPE kubefledged_imagecache_pairs gauge
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="already_present"} 0
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="desired"} 2
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="failed"} 0
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="in_flight"} 1
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="skipped"} 0
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="succeeded"} 0
kubefledged_imagecache_pairs{imagecache="db",imagecache_namespace="team-b",state="waiting"} 1
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="already_present"} 1
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="desired"} 6
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="failed"} 2
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="in_flight"} 0
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="skipped"} 1
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="succeeded"} 3
kubefledged_imagecache_pairs{imagecache="web",imagecache_namespace="team-a",state="waiting"} 0
# HELP kubefledged_imagecache_status 1 for each ImageCache, labelled with the status of its latest operation (Pending before the first).
# TYPE kubefledged_imagecache_status gauge
kubefledged_imagecache_status{imagecache="db",imagecache_namespace="team-b",status="Processing"} 1
kubefledged_imagecache_status{imagecache="new",imagecache_namespace="team-b",status="Processing"} 1
kubefledged_imagecache_status{imagecache="ok",imagecache_namespace="team-a",status="Succeeded"} 1
kubefledged_imagecache_status{imagecache="unseen",imagecache_namespace="team-c",status="Pending"} 1
kubefledged_imagecache_status{imagecache="web",imagecache_namespace="team-a",status="Failed"} 1
# HELP kubefledged_imagecaches ImageCaches by status of their latest operation.
# TYPE kubefledged_imagecaches gauge
kubefledged_imagecaches{status="Aborted"} 0
kubefledged_imagecaches{status="Failed"} 1
kubefledged_imagecaches{status="NoImagesPulledOrDeleted"} 0
kubefledged_imagecaches{status="Pending"} 1
kubefledged_imagecaches{status="Processing"} 2
kubefledged_imagecaches{status="Succeeded"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Series come from the caches as they stand at each scrape: a failure fixed
// or a cache deleted leaves nothing behind.
func TestCachesKeepNothingBetweenScrapes(t *testing.T) {
	failed := cache("team-a", "web", v1alpha2.ImageCacheStatus{
		Status:     v1alpha2.ImageCacheActionStatusFailed,
		Failures:   map[string]v1alpha2.NodeReasonMessageList{"bad:1": {{Node: "n1"}}},
		Conditions: ready(metav1.ConditionFalse, string(v1alpha2.ImageCacheActionStatusFailed)),
	})
	if n := testutil.CollectAndCount(collect(t, failed), NameImageFailures, NameFailingSince); n != 2 {
		t.Fatalf("a failed cache: %d series of failures, want 2", n)
	}
	reg := collect(t)
	if n := testutil.CollectAndCount(reg, NameCacheStatus, NameCachePairs, NameImageFailures, NameFailingSince); n != 0 {
		t.Errorf("no caches: %d per-cache series", n)
	}
	if n := testutil.CollectAndCount(reg, NameCachesByStatus); n != len(statuses) {
		t.Errorf("no caches: %d series of %s, want each status at 0", n, NameCachesByStatus)
	}
}

func TestFailingSince(t *testing.T) {
	for _, tt := range []struct {
		name  string
		conds []metav1.Condition
		want  bool
	}{
		{"failed", ready(metav1.ConditionFalse, "Failed"), true},
		{"aborted", ready(metav1.ConditionFalse, "Aborted"), true},
		{"first operation", ready(metav1.ConditionFalse, v1alpha2.ImageCacheReasonImageCacheCreate), false},
		{"ready", ready(metav1.ConditionTrue, "Succeeded"), false},
		{"no condition", nil, false},
	} {
		got, ok := FailingSince(tt.conds)
		if ok != tt.want || (ok && !got.Time.Equal(since)) {
			t.Errorf("%s: %v %v", tt.name, got, ok)
		}
	}
}

// The collector registers once however many controllers a process starts,
// and the last reader wins.
func TestRegisterCachesTwice(t *testing.T) {
	RegisterCaches(nil)
	RegisterCaches(nil)
}
