package jobs

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
)

func work(kind Kind, image, runtime string) Work {
	ref, err := images.Parse(image)
	if err != nil {
		panic(err)
	}
	return Work{Kind: kind, Image: image, Ref: ref, Node: Node{Name: "node-1", Runtime: runtime}}
}

func cache(name string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "uid-1"},
		Spec:       v1alpha2.ImageCacheSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}},
	}
}

func TestBuildPull(t *testing.T) {
	cases := []struct {
		name       string
		image      string
		opts       Options
		wantPolicy corev1.PullPolicy
	}{
		{name: "tagged image, IfNotPresent", image: "nginx:1.21", opts: Options{PullPolicy: corev1.PullIfNotPresent}, wantPolicy: corev1.PullIfNotPresent},
		{name: "untagged image is always pulled", image: "nginx", opts: Options{PullPolicy: corev1.PullIfNotPresent}, wantPolicy: corev1.PullAlways},
		{name: "latest is always pulled", image: "nginx:latest", opts: Options{PullPolicy: corev1.PullIfNotPresent}, wantPolicy: corev1.PullAlways},
		{name: "policy Always", image: "nginx:1.21", opts: Options{PullPolicy: corev1.PullAlways}, wantPolicy: corev1.PullAlways},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			c.opts.HelperImage = "example.com/kubefledged:v1"
			j, err := Build(Owner{Cache: cache("web"), Operation: "op1"}, work(Pull, c.image, "containerd://1.7"), c.opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Labels).To(HaveKeyWithValue("app", "kubefledged"))
			g.Expect(j.Labels).To(HaveKeyWithValue("kubefledged", "kubefledged-image-manager"))
			g.Expect(j.Labels).To(HaveKeyWithValue("imagecache", "web"))
			g.Expect(j.Labels).To(HaveKeyWithValue("controller", "fledged"))
			g.Expect(j.Labels).To(HaveKeyWithValue(LabelOperation, "op1"))
			g.Expect(j.Spec.Template.Labels).To(Equal(j.Labels))
			g.Expect(*j.Spec.BackoffLimit).To(BeZero())
			g.Expect(j.OwnerReferences).To(HaveLen(1))
			g.Expect(*j.OwnerReferences[0].Controller).To(BeTrue())
			pod := j.Spec.Template.Spec
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(pod.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "regcred"}))
			g.Expect(pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values).To(ConsistOf("node-1"))
			g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(pod.InitContainers[0].Image).To(Equal("example.com/kubefledged:v1"))
			g.Expect(pod.Containers[0].Image).To(Equal(c.image))
			g.Expect(pod.Containers[0].ImagePullPolicy).To(Equal(c.wantPolicy))
			g.Expect(*pod.Containers[0].SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		})
	}
}

func TestBuildDelete(t *testing.T) {
	cases := []struct {
		runtime, override, wantSocket, wantErr string
	}{
		{runtime: "containerd://1.7.2", wantSocket: SocketContainerd},
		{runtime: "cri-o://1.29", wantSocket: SocketCRIO},
		{runtime: "docker://24.0", wantSocket: SocketCRIDockerd},
		{runtime: "docker://24.0", override: "/custom/cri.sock", wantSocket: "/custom/cri.sock"},
		{runtime: "rkt://1", wantErr: "not supported"},
		{runtime: "rkt://1", override: "/custom/cri.sock", wantSocket: "/custom/cri.sock"},
	}
	for _, c := range cases {
		t.Run(c.runtime+c.override, func(t *testing.T) {
			g := NewWithT(t)
			j, err := Build(Owner{Cache: cache("web"), Operation: "op1"}, work(Delete, "nginx:1.21", c.runtime),
				Options{HelperImage: "h:1", CRISocketPath: c.override, ServiceAccountName: "jobs", DeleteHostNetwork: true})
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			pod := j.Spec.Template.Spec
			g.Expect(pod.Volumes[0].HostPath.Path).To(Equal(c.wantSocket))
			g.Expect(pod.HostNetwork).To(BeTrue())
			g.Expect(pod.ServiceAccountName).To(Equal("jobs"))
			// The CRI client never calls the API server.
			g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			g.Expect(pod.Containers[0].SecurityContext.SELinuxOptions.Type).To(Equal("spc_t"))
			g.Expect(pod.Containers[0].Command).To(ContainElement("--image=nginx:1.21"))
			// The helper image may sit in a private mirror.
			g.Expect(pod.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "regcred"}))
			g.Expect(pod.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		})
	}
}

