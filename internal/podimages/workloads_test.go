package podimages

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
)

func template(lbls map[string]string, init string, images ...string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}}
	if init != "" {
		t.Spec.InitContainers = []corev1.Container{{Name: "init", Image: init}}
	}
	for i, img := range images {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return t
}

func TestWorkloadOf(t *testing.T) {
	web := map[string]string{"app": "web"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: map[string]string{"owner": "team-a"}}
	}
	gone := meta("old")
	gone.DeletionTimestamp = &metav1.Time{}
	cases := []struct {
		name string
		obj  any
		want *Workload
	}{
		{name: "a Deployment: init containers first, the template's labels, not the object's",
			obj:  &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Template: template(web, "busybox:1.37", "nginx:1.27", "envoy:1.30")}},
			want: &Workload{Namespace: "shop", Kind: "Deployment", Name: "web", Labels: web, Images: []string{"busybox:1.37", "nginx:1.27", "envoy:1.30"}}},
		{name: "a StatefulSet",
			obj:  &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Template: template(nil, "", "postgres:16")}},
			want: &Workload{Namespace: "shop", Kind: "StatefulSet", Name: "db", Images: []string{"postgres:16"}}},
		{name: "a DaemonSet",
			obj:  &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Template: template(web, "", "fluent-bit:3")}},
			want: &Workload{Namespace: "shop", Kind: "DaemonSet", Name: "agent", Labels: web, Images: []string{"fluent-bit:3"}}},
		{name: "a CronJob: its Jobs' template",
			obj: &batchv1.CronJob{ObjectMeta: meta("etl"), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{Template: template(web, "", "spark:3")}}}},
			want: &Workload{Namespace: "shop", Kind: "CronJob", Name: "etl", Labels: web, Images: []string{"spark:3"}}},
		{name: "a workload being deleted rolls out nothing more",
			obj: &appsv1.Deployment{ObjectMeta: gone, Spec: appsv1.DeploymentSpec{Template: template(web, "", "nginx:1.27")}}},
		{name: "a Job is no workload fromWorkloads follows",
			obj: &batchv1.Job{ObjectMeta: meta("once"), Spec: batchv1.JobSpec{Template: template(web, "", "spark:3")}}},
		{name: "nor a pod", obj: pod("shop", "web-1", "", web, "nginx:1.27")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w, ok := WorkloadOf(tc.obj)
			if tc.want == nil {
				g.Expect(ok).To(BeFalse())
				return
			}
			g.Expect(ok).To(BeTrue())
			g.Expect(w).To(Equal(*tc.want))
		})
	}
}

// foundAll renders a record as found does, with the workload counts.
func foundAll(rec []v1alpha2.ListPodImages) []string {
	var out []string
	for _, l := range rec {
		out = append(out, fmt.Sprintf("list %d: %d pods, %d workloads, %d images, %d omitted", l.List, l.Pods, l.Workloads, l.Count, l.Omitted))
		for _, img := range l.Images {
			out = append(out, fmt.Sprintf("  %s %d %d %s", img.Image, img.Pods, img.Workloads, img.UsedBy))
		}
	}
	return out
}

