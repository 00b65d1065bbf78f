package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
)

// maxNodeImages is the kubelet's default --node-status-max-images: a node
// reports its 50 largest images, and a cache must cope with images it holds
// but does not list.
const maxNodeImages = 50

// imageReporter plays the part of a kubelet's image list for the fake nodes:
// kwok runs pods without pulling anything and never touches status.images,
// so a warm cluster (nodes that report the images they hold) could not be
// tested. An image counts as pulled once a container of it has started, as
// on a real node; an image a pod could not pull (it waits) is not listed. A
// delete Job of ours (the `cri-rmi --image=X` helper) that succeeds takes X
// off the list, as removing it through the node's CRI would.
//
// Each start is reported once, on its transition: a pod's later events (the
// Job controller dropping its finalizer, the garbage collector deleting it)
// must not list again an image the node has since lost, which a test does to
// stand in for a kubelet's image garbage collection.
type imageReporter struct {
	s     *Sandbox
	queue workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	// pending are the changes still to make to each node's list, by node:
	// image name to true (pulled) or false (removed).
	pending map[string]map[string]bool
}

// reportImages starts the reporter; it runs until the sandbox stops.
func (s *Sandbox) reportImages() {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.stopHooks = append(s.stopHooks, cancel)
	s.mu.Unlock()
	r := &imageReporter{s: s, pending: map[string]map[string]bool{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	}))
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(nil, obj) },
		UpdateFunc: r.observe,
	})
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	go func() {
		for r.next(ctx) {
		}
	}()
}

// observe notes what a pod's change tells of its node's images. old is nil
// for a pod the informer had not seen.
func (r *imageReporter) observe(old, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	before, _ := old.(*corev1.Pod)
	changes := imageChanges(before, pod)
	if len(changes) == 0 {
		return
	}
	r.mu.Lock()
	p := r.pending[pod.Spec.NodeName]
	if p == nil {
		p = map[string]bool{}
		r.pending[pod.Spec.NodeName] = p
	}
	for img, pulled := range changes {
		p[img] = pulled
	}
	r.mu.Unlock()
	r.queue.Add(pod.Spec.NodeName)
}

// imageChanges is what a pod's change from before (nil: not seen yet) to now
// does to its node's images: an image to true when a container of it has
// just started, to false when a delete Job's pod has just succeeded.
func imageChanges(before, now *corev1.Pod) map[string]bool {
	changes := map[string]bool{}
	was := map[string]string{}
	if before != nil {
		was = startedImages(before)
	}
	for name, image := range startedImages(now) {
		if _, started := was[name]; !started {
			changes[image] = true
		}
	}
	if now.Status.Phase == corev1.PodSucceeded && (before == nil || before.Status.Phase != corev1.PodSucceeded) {
		for _, c := range now.Spec.Containers {
			if img := deletedImage(c); img != "" {
				changes[img] = false
			}
		}
	}
	return changes
}

// startedImages maps each container of pod that has started to its image.
func startedImages(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			out[cs.Name] = cs.Image
		}
	}
	return out
}

// deletedImage is the image a container of our delete Jobs removes, or "".
func deletedImage(c corev1.Container) string {
	if !slices.Contains(c.Command, "cri-rmi") {
		return ""
	}
	for _, a := range c.Command {
		if img, ok := strings.CutPrefix(a, "--image="); ok {
			return img
		}
	}
	return ""
}

// next applies one node's pending changes to its status.images.
func (r *imageReporter) next(ctx context.Context) bool {
	node, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(node)
	r.mu.Lock()
	changes := r.pending[node]
	delete(r.pending, node)
	r.mu.Unlock()
	if len(changes) == 0 {
		r.queue.Forget(node)
		return true
	}
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := r.s.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Images = applyImages(n.Status.Images, changes)
		_, err = r.s.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), ctx.Err() != nil:
		r.queue.Forget(node)
	default:
		// Put the changes back (newer ones win) and try again later.
		r.mu.Lock()
		p := r.pending[node]
		if p == nil {
			r.pending[node] = changes
		} else {
			for img, pulled := range changes {
				if _, newer := p[img]; !newer {
					p[img] = pulled
				}
			}
		}
		r.mu.Unlock()
		r.queue.AddRateLimited(node)
	}
	return true
}