// A delete Job in the controller's namespace cannot be owned by its cache:
// it names the cache in an annotation and labels, and runs as the delete
// ServiceAccount without the cache's pull secrets, which live elsewhere.
// Pull Jobs stay in the cache's namespace, owned.
func TestDeleteJobInControllerNamespace(t *testing.T) {
	g := NewWithT(t)
	opts := Options{HelperImage: "h:1", ServiceAccountName: "jobs", DeleteNamespace: "kube-fledged", DeleteServiceAccountName: "kubefledged-delete"}
	long := strings.Repeat("w", 100)
	j, err := Build(Owner{Cache: cache(long), Operation: "op1"}, work(Delete, "nginx:1.21", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Namespace).To(Equal("kube-fledged"))
	g.Expect(j.OwnerReferences).To(BeEmpty())
	g.Expect(j.Labels).To(HaveKeyWithValue(LabelCacheNamespace, "ns"))
	g.Expect(j.Spec.Template.Labels).To(Equal(j.Labels))
	g.Expect(labels.SelectorFromSet(CacheSelector("ns", long)).Matches(labels.Set(j.Labels))).To(BeTrue())
	g.Expect(labels.SelectorFromSet(CacheSelector("other", long)).Matches(labels.Set(j.Labels))).To(BeFalse())
	ns, name, ok := CacheOf(j.Namespace, j.OwnerReferences, j.Annotations)
	g.Expect(ok).To(BeTrue())
	g.Expect(ns + "/" + name).To(Equal("ns/" + long))
	pod := j.Spec.Template.Spec
	g.Expect(pod.ServiceAccountName).To(Equal("kubefledged-delete"))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(pod.ImagePullSecrets).To(BeEmpty())

	p, err := Build(Owner{Cache: cache("web"), Operation: "op1"}, work(Pull, "nginx:1.21", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Namespace).To(Equal("ns"))
	g.Expect(p.Labels).NotTo(HaveKey(LabelCacheNamespace))
	g.Expect(p.Spec.Template.Spec.ServiceAccountName).To(Equal("jobs"))
	ns, name, ok = CacheOf(p.Namespace, p.OwnerReferences, p.Annotations)
	g.Expect(ok).To(BeTrue())
	g.Expect(ns + "/" + name).To(Equal("ns/web"))

	// A Job controlled by something else is not ours to map.
	other := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "x", Controller: ptr.To(true)}}
	_, _, ok = CacheOf("ns", other, map[string]string{AnnotationCache: "ns/web"})
	g.Expect(ok).To(BeFalse())
	_, _, ok = CacheOf("ns", nil, map[string]string{AnnotationCache: "web"})
	g.Expect(ok).To(BeFalse())
}

func TestNamesAreValidAndDistinct(t *testing.T) {
	g := NewWithT(t)
	long := strings.Repeat("a", 253)
	seen := map[string]bool{}
	for _, name := range []string{"web", long, strings.Repeat("b-", 40) + "c"} {
		for _, img := range []string{"nginx:1", "nginx:2"} {
			for _, op := range []string{"op1", "op2"} {
				n := Name(name, op, work(Pull, img, ""))
				g.Expect(validation.IsDNS1123Label(n)).To(BeEmpty(), n)
				g.Expect(len(n)).To(BeNumerically("<=", 57))
				g.Expect(seen).NotTo(HaveKey(n))
				seen[n] = true
			}
		}
		g.Expect(validation.IsValidLabelValue(CacheLabelValue(name))).To(BeEmpty())
	}
	g.Expect(CacheLabelValue("web")).To(Equal("web"))
}

// The startup taint's toleration is added to a list's own tolerations; a
// list without any tolerates every taint already, so it gets nothing more.
func TestPullTolerations(t *testing.T) {
	gpu := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	caching := corev1.Toleration{Key: "kubefledged.io/caching", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	tests := []struct {
		name  string
		kind  Kind
		list  []corev1.Toleration
		extra []corev1.Toleration
		want  []corev1.Toleration
	}{
		{name: "no list tolerations: every taint", kind: Pull, extra: []corev1.Toleration{caching}, want: []corev1.Toleration{all}},
		{name: "list tolerations and the startup taint's", kind: Pull, list: []corev1.Toleration{gpu}, extra: []corev1.Toleration{caching}, want: []corev1.Toleration{gpu, caching}},
		{name: "list tolerations, no startup taint", kind: Pull, list: []corev1.Toleration{gpu}, want: []corev1.Toleration{gpu}},
		{name: "delete Jobs are not pulls", kind: Delete, list: []corev1.Toleration{gpu}, extra: []corev1.Toleration{caching}, want: []corev1.Toleration{gpu}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := work(tt.kind, "nginx:1.21", "containerd://1.7")
			w.Tolerations = tt.list
			opts := Options{HelperImage: "example.com/kubefledged:v1", PullTolerations: tt.extra}
			j, err := Build(Owner{Cache: cache("web"), Operation: "op1"}, w, opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Spec.Template.Spec.Tolerations).To(Equal(tt.want))
			g.Expect(w.Tolerations).To(Equal(tt.list), "the work's own list is not changed")
		})
	}
}
