package sandbox

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	runHolderIfAsked()
	// A short heartbeat so the tests below see several heartbeats within seconds.
	Main(m, Options{Nodes: 2, heartbeat: 1200 * time.Millisecond, ReportImages: true})
}

func clientFor(t *testing.T, s *Sandbox) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// parallel makes t a parallel test in the shared sandbox, and returns it and a client.
func parallel(t *testing.T) (*Sandbox, kubernetes.Interface) {
	t.Helper()
	t.Parallel()
	s := Get()
	return s, clientFor(t, s)
}

// clusterTimeout bounds a wait on what the control plane and kwok do; a loaded CI machine
// takes many times an idle one's, so only a fault reaches it. It is framework.ClusterTimeout,
// which this package cannot import: the framework imports the sandbox.
const clusterTimeout = 5 * time.Minute

// inNamespace makes t a parallel test with a namespace of its own in the shared sandbox,
// and returns a client and the namespace.
func inNamespace(t *testing.T) (kubernetes.Interface, string) {
	t.Helper()
	_, c := parallel(t)
	return c, namespace(t, c)
}

// runJob is inNamespace with job created in the namespace.
func runJob(t *testing.T, job *batchv1.Job) (kubernetes.Interface, string) {
	t.Helper()
	c, ns := inNamespace(t)
	if _, err := c.BatchV1().Jobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

// namespace creates a fresh namespace and waits for its default ServiceAccount, without
// which bare pods are refused at admission.
func namespace(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "sbx-test-"}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error {
		_, err := c.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err
	}, clusterTimeout, 50*time.Millisecond).Should(Succeed())
	return ns.Name
}

func pinnedJob(name, node, image string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
					Containers:    []corev1.Container{{Name: "pull", Image: image, Command: []string{"true"}}},
				},
			},
		},
	}
}

func jobPods(ctx context.Context, c kubernetes.Interface, ns, job string) ([]corev1.Pod, error) {
	l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func TestJobOnFakeNodeCompletes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, ns := runJob(t, pinnedJob("ok", "sandbox-node-1", "registry.example/app:1.0"))
	begin := time.Now()
	g.Eventually(succeeded(ctx, c, ns, "ok"), clusterTimeout, 50*time.Millisecond).Should(Equal(int32(1)))
	t.Logf("Job created -> status.succeeded=1 in %s", time.Since(begin).Round(time.Millisecond))

	pods, err := jobPods(ctx, c, ns, "ok")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(1))
	p := pods[0]
	g.Expect(p.Spec.NodeName).To(Equal("sandbox-node-1"))
	g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
	g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	g.Expect(p.Status.ContainerStatuses[0].State.Terminated).NotTo(BeNil())
	g.Expect(p.Status.ContainerStatuses[0].State.Terminated.ExitCode).To(BeZero())
	g.Expect(p.Status.ContainerStatuses[0].ImageID).NotTo(BeEmpty())
	g.Expect(p.Status.PodIP).NotTo(BeEmpty())

	// Foreground deletion exercises the garbage collector and kwok's pod-delete stage.
	g.Expect(c.BatchV1().Jobs(ns).Delete(ctx, "ok", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})).To(Succeed())
	g.Eventually(func() bool {
		_, err := c.BatchV1().Jobs(ns).Get(ctx, "ok", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, clusterTimeout, 100*time.Millisecond).Should(BeTrue())
	g.Expect(jobPods(ctx, c, ns, "ok")).To(BeEmpty())
}

// barePod creates a pod of spec named name on sandbox-node-0, with no controller, and returns
// what reads it as it then is, for Eventually.
func barePod(ctx context.Context, g Gomega, c kubernetes.Interface, ns, name string, spec corev1.PodSpec) func(Gomega) *corev1.Pod {
	spec.NodeName = "sandbox-node-0"
	_, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return func(g Gomega) *corev1.Pod {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return p
	}
}

// succeeded polls how many of the Job's pods succeeded: -1 while it cannot be read.
func succeeded(ctx context.Context, c kubernetes.Interface, ns, job string) func() int32 {
	return func() int32 {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return -1
		}
		return j.Status.Succeeded
	}
}

func waitingReason(st corev1.ContainerStatus) string {
	if st.State.Waiting == nil {
		return ""
	}
	return st.State.Waiting.Reason
}

