package operator

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/e2e/chaos"
	"github.com/kubefledged/kube-fledged/test/framework"
)

const release = "kubefledged" // the sample CR's name

// The release's objects, by kind: any of them deleted while the operator
// merely upgrades is an accidental uninstall.
var releaseKinds = []schema.GroupVersionResource{
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
}

// TestOperatorKilledDuringUpgrade changes the KubeFledged resource again and
// again and SIGKILLs the operator in the middle of the Helm upgrade each
// change starts: right when Helm has recorded the new revision as
// pending-upgrade (the window in which Helm itself is least able to recover),
// or at a random moment after the edit. After each restart the release must
// converge to the resource's spec, and no object of the release may be
// deleted at any time.
func TestOperatorKilledDuringUpgrade(t *testing.T) {
	e := chaos.Setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	kills := 3
	if chaos.Long() {
		kills = 12
	}
	rng := chaos.Rand(t)

	ns := e.Namespace(t, "op")
	dyn, err := dynamic.NewForConfig(e.SB.Config())
	g.Expect(err).NotTo(HaveOccurred())
	watch := watchRelease(t, dyn, ns)

	cr, err := framework.SampleKubeFledged(ns)
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKeyFromObject(cr)

	n := 0
	start := func() *chaos.Process {
		n++
		p, err := chaos.Start(fmt.Sprintf("operator-%02d", n), e.Bin, []string{"operator",
			"--watches-file", "watches.yaml", "--namespace", ns, "--leader-elect=false", "--kubeconfig", e.SB.KubeconfigPath(),
			"--metrics-bind-address=0", "--health-probe-bind-address=0"}, e.Root, filepath.Join(e.LogDir, fmt.Sprintf("operator-%02d.log", n)))
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { p.Kill() })
		return p
	}
	p := start()
	g.Expect(e.Client.Create(ctx, cr)).To(Succeed())
	converge(t, e, key, "5m", p, watch)
	unlocked := 0

	points := map[string]int{}
	var recoveries []time.Duration
	for i := 0; i < kills; i++ {
		want := fmt.Sprintf("%dm", 6+i)
		point := []string{"pending-upgrade", "random"}[i%2]
		points[point]++
		pending := watch.pendingFrom(time.Now())
		// A merge patch, not a read and an update: the operator writes the
		// resource's status meanwhile, and a stale update would conflict.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(operator.KubeFledgedGVK)
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		body := fmt.Sprintf(`{"spec":{"controller":{"imagePullDeadlineDuration":%q}}}`, want)
		g.Expect(e.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(body)))).To(Succeed())
		switch point {
		case "pending-upgrade":
			select {
			case <-pending:
			case <-time.After(framework.ClusterTimeout):
				t.Fatalf("no pending-upgrade revision in %s:\n%s", framework.ClusterTimeout, p.Tail(20))
			}
		default:
			time.Sleep(time.Duration(rng.Intn(1500)) * time.Millisecond)
		}
		killed := p.Kill()
		p = start()
		converge(t, e, key, want, p, watch)
		unlocked += count(p, unlockMessage)
		recoveries = append(recoveries, time.Since(killed))
	}

	g.Expect(watch.deletions()).To(BeEmpty(), "objects of the release were deleted during upgrades")
	st := watch.statuses()
	t.Logf("FIGURES operator: kills=%d kill-points=%v revisions=%v convergence-after-kill=%v pending-revisions-released-on-restart=%d",
		kills, points, st, roundAll(recoveries), unlocked)
}

// unlockMessage is what the operator logs when it marks failed a revision
// that a killed operator left pending: before it did, such a release was
// locked for good ("another operation (install/upgrade/rollback) is in
// progress") and the resource's spec was never applied again.
const unlockMessage = "released a revision left pending by a stopped operator"

func count(p *chaos.Process, text string) int {
	n := 0
	for _, l := range p.Lines() {
		if strings.Contains(l.Text, text) {
			n++
		}
	}
	return n
}

