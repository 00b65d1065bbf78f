package validation

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

func TestTolerations(t *testing.T) {
	cases := []struct {
		name string
		tol  corev1.Toleration
		want string
	}{
		{name: "exists any", tol: corev1.Toleration{Operator: corev1.TolerationOpExists}},
		{name: "equal", tol: corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}},
		{name: "noexecute seconds", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}},
		{name: "bad operator", tol: corev1.Toleration{Key: "k", Operator: "Maybe"}, want: `spec.cacheSpec[0].tolerations[0].operator: Unsupported value: "Maybe"`},
		{name: "bad effect", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: "Sometimes"}, want: `tolerations[0].effect: Unsupported value: "Sometimes"`},
		{name: "exists with value", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}, want: "must be empty when operator is Exists"},
		{name: "empty key equal", tol: corev1.Toleration{Operator: corev1.TolerationOpEqual, Value: "v"}, want: "an empty key needs operator Exists"},
		{name: "bad key", tol: corev1.Toleration{Key: "not a key", Operator: corev1.TolerationOpExists}, want: `tolerations[0].key: Invalid value: "not a key"`},
		{name: "seconds without NoExecute", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)}, want: "only allowed with effect NoExecute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ic := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{
				{Images: []string{"nginx:1.27"}, Tolerations: []corev1.Toleration{c.tol}},
			}}}
			errs := ValidateCreate(ic)
			if c.want == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate().Error()).To(ContainSubstring(c.want))
		})
	}
}

func TestTolerationChangeIsASpecChange(t *testing.T) {
	g := NewWithT(t)
	old := &v1alpha2.ImageCache{Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}}}}}
	old.Status.Status = v1alpha2.ImageCacheActionStatusProcessing
	upd := old.DeepCopy()
	upd.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	g.Expect(ValidateUpdate(old, upd)).NotTo(BeEmpty())
}
