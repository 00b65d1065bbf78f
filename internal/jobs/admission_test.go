package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidateDeleteNamespaceName(t *testing.T) {
	for _, tc := range []struct{ name, wantErr string }{
		{name: ""},
		{name: "kube-fledged"},
		{name: "Kube_Fledged", wantErr: `--delete-job-namespace "Kube_Fledged": a lowercase RFC 1123 label`},
		{name: "a.b", wantErr: "must not contain dots"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateDeleteNamespaceName(tc.name)
			if tc.wantErr == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
				return
			}
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
}

func TestDeleteNamespaceRefusal(t *testing.T) {
	for _, tc := range []struct {
		level   string
		refused bool
	}{
		{level: ""},
		{level: "privileged"},
		{level: "baseline", refused: true},
		{level: "restricted", refused: true},
	} {
		t.Run(tc.level, func(t *testing.T) {
			g := NewWithT(t)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ops"}}
			if tc.level != "" {
				ns.Labels = map[string]string{podSecurityEnforce: tc.level}
			}
			err := DeleteNamespaceRefusal(ns)
			if !tc.refused {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(And(ContainSubstring(`"ops" enforces Pod Security "`+tc.level+`"`),
				ContainSubstring("pod-security.kubernetes.io/enforce=privileged"))))
		})
	}
}
