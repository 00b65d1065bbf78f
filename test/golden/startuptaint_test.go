package golden

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/plan"
)

// The controller is what removes the startup taint, so its pods must run on
// a node that still carries it: when a whole pool is replaced, no other node
// is left. The chart reads controller.nodeStartupTaint as the controller's
// flag does and adds the toleration the pull Jobs get, beside the user's
// own; these cases hold the chart to the flag's parser rather than to a copy
// of its rules.
func TestControllerToleratesTheStartupTaint(t *testing.T) {
	c := loadChart(t)
	tests := []struct {
		name   string
		values string
		// added says whether the startup taint's toleration follows the
		// user's; false when theirs already tolerate all it would.
		added bool
	}{
		{name: "off", values: "{}"},
		{name: "off, the user's kept", values: "tolerations: [{key: dedicated, operator: Exists}]"},
		{name: "NoSchedule", values: "controller: {nodeStartupTaint: 'kubefledged.io/caching:NoSchedule'}", added: true},
		{name: "NoExecute", values: "controller: {nodeStartupTaint: 'caching:NoExecute'}", added: true},
		{name: "PreferNoSchedule", values: "controller: {nodeStartupTaint: 'example.com/warm:PreferNoSchedule'}", added: true},
		{name: "any effect", values: "controller: {nodeStartupTaint: kubefledged.io/caching}", added: true},
		{name: "key without a prefix", values: "controller: {nodeStartupTaint: a}", added: true},
		{
			name:   "beside the user's",
			values: "controller: {nodeStartupTaint: 'kubefledged.io/caching:NoSchedule'}\ntolerations: [{key: dedicated, operator: Equal, value: infra, effect: NoSchedule}]",
			added:  true,
		},
		{
			name:   "the user's tolerates one effect of an any-effect taint",
			values: "controller: {nodeStartupTaint: kubefledged.io/caching}\ntolerations: [{key: kubefledged.io/caching, operator: Exists, effect: NoExecute}]",
			added:  true,
		},
		{
			name:   "the user's tolerates one value only",
			values: "controller: {nodeStartupTaint: 'kubefledged.io/caching:NoSchedule'}\ntolerations: [{key: kubefledged.io/caching, operator: Equal, value: 'true', effect: NoSchedule}]",
			added:  true,
		},
		{
			name:   "the user's tolerates it for a while only",
			values: "controller: {nodeStartupTaint: 'caching:NoExecute'}\ntolerations: [{key: caching, operator: Exists, effect: NoExecute, tolerationSeconds: 60}]",
			added:  true,
		},
		{
			name:   "the user's is the same",
			values: "controller: {nodeStartupTaint: 'example.com/warm:NoExecute'}\ntolerations: [{key: example.com/warm, operator: Exists, effect: NoExecute}]",
		},
		{
			name:   "the user's covers every effect of the key",
			values: "controller: {nodeStartupTaint: 'kubefledged.io/caching:NoSchedule'}\ntolerations: [{key: kubefledged.io/caching, operator: Exists}]",
		},
		{
			name:   "the user's tolerates everything",
			values: "controller: {nodeStartupTaint: kubefledged.io/caching}\ntolerations: [{operator: Exists}]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var vals struct {
				Controller struct {
					NodeStartupTaint string `json:"nodeStartupTaint"`
				} `json:"controller"`
				Tolerations []corev1.Toleration `json:"tolerations"`
			}
			g.Expect(yaml.UnmarshalStrict([]byte(tt.values), &vals)).To(Succeed())
			raw := map[string]interface{}{}
			g.Expect(yaml.Unmarshal([]byte(tt.values), &raw)).To(Succeed())
			r, err := Render(c, raw)
			g.Expect(err).NotTo(HaveOccurred())
			startup, err := plan.ParseStartupTaint(vals.Controller.NodeStartupTaint)
			g.Expect(err).NotTo(HaveOccurred())

			want := vals.Tolerations
			if tt.added {
				want = append(append([]corev1.Toleration{}, want...), startup.Toleration())
			}
			got := deployment(t, r).Spec.Template.Spec.Tolerations
			g.Expect(got).To(Equal(want), "the controller pods' tolerations")
			g.Expect(testPod(t, r).Spec.Tolerations).To(Equal(want), "the test Pod's tolerations")

			// Whatever value and effect the node pool gives the taint, as
			// long as the controller would remove it, the pods tolerate it.
			if startup == nil {
				return
			}
			for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute} {
				for _, value := range []string{"", "true"} {
					taint := corev1.Taint{Key: startup.Key, Value: value, Effect: effect}
					if !startup.Matches(&taint) {
						continue
					}
					tolerated := false
					for i := range got {
						if got[i].ToleratesTaint(klog.Background(), &taint, false) && got[i].TolerationSeconds == nil {
							tolerated = true
						}
					}
					g.Expect(tolerated).To(BeTrue(), "the taint %s is not tolerated for good by %+v", taint.ToString(), got)
				}
			}
		})
	}
}
