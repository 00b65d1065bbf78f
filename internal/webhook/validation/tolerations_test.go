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

func TestTolerationsCannotChange(t *testing.T) {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	drain := func(s int64) corev1.Toleration {
		return corev1.Toleration{Key: "drain", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(s)}
	}
	const instead = "only its images may change: to cache on other nodes, purge this ImageCache and create another"
	cases := []struct {
		name     string
		old, new [2][]corev1.Toleration // per list
		// images edits the first list too, so that the spec changed even
		// when the tolerations did not.
		images bool
		want   []string
	}{
		{name: "added", old: [2][]corev1.Toleration{nil, nil}, new: [2][]corev1.Toleration{{{Operator: corev1.TolerationOpExists}}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: [{"operator":"Exists"}]: a list's tolerations cannot change (they were [] (none)); ` + instead}},
		{name: "removed", old: [2][]corev1.Toleration{nil, {gpu}}, new: [2][]corev1.Toleration{nil, nil},
			want: []string{`spec.cacheSpec[1].tolerations: Invalid value: []: a list's tolerations cannot change (they were [{"key":"gpu","operator":"Equal","value":"yes","effect":"NoSchedule"}]); ` + instead}},
		{name: "emptied", old: [2][]corev1.Toleration{{gpu}, nil}, new: [2][]corev1.Toleration{{}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: []: a list's tolerations cannot change`}},
		{name: "value changed", old: [2][]corev1.Toleration{{gpu}, nil}, new: [2][]corev1.Toleration{{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "no", Effect: corev1.TaintEffectNoSchedule}}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: [{"key":"gpu","operator":"Equal","value":"no","effect":"NoSchedule"}]: a list's tolerations cannot change (they were [{"key":"gpu","operator":"Equal","value":"yes","effect":"NoSchedule"}])`}},
		{name: "seconds changed", old: [2][]corev1.Toleration{{drain(30)}, nil}, new: [2][]corev1.Toleration{{drain(60)}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: [{"key":"drain","operator":"Exists","effect":"NoExecute","tolerationSeconds":60}]: a list's tolerations cannot change (they were [{"key":"drain","operator":"Exists","effect":"NoExecute","tolerationSeconds":30}])`}},
		{name: "both lists changed", old: [2][]corev1.Toleration{{gpu}, {gpu}}, new: [2][]corev1.Toleration{{drain(5)}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: [{"key":"drain"`, `spec.cacheSpec[1].tolerations: Invalid value: []`}},
		{name: "with an image edit, refused for the tolerations", images: true, old: [2][]corev1.Toleration{nil, nil}, new: [2][]corev1.Toleration{{gpu}, nil},
			want: []string{`spec.cacheSpec[0].tolerations: Invalid value: [{"key":"gpu"`}},
		// Compared by value: a decoded copy holds other pointers, and a
		// client may send [] for an absent list.
		{name: "same seconds, other pointer", images: true, old: [2][]corev1.Toleration{{drain(30)}, nil}, new: [2][]corev1.Toleration{{drain(30)}, nil}},
		{name: "nil and empty are the same", images: true, old: [2][]corev1.Toleration{nil, {}}, new: [2][]corev1.Toleration{{}, nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			oldIC := &v1alpha2.ImageCache{Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{
				{Images: []string{"nginx:1.27"}, Tolerations: c.old[0]},
				{Images: []string{"redis:7"}, Tolerations: c.old[1]},
			}}}
			oldIC.Status.Status = v1alpha2.ImageCacheActionStatusSucceeded
			newIC := oldIC.DeepCopy()
			newIC.Spec.CacheSpec[0].Tolerations, newIC.Spec.CacheSpec[1].Tolerations = c.new[0], c.new[1]
			if c.images {
				newIC.Spec.CacheSpec[0].Images = []string{"nginx:1.28"}
			}
			got := messages(ValidateUpdate(oldIC, newIC))
			g.Expect(got).To(HaveLen(len(c.want)), "%q", got)
			for i := range c.want {
				g.Expect(got[i]).To(ContainSubstring(c.want[i]))
			}
		})
	}
}
