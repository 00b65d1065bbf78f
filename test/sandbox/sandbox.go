// Package sandbox runs a real, throw-away Kubernetes control plane on loopback for tests
// and for `make run`: etcd, kube-apiserver, kube-controller-manager and kube-scheduler from
// bin/, with kwok playing the kubelet on fake nodes. Unlike envtest it has the controllers
// (Jobs complete, garbage collection works, the scheduler binds) that an operator creating
// image-pull Jobs on nodes depends on, while staying cheap enough to start per test package.
//
// The node lifecycle controller runs, so fake nodes behave like real ones when they go
// NotReady (SetNodeReady, NodeSpec.NotReady): they are tainted
// node.kubernetes.io/not-ready and the scheduler keeps new pods off them. Without it kwok
// would happily run a Job pinned to a "NotReady" node, and tests of node-readiness handling
// would pass for the wrong reason.
//
// The addresses a cluster would answer but the sandbox does not (cluster IPs, kwok's pod
// IPs, fake nodes' kubelets) fail on this machine, at once, instead of leaving it and
// timing out: see netiso.go.
package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FailPrefix is an image prefix that never pulls on kwok nodes: the .invalid TLD can never
// resolve, so the same image would also fail on a real cluster.
const FailPrefix = "fail.invalid/"

// HangPrefix is an image prefix whose pull never ends on kwok nodes: its container stays
// waiting in ContainerCreating, with no error, while the pod's other containers run, as behind
// a registry that accepts the connection and never answers. It is what a pull that is still
// going at the deadline looks like.
const HangPrefix = "hang.invalid/"

// FlakyPrefix is an image prefix whose registry fails the first attempts transiently on kwok
// nodes: the container goes ErrImagePull with a registry's "429 Too Many Requests", then
// ImagePullBackOff with the same error (1.5 s later), and 1.5 s later the pull succeeds, as
// the kubelet's next attempt does once a rate limit lifts. Only run-to-completion pods (Jobs)
// heal; they then complete.
const FlakyPrefix = "flaky.invalid/"

// ServiceCIDR is the sandbox's Service IP range (--service-cluster-ip-range). A real node
// routes it from its pods to the host, where kube-proxy turns it into endpoints.
const ServiceCIDR = serviceCIDR

// RunFailPrefix is an image prefix that pulls on kwok nodes but whose container exits 1
// (reason Error) as soon as it runs: a pod with restartPolicy Never ends Failed, any other
// pod shows CrashLoopBackOff. It simulates a helper image that is present but broken.
const RunFailPrefix = "crash.invalid/"

const (
	kubeletVersion        = "v1.35.4"
	defaultRuntimeVersion = "containerd://1.7.27"
	serviceCIDR           = "10.96.0.0/16"
	// Pod IPs kwok hands out; they only ever appear in pod status, nothing routes them.
	podCIDR = "10.244.0.0/16"
	// Like a kubelet's default; kwok renews the lease every quarter of it.
	nodeLeaseSeconds = 40
	// How often a Ready fake node re-posts its conditions when nothing changes, as a kubelet
	// with node leases does (nodeStatusReportFrequency).
	defaultHeartbeat = 5 * time.Minute
	stopGrace        = 5 * time.Second
	// startTimeout bounds a Start whose ctx has no deadline. Several packages start
	// sandboxes at once on two cores, so it is generous.
	startTimeout  = 3 * time.Minute
	startAttempts = 3
)

