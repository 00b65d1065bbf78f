package imagecache

import (
	"context"
	"encoding/json"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// consumedAnnotations are the on-demand annotations an operation of kind
// acts on, with their values now. A purge answers both (purge wins, as in
// the original); a create or refresh pulls everything, which is what a
// refresh asks. An update or a new-node operation answers neither: a refresh
// asked for meanwhile still runs after it.
func consumedAnnotations(kind plan.Operation, annotations map[string]string) map[string]string {
	var keys []string
	switch kind {
	case plan.Purge:
		keys = []string{v1alpha2.PurgeAnnotation, v1alpha2.RefreshAnnotation}
	case plan.Create, plan.Refresh:
		keys = []string{v1alpha2.RefreshAnnotation}
	}
	var out map[string]string
	for _, k := range keys {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// consumeAnnotations removes the annotations an operation acted on, each
// only if it still has the value it had when the operation started: one set
// again meanwhile with another value (a GitOps tool stamping the time, a
// user) is a new request, kept for the next operation. The JSON patch tests
// the value and removes the key in one write, so nothing can slip between.
func (r *Reconciler) consumeAnnotations(ctx context.Context, cache *v1alpha2.ImageCache, consumes map[string]string) error {
	for key, value := range consumes {
		path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
		body, err := json.Marshal([]map[string]any{
			{"op": "test", "path": path, "value": value},
			{"op": "remove", "path": path},
		})
		if err != nil {
			return err
		}
		target := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: cache.Namespace, Name: cache.Name}}
		err = r.Client.Patch(ctx, target, client.RawPatch(types.JSONPatchType, body))
		// A failed test (the value changed, or the key is gone already)
		// comes back as Invalid: nothing to remove.
		if err != nil && !apierrors.IsInvalid(err) && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
