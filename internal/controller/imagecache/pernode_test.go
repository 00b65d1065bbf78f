package imagecache

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pacing"
)

// The node Jobs of a running operation, as the harness sees them.

// nodeJob returns the one unlabelled Job of the cache on node.
func (h *harness) nodeJob(cache, node string) *batchv1.Job {
	h.t.Helper()
	var found []batchv1.Job
	for _, j := range h.jobs(cache) {
		if j.Annotations[jobs.AnnotationNode] == node && j.Labels[jobs.LabelResult] == "" {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("want one running Job of %s on %s, found %d", cache, node, len(found))
	}
	return &found[0]
}

// containerStates sets the pod of a node Job, creating it if need be, with
// the given states of its containers (by image), and delivers the pod's
// event as the pod watch would.
func (h *harness) containerStates(job *batchv1.Job, phase corev1.PodPhase, byImage map[string]corev1.ContainerState) {
	h.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-pod",
		Labels: map[string]string{jobs.LabelOperation: job.Labels[jobs.LabelOperation], batchv1.JobNameLabel: job.Name}},
		Spec: corev1.PodSpec{NodeName: job.Annotations[jobs.AnnotationNode]}}
	fresh := h.api.Get(h.ctx, client.ObjectKeyFromObject(pod), pod) != nil
	pod.Status.Phase = phase
	pod.Status.ContainerStatuses = nil
	for _, c := range job.Spec.Template.Spec.Containers {
		if st, ok := byImage[c.Image]; ok {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: st})
		}
	}
	var err error
	if fresh {
		st := pod.Status
		if err = h.api.Create(h.ctx, pod); err == nil {
			pod.Status = st
			err = h.api.Status().Update(h.ctx, pod)
		}
	} else {
		err = h.api.Status().Update(h.ctx, pod)
	}
	if err != nil {
		h.t.Fatalf("setting the pod of %s: %v", job.Name, err)
	}
	h.r.cacheForPod(h.ctx, pod)
}

func pulled() corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
}

func pullError(msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}}
}

func creating() corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
}

func imagesOf(job *batchv1.Job) []string {
	var out []string
	for _, c := range job.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

const missing = "reg.example/missing:1"

var notFound = fmt.Sprintf(`rpc error: code = NotFound desc = failed to pull and unpack image "%s": not found`, missing)

// Per node, an operation makes one Job per node, one container per image;
// each (image, node) result comes from its own container as soon as it has
// one, and a node's Job goes, under the delete policy, once all of its
// containers have a result: an image that cannot be pulled leaves its
// container waiting, and the Job would never end by itself.
func TestNodeJobsSettlePerContainer(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerNode}, node("a"), node("b"), imageCache("c", "nginx:1.25", missing, "redis:7"))
	h.settleDown("c")
	g.Expect(h.writesOf("create", "jobs")).To(HaveLen(2), "one Job per node")
	ja, jb := h.nodeJob("c", "a"), h.nodeJob("c", "b")
	g.Expect(imagesOf(ja)).To(ConsistOf("nginx:1.25", missing, "redis:7"))
	g.Expect(ja.Spec.Template.Spec.InitContainers).To(HaveLen(1))

	h.containerStates(ja, corev1.PodRunning, map[string]corev1.ContainerState{"nginx:1.25": pulled(), missing: pullError(notFound), "redis:7": creating()})
	h.settleDown("c")
	c := h.r.ops.get(h.req("c").NamespacedName).counts
	g.Expect([]int32{c.Succeeded, c.Failed, c.InFlight}).To(Equal([]int32{1, 1, 4}), "each container settles on its own")
	g.Expect(h.writesOf("delete", "jobs")).To(BeEmpty(), "a's Job still pulls redis")

	h.containerStates(ja, corev1.PodRunning, map[string]corev1.ContainerState{"nginx:1.25": pulled(), missing: pullError(notFound), "redis:7": pulled()})
	h.settleDown("c")
	g.Expect(h.writesOf("delete", "jobs")).To(HaveExactElements(HaveField("Name", ja.Name)), "a's Job goes once all its containers have a result")

	h.containerStates(jb, corev1.PodRunning, map[string]corev1.ContainerState{"nginx:1.25": pulled(), missing: pullError(notFound), "redis:7": pulled()})
	h.settleDown("c")
	g.Expect(h.running("c")).To(BeFalse())
	st := h.status("c")
	g.Expect(st.Status).To(Equal(v1alpha2.ImageCacheActionStatusFailed))
	g.Expect([]int32{st.Counts.Succeeded, st.Counts.Failed, st.Counts.InFlight}).To(Equal([]int32{4, 2, 0}))
	g.Expect(st.Failures).To(Equal(map[string]v1alpha2.NodeReasonMessageList{missing: {
		{Node: "a", Reason: "ErrImagePull", Message: notFound}, {Node: "b", Reason: "ErrImagePull", Message: notFound}}}))
	g.Expect(h.writesOf("create", "jobs")).To(HaveLen(2))
	g.Expect(h.writesOf("delete", "jobs")).To(HaveLen(2))
}

