package validation

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/webhook/validation/validationtest"
)

const digest = validationtest.Digest

func goodCache() *v1alpha2.ImageCache { return validationtest.GoodCache("ns", "ic") }

// bigSpec returns lists of distinct, valid images whose JSON is about n bytes.
func bigSpec(n int) []v1alpha2.CacheSpecImages {
	var out []v1alpha2.CacheSpecImages
	size := 2
	for l := 0; size < n; l++ {
		list := v1alpha2.CacheSpecImages{}
		size += len(`{"images":[]},`)
		for i := 0; i < 256 && size < n; i++ {
			img := fmt.Sprintf("registry.example.com/team/app-%03d-%03d:v1.2.3", l, i)
			list.Images = append(list.Images, img)
			size += len(img) + 3
		}
		out = append(out, list)
	}
	return out
}

func messages(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateCreate(t *testing.T) {
	// The good creates, and those only a unit test can make (the CRD's
	// schema refuses them first, or they are too large to send); the
	// refusals both levels test are validationtest.Rejected.
	cases := append([]validationtest.Case{
		{Name: "good", Mutate: func(*v1alpha2.ImageCache) {}},
		{Name: "digest and registry with port", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"busybox@" + digest, "127.0.0.1:5000/app:v1", "busybox:1.36"}
		}},
		{Name: "different tags of one repository", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"nginx:1.26", "nginx:1.27", "nginx"}
		}},
		{Name: "same image in two lists", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Images = []string{"nginx:1.27"}
		}},
		{Name: "empty label value selects nodes having the key", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector = map[string]string{"node-role.kubernetes.io/worker": ""}
		}},
		{Name: "spec just under the size limit", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = bigSpec(MaxSpecBytes - 1024)
		}},
		{Name: "spec over the size limit", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = bigSpec(MaxSpecBytes + 1024)
		}, Want: []string{`over the limit of 256 KiB: its status must fit in etcd`}},
		{Name: "no lists", Mutate: func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec = nil },
			Want: []string{`spec.cacheSpec: Invalid value: []: list at least one entry`}},
		{Name: "empty image list", Mutate: func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[1].Images = nil },
			Want: []string{`spec.cacheSpec[1].images: Invalid value: []: list at least one image, e.g. ["nginx:1.27"], or select pods whose images to cache with fromPods, or workloads with fromWorkloads`}},
		{Name: "fromPods instead of images", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Images = nil
			ic.Spec.CacheSpec[1].FromPods = &v1alpha2.FromPods{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}},
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"front", "back"}}}},
			}
		}},
		{Name: "fromPods beside images, selectors empty", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].FromPods = &v1alpha2.FromPods{NamespaceSelector: &metav1.LabelSelector{}}
		}},
		{Name: "fromWorkloads instead of images", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Images = nil
			ic.Spec.CacheSpec[1].FromWorkloads = &v1alpha2.FromWorkloads{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}},
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"batch"}}}},
			}
		}},
		{Name: "fromWorkloads beside fromPods and images, selectors absent", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].FromPods = &v1alpha2.FromPods{}
			ic.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{}
		}},
		{Name: "empty reference", Mutate: func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[0].Images[1] = "" },
			Want: []string{`spec.cacheSpec[0].images[1]: Invalid value: "": an image reference must not be empty; use [registry[:port]/]repository`}},
		{Name: "all errors are reported at once", Mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"Bad", "nginx", "nginx"}
			ic.Spec.CacheSpec[1].NodeSelector = map[string]string{"zone": "a b"}
			ic.Spec.ImagePullSecrets[0].Name = "A"
		}, Want: []string{`images[0]: Invalid value: "Bad"`, `images[2]: Invalid value: "nginx"`,
			`nodeSelector[zone]: Invalid value: "a b"`, `imagePullSecrets[0].name: Invalid value: "A"`}},
	}, validationtest.Rejected()...)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			g := NewWithT(t)
			ic := goodCache()
			c.Mutate(ic)
			got := messages(ValidateCreate(ic))
			g.Expect(got).To(HaveLen(len(c.Want)), "%q", got)
			for i := range c.Want {
				g.Expect(got[i]).To(ContainSubstring(c.Want[i]))
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	start := metav1.NewTime(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC))
	processing := func(ic *v1alpha2.ImageCache) {
		ic.Status = v1alpha2.ImageCacheStatus{
			Status: v1alpha2.ImageCacheActionStatusProcessing, Reason: v1alpha2.ImageCacheReasonImageCacheRefresh,
			StartTime: &start,
		}
	}
	succeeded := func(ic *v1alpha2.ImageCache) {
		ic.Status = v1alpha2.ImageCacheStatus{Status: v1alpha2.ImageCacheActionStatusSucceeded}
	}
	cases := []struct {
		name     string
		old      func(*v1alpha2.ImageCache)
		mutate   func(*v1alpha2.ImageCache)
		want     []string
		wantNone bool
	}{
		{name: "images may change", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"nginx:1.28", "busybox"}
		}},
		{name: "pull secrets may change", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.ImagePullSecrets = nil
		}},
		// Pinning may be turned on and off at any time: the controller
		// pins, or unpins, after the operation that runs.
		{name: "pin may be turned on", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.Pin = ptr.To(true)
		}},
		{name: "processing: pin may be turned off", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.Pin = ptr.To(false)
		}},
		{name: "annotation may be added when idle", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: ""}
		}},
		{name: "nil and empty selector are the same", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].NodeSelector = map[string]string{}
		}},
		{name: "list added", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = append(ic.Spec.CacheSpec, v1alpha2.CacheSpecImages{Images: []string{"busybox"}})
		}, want: []string{`spec.cacheSpec: Invalid value: 3: the number of image lists cannot change (it was 2); only the images of each list and spec.imagePullSecrets may change`}},
		{name: "list removed", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = ic.Spec.CacheSpec[:1]
		}, want: []string{`spec.cacheSpec: Invalid value: 1: the number of image lists cannot change (it was 2)`}},
		{name: "selector changed", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector["kubernetes.io/arch"] = "amd64"
		}, want: []string{`spec.cacheSpec[1].nodeSelector: Invalid value: {"kubernetes.io/arch":"amd64"}: a list's node selector cannot change (it was {"kubernetes.io/arch":"arm64"}); only its images may change`}},
		{name: "selector added", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].NodeSelector = map[string]string{"zone": "a"}
		}, want: []string{`spec.cacheSpec[0].nodeSelector: Invalid value: {"zone":"a"}: a list's node selector cannot change (it was {} (all nodes))`}},
		{name: "selector removed", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector = nil
		}, want: []string{`spec.cacheSpec[1].nodeSelector: Invalid value: {}: a list's node selector cannot change`}},
		{name: "invalid image in an update", old: succeeded, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"nginx", "nginx:latest"}
		}, want: []string{`spec.cacheSpec[0].images[1]: Invalid value: "nginx:latest": names the same image as spec.cacheSpec[0].images[0] ("nginx")`}},
		{name: "stored invalid spec does not block metadata writes", old: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"nginx", "nginx"}
			processing(ic)
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "x"}
		}, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = nil
			ic.Labels = map[string]string{"team": "a"}
		}},
		{name: "processing: annotation removal allowed", old: func(ic *v1alpha2.ImageCache) {
			processing(ic)
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "", v1alpha2.PurgeAnnotation: ""}
		}, mutate: func(ic *v1alpha2.ImageCache) { ic.Annotations = map[string]string{"other": "x"} }},
		{name: "processing: existing annotation value change allowed", old: func(ic *v1alpha2.ImageCache) {
			processing(ic)
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "1"}
		}, mutate: func(ic *v1alpha2.ImageCache) { ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "2"} }},
		{name: "processing: labels and finalizers allowed", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Labels = map[string]string{"a": "b"}
			ic.Finalizers = []string{"example.com/f"}
		}},
		// GitOps tools write whenever their source changes; the controller
		// queues what arrives while an operation runs.
		{name: "processing: image change admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = append(ic.Spec.CacheSpec[0].Images, "busybox")
		}},
		{name: "processing: pull secret change admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.ImagePullSecrets = append(ic.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "other"})
		}},
		{name: "processing: pull secrets removal admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.ImagePullSecrets = nil
		}},
		{name: "processing: refresh annotation admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "now"}
		}},
		{name: "processing: purge annotation admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = map[string]string{v1alpha2.PurgeAnnotation: ""}
		}},
		{name: "processing: edit and annotation in one write admitted", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Images = []string{"redis:7.4"}
			ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "", v1alpha2.PurgeAnnotation: ""}
		}},
		{name: "processing without reason or start time: annotation admitted", old: func(ic *v1alpha2.ImageCache) {
			ic.Status.Status = v1alpha2.ImageCacheActionStatusProcessing
		}, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = map[string]string{v1alpha2.PurgeAnnotation: ""}
		}},
		// What no status allows is refused while Processing for that reason
		// alone.
		{name: "processing: selector change refused once", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].NodeSelector = map[string]string{"zone": "a"}
		}, want: []string{`spec.cacheSpec[0].nodeSelector: Invalid value: {"zone":"a"}: a list's node selector cannot change (it was {} (all nodes)); only its images may change: to cache on other nodes, purge this ImageCache and create another`}},
		{name: "processing: list added refused once", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = append(ic.Spec.CacheSpec, v1alpha2.CacheSpecImages{Images: []string{"busybox"}})
		}, want: []string{`spec.cacheSpec: Invalid value: 3: the number of image lists cannot change (it was 2)`}},
		{name: "processing: tolerations change refused once", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}, want: []string{`spec.cacheSpec[1].tolerations: Invalid value: [{"key":"gpu","operator":"Exists"}]: a list's tolerations cannot change (they were [] (none)); only its images may change`}},
		{name: "processing: invalid image refused once", old: processing, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"NGINX"}
		}, want: []string{`spec.cacheSpec[0].images[0]: Invalid value: "NGINX": not a valid image reference`}},
		{name: "failed status: everything allowed again", old: func(ic *v1alpha2.ImageCache) {
			ic.Status.Status = v1alpha2.ImageCacheActionStatusFailed
		}, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Annotations = map[string]string{v1alpha2.PurgeAnnotation: ""}
			ic.Spec.CacheSpec[0].Images = []string{"busybox"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			oldIC := goodCache()
			c.old(oldIC)
			newIC := oldIC.DeepCopy()
			c.mutate(newIC)
			got := messages(ValidateUpdate(oldIC, newIC))
			g.Expect(got).To(HaveLen(len(c.want)), "%q", got)
			for i := range c.want {
				g.Expect(got[i]).To(ContainSubstring(c.want[i]))
			}
		})
	}
}

