package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

// containersOf are every container of a Job's pod, init ones included.
func containersOf(pod corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...)
}

// TestResourcesDefaultsUnchanged: with no flag set, the Jobs ask what they
// always did, and name no CPU limit.
func TestResourcesDefaultsUnchanged(t *testing.T) {
	g := NewWithT(t)
	opts := Options{HelperImage: "example.com/kubefledged:v1"}
	own := Owner{Cache: cache("web"), Operation: "op1"}
	pull, err := Build(own, work(Pull, "nginx:1.27", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	del, err := Build(own, work(Delete, "nginx:1.27", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	node, err := BuildNode(own, []Work{work(Pull, "nginx:1.27", "containerd://1.7"), work(Pull, "redis:7.2", "containerd://1.7")}, opts)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range append(containersOf(pull.Spec.Template.Spec), append(containersOf(del.Spec.Template.Spec), node.Spec.Template.Spec.InitContainers...)...) {
		g.Expect(c.Resources).To(Equal(smallResources()), c.Name)
	}
	for _, c := range node.Spec.Template.Spec.Containers {
		g.Expect(c.Resources).To(Equal(sharedResources()), c.Name)
	}
}

// TestResourcesGivenToEveryContainer: what the flags set is in every
// container of every kind of Job, each of a node Job's pull containers
// too; what they leave unset keeps the container's default.
func TestResourcesGivenToEveryContainer(t *testing.T) {
	g := NewWithT(t)
	opts := Options{HelperImage: "example.com/kubefledged:v1", Resources: Resources{CPURequest: q("20m"), CPULimit: q("100m"), MemoryLimit: q("128Mi")}}
	own := Owner{Cache: cache("web"), Operation: "op1"}
	pull, err := Build(own, work(Pull, "nginx:1.27", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	del, err := Build(own, work(Delete, "nginx:1.27", "containerd://1.7"), opts)
	g.Expect(err).NotTo(HaveOccurred())
	node, err := BuildNode(own, []Work{work(Pull, "nginx:1.27", "containerd://1.7"), work(Pull, "redis:7.2", "containerd://1.7")}, opts)
	g.Expect(err).NotTo(HaveOccurred())
	all := containersOf(pull.Spec.Template.Spec)
	all = append(all, containersOf(del.Spec.Template.Spec)...)
	all = append(all, containersOf(node.Spec.Template.Spec)...)
	g.Expect(all).To(HaveLen(2 + 1 + 3))
	for _, c := range all {
		r := c.Resources
		g.Expect(r.Requests.Cpu().String()).To(Equal("20m"), c.Name)
		g.Expect(r.Limits.Cpu().String()).To(Equal("100m"), c.Name)
		g.Expect(r.Limits.Memory().String()).To(Equal("128Mi"), c.Name)
	}
	// The memory request was not set: each keeps its own.
	g.Expect(pull.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().String()).To(Equal("16Mi"))
	g.Expect(node.Spec.Template.Spec.Containers[1].Resources.Requests.Memory().String()).To(Equal("4Mi"))
	// Building twice does not share quantities between Jobs.
	g.Expect(opts.Resources.CPURequest.String()).To(Equal("20m"))
}

// TestResourcesLimitBelowDefaultRequest: a limit set below a default
// request lowers that request to it, which the API server then admits.
func TestResourcesLimitBelowDefaultRequest(t *testing.T) {
	g := NewWithT(t)
	r := Resources{CPULimit: q("5m"), MemoryLimit: q("8Mi")}
	g.Expect(r.Validate()).To(Succeed())
	small := r.apply(smallResources())
	g.Expect(small.Requests.Cpu().String()).To(Equal("5m"))
	g.Expect(small.Requests.Memory().String()).To(Equal("8Mi"))
	shared := r.apply(sharedResources())
	g.Expect(shared.Requests.Cpu().String()).To(Equal("1m"))
	g.Expect(shared.Requests.Memory().String()).To(Equal("4Mi"))
}

func TestResourcesValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Resources
		want string
	}{
		{name: "none", r: Resources{}},
		{name: "all", r: Resources{CPURequest: q("10m"), MemoryRequest: q("16Mi"), CPULimit: q("10m"), MemoryLimit: q("64Mi")}},
		{name: "cpu request above limit", r: Resources{CPURequest: q("200m"), CPULimit: q("100m")},
			want: "--job-cpu-request=200m is above --job-cpu-limit=100m"},
		{name: "memory request above limit", r: Resources{MemoryRequest: q("1Gi"), MemoryLimit: q("512Mi")},
			want: "--job-memory-request=1Gi is above --job-memory-limit=512Mi"},
		{name: "negative request", r: Resources{CPURequest: q("-1m")}, want: "--job-cpu-request=-1m is negative"},
		{name: "zero limit", r: Resources{MemoryLimit: q("0")}, want: "--job-memory-limit=0 is not above zero"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			err := c.r.Validate()
			if c.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(c.want)))
		})
	}
}
