package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestParseUIDRange(t *testing.T) {
	cases := []struct {
		in      string
		want    UIDRange
		wantErr string
	}{
		{in: "1000680000/10000", want: UIDRange{First: 1000680000, Last: 1000689999}},
		{in: "1000680000-1000689999", want: UIDRange{First: 1000680000, Last: 1000689999}},
		{in: "5/1", want: UIDRange{First: 5, Last: 5}},
		{in: "2147483647/1", want: UIDRange{First: 2147483647, Last: 2147483647}},
		{in: "", wantErr: "no / or -"},
		{in: "1000680000", wantErr: "no / or -"},
		{in: "/10000", wantErr: "first UID: empty"},
		{in: "1000680000/", wantErr: "second number: empty"},
		{in: "1000680000/0", wantErr: "the size is 0"},
		{in: "0/10000", wantErr: "UID 0, root"},
		{in: "0-10", wantErr: "UID 0, root"},
		{in: "20-10", wantErr: "ends before it starts"},
		{in: "2147483000/10000", wantErr: "ends at 2147492999, past the largest UID"},
		{in: "4294967295/1", wantErr: "past the largest UID"},
		{in: "99999999999999999999/1", wantErr: "past the largest UID"},
		{in: " 1000680000/10000", wantErr: "not a decimal number"},
		{in: "1000680000/10000 ", wantErr: "not a decimal number"},
		{in: "+1000680000/10000", wantErr: "not a decimal number"},
		{in: "1000680000/10000/5", wantErr: "not a decimal number"},
		{in: "1000680000/1e4", wantErr: "not a decimal number"},
		{in: "0x10/16", wantErr: "not a decimal number"},
		{in: "-5/10", wantErr: "not a decimal number"},
		{in: "1000680000/-1", wantErr: "not a decimal number"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseUIDRange(c.in)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(And(ContainSubstring(c.wantErr), ContainSubstring(AnnotationUIDRange))))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
			g.Expect(got.Contains(got.First)).To(BeTrue())
			g.Expect(got.Contains(got.Last)).To(BeTrue())
			g.Expect(got.Contains(got.First - 1)).To(BeFalse())
			g.Expect(got.Contains(got.Last + 1)).To(BeFalse())
		})
	}
}

func FuzzParseUIDRange(f *testing.F) {
	for _, s := range []string{"1000680000/10000", "1-2", "0/1", "4294967295/1", "1//2", "-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseUIDRange(s)
		if err != nil {
			return
		}
		if r.First < 1 || r.Last < r.First || r.Last > 1<<31-1 {
			t.Fatalf("%q gave %v", s, r)
		}
	})
}

func TestPullUser(t *testing.T) {
	cases := []struct {
		name    string
		ann     map[string]string
		want    int64
		wantErr bool
	}{
		{name: "plain Kubernetes", ann: nil, want: DefaultPullUser},
		{name: "other annotations", ann: map[string]string{"openshift.io/sa.scc.mcs": "s0:c26,c5"}, want: DefaultPullUser},
		{name: "OpenShift range", ann: map[string]string{AnnotationUIDRange: "1000680000/10000"}, want: 1000680000},
		{name: "a range that holds 65534 still gives its first", ann: map[string]string{AnnotationUIDRange: "60000/10000"}, want: 60000},
		{name: "unreadable range", ann: map[string]string{AnnotationUIDRange: "garbage"}, want: DefaultPullUser, wantErr: true},
		{name: "empty range", ann: map[string]string{AnnotationUIDRange: ""}, want: DefaultPullUser, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := PullUser(c.ann)
			g.Expect(got).To(Equal(c.want))
			g.Expect(err != nil).To(Equal(c.wantErr), "error: %v", err)
		})
	}
}

// TestPullContainersRunAsTheOwnersUser: every container of a pull pod, the
// helper's and the images', runs as the UID its owner names, so that a
// namespace's SCC range admits the whole pod; the delete Job keeps root,
// which it needs for the runtime's socket.
func TestPullContainersRunAsTheOwnersUser(t *testing.T) {
	opts := Options{HelperImage: "example.com/kubefledged:v1", PullPolicy: "IfNotPresent"}
	ws := []Work{work(Pull, "nginx:1.27", "containerd://1.7"), work(Pull, "redis:7", "containerd://1.7")}
	cases := []struct {
		name string
		user int64
		want int64
	}{
		{name: "unset", user: 0, want: DefaultPullUser},
		{name: "from the namespace", user: 1000680000, want: 1000680000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			o := Owner{Cache: cache("web"), Operation: "op1", PullUser: c.user}
			one, err := Build(o, ws[0], opts)
			g.Expect(err).NotTo(HaveOccurred())
			node, err := BuildNode(o, ws, opts)
			g.Expect(err).NotTo(HaveOccurred())
			for name, spec := range map[string]corev1.PodSpec{"image Job": one.Spec.Template.Spec, "node Job": node.Spec.Template.Spec} {
				g.Expect(spec.SecurityContext).To(BeNil(), "%s: nothing pod-wide for an SCC to check against the containers'", name)
				for _, ct := range append(spec.InitContainers, spec.Containers...) {
					g.Expect(ct.SecurityContext.RunAsUser).To(Equal(ptr.To(c.want)), "%s: container %s", name, ct.Name)
					g.Expect(ct.SecurityContext.RunAsNonRoot).To(Equal(ptr.To(true)), "%s: container %s", name, ct.Name)
				}
			}
			del, err := Build(o, work(Delete, "nginx:1.27", "containerd://1.7"), opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(del.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser).To(Equal(ptr.To[int64](0)))
		})
	}
}