func TestFailPrefixImageBacksOff(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	image := FailPrefix + "missing:1"
	c, ns := inNamespace(t)
	// ErrImagePull lasts a moment (1.5 s) before ImagePullBackOff: a watch opened before the
	// pod exists sees it however slowly the machine answers, where polling could miss it.
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=bad"})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	_, err = c.BatchV1().Jobs(ns).Create(ctx, pinnedJob("bad", "sandbox-node-0", image), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var reasons []string
	var pod corev1.Pod
	timeout := time.After(clusterTimeout)
	for len(reasons) == 0 || reasons[len(reasons)-1] != "ImagePullBackOff" {
		select {
		case ev, ok := <-w.ResultChan():
			g.Expect(ok).To(BeTrue(), "the pods' watch ended; reasons so far %v", reasons)
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || len(p.Status.ContainerStatuses) != 1 {
				continue
			}
			pod = *p
			if r := waitingReason(pod.Status.ContainerStatuses[0]); len(reasons) == 0 || reasons[len(reasons)-1] != r {
				reasons = append(reasons, r)
			}
		case <-timeout:
			t.Fatalf("no ImagePullBackOff within %s; reasons so far %v", clusterTimeout, reasons)
		}
	}
	g.Expect(reasons).To(ContainElement("ErrImagePull"), "ErrImagePull comes first")
	g.Expect(pod.Status.Phase).To(Equal(corev1.PodPending))
	g.Expect(pod.Status.ContainerStatuses[0].State.Waiting.Message).To(Equal(fmt.Sprintf(
		`Back-off pulling image %[1]q: ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image %[1]q: not found`, image)),
		"the kubelet's back-off names the error of the last attempt")

	// It stays so: nothing moves it on, and the Job neither succeeds nor fails.
	g.Consistently(func() string {
		p, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%s/%s", p.Status.Phase, waitingReason(p.Status.ContainerStatuses[0]))
	}, 2*time.Second, 200*time.Millisecond).Should(Equal("Pending/ImagePullBackOff"))
	j, err := c.BatchV1().Jobs(ns).Get(ctx, "bad", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(j.Status.Succeeded).To(BeZero())
	g.Expect(j.Status.Failed).To(BeZero())
}

// In a run-to-completion pod whose one image cannot be pulled, the other containers run and
// exit 0 while that one waits, as a node pull Job's do on a kubelet: each container has a
// state of its own.
func TestFailPrefixImageBesideGoodOnes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	job := pinnedJob("mixed", "sandbox-node-0", "registry.example/good:1")
	job.Spec.Template.Spec.Containers = append(job.Spec.Template.Spec.Containers,
		corev1.Container{Name: "bad", Image: FailPrefix + "missing:1", Command: []string{"true"}},
		corev1.Container{Name: "good2", Image: "registry.example/good:2", Command: []string{"true"}})
	c, ns := runJob(t, job)
	g.Eventually(func(g Gomega) map[string]string { return pendingJobStates(ctx, g, c, ns, "mixed") }, clusterTimeout, 50*time.Millisecond).
		Should(Equal(map[string]string{"pull": "exit 0", "bad": "ImagePullBackOff", "good2": "exit 0"}))
}

// pendingJobStates is each container's state in the one pod of a Job, which must be Pending:
// "exit N" once it ended, else its waiting reason.
func pendingJobStates(ctx context.Context, g Gomega, c kubernetes.Interface, ns, job string) map[string]string {
	pods, err := jobPods(ctx, c, ns, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodPending))
	out := map[string]string{}
	for _, cs := range pods[0].Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			out[cs.Name] = fmt.Sprintf("exit %d", cs.State.Terminated.ExitCode)
		} else {
			out[cs.Name] = waitingReason(cs)
		}
	}
	return out
}

