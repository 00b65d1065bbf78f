// Package realnode adds a real node to a running sandbox: a kubelet on containerd 1.7 (built
// by make realnode-tools; runc is Debian's), with a bridge CNI network and an OCI registry served from the test process, all on
// 127.0.0.1. kwok's fake nodes prove the controller's flow at scale but pull nothing; on
// this node the pull Job's containers really run, a missing image really fails with the
// runtime's own message, and the delete Job really removes images through CRI.
//
// A kubelet changes the host (sysctls, iptables chains, cgroups, mounts, a bridge, files
// under /run and /var). Start records the host's state in a journal before the first
// change, and Stop, or the next Start after a test binary died, puts all of it back. Only
// one real node runs per host: a second Start waits for the first to stop.
package realnode

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode/host"
)

// Options configures Start. The zero value is a working node.
type Options struct {
	// Dir holds containerd's and the kubelet's state, their configs and logs/. Empty means
	// $KUBEFLEDGED_REALNODE_DIR, else a fresh temporary dir that Stop removes; a given Dir
	// keeps its logs/ after Stop, for reading after a failed test.
	Dir string
	// BinDir holds kubelet, kube-proxy, containerd and containerd-shim-runc-v2. Empty:
	// $KUBEFLEDGED_BIN_DIR, else <repo root>/bin.
	BinDir string
	// NodeName defaults to the host name when it is a valid node name, else "realnode".
	NodeName string
	// Bridge and Subnet are the pod network; defaults kfbr0 and 10.89.117.0/24, chosen to
	// meet nothing a developer's machine commonly has.
	Bridge string
	Subnet string
	// Mirrors are the registries whose images this node pulls from its own registry, by
	// their usual names: ghcr.io/kubefledged/kubefledged:v0.11.0 comes from the local
	// registry's kubefledged/kubefledged:v0.11.0 (see PushAs). Nil means DefaultMirrors;
	// empty means none.
	Mirrors []string
}

const (
	defaultBridge = "kfbr0"
	defaultSubnet = "10.89.117.0/24"
	// clusterDNS is an address in the sandbox's service range, as a cluster's DNS would be.
	clusterDNS = "10.96.0.10"
	// PauseRepo is the pod sandbox image's repository in the node's registry.
	PauseRepo = "pause:realnode"
	stopGrace = 3 * time.Second
	// startTimeout bounds a Start whose ctx has no deadline; it includes waiting for
	// another package's node to stop. `go test ./...` runs the real-node packages side by
	// side, so one may wait for all the others (e2e/install alone holds the host for six
	// minutes); 8 minutes was once not enough. The suites that start their node through
	// the framework wait as long (its setup deadline).
	startTimeout = 25 * time.Minute
)

// DefaultMirrors are the registries of our chart's image and of the images the samples
// cache, and the sandbox's never-pulling fail.invalid: a pull of them asks the node's
// registry and nothing off the machine.
var DefaultMirrors = []string{"ghcr.io", "docker.io", "us.gcr.io", "registry.k8s.io", "quay.io", "fail.invalid"}

// ErrInUse means another real node holds this host (or left a part of one running).
var ErrInUse = host.ErrInUse

// Node is a running real node. Its methods are safe for concurrent use.
type Node struct {
	name       string
	dir        string
	logDir     string
	socket     string
	journal    *host.Journal
	lock       *host.Lock
	reg        *registryServer
	cri        *criClient
	containerd *sandbox.Child
	proxy      *sandbox.Child
	// kubeletMu guards the kubelet, which RestartKubelet replaces, and what it restarts with.
	kubeletMu   sync.Mutex
	kubelet     *sandbox.Child
	kubeletBin  string
	kubeletArgs []string
	kubeletBase string
	fwd         *forwarder
	mirrors     []string
	client      kubernetes.Interface
	readyIn     time.Duration

	stopOnce sync.Once
	stopErr  error
}

