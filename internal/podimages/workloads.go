package podimages

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

// Workload is what fromWorkloads reads of a Deployment, StatefulSet,
// DaemonSet or CronJob: its name, the labels of its pod template (which
// podSelector matches) and the images the template names.
type Workload struct {
	Namespace, Kind, Name string
	Labels                map[string]string
	Images                []string
}

// UsedBy names the workload as a status entry does: namespace/Kind/name.
func (w Workload) UsedBy() string { return w.Namespace + "/" + w.Kind + "/" + w.Name }

// WorkloadKinds are the kinds fromWorkloads follows.
var WorkloadKinds = []string{"Deployment", "StatefulSet", "DaemonSet", "CronJob"}

// WorkloadOf reads a workload's pod template: a CronJob's is the template of
// its Jobs. It says false for any other object, and for a workload being
// deleted, whose template will never roll out again.
func WorkloadOf(obj any) (Workload, bool) {
	var (
		w Workload
		t *corev1.PodTemplateSpec
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w, t = Workload{Namespace: o.Namespace, Kind: "Deployment", Name: o.Name}, &o.Spec.Template
		if o.DeletionTimestamp != nil {
			return Workload{}, false
		}
	case *appsv1.StatefulSet:
		w, t = Workload{Namespace: o.Namespace, Kind: "StatefulSet", Name: o.Name}, &o.Spec.Template
		if o.DeletionTimestamp != nil {
			return Workload{}, false
		}
	case *appsv1.DaemonSet:
		w, t = Workload{Namespace: o.Namespace, Kind: "DaemonSet", Name: o.Name}, &o.Spec.Template
		if o.DeletionTimestamp != nil {
			return Workload{}, false
		}
	case *batchv1.CronJob:
		w, t = Workload{Namespace: o.Namespace, Kind: "CronJob", Name: o.Name}, &o.Spec.JobTemplate.Spec.Template
		if o.DeletionTimestamp != nil {
			return Workload{}, false
		}
	default:
		return Workload{}, false
	}
	w.Labels = t.Labels
	w.Images = templateImages(&t.Spec)
	return w, true
}

// templateImages lists the images of a pod template: init containers and
// containers, as written (a template has no ephemeral containers).
func templateImages(s *corev1.PodSpec) []string {
	var out []string
	for _, c := range s.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range s.Containers {
		out = append(out, c.Image)
	}
	return out
}

// asFromPods reads a fromWorkloads's selectors as a fromPods's: the two
// have the same fields, with the same meaning.
func asFromPods(f *v1alpha2.FromWorkloads) *v1alpha2.FromPods {
	return &v1alpha2.FromPods{NamespaceSelector: f.NamespaceSelector, PodSelector: f.PodSelector}
}