// An image under FlakyPrefix fails its first attempts with a registry's 429, ErrImagePull then
// ImagePullBackOff, and then pulls: the Job completes, as behind a rate limit that lifts.
func TestFlakyPrefixImage(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	image := FlakyPrefix + "busy:1"
	c, ns := inNamespace(t)
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=flaky"})
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	job := pinnedJob("flaky", "sandbox-node-0", "registry.example/good:1")
	job.Spec.Template.Spec.Containers = append(job.Spec.Template.Spec.Containers,
		corev1.Container{Name: "busy", Image: image, Command: []string{"true"}})
	_, err = c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())

	var reasons, messages []string
	timeout := time.After(clusterTimeout)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			g.Expect(ok).To(BeTrue(), "the pods' watch ended; reasons so far %v", reasons)
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if r := waitingReason(cs); cs.Name == "busy" && r != "" && (len(reasons) == 0 || reasons[len(reasons)-1] != r) {
					reasons = append(reasons, r)
					messages = append(messages, cs.State.Waiting.Message)
				}
			}
			done = p.Status.Phase == corev1.PodSucceeded
		case <-timeout:
			pods, _ := jobPods(ctx, c, ns, "flaky")
			t.Fatalf("the pod did not succeed within %s; reasons so far %v; pods: %+v", clusterTimeout, reasons, pods)
		}
	}
	g.Expect(reasons).To(Equal([]string{"ErrImagePull", "ImagePullBackOff"}))
	g.Expect(messages[0]).To(HaveSuffix("429 Too Many Requests"))
	g.Expect(messages[0]).To(ContainSubstring(fmt.Sprintf("failed to pull and unpack image %q", image)))
	g.Expect(messages[1]).To(Equal(fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, messages[0])))
	g.Eventually(func(g Gomega) int32 {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, "flaky", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return j.Status.Succeeded
	}, clusterTimeout, 50*time.Millisecond).Should(Equal(int32(1)))
}

// An image under HangPrefix never finishes pulling: its container waits without an error while
// its siblings exit 0, and the pod stays Pending.
func TestHangPrefixImage(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	job := pinnedJob("hangs", "sandbox-node-0", "registry.example/good:1")
	job.Spec.Template.Spec.Containers = append(job.Spec.Template.Spec.Containers,
		corev1.Container{Name: "slow", Image: HangPrefix + "slow:1", Command: []string{"true"}})
	c, ns := runJob(t, job)
	states := func(g Gomega) map[string]string { return pendingJobStates(ctx, g, c, ns, "hangs") }
	want := map[string]string{"pull": "exit 0", "slow": "ContainerCreating"}
	g.Eventually(states, clusterTimeout, 50*time.Millisecond).Should(Equal(want))
	g.Consistently(states, 2*time.Second, 200*time.Millisecond).Should(Equal(want))
}

// An init container that cannot be pulled blocks the pod's containers, as on a kubelet.
func TestFailPrefixInitContainer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, ns := inNamespace(t)
	image := FailPrefix + "init:2"
	pod := barePod(ctx, g, c, ns, "p", corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Image: image}},
		Containers:     []corev1.Container{{Name: "main", Image: "registry.example/app:1.0"}},
	})
	g.Eventually(func(g Gomega) {
		p := pod(g)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodPending))
		g.Expect(p.Status.InitContainerStatuses).To(HaveLen(1))
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
		g.Expect(waitingReason(p.Status.InitContainerStatuses[0])).To(Equal("ErrImagePull"))
		g.Expect(p.Status.InitContainerStatuses[0].State.Waiting.Message).To(Equal(
			fmt.Sprintf("rpc error: code = NotFound desc = failed to pull and unpack image %q: not found", image)))
		g.Expect(waitingReason(p.Status.ContainerStatuses[0])).To(Equal("PodInitializing"))
	}, clusterTimeout, 50*time.Millisecond).Should(Succeed())
}