// Options configures Start. The zero value is a working sandbox without nodes.
type Options struct {
	// Dir holds PKI, etcd data, logs and the kubeconfig. Empty means a fresh temporary dir,
	// removed by Stop; a given Dir is kept, but the state in it is recreated by every Start.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	// Empty means $KUBEFLEDGED_BIN_DIR, else <repo root>/bin, the repo root being the first
	// dir above the cwd with both go.mod and bin/ (tests run in their package dir).
	BinDir string
	// KubeVersion picks the control plane: kube-apiserver, kube-controller-manager and
	// kube-scheduler are BinDir's NAME-KubeVersion instead of NAME (the Makefile builds
	// both, KUBE_OLDEST_VERSION for the oldest Kubernetes we claim). Empty means
	// $E2E_KUBE_VERSION, else NAME, the version the tools are built at.
	KubeVersion string
	// Nodes is how many fake nodes (sandbox-node-0..N-1) exist, Ready, when Start returns.
	Nodes int
	// PullDelay is how long a pod on a fake node stays Pending, as if pulling its images,
	// before it runs.
	PullDelay time.Duration
	// Profile is how kube-controller-manager and kube-scheduler are set: ProfileStock
	// (their defaults, as managed control planes run them and their users cannot change)
	// or ProfileTuned (many Job syncs and high client rates, for benchmarks at scale).
	// Empty means $SANDBOX_PROFILE, else stock.
	Profile Profile
	// ReportImages makes the fake nodes list the images their pods pulled in
	// status.images, as a kubelet does, so that a refresh finds a warm cluster
	// (see imageReporter).
	ReportImages bool

	// heartbeat overrides defaultHeartbeat (minimum 1.1 s); the package's own tests
	// shorten it to watch heartbeats happen.
	heartbeat time.Duration
	// hostNet overrides the host's shared unreachable routes (netiso.go): the package's
	// own tests count holders of routes for ranges of their own.
	hostNet *hostNet
}

// Profile names a set of controller-manager and scheduler settings.
type Profile string

const (
	// ProfileStock is the components' defaults: kcm syncs 5 Jobs at a time at 20 QPS, the
	// scheduler binds at 50 QPS. EKS, GKE and AKS run these, and a behaviour that only holds
	// on a tuned control plane does not hold for their users.
	ProfileStock Profile = "stock"
	// ProfileTuned lets kcm sync 50 Jobs at a time at 300 QPS and the scheduler bind at 300
	// QPS: what a benchmark of our own speed at scale needs, so that the control plane is
	// not the only thing measured.
	ProfileTuned Profile = "tuned"
)

// resolveProfile implements Options.Profile's defaulting.
func resolveProfile(p Profile) (Profile, error) {
	if p == "" {
		p = Profile(os.Getenv("SANDBOX_PROFILE"))
	}
	switch p {
	case "", ProfileStock:
		return ProfileStock, nil
	case ProfileTuned:
		return p, nil
	}
	return "", fmt.Errorf("sandbox: profile %q: use %s or %s (SANDBOX_PROFILE)", p, ProfileStock, ProfileTuned)
}

// Sandbox is a running control plane. Its methods are safe for concurrent use.
type Sandbox struct {
	dir       string
	removeDir bool
	// bins maps a process name to its binary: the versioned control plane's file
	// (Options.KubeVersion) or BinDir's NAME.
	bins       map[string]string
	pki        *pki
	logDir     string
	kubeconfig string
	apiPort    int
	etcdPorts  []int
	config     *rest.Config
	client     kubernetes.Interface

	mu    sync.Mutex
	procs []*process
	// stopHooks end what runs inside the test process (the image reporter).
	stopHooks []func()

	profile   Profile
	nodeSeq   int           // fake nodes created so far, for their InternalIPs
	netLease  *netLease     // share in the host's unreachable routes; nil without them
	netErr    error         // why some or all of those routes are missing
	startedIn time.Duration // how long Start took, for the package's own figures
	stopOnce  sync.Once
	stopErr   error
}

