package olm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/proc"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

const (
	timeout = framework.ClusterTimeout
	poll    = 250 * time.Millisecond
)

// TestOLMInstall does what OLM does with the bundle for an OwnNamespace
// OperatorGroup (operator and target namespace the same), except pulling
// the image: CRDs, ServiceAccount, the CSV's permissions as Roles and
// ClusterRoles bound to it, and the Deployment. The kwok node only pretends
// to run the Deployment's pod, so the test runs the real binary itself, as
// the kubelet would start the container: the Deployment's args with the
// environment resolved from the pod, in a working directory laid out like
// the image's (watches.yaml and helm-charts/), authenticated as the
// ServiceAccount so that every request goes through the CSV's RBAC.
func TestOLMInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	b := readBundle(t)
	k8s, _ := framework.Clients(t)

	ns := "kf-olm-" + utilrand.String(5)
	// The operator's pod must pass the restricted profile: OperatorHub
	// installs into namespaces that enforce it.
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}})).To(Succeed())

	for _, crd := range b.crds {
		g.Expect(k8s.Create(ctx, crd.DeepCopy())).To(Succeed())
	}
	for _, crd := range b.crds {
		framework.WaitEstablished(g, k8s, crd.Name, timeout)
	}
	// The examples must be valid as OperatorHub shows them: strict, so that
	// a misspelt field fails rather than being pruned. They are checked
	// before the release's webhook exists, which would need a running
	// controller.
	examples := almExamples(t, b.csv)
	for _, ex := range examples {
		ex = ex.DeepCopy()
		ex.SetNamespace(ns)
		g.Expect(k8s.Create(ctx, ex, client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed(), "alm-example %s %s", ex.GetKind(), ex.GetName())
	}
	// OLM creates the bundle's namespaced objects (the metrics Service) in
	// the install namespace; the bundle leaves their namespace empty.
	for _, o := range b.others {
		o = o.DeepCopy()
		namespaced, err := k8s.IsObjectNamespaced(o)
		g.Expect(err).NotTo(HaveOccurred(), "%s %s", o.GetKind(), o.GetName())
		if namespaced {
			o.SetNamespace(ns)
		}
		g.Expect(k8s.Create(ctx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}

	spec := b.csv.Spec.Install.Spec
	dep := spec.Deployments[0]
	sa := dep.Spec.Template.Spec.ServiceAccountName
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
	grantPermissions(t, g, k8s, b.csv.Metadata.Name, ns, spec.Permissions, spec.ClusterPermissions)

	// OLM copies the OperatorGroup's target namespaces into the pod
	// template; WATCH_NAMESPACE reads them from there.
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dep.Name, Labels: dep.Label},
		Spec:       *dep.Spec.DeepCopy(),
	}
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations["olm.targetNamespaces"] = ns
	d.Spec.Template.Annotations["olm.operatorNamespace"] = ns
	d.Spec.Template.Annotations["olm.operatorGroup"] = "kube-fledged"
	g.Expect(k8s.Create(ctx, d)).To(Succeed())

	// What the console offers to create once the operator is installed
	// (test/olmbundle holds it equal to the first alm-example, which the
	// real OLM test installs).
	cr := &unstructured.Unstructured{}
	g.Expect(json.Unmarshal([]byte(b.csv.Metadata.Annotations["operatorframework.io/initialization-resource"]), &cr.Object)).
		To(Succeed(), "the CSV's operatorframework.io/initialization-resource")
	cr.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, cr.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict"))).To(Succeed(), "the initialization resource")
	runOperatorPod(t, d, cr)
}

