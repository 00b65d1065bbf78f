package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// localFailure bounds a call that must fail on this machine: the issue's own figure. A
// call that leaves the machine takes the webhook timeout (10 s) or the dial timeout (5 s
// here) to fail, so the margin between the two outcomes is wide.
const localFailure = time.Second

// Ranges the package's own route tests count holders of, apart from the host's: pieces of
// the fake pod range, which the shared route turns away already. Any other range could be
// in use here (this machine's egress proxy sits in TEST-NET-3), and a test must not cut
// off the machine's traffic, even for a moment.
var (
	testCIDRs         = []string{"10.244.254.0/24", "10.244.255.0/24"}
	secondSandboxCIDR = "10.244.253.0/24"
)

// holderEnv makes the test binary a route holder that acquires and waits to be killed,
// standing in for a test binary that dies with its sandbox up.
const holderEnv = "KUBEFLEDGED_NETISO_HOLDER"

// runHolderIfAsked is called by TestMain before any sandbox starts.
func runHolderIfAsked() {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		return
	}
	if _, err := testHostNet(dir).acquire(); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	// Until killed; a bare select{} would end in the runtime's deadlock panic instead.
	time.Sleep(time.Hour)
	os.Exit(1)
}

func testHostNet(dir string) *hostNet {
	return &hostNet{lockPath: filepath.Join(dir, "lock"), statePath: filepath.Join(dir, "state.json"), cidrs: testCIDRs}
}

// requireRoutes skips when this machine cannot have the routes, and fails when it could
// but the sandbox did not get them.
func requireRoutes(t *testing.T, s *Sandbox) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the sandbox adds no unreachable routes and relies on --enable-aggregator-routing alone; run as root to test the routes")
	}
	if errors.Is(s.netErr, errNoPrivilege) {
		t.Skipf("the sandbox may not change routes here (%v); it relies on --enable-aggregator-routing alone", s.netErr)
	}
	if s.netLease == nil || s.netErr != nil {
		t.Fatalf("the sandbox runs without its unreachable routes: %v", s.netErr)
	}
}

// ourRoute tells whether the kernel holds the sandbox's unreachable route for cidr.
func ourRoute(t *testing.T, cidr string) bool {
	t.Helper()
	out, err := exec.Command("ip", "route", "show", "exact", cidr, "type", "unreachable", "proto", routeProto).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route show: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out)) != ""
}

// dialFailsLocally checks that a TCP connection to addr fails at once, refused by this
// machine's routing table: the kernel's route lookup itself says "unreachable", so no
// packet was sent, and connect() returns EHOSTUNREACH without waiting for anyone.
func dialFailsLocally(t *testing.T, addr string) {
	t.Helper()
	begin := time.Now()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	took := time.Since(begin)
	if c != nil {
		_ = c.Close()
	}
	if err == nil {
		t.Errorf("dial %s: connected (in %s): something off this machine answered", addr, took)
	} else if !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("dial %s: %v (in %s), want host or network unreachable", addr, err, took)
	}
	if took > localFailure {
		t.Errorf("dial %s took %s, want a local failure within %s", addr, took, localFailure)
	}
	host, _, _ := net.SplitHostPort(addr)
	out, gerr := exec.Command("ip", "route", "get", host).CombinedOutput()
	if gerr == nil || !strings.Contains(string(out), "No route to host") {
		t.Errorf("ip route get %s: %s (%v), want the kernel's own \"No route to host\"", host, strings.TrimSpace(string(out)), gerr)
	}
	t.Logf("dial %s: %v, in %s", addr, err, took.Round(time.Microsecond))
}

// With the sandbox up, a Service cluster IP, a kwok pod IP and a fake node's kubelet port
// all fail on this machine, at once.
func TestSandboxAddressesFailLocally(t *testing.T) {
	t.Parallel()
	requireRoutes(t, Get())
	for _, addr := range []string{"10.96.123.45:443", "10.244.123.45:8443", "10.200.0.2:10250"} {
		dialFailsLocally(t, addr)
	}
}

// webhook is a validating webhook for ConfigMap creation in namespace ns, served by
// svcNS/svc.
func webhook(name, ns, svcNS, svc string, policy admissionv1.FailurePolicyType) admissionv1.ValidatingWebhook {
	return admissionv1.ValidatingWebhook{
		Name: name,
		ClientConfig: admissionv1.WebhookClientConfig{
			Service: &admissionv1.ServiceReference{Namespace: svcNS, Name: svc, Port: ptr.To[int32](443), Path: ptr.To("/validate")},
		},
		Rules: []admissionv1.RuleWithOperations{{
			Operations: []admissionv1.OperationType{admissionv1.Create},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
		}},
		// Only the test's namespaces: the configuration is cluster-wide and other tests
		// run beside this one.
		NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		FailurePolicy:           ptr.To(policy),
		SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds:          ptr.To[int32](10),
	}
}

