package framework

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Condition reads the condition of type typ from an object the tests hold unstructured (a
// KubeFledged resource, OLM's Subscription): its status, reason and message, all empty
// when the object has no such condition.
func Condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
			return status, reason, message
		}
	}
	return "", "", ""
}
