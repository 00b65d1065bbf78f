package cachetrim

import (
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/jobwatch"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/results"
)

func meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "j", Namespace: "ns",
		Labels: map[string]string{"a": "b", jobs.LabelOperation: "op1", batchv1.JobNameLabel: "j", "job-name": "j",
			jobs.LabelApp: jobs.LabelAppValue},
		Annotations:     map[string]string{"c": "d"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ImageCache", Name: "c"}},
		Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
	}
}

func TestTransforms(t *testing.T) {
	failedPod := &corev1.Pod{
		ObjectMeta: meta(),
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "x"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, PodIP: "10.0.0.1", HostIP: "10.1.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "x", ImageID: "sha256:1", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}},
	}
	failedJob := &batchv1.Job{
		ObjectMeta: meta(),
		Spec:       batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
		Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}},
			UncountedTerminatedPods: &batchv1.UncountedTerminatedPods{Failed: []types.UID{"u"}}},
	}
	tests := []struct {
		name  string
		fn    cache.TransformFunc
		in    any
		check func(g Gomega, out any)
	}{
		{"pod keeps its node, phase, container states and the labels it is found by", Pod, failedPod.DeepCopy(), func(g Gomega, out any) {
			p := out.(*corev1.Pod)
			g.Expect(p.Name).To(Equal("j"))
			g.Expect(p.Labels).To(Equal(map[string]string{jobs.LabelOperation: "op1", batchv1.JobNameLabel: "j", "job-name": "j"}))
			g.Expect(p.Spec).To(Equal(corev1.PodSpec{NodeName: "n1"}))
			g.Expect(p.ManagedFields).To(BeNil())
			g.Expect(p.OwnerReferences).To(BeNil())
			g.Expect(p.Status).To(Equal(corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "c", State: failedPod.Status.ContainerStatuses[0].State}}}))
		}},
		{"node keeps labels, cordon, taints, readiness, images and runtime", Node, fullNode(), func(g Gomega, out any) {
			n := out.(*corev1.Node)
			g.Expect(n.ManagedFields).To(BeNil())
			g.Expect(n.Annotations).To(BeNil())
			g.Expect(n.Labels).To(Equal(fullNode().Labels))
			g.Expect(n.Spec).To(Equal(corev1.NodeSpec{Unschedulable: true, Taints: fullNode().Spec.Taints}))
			g.Expect(n.Status).To(Equal(corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Images:     []corev1.ContainerImage{{Names: []string{"example.test/a:1", "example.test/a@sha256:" + digest}}},
				NodeInfo:   corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://2.1.0"},
			}))
		}},
		{"other types pass through", Pod, failedJob.DeepCopy(), func(g Gomega, out any) {
			g.Expect(out).To(Equal(failedJob))
		}},
		{"tombstones pass through", Pod, cache.DeletedFinalStateUnknown{Key: "ns/j"}, func(g Gomega, out any) {
			g.Expect(out).To(Equal(cache.DeletedFinalStateUnknown{Key: "ns/j"}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := tt.fn(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			tt.check(g, out)
		})
	}
}

// The settled result of a Job must not change when read from the trimmed
// pods and the Job watch's record, finished or at its deadline: that is what
// the trims may cost and must not.
func TestResultsUnchangedByTrim(t *testing.T) {
	failed := &batchv1.Job{ObjectMeta: meta(), Status: batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}}
	failed.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c", Image: "x"}}
	running := &batchv1.Job{ObjectMeta: meta(), Status: batchv1.JobStatus{Active: 1}}
	pod := func(phase corev1.PodPhase, st corev1.ContainerState) corev1.Pod {
		return corev1.Pod{ObjectMeta: meta(), Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: phase, Reason: "R", Message: "M", HostIP: "10.0.0.1",
				Conditions:            []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "copy", Image: "i", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "c", Image: "x", State: st}}}}
	}
	backoff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest unknown"}}
	crashed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "boom"}}
	events := []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "Failed", Message: "pull failed"}}
	tests := []struct {
		name   string
		job    *batchv1.Job
		pods   []corev1.Pod
		settle func(*batchv1.Job, []corev1.Pod) results.Outcome
	}{
		{"failed pull", failed, []corev1.Pod{pod(corev1.PodPending, backoff)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.FromJob(j, p) }},
		{"crashed", failed, []corev1.Pod{pod(corev1.PodFailed, crashed)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.FromJob(j, p) }},
		{"pending at the deadline", running, []corev1.Pod{pod(corev1.PodPending, backoff)}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, events) }},
		{"running at the deadline", running, []corev1.Pod{pod(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, events) }},
		{"succeeded, Job not yet complete", running, []corev1.Pod{pod(corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}})}, func(j *batchv1.Job, p []corev1.Pod) results.Outcome { return results.AtDeadline(j, p, nil) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			want := tt.settle(tt.job, tt.pods)
			tj, _ := jobwatch.Record(tt.job.DeepCopy())
			var trimmed []corev1.Pod
			for _, p := range tt.pods {
				tp, _ := Pod(p.DeepCopy())
				trimmed = append(trimmed, *tp.(*corev1.Pod))
			}
			got := tt.settle(tj.(*jobwatch.Job).AsJob(), trimmed)
			g.Expect(got).To(Equal(want))
			g.Expect(got.State).NotTo(Equal(results.Pending))
		})
	}
}

