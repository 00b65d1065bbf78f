package golden

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func testPod(t *testing.T, r Rendered) *corev1.Pod {
	t.Helper()
	return one[corev1.Pod](t, r.FindHook("Pod", "kubefledged-test"), "test Pod")
}

func kinds(ms []releaseutil.Manifest) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Head.Kind)
	}
	return out
}

// The `helm test` hooks: a Pod running `kubefledged check` where the
// controller may run, as a ServiceAccount that may do what the check does
// and nothing more.
func TestTestHooks(t *testing.T) {
	c := loadChart(t)
	t.Run("defaults", func(t *testing.T) {
		r := render(t, c, "defaults")
		if got := kinds(r.Hooks); !slices.Equal(got, []string{"ServiceAccount", "Role", "RoleBinding", "Pod"}) {
			t.Errorf("hooks %v", got)
		}
		for _, h := range r.Hooks {
			if !strings.Contains(h.Content, "helm.sh/hook: test\n") || !strings.Contains(h.Content, "helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded") {
				t.Errorf("%s %s is not a test hook kept on failure:\n%s", h.Head.Kind, h.Head.Metadata.Name, h.Content)
			}
		}
		p := testPod(t, r)
		if p.Spec.ServiceAccountName != "kubefledged-test" || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("pod spec: %s %s", p.Spec.ServiceAccountName, p.Spec.RestartPolicy)
		}
		role := &rbacv1.Role{}
		if err := yaml.Unmarshal([]byte(r.FindHook("Role", "kubefledged-test")[0].Content), role); err != nil {
			t.Fatal(err)
		}
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{"kubefledged.io"}, Resources: []string{"imagecaches"}, Verbs: []string{"create"}},
		}
		if !reflect.DeepEqual(role.Rules, want) {
			t.Errorf("test Role rules %+v", role.Rules)
		}
		d := deployment(t, r)
		if !reflect.DeepEqual(p.Spec.SecurityContext, d.Spec.Template.Spec.SecurityContext) ||
			!reflect.DeepEqual(p.Spec.Containers[0].SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext) {
			t.Error("the test Pod is not as restricted as the controller")
		}
	})
	t.Run("scheduling", func(t *testing.T) {
		r := render(t, c, "scheduling")
		p, d := testPod(t, r).Spec, deployment(t, r).Spec.Template.Spec
		if !reflect.DeepEqual(p.NodeSelector, d.NodeSelector) || !reflect.DeepEqual(p.Tolerations, d.Tolerations) || !reflect.DeepEqual(p.Affinity, d.Affinity) {
			t.Errorf("the test Pod is not placed as the controller: %v %v %v", p.NodeSelector, p.Tolerations, p.Affinity)
		}
	})
	t.Run("rbac-off", func(t *testing.T) {
		r := render(t, c, "rbac-off")
		if got := kinds(r.Hooks); !slices.Equal(got, []string{"Pod"}) {
			t.Errorf("hooks %v", got)
		}
		if sa := testPod(t, r).Spec.ServiceAccountName; sa != deployment(t, r).Spec.Template.Spec.ServiceAccountName {
			t.Errorf("without RBAC the test runs as %s, not the controller's ServiceAccount", sa)
		}
	})
	t.Run("webhook-disabled", func(t *testing.T) {
		r := render(t, c, "webhook-disabled")
		if args := testPod(t, r).Spec.Containers[0].Args; !slices.Contains(args, "--webhook=false") {
			t.Errorf("args %v", args)
		}
		if strings.Contains(r.FindHook("Role", "kubefledged-test")[0].Content, "imagecaches") {
			t.Error("the test may create ImageCaches without a webhook to check")
		}
	})
	t.Run("off", func(t *testing.T) {
		r, err := Render(c, map[string]any{"tests": map[string]any{"enabled": false}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Hooks) != 0 {
			t.Errorf("tests.enabled=false renders %v", kinds(r.Hooks))
		}
	})
}
