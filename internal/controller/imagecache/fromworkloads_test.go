package imagecache

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/podwatch"
)

// webTemplate is a pod template labelled app=web, its first image in an
// init container when init is set.
func webTemplate(init string, images ...string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}}
	if init != "" {
		t.Spec.InitContainers = []corev1.Container{{Name: "init", Image: init}}
	}
	for i, img := range images {
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return t
}

// pausedDeployment is a paused Deployment of testNS whose template is
// labelled app=web.
func pausedDeployment(name string, images ...string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec: appsv1.DeploymentSpec{Paused: true, Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: webTemplate("", images...)}}
}

// workloadCache caches redis:7 and the images of the templates of the
// workloads of its namespace whose pods are labelled app=web.
func workloadCache(name string) *v1alpha2.ImageCache {
	c := imageCache(name, "redis:7")
	c.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	return c
}

// addWorkload creates a workload and checks that its event wakes a cache.
func (h *harness) addWorkload(obj client.Object) {
	h.t.Helper()
	if err := h.api.Create(h.ctx, obj); err != nil {
		h.t.Fatalf("adding %s: %v", obj.GetName(), err)
	}
	if got := h.r.cachesForPods(h.ctx, obj); len(got) == 0 {
		h.t.Fatalf("%s woke no cache", obj.GetName())
	}
}

// setImage changes the first container image of a Deployment's template,
// leaving it as paused as it was, and delivers its event.
func (h *harness) setImage(name, image string) {
	h.t.Helper()
	d := &appsv1.Deployment{}
	if err := h.api.Get(h.ctx, client.ObjectKey{Namespace: testNS, Name: name}, d); err != nil {
		h.t.Fatalf("reading %s: %v", name, err)
	}
	old := d.DeepCopy()
	d.Spec.Template.Spec.Containers[0].Image = image
	if !podChanges().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: d}) {
		h.t.Fatalf("changing %s's image passes no event", name)
	}
	if err := h.api.Update(h.ctx, d); err != nil {
		h.t.Fatalf("updating %s: %v", name, err)
	}
	if got := h.r.cachesForPods(h.ctx, d); len(got) == 0 {
		h.t.Fatalf("changing %s's image woke no cache", name)
	}
}

// workloadImagesOf renders status.podImages with the workload counts.
func workloadImagesOf(st v1alpha2.ImageCacheStatus) []string {
	var out []string
	for _, l := range st.PodImages {
		out = append(out, fmt.Sprintf("list %d: %d pods, %d workloads, %d images", l.List, l.Pods, l.Workloads, l.Count))
		for _, img := range l.Images {
			out = append(out, fmt.Sprintf("  %s %d %d %s", img.Image, img.Pods, img.Workloads, img.UsedBy))
		}
	}
	return out
}

// TestFromWorkloadsFollowsAPausedRollout: a paused Deployment's template
// changes while its pods still run the old image. The new image is pulled
// at once, as an update, though no pod runs it; the old one, which no
// template names any more, is dropped without a delete Job; the
// Deployment deleted, its image is dropped too.
func TestFromWorkloadsFollowsAPausedRollout(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), node("n2"),
		pausedDeployment("web", "nginx:1.27"), webPod("web-a-1", "web-a", "nginx:1.27"), workloadCache("ic"))
	seen := map[string]bool{}

	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1", "pull nginx:1.27 n2", "pull redis:7 n1", "pull redis:7 n2"}))
	st := h.status("ic")
	g.Expect(workloadImagesOf(st)).To(Equal([]string{"list 0: 0 pods, 1 workloads, 1 images", "  nginx:1.27 0 1 apps/Deployment/web"}),
		"fromWorkloads alone counts no pod")
	cond := condition(st, v1alpha2.ConditionPodsResolved)
	g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(cond.Message).To(Equal("1 workload(s) selected, 1 image(s) cached for them"))
	h.report("nginx:1.27", "redis:7")

	// The paused Deployment's image changed: its pods are as they were,
	// and the new image is pulled on every node now.
	h.setImage("web", "nginx:1.28")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.28 n1", "pull nginx:1.28 n2"}))
	st = h.status("ic")
	g.Expect(outcomeOf(st)).To(Equal(outcome{v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheReasonImageCacheUpdate,
		v1alpha2.ImageCacheMessageImagesPulledSuccessfully}))
	g.Expect(workloadImagesOf(st)).To(Equal([]string{"list 0: 0 pods, 1 workloads, 1 images", "  nginx:1.28 0 1 apps/Deployment/web"}),
		"nginx:1.27, which no template names, is no longer cached, and deleted from no node")
	h.report("nginx:1.27", "nginx:1.28", "redis:7")

	// A change that is not the template's (a scale) pulls nothing.
	d := &appsv1.Deployment{}
	g.Expect(h.api.Get(h.ctx, client.ObjectKey{Namespace: testNS, Name: "web"}, d)).To(Succeed())
	old := d.DeepCopy()
	d.Spec.Replicas = ptr.To(int32(5))
	d.Status.Replicas = 5
	g.Expect(podChanges().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: d})).To(BeFalse())

	// Deleted: its image is dropped, deleted from no node.
	g.Expect(h.api.Delete(h.ctx, d)).To(Succeed())
	h.settleDown("ic")
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
	g.Expect(workloadImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 0 pods, 0 workloads, 0 images"}))
	g.Expect(h.events()).To(ContainElement(And(ContainSubstring("Normal PodImagesDropped"), ContainSubstring("nginx:1.28"))))

	// A purge deletes what the cache holds; purged, it follows nothing.
	h.addWorkload(pausedDeployment("web2", "nginx:1.29"))
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.29 n1", "pull nginx:1.29 n2"}))
	h.annotate("ic", v1alpha2.PurgeAnnotation, "")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"delete nginx:1.29 n1", "delete nginx:1.29 n2", "delete redis:7 n1", "delete redis:7 n2"}))
	h.setImage("web2", "nginx:1.30")
	h.settleDown("ic")
	g.Expect(h.newJobs("ic", seen)).To(BeEmpty())
}

