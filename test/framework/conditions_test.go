package framework

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCondition(t *testing.T) {
	g := NewWithT(t)
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Initialized", "status": "True"},
		map[string]any{"type": "Deployed", "status": "False", "reason": "InstallError", "message": "no chart"},
	}}}}
	st, reason, msg := Condition(u, "Deployed")
	g.Expect([]string{st, reason, msg}).To(Equal([]string{"False", "InstallError", "no chart"}))
	st, reason, msg = Condition(u, "ReleaseFailed")
	g.Expect([]string{st, reason, msg}).To(Equal([]string{"", "", ""}))
	st, _, _ = Condition(&unstructured.Unstructured{Object: map[string]any{}}, "Deployed")
	g.Expect(st).To(BeEmpty(), "no status at all")
}