// TestUpdateNeverBlocksUnchangedSpec pins the promise made to the
// controller: whatever the stored object and its status, an update that keeps
// the spec and removes annotations passes.
func TestUpdateNeverBlocksUnchangedSpec(t *testing.T) {
	g := NewWithT(t)
	bad := goodCache()
	bad.Spec.CacheSpec = []v1alpha2.CacheSpecImages{{Images: []string{"NOT VALID", ""}, NodeSelector: map[string]string{"a b": "c d"}}}
	bad.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "Bad_Name"}}
	for _, st := range []v1alpha2.ImageCacheActionStatus{"", v1alpha2.ImageCacheActionStatusProcessing,
		v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheActionStatusAborted} {
		oldIC := bad.DeepCopy()
		oldIC.Status.Status = st
		oldIC.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "", v1alpha2.PurgeAnnotation: ""}
		newIC := oldIC.DeepCopy()
		newIC.Annotations = nil
		g.Expect(ValidateUpdate(oldIC, newIC)).To(BeEmpty(), string(st))
	}
}

// TestStatusNeverBlocksAValidUpdate pins what GitOps relies on: whatever the
// status, a valid spec edit that also asks for a refresh and a purge passes,
// so a sync never fails because an operation happens to be running.
func TestStatusNeverBlocksAValidUpdate(t *testing.T) {
	g := NewWithT(t)
	for _, st := range []v1alpha2.ImageCacheActionStatus{"", v1alpha2.ImageCacheActionStatusProcessing,
		v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheActionStatusFailed,
		v1alpha2.ImageCacheActionStatusAborted, v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted,
		v1alpha2.ImageCacheActionStatusUnknown} {
		oldIC := goodCache()
		oldIC.Status.Status = st
		oldIC.Status.Reason = v1alpha2.ImageCacheReasonImageCacheRefresh
		newIC := oldIC.DeepCopy()
		newIC.Spec.CacheSpec[0].Images = []string{"nginx:1.28"}
		newIC.Spec.ImagePullSecrets = nil
		newIC.Annotations = map[string]string{v1alpha2.RefreshAnnotation: "", v1alpha2.PurgeAnnotation: ""}
		g.Expect(messages(ValidateUpdate(oldIC, newIC))).To(BeEmpty(), "status %q", st)
	}
}