// TestFromWorkloadsKinds: each kind fromWorkloads follows has its
// template's images pulled, init containers' included, as soon as it is
// created; a Job, which no template will run again, is not followed.
func TestFromWorkloadsKinds(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: testNS, Name: name} }
	cases := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{name: "Deployment", obj: &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Template: webTemplate("busybox:1.36", "nginx:1.28")}},
			want: []string{"  busybox:1.36 0 1 apps/Deployment/web", "  nginx:1.28 0 1 apps/Deployment/web"}},
		{name: "StatefulSet", obj: &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Template: webTemplate("", "postgres:16")}},
			want: []string{"  postgres:16 0 1 apps/StatefulSet/db"}},
		{name: "DaemonSet", obj: &appsv1.DaemonSet{ObjectMeta: meta("agent"), Spec: appsv1.DaemonSetSpec{Template: webTemplate("busybox:1.36", "fluent-bit:3")}},
			want: []string{"  busybox:1.36 0 1 apps/DaemonSet/agent", "  fluent-bit:3 0 1 apps/DaemonSet/agent"}},
		{name: "CronJob", obj: &batchv1.CronJob{ObjectMeta: meta("etl"), Spec: batchv1.CronJobSpec{Schedule: "@hourly",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: webTemplate("", "spark:3")}}}},
			want: []string{"  spark:3 0 1 apps/CronJob/etl"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), workloadCache("ic"))
			seen := map[string]bool{}
			h.succeed("ic")
			g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull redis:7 n1"}))
			h.report("redis:7")

			h.addWorkload(tc.obj)
			h.succeed("ic")
			var pulled []string
			for _, l := range tc.want {
				pulled = append(pulled, "pull "+strings.Fields(l)[0]+" n1")
			}
			g.Expect(h.newJobs("ic", seen)).To(Equal(pulled))
			g.Expect(workloadImagesOf(h.status("ic"))).To(Equal(append([]string{fmt.Sprintf("list 0: 0 pods, 1 workloads, %d images", len(tc.want))}, tc.want...)))
		})
	}

	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), workloadCache("ic"))
	h.succeed("ic")
	job := &batchv1.Job{ObjectMeta: meta("once"), Spec: batchv1.JobSpec{Template: webTemplate("", "spark:3")}}
	g.Expect(h.api.Create(h.ctx, job)).To(Succeed())
	h.settleDown("ic")
	g.Expect(h.running("ic")).To(BeFalse())
	g.Expect(workloadImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 0 pods, 0 workloads, 0 images"}))
}

// TestFromWorkloadsWithFromPods: one list following both a Deployment's
// pods and its template holds what each names, counted apart, and pulls
// the template's new image before any pod runs it.
func TestFromWorkloadsWithFromPods(t *testing.T) {
	g := NewWithT(t)
	c := followingCache("ic")
	c.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), pausedDeployment("web", "nginx:1.27"),
		webPod("web-a-1", "web-a", "nginx:1.27"), webPod("web-a-2", "web-a", "nginx:1.27"), c)
	seen := map[string]bool{}
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.27 n1", "pull redis:7 n1"}))
	g.Expect(workloadImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 2 pods, 1 workloads, 1 images", "  nginx:1.27 2 1 apps/Deployment/web"}))
	g.Expect(condition(h.status("ic"), v1alpha2.ConditionPodsResolved).Message).To(Equal("2 pod(s) and 1 workload(s) selected, 1 image(s) cached for them"))
	h.report("nginx:1.27", "redis:7")

	h.setImage("web", "nginx:1.28")
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.28 n1"}))
	g.Expect(workloadImagesOf(h.status("ic"))).To(Equal([]string{"list 0: 2 pods, 1 workloads, 2 images",
		"  nginx:1.27 2 0 apps/ReplicaSet/web-a", "  nginx:1.28 0 1 apps/Deployment/web"}), "the old image stays while pods run it")
}