const digest = "0000000000000000000000000000000000000000000000000000000000000001"

// fullNode is a node as the kubelet reports it, with everything the trim
// drops.
func fullNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1", ResourceVersion: "7",
			Labels:        map[string]string{"pool": "gpu", "kubernetes.io/hostname": "n1"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.244.0.0/24", ProviderID: "kwok://n1",
			Taints: []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
					LastHeartbeatTime: metav1.Now()},
			},
			Images: []corev1.ContainerImage{{Names: []string{"example.test/a:1", "example.test/a@sha256:" + digest}, SizeBytes: 1 << 20}},
			NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://2.1.0", KubeletVersion: "v1.35.4",
				OSImage: "Debian", MachineID: "m"},
		},
	}
}

// Every decision the controller takes from a node must be the same on the
// trimmed node: eligibility, selection, readiness, images present, runtime.
func TestPlanUnchangedByNodeTrim(t *testing.T) {
	notReady := fullNode()
	notReady.Spec.Unschedulable = false
	notReady.Status.Conditions[1].Status = corev1.ConditionFalse
	schedulable := fullNode()
	schedulable.Spec.Unschedulable = false
	untainted := fullNode()
	untainted.Spec.Unschedulable, untainted.Spec.Taints = false, nil
	lists := []v1alpha2.CacheSpecImages{
		{},
		{NodeSelector: map[string]string{"pool": "gpu"}},
		{NodeSelector: map[string]string{"pool": "cpu"}},
		{Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}},
		{Tolerations: []corev1.Toleration{{Key: "other", Operator: corev1.TolerationOpExists}}},
	}
	refs := []string{"example.test/a:1", "example.test/a:2", "example.test/a@sha256:" + digest, "example.test/b:1"}
	for _, n := range []*corev1.Node{fullNode(), notReady, schedulable, untainted} {
		out, _ := Node(n.DeepCopy())
		trimmed := out.(*corev1.Node)
		g := NewWithT(t)
		g.Expect(plan.Ready(trimmed)).To(Equal(plan.Ready(n)))
		g.Expect(trimmed.Status.NodeInfo.ContainerRuntimeVersion).To(Equal(n.Status.NodeInfo.ContainerRuntimeVersion))
		g.Expect(trimmed.CreationTimestamp).To(Equal(n.CreationTimestamp))
		for i := range lists {
			g.Expect(plan.Eligible(trimmed, &lists[i])).To(Equal(plan.Eligible(n, &lists[i])), "list %d", i)
			g.Expect(plan.Selects(&lists[i], trimmed)).To(Equal(plan.Selects(&lists[i], n)), "list %d", i)
		}
		for _, s := range refs {
			ref, err := images.Parse(s)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(images.PresentOn(trimmed, ref)).To(Equal(images.PresentOn(n, ref)), s)
		}
	}
}