func TestCreateNodesWithOptions(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, c := parallel(t)
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	images := []corev1.ContainerImage{{Names: []string{"registry.example/app@sha256:aa", "registry.example/app:1.0"}, SizeBytes: 1234}}
	g.Expect(s.CreateNodes(ctx,
		NodeSpec{Name: "opt-a", Labels: map[string]string{"pool": "a"}, Taints: []corev1.Taint{taint}, Images: images, ContainerRuntimeVersion: "cri-o://1.30.0"},
		NodeSpec{Name: "opt-b", Unschedulable: true, NoHostnameLabel: true},
		NodeSpec{Name: "opt-c", NotReady: true},
	)).To(Succeed())

	a, err := c.CoreV1().Nodes().Get(ctx, "opt-a", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a.Labels).To(HaveKeyWithValue("pool", "a"))
	g.Expect(a.Labels).To(HaveKeyWithValue("kubernetes.io/hostname", "opt-a"))
	g.Expect(a.Labels).To(HaveKeyWithValue("type", "kwok"))
	g.Expect(a.Annotations).To(HaveKeyWithValue("kwok.x-k8s.io/node", "fake"))
	g.Expect(a.Spec.Taints).To(ConsistOf(HaveField("Key", "dedicated")))
	g.Expect(a.Status.Images).To(Equal(images))
	g.Expect(a.Status.NodeInfo.ContainerRuntimeVersion).To(Equal("cri-o://1.30.0"))
	g.Expect(a.Status.NodeInfo.KubeletVersion).To(Equal("v1.35.4"))
	g.Expect(nodeReady(a)).To(Equal(corev1.ConditionTrue))

	b, err := c.CoreV1().Nodes().Get(ctx, "opt-b", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Labels).NotTo(HaveKey("kubernetes.io/hostname"))
	g.Expect(b.Spec.Unschedulable).To(BeTrue())
	g.Expect(b.Spec.Taints).To(ConsistOf(HaveField("Key", taintUnschedulable)))
	g.Expect(b.Status.NodeInfo.ContainerRuntimeVersion).To(Equal(defaultRuntimeVersion))
	g.Expect(nodeReady(b)).To(Equal(corev1.ConditionTrue))

	cc, err := c.CoreV1().Nodes().Get(ctx, "opt-c", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeReady(cc)).To(Equal(corev1.ConditionFalse))
	g.Expect(cc.Spec.Taints).To(ContainElement(HaveField("Key", taintNotReady)))

	for _, n := range []string{"opt-a", "opt-b", "opt-c"} {
		g.Expect(s.DeleteNode(ctx, n)).To(Succeed())
	}
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

func TestNodeImagesSurviveHeartbeats(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, c := parallel(t)
	g.Expect(s.CreateNodes(ctx, NodeSpec{Name: "img"})).To(Succeed())
	images := []corev1.ContainerImage{
		{Names: []string{"registry.example/a@sha256:01", "registry.example/a:1"}, SizeBytes: 10},
		{Names: []string{"registry.example/b:2"}, SizeBytes: 20},
	}
	g.Expect(s.SetNodeImages(ctx, "img", images)).To(Succeed())
	n, err := c.CoreV1().Nodes().Get(ctx, "img", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	first := readyHeartbeat(n)

	// kwok heartbeats on its own schedule, which a loaded machine stretches.
	g.Eventually(func(g Gomega) {
		n, err = c.CoreV1().Nodes().Get(ctx, "img", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readyHeartbeat(n)).To(BeTemporally(">", first), "kwok heartbeats happened in between")
	}, clusterTimeout, 200*time.Millisecond).Should(Succeed())
	g.Expect(n.Status.Images).To(Equal(images))
	g.Expect(nodeReady(n)).To(Equal(corev1.ConditionTrue))

	g.Expect(s.SetNodeImages(ctx, "img", nil)).To(Succeed())
	n, err = c.CoreV1().Nodes().Get(ctx, "img", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n.Status.Images).To(BeEmpty())
	g.Expect(s.DeleteNode(ctx, "img")).To(Succeed())
}

func TestSetNodeReady(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, c := parallel(t)
	images := []corev1.ContainerImage{{Names: []string{"registry.example/a:1"}, SizeBytes: 10}}
	g.Expect(s.CreateNodes(ctx, NodeSpec{Name: "flip", Images: images})).To(Succeed())

	begin := time.Now()
	g.Expect(s.SetNodeReady(ctx, "flip", false)).To(Succeed())
	t.Logf("SetNodeReady(false) settled in %s", time.Since(begin).Round(time.Millisecond))
	n, err := c.CoreV1().Nodes().Get(ctx, "flip", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeReady(n)).To(Equal(corev1.ConditionFalse))
	g.Expect(n.Spec.Taints).To(ContainElement(And(HaveField("Key", taintNotReady), HaveField("Effect", corev1.TaintEffectNoSchedule))))

	// The taint is what keeps work off a NotReady node, as in a real cluster.
	ns := namespace(t, c)
	_, err = c.BatchV1().Jobs(ns).Create(ctx, pinnedJob("stuck", "flip", "registry.example/app:1.0"), metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() string {
		pods, err := jobPods(ctx, c, ns, "stuck")
		if err != nil || len(pods) != 1 {
			return ""
		}
		for _, cond := range pods[0].Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				return string(cond.Status) + "/" + cond.Reason
			}
		}
		return ""
	}, clusterTimeout, 50*time.Millisecond).Should(Equal("False/Unschedulable"))

	begin = time.Now()
	g.Expect(s.SetNodeReady(ctx, "flip", true)).To(Succeed())
	t.Logf("SetNodeReady(true) settled in %s", time.Since(begin).Round(time.Millisecond))
	n, err = c.CoreV1().Nodes().Get(ctx, "flip", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodeReady(n)).To(Equal(corev1.ConditionTrue))
	g.Expect(n.Spec.Taints).To(BeEmpty())
	// The images stay; the held-back Job's own pull may already be listed beside them.
	g.Expect(n.Status.Images).To(ContainElement(images[0]))
	// And the held-back Job now runs.
	g.Eventually(succeeded(ctx, c, ns, "stuck"), clusterTimeout, 100*time.Millisecond).Should(Equal(int32(1)))
	g.Expect(s.DeleteNode(ctx, "flip")).To(Succeed())
}