// TestFromWorkloadsUnreadable: workloads the controller may not list leave
// the named images cached and say why, as unreadable pods do; the pods of
// a list's fromPods are still followed.
func TestFromWorkloadsUnreadable(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerImage, Retention: jobs.Retain}, node("n1"), pausedDeployment("web", "nginx:1.28"), workloadCache("ic"))
	h.pods.workloadErr = fmt.Errorf("listing deployments: %w", apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "",
		fmt.Errorf(`User "system:serviceaccount:kube-fledged:kubefledged" cannot list resource "deployments" in API group "apps" at the cluster scope`)))
	seen := map[string]bool{}

	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull redis:7 n1"}))
	h.report("redis:7")
	st := h.status("ic")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "the named images are cached regardless")
	cond := condition(st, v1alpha2.ConditionPodsResolved)
	g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(cond.Reason).To(Equal("WorkloadsUnreadable"))
	g.Expect(cond.Message).To(HavePrefix("the controller cannot read the workloads fromWorkloads selects"))
	g.Expect(cond.Message).To(ContainSubstring(`cannot list resource "deployments"`))
	g.Expect(h.events()).To(ContainElement(HavePrefix("Warning WorkloadsUnreadable")))
	res := h.settleDown("ic")
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0), "looked at again without an event")

	// Still being listed: no status write, a look again soon.
	h.pods.workloadErr = fmt.Errorf("deployments: %w", podwatch.ErrNotSynced)
	writes := len(h.writes())
	res, err := h.step("ic")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(h.writes()).To(HaveLen(writes))

	// Readable: the template's image is pulled.
	h.pods.workloadErr = nil
	h.succeed("ic")
	g.Expect(h.newJobs("ic", seen)).To(Equal([]string{"pull nginx:1.28 n1"}))
	g.Expect(condition(h.status("ic"), v1alpha2.ConditionPodsResolved).Status).To(Equal(metav1.ConditionTrue))
}

// TestCachesForWorkloads: which caches a workload's or a namespace's event
// wakes, and which workload changes pass at all.
func TestCachesForWorkloads(t *testing.T) {
	own := workloadCache("own")
	any := imageCache("any", "redis:7")
	any.Spec.CacheSpec[0].FromWorkloads = &v1alpha2.FromWorkloads{NamespaceSelector: &metav1.LabelSelector{}}
	podsOnly := followingCache("pods")
	h := newHarness(t, Config{Granularity: jobs.PerImage}, own, any, podsOnly)
	names := func(obj client.Object) []string {
		var out []string
		for _, r := range h.r.cachesForPods(h.ctx, obj) {
			out = append(out, r.Name)
		}
		return out
	}
	here := pausedDeployment("web", "nginx:1.27")
	there := pausedDeployment("web", "nginx:1.27")
	there.Namespace = "elsewhere"
	cases := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{"a workload of the caches' namespace", here, []string{"any", "own"}},
		{"a workload of another namespace", there, []string{"any"}},
		{"a pod of the caches' namespace", webPod("web-1", "web-a", "nginx:1.27"), []string{"pods"}},
		{"a namespace", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}, []string{"any"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(names(tc.obj)).To(ConsistOf(tc.want))
		})
	}

	changed := func(change func(d *appsv1.Deployment)) bool {
		n := here.DeepCopy()
		change(n)
		return podChanges().Update(event.UpdateEvent{ObjectOld: here, ObjectNew: n})
	}
	updates := []struct {
		name   string
		change func(d *appsv1.Deployment)
		passes bool
	}{
		{"its template's image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" }, true},
		{"an init container added", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox:1.36"}}
		}, true},
		{"its template's labels", func(d *appsv1.Deployment) { d.Spec.Template.Labels = map[string]string{"app": "web", "v": "2"} }, true},
		{"being deleted", func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{} }, true},
		{"resumed", func(d *appsv1.Deployment) { d.Spec.Paused = false }, false},
		{"its own labels", func(d *appsv1.Deployment) { d.Labels = map[string]string{"owner": "team-a"} }, false},
		{"its status", func(d *appsv1.Deployment) { d.Status.ReadyReplicas = 2 }, false},
	}
	for _, tc := range updates {
		t.Run("update: "+tc.name, func(t *testing.T) {
			NewWithT(t).Expect(changed(tc.change)).To(Equal(tc.passes))
		})
	}
}
