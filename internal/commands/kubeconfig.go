package commands

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restConfig loads the cluster config: --kubeconfig, else in-cluster, else
// $KUBECONFIG or ~/.kube/config.
func restConfig(kubeconfig, master string) (*rest.Config, error) {
	if kubeconfig == "" && master == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: master}}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no cluster to talk to: %w", err)
	}
	return cfg, nil
}