// Start brings up a sandbox and returns once the apiserver is ready, the controller manager
// has created the default ServiceAccount (pods can be admitted) and o.Nodes fake nodes are
// Ready. ctx bounds the start-up only; the sandbox runs until Stop. On error everything
// started so far is stopped again.
func Start(ctx context.Context, o Options) (_ *Sandbox, err error) {
	begin := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		// A start that hangs (a stuck controller, an exhausted machine) must end in an
		// error with the logs' location, not in a test binary that never returns.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	s := &Sandbox{}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if s.bins, err = resolveBins(o.BinDir, o.KubeVersion); err != nil {
		return nil, err
	}
	if s.profile, err = resolveProfile(o.Profile); err != nil {
		return nil, err
	}
	// Before any process: from the apiserver's first webhook call on, an address nobody
	// here answers must fail on this machine.
	hn := o.hostNet
	if hn == nil {
		hn = defaultHostNet()
	}
	s.netLease, s.netErr = hn.acquire()
	if o.Dir == "" {
		if s.dir, err = os.MkdirTemp("", "kubefledged-sandbox-"); err != nil {
			return nil, err
		}
		s.removeDir = true
	} else {
		if s.dir, err = filepath.Abs(o.Dir); err != nil {
			return nil, err
		}
	}
	// Only the sandbox's own subdirs are wiped: a stale etcd from an earlier run would hold
	// objects signed by another CA and nodes of another run.
	for _, sub := range []string{"pki", "etcd-data", "logs"} {
		if err := os.RemoveAll(filepath.Join(s.dir, sub)); err != nil {
			return nil, err
		}
	}
	s.logDir = filepath.Join(s.dir, "logs")
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, err
	}
	if s.pki, err = newPKI(filepath.Join(s.dir, "pki")); err != nil {
		return nil, fmt.Errorf("generate PKI: %w", err)
	}
	if err := s.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := s.startAPIServer(ctx); err != nil {
		return nil, err
	}

	errs := make(chan error, 3)
	go func() { errs <- s.startControllerManager(ctx) }()
	go func() { errs <- s.startScheduler(ctx) }()
	go func() { errs <- s.startKwok(o) }()
	var startErrs []error
	for range 3 {
		startErrs = append(startErrs, <-errs)
	}
	if err := errors.Join(startErrs...); err != nil {
		return nil, err
	}
	if err := s.waitFor(ctx, "the default ServiceAccount (kube-controller-manager)", func(ctx context.Context) (bool, error) {
		_, err := s.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return nil, err
	}
	if o.ReportImages {
		s.reportImages()
	}
	if o.Nodes > 0 {
		specs := make([]NodeSpec, o.Nodes)
		for i := range specs {
			specs[i].Name = "sandbox-node-" + strconv.Itoa(i)
		}
		if err := s.CreateNodes(ctx, specs...); err != nil {
			return nil, err
		}
	}
	s.startedIn = time.Since(begin)
	return s, nil
}

// kubeVersioned are the processes Options.KubeVersion picks; etcd and kwok serve every
// version.
var kubeVersioned = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// resolveBins implements Options.BinDir's and Options.KubeVersion's defaulting: the bin
// dir and each process's binary, all of which must be there.
func resolveBins(dir, version string) (map[string]string, error) {
	dir, err := repo.BinDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: no bin dir: %w", err)
	}
	if version == "" {
		version = os.Getenv("E2E_KUBE_VERSION")
	}
	bins := map[string]string{}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		file := b
		if version != "" && slices.Contains(kubeVersioned, b) {
			file = b + "-" + version
		}
		bins[b] = filepath.Join(dir, file)
		if !isFile(bins[b]) {
			missing = append(missing, file)
		}
	}
	if len(missing) > 0 {
		hint := "build the tools into bin/ first"
		if version != "" {
			hint = "E2E_KUBE_VERSION/KubeVersion " + version + ": `make kube-oldest-tools` builds KUBE_OLDEST_VERSION's"
		}
		return nil, fmt.Errorf("sandbox: %s missing from %s (%s)", strings.Join(missing, ", "), dir, hint)
	}
	return bins, nil
}

func isFile(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }

// Config returns a copy of the admin (system:masters) config. Its rate limits are high so
// that tests creating hundreds of objects measure the code under test, not client-go's
// throttling.
func (s *Sandbox) Config() *rest.Config { return rest.CopyConfig(s.config) }

// KubeconfigPath is the admin kubeconfig, for kubectl or a process under test.
func (s *Sandbox) KubeconfigPath() string { return s.kubeconfig }

// Dir is where PKI, etcd data, logs (Dir()/logs/<process>.log) and the kubeconfig live.
func (s *Sandbox) Dir() string { return s.dir }

