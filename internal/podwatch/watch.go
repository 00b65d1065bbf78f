// Package podwatch keeps what fromPods and fromWorkloads read of the
// cluster: a pod's identity, labels, controller and image names; a
// workload's (Deployment, StatefulSet, DaemonSet, CronJob) identity and pod
// template's labels and image names; a namespace's labels. Its informers are
// its own because the manager's pod cache holds only the controller's Job
// pods, and each starts only when a cache first asks for what it holds, so
// that a cluster using no fromPods pays nothing for the pods, and one using
// no fromWorkloads nothing for the workloads. Where the controller may not
// list them, the watch reports why instead of holding up the controller:
// fromPods and fromWorkloads wait, the named images are cached regardless.
package podwatch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kubefledged/kube-fledged/internal/podimages"
)

// ErrNotSynced is returned while the first list of what was asked for has
// not arrived, for at most SyncGrace; the watch's events wake the caller
// when it does.
var ErrNotSynced = errors.New("not listed yet")

// SyncGrace is how long a first list may take before it counts as failed:
// a cache may wait for its pods to be known before its first operation,
// but not for ever.
const SyncGrace = 30 * time.Second

// The resources each kind of snapshot reads, in the order errors name them.
var (
	podResources      = []string{"namespaces", "pods"}
	workloadResources = []string{"namespaces", "deployments", "statefulsets", "daemonsets", "cronjobs"}
)

// Watch holds the pod, workload and namespace informers.
type Watch struct {
	informers map[string]toolscache.SharedIndexInformer // by resource

	mu      sync.Mutex
	ctx     context.Context      // the manager's, set by Start
	started map[string]time.Time // by resource, once running
	lastErr map[string]error     // by resource, until its informer has synced
}

// New watches every pod, workload and namespace through cs.
func New(cs kubernetes.Interface) *Watch {
	w := &Watch{informers: map[string]toolscache.SharedIndexInformer{}, started: map[string]time.Time{}, lastErr: map[string]error{}}
	core, apps, batch := cs.CoreV1().RESTClient(), cs.AppsV1().RESTClient(), cs.BatchV1().RESTClient()
	w.informer(core, "pods", &corev1.Pod{}, Pod)
	w.informer(core, "namespaces", &corev1.Namespace{}, Namespace)
	w.informer(apps, "deployments", &appsv1.Deployment{}, Workload)
	w.informer(apps, "statefulsets", &appsv1.StatefulSet{}, Workload)
	w.informer(apps, "daemonsets", &appsv1.DaemonSet{}, Workload)
	w.informer(batch, "cronjobs", &batchv1.CronJob{}, Workload)
	return w
}

func (w *Watch) informer(c rest.Interface, resource string, obj runtime.Object, trim toolscache.TransformFunc) {
	lw := toolscache.NewListWatchFromClient(c, resource, metav1.NamespaceAll, fields.Everything())
	inf := toolscache.NewSharedIndexInformer(lw, obj, 0, toolscache.Indexers{})
	// Both only fail once the informer has started.
	_ = inf.SetTransform(trim)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr[resource] = err
		w.mu.Unlock()
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	w.informers[resource] = inf
}

// Start records the manager's context for the informers, which run once
// Snapshot or Workloads first asks for them. Every replica runs them,
// leader or not, as for the other informers.
func (w *Watch) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: see Start.
func (w *Watch) NeedLeaderElection() bool { return false }

// ready starts the informers of resources that do not run yet and says
// whether all have listed: ErrNotSynced while they are listing, why a list
// failed (the controller may not list them, say), or that one has taken
// longer than SyncGrace.
func (w *Watch) ready(resources []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var errs []error
	var unsynced []string
	var waited time.Duration
	for _, res := range resources {
		inf := w.informers[res]
		if _, ok := w.started[res]; !ok && w.ctx != nil {
			w.started[res] = time.Now()
			go inf.Run(w.ctx.Done())
		}
		if inf.HasSynced() {
			continue
		}
		unsynced = append(unsynced, res)
		if err := w.lastErr[res]; err != nil {
			errs = append(errs, fmt.Errorf("listing %s: %w", res, err))
		}
		if at, ok := w.started[res]; ok && (waited == 0 || time.Since(at) < waited) {
			waited = time.Since(at)
		}
	}
	switch {
	case len(unsynced) == 0:
		return nil
	case len(errs) > 0:
		return errors.Join(errs...)
	case waited < SyncGrace:
		return fmt.Errorf("%s: %w", strings.Join(unsynced, ", "), ErrNotSynced)
	}
	return fmt.Errorf("%s not listed %s after the watch started", strings.Join(unsynced, ", "), waited.Truncate(time.Second))
}

