package realnode_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pin"
	"github.com/kubefledged/kube-fledged/internal/pin/containerdpin"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

// gcOn has the kubelet's image GC delete every unused image it may, within seconds (see
// realnode.ImageGC): the kubelet takes an imageMinimumGCAge of 0 for its default, 2 minutes.
var gcOn = realnode.ImageGC{On: true, MinimumAge: time.Second}

// TestPinSurvivesImageGC: issue 31 on the real node's containerd 1.7. Two caches pin an
// image through the pin helper, run as the controller runs its node helpers (a Job with
// the delete Jobs' socket mount, in the controller's namespace); one of them also pins the
// sandbox image, which containerd pinned before us. The kubelet's image GC then deletes an
// unpinned image and keeps both pinned ones. Unpinned by one cache, the image stays pinned
// for the other; unpinned by both, the kubelet reports it unpinned and its next GC deletes
// it, while the sandbox image, whose pin was never ours, stays pinned.
//
// Image GC is off on the real node (other tests' images must stay): this test turns it on
// by restarting the kubelet, and off again before it goes on. The top-level tests of this
// package run one after another, so no other test's image is on the node to lose.
func TestPinSurvivesImageGC(t *testing.T) {
	framework.NeedRealNode(t)
	g := NewWithT(t)
	gcOffAtEnd(t)
	ns := framework.Namespace(t, k8s, "pin-")
	kept, gone := gcImage(t, g, "pin-kept:v1"), gcImage(t, g, "pin-gone:v1")
	pause := node.Registry() + "/" + realnode.PauseRepo
	g.Expect(criPinned(g, pause)).To(BeTrue(), "containerd pins its sandbox image itself")
	a, b := string(uuid.NewUUID()), string(uuid.NewUUID())

	g.Expect(runHelper(g, ns, "pin", a, kept, pause)).To(Equal(pin.Report{}))
	g.Expect(runHelper(g, ns, "pin", b, kept)).To(Equal(pin.Report{}))
	g.Eventually(func(g Gomega) bool { return criPinned(g, kept) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Expect(criPinned(g, gone)).To(BeFalse())
	g.Expect(pin.Owners(labelsOf(g, kept))).To(ConsistOf(a, b))
	g.Expect(labelsOf(g, kept)).To(HaveKeyWithValue(pin.SetByUsLabel, pin.SetByUsValue))
	g.Expect(labelsOf(g, pause)).NotTo(HaveKey(pin.SetByUsLabel), "the sandbox image's pin is containerd's")

	t0 := time.Now()
	runImageGC(t, g, gone)
	g.Expect(criPinned(g, kept)).To(BeTrue(), "the kubelet's image GC kept the pinned image")
	g.Expect(criPinned(g, pause)).To(BeTrue())
	t.Logf("image GC on, the unpinned image deleted, GC off again: %s", time.Since(t0).Round(time.Millisecond))

	g.Expect(runHelper(g, ns, "unpin", a, kept, pause)).To(Equal(pin.Report{}))
	g.Expect(pin.Owners(labelsOf(g, kept))).To(ConsistOf(b))
	g.Expect(criPinned(g, kept)).To(BeTrue(), "the other cache still pins it")
	g.Expect(runHelper(g, ns, "unpin", b, kept)).To(Equal(pin.Report{}))
	g.Eventually(func(g Gomega) bool { return criPinned(g, kept) }, 30*time.Second, 100*time.Millisecond).Should(BeFalse())
	g.Expect(labelsOf(g, kept)).NotTo(HaveKey(pin.RuntimeLabel))
	g.Expect(labelsOf(g, pause)).To(HaveKeyWithValue(pin.RuntimeLabel, pin.RuntimeValue), "never unpin somebody else's pin")

	runImageGC(t, g, kept)
	g.Expect(criPinned(g, pause)).To(BeTrue(), "the sandbox image stays pinned through GC")
}

// TestPinnedCacheSurvivesImageGC: issue 31 end to end, through the controller on the real
// node. A cache that pins keeps its image through the kubelet's image GC, which deletes the
// image of a cache that does not pin; deleting a cache that pins releases its pin (its
// finalizer's unpin Job) and leaves the image for the kubelet; a purge unpins and removes.
func TestPinnedCacheSurvivesImageGC(t *testing.T) {
	framework.NeedRealNode(t)
	g := NewWithT(t)
	gcOffAtEnd(t)
	runController(t, jobs.RetainNone, jobs.PerNode)
	ns := framework.Namespace(t, k8s, "pinned-")
	kept, gone, released := gcImage(t, g, "ctl-kept:v1"), gcImage(t, g, "ctl-gone:v1"), gcImage(t, g, "ctl-released:v1")
	caches := map[string]*v1alpha2.ImageCache{
		"pinned":   framework.CacheOnNode(ns, "pinned", node.Name(), kept),
		"plain":    framework.CacheOnNode(ns, "plain", node.Name(), gone),
		"released": framework.CacheOnNode(ns, "released", node.Name(), released),
	}
	caches["pinned"].Spec.Pin, caches["released"].Spec.Pin = ptr.To(true), ptr.To(true)
	t0 := framework.Tick()
	for _, c := range caches {
		g.Expect(k8s.Create(context.Background(), c)).To(Succeed())
	}
	for name, c := range caches {
		c = framework.Final(g, k8s, client.ObjectKeyFromObject(c), v1alpha2.ImageCacheReasonImageCacheCreate, t0, opTimeout)
		g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "%s: status: %s", name, statusJSON(c))
		caches[name] = c
	}
	p := caches["pinned"].Status
	g.Expect(p.Counts.Pinned).To(BeEquivalentTo(1))
	g.Expect(p.Pins.Images).To(Equal([]v1alpha2.PinnedImage{{Image: kept, Nodes: 1}}))
	g.Expect(criPinned(g, kept)).To(BeTrue(), "the controller's pin Job pinned it")
	g.Expect(criPinned(g, released)).To(BeTrue())
	g.Expect(criPinned(g, gone)).To(BeFalse(), "a cache that does not pin pins nothing")
	g.Expect(caches["plain"].Status.Pins).To(BeNil())

	g.Expect(k8s.Delete(context.Background(), caches["released"])).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(caches["released"]), &v1alpha2.ImageCache{}))
	}, opTimeout, 200*time.Millisecond).Should(BeTrue(), "the unpin finalizer lets the cache go")
	g.Expect(criPinned(g, released)).To(BeFalse(), "deleting the cache released its pin before it went")
	g.Expect(labelsOf(g, released)).NotTo(HaveKey(pin.OwnerLabelPrefix + string(caches["released"].UID)))

	runImageGC(t, g, gone)
	g.Expect(criPinned(g, kept)).To(BeTrue(), "the kubelet's image GC kept the pinned cache's image")

	t1 := framework.Annotate(g, k8s, client.ObjectKeyFromObject(caches["pinned"]), v1alpha2.PurgeAnnotation)
	c := framework.Final(g, k8s, client.ObjectKeyFromObject(caches["pinned"]), v1alpha2.ImageCacheReasonImageCachePurge, t1, opTimeout)
	g.Expect(c.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded), "failures: %v", c.Status.Failures)
	g.Expect(inRuntime(g, kept)).To(BeFalse(), "the purge unpinned and removed the image")
	g.Expect(c.Status.Pins).To(BeNil(), "a purged cache holds nothing pinned")
}

