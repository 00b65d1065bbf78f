package operator

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/operator-framework/helm-operator-plugins/pkg/values"
)

// firstInstall is the KubeFledged, among items, that may install
// kube-fledged: the oldest one not being deleted, then by namespace and
// name (all in one namespace now, but the order must not depend on it), so that every reconcile of every CR agrees without writing anything.
func firstInstall(items []unstructured.Unstructured) *unstructured.Unstructured {
	var first *unstructured.Unstructured
	for i := range items {
		u := &items[i]
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		if first == nil || before(u, first) {
			first = u
		}
	}
	return first
}

func before(a, b *unstructured.Unstructured) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

// ownNamespace refuses the values of every KubeFledged outside ns, the
// operator's own namespace. A KubeFledged's values decide what runs as root
// on every node (the Jobs' images, the delete Jobs' ServiceAccount, the
// controller's flags), and under OLM the edit and admin roles of every
// namespace in the OperatorGroup's scope may write KubeFledged: only the
// operator's namespace is surely the admin's. The refusal is the
// reconciler's Irreconcilable condition with this message, at the CR the
// user made; nothing is installed from it.
func ownNamespace(ns string, next values.Translator) values.Translator {
	return values.TranslatorFunc(func(ctx context.Context, obj *unstructured.Unstructured) (chartutil.Values, error) {
		if obj.GetNamespace() != ns {
			return nil, fmt.Errorf("ignored: the operator installs kube-fledged only from a KubeFledged in its own namespace, %s, "+
				"not from one in %s: a KubeFledged decides what runs as root on every node, and another namespace's editors could write it "+
				"(docs/security.md); create it in %s", ns, obj.GetNamespace(), ns)
		}
		return next.Translate(ctx, obj)
	})
}

// oneInstall refuses the values of every KubeFledged but the first one in
// the operator's namespace. Two releases would run two controllers that
// each pull everything (the controllers' own claim keeps the second
// standing by, see internal/claim); the refusal tells the user at the CR
// they just made, as the reconciler's Irreconcilable condition with this
// message. The first one gone, the next reconcile of the other installs it.
//
// list reads the KubeFledged resources of that namespace only: one
// elsewhere installs nothing (ownNamespace), so it must not keep the
// admin's from installing either. Should the operator not be allowed to
// list them, it cannot know: the check is skipped and the controllers'
// claim remains.
func oneInstall(list func(context.Context) ([]unstructured.Unstructured, error), next values.Translator) values.Translator {
	return values.TranslatorFunc(func(ctx context.Context, obj *unstructured.Unstructured) (chartutil.Values, error) {
		items, err := list(ctx)
		switch {
		case apierrors.IsForbidden(err):
		case err != nil:
			return nil, fmt.Errorf("listing KubeFledged resources to keep one install per cluster: %w", err)
		default:
			if first := firstInstall(items); first != nil && first.GetUID() != obj.GetUID() {
				return nil, fmt.Errorf("kube-fledged is already installed in this cluster by KubeFledged %s/%s: "+
					"one install per cluster; delete this one (it installs once that one is gone)",
					first.GetNamespace(), first.GetName())
			}
		}
		return next.Translate(ctx, obj)
	})
}

// lister lists the objects of gvk in namespace ns through c.
func lister(c client.Reader, gvk schema.GroupVersionKind, ns string) func(context.Context) ([]unstructured.Unstructured, error) {
	return func(ctx context.Context) ([]unstructured.Unstructured, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		return l.Items, nil
	}
}
