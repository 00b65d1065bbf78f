package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestBuildNode(t *testing.T) {
	tol := func(key string) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	}
	with := func(w Work, ts ...corev1.Toleration) Work { w.Tolerations = ts; return w }
	onNode := func(w Work, n string) Work { w.Node.Name = n; return w }
	many := make([]Work, MaxContainers+1)
	for i := range many {
		many[i] = work(Pull, "reg/img:1", "containerd://1.7")
	}
	cases := []struct {
		name            string
		ws              []Work
		wantImages      []string
		wantPolicies    []corev1.PullPolicy
		wantTolerations []corev1.Toleration
		wantErr         string
	}{
		{name: "one container per image, in order, each with its own pull policy",
			ws:              []Work{work(Pull, "nginx:1.21", "containerd://1.7"), work(Pull, "redis", "containerd://1.7")},
			wantImages:      []string{"nginx:1.21", "redis"},
			wantPolicies:    []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullAlways},
			wantTolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "the lists' tolerations together, once each",
			ws:              []Work{with(work(Pull, "a:1", ""), tol("x")), with(work(Pull, "b:1", ""), tol("x"), tol("y"))},
			wantImages:      []string{"a:1", "b:1"},
			wantPolicies:    []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullIfNotPresent},
			wantTolerations: []corev1.Toleration{tol("x"), tol("y")}},
		{name: "a list with no tolerations tolerates every taint",
			ws:              []Work{with(work(Pull, "a:1", ""), tol("x")), work(Pull, "b:1", "")},
			wantImages:      []string{"a:1", "b:1"},
			wantPolicies:    []corev1.PullPolicy{corev1.PullIfNotPresent, corev1.PullIfNotPresent},
			wantTolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{name: "no work", wantErr: "1 to 32 images, not 0"},
		{name: "over the bound", ws: many, wantErr: "not 33"},
		{name: "two nodes", ws: []Work{work(Pull, "a:1", ""), onNode(work(Pull, "b:1", ""), "node-2")}, wantErr: "only pulls onto one node"},
		{name: "a delete", ws: []Work{work(Delete, "a:1", "containerd://1.7")}, wantErr: "only pulls onto one node"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			j, err := BuildNode(Owner{Cache: cache("web"), Operation: "op1"}, c.ws, Options{HelperImage: "example.com/kubefledged:v1", PullPolicy: corev1.PullIfNotPresent})
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(j.Name).To(Equal(NodeJobName("web", "op1", c.ws)))
			g.Expect(j.Annotations).NotTo(HaveKey(AnnotationImage))
			g.Expect(j.Annotations).To(HaveKeyWithValue(AnnotationNode, "node-1"))
			g.Expect(*j.Spec.BackoffLimit).To(BeZero())
			pod := j.Spec.Template.Spec
			g.Expect(pod.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
			g.Expect(pod.InitContainers).To(HaveLen(1))
			g.Expect(pod.Tolerations).To(Equal(c.wantTolerations))
			var imgs []string
			var policies []corev1.PullPolicy
			for k, ct := range pod.Containers {
				g.Expect(ct.Name).To(Equal(ContainerName(k)))
				g.Expect(ct.Resources.Requests.Memory().String()).To(Equal("4Mi"))
				imgs = append(imgs, ct.Image)
				policies = append(policies, ct.ImagePullPolicy)
			}
			g.Expect(imgs).To(Equal(c.wantImages))
			g.Expect(ImagesOf(j)).To(Equal(c.wantImages))
			g.Expect(policies).To(Equal(c.wantPolicies))
		})
	}
}

func TestImagesOfAJobPerPair(t *testing.T) {
	g := NewWithT(t)
	j, err := Build(Owner{Cache: cache("web"), Operation: "op1"}, work(Pull, "nginx:1.21", ""), Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ImagesOf(j)).To(Equal([]string{"nginx:1.21"}))
}

func TestNodeJobNameIsFixedByTheWork(t *testing.T) {
	g := NewWithT(t)
	a, b := work(Pull, "a:1", ""), work(Pull, "b:1", "")
	g.Expect(NodeJobName("web", "op1", []Work{a, b})).To(Equal(NodeJobName("web", "op1", []Work{b, a})))
	g.Expect(NodeJobName("web", "op1", []Work{a, b})).NotTo(Equal(NodeJobName("web", "op1", []Work{a})))
	g.Expect(NodeJobName("web", "op1", []Work{a})).NotTo(Equal(NodeJobName("web", "op2", []Work{a})))
	g.Expect(NodeJobName("web", "op1", []Work{a})).NotTo(Equal(Name("web", "op1", a)))
}
