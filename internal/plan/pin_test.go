package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Pins are every pair of the lists on the nodes served, present or pulled,
// less the failed, the pinned already and the nodes that cannot pin; a
// cordoned node, left out of the pulls, is left out here too.
func TestPins(t *testing.T) {
	crio := node("crio", nil)
	crio.Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.30.0"
	cordoned := node("cordoned", nil)
	cordoned.Spec.Unschedulable = true
	nodes := []corev1.Node{node("a", nil, "docker.io/library/nginx:1.27"), node("b", map[string]string{"gpu": "yes"}), crio, cordoned}
	spec := v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{
		{Images: []string{"nginx:1.27", "redis:7"}},
		{Images: []string{"cuda:12"}, NodeSelector: map[string]string{"gpu": "yes"}},
	}}
	none := func(string, string) bool { return false }
	tests := []struct {
		name            string
		only            map[string]bool
		failed, pinned  func(image, node string) bool
		want            map[string][]string
		wantUnsupported []string
	}{
		{name: "every pair", failed: none, pinned: none,
			want:            map[string][]string{"a": {"nginx:1.27", "redis:7"}, "b": {"cuda:12", "nginx:1.27", "redis:7"}},
			wantUnsupported: []string{"crio"}},
		{name: "failed and pinned pairs are not pinned again",
			failed:          func(img, n string) bool { return img == "redis:7" && n == "a" },
			pinned:          func(img, n string) bool { return n == "b" },
			want:            map[string][]string{"a": {"nginx:1.27"}},
			wantUnsupported: []string{"crio"}},
		{name: "new nodes only", only: map[string]bool{"b": true}, failed: none, pinned: none,
			want: map[string][]string{"b": {"cuda:12", "nginx:1.27", "redis:7"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := Pins(PinInput{Spec: spec, Nodes: nodes, Only: tt.only, Failed: tt.failed, Pinned: tt.pinned})
			g.Expect(w.Images).To(Equal(tt.want))
			for n := range tt.want {
				g.Expect(w.Nodes[n].Name).To(Equal(n))
			}
			var unsupported []string
			for n := range w.Unsupported {
				unsupported = append(unsupported, n)
			}
			g.Expect(unsupported).To(ConsistOf(tt.wantUnsupported))
		})
	}
}