// Start brings up the node beside sb's kwok nodes and returns once it is Ready. It returns an
// *UnavailableError (see Check) when the machine cannot run one, and an error wrapping
// ErrInUse when another node held the host until ctx ended. On any error everything started
// is stopped and the host restored.
func Start(ctx context.Context, sb *sandbox.Sandbox, o Options) (_ *Node, err error) {
	begin := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	if err := Check(o); err != nil {
		return nil, err
	}
	if o.Bridge == "" {
		o.Bridge = defaultBridge
	}
	if o.Subnet == "" {
		o.Subnet = defaultSubnet
	}
	_, subnet, err := net.ParseCIDR(o.Subnet)
	if err != nil {
		return nil, fmt.Errorf("realnode: subnet: %w", err)
	}
	binDir, err := repo.BinDir(o.BinDir)
	if err != nil {
		return nil, err
	}
	n := &Node{name: o.NodeName, mirrors: o.Mirrors}
	if o.Mirrors == nil {
		n.mirrors = DefaultMirrors
	}
	if n.name == "" {
		n.name = defaultNodeName()
	}
	n.client, err = kubernetes.NewForConfig(sb.Config())
	if err != nil {
		return nil, err
	}
	if n.lock, err = host.Acquire(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = fmt.Errorf("%w; and stopping: %v", err, serr)
			}
		}
	}()
	if err := recoverHost(); err != nil {
		return nil, err
	}
	if err := refuseShared(o.Bridge, subnet); err != nil {
		return nil, err
	}

	if o.Dir == "" {
		o.Dir = os.Getenv("KUBEFLEDGED_REALNODE_DIR")
	}
	removeDir := o.Dir == ""
	if removeDir {
		if n.dir, err = os.MkdirTemp("", "kubefledged-realnode-"); err != nil {
			return nil, err
		}
	} else if n.dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	// From here on every change is undone from the journal, by Stop or by the next Start.
	j := host.Snapshot(n.dir, removeDir, o.Bridge)
	if err := j.Write(); err != nil {
		if removeDir {
			_ = os.RemoveAll(n.dir)
		}
		return nil, fmt.Errorf("realnode: journal: %w", err)
	}
	n.journal = j
	n.logDir = filepath.Join(n.dir, "logs")
	n.socket = filepath.Join(n.dir, "containerd", "containerd.sock")
	for _, d := range append([]string{"logs", "containerd"}, host.StateDirs...) {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return nil, err
		}
	}

	// The pause build and the kubelet's certificate need nothing else; containerd needs the
	// registry (its sandbox_image lives there).
	pauseDone := make(chan error, 1)
	pauseBin := filepath.Join(n.dir, "images", "pause")
	go func() {
		pauseDone <- repo.Build(ctx, "github.com/kubefledged/kube-fledged/test/sandbox/realnode/pause", pauseBin)
	}()
	type certResult struct {
		cert, key []byte
		err       error
	}
	certDone, proxyCertDone := make(chan certResult, 1), make(chan certResult, 1)
	go func() {
		c, k, err := clientCert(ctx, n.client, "system:node:"+n.name, []string{"system:nodes"}, certv1.KubeAPIServerClientKubeletSignerName, "realnode-"+n.name+"-")
		certDone <- certResult{c, k, err}
	}()
	go func() {
		// system:kube-proxy is bound to system:node-proxier by the bootstrap RBAC policy:
		// exactly a kube-proxy's rights.
		c, k, err := clientCert(ctx, n.client, "system:kube-proxy", nil, certv1.KubeAPIServerClientSignerName, "realnode-kube-proxy-")
		proxyCertDone <- certResult{c, k, err}
	}()
	if n.reg, err = startRegistry(); err != nil {
		return nil, err
	}
	if err := createBridge(o.Bridge, subnet); err != nil {
		return nil, err
	}
	target, err := apiTarget(sb.Config().Host)
	if err != nil {
		return nil, err
	}
	if n.fwd, err = startForwarder(net.JoinHostPort(gateway(subnet).String(), "0"), subnet, target); err != nil {
		return nil, err
	}
	if err := publishAPIEndpoint(ctx, n.client, n.fwd.addr()); err != nil {
		return nil, err
	}
	if err := n.startContainerd(ctx, binDir, subnet); err != nil {
		return nil, err
	}
	if err := <-pauseDone; err != nil {
		return nil, err
	}
	pause, err := BinaryImage(pauseBin, "/pause")
	if err != nil {
		return nil, err
	}
	pauseRef, err := n.reg.push(ctx, PauseRepo, pause)
	if err != nil {
		return nil, err
	}
	// Pulled now, through containerd's registry config, so that a broken pull path shows
	// here with its own error rather than as pods that never start.
	if err := n.PullImage(ctx, pauseRef); err != nil {
		return nil, err
	}
	cr := <-certDone
	if cr.err != nil {
		return nil, cr.err
	}
	if err := n.startKubelet(ctx, sb, binDir, cr.cert, cr.key); err != nil {
		return nil, err
	}
	// After the node is Ready: kube-proxy reads its Node for the node's addresses.
	pr := <-proxyCertDone
	if pr.err != nil {
		return nil, pr.err
	}
	if err := n.startProxy(ctx, sb, binDir, subnet, pr.cert, pr.key); err != nil {
		return nil, err
	}
	n.readyIn = time.Since(begin)
	return n, nil
}

