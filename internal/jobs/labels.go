// Package jobs builds the pull and delete Jobs of an ImageCache operation.
// It is pure: the same work and options always give the same Job, which is
// what lets the controller create Jobs idempotently under fixed names.
package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Labels kept from the original, so users' selectors and the start-up
// clean-up keep finding Jobs, plus ours for operations and results.
const (
	LabelApp           = "app"
	LabelAppValue      = "kubefledged"
	LabelManager       = "kubefledged"
	LabelManagerValue  = "kubefledged-image-manager"
	LabelImageCache    = "imagecache"
	LabelController    = "controller"
	LabelControllerVal = "fledged"
	LabelCacheUID      = "kubefledged.io/imagecache-uid"
	LabelOperation     = "kubefledged.io/operation"
	LabelKind          = "kubefledged.io/job-kind"
	LabelResult        = "kubefledged.io/result"
	// LabelCacheNamespace is the cache's namespace, on a delete Job that
	// runs in the controller's (Options.DeleteNamespace).
	LabelCacheNamespace = "kubefledged.io/imagecache-namespace"
	// AnnotationCache is NAMESPACE/NAME of the cache a delete Job in the
	// controller's namespace works for: it has no owner reference.
	AnnotationCache     = "kubefledged.io/imagecache"
	AnnotationImage     = "kubefledged.io/image"
	AnnotationNode      = "kubefledged.io/node"
	AnnotationRuntime   = "kubefledged.io/container-runtime"
	AnnotationResultMsg = "kubefledged.io/result-message"
)

// Results a retained Job is labelled with, so that
// `kubectl get jobs -l imagecache=NAME,kubefledged.io/result=failed` lists the
// failures of a cache's latest operation.
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
	ResultExpired   = "expired"
)

// ManagedSelector selects every Job the controller has ever made, in any
// namespace: the start-up clean-up deletes all of them.
func ManagedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelApp: LabelAppValue, LabelManager: LabelManagerValue})
}

// CacheOf is the cache a Job of ours works for, NAMESPACE and NAME: its
// controller's when it has one, else the one AnnotationCache names.
func CacheOf(namespace string, owners []metav1.OwnerReference, annotations map[string]string) (cacheNS, cacheName string, ok bool) {
	for _, ref := range owners {
		if ref.Controller != nil && *ref.Controller {
			if ref.Kind != "ImageCache" || ref.APIVersion != v1alpha2.GroupVersion.String() {
				return "", "", false
			}
			return namespace, ref.Name, true
		}
	}
	cacheNS, cacheName, ok = strings.Cut(annotations[AnnotationCache], "/")
	return cacheNS, cacheName, ok && cacheNS != "" && cacheName != ""
}

// CacheSelector selects the Jobs of the cache NAMESPACE/NAME that run in
// another namespace than the cache's (the delete Jobs).
func CacheSelector(cacheNS, cacheName string) labels.Set {
	return labels.Set{LabelApp: LabelAppValue, LabelManager: LabelManagerValue,
		LabelImageCache: CacheLabelValue(cacheName), LabelCacheNamespace: cacheNS}
}

// CacheLabelValue is the value of the imagecache label for a cache name. Names
// longer than a label value allows are cut and suffixed with a hash, so they
// stay unique; short names are kept as the original did.
func CacheLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := shortHash(name)
	cut := strings.TrimRight(name[:min(len(name), validation.LabelValueMaxLength-len(h)-1)], "-._")
	return cut + "-" + h
}

func shortHash(parts ...string) string {
	sum := sha256.New()
	for _, p := range parts {
		sum.Write([]byte(p))
		sum.Write([]byte{0})
	}
	return hex.EncodeToString(sum.Sum(nil))[:10]
}
