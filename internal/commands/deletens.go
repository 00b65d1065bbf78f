package commands

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// checkDeleteNamespace stops the controller at start when the delete Jobs
// could never run where --delete-job-namespace puts them: a namespace that
// does not exist, or one whose Pod Security level refuses them. Without
// this, the controller would start healthy and every purge would fail.
// An API error other than NotFound (Forbidden to a narrowed role, or the
// server not answering yet) leaves the Jobs' own events to tell.
func checkDeleteNamespace(ctx context.Context, c client.Client, name string) error {
	if name == "" {
		return nil
	}
	ns := &corev1.Namespace{}
	err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("--delete-job-namespace %q: no such namespace: create it (labelled "+
			"pod-security.kubernetes.io/enforce=privileged), or pass --delete-job-namespace=\"\" to run the delete Jobs in each cache's namespace", name)
	case err != nil:
		log.FromContext(ctx).Info("could not read --delete-job-namespace; going on", "namespace", name, "error", err.Error())
		return nil
	}
	return jobs.DeleteNamespaceRefusal(ns)
}