// nodeName is a DNS label: what the kubelet accepts as --hostname-override.
var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// defaultNodeName prefers the host name: on these machines /etc/hosts maps it to 127.0.0.1,
// which is where the kubelet listens.
func defaultNodeName() string {
	h, err := os.Hostname()
	h = strings.ToLower(h)
	if err == nil && len(h) <= 63 && nodeName.MatchString(h) && !strings.HasPrefix(h, "sandbox-node-") {
		return h
	}
	return "realnode"
}

// recoverHost undoes a run whose test binary died before its node stopped: the lock is free
// again but its journal is still there.
func recoverHost() error {
	j, err := host.ReadJournal()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "realnode: undoing the host changes of a node that did not stop (pid %d, %s)\n", j.PID, j.Dir)
	uerr := j.Undo()
	if left := j.Leftovers(); len(left) > 0 {
		return fmt.Errorf("realnode: the host still has parts of an earlier node (journal %s kept): %s (undo: %v)", host.JournalPath, strings.Join(left, "; "), uerr)
	}
	return os.Remove(host.JournalPath)
}

// refuseShared refuses to start beside a kubelet or a pod network this package did not
// record: undoing the node would then tear down someone else's.
func refuseShared(bridge string, subnet *net.IPNet) error {
	if d := host.KubepodsDirs(); len(d) > 0 {
		return fmt.Errorf("%w: %s exists (a kubelet runs on this host, or one left its cgroups)", ErrInUse, d[0])
	}
	if host.LinkExists(bridge) {
		return fmt.Errorf("%w: network device %s exists", ErrInUse, bridge)
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
				return fmt.Errorf("%w: %s on %s overlaps the pod subnet %s", ErrInUse, ipn, i.Name, subnet)
			}
		}
	}
	return nil
}

func (n *Node) configPath(name string) string { return filepath.Join(n.dir, "config", name) }

