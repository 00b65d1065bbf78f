// Package fakeapi is what the controllers' unit tests share to stand controller-runtime's
// fake client in for the API server: the scheme and REST mapper of the objects they handle,
// the API server's answer to a JSON patch that does not apply, and the Events a
// FakeRecorder caught. Each controller's harness records and injects what it needs on top.
package fakeapi

import (
	"errors"
	"net/http"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Scheme and RESTMapper are built here rather than taken from internal/commands, which
// imports the controllers, and once per test binary: building the mapper was most of a
// short test's time.
var (
	Scheme = sync.OnceValue(func() *runtime.Scheme {
		s := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(s))
		utilruntime.Must(v1alpha2.AddToScheme(s))
		return s
	})
	RESTMapper = sync.OnceValue(func() meta.RESTMapper { return testrestmapper.TestOnlyStaticRESTMapper(Scheme()) })
)

// AsAPIServer answers a JSON patch that does not apply (a failed test op, a missing path)
// as the API server does, 422 Invalid. The fake client applies the test op faithfully but
// returns json-patch's own error, which no apierrors predicate recognises.
func AsAPIServer(p client.Patch, err error) error {
	var status apierrors.APIStatus
	if err == nil || p.Type() != types.JSONPatchType || errors.As(err, &status) {
		return err
	}
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", err.Error(), 0, false)
}

// Events drains the Events rec caught since the last call, each as "Type Reason Message".
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
