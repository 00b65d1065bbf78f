package framework

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubefledged/kube-fledged/internal/commands"
)

// Scheme is what a test's client reads and writes: the controller's types (the built-in
// ones and ImageCache) and CustomResourceDefinitions, which tests install and check.
func Scheme() *runtime.Scheme {
	s := commands.Scheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err) // a static registration: fails for every run or none
	}
	return s
}
