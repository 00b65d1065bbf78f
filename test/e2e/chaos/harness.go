package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// built is the controller binary of this test binary, linked while the sandbox starts: each
// takes tens of seconds on a loaded machine.
var built struct {
	done chan struct{}
	path string
	err  error
}

// Main is the TestMain of a chaos suite: it starts building the binary (named after suffix)
// and runs the tests in a sandbox of shape o; Setup waits for the build.
func Main(m *testing.M, suffix string, o sandbox.Options) {
	built.done = make(chan struct{})
	go func() {
		defer close(built.done)
		// Each suite links into a path of its own: two packages linking into one
		// path at once could exec a half-written file.
		built.path, built.err = repo.Path("bin", "kubefledged-"+suffix)
		if built.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		built.err = repo.Build(ctx, ".", built.path)
	}()
	sandbox.Main(m, o)
}

// Env is what the fault tests of the controller share.
type Env struct {
	Root   string
	Bin    string
	SB     *sandbox.Sandbox
	Client client.Client
	Kube   kubernetes.Interface
	// LogDir holds every child's output: $KUBEFLEDGED_CHAOS_LOGS when set
	// (kept after the run), else the sandbox's own log dir.
	LogDir string
}

var (
	envOnce sync.Once
	env     *Env
	envErr  error
)