// Stop stops every process this sandbox started, all at once (SIGTERM, then SIGKILL after a
// few seconds), and removes the temporary Dir if Start made it. Later calls return the first
// call's result.
func (s *Sandbox) Stop() error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		procs, hooks := s.procs, s.stopHooks
		s.mu.Unlock()
		for _, stop := range hooks {
			stop()
		}
		// etcd goes last: an apiserver that loses etcd mid-shutdown hangs until SIGKILL,
		// which made every Stop take the full grace period.
		var etcd []*process
		var wg sync.WaitGroup
		for _, p := range procs {
			if p.name == "etcd" {
				etcd = append(etcd, p)
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.stop(stopGrace) }()
		}
		wg.Wait()
		for _, p := range etcd {
			p.stop(stopGrace)
		}
		// A failure to take the routes down is only logged: they turn away addresses
		// nothing here answers, and the next sandbox to start or stop retries.
		if err := s.netLease.release(); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox: removing the unreachable routes: %v\n", err)
		}
		if s.removeDir && s.dir != "" {
			s.stopErr = os.RemoveAll(s.dir)
		}
	})
	return s.stopErr
}

func (s *Sandbox) start(name string, args []string, env ...string) (*process, error) {
	p, err := startProcess(s.logDir, name, s.bins[name], args, env)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return p, nil
}

// watched lists the processes that should be running: any of them exiting during a wait
// is a crash worth reporting with its log, even if it died before the wait began.
func (s *Sandbox) watched() []*process {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*process
	for _, p := range s.procs {
		if !p.stopping.Load() {
			out = append(out, p)
		}
	}
	return out
}

func (s *Sandbox) waitFor(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	if err := poll(ctx, 100*time.Millisecond, s.watched(), cond); err != nil {
		return fmt.Errorf("sandbox: waiting for %s: %w (logs in %s)", what, err, s.logDir)
	}
	return nil
}

// startWithRetry starts a listening process on fresh ports and waits for it to be ready,
// retrying with other ports if it lost a port to a concurrent sandbox.
func (s *Sandbox) startWithRetry(ctx context.Context, name string, nports int, args func(ports []int) ([]string, error), ready func(ctx context.Context, ports []int) (bool, error)) ([]int, error) {
	var lastErr error
	for range startAttempts {
		ports, err := FreePorts(nports)
		if err != nil {
			return nil, err
		}
		a, err := args(ports)
		if err != nil {
			return nil, err
		}
		p, err := s.start(name, a)
		if err != nil {
			return nil, err
		}
		err = poll(ctx, 50*time.Millisecond, []*process{p}, func(ctx context.Context) (bool, error) {
			return ready(ctx, ports)
		})
		if err == nil {
			return ports, nil
		}
		lastErr = err
		p.stop(stopGrace)
		if !errors.Is(err, errRetry) {
			break
		}
	}
	return nil, fmt.Errorf("sandbox: start %s: %w", name, lastErr)
}