// A second sandbox beside the shared one: ports must not collide, and Stop must leave
// nothing behind. It also checks PullDelay.
func TestSecondSandboxAndPullDelay(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	begin := time.Now()
	// Its routes are counted apart from the host's, on a range of its own, so that its
	// Stop can be seen to remove them while the shared sandbox keeps the real ones.
	if os.Geteuid() == 0 {
		_ = exclusiveRanges(t, secondSandboxCIDR)
	}
	hn := &hostNet{lockPath: filepath.Join(t.TempDir(), "lock"), statePath: filepath.Join(t.TempDir(), "state.json"), cidrs: []string{secondSandboxCIDR}}
	s2, err := Start(ctx, Options{Nodes: 1, PullDelay: 1500 * time.Millisecond, hostNet: hn})
	g.Expect(err).NotTo(HaveOccurred())
	withRoutes := os.Geteuid() == 0 && s2.netLease != nil && s2.netErr == nil
	if withRoutes {
		g.Expect(ourRoute(t, secondSandboxCIDR)).To(BeTrue(), "the route is there while the sandbox runs")
	}
	t.Logf("second sandbox started in %s", time.Since(begin).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = s2.Stop()
		}
	}()
	u1, _ := url.Parse(Get().Config().Host)
	u2, _ := url.Parse(s2.Config().Host)
	g.Expect(u2.Port()).NotTo(Equal(u1.Port()))
	for _, p := range Get().etcdPorts {
		g.Expect(s2.etcdPorts).NotTo(ContainElement(p))
	}

	c := clientFor(t, s2)
	ns := namespace(t, c)
	created := time.Now()
	_, err = c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": "sandbox-node-0"},
			Containers:   []corev1.Container{{Name: "c", Image: "registry.example/big:1"}},
		},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() corev1.PodPhase {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "slow", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return p.Status.Phase
	}, clusterTimeout, 50*time.Millisecond).Should(Equal(corev1.PodRunning))
	g.Expect(time.Since(created)).To(BeNumerically(">=", 1500*time.Millisecond))

	dir := s2.Dir()
	procs := s2.watched()
	g.Expect(procs).To(HaveLen(5))
	g.Expect(s2.Stop()).To(Succeed())
	stopped = true
	g.Expect(s2.Stop()).To(Succeed(), "Stop is idempotent")
	for _, p := range procs {
		g.Expect(syscall.Kill(p.PID(), 0)).To(HaveOccurred(), p.name+" still runs")
	}
	_, err = os.Stat(dir)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "temp dir removed")
	if withRoutes {
		g.Expect(ourRoute(t, secondSandboxCIDR)).To(BeFalse(), "the last sandbox to stop removes the route")
	}
	// The shared sandbox is untouched.
	_, err = clientFor(t, Get()).CoreV1().Nodes().Get(ctx, "sandbox-node-0", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestStartupFigure(t *testing.T) {
	t.Logf("shared sandbox (2 nodes) started in %s", Get().startedIn.Round(time.Millisecond))
}

// A binary that dies at start-up must fail Start with its own words, and leave nothing
// running.
func TestStartFailureReportsLogAndCleansUp(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// The files of the control plane this run uses (E2E_KUBE_VERSION), by the same names.
	real, err := resolveBins("", "")
	g.Expect(err).NotTo(HaveOccurred())
	bin := t.TempDir()
	for _, b := range []string{"etcd", "kube-controller-manager", "kube-scheduler", "kwok"} {
		g.Expect(os.Symlink(real[b], filepath.Join(bin, filepath.Base(real[b])))).To(Succeed())
	}
	g.Expect(os.WriteFile(filepath.Join(bin, filepath.Base(real["kube-apiserver"])), []byte("#!/bin/sh\necho 'boom: simulated apiserver failure' >&2\nexit 3\n"), 0o755)).To(Succeed())
	dir := t.TempDir()

	_, err = Start(t.Context(), Options{Dir: dir, BinDir: bin})
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(And(ContainSubstring("kube-apiserver exited early"), ContainSubstring("boom: simulated apiserver failure")))
	// etcd, started before the apiserver, is gone again.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, _ := os.ReadFile(p)
		g.Expect(string(data)).NotTo(ContainSubstring(dir), p)
	}
}

