package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Scenario 7 runs the original kube-fledged, built from a checkout of its source
// (BENCH_ORIGINAL_SRC): the Go module proxy refuses its module and no registry here
// serves its image, so the benchmark cannot fetch it itself.

// originalTimeout is the bound: the original is reported at a scale it
// finishes within an hour.
const originalTimeout = time.Hour

// originalReady is what the original logs once its informers synced and its
// image manager runs (pkg/images/image_manager.go; its "Image manager started"
// comes only at shutdown).
const originalReady = "Started image manager"

// buildOriginal builds the original's controller from its source and says which
// version the checkout is.
func buildOriginal(ctx context.Context, src, out string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/controller")
	cmd.Dir = src
	// The original is a module of its own, with its own (older) dependencies.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the original from %s: %v\n%s", src, err, b)
	}
	v, err := exec.CommandContext(ctx, "git", "-C", src, "describe", "--tags", "--always").Output()
	if err != nil {
		return "", fmt.Errorf("BENCH_ORIGINAL_SRC=%s: not a git checkout, so its version is unknown: %w", src, err)
	}
	return strings.TrimSpace(string(v)), nil
}

func (e *env) originalBeside(binary, version string) (*originalResult, error) {
	nodes, imgs := nodeNames("sandbox-node-", e.cfg.OriginalNodes), imageNames(e.cfg.Images)
	r := &originalResult{Version: version, ColdResult: coldResult{Run: e.runInfo(), Nodes: len(nodes), Images: len(imgs), Pairs: len(nodes) * len(imgs)}}
	fl, err := e.floor("scenario 7", "s7-floor", nodes, imgs)
	r.Floor = fl
	if err != nil {
		return r, err
	}
	orig, err := e.runOriginal(binary, version, "s7-original", imgs, r.Pairs)
	if orig != nil {
		orig.RatioToFloor = round(orig.Seconds/fl.Seconds, 2)
		r.Original = orig
	}
	if err != nil {
		return r, fmt.Errorf("the original: %w", err)
	}
	r.Runs, err = e.coldRuns("scenario 7", "s7", fl, imgs, r.Pairs, false)
	return r, err
}

// runOriginal measures the original on a cold cache of imgs on every node, from the
// cache's creation to its final status, in namespace ns, which also holds its Jobs.
func (e *env) runOriginal(binary, version, ns string, imgs []string, pairs int) (*phase, error) {
	ctx, cancel := context.WithTimeout(context.Background(), originalTimeout+10*time.Minute)
	defer cancel()
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	// The original writes its status with updates of the whole object: its CRD has no
	// status subresource, and with ours its status would be dropped.
	if err := e.statusSubresource(ctx, false); err != nil {
		return nil, err
	}
	defer func() {
		if err := e.statusSubresource(context.Background(), true); err != nil {
			e.t.Errorf("restoring the status subresource: %v", err)
		}
	}()
	// The original takes only an in-cluster configuration: an https address and a CA.
	// The proxy serves it over TLS, so that its requests are counted as ours are.
	addr, ca, err := e.proxy.serveTLS()
	if err != nil {
		return nil, err
	}
	secrets, err := e.inClusterFiles(ctx, ns, ca)
	if err != nil {
		return nil, err
	}
	jw, cw, err := e.watchNamespace(ctx, ns)
	if err != nil {
		return nil, err
	}
	ctl, err := e.startOriginal(ctx, binary, addr, ns, secrets)
	if err != nil {
		return nil, err
	}
	defer ctl.stop()
	p := &phase{Name: "the original " + version, Pairs: pairs}
	m, err := e.startMeter(ctl)
	if err != nil {
		return nil, err
	}
	e.t.Logf("scenario 7, the original: %d pulls", pairs)
	began := time.Now()
	cache := newCache(ns, "bench", imgs)
	if err := e.createWithoutStatus(ctx, cache); err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithTimeout(ctx, originalTimeout)
	done, final, err := cw.final(ctl.until(wctx), cache.Name, v1alpha2.ImageCacheReasonImageCacheCreate, began)
	wcancel()
	p.Jobs = jw.figures()
	if err != nil {
		if aerr := ctl.alive(); aerr != nil {
			err = aerr
		}
		// Still a figure: the original did not finish within the hour.
		p.Seconds = round(time.Since(began).Seconds(), 2)
		return p, err
	}
	if err := m.stop(p); err != nil {
		return nil, err
	}
	p.Seconds = round(done.Sub(began).Seconds(), 2)
	timeline(p, jw, began, done)
	e.statusWrites(p, cache.Name, began, done)
	p.Status = statusOf(final)
	e.t.Logf("scenario 7, the original: %s in %.1fs, %d Jobs, peak %d in flight, peak RSS %.0f MiB",
		p.Status.Status, p.Seconds, p.Jobs.Created, p.Jobs.PeakInFlight, p.ControllerPeakRSSMiB)
	if err := ctl.stop(); err != nil {
		e.t.Logf("scenario 7, the original: %v", err)
	}
	// The original leaves its cache; ours would find it in another namespace.
	if err := e.k8s.Delete(ctx, cache); err != nil {
		return p, err
	}
	gone, err := e.waitGone(ns)
	p.CleanupSeconds = round(gone.Seconds(), 1)
	return p, err
}

