package operator

import "k8s.io/apimachinery/pkg/runtime/schema"

// KubeFledgedGVK is the kind whose spec is the kube-fledged chart's values.
// watches.yaml names it for the reconciler; it lives here, beside the code
// that serves it, so that the CRD generator and the tests take it from the
// runtime and not the reverse.
var KubeFledgedGVK = schema.GroupVersionKind{Group: "charts.helm.kubefledged.io", Version: "v1alpha2", Kind: "KubeFledged"}
