package imagecache

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// The pull containers of an operation run as the first UID of the
// namespace's OpenShift range, read when the operation starts; without a
// range, or with one that cannot be read, as the default, with a Warning
// that says why; a read that may pass is retried before anything starts.
func TestPullUserFromTheNamespace(t *testing.T) {
	const img = "nginx:1.25"
	namespace := func(ann map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, Annotations: ann}}
	}
	nsResource := schema.GroupResource{Resource: "namespaces"}
	cases := []struct {
		name string
		ns   *corev1.Namespace
		// readErr answers the reads of the namespace, the first n of them
		// (n 0: all).
		readErr error
		n       int
		want    int64
		warning string
		retried bool
	}{
		{name: "OpenShift range", ns: namespace(map[string]string{jobs.AnnotationUIDRange: "1000680000/10000"}), want: 1000680000},
		{name: "OpenShift range as first-last", ns: namespace(map[string]string{jobs.AnnotationUIDRange: "2000-2999"}), want: 2000},
		{name: "no range", ns: namespace(nil), want: jobs.DefaultPullUser},
		{name: "no namespace", want: jobs.DefaultPullUser},
		{name: "a range that cannot be read", ns: namespace(map[string]string{jobs.AnnotationUIDRange: "1000680000"}), want: jobs.DefaultPullUser,
			warning: `Warning UIDRangeUnreadable pull containers run as UID 65534, which OpenShift's restricted-v2 refuses outside the namespace's range: annotation openshift.io/sa.scc.uid-range="1000680000": no / or - in it`},
		{name: "a namespace it may not read", ns: namespace(map[string]string{jobs.AnnotationUIDRange: "1000680000/10000"}),
			readErr: apierrors.NewForbidden(nsResource, testNS, errors.New("no")), want: jobs.DefaultPullUser,
			warning: "Warning UIDRangeUnreadable pull containers run as UID 65534, which OpenShift's restricted-v2 refuses outside the namespace's range: reading namespace apps for its openshift.io/sa.scc.uid-range annotation"},
		{name: "a read that may pass", ns: namespace(map[string]string{jobs.AnnotationUIDRange: "1000680000/10000"}),
			readErr: apierrors.NewServerTimeout(nsResource, "get", 1), n: 1, want: 1000680000, retried: true},
	}
	for _, c := range cases {
		for _, granularity := range []jobs.Granularity{jobs.PerImage, jobs.PerNode} {
			t.Run(c.name+"/"+granularity.String(), func(t *testing.T) {
				g := NewWithT(t)
				objs := []client.Object{node("a"), node("b"), imageCache("c", img, "redis:7")}
				if c.ns != nil {
					objs = append(objs, c.ns)
				}
				h := newHarness(t, Config{Granularity: granularity}, objs...)
				reads := 0
				h.r.APIReader = interceptor.NewClient(h.api, interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if m, ok := obj.(*metav1.PartialObjectMetadata); ok && m.Kind == "Namespace" && c.readErr != nil {
							reads++
							if c.n == 0 || reads <= c.n {
								return c.readErr
							}
						}
						return cl.Get(ctx, key, obj, opts...)
					},
				})
				_, err := h.step("c")
				if c.retried {
					g.Expect(err).To(HaveOccurred())
					g.Expect(h.jobs("c")).To(BeEmpty(), "nothing starts before the namespace is read")
					g.Expect(h.status("c").Status).To(BeEmpty())
				}
				h.settleDown("c")
				js := h.jobs("c")
				g.Expect(js).NotTo(BeEmpty())
				for _, j := range js {
					spec := j.Spec.Template.Spec
					for _, ct := range append(spec.InitContainers, spec.Containers...) {
						g.Expect(ct.SecurityContext.RunAsUser).To(Equal(ptr.To(c.want)), "Job %s container %s", j.Name, ct.Name)
					}
				}
				var warnings []string
				for _, e := range h.events() {
					if e != "Normal ImageCacheCreate "+v1alpha2.ImageCacheMessagePullingImages {
						warnings = append(warnings, e)
					}
				}
				if c.warning == "" {
					g.Expect(warnings).To(BeEmpty())
				} else {
					g.Expect(warnings).To(ConsistOf(HavePrefix(c.warning)))
				}
			})
		}
	}
}