func TestResolveWorkloads(t *testing.T) {
	web := map[string]string{"app": "web"}
	workloads := []Workload{
		// Paused mid-rollout: the template names nginx:1.28, its pods
		// still run nginx:1.27.
		{Namespace: "shop", Kind: "Deployment", Name: "web", Labels: web, Images: []string{"busybox:1.36", "nginx:1.28"}},
		{Namespace: "shop", Kind: "StatefulSet", Name: "db", Labels: map[string]string{"app": "db"}, Images: []string{"postgres:16"}},
		{Namespace: "blog", Kind: "DaemonSet", Name: "agent", Labels: web, Images: []string{"docker.io/library/nginx:1.28"}},
		{Namespace: "batch", Kind: "CronJob", Name: "etl", Labels: map[string]string{"app": "etl"}, Images: []string{"spark:3", "spark:3"}},
		{Namespace: "nowhere", Kind: "Deployment", Name: "lost", Labels: web, Images: []string{"orphan:1"}},
	}
	pods := []*corev1.Pod{
		with(pod("shop", "web-1", "web-5d8f", web, "nginx:1.27"), withInit("busybox:1.36")),
		pod("shop", "web-2", "web-5d8f", web, "nginx:1.27"),
	}
	cases := []struct {
		name  string
		lists []v1alpha2.CacheSpecImages
		pods  []*corev1.Pod
		want  []string
		bad   string
	}{
		{name: "no namespaceSelector: the cache's own namespace, every workload",
			lists: []v1alpha2.CacheSpecImages{{FromWorkloads: &v1alpha2.FromWorkloads{}}},
			want: []string{"list 0: 0 pods, 2 workloads, 3 images, 0 omitted",
				"  busybox:1.36 0 1 shop/Deployment/web",
				"  nginx:1.28 0 1 shop/Deployment/web",
				"  postgres:16 0 1 shop/StatefulSet/db"}},
		{name: "the podSelector matches the template's labels, in every namespace; one image spelt two ways counts once",
			lists: []v1alpha2.CacheSpecImages{{FromWorkloads: &v1alpha2.FromWorkloads{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("app", "web")}}},
			want: []string{"list 0: 0 pods, 2 workloads, 2 images, 0 omitted",
				"  busybox:1.36 0 1 shop/Deployment/web",
				"  docker.io/library/nginx:1.28 0 2 blog/DaemonSet/agent"}},
		{name: "a CronJob naming an image twice counts once",
			lists: []v1alpha2.CacheSpecImages{{FromWorkloads: &v1alpha2.FromWorkloads{NamespaceSelector: sel("team", "data")}}},
			want:  []string{"list 0: 0 pods, 1 workloads, 1 images, 0 omitted", "  spark:3 0 1 batch/CronJob/etl"}},
		{name: "with fromPods: the pods' images and the template's, each counted by what names it",
			lists: []v1alpha2.CacheSpecImages{{FromPods: &v1alpha2.FromPods{PodSelector: sel("app", "web")},
				FromWorkloads: &v1alpha2.FromWorkloads{PodSelector: sel("app", "web")}}},
			pods: pods,
			want: []string{"list 0: 2 pods, 1 workloads, 3 images, 0 omitted",
				"  busybox:1.36 1 1 shop/Deployment/web",
				"  nginx:1.27 2 0 shop/ReplicaSet/web-5d8f",
				"  nginx:1.28 0 1 shop/Deployment/web"}},
		{name: "fromWorkloads alone reads no pod",
			lists: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.28"}, FromWorkloads: &v1alpha2.FromWorkloads{PodSelector: sel("app", "web")}}},
			pods:  pods,
			want:  []string{"list 0: 0 pods, 1 workloads, 1 images, 0 omitted", "  busybox:1.36 0 1 shop/Deployment/web"}},
		{name: "a bad selector of fromWorkloads is reported by its field",
			lists: []v1alpha2.CacheSpecImages{
				{FromWorkloads: &v1alpha2.FromWorkloads{NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Equals"}}}}},
				{FromWorkloads: &v1alpha2.FromWorkloads{NamespaceSelector: sel("team", "data")}}},
			want: []string{"list 1: 0 pods, 1 workloads, 1 images, 0 omitted", "  spark:3 0 1 batch/CronJob/etl"},
			bad:  `fromWorkloads.namespaceSelector: "Equals" is not a valid label selector operator`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rec, bad := Resolve("shop", tc.lists, tc.pods, workloads, namespaces)
			g.Expect(foundAll(rec)).To(Equal(tc.want))
			if tc.bad == "" {
				g.Expect(bad).To(BeEmpty())
			} else {
				g.Expect(bad).To(HaveLen(1))
				g.Expect(bad[0]).To(MatchError(tc.bad))
			}
		})
	}

	// A template changed under a paused rollout is a gain, and the image
	// it left is dropped rather than deleted (Prior).
	g := NewWithT(t)
	lists := []v1alpha2.CacheSpecImages{{FromWorkloads: &v1alpha2.FromWorkloads{}}}
	before := []Workload{{Namespace: "shop", Kind: "Deployment", Name: "web", Images: []string{"nginx:1.27"}}}
	after := []Workload{{Namespace: "shop", Kind: "Deployment", Name: "web", Images: []string{"nginx:1.28"}}}
	was, _ := Resolve("shop", lists, nil, before, map[string]labels.Set{})
	now, _ := Resolve("shop", lists, nil, after, map[string]labels.Set{})
	g.Expect(Gained(was, now)).To(BeTrue())
	spec := v1alpha2.ImageCacheSpec{CacheSpec: lists}
	g.Expect(Effective(spec, now).CacheSpec[0].Images).To(Equal([]string{"nginx:1.28"}))
	g.Expect(Prior(&spec, was, now).CacheSpec[0].Images).To(BeEmpty())
	g.Expect(Uses(&spec)).To(BeTrue())
	g.Expect(UsesPods(&spec)).To(BeFalse())
	g.Expect(UsesWorkloads(&spec)).To(BeTrue())
}
