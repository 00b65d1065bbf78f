package operator

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func kubeFledged(ns, name string, conds ...map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(KubeFledgedGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
	return u
}

// Each KubeFledged gets every condition, 1 where it is True: a failed
// upgrade shows as ReleaseFailed 1 beside the Deployed 1 of the release
// still running, and one not yet reconciled as zeros.
func TestReleaseConditions(t *testing.T) {
	scheme := runtime.NewScheme()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		kubeFledged("a", "ok", map[string]any{"type": "Deployed", "status": "True"}, map[string]any{"type": "ReleaseFailed", "status": "False"}),
		kubeFledged("b", "upgrade-failed", map[string]any{"type": "Deployed", "status": "True"}, map[string]any{"type": "ReleaseFailed", "status": "True", "reason": "UpgradeError"}),
		kubeFledged("b", "new"),
	).Build()
	registerReleases(c)
	want := `
# HELP kubefledged_operator_release_condition 1 when the condition of the KubeFledged's Helm release is True, else 0 (Deployed, ReleaseFailed, Irreconcilable).
# TYPE kubefledged_operator_release_condition gauge
kubefledged_operator_release_condition{condition="Deployed",kubefledged="ok",kubefledged_namespace="a"} 1
kubefledged_operator_release_condition{condition="Irreconcilable",kubefledged="ok",kubefledged_namespace="a"} 0
kubefledged_operator_release_condition{condition="ReleaseFailed",kubefledged="ok",kubefledged_namespace="a"} 0
kubefledged_operator_release_condition{condition="Deployed",kubefledged="new",kubefledged_namespace="b"} 0
kubefledged_operator_release_condition{condition="Irreconcilable",kubefledged="new",kubefledged_namespace="b"} 0
kubefledged_operator_release_condition{condition="ReleaseFailed",kubefledged="new",kubefledged_namespace="b"} 0
kubefledged_operator_release_condition{condition="Deployed",kubefledged="upgrade-failed",kubefledged_namespace="b"} 1
kubefledged_operator_release_condition{condition="Irreconcilable",kubefledged="upgrade-failed",kubefledged_namespace="b"} 0
kubefledged_operator_release_condition{condition="ReleaseFailed",kubefledged="upgrade-failed",kubefledged_namespace="b"} 1
`
	if err := testutil.CollectAndCompare(releasesCollector, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
