package realnode_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// deadline is the operations' image pull deadline. No test here waits for it: a missing
// image is settled from the kubelet's report, and every other pull ends. It only has to
// outlast what the kubelet really does on a loaded machine: a missing image gives
// ErrImagePull within about 1.5 s but ImagePullBackOff only after 13-16 s, which the tests
// want to see, and a pull refused with 429 is retried after the kubelet's 10 s back-off,
// which took past 30 s in a loaded `make test` (stop 40).
const deadline = 2 * time.Minute

// opTimeout bounds one operation, seen from the test: the deadline, and the kubelet's and
// the control plane's work around it on a loaded machine.
const opTimeout = deadline + framework.ClusterTimeout

// runController starts the controller in-process, with our image from the node's registry
// as its helper and the node's own containerd socket for the delete Jobs; the returned
// function stops it (it also runs at the test's end).
func runController(t *testing.T, retention jobs.Retention, granularity jobs.Granularity) (stop func()) {
	t.Helper()
	o := commands.NewControllerOptions()
	o.Retention, o.Granularity = retention, granularity
	o.LeaderElect = false
	o.Webhook.Enable = false
	o.MetricsAddr, o.ProbeAddr = "0", "0"
	o.Deadline.Value = deadline
	o.RefreshEvery.Value = 0
	o.HelperImage = helperImage
	o.CRISocketPath = node.CRISocket()
	o.MaxJobsPerNode.Value = 8
	return framework.RunController(t, sb.Config(), o)
}

func imageRefs(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = ref(n)
	}
	return out
}

func jobsOf(g Gomega, ns string, labels client.MatchingLabels) []batchv1.Job {
	l := &batchv1.JobList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns), labels)).To(Succeed())
	return l.Items
}

func podsOf(g Gomega, ns, job string) []corev1.Pod {
	l := &corev1.PodList{}
	g.Expect(k8s.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: job})).To(Succeed())
	return l.Items
}

// inRuntime tells whether containerd holds the image, asked through CRI as the kubelet asks.
func inRuntime(g Gomega, ref string) bool {
	img, err := node.ImageStatus(context.Background(), ref)
	g.Expect(err).NotTo(HaveOccurred())
	return img != nil
}

// took is how long a finished Job ran, for the figures in the test log.
func took(j batchv1.Job) time.Duration {
	if j.Status.StartTime == nil || j.Status.CompletionTime == nil {
		return 0
	}
	return j.Status.CompletionTime.Sub(j.Status.StartTime.Time)
}
