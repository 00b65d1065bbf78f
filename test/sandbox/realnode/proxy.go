package realnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// kube-proxy runs in iptables mode. The kernel would take nftables mode too (it needs 5.13
// and nft 1.0.1; this host has more), but iptables mode needs nothing new from the node's
// clean-up: the journal already takes back every iptables chain and rule it did not find
// (the kubelet's own go the same way), and TestNode holds the host to it. In nftables mode
// kube-proxy's tables would be a second kind of host change to journal and undo. On
// Debian's iptables-nft its rules are nf_tables rules anyway.
//
// What it may change on the host is kept small: localhost NodePorts off (they need the
// route_localnet sysctl), NodePorts only on the gateway address (never on the machine's
// own interfaces), and the conntrack limits and timeouts left as they are (zero means
// "do not set"), so that it writes no sysctl.

func (n *Node) startProxy(ctx context.Context, sb *sandbox.Sandbox, binDir string, subnet *net.IPNet, certPEM, keyPEM []byte) error {
	kubeconfig, err := n.writeKubeconfig(sb, "kube-proxy", certPEM, keyPEM)
	if err != nil {
		return err
	}
	ports, err := sandbox.FreePorts(2)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
bindAddressHardFail: true
mode: iptables
iptables:
  localhostNodePorts: false
clusterCIDR: %q
detectLocalMode: ClusterCIDR
nodePortAddresses: [%q]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.name, ports[0], ports[1], subnet.String(), gateway(subnet).String()+"/32")
	if err := os.WriteFile(n.configPath("kube-proxy.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	if n.proxy, err = sandbox.StartChild(n.logDir, "kube-proxy", filepath.Join(binDir, "kube-proxy"),
		"--config="+n.configPath("kube-proxy.yaml"), "--v=1"); err != nil {
		return err
	}
	// Synced once the Service's rule leads to the forwarder: from then on a pod's first
	// connection to 10.96.0.1 reaches the API server.
	want := "--to-destination " + n.fwd.addr().String()
	var last error
	return n.waitFor(ctx, "kube-proxy's rule for the kubernetes Service", func() (bool, error) {
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").Output()
		if err != nil {
			last = err
			return false, nil
		}
		return strings.Contains(string(out), want), nil
	}, func() error { return last })
}
