package install_test

// Helpers of the real OLM e2e (olm_test.go): the pinned OLM pieces from
// bin/ and the module cache, hack/image for every image, OLM's two
// operators as host processes, and the SOCKS5 proxy through which the
// catalog operator reaches the registry pods it creates.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

const (
	olmModule = "github.com/operator-framework/operator-lifecycle-manager"
	// olmToolsModule is the wrapper module that pins OLM and opm.
	olmToolsModule = "hack/tools/olm"
	// olmCRDDir is where OLM's module keeps the operators.coreos.com CRDs
	// (its Helm chart's crds/, which its release manifests are made from).
	olmCRDDir = "deploy/chart/crds"
)

// olmBins are the pinned binaries the test runs or puts into images.
type olmBins struct {
	olm, catalog, opm, cpb, probe string
}

func binDir(t *testing.T) string {
	t.Helper()
	d, err := repo.BinDir("")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// needOLM skips the test, naming every missing piece, on a machine that
// cannot run a real node (needNode) or lacks the OLM binaries; with
// KUBEFLEDGED_REALNODE_REQUIRED set, missing binaries fail it instead.
func needOLM(t *testing.T) olmBins {
	t.Helper()
	framework.NeedRealNode(t)
	bin := binDir(t)
	b := olmBins{
		olm: filepath.Join(bin, "olm"), catalog: filepath.Join(bin, "catalog"), opm: filepath.Join(bin, "opm"),
		cpb: filepath.Join(bin, "cpb"), probe: filepath.Join(bin, "grpc_health_probe"),
	}
	var missing []string
	for _, p := range []string{b.olm, b.catalog, b.opm, b.cpb, b.probe} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, filepath.Base(p))
		}
	}
	if len(missing) == 0 {
		return b
	}
	msg := fmt.Sprintf("real OLM e2e: %s missing in %s (make olm-e2e-tools)", strings.Join(missing, ", "), bin)
	if os.Getenv("KUBEFLEDGED_REALNODE_REQUIRED") != "" {
		t.Fatal(msg + " (KUBEFLEDGED_REALNODE_REQUIRED is set)")
	}
	t.Skip(msg)
	return b
}

// olmModuleDir is OLM's module in the module cache, at the version the
// wrapper module pins (downloaded if it is not there yet).
func olmModuleDir(ctx context.Context) (dir, version string, err error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", olmModule)
	cmd.Dir = filepath.Join(repoDir, olmToolsModule)
	out, err := cmd.Output()
	var m struct{ Dir, Version, Error string }
	if jerr := json.Unmarshal(out, &m); jerr != nil || m.Error != "" || err != nil {
		return "", "", fmt.Errorf("go mod download %s in %s: %v %s", olmModule, olmToolsModule, err, m.Error)
	}
	return m.Dir, m.Version, nil
}

// installOLMCRDs creates OLM's CRDs from its module and waits until they
// are served.
func installOLMCRDs(ctx context.Context, cfg *rest.Config, moduleDir string) error {
	files, err := filepath.Glob(filepath.Join(moduleDir, olmCRDDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %v", filepath.Join(moduleDir, olmCRDDir), err)
	}
	return framework.CreateCRDs(ctx, cfg, files...)
}

// pollUntil runs cond every poll until it holds, fails, or within passes.
func pollUntil(ctx context.Context, within time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// imageTool is hack/image, built once per test binary: every image of the
// test is made by the program `make image`, `make bundle-image` and
// `make catalog-image` run.
type imageTool struct {
	path string
	root string
	dir  string // scratch for layouts
}

func buildImageTool(ctx context.Context, dir string) (*imageTool, error) {
	root, err := filepath.Abs(repoDir)
	if err != nil {
		return nil, err
	}
	it := &imageTool{path: filepath.Join(dir, "image"), root: root, dir: dir}
	return it, repo.Build(ctx, "./hack/image", it.path)
}

// build runs `image <kind> -out <layout> -ref <ref> args...` and pushes the
// layout to the node's registry, where the node finds ref (a name in a
// registry the node mirrors, such as ghcr.io): the cluster pulls it by
// that name, as it would from the real registry. It returns the layout,
// for a catalog to name the bundle by.
func (it *imageTool) build(ctx context.Context, kind, ref string, args ...string) (string, error) {
	out := filepath.Join(it.dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref))
	full := append([]string{kind, "-out", out, "-ref", ref}, args...)
	if err := it.run(ctx, full...); err != nil {
		return "", err
	}
	local, err := realnode.MirrorRef(node.Registry(), node.Mirrors(), ref)
	if err != nil {
		return "", err
	}
	return out, it.run(ctx, "push", "-layout", out, local.String())
}

func (it *imageTool) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, it.path, args...)
	cmd.Dir = it.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/image %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return nil
}