// A container still without a result at the deadline fails with its last
// state; the Job goes then, whatever it still does.
func TestNodeJobAtTheDeadline(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerNode, Deadline: time.Minute}, node("a"), imageCache("c", "nginx:1.25", "redis:7"))
	h.settleDown("c")
	ja := h.nodeJob("c", "a")
	h.containerStates(ja, corev1.PodPending, map[string]corev1.ContainerState{"nginx:1.25": pulled(), "redis:7": creating()})
	h.runToEnd("c", 20, nil)
	st := h.status("c")
	g.Expect(st.Counts.Succeeded).To(Equal(int32(1)))
	g.Expect(st.Failures).To(HaveKeyWithValue("redis:7", HaveExactElements(And(
		HaveField("Node", "a"), HaveField("Reason", "Pending"), HaveField("Message", ContainSubstring("still pending"))))))
	g.Expect(h.writesOf("delete", "jobs")).To(HaveExactElements(HaveField("Name", ja.Name)))
}

// Under the retain policy a node's Job stays, labelled with its first
// failure, until that node pulls again; another node's Job stays then.
func TestRetainedNodeJobReplacedWithItsNode(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, Config{Granularity: jobs.PerNode, Retention: jobs.Retain}, node("a"), node("b"), imageCache("c", "nginx:1.25", missing))
	h.settleDown("c")
	ja, jb := h.nodeJob("c", "a"), h.nodeJob("c", "b")
	for _, j := range []*batchv1.Job{ja, jb} {
		h.containerStates(j, corev1.PodRunning, map[string]corev1.ContainerState{"nginx:1.25": pulled(), missing: pullError(notFound)})
	}
	h.settleDown("c")
	g.Expect(h.running("c")).To(BeFalse())
	g.Expect(h.writesOf("delete", "jobs")).To(BeEmpty())
	for _, j := range h.jobs("c") {
		g.Expect(j.Labels).To(HaveKeyWithValue(jobs.LabelResult, jobs.ResultFailed))
		g.Expect(j.Annotations).To(HaveKeyWithValue(jobs.AnnotationResultMsg, "ErrImagePull: "+notFound))
	}

	// b now holds both images: only a pulls again.
	h.editNode("b", holding("docker.io/library/nginx:1.25"))
	h.editNode("b", holding(missing))
	h.annotate("c", v1alpha2.RefreshAnnotation, "")
	h.settleDown("c")
	g.Expect(h.writesOf("delete", "jobs")).To(HaveExactElements(HaveField("Name", ja.Name)))
	g.Expect(h.nodeJob("c", "a").Name).NotTo(Equal(ja.Name))
	var names []string
	for _, j := range h.jobs("c") {
		names = append(names, j.Name)
	}
	g.Expect(names).To(ContainElement(jb.Name), "b's Job stays")

	// A purge works on both nodes: both node Jobs go before its delete Jobs come.
	ja2 := h.nodeJob("c", "a")
	h.containerStates(ja2, corev1.PodSucceeded, nil)
	h.settleDown("c")
	g.Expect(h.running("c")).To(BeFalse())
	h.annotate("c", v1alpha2.PurgeAnnotation, "")
	h.settleDown("c")
	g.Expect(h.writesOf("delete", "jobs")).To(ConsistOf(HaveField("Name", ja.Name), HaveField("Name", jb.Name), HaveField("Name", ja2.Name)))
}

