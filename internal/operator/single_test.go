package operator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/operator-framework/helm-operator-plugins/pkg/values"
)

func kf(ns, name string, created time.Time, deleting bool) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"k": "v"}}}
	u.SetGroupVersionKind(KubeFledgedGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(ns + "/" + name))
	u.SetCreationTimestamp(metav1.NewTime(created))
	if deleting {
		u.SetDeletionTimestamp(&metav1.Time{Time: created.Add(time.Hour)})
	}
	return u
}

func TestOneInstall(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := kf("team-a", "kubefledged", t0, false)
	b := kf("team-b", "kubefledged", t0.Add(time.Minute), false)
	sameTime := kf("team-0", "kubefledged", t0, false)
	aGoing := kf("team-a", "kubefledged", t0, true)
	identity := values.TranslatorFunc(func(_ context.Context, u *unstructured.Unstructured) (chartutil.Values, error) {
		return specOf(u)
	})
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: KubeFledgedGVK.Group, Resource: "kubefledgeds"}, "", errors.New("no"))
	for _, tc := range []struct {
		name    string
		items   []unstructured.Unstructured
		listErr error
		obj     unstructured.Unstructured
		wantErr string
	}{
		{name: "alone", items: []unstructured.Unstructured{a}, obj: a},
		{name: "the oldest installs", items: []unstructured.Unstructured{b, a}, obj: a},
		{name: "a younger one is refused, naming the first", items: []unstructured.Unstructured{a, b}, obj: b,
			wantErr: "already installed in this cluster by KubeFledged team-a/kubefledged"},
		{name: "same age: by namespace", items: []unstructured.Unstructured{a, sameTime}, obj: a,
			wantErr: "by KubeFledged team-0/kubefledged"},
		{name: "the first being deleted lets the next install", items: []unstructured.Unstructured{aGoing, b}, obj: b},
		{name: "not allowed to list: the check is skipped", listErr: forbidden, obj: b},
		{name: "another list error is an error", listErr: errors.New("etcd down"), obj: a, wantErr: "etcd down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := oneInstall(func(context.Context) ([]unstructured.Unstructured, error) { return tc.items, tc.listErr }, identity)
			vals, err := tr.Translate(context.Background(), &tc.obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Translate = %v, %v; want an error with %q", vals, err, tc.wantErr)
				}
				return
			}
			if err != nil || vals["k"] != "v" {
				t.Fatalf("Translate = %v, %v; want the spec", vals, err)
			}
		})
	}
}

func TestOwnNamespace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	listed := 0
	chain := ownNamespace("kube-fledged", oneInstall(func(context.Context) ([]unstructured.Unstructured, error) {
		listed++
		return nil, nil
	}, values.TranslatorFunc(func(_ context.Context, u *unstructured.Unstructured) (chartutil.Values, error) {
		return specOf(u)
	})))
	for _, tc := range []struct {
		name    string
		obj     unstructured.Unstructured
		wantErr string
	}{
		{name: "the operator's namespace installs", obj: kf("kube-fledged", "kubefledged", t0, false)},
		{name: "a tenant's namespace is ignored, naming both", obj: kf("team-a", "kubefledged", t0, false),
			wantErr: "ignored: the operator installs kube-fledged only from a KubeFledged in its own namespace, kube-fledged, not from one in team-a"},
		{name: "a namespace that starts like it is another", obj: kf("kube-fledged-x", "kubefledged", t0, false),
			wantErr: "not from one in kube-fledged-x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed = 0
			vals, err := chain.Translate(context.Background(), &tc.obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Translate = %v, %v; want an error with %q", vals, err, tc.wantErr)
				}
				if listed != 0 {
					t.Errorf("an ignored KubeFledged was weighed against the installs (listed %d times)", listed)
				}
				return
			}
			if err != nil || vals["k"] != "v" {
				t.Fatalf("Translate = %v, %v; want the spec", vals, err)
			}
		})
	}
}