func (s *Sandbox) startEtcd(ctx context.Context) error {
	dataDir := filepath.Join(s.dir, "etcd-data")
	client := &http.Client{Timeout: 2 * time.Second}
	ports, err := s.startWithRetry(ctx, "etcd", 2, func(p []int) ([]string, error) {
		// A failed attempt may have recorded its peer URL in the data dir already.
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
		clientURL := fmt.Sprintf("http://127.0.0.1:%d", p[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", p[1])
		return []string{
			"--name=sandbox",
			"--data-dir=" + dataDir,
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=sandbox=" + peerURL,
			"--initial-cluster-state=new",
			// Test data is disposable; fsync would dominate Job-heavy tests on slow disks.
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, nil
	}, func(ctx context.Context, p []int) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/health", p[0]), nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	s.etcdPorts = ports
	return err
}

func (s *Sandbox) startAPIServer(ctx context.Context) error {
	pk := s.pki
	_, err := s.startWithRetry(ctx, "kube-apiserver", 1, func(p []int) ([]string, error) {
		s.apiPort = p[0]
		if err := s.writeKubeconfigs(); err != nil {
			return nil, err
		}
		return []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", s.etcdPorts[0]),
			// Loopback only: several sandboxes share the machine and nothing outside needs them.
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			fmt.Sprintf("--secure-port=%d", p[0]),
			"--tls-cert-file=" + pk.servingCert,
			"--tls-private-key-file=" + pk.servingKey,
			"--client-ca-file=" + pk.caCert,
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + pk.saPub,
			"--service-account-signing-key-file=" + pk.saKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=Node,RBAC",
			// Privileged pods (e.g. a node agent DaemonSet) are admitted, as on kubeadm.
			"--allow-privileged=true",
			// The front-proxy CA makes the apiserver publish requestheader settings in
			// kube-system/extension-apiserver-authentication, which the controller manager
			// and scheduler read for delegated authentication.
			"--requestheader-client-ca-file=" + pk.frontProxyCACert,
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + pk.frontProxyClientCert,
			"--proxy-client-key-file=" + pk.frontPxKey,
			// Pod logs and exec on the real node: its kubelet takes only
			// callers it can authenticate (test/sandbox/realnode).
			"--kubelet-client-certificate=" + pk.kubeletClientCert,
			"--kubelet-client-key=" + pk.kubeletKey,
			// The default reconciler keeps trying to publish 127.0.0.1 as the endpoint of
			// the "kubernetes" Service, which validation refuses (loopback), every 10 s.
			"--endpoint-reconciler-type=none",
			// Webhook, CRD conversion and aggregated-API Services resolve to a ready
			// endpoint's IP instead of the cluster IP, which nothing here (no kube-proxy)
			// answers: the call reaches a real pod, or fails at once inside the apiserver
			// ("no endpoints available") instead of leaving the machine and timing out.
			// Admission webhooks get the same resolver: k8s.io/kubernetes v1.35.4
			// cmd/kube-apiserver/app/server.go (buildServiceResolver) hands it to
			// pkg/controlplane/apiserver/admission/config.go (webhook plugin initializer);
			// the lookup is k8s.io/apiserver pkg/util/proxy/proxy.go, ResolveEndpoint.
			"--enable-aggregator-routing=true",
		}, nil
	}, func(ctx context.Context, p []int) (bool, error) {
		body, err := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	return err
}

// writeKubeconfigs writes one kubeconfig per identity and builds the admin client. It runs
// again if the apiserver had to move to another port.
func (s *Sandbox) writeKubeconfigs() error {
	server := fmt.Sprintf("https://127.0.0.1:%d", s.apiPort)
	pk := s.pki
	write := func(path string, kp *keyPair) error {
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: pk.ca.certPEM}
		cfg.AuthInfos["sandbox"] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
		cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "sandbox"}
		cfg.CurrentContext = "sandbox"
		return clientcmd.WriteToFile(*cfg, path)
	}
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	for path, kp := range map[string]*keyPair{
		s.kubeconfig:                                  pk.admin,
		filepath.Join(pk.dir, "kcm.kubeconfig"):       pk.kcm,
		filepath.Join(pk.dir, "scheduler.kubeconfig"): pk.scheduler,
		filepath.Join(pk.dir, "kwok.kubeconfig"):      pk.kwok,
	} {
		if err := write(path, kp); err != nil {
			return err
		}
	}
	s.config = &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   pk.ca.certPEM,
			CertData: pk.admin.certPEM,
			KeyData:  pk.admin.keyPEM,
		},
		QPS:   500,
		Burst: 1000,
	}
	polling := rest.CopyConfig(s.config)
	polling.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(polling)
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

// healthz reports whether a component's secure port answers /healthz with "ok"; they serve
// the apiserver's serving certificate, so the sandbox CA verifies them.
func (s *Sandbox) healthz(ctx context.Context, port int) (bool, error) {
	pool := x509.NewCertPool()
	pool.AddCert(s.pki.ca.cert)
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), nil)
	resp, err := c.Do(req)
	if err != nil {
		return false, nil
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

func (s *Sandbox) startControllerManager(ctx context.Context) error {
	pk := s.pki
	kc := filepath.Join(pk.dir, "kcm.kubeconfig")
	_, err := s.startWithRetry(ctx, "kube-controller-manager", 1, func(p []int) ([]string, error) {
		return slices.Concat(s.servingFlags(kc, p[0]), []string{
			"--kubeconfig=" + kc,
			"--leader-elect=false",
			"--root-ca-file=" + pk.caCert,
			"--service-account-private-key-file=" + pk.saKey,
			"--use-service-account-credentials=true",
			"--cluster-signing-cert-file=" + pk.caCert,
			"--cluster-signing-key-file=" + pk.caKey,
			"--service-cluster-ip-range=" + serviceCIDR,
			// nodeipam would want a cluster CIDR to carve; kwok assigns pod IPs itself. The
			// node lifecycle controller stays: it taints NotReady nodes
			// (node.kubernetes.io/not-ready) and cordoned ones as a real cluster does, so a
			// pod pinned to a NotReady fake node stays Pending instead of kwok running it.
			"--controllers=*,-nodeipam",
		}, s.kcmTuning()), nil
	}, func(ctx context.Context, p []int) (bool, error) { return s.healthz(ctx, p[0]) })
	return err
}

// servingFlags are the flags of kcm's and the scheduler's secure port: on loopback, with
// the sandbox's serving certificate, delegating authentication and authorization to the
// API server through the component's kubeconfig kc.
func (s *Sandbox) servingFlags(kc string, port int) []string {
	return []string{
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file=" + s.pki.servingCert,
		"--tls-private-key-file=" + s.pki.servingKey,
	}
}

// kcmTuning is what ProfileTuned adds to kube-controller-manager's flags.
func (s *Sandbox) kcmTuning() []string {
	if s.profile != ProfileTuned {
		return nil
	}
	return []string{
		// Polls node health (and lifts NoExecute taints of nodes back to Ready) faster
		// than the 5s default, so SetNodeReady converges quickly.
		"--node-monitor-period=2s",
		// Defaults sync 5 Jobs at a time at 20 QPS: 1000 Jobs took 300 s instead of 30.
		"--concurrent-job-syncs=50",
		"--concurrent-gc-syncs=50",
		"--kube-api-qps=300",
		"--kube-api-burst=600",
	}
}

func (s *Sandbox) startScheduler(ctx context.Context) error {
	pk := s.pki
	kc := filepath.Join(pk.dir, "scheduler.kubeconfig")
	// The flags --kube-api-qps/burst are deprecated for the scheduler: its client limits
	// (50/100 by default, which caps binding of mass-created Job pods) are set by config.
	qps, burst := 50, 100
	if s.profile == ProfileTuned {
		qps, burst = 300, 600
	}
	cfgPath := filepath.Join(pk.dir, "scheduler.yaml")
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, kc, qps, burst)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	_, err := s.startWithRetry(ctx, "kube-scheduler", 1, func(p []int) ([]string, error) {
		return append(s.servingFlags(kc, p[0]), "--config="+cfgPath), nil
	}, func(ctx context.Context, p []int) (bool, error) { return s.healthz(ctx, p[0]) })
	return err
}

// startKwok starts kwok without waiting: it serves no port (no --node-port/--server-address,
// so nothing can collide) and its readiness shows as fake nodes turning Ready.
func (s *Sandbox) startKwok(o Options) error {
	hb := o.heartbeat
	if hb <= 0 {
		hb = defaultHeartbeat
	}
	// Status times have one-second precision: a heartbeat within the same second as the
	// previous write changes nothing, produces no watch event, and so never schedules the
	// next heartbeat.
	hb = max(hb, 1100*time.Millisecond)
	cfgPath := filepath.Join(s.pki.dir, "kwok.yaml")
	if err := os.WriteFile(cfgPath, []byte(stageConfig(o.PullDelay, hb)), 0o600); err != nil {
		return err
	}
	_, err := s.start("kwok", []string{
		"--kubeconfig=" + filepath.Join(s.pki.dir, "kwok.kubeconfig"),
		"--config=" + cfgPath,
		"--manage-all-nodes=false",
		// Only nodes made by CreateNodes: a test can still add a node no kubelet manages.
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--node-ip=10.200.0.1",
		"--cidr=" + podCIDR,
		// Leases keep nodes alive for the node lifecycle controller without rewriting node
		// status every few seconds.
		fmt.Sprintf("--node-lease-duration-seconds=%d", nodeLeaseSeconds),
	},
		// kwok also reads ~/.kwok/kwok.yaml; a developer's own must not change the stages.
		"HOME="+s.dir)
	return err
}
