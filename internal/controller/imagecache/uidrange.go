package imagecache

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// pullUser reads, once per operation, the UID the cache's pull containers
// run as from its namespace's OpenShift UID range (jobs.PullUser). It reads
// the API server, not a cache: one small read per operation costs less than
// an informer holding every namespace, and a range OpenShift has just
// written is seen at once. A namespace it may not read, or a range it
// cannot parse, gives the default with a Warning on the cache, since on
// OpenShift every pull would then be refused; other errors are retried.
func (r *Reconciler) pullUser(ctx context.Context, cache *v1alpha2.ImageCache) (int64, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: cache.Namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
		// Being deleted with the cache in it: nothing will run anyway.
		return jobs.DefaultPullUser, nil
	case apierrors.IsForbidden(err):
		err = fmt.Errorf("reading namespace %s for its %s annotation: %w", cache.Namespace, jobs.AnnotationUIDRange, err)
	case err != nil:
		return 0, err
	}
	user := jobs.DefaultPullUser
	if err == nil {
		user, err = jobs.PullUser(ns.Annotations)
	}
	if err != nil {
		log.FromContext(ctx).Info("pull containers run as the default UID", "uid", user, "error", err.Error())
		r.Recorder.Event(cache, corev1.EventTypeWarning, "UIDRangeUnreadable",
			fmt.Sprintf("pull containers run as UID %d, which OpenShift's restricted-v2 refuses outside the namespace's range: %v", user, err))
	}
	return user, nil
}