// statusSubresource turns the ImageCache CRD's status subresource off, for the
// original, or back on, and waits until the API server serves the change: a cache
// created with a status keeps it only while the subresource is off.
func (e *env) statusSubresource(ctx context.Context, on bool) error {
	patch := `[{"op":"remove","path":"/spec/versions/0/subresources/status"}]`
	if on {
		patch = `[{"op":"add","path":"/spec/versions/0/subresources/status","value":{}}]`
	}
	crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}}
	crd.Name = "imagecaches.kubefledged.io"
	if err := e.k8s.Patch(ctx, crd, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		return fmt.Errorf("the CRD's status subresource: %w", err)
	}
	for i := 0; ; i++ {
		probe := newCache("bench-probe", fmt.Sprintf("subresource-%d", i), []string{"registry.bench.test/probe:1"})
		probe.Spec.CacheSpec[0].NodeSelector = map[string]string{"bench.kubefledged.io/none": "none"}
		probe.Status.Status, probe.Status.Message = v1alpha2.ImageCacheActionStatusUnknown, "kept"
		if err := e.k8s.Create(ctx, probe); err != nil {
			return err
		}
		kept := probe.Status.Message == "kept"
		if err := e.k8s.Delete(ctx, probe); err != nil {
			return err
		}
		if kept != on {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the CRD's status subresource on=%v not served: %w", on, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createWithoutStatus creates a cache as a user would, with no status at all: with the
// status subresource off, the empty status our type would send is validated, and
// refused.
func (e *env) createWithoutStatus(ctx context.Context, c *v1alpha2.ImageCache) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	if err != nil {
		return err
	}
	delete(u, "status")
	obj := &unstructured.Unstructured{Object: u}
	obj.SetGroupVersionKind(v1alpha2.GroupVersion.WithKind("ImageCache"))
	return e.k8s.Create(ctx, obj)
}

// inClusterFiles writes what a pod would find in its service-account mount, for the
// original, which only takes an in-cluster configuration: a token of a service account
// bound to cluster-admin, and the CA of the address it is given.
func (e *env) inClusterFiles(ctx context.Context, ns string, ca []byte) (string, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubefledged-original"}}
	if err := e.k8s.Create(ctx, sa); err != nil {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if err := e.k8s.Create(ctx, crb); err != nil {
		return "", err
	}
	tr, err := e.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64((originalTimeout + time.Hour).Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(e.sb.Dir(), "original-serviceaccount")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "ca.crt"), ca, 0o600)
}

// startOriginal starts the original against the sandbox and waits for its workers.
// rest.InClusterConfig reads its files from a fixed path: the process gets a mount
// namespace of its own, where a tmpfs over /run (of which /var/run is a link) holds
// them, and the host's /run stays as it is.
func (e *env) startOriginal(ctx context.Context, binary, addr, ns, secrets string) (*controller, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	const mount = "/run/secrets/kubernetes.io/serviceaccount"
	script := fmt.Sprintf(`mount -t tmpfs tmpfs /run && mkdir -p %[1]s && cp %[2]s/token %[2]s/ca.crt %[1]s/ && exec "$@"`, mount, secrets)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "original", binary,
		"--logtostderr", "--v=1",
		"--image-pull-deadline-duration="+e.cfg.Deadline.String(),
		"--image-cache-refresh-frequency=0s",
		"--image-pull-policy=IfNotPresent")
	cmd.Env = append(os.Environ(),
		"KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port,
		"KUBEFLEDGED_NAMESPACE="+ns,
		"KUBEFLEDGED_CRI_CLIENT_IMAGE=registry.bench.test/cri-client:v1",
		"BUSYBOX_IMAGE=registry.bench.test/busybox:v1")
	e.seq++
	logPath := filepath.Join(e.outDir, "logs", fmt.Sprintf("controller-%02d-original.log", e.seq))
	ctl, err := launch(cmd, logPath)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !logHas(logPath, originalReady) {
		if err := ctl.alive(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			ctl.stop()
			return nil, fmt.Errorf("the original did not log %q within 2 minutes (log %s)", originalReady, logPath)
		}
		select {
		case <-ctx.Done():
			ctl.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ctl, nil
}

func logHas(path, line string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), line) {
			return true
		}
	}
	return false
}

// errNoOriginal says why scenario 7 did not run.
var errNoOriginal = errors.New("scenario 7 needs BENCH_ORIGINAL_SRC, a git checkout of github.com/senthilrch/kube-fledged (e.g. its tag v0.10.0): the Go module proxy refuses the module")