// runOperatorPod runs the container of an operator Deployment that is in
// the cluster as the kubelet would run it, checks that it becomes ready and
// elects itself, installs and uninstalls the release of cr, stops on
// SIGTERM and was never refused a request.
func runOperatorPod(t *testing.T, d *appsv1.Deployment, cr *unstructured.Unstructured) {
	g := NewWithT(t)
	ctx := context.Background()
	k8s, cs := framework.Clients(t)
	ns := d.Namespace
	bin := binary(t)
	pod := waitPod(t, g, k8s, d)

	container := d.Spec.Template.Spec.Containers[0]
	env := containerEnv(t, pod, container)
	args := make([]string, 0, len(container.Args)+1)
	for _, a := range container.Args {
		args = append(args, expand(a, env))
	}
	kubeconfig := serviceAccountKubeconfig(t, g, cs, ns, d.Spec.Template.Spec.ServiceAccountName)
	checkIdentity(t, g, kubeconfig)

	// A pod has its own network namespace, so its ports are always free; on
	// this host other tests' processes may hold them (OLM's operators bind
	// :8080). Each container port becomes a free port of the host, in the
	// arguments that bind it and in the probes' view.
	ports := map[string]int32{}
	for _, p := range container.Ports {
		port, err := sandbox.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		free := int32(port)
		ports[p.Name] = free
		for i, a := range args {
			if strings.HasSuffix(a, fmt.Sprintf(":%d", p.ContainerPort)) {
				args[i] = strings.TrimSuffix(a, fmt.Sprintf("%d", p.ContainerPort)) + fmt.Sprintf("%d", free)
			}
		}
	}

	t.Logf("running: kubefledged %s (env %v)", strings.Join(args, " "), env)
	begin := time.Now()
	op := startBinary(t, bin, append(args, "--kubeconfig="+kubeconfig), env)

	t.Run("probes and metrics answer", func(t *testing.T) {
		g := NewWithT(t)
		for _, p := range []*corev1.Probe{container.ReadinessProbe, container.LivenessProbe} {
			g.Expect(p).NotTo(BeNil())
			g.Expect(p.HTTPGet).NotTo(BeNil())
			port := ports[p.HTTPGet.Port.StrVal]
			g.Expect(port).NotTo(BeZero(), "probe port %s is not a container port", p.HTTPGet.Port.String())
			g.Eventually(func() (int, error) {
				return httpStatus(fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path))
			}).WithTimeout(timeout).WithPolling(poll).Should(Equal(http.StatusOK), "GET %s; operator log:\n%s", p.HTTPGet.Path, op.tail())
		}
		// The metrics are HTTPS, for callers the API server authorizes: the
		// bundle's metrics-reader role is enough, no token is not.
		addr := fmt.Sprintf("127.0.0.1:%d", ports["metrics"])
		token := framework.MetricsReaderToken(t, g, cs, ns, "scraper", "kube-fledged-metrics-reader")
		g.Eventually(func(g Gomega) {
			code, body := framework.GetSecureMetrics(g, addr, token)
			g.Expect(code).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring("kubefledged_build_info"))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "operator log:\n%s", op.tail())
		code, _ := framework.GetSecureMetrics(g, addr, "")
		g.Expect(code).To(Equal(http.StatusUnauthorized))
		t.Logf("ready %s after start", time.Since(begin).Round(time.Millisecond))
	})

	t.Run("the operator holds the leader Lease in its namespace", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			leases := &coordinationv1.LeaseList{}
			g.Expect(k8s.List(ctx, leases, client.InNamespace(ns))).To(Succeed())
			g.Expect(leases.Items).To(HaveLen(1))
			g.Expect(ptr.Deref(leases.Items[0].Spec.HolderIdentity, "")).NotTo(BeEmpty())
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "operator log:\n%s", op.tail())
	})

	controllerName := cr.GetName() + "-controller"
	related := env["RELATED_IMAGE_KUBEFLEDGED"]

	t.Run("the KubeFledged renders the controller", func(t *testing.T) {
		g := NewWithT(t)
		start := time.Now()
		g.Expect(k8s.Create(ctx, cr.DeepCopy())).To(Succeed())
		ctrl := &appsv1.Deployment{}
		g.Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: cr.GetNamespace(), Name: controllerName}, ctrl)
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "operator log:\n%s", op.tail())
		t.Logf("controller Deployment rendered in %s", time.Since(start).Round(time.Millisecond))
		c := ctrl.Spec.Template.Spec.Containers[0]
		g.Expect(c.Args).NotTo(BeEmpty())
		g.Expect(c.Args[0]).To(Equal("controller"))
		// OLM's related image reaches the release through watches.yaml's
		// override, so a mirrored (disconnected) install runs the mirror.
		g.Expect(c.Image).To(Equal(related))
		g.Expect(c.Args).To(ContainElement("--helper-image=" + related))

		g.Eventually(func(g Gomega) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(cr.GroupVersionKind())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cr), u)).To(Succeed())
			deployed, _, _ := framework.Condition(u, "Deployed")
			g.Expect(deployed).To(Equal("True"), "status: %v", u.Object["status"])
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed(), "operator log:\n%s", op.tail())
		// The chart's own RBAC was created by the operator's identity, which
		// RBAC allows only if the operator holds every permission it grants.
		for _, o := range []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: controllerName}},
		} {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), o)).To(Succeed())
		}
	})

	t.Run("deleting it uninstalls the release", func(t *testing.T) {
		g := NewWithT(t)
		start := time.Now()
		g.Expect(k8s.Delete(ctx, cr.DeepCopy())).To(Succeed())
		g.Eventually(func() bool {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(cr.GroupVersionKind())
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cr), u))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the CR is not gone; operator log:\n%s", op.tail())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: controllerName}, &rbacv1.ClusterRole{}))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the release's ClusterRole is still there")
		t.Logf("uninstalled in %s", time.Since(start).Round(time.Millisecond))
	})

	t.Run("the operator stops cleanly and was never refused", func(t *testing.T) {
		g := NewWithT(t)
		code, err := op.stop(30 * time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(BeZero(), "exit code; operator log:\n%s", op.tail())
		// The container's root filesystem is read-only: nothing may be
		// written to $HOME (Helm's and client-go's caches default there).
		written, err := os.ReadDir(op.home)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(written).To(BeEmpty(), "the operator wrote into $HOME")
		// A missing permission does not always fail the release: a watch
		// that is refused only logs. Any refusal is a gap in the CSV.
		var refused []string
		for _, line := range strings.Split(op.output(), "\n") {
			if strings.Contains(strings.ToLower(line), "forbidden") {
				refused = append(refused, line)
			}
		}
		if len(refused) > 0 {
			first := refused[0]
			if len(first) > 1000 {
				first = first[:1000] + "..."
			}
			t.Errorf("the operator was refused %d times; the first:\n%s", len(refused), first)
		}
	})
}