// applyImages returns a node's image list with the changes made, as a
// kubelet lists it: each image under its tag and its repo digest, fully
// qualified, largest first, at most maxNodeImages.
func applyImages(list []corev1.ContainerImage, changes map[string]bool) []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, len(list)+len(changes))
	for _, img := range list {
		gone := false
		for _, name := range img.Names {
			for ref, pulled := range changes {
				if !pulled && sameImage(name, ref) {
					gone = true
				}
			}
		}
		if !gone {
			out = append(out, img)
		}
	}
	for ref, pulled := range changes {
		if !pulled {
			continue
		}
		listed := slices.ContainsFunc(out, func(img corev1.ContainerImage) bool {
			return slices.ContainsFunc(img.Names, func(n string) bool { return sameImage(n, ref) })
		})
		if !listed {
			if img, ok := KubeletImage(ref); ok {
				out = append(out, img)
			}
		}
	}
	return NodeStatusImages(out)
}

// NodeStatusImages is what a kubelet lists in status.images for a node that holds the
// images held: the largest first, at most maxNodeImages (the default
// --node-status-max-images). A node that holds more images than that does not report the
// smallest ones, which a cache then cannot tell from missing. held is sorted in place.
func NodeStatusImages(held []corev1.ContainerImage) []corev1.ContainerImage {
	sort.SliceStable(held, func(i, j int) bool { return held[i].SizeBytes > held[j].SizeBytes })
	if len(held) > maxNodeImages {
		held = held[:maxNodeImages]
	}
	return held
}

// kubeletImage is the entry containerd and the kubelet would report for an
// image pulled by the reference ref: its repo digest and its tag, and a
// size. Fake images have neither digest nor size, so both are derived from
// the name: stable, and different between images.
func KubeletImage(ref string) (corev1.ContainerImage, bool) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return corev1.ContainerImage{}, false
	}
	sum := sha256.Sum256([]byte(reference.TagNameOnly(named).String()))
	var names []string
	if d, ok := named.(reference.Digested); ok {
		names = append(names, named.Name()+"@"+d.Digest().String())
	} else {
		names = append(names, named.Name()+"@sha256:"+hex.EncodeToString(sum[:]))
	}
	if t, ok := reference.TagNameOnly(named).(reference.Tagged); ok && !isDigestOnly(named) {
		names = append(names, named.Name()+":"+t.Tag())
	}
	// 10 MB to 1 GB.
	size := 10_000_000 + int64(binary.BigEndian.Uint32(sum[:4])%990)*1_000_000
	return corev1.ContainerImage{Names: names, SizeBytes: size}, true
}

// isDigestOnly says whether the reference names a digest and no tag: the
// kubelet then lists no tag for it.
func isDigestOnly(named reference.Named) bool {
	_, digested := named.(reference.Digested)
	_, tagged := named.(reference.Tagged)
	return digested && !tagged
}

// sameImage says whether a listed name stands for the reference ref.
func sameImage(listed, ref string) bool {
	a, err1 := reference.ParseNormalizedNamed(listed)
	b, err2 := reference.ParseNormalizedNamed(ref)
	if err1 != nil || err2 != nil {
		return listed == ref
	}
	if a.Name() != b.Name() {
		return false
	}
	if db, ok := b.(reference.Digested); ok {
		da, ok := a.(reference.Digested)
		return ok && da.Digest() == db.Digest()
	}
	ta, okA := reference.TagNameOnly(a).(reference.Tagged)
	tb, okB := reference.TagNameOnly(b).(reference.Tagged)
	if _, digested := a.(reference.Digested); digested {
		return false // a repo digest entry; the same image also has its tag entry
	}
	return okA && okB && ta.Tag() == tb.Tag()
}
