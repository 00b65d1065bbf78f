package commands

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestCheckDeleteNamespace(t *testing.T) {
	forbidden := interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "ops", nil)
	}}
	ns := func(level string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}
		if level != "" {
			n.Labels = map[string]string{"pod-security.kubernetes.io/enforce": level}
		}
		return n
	}
	for _, tc := range []struct {
		name      string
		flag      string
		existing  *corev1.Namespace
		intercept *interceptor.Funcs
		wantErr   string
	}{
		{name: "off: each cache's namespace", flag: ""},
		{name: "privileged", flag: "ops", existing: ns("privileged")},
		{name: "no level", flag: "ops", existing: ns("")},
		{name: "missing", flag: "ops", wantErr: `--delete-job-namespace "ops": no such namespace`},
		{name: "restricted", flag: "ops", existing: ns("restricted"), wantErr: `enforces Pod Security "restricted"`},
		{name: "baseline", flag: "ops", existing: ns("baseline"), wantErr: `enforces Pod Security "baseline"`},
		{name: "forbidden to read: the Jobs' events tell", flag: "ops", intercept: &forbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder()
			if tc.existing != nil {
				b = b.WithObjects(tc.existing)
			}
			if tc.intercept != nil {
				b = b.WithInterceptorFuncs(*tc.intercept)
			}
			err := checkDeleteNamespace(context.Background(), b.Build(), tc.flag)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}