// Pacing counts the pulls in flight: the kubelet pulls a pod's images one
// at a time, so with two pulls in flight per node a node gets one Job of all
// its images; a node Job holds at most jobs.MaxContainers containers; a node
// labelled to pull in parallel (or whose label cannot be read) has each pull
// counted, so its Jobs stay within the per-node cap.
func TestNodeJobsWithinTheCaps(t *testing.T) {
	tests := []struct {
		name       string
		perNode    int
		parallel   string // the node's pacing.LabelParallelPulls, if any
		images     int
		wantFirst  []int // containers of the Jobs created first
		wantSecond []int // and once those finished
		wantEvent  string
	}{
		{name: "one Job of all its images under the default per-node cap", perNode: 2, images: 10, wantFirst: []int{10}},
		{name: "the bound per pod", images: jobs.MaxContainers + 1, wantFirst: []int{jobs.MaxContainers, 1}},
		{name: "the bound per pod, one pull per node", perNode: 1, images: jobs.MaxContainers + 1,
			wantFirst: []int{jobs.MaxContainers}, wantSecond: []int{1}},
		{name: "a node that pulls in parallel", perNode: 2, parallel: "4", images: 3, wantFirst: []int{2}, wantSecond: []int{1}},
		{name: "a node that pulls one at a time, labelled so", perNode: 2, parallel: "1", images: 3, wantFirst: []int{3}},
		{name: "a label that is not a number counts every pull", perNode: 2, parallel: "many", images: 3,
			wantFirst: []int{2}, wantSecond: []int{1}, wantEvent: "Warning InvalidNodeLabel node a: node label " + pacing.LabelParallelPulls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var imgs []string
			for i := 0; i < tt.images; i++ {
				imgs = append(imgs, fmt.Sprintf("img%d:1", i))
			}
			n := node("a")
			if tt.parallel != "" {
				n.Labels[pacing.LabelParallelPulls] = tt.parallel
			}
			h := newHarness(t, Config{Granularity: jobs.PerNode, MaxJobsPerNode: tt.perNode}, n, imageCache("c", imgs...))
			sizes := func() []int {
				var out []int
				for _, j := range h.jobs("c") {
					if len(j.Status.Conditions) == 0 {
						out = append(out, len(j.Spec.Template.Spec.Containers))
					}
				}
				return out
			}
			h.settleDown("c")
			g.Expect(sizes()).To(ConsistOf(tt.wantFirst))
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(sizes()).To(ConsistOf(tt.wantSecond))
			h.completeAll("c")
			h.settleDown("c")
			g.Expect(h.running("c")).To(BeFalse())
			g.Expect(h.status("c").Counts.Succeeded).To(Equal(int32(tt.images)))
			if tt.wantEvent != "" {
				g.Expect(h.events()).To(ContainElement(HavePrefix(tt.wantEvent)))
			} else {
				g.Expect(h.events()).NotTo(ContainElement(ContainSubstring("InvalidNodeLabel")))
			}
		})
	}
}

// A small cache created while a large one holds the global cap is not
// starved behind it: it takes its share of the slots freed, whatever the
// large one still has to do, so its time follows its own size; once it has
// ended, the large one has the whole cap again.
func TestSmallCacheNotStarved(t *testing.T) {
	g := NewWithT(t)
	var big []string
	for i := 0; i < 10; i++ {
		big = append(big, fmt.Sprintf("big%d:1", i))
	}
	h := newHarness(t, Config{Granularity: jobs.PerNode, MaxJobs: 2, MaxJobsPerNode: 2},
		node("a"), node("b"), node("c"), node("d"), node("e"), node("f"), imageCache("big", big...), imageCache("small", "small:1"))
	running := func(cache string) []batchv1.Job {
		var out []batchv1.Job
		for _, j := range h.jobs(cache) {
			if len(j.Status.Conditions) == 0 {
				out = append(out, j)
			}
		}
		return out
	}
	h.settleDown("big")
	g.Expect(running("big")).To(HaveLen(2), "the large cache holds the cap")
	h.settleDown("small")
	g.Expect(running("small")).To(BeEmpty(), "the small one waits")
	// Each time one of the large cache's Jobs ends, the small one gets a
	// slot; it never has to wait for the large one's remaining work.
	for i := 0; i < 7; i++ { // one of the large cache's Jobs, then the small one's six
		if js := running("small"); len(js) > 0 {
			h.finishJob(&js[0], batchv1.JobComplete, "", "")
		} else {
			js := running("big")
			h.finishJob(&js[0], batchv1.JobComplete, "", "")
		}
		h.settleDown("big")
		h.settleDown("small")
		if !h.running("small") {
			break
		}
		g.Expect(running("small")).To(HaveLen(1), "round %d: the small cache has its share", i)
		g.Expect(running("big")).To(HaveLen(1), "round %d: and the large one the rest", i)
	}
	g.Expect(h.running("small")).To(BeFalse(), "the small cache ended within rounds of its own Jobs")
	g.Expect(h.status("small").Counts.Succeeded).To(Equal(int32(6)))
	g.Expect(h.running("big")).To(BeTrue(), "while the large one still had work")
	js := running("big")
	h.finishJob(&js[0], batchv1.JobComplete, "", "")
	h.settleDown("big")
	g.Expect(running("big")).To(HaveLen(2), "the large cache has the whole cap again")
}