func (n *Node) startContainerd(ctx context.Context, binDir string, subnet *net.IPNet) error {
	d := func(p string) string { return filepath.Join(n.dir, p) }
	hostsDir := filepath.Join(d("config/certs.d"), n.reg.host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		return err
	}
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+n.reg.host, "http://"+n.reg.host)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return err
	}
	// A mirror's hosts and server are all the local registry: containerd asks nothing else,
	// so a missing image is a 404 here rather than a lookup out on the network. (containerd
	// 1.6 refuses a hosts.toml without a [host] table, hence the same file as above.)
	for _, m := range n.mirrors {
		dir := filepath.Join(d("config/certs.d"), m)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(d("cni/net.d"), 0o755); err != nil {
		return err
	}
	gw := gateway(subnet)
	// Pods get a route to the Service range through the gateway, where kube-proxy's rules
	// wait, and no default route: nothing of theirs leaves the machine.
	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "kubefledged-realnode",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": %q}], "dataDir": %q}
  }]
}
`, n.journal.Bridge, subnet.String(), gw.String(), sandbox.ServiceCIDR, d("cni/ipam"))
	if err := os.WriteFile(d("cni/net.d/10-realnode.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	snapshotter := "native"
	if fs, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(fs), "\toverlay\n") {
		snapshotter = "overlayfs"
	}
	// Every path containerd would put on the host by default is moved into Dir; what
	// cannot be moved (shim sockets in /run/containerd/s, libcni's cache) is in the journal.
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # No process here may lower an oom_score_adj (no CAP_SYS_RESOURCE): without this every
  # pod sandbox fails with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %q
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, d("containerd/root"), d("containerd/state"), n.socket, n.socket+".ttrpc", d("containerd/opt"),
		n.reg.host+"/"+PauseRepo, snapshotter, d("containerd/runc"), cniBinDir(), d("cni/net.d"), d("config/certs.d"))
	if err := os.WriteFile(n.configPath("containerd.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	// containerd starts its runc shim by name from its PATH: binDir first, so that it is the
	// shim of its own version and not one a Debian package left in /usr/bin. runc is found
	// on the rest of PATH.
	env := []string{"PATH=" + binDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	var err error
	if n.containerd, err = sandbox.StartChildEnv(n.logDir, "containerd", filepath.Join(binDir, "containerd"), env,
		"--config", n.configPath("containerd.toml"), "--log-level", "warn"); err != nil {
		return err
	}
	if n.cri, err = dialCRI(n.socket); err != nil {
		return err
	}
	var last error
	return n.waitFor(ctx, "containerd's CRI service", func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ok, err := n.cri.ready(cctx)
		if errors.Is(err, errNoCRI) {
			return false, fmt.Errorf("%w; last lines of %s:\n%s", err, n.containerd.LogPath(), n.containerd.Tail(20))
		}
		if err != nil {
			last = err
		}
		return ok, nil
	}, func() error { return last })
}

// waitFor polls cond until it holds, a daemon dies, or ctx ends; lastErr explains a timeout.
func (n *Node) waitFor(ctx context.Context, what string, cond func() (bool, error), lastErr func() error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		for _, p := range []*sandbox.Child{n.containerd, n.kubeletChild(), n.proxy} {
			if p.Exited() {
				return fmt.Errorf("realnode: waiting for %s: %w", what, p.Failure())
			}
		}
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("realnode: waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			why := ctx.Err()
			if lastErr != nil && lastErr() != nil {
				why = fmt.Errorf("%w (last: %v)", why, lastErr())
			}
			return fmt.Errorf("realnode: waiting for %s: %w (logs in %s)", what, why, n.logDir)
		case <-t.C:
		}
	}
}

// clientCert gets a client certificate for cn the way TLS bootstrap would: a CSR signed by
// the controller manager. For the kubelet (system:node:<name>, signer
// kube-apiserver-client-kubelet) the Node authorizer then grants exactly a kubelet's rights;
// for kube-proxy (system:kube-proxy) the bootstrap RBAC policy does. The sandbox's PKI stays
// its own.
func clientCert(ctx context.Context, c kubernetes.Interface, cn string, orgs []string, signer, namePrefix string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs},
	}, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	csrs := c.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: namePrefix},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer,
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("realnode: CSR for %s: %w", cn, err)
	}
	// For a node the controller manager approves it by itself (an admin may create node
	// client certificates), unless this approval comes first: either is fine. Other
	// signers wait for this one.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == certv1.CertificateApproved {
				return nil
			}
		}
		cur.Status.Conditions = append(cur.Status.Conditions, certv1.CertificateSigningRequestCondition{
			Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "RealNode", Message: "the sandbox's real node",
		})
		_, err = csrs.UpdateApproval(ctx, cur.Name, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("realnode: approve the CSR for %s: %w", cn, err)
	}
	for {
		got, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err == nil && len(got.Status.Certificate) > 0 {
			return got.Status.Certificate, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
		}
		if err == nil {
			for _, cond := range got.Status.Conditions {
				if cond.Type == certv1.CertificateFailed && cond.Status == corev1.ConditionTrue {
					return nil, nil, fmt.Errorf("realnode: the CSR for %s failed: %s", cn, cond.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("realnode: kubelet CSR %s not signed (is kube-controller-manager's csrsigning running?): %w", csr.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeKubeconfig writes the kubeconfig of a node daemon that authenticates to the sandbox
// as user with its client certificate, and returns its path.
func (n *Node) writeKubeconfig(sb *sandbox.Sandbox, user string, certPEM, keyPEM []byte) (string, error) {
	rc := sb.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	kc.Contexts[user] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: user}
	kc.CurrentContext = user
	path := n.configPath(user + ".kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

func (n *Node) startKubelet(ctx context.Context, sb *sandbox.Sandbox, binDir string, certPEM, keyPEM []byte) error {
	kubeconfig, err := n.writeKubeconfig(sb, "kubelet", certPEM, keyPEM)
	if err != nil {
		return err
	}
	caFile := n.configPath("ca.crt")
	if err := os.WriteFile(caFile, sb.Config().CAData, 0o644); err != nil {
		return err
	}
	ports, err := sandbox.FreePorts(1)
	if err != nil {
		return err
	}
	d := func(p string) string { return filepath.Join(n.dir, p) }
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
# This machine runs cgroup v1, which kubelet 1.35 refuses unless told otherwise.
failCgroupV1: false
failSwapOn: false
podLogsDir: %q
volumePluginDir: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
# Test machines run with full disks more often than production nodes do; eviction or image
# GC on a real node would remove images a test has just checked were pulled: both are off
# (ImageGC.config) unless a test turns image GC on for itself (RestartKubelet).
serializeImagePulls: false
# A kubelet posts the node's status when it changes, else every nodeStatusReportFrequency (5m by
# default). RestartKubelet waits for the new kubelet's own Ready post, a heartbeat later than the
# old one's: to the second, so a first post in the same second as the old one's would leave it
# waiting for the next, which must come well within the tests' 5-minute deadline.
nodeStatusReportFrequency: 10s
# Nothing serves it (pods here need no DNS), but without one every pod gets a warning event,
# and those events end up in the failures the controller reports.
clusterDNS: [%q]
clusterDomain: cluster.local
`, ports[0], n.socket, d("pod-logs"), d("volume-plugins"), caFile, clusterDNS)
	n.kubeletMu.Lock()
	n.kubeletBase, n.kubeletBin = cfg, filepath.Join(binDir, "kubelet")
	n.kubeletArgs = []string{
		"--config=" + n.configPath("kubelet.yaml"),
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + d("kubelet"),
		"--cert-dir=" + d("kubelet/pki"),
		"--hostname-override=" + n.name,
		"--v=1",
	}
	err = n.runKubelet(ImageGC{})
	n.kubeletMu.Unlock()
	if err != nil {
		return err
	}
	return n.waitKubelet(ctx, time.Time{}, metav1.Time{})
}

