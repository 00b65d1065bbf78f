// Package v1alpha2 holds the ImageCache API, kept field for field compatible
// with the original kube-fledged so that its manifests apply as they are,
// except the shapes its webhook let through and ours refuses (invalid image
// references, labels or Secret names, one image spelt two ways in a list,
// oversized specs): docs/install.md lists them.
//
// +kubebuilder:object:generate=true
// +groupName=kubefledged.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of ImageCache.
	GroupVersion = schema.GroupVersion{Group: "kubefledged.io", Version: "v1alpha2"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