// converge waits until the release runs the resource's spec, by itself.
func converge(t *testing.T, e *chaos.Env, key client.ObjectKey, deadline string, p *chaos.Process, w *releaseWatch) {
	t.Helper()
	end := time.Now().Add(framework.ClusterTimeout)
	for {
		err := converged(e, key, deadline, w)
		if err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the release did not converge to %s: %v; revisions %v; operator log:\n%s", deadline, err, w.statuses(), p.Tail(30))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// converged says what still differs from a release that runs the spec: the
// Deployment's deadline flag, the latest revision's status, the resource's
// Deployed condition.
func converged(e *chaos.Env, key client.ObjectKey, deadline string, w *releaseWatch) error {
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: release + "-controller"}, d); err != nil {
		return err
	}
	if want := "--image-pull-deadline-duration=" + deadline; !contains(d.Spec.Template.Spec.Containers[0].Args, want) {
		return fmt.Errorf("the Deployment lacks %s", want)
	}
	if latest, status := w.latest(); status != "deployed" {
		return fmt.Errorf("latest revision %d is %q", latest, status)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(operator.KubeFledgedGVK)
	if err := e.Client.Get(ctx, key, u); err != nil {
		return err
	}
	if st, _, _ := framework.Condition(u, "Deployed"); st == "True" {
		return nil
	}
	return fmt.Errorf("the resource is not Deployed: %v", u.Object["status"])
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// releaseWatch follows the Helm release records (Secrets owner=helm) and
// deletions of the release's objects.
type releaseWatch struct {
	mu       sync.Mutex
	revision map[int]string // revision -> status, as last seen
	deleted  []string
	waiters  []pendingWaiter
}

type pendingWaiter struct {
	after time.Time
	ch    chan struct{}
}

func watchRelease(t *testing.T, dyn dynamic.Interface, ns string) *releaseWatch {
	t.Helper()
	w := &releaseWatch{revision: map[int]string{}}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })

	secrets := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, func(o *metav1.ListOptions) {
		o.LabelSelector = "owner=helm,name=" + release
	})
	inf := secrets.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}).Informer()
	onSecret := func(obj interface{}) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		labels := u.GetLabels()
		v, err := strconv.Atoi(labels["version"])
		if err != nil {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.revision[v] = labels["status"]
		if strings.HasPrefix(labels["status"], "pending") {
			kept := w.waiters[:0]
			for _, wt := range w.waiters {
				if u.GetCreationTimestamp().Time.Before(wt.after.Truncate(time.Second)) {
					kept = append(kept, wt)
					continue
				}
				close(wt.ch)
			}
			w.waiters = kept
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onSecret, UpdateFunc: func(_, o interface{}) { onSecret(o) }})

	objects := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = "app.kubernetes.io/instance=" + release
	})
	var synced []cache.InformerSynced
	for _, gvr := range releaseKinds {
		gvr := gvr
		i := objects.ForResource(gvr).Informer()
		_, _ = i.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok && (u.GetNamespace() == "" || u.GetNamespace() == ns) {
				w.mu.Lock()
				w.deleted = append(w.deleted, gvr.Resource+"/"+u.GetName())
				w.mu.Unlock()
			}
		}})
		synced = append(synced, i.HasSynced)
	}
	secrets.Start(stop)
	objects.Start(stop)
	if !cache.WaitForCacheSync(stop, append(synced, inf.HasSynced)...) {
		t.Fatal("release watches did not sync")
	}
	return w
}

// pendingFrom is closed when a revision created at or after t is seen
// pending.
func (w *releaseWatch) pendingFrom(t time.Time) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.waiters = append(w.waiters, pendingWaiter{after: t, ch: ch})
	return ch
}

func (w *releaseWatch) latest() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	max := 0
	for v := range w.revision {
		if v > max {
			max = v
		}
	}
	return max, w.revision[max]
}

func (w *releaseWatch) statuses() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var vs []int
	for v := range w.revision {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	var out []string
	for _, v := range vs {
		out = append(out, fmt.Sprintf("%d:%s", v, w.revision[v]))
	}
	return out
}

func (w *releaseWatch) deletions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.deleted...)
}

func roundAll(ds []time.Duration) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Round(100*time.Millisecond).String())
	}
	return out
}
