package jobs

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The Pod Security admission label a namespace enforces a level with.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// ValidateDeleteNamespaceName refuses a --delete-job-namespace that no
// namespace could have, before anything is asked of the API server.
func ValidateDeleteNamespaceName(name string) error {
	if name == "" {
		return nil // each cache's own namespace
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("--delete-job-namespace %q: %s", name, errs[0])
	}
	return nil
}

// DeleteNamespaceRefusal says why the delete Jobs could never run in ns, or
// nil. A delete needs the runtime's socket (a hostPath) and root, which
// Pod Security's baseline and restricted levels both refuse: found at
// start-up, that is one clear error instead of every purge failing later
// with NoPod. A cluster-wide default level set in the API server's
// admission configuration is not visible here; the Jobs' FailedCreate
// events still report it.
func DeleteNamespaceRefusal(ns *corev1.Namespace) error {
	level := ns.Labels[podSecurityEnforce]
	switch level {
	case "", "privileged":
		return nil
	}
	return fmt.Errorf("--delete-job-namespace %q enforces Pod Security %q, which refuses the delete Jobs' pods "+
		"(they mount the container runtime's socket and run as root): label it %s=privileged, "+
		"or pass --delete-job-namespace=\"\" to run them in each cache's namespace", ns.Name, level, podSecurityEnforce)
}