// Setup connects to the package's sandbox, waits for the binary and installs
// the CRDs, once per package.
func Setup(t testing.TB) *Env {
	t.Helper()
	envOnce.Do(func() {
		env, envErr = setup()
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func setup() (*Env, error) {
	sb := sandbox.Get()
	if sb == nil || built.done == nil {
		return nil, fmt.Errorf("no sandbox: run from a TestMain that calls chaos.Main")
	}
	<-built.done
	if built.err != nil {
		return nil, built.err
	}
	bin := built.path
	root, err := repo.Root()
	if err != nil {
		return nil, err
	}
	c, err := client.New(sb.Config(), client.Options{Scheme: framework.Scheme()})
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(sb.Config())
	if err != nil {
		return nil, err
	}
	logDir := os.Getenv("KUBEFLEDGED_CHAOS_LOGS")
	if logDir == "" {
		logDir = filepath.Join(sb.Dir(), "logs")
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	e := &Env{Root: root, Bin: bin, SB: sb, Client: c, Kube: kube, LogDir: logDir}
	if err := framework.InstallCRDs(context.Background(), sb.Config(), framework.ImageCacheCRD, framework.KubeFledgedCRD); err != nil {
		return nil, err
	}
	return e, nil
}

// Namespace creates a namespace for one test; its caches are deleted at
// the end so that the next test's controller finds nothing of it.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := framework.Namespace(t, e.Client, prefix+"-")
	t.Cleanup(func() {
		_ = e.Client.DeleteAllOf(context.Background(), &v1alpha2.ImageCache{}, client.InNamespace(ns))
		_ = e.Client.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(ns),
			client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	return ns
}

// ControllerFlags are the flags every fault test starts from: no webhook (it
// is not what these tests break), no endpoints to collide on, short
// deadlines, refresh off so only the tests start operations, and helper
// images that the fake nodes "pull" at once.
func (e *Env) ControllerFlags() map[string]string {
	f := map[string]string{
		"kubeconfig":                    e.SB.KubeconfigPath(),
		"leader-elect":                  "false",
		"leader-election-namespace":     "default",
		"enable-webhook":                "false",
		"metrics-bind-address":          "0",
		"health-probe-bind-address":     "0",
		"image-pull-deadline-duration":  "6s",
		"image-cache-refresh-frequency": "0s",
		"job-retention-policy":          "delete",
		"helper-image":                  "example.test/kubefledged:chaos",
		"max-concurrent-jobs-per-node":  "3",
		"delete-job-namespace":          "kubefledged-chaos",
	}
	// The controller's default granularity unless a run asks for the other,
	// as `make test` does for the ImageCache suite.
	if g := os.Getenv("E2E_PULL_JOB_GRANULARITY"); g != "" {
		f["pull-job-granularity"] = g
	}
	return f
}

// StartController runs `kubefledged controller` with ControllerFlags
// overridden by flags; it is killed when the test ends.
func (e *Env) StartController(t testing.TB, name string, flags map[string]string) *Process {
	t.Helper()
	all := e.ControllerFlags()
	for k, v := range flags {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []string{"controller"}
	for _, k := range keys {
		args = append(args, "--"+k+"="+all[k])
	}
	if ns := all["delete-job-namespace"]; ns != "" {
		framework.EnsureNamespace(t, e.Kube, ns)
	}
	p, err := Start(name, e.Bin, args, e.Root, filepath.Join(e.LogDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	return p
}

// Preflight waits for the start-up clean-up of a controller to finish.
func Preflight(ctx context.Context, p *Process) (Line, error) {
	return p.WaitLine(ctx, MsgIs("start-up clean-up done"))
}

// OpStart is an operation a controller process logged as started.
type OpStart struct {
	ID, Cache, Kind string
	At              time.Time
}

// Operations lists the operations a controller process started, from its
// log: the only record of which process owns which Jobs.
func Operations(p *Process) []OpStart {
	var out []OpStart
	for _, l := range p.Lines() {
		if l.Msg() != "operation started" {
			continue
		}
		ns, name := l.Str("namespace"), l.Str("name")
		if ic, ok := l.Fields["ImageCache"].(map[string]interface{}); ok && name == "" {
			ns, _ = ic["namespace"].(string)
			name, _ = ic["name"].(string)
		}
		out = append(out, OpStart{ID: l.Str("id"), Cache: ns + "/" + name, Kind: l.Str("operation"), At: l.At})
	}
	return out
}

// NewCache is an ImageCache of one list per argument, each on all nodes.
func NewCache(ns, name string, lists ...[]string) *v1alpha2.ImageCache {
	ic := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, l := range lists {
		ic.Spec.CacheSpec = append(ic.Spec.CacheSpec, v1alpha2.CacheSpecImages{Images: l})
	}
	return ic
}

// Final reports whether a status is the end of an operation.
func Final(st v1alpha2.ImageCacheActionStatus) bool {
	switch st {
	case v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheActionStatusFailed,
		v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted:
		return true
	}
	return false
}

// WaitFinal waits until a cache ends an operation (with the given reason,
// when not empty) and returns it.
func (e *Env) WaitFinal(t testing.TB, key client.ObjectKey, reason string, timeout time.Duration) *v1alpha2.ImageCache {
	t.Helper()
	ic := &v1alpha2.ImageCache{}
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(e.Client.Get(context.Background(), key, ic)).To(gomega.Succeed())
		g.Expect(Final(ic.Status.Status)).To(gomega.BeTrue(), "status %q (%s)", ic.Status.Status, ic.Status.Reason)
		if reason != "" {
			g.Expect(ic.Status.Reason).To(gomega.Equal(reason))
		}
	}).WithTimeout(timeout).WithPolling(250*time.Millisecond).Should(gomega.Succeed(), "%s did not finish", key)
	return ic
}

// RecordJobs starts a log of every Job of the controller's, in every namespace, until the
// test ends.
func (e *Env) RecordJobs(t testing.TB) *framework.JobLog {
	t.Helper()
	return framework.RecordJobs(t, e.Kube, "", labels.Set{jobs.LabelApp: jobs.LabelAppValue, jobs.LabelManager: jobs.LabelManagerValue})
}

// Duplicates describes every (operation, kind, image, node) that more than
// one Job was created for: with fixed names per operation there must be
// none, whatever was killed or restarted in between, at either pull Job
// granularity.
//
// A node Job has one key per container, so that two node Jobs of one operation on one
// node (pairs that got their slots at different times) are told apart by what they
// pull, not taken for one Job made twice.
func Duplicates(rs []framework.JobRecord) []string {
	by := map[string][]framework.JobRecord{}
	for _, r := range rs {
		for _, w := range r.Work() {
			k := r.Op + " " + w
			by[k] = append(by[k], r)
		}
	}
	var out []string
	for k, l := range by {
		if len(l) > 1 {
			var names []string
			for _, r := range l {
				names = append(names, r.Namespace+"/"+r.Name+" ("+r.UID+")")
			}
			out = append(out, fmt.Sprintf("%s: %s", k, strings.Join(names, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

// LiveJobs lists the labelled Jobs in ns straight from the API server.
func (e *Env) LiveJobs(ctx context.Context, ns string) ([]batchv1.Job, error) {
	l := &batchv1.JobList{}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: jobs.ManagedSelector()}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := e.Client.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	return l.Items, nil
}