var built framework.Once[string]

// binary builds the binary once per package. A plain build reuses the
// packages every other test package compiled, so on a cold CI machine it
// costs little more than a link; test/dockerfile checks the image's own
// (static) build. It goes into the sandbox's directory, which the sandbox
// removes.
func binary(t *testing.T) string {
	t.Helper()
	return built.Get(t, func() (string, error) {
		begin := time.Now()
		bin := filepath.Join(sandbox.Get().Dir(), "kubefledged")
		err := repo.Build(context.Background(), ".", bin)
		t.Logf("binary built in %s", time.Since(begin).Round(time.Millisecond))
		return bin, err
	})
}

// grantPermissions creates what OLM creates from the CSV's install strategy
// for an OwnNamespace install: a Role per permissions entry in the operator's
// namespace, a ClusterRole per clusterPermissions entry, each bound to its
// ServiceAccount.
func grantPermissions(t *testing.T, g Gomega, k8s client.Client, csvName, ns string, perms, clusterPerms []permissions) {
	t.Helper()
	ctx := context.Background()
	for i, p := range perms {
		name := fmt.Sprintf("%s-%s-%d", csvName, p.ServiceAccountName, i)
		g.Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: p.Rules})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: p.ServiceAccountName}},
		})).To(Succeed())
	}
	for i, p := range clusterPerms {
		name := fmt.Sprintf("%s-%s-%s-%d", csvName, ns, p.ServiceAccountName, i)
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: p.ServiceAccountName}},
		})).To(Succeed())
	}
}

// waitPod returns the Deployment's pod once its ReplicaSet has created it,
// which the restricted profile allows only to a compliant pod spec.
func waitPod(t *testing.T, g Gomega, k8s client.Client, d *appsv1.Deployment) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(context.Background(), pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
		if len(pods.Items) == 0 {
			rss := &appsv1.ReplicaSetList{}
			g.Expect(k8s.List(context.Background(), rss, client.InNamespace(d.Namespace))).To(Succeed())
			var why []string
			for _, rs := range rss.Items {
				for _, c := range rs.Status.Conditions {
					why = append(why, c.Message)
				}
			}
			g.Expect(pods.Items).NotTo(BeEmpty(), "no pod yet; ReplicaSet conditions: %v", why)
		}
		pods.Items[0].DeepCopyInto(pod)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return pod
}

