package jobs

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// A pin or unpin Job is a delete Job's pod with another command: the same
// namespace, ServiceAccount, root, SELinux type and socket, and nothing a
// pull Job would get (the startup taint's toleration, the pull user).
func TestBuildPin(t *testing.T) {
	opts := Options{HelperImage: "h:1", ServiceAccountName: "jobs", DeleteNamespace: "kube-fledged",
		DeleteServiceAccountName: "kubefledged-delete", DeleteHostNetwork: true,
		PullTolerations: []corev1.Toleration{{Key: "kubefledged.io/caching", Operator: corev1.TolerationOpExists}}}
	gpu := []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	node := Node{Name: "node-1", Runtime: "containerd://1.7.2"}
	tests := []struct {
		kind    Kind
		images  []string
		wantCmd []string
	}{
		{Pin, []string{"nginx:1.21"}, []string{HelperBinary, "pin", "--endpoint=unix://" + criMount, "--owner=uid-1", "--image=nginx:1.21"}},
		{Unpin, []string{"nginx:1.21", "redis:7"}, []string{HelperBinary, "unpin", "--endpoint=unix://" + criMount, "--owner=uid-1",
			"--image=nginx:1.21", "--image=redis:7"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			g := NewWithT(t)
			o := Owner{Cache: cache("web"), Operation: "op1"}
			j, err := BuildPin(o, tt.kind, node, tt.images, gpu, opts)
			g.Expect(err).NotTo(HaveOccurred())
			d, err := Build(o, Work{Kind: Delete, Image: "nginx:1.21", Node: node, Tolerations: gpu}, opts)
			g.Expect(err).NotTo(HaveOccurred())

			g.Expect(j.Namespace).To(Equal("kube-fledged"))
			g.Expect(j.Labels).To(HaveKeyWithValue(LabelKind, string(tt.kind)))
			g.Expect(j.Annotations).To(HaveKeyWithValue(AnnotationNode, "node-1"))
			g.Expect(validation.IsDNS1123Label(j.Name)).To(BeEmpty())
			pod, del := j.Spec.Template.Spec, d.Spec.Template.Spec
			g.Expect(pod.Containers).To(HaveLen(1))
			g.Expect(pod.Containers[0].Name).To(Equal(PinContainer))
			g.Expect(pod.Containers[0].Command).To(Equal(tt.wantCmd))
			g.Expect(ImagesOf(j)).To(Equal(tt.images))
			// Everything else is the delete pod's.
			pod.Containers[0].Name, pod.Containers[0].Command = del.Containers[0].Name, del.Containers[0].Command
			g.Expect(pod).To(Equal(del))
			g.Expect(pod.Tolerations).To(Equal(gpu), "no pull toleration")
			g.Expect(*pod.Containers[0].SecurityContext.RunAsNonRoot).To(BeFalse())
			g.Expect(pod.Containers[0].SecurityContext.SELinuxOptions.Type).To(Equal("spc_t"))
		})
	}
}

func TestBuildPinRefuses(t *testing.T) {
	many := make([]string, MaxPinImages+1)
	for i := range many {
		many[i] = fmt.Sprintf("img:%d", i)
	}
	tests := []struct {
		name    string
		kind    Kind
		runtime string
		images  []string
		wantErr string
	}{
		{"a pull", Pull, "containerd://1.7", []string{"a:1"}, "not pull"},
		{"a delete", Delete, "containerd://1.7", []string{"a:1"}, "not delete"},
		{"no image", Pin, "containerd://1.7", nil, "1 to 64 images, not 0"},
		{"too many", Unpin, "containerd://1.7", many, "1 to 64 images, not 65"},
		{"unknown runtime", Pin, "rkt://1", []string{"a:1"}, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := BuildPin(Owner{Cache: cache("web"), Operation: "op1"}, tt.kind, Node{Name: "n", Runtime: tt.runtime}, tt.images, nil, Options{HelperImage: "h:1"})
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

// A pin Job's name does not depend on the order its images come in, and
// differs by kind, node, operation and images: a retried create finds the
// same Job, and a pin never collides with the unpin of the same images.
func TestPinJobNames(t *testing.T) {
	g := NewWithT(t)
	a := PinJobName("web", "op1", Pin, "n1", []string{"a:1", "b:1"})
	g.Expect(PinJobName("web", "op1", Pin, "n1", []string{"b:1", "a:1"})).To(Equal(a))
	seen := map[string]bool{a: true}
	for _, other := range []string{
		PinJobName("web", "op1", Unpin, "n1", []string{"a:1", "b:1"}),
		PinJobName("web", "op1", Pin, "n2", []string{"a:1", "b:1"}),
		PinJobName("web", "op2", Pin, "n1", []string{"a:1", "b:1"}),
		PinJobName("web", "op1", Pin, "n1", []string{"a:1"}),
	} {
		g.Expect(seen).NotTo(HaveKey(other))
		seen[other] = true
	}
}

// A cache that pins has its delete Jobs release its pin of the image first;
// one that never pinned runs cri-rmi as before, and so does one on a
// runtime that cannot pin, which holds no pin of ours.
func TestDeleteUnpinsForItsOwner(t *testing.T) {
	plain := []string{HelperBinary, "cri-rmi", "--endpoint=unix://" + criMount, "--image=nginx:1.21"}
	tests := []struct {
		unpin   bool
		runtime string
		want    []string
	}{
		{false, "containerd://1.7.2", plain},
		{true, "containerd://1.7.2", append(plain, "--unpin-owner=uid-1")},
		{true, "cri-o://1.30.0", plain},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.unpin, tt.runtime), func(t *testing.T) {
			g := NewWithT(t)
			j, err := Build(Owner{Cache: cache("web"), Operation: "op1", Unpin: tt.unpin}, work(Delete, "nginx:1.21", tt.runtime), Options{HelperImage: "h:1"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Spec.Template.Spec.Containers[0].Command).To(Equal(tt.want))
		})
	}
}