// gcOffAtEnd turns the kubelet's image GC off again when the test ends, however it ends:
// the other tests' images must stay.
func gcOffAtEnd(t *testing.T) {
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), framework.ClusterTimeout)
		defer cancel()
		if err := node.RestartKubelet(cctx, realnode.ImageGC{}); err != nil {
			t.Errorf("turning image GC off again: %v", err)
		}
	})
}

// gcImage pushes an image of its own content for this test and pulls it onto the node.
func gcImage(t *testing.T, g Gomega, repoTag string) string {
	t.Helper()
	l, err := realnode.NewLayer(realnode.File{Path: "/data/" + repoTag, Data: []byte("pin test image " + repoTag + "\n")})
	g.Expect(err).NotTo(HaveOccurred())
	img, err := realnode.NewImage(nil, l)
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := node.Push(context.Background(), repoTag, img)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.PullImage(context.Background(), ref)).To(Succeed())
	return ref
}

// runImageGC restarts the kubelet with image GC on and waits until it has deleted victim,
// an unused image: one GC pass lists every image it will consider before it deletes any,
// so an image pinned then and still there after the victim went was passed over. Then it
// turns GC off again, so that nothing else is deleted behind the test's back, and waits
// for the node to be free of the disk pressure GC was fired by.
func runImageGC(t *testing.T, g Gomega, victim string) {
	t.Helper()
	g.Expect(node.RestartKubelet(context.Background(), gcOn)).To(Succeed())
	g.Eventually(func(g Gomega) bool { return inRuntime(g, victim) }, framework.ClusterTimeout, 200*time.Millisecond).
		Should(BeFalse(), "the kubelet's image GC deletes %s", victim)
	g.Expect(node.RestartKubelet(context.Background(), realnode.ImageGC{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), node.Name(), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeDiskPressure {
				g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			}
		}
		for _, taint := range n.Spec.Taints {
			g.Expect(taint.Key).NotTo(Equal(corev1.TaintNodeDiskPressure))
		}
	}, framework.ClusterTimeout, 200*time.Millisecond).Should(Succeed(), "no disk pressure once GC is off")
}