// olmProcesses are OLM's olm and catalog operators, run on the host as the
// cluster admin (upstream runs them as pods under a ServiceAccount bound to
// a cluster-admin-like role: the same rights). Both serve health and
// metrics on :8080, hard-wired in OLM v0.38.0 (pkg/lib/server); the second
// to start logs that the port is taken and runs on, as nothing here probes
// them.
type olmProcesses struct {
	olm, catalog *sandbox.Child
}

type olmOptions struct {
	bins       olmBins
	kubeconfig string
	logDir     string
	// catalogNamespace is OLM's global catalog namespace.
	catalogNamespace string
	// opmImage and utilImage are the catalog operator's --opmImage and
	// --util-image; configmapServerImage is set to opmImage too, as no
	// ConfigMap catalog is used.
	opmImage, utilImage string
	// grpcProxy is the catalog operator's GRPC_PROXY.
	grpcProxy string
}

func startOLM(o olmOptions) (*olmProcesses, error) {
	env := []string{"KUBECONFIG=" + o.kubeconfig}
	olm, err := sandbox.StartChildEnv(o.logDir, "olm-operator", o.bins.olm, env,
		"--namespace="+o.catalogNamespace, "--writeStatusName=", "--interval=30s")
	if err != nil {
		return nil, err
	}
	catalog, err := sandbox.StartChildEnv(o.logDir, "catalog-operator", o.bins.catalog, append(env, "GRPC_PROXY="+o.grpcProxy),
		"--namespace="+o.catalogNamespace, "--writeStatusName=",
		"--opmImage="+o.opmImage, "--configmapServerImage="+o.opmImage, "--util-image="+o.utilImage,
		// As upstream's deployment: registry pods and unpack Jobs run as
		// 1001, which the restricted profile wants non-root.
		"--set-workload-user-id=true",
		"--interval=30s")
	if err != nil {
		olm.Stop(3 * time.Second)
		return nil, err
	}
	return &olmProcesses{olm: olm, catalog: catalog}, nil
}

// check fails when either process has exited.
func (p *olmProcesses) check() error {
	for _, c := range []*sandbox.Child{p.olm, p.catalog} {
		if c.Exited() {
			return c.Failure()
		}
	}
	return nil
}

func (p *olmProcesses) stop() {
	p.catalog.Stop(5 * time.Second)
	p.olm.Stop(5 * time.Second)
}

// serviceProxy is the SOCKS5 proxy the catalog operator is given as
// GRPC_PROXY. OLM dials a CatalogSource's registry at the address of the
// Service it made for it, <service>.<namespace>.svc:50051
// (RegistryServiceStatus.Address, operator-framework/api v0.36.0); with
// GRPC_PROXY set it hands that name to the proxy unresolved (the
// "passthrough" resolver, pkg/controller/registry/grpc/source.go), so that
// a catalog operator outside the cluster can reach catalogs inside it.
// Here the host has neither cluster DNS nor a route to Service IPs, but it
// does reach the real node's pods over their bridge: the proxy does what
// DNS and kube-proxy would, mapping the Service's name and port to a ready
// endpoint's pod IP and target port, read from its EndpointSlices, and
// connects there. Only the catalog operator's gRPC goes through it.
type serviceProxy struct {
	kube kubernetes.Interface
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	dials []string // "<name> -> <ip:port>", for the test's report
}

func startServiceProxy(kube kubernetes.Interface) (*serviceProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &serviceProxy{kube: kube, ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(conn) }()
		}
	}()
	return p, nil
}

// URL is the GRPC_PROXY value.
func (p *serviceProxy) URL() string {
	return (&url.URL{Scheme: "socks5", Host: p.ln.Addr().String()}).String()
}

func (p *serviceProxy) close() { _ = p.ln.Close() }

func (p *serviceProxy) dialed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.dials...)
}

// SOCKS5 (RFC 1928), the part a CONNECT without authentication uses.
const (
	socksVersion     = 5
	socksNoAuth      = 0
	socksConnect     = 1
	socksIPv4        = 1
	socksDomain      = 3
	socksIPv6        = 4
	socksSucceeded   = 0
	socksFailure     = 1
	socksUnreachable = 4
	socksNotAllowed  = 7 // command not supported
)