// createConfigMap creates a ConfigMap with a fresh name in ns and says how long it took.
func createConfigMap(t *testing.T, c kubernetes.Interface, ns string) (time.Duration, error) {
	t.Helper()
	begin := time.Now()
	_, err := c.CoreV1().ConfigMaps(ns).Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
	}, metav1.CreateOptions{})
	return time.Since(begin), err
}

// fastestOf3 makes the same call three times and returns the quickest, with its error:
// one slow call on a loaded two-core machine is noise, three calls each waiting out a
// remote timeout (10 s) are the defect.
func fastestOf3(call func() (time.Duration, error)) (time.Duration, []time.Duration, error) {
	var best time.Duration
	var bestErr error
	var all []time.Duration
	for i := range 3 {
		took, err := call()
		all = append(all, took.Round(time.Millisecond))
		if i == 0 || took < best {
			best, bestErr = took, err
		}
	}
	return best, all, bestErr
}

// A webhook whose Service has no endpoint, or only a kwok pod's made-up IP, must fail the
// write it covers at once, on this machine, instead of after its 10 s timeout; with
// failurePolicy Ignore the write goes through, just as fast.
func TestWebhookServiceFailsLocally(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, c := parallel(t)
	nsFail, nsIgnore := namespace(t, c), namespace(t, c)

	// No selector and no EndpointSlice: nothing anywhere answers it.
	_, err := c.CoreV1().Services(nsFail).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "no-endpoints"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	hooks := []admissionv1.ValidatingWebhook{
		webhook("no-endpoints.sandbox.kubefledged.io", nsFail, nsFail, "no-endpoints", admissionv1.Fail),
		webhook("no-endpoints-ignored.sandbox.kubefledged.io", nsIgnore, nsFail, "no-endpoints", admissionv1.Ignore),
	}

	// A chart's webhook Deployment on a fake node: kwok reports it Ready with an IP from
	// 10.244.0.0/16, so the EndpointSlice offers an address nothing here answers. Only the
	// routes keep that call local.
	nsKwok := ""
	if os.Geteuid() == 0 && s.netLease != nil && s.netErr == nil {
		nsKwok = namespace(t, c)
		labels := map[string]string{"app": "webhook"}
		_, err = c.CoreV1().Pods(nsKwok).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook", Labels: labels},
			Spec: corev1.PodSpec{
				NodeName:   "sandbox-node-0",
				Containers: []corev1.Container{{Name: "webhook", Image: "registry.example/webhook:1", Ports: []corev1.ContainerPort{{ContainerPort: 8443}}}},
			},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.CoreV1().Services(nsKwok).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "on-kwok"},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}}},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		_, podNet, _ := net.ParseCIDR(podCIDR)
		g.Eventually(func() bool {
			l, err := c.DiscoveryV1().EndpointSlices(nsKwok).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=on-kwok"})
			if err != nil {
				return false
			}
			for _, sl := range l.Items {
				for _, ep := range sl.Endpoints {
					if ptr.Deref(ep.Conditions.Ready, false) && len(ep.Addresses) > 0 && podNet.Contains(net.ParseIP(ep.Addresses[0])) {
						return true
					}
				}
			}
			return false
		}, clusterTimeout, 100*time.Millisecond).Should(BeTrue(), "a ready endpoint with a kwok pod IP")
		hooks = append(hooks, webhook("kwok-pod.sandbox.kubefledged.io", nsKwok, nsKwok, "on-kwok", admissionv1.Fail))
	} else {
		t.Log("not testing a webhook served by a kwok pod: without the unreachable routes that call may leave this machine")
	}

	// One object, so that all its webhooks take effect in the apiserver together.
	vwc, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sbx-netiso-"},
		Webhooks:   hooks,
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = clientFor(t, s).AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), vwc.Name, metav1.DeleteOptions{})
	})

	// The apiserver picks the configuration up from a watch: writes succeed until then.
	var lastErr error
	g.Eventually(func() error {
		_, lastErr = createConfigMap(t, c, nsFail)
		return lastErr
	}, clusterTimeout, 100*time.Millisecond).Should(HaveOccurred(), "the webhook never took effect")

	took, all, err := fastestOf3(func() (time.Duration, error) { return createConfigMap(t, c, nsFail) })
	t.Logf("failurePolicy Fail, Service without endpoints: rejected in %v: %v", all, err)
	g.Expect(err).To(MatchError(ContainSubstring(`no endpoints available for service "no-endpoints"`)))
	g.Expect(took).To(BeNumerically("<", localFailure))

	took, all, err = fastestOf3(func() (time.Duration, error) { return createConfigMap(t, c, nsIgnore) })
	t.Logf("failurePolicy Ignore, Service without endpoints: admitted in %v", all)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(took).To(BeNumerically("<", localFailure))

	if nsKwok != "" {
		took, all, err = fastestOf3(func() (time.Duration, error) { return createConfigMap(t, c, nsKwok) })
		t.Logf("failurePolicy Fail, Service on a kwok pod: rejected in %v: %v", all, err)
		g.Expect(err).To(MatchError(ContainSubstring("no route to host")))
		g.Expect(took).To(BeNumerically("<", localFailure))
	}
}

