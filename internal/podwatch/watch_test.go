package podwatch

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubefledged/kube-fledged/internal/podimages"
)

func TestPodKeepsWhatFromPodsReads(t *testing.T) {
	g := NewWithT(t)
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{"app": "web"},
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences: []metav1.OwnerReference{
				{Kind: "Other", Name: "not-controller"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh"}}},
			Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.27", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1.37", Args: []string{"x"}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	out, err := Pod(full.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	p := out.(*corev1.Pod)
	g.Expect(p.Annotations).To(BeNil())
	g.Expect(p.ManagedFields).To(BeNil())
	g.Expect(p.Labels).To(Equal(full.Labels))
	g.Expect(p.Status).To(Equal(corev1.PodStatus{}))
	g.Expect(p.Spec.NodeName).To(BeEmpty())
	g.Expect(p.Spec.Containers).To(Equal([]corev1.Container{{Name: "web", Image: "nginx:1.27"}}))
	g.Expect(podimages.Of(p)).To(Equal(podimages.Of(full)))
	g.Expect(podimages.UsedBy(p)).To(Equal("shop/ReplicaSet/web-5d8f"))

	ns, err := Namespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web"},
		Annotations: map[string]string{"a": "b"}}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns).To(Equal(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "web"}}}))

	tomb := cache.DeletedFinalStateUnknown{Key: "shop/web-1"}
	g.Expect(Pod(tomb)).To(Equal(tomb))
}

// TestWorkloadKeepsWhatFromWorkloadsReads: each workload kind is trimmed to
// its identity and its template's labels and images, and reads as the
// untrimmed object does.
func TestWorkloadKeepsWhatFromWorkloadsReads(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"owner": "team-a"}, Annotations: map[string]string{"big": "annotation"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"pool": "web"},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"sh"}}},
			Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.28", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
		},
	}
	trimmed := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
			Containers:     []corev1.Container{{Name: "web", Image: "nginx:1.28"}},
		},
	}
	kept := metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u", ResourceVersion: "7", Labels: map[string]string{"owner": "team-a"}}
	cases := []struct {
		name       string
		full, want any
	}{
		{"Deployment",
			&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Paused: true, Template: tmpl}},
			&appsv1.Deployment{ObjectMeta: kept, Spec: appsv1.DeploymentSpec{Template: trimmed}}},
		{"StatefulSet",
			&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{ServiceName: "web", Template: tmpl}},
			&appsv1.StatefulSet{ObjectMeta: kept, Spec: appsv1.StatefulSetSpec{Template: trimmed}}},
		{"DaemonSet",
			&appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tmpl}},
			&appsv1.DaemonSet{ObjectMeta: kept, Spec: appsv1.DaemonSetSpec{Template: trimmed}}},
		{"CronJob",
			&batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "* * * * *",
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}},
			&batchv1.CronJob{ObjectMeta: kept, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: trimmed}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := Workload(tc.full)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal(tc.want))
			a, ok1 := podimages.WorkloadOf(out)
			b, ok2 := podimages.WorkloadOf(tc.full)
			g.Expect(ok1 && ok2).To(BeTrue())
			g.Expect(a).To(Equal(b))
		})
	}

	// Being deleted is kept: such a workload no longer counts.
	g := NewWithT(t)
	gone := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Template: tmpl}}
	gone.DeletionTimestamp = &metav1.Time{}
	out, err := Workload(gone)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*appsv1.Deployment).DeletionTimestamp).NotTo(BeNil())
	tomb := cache.DeletedFinalStateUnknown{Key: "shop/web"}
	g.Expect(Workload(tomb)).To(Equal(tomb))
}

// TestNotSyncedUntilStarted: before the manager starts the watch, neither
// snapshot has anything to give, and both say they are waiting.
func TestNotSyncedUntilStarted(t *testing.T) {
	g := NewWithT(t)
	w := New(fake.NewClientset())
	_, _, err := w.Snapshot()
	g.Expect(errors.Is(err, ErrNotSynced)).To(BeTrue())
	g.Expect(err).To(MatchError("namespaces, pods: not listed yet"))
	_, _, err = w.Workloads()
	g.Expect(errors.Is(err, ErrNotSynced)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("deployments, statefulsets, daemonsets, cronjobs"))
}