// A KubeVersion names the control plane's files, not etcd's or kwok's, and a missing one
// is an error that names it before anything starts.
func TestResolveBinsKubeVersion(t *testing.T) {
	g := NewWithT(t)
	bin := t.TempDir()
	for _, f := range []string{"etcd", "kwok", "kube-apiserver-v1.2.3", "kube-controller-manager-v1.2.3", "kube-scheduler-v1.2.3"} {
		g.Expect(os.WriteFile(filepath.Join(bin, f), nil, 0o755)).To(Succeed())
	}
	bins, err := resolveBins(bin, "v1.2.3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bins).To(Equal(map[string]string{
		"etcd":                    filepath.Join(bin, "etcd"),
		"kwok":                    filepath.Join(bin, "kwok"),
		"kube-apiserver":          filepath.Join(bin, "kube-apiserver-v1.2.3"),
		"kube-controller-manager": filepath.Join(bin, "kube-controller-manager-v1.2.3"),
		"kube-scheduler":          filepath.Join(bin, "kube-scheduler-v1.2.3"),
	}))
	_, err = resolveBins(bin, "v9.9.9")
	g.Expect(err).To(MatchError(And(ContainSubstring("kube-apiserver-v9.9.9, kube-controller-manager-v9.9.9, kube-scheduler-v9.9.9 missing"),
		ContainSubstring("E2E_KUBE_VERSION"))))
}

func TestRunFailPrefix(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	image := RunFailPrefix + "broken:1"
	c, ns := runJob(t, pinnedJob("crash", "sandbox-node-0", image))
	g.Eventually(func() bool {
		j, err := c.BatchV1().Jobs(ns).Get(ctx, "crash", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, clusterTimeout, 100*time.Millisecond).Should(BeTrue())
	pods, err := jobPods(ctx, c, ns, "crash")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pods).To(HaveLen(1))
	g.Expect(pods[0].Status.Phase).To(Equal(corev1.PodFailed))
	term := pods[0].Status.ContainerStatuses[0].State.Terminated
	g.Expect(term).NotTo(BeNil())
	g.Expect(term.Reason).To(Equal("Error"))
	g.Expect(term.ExitCode).To(Equal(int32(1)))

	// A restarting pod crash-loops instead, and never completes.
	pod := barePod(ctx, g, c, ns, "loop", corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: image}, {Name: "ok", Image: "registry.example/app:1.0"}},
	})
	g.Eventually(func(g Gomega) {
		p := pod(g)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(p.Status.ContainerStatuses).To(HaveLen(2))
		g.Expect(waitingReason(p.Status.ContainerStatuses[0])).To(Equal("CrashLoopBackOff"))
		g.Expect(p.Status.ContainerStatuses[0].LastTerminationState.Terminated).NotTo(BeNil())
		g.Expect(p.Status.ContainerStatuses[1].State.Running).NotTo(BeNil())
	}, clusterTimeout, 50*time.Millisecond).Should(Succeed())
}