// ImageGC is the kubelet's image garbage collection. The zero value is off, the node's
// default: images a test has just seen pulled stay.
type ImageGC struct {
	// On makes the image filesystem under pressure at once (an imagefs.available eviction
	// threshold of 99%): the eviction manager, which checks every 10 s, then has the image GC
	// delete every unused image that is not pinned. The GC's own pass is no use to a test: the
	// first, as the kubelet starts, fails on stats not gathered yet ("invalid capacity 0 on
	// image filesystem"), and the next comes 5 minutes later. While On, the node reports
	// DiskPressure and its kubelet admits no pod.
	On bool
	// MinimumAge is imageMinimumGCAge: how long an image must have been seen (by this
	// kubelet: a restart sees every image anew) before it may go; 0 is the kubelet's
	// default, 2 minutes.
	MinimumAge time.Duration
}

func (g ImageGC) config() string {
	imagefs := "2%"
	gc := "# 100 with no imageMaximumGCAge: the kubelet does not even start its image GC.\n" +
		"imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n"
	if g.On {
		imagefs = "99%"
		gc = fmt.Sprintf("imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\nimageMinimumGCAge: %s\n", g.MinimumAge)
	}
	return fmt.Sprintf("evictionHard:\n  memory.available: 100Mi\n  nodefs.available: 2%%\n  imagefs.available: %q\n%s", imagefs, gc)
}

// runKubelet writes the kubelet's config with gc and starts it; kubeletMu is held.
func (n *Node) runKubelet(gc ImageGC) error {
	if err := os.WriteFile(n.configPath("kubelet.yaml"), []byte(n.kubeletBase+gc.config()), 0o644); err != nil {
		return err
	}
	var err error
	n.kubelet, err = sandbox.StartChild(n.logDir, "kubelet", n.kubeletBin, n.kubeletArgs...)
	return err
}

// waitKubelet returns once the node is Ready and, when since is set, the kubelet started
// after since has renewed the node's Lease and posted the node's Ready condition itself. The
// Node stays Ready across a restart, so only the Lease tells that the new kubelet is up; and a
// new kubelet may first post Ready=False (its runtime check not done yet) after the Lease:
// a caller that read the old Ready=True would then see its pods' node go NotReady under them.
// prior is the Ready heartbeat the old kubelet posted last; the new one's first post, made
// seconds after the old one stopped, comes later.
func (n *Node) waitKubelet(ctx context.Context, since time.Time, prior metav1.Time) error {
	var last error
	return n.waitFor(ctx, "node "+n.name+" Ready", func() (bool, error) {
		node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if !nodeReady(node) {
			return false, nil
		}
		if since.IsZero() {
			return true, nil
		}
		if hb := readyHeartbeat(node); !hb.After(prior.Time) {
			return false, nil
		}
		lease, err := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		return lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(since), nil
	}, func() error { return last })
}