// containerEnv resolves the container's environment as the kubelet does:
// values in order, $(VAR) of earlier ones expanded, field references read
// from the pod.
func containerEnv(t *testing.T, pod *corev1.Pod, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldRef(pod, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			env[e.Name] = v
		default:
			t.Fatalf("env %s: only values and field references are resolved here", e.Name)
		}
	}
	return env
}

func fieldRef(pod *corev1.Pod, path string) (string, error) {
	subscript := func(prefix string) (string, bool) {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			return path[len(prefix)+2 : len(path)-2], true
		}
		return "", false
	}
	switch path {
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.name":
		return pod.Name, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	}
	if k, ok := subscript("metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	if k, ok := subscript("metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	return "", fmt.Errorf("field path %q is not resolved here", path)
}

// expand replaces $(VAR) by VAR's value when VAR is defined and $$ by $, as
// the kubelet does in args and env values.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '$' && i+1 < len(s) {
			if s[i+1] == '$' {
				b.WriteByte('$')
				i++
				continue
			}
			if s[i+1] == '(' {
				if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
					if v, ok := env[s[i+2:i+2+j]]; ok {
						b.WriteString(v)
						i += 2 + j
						continue
					}
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// serviceAccountKubeconfig writes a kubeconfig with a TokenRequest token of
// the ServiceAccount, as its pod would mount.
func serviceAccountKubeconfig(t *testing.T, g Gomega, cs kubernetes.Interface, ns, sa string) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	admin := sandbox.Get().Config()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = "sandbox"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	g.Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path
}

// checkIdentity makes sure the kubeconfig really is the ServiceAccount's
// (not the admin's) and cannot touch CRDs.
func checkIdentity(t *testing.T, g Gomega, kubeconfig string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range []struct {
		attr  authorizationv1.ResourceAttributes
		allow bool
	}{
		{authorizationv1.ResourceAttributes{Verb: "create", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: "charts.helm.kubefledged.io", Resource: "kubefledgeds"}, true},
	} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &c.attr}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Status.Allowed).To(Equal(c.allow), "%s %s/%s", c.attr.Verb, c.attr.Group, c.attr.Resource)
	}
}

func httpStatus(url string) (int, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// process is the operator binary running in the background.
type process struct {
	child   *proc.Child
	mu      sync.Mutex
	out     bytes.Buffer
	stopped bool
	// home is $HOME, which is on the image's read-only root filesystem.
	home string
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *process) tail() string {
	lines := strings.Split(strings.TrimRight(p.output(), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// stop sends SIGTERM, as the kubelet does, and waits for the exit code.
func (p *process) stop(grace time.Duration) (int, error) {
	p.stopped = true
	if err := syscall.Kill(p.child.PID(), syscall.SIGTERM); err != nil {
		return -1, err
	}
	select {
	case <-p.child.Done():
		var exit *exec.ExitError
		if errors.As(p.child.Err(), &exit) {
			return exit.ExitCode(), nil
		}
		return 0, p.child.Err()
	case <-time.After(grace):
		p.child.Kill()
		return -1, fmt.Errorf("no exit within %s of SIGTERM", grace)
	}
}

// startBinary runs the binary from the repository root, which holds
// watches.yaml and helm-charts/ as the image's working directory does, with
// only the container's environment (plus PATH and a scratch HOME).
func startBinary(t *testing.T, bin string, args []string, env map[string]string) *process {
	t.Helper()
	p := &process{home: t.TempDir()}
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + p.home}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = p, p
	var err error
	if p.child, err = proc.Run(cmd, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.stopped {
			p.child.Kill()
		}
		if t.Failed() {
			t.Logf("operator output:\n%s", p.output())
		}
	})
	select {
	case <-p.child.Done():
		t.Fatalf("the operator exited at once (%v):\n%s", p.child.Err(), p.output())
	case <-time.After(500 * time.Millisecond):
	}
	return p
}