// runHelper runs our binary's pin or unpin helper for owner in a Job built as the delete
// Jobs are, on the real node, and returns the report it left in its termination message.
func runHelper(g Gomega, ns, cmd, owner string, refs ...string) pin.Report {
	ctx := context.Background()
	cache := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "pinned", UID: types.UID(owner)}}
	r, err := images.Parse(refs[0])
	g.Expect(err).NotTo(HaveOccurred())
	job, err := jobs.Build(jobs.Owner{Cache: cache, Operation: cmd + "-" + string(uuid.NewUUID())[:8]},
		jobs.Work{Kind: jobs.Delete, Image: refs[0], Ref: r, Node: jobs.Node{Name: node.Name()}},
		jobs.Options{HelperImage: helperImage, CRISocketPath: node.CRISocket(), DeleteNamespace: ns, ActiveDeadline: 300})
	g.Expect(err).NotTo(HaveOccurred())
	c := &job.Spec.Template.Spec.Containers[0]
	var endpoint string
	for _, a := range c.Command {
		if strings.HasPrefix(a, "--endpoint=") {
			endpoint = a
		}
	}
	g.Expect(endpoint).NotTo(BeEmpty(), "the delete Job's command names the socket it mounts")
	c.Command = []string{jobs.HelperBinary, cmd, endpoint, "--owner=" + owner}
	for _, ref := range refs {
		c.Command = append(c.Command, "--image="+ref)
	}
	g.Expect(k8s.Create(ctx, job)).To(Succeed())
	var done *corev1.ContainerStateTerminated
	g.Eventually(func(g Gomega) *corev1.ContainerStateTerminated {
		pods := podsOf(g, ns, job.Name)
		g.Expect(pods).To(HaveLen(1))
		st := pods[0].Status.ContainerStatuses
		g.Expect(st).To(HaveLen(1))
		done = st[0].State.Terminated
		return done
	}, opTimeout, 200*time.Millisecond).ShouldNot(BeNil())
	g.Expect(done.ExitCode).To(BeZero(), "%s: %s", cmd, done.Message)
	msg := done.Message
	report, err := pin.ParseReport(msg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
	return report
}

// criPinned is what the kubelet's image GC reads: CRI's Image.pinned.
func criPinned(g Gomega, ref string) bool {
	img, err := node.ImageStatus(context.Background(), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img).NotTo(BeNil(), "%s is on the node", ref)
	return img.GetPinned()
}

// labelsOf reads the labels of the containerd record of ref's tag, as the helper wrote them.
func labelsOf(g Gomega, ref string) map[string]string {
	img, err := node.ImageStatus(context.Background(), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.GetRepoTags()).NotTo(BeEmpty())
	conn, err := grpc.NewClient("unix://"+node.CRISocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "containerd-namespace", containerdpin.Namespace)
	got, err := imagesapi.NewImagesClient(conn).Get(ctx, &imagesapi.GetImageRequest{Name: img.GetRepoTags()[0]})
	g.Expect(err).NotTo(HaveOccurred())
	return got.GetImage().GetLabels()
}

// statusJSON is a cache's whole status, for a failure to show why it ended as it did.
func statusJSON(c *v1alpha2.ImageCache) string {
	b, _ := json.MarshalIndent(c.Status, "", "  ")
	return string(b)
}