// readyHeartbeat is when a kubelet last posted the node's Ready condition.
func readyHeartbeat(node *corev1.Node) metav1.Time {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime
		}
	}
	return metav1.Time{}
}

// RestartKubelet stops the kubelet and starts it again with image GC set to gc (ImageGC{}
// turns it off again), and returns once the new kubelet is up and has posted the node Ready.
// Pods keep running through it: containerd holds them. The kubelet runs its image GC once as
// it starts, then every 5 minutes.
func (n *Node) RestartKubelet(ctx context.Context, gc ImageGC) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s before restarting its kubelet: %w", n.name, err)
	}
	prior := readyHeartbeat(node)
	n.kubeletMu.Lock()
	n.kubelet.Stop(stopGrace)
	// The Lease's renew time has microseconds and comes from this host's clock.
	since := time.Now().Truncate(time.Microsecond)
	err = n.runKubelet(gc)
	n.kubeletMu.Unlock()
	if err != nil {
		return err
	}
	return n.waitKubelet(ctx, since, prior)
}

// kubeletChild is the kubelet running now.
func (n *Node) kubeletChild() *sandbox.Child {
	n.kubeletMu.Lock()
	defer n.kubeletMu.Unlock()
	return n.kubelet
}

// nodeReady also waits for the node lifecycle controller to lift the not-ready taint, so
// that the caller's first pod is not refused by the scheduler.
func nodeReady(node *corev1.Node) bool {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}

// Name is the node's name, also its kubernetes.io/hostname label.
func (n *Node) Name() string { return n.name }

// Registry is the local registry's host:port; images pushed there pull on this node.
func (n *Node) Registry() string { return n.reg.host }

// Mirrors are the registries whose images the node pulls from its own registry.
func (n *Node) Mirrors() []string { return slices.Clone(n.mirrors) }

// Push stores img in the local registry as repoTag ("name:tag") and returns its full
// reference.
func (n *Node) Push(ctx context.Context, repoTag string, img v1.Image) (string, error) {
	return n.reg.push(ctx, repoTag, img)
}

// CRISocket is containerd's socket path on the host: the delete Job's hostPath.
func (n *Node) CRISocket() string { return n.socket }

// LogDir holds containerd.log and kubelet.log (gone after Stop unless Options.Dir was set).
func (n *Node) LogDir() string { return n.logDir }

// ReadyIn is how long Start took, for the tests' figures.
func (n *Node) ReadyIn() time.Duration { return n.readyIn }

// Stop stops the kubelet and kube-proxy, removes every pod through CRI, stops containerd,
// the API forwarder and the registry, and restores the host from the journal. Its error is about the host: it names whatever
// could not be restored (the journal is then kept, for the next Start to try again). A
// graceful step that failed but whose work the forced clean-up did is only logged. Later
// calls return the first call's result.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		var notes []error
		// The kubelet first, or it would start the pods again as they are removed; kube-proxy
		// before the journal's undo, or it would write its rules again.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); n.proxy.Stop(stopGrace) }()
		n.kubeletChild().Stop(stopGrace)
		wg.Wait()
		if n.fwd != nil {
			unpublishAPIEndpoint(n.client)
		}
		n.fwd.close()
		if n.cri != nil && n.containerd != nil && !n.containerd.Exited() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := n.cri.removePods(ctx); err != nil {
				notes = append(notes, fmt.Errorf("removing the pods through CRI: %w", err))
			}
			cancel()
		}
		n.cri.close()
		n.containerd.Stop(stopGrace)
		n.reg.close()
		if n.journal != nil {
			if err := n.journal.Undo(); err != nil {
				notes = append(notes, err)
			}
			if left := n.journal.Leftovers(); len(left) > 0 {
				n.stopErr = fmt.Errorf("realnode: stop: left on the host: %s (%w)", strings.Join(left, "; "), errors.Join(notes...))
			} else if err := os.Remove(host.JournalPath); err != nil {
				n.stopErr = fmt.Errorf("realnode: stop: %w", err)
			}
		}
		if n.stopErr == nil && len(notes) > 0 {
			fmt.Fprintf(os.Stderr, "realnode: stop: the host is restored, after: %v\n", errors.Join(notes...))
		}
		n.lock.Release()
	})
	return n.stopErr
}