// Snapshot returns the pods and the namespaces' labels as last seen. Until
// both have been listed it returns ErrNotSynced, or why the list failed;
// the first call starts them. Nothing may write to the pods returned.
func (w *Watch) Snapshot() ([]*corev1.Pod, map[string]labels.Set, error) {
	if err := w.ready(podResources); err != nil {
		return nil, nil, err
	}
	var pods []*corev1.Pod
	for _, o := range w.informers["pods"].GetStore().List() {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, w.namespaceLabels(), nil
}

// Workloads returns the pod templates of the Deployments, StatefulSets,
// DaemonSets and CronJobs, and the namespaces' labels, as last seen, but
// those being deleted. Until all have been listed it returns ErrNotSynced,
// or why a list failed; the first call starts them.
func (w *Watch) Workloads() ([]podimages.Workload, map[string]labels.Set, error) {
	if err := w.ready(workloadResources); err != nil {
		return nil, nil, err
	}
	var out []podimages.Workload
	for _, res := range workloadResources[1:] {
		for _, o := range w.informers[res].GetStore().List() {
			if wl, ok := podimages.WorkloadOf(o); ok {
				out = append(out, wl)
			}
		}
	}
	return out, w.namespaceLabels(), nil
}

func (w *Watch) namespaceLabels() map[string]labels.Set {
	ns := map[string]labels.Set{}
	for _, o := range w.informers["namespaces"].GetStore().List() {
		if n, ok := o.(*corev1.Namespace); ok {
			ns[n.Name] = n.Labels
		}
	}
	return ns
}

// Sources feed pod, workload and namespace events to a controller through
// h, passed preds. Unlike the Job watch they are no SyncingSource: the
// controller must not wait for what it may never be allowed to list.
func (w *Watch) Sources(h handler.EventHandler, preds ...predicate.Predicate) []source.Source {
	var out []source.Source
	for _, res := range append([]string{"pods"}, workloadResources...) {
		out = append(out, &source.Informer{Informer: w.informers[res], Handler: h, Predicates: preds})
	}
	return out
}

// Pod keeps what fromPods reads of a pod: its identity, labels, controller
// and the images of its containers. A pod's spec and status are most of its
// size, and every pod of the cluster is held.
func Pod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels,
	}}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, Name: ref.Name, UID: ref.UID, Controller: ref.Controller}}
	}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range p.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}})
	}
	return out, nil
}

// Namespace keeps a namespace's name and labels.
func Namespace(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
	}}, nil
}

// Workload keeps what fromWorkloads reads of a Deployment, StatefulSet,
// DaemonSet or CronJob: its identity, whether it is being deleted, and its
// pod template's labels and container names and images.
func Workload(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: objectMeta(&o.ObjectMeta), Spec: appsv1.DeploymentSpec{Template: podTemplate(&o.Spec.Template)}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: objectMeta(&o.ObjectMeta), Spec: appsv1.StatefulSetSpec{Template: podTemplate(&o.Spec.Template)}}, nil
	case *appsv1.DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: objectMeta(&o.ObjectMeta), Spec: appsv1.DaemonSetSpec{Template: podTemplate(&o.Spec.Template)}}, nil
	case *batchv1.CronJob:
		return &batchv1.CronJob{ObjectMeta: objectMeta(&o.ObjectMeta), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: podTemplate(&o.Spec.JobTemplate.Spec.Template)}}}}, nil
	}
	return obj, nil
}

func objectMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp}
}

func podTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	out := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Labels}}
	for _, c := range t.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range t.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	return out
}

var (
	_ manager.Runnable               = &Watch{}
	_ manager.LeaderElectionRunnable = &Watch{}
	_ toolscache.TransformFunc       = Pod
	_ toolscache.TransformFunc       = Namespace
	_ toolscache.TransformFunc       = Workload
)