// Holders are counted: the routes stay while one is left and go with the last, and a
// holder that died (a killed test binary) is forgotten by the next sandbox to start or
// stop, or by CleanStaleRoutes, so its routes do not outlive it.
func TestRoutesRefCounted(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("not root: the sandbox adds no routes, so there is nothing to count")
	}
	h := testHostNet(t.TempDir())
	if !exclusiveRanges(t, testCIDRs...) {
		t.Skip("routes cannot be changed here (no CAP_NET_ADMIN)")
	}
	for _, cidr := range testCIDRs {
		if out, _ := exec.Command("ip", "route", "show", "exact", cidr).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
			t.Skipf("%s is routed on this machine already (%s); the test needs it free", cidr, strings.TrimSpace(string(out)))
		}
	}
	t.Cleanup(func() { _ = h.sweep("") })
	routes := func() []bool {
		var got []bool
		for _, cidr := range testCIDRs {
			got = append(got, ourRoute(t, cidr))
		}
		return got
	}
	both, none := []bool{true, true}, []bool{false, false}

	g := NewWithT(t)
	a, err := h.acquire()
	g.Expect(err).NotTo(HaveOccurred())
	b, err := h.acquire()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(routes()).To(Equal(both))
	g.Expect(a.release()).To(Succeed())
	g.Expect(routes()).To(Equal(both), "one holder is left")
	g.Expect(b.release()).To(Succeed())
	g.Expect(routes()).To(Equal(none), "the last holder removes the routes")
	_, err = os.Stat(h.statePath)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "no state is left behind")

	// A holder killed with its routes in place, then the next sandbox starting and stopping.
	killedHolder(t, h)
	g.Expect(routes()).To(Equal(both), "a killed holder leaves its routes")
	c, err := h.acquire()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.release()).To(Succeed())
	g.Expect(routes()).To(Equal(none), "the next sandbox to stop removes a dead holder's routes")

	// A holder killed, then only a sweep (what `hack/sandbox.sh down` does after SIGKILL).
	killedHolder(t, h)
	live, err := h.acquire()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.sweep("")).To(Succeed())
	g.Expect(routes()).To(Equal(both), "a sweep keeps the routes of a live holder")
	g.Expect(live.release()).To(Succeed())
	killedHolder(t, h)
	g.Expect(h.sweep("")).To(Succeed())
	g.Expect(routes()).To(Equal(none), "a sweep removes the routes of dead holders")
}

// exclusiveRanges keeps other test binaries (this package run from another worktree) off
// cidrs until the test ends, since each counts its own holders of the same routes, and
// then removes what a killed run of the test left there. It says false when routes cannot
// be changed here.
func exclusiveRanges(t *testing.T, cidrs ...string) bool {
	t.Helper()
	path := "/run/kubefledged-sandbox-nettest-" + strings.NewReplacer("/", "_", ".", "-").Replace(strings.Join(cidrs, "+")) + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		select {
		case <-t.Context().Done():
			t.Fatalf("%s stays locked: %v", path, t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, cidr := range cidrs {
		err := delRoute(cidr)
		if errors.Is(err, errNoPrivilege) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return true
}

// killedHolder runs a copy of the test binary that takes the routes, and SIGKILLs it.
func killedHolder(t *testing.T, h *hostNet) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+filepath.Dir(h.lockPath))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("holder process: %q", line)
	}
}