func (p *serviceProxy) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	var head [2]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || head[0] != socksVersion {
		return
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(r, methods); err != nil || !bytes.Contains(methods, []byte{socksNoAuth}) {
		return
	}
	if _, err := conn.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(r, req[:]); err != nil {
		return
	}
	var host string
	switch req[3] {
	case socksIPv4, socksIPv6:
		ip := make(net.IP, 4)
		if req[3] == socksIPv6 {
			ip = make(net.IP, 16)
		}
		if _, err := io.ReadFull(r, ip); err != nil {
			return
		}
		host = ip.String()
	case socksDomain:
		n, err := r.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		host = string(b)
	default:
		return
	}
	var portb [2]byte
	if _, err := io.ReadFull(r, portb[:]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(portb[:]))
	reply := func(code byte) error {
		_, err := conn.Write([]byte{socksVersion, code, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
		return err
	}
	if req[1] != socksConnect {
		_ = reply(socksNotAllowed)
		return
	}
	target, err := p.resolve(host, port)
	if err != nil {
		p.note(fmt.Sprintf("%s:%d -> %v", host, port, err))
		_ = reply(socksUnreachable)
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		p.note(fmt.Sprintf("%s:%d -> %s: %v", host, port, target, err))
		_ = reply(socksFailure)
		return
	}
	defer up.Close()
	p.note(fmt.Sprintf("%s:%d -> %s", host, port, target))
	if err := reply(socksSucceeded); err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, r); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (p *serviceProxy) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dials) == 0 || p.dials[len(p.dials)-1] != s {
		p.dials = append(p.dials, s)
	}
}

// resolve maps <service>.<namespace>.svc[.cluster.local] and a Service port
// to a ready endpoint's address; an IP is taken as it is.
func (p *serviceProxy) resolve(host string, port int) (string, error) {
	if net.ParseIP(host) != nil {
		return net.JoinHostPort(host, strconv.Itoa(port)), nil
	}
	parts := strings.Split(strings.TrimSuffix(strings.TrimSuffix(host, "."), ".cluster.local"), ".")
	if len(parts) != 3 || parts[2] != "svc" {
		return "", fmt.Errorf("not a Service name (<service>.<namespace>.svc)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc, err := p.kube.CoreV1().Services(parts[1]).Get(ctx, parts[0], metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var portName string
	found := false
	for _, sp := range svc.Spec.Ports {
		if int(sp.Port) == port {
			portName, found = sp.Name, true
		}
	}
	if !found {
		return "", fmt.Errorf("service %s/%s has no port %d", parts[1], parts[0], port)
	}
	eps, err := p.kube.DiscoveryV1().EndpointSlices(parts[1]).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + parts[0]})
	if err != nil {
		return "", err
	}
	for _, s := range eps.Items {
		for _, sp := range s.Ports {
			if sp.Port == nil || (sp.Name != nil && *sp.Name != portName) {
				continue
			}
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && !*e.Conditions.Ready || len(e.Addresses) == 0 {
					continue
				}
				return net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(*sp.Port))), nil
			}
		}
	}
	return "", fmt.Errorf("service %s/%s has no ready endpoint", parts[1], parts[0])
}

// obj is an unstructured object of an OLM kind (the module does not
// depend on operator-framework/api; these tests need a handful of fields).
func obj(apiVersion, kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "spec": spec}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func get(ctx context.Context, c client.Client, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
}

func str(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

// podSummary is one line per pod: phase, node, and each container's state
// with its message, which is where a failing unpack Job or registry pod
// says why (OLM sets FallbackToLogsOnError).
func podSummary(ctx context.Context, kube kubernetes.Interface, namespace string) string {
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  pod %s/%s %s on %q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				fmt.Fprintf(&b, "; %s waiting %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				fmt.Fprintf(&b, "; %s exited %d %s %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason, strings.TrimSpace(cs.State.Terminated.Message))
			case cs.State.Running != nil:
				fmt.Fprintf(&b, "; %s running (ready %v)", cs.Name, cs.Ready)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// cordonOthers cordons every node but the real one until the test ends.
// OLM's bundle unpack Job can be steered to no node (its node selector is
// fixed to kubernetes.io/os: linux), and on a kwok node it would only seem
// to run; cordoned, the kwok nodes take no new pod, and every pod of the
// test runs, really, on the real node, with no node selector of ours.
func cordonOthers(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Name == node.Name() || n.Spec.Unschedulable {
			continue
		}
		set := func(unschedulable bool) error {
			patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
			return c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		if err := set(true); err != nil {
			t.Fatalf("cordon %s: %v", n.Name, err)
		}
		t.Cleanup(func() {
			if err := set(false); err != nil {
				t.Errorf("uncordon %s: %v", n.Name, err)
			}
		})
	}
}
