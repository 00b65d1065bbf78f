// Package podimages decides which images the fromPods and fromWorkloads of a
// cache's lists stand for, from the pods, workloads and namespaces as last
// seen, and how that record changes the work of an operation. It is pure:
// the informers that feed it live in podwatch, the operations that act on
// it in the imagecache controller.
package podimages

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/images"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

// Selectors turns a fromPods into label selectors, with NetworkPolicy's
// meaning of absent and empty (see v1alpha2.FromPods): ownNamespace is true
// when only the cache's own namespace is selected.
func Selectors(f *v1alpha2.FromPods) (ns labels.Selector, ownNamespace bool, pods labels.Selector, err error) {
	pods = labels.Everything()
	if f.PodSelector != nil {
		if pods, err = metav1.LabelSelectorAsSelector(f.PodSelector); err != nil {
			return nil, false, nil, fmt.Errorf("podSelector: %w", err)
		}
	}
	if f.NamespaceSelector == nil {
		return labels.Everything(), true, pods, nil
	}
	if ns, err = metav1.LabelSelectorAsSelector(f.NamespaceSelector); err != nil {
		return nil, false, nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	return ns, false, pods, nil
}

// Resolve finds, for each list with fromPods or fromWorkloads, the images
// of the pods and of the workload templates it selects: cacheNS is the
// ImageCache's namespace, namespaces the labels of every namespace by name.
// Images are kept in list order, sorted within a list, until MaxPodImages
// of the whole cache; the rest are counted as omitted. An image a list also
// names in its images is left out: it is cached already, and would be
// counted twice. The lists whose selectors do not parse are returned in
// bad, by index, and contribute nothing; each error names its field
// (fromPods.podSelector, fromWorkloads.namespaceSelector, ...).
func Resolve(cacheNS string, lists []v1alpha2.CacheSpecImages, pods []*corev1.Pod, workloads []Workload, namespaces map[string]labels.Set) (out []v1alpha2.ListPodImages, bad map[int]error) {
	room := v1alpha2.MaxPodImages
	for i := range lists {
		l := &lists[i]
		if l.FromPods == nil && l.FromWorkloads == nil {
			continue
		}
		podsIn, err := selection(l.FromPods, "fromPods", cacheNS, namespaces)
		var workloadsIn func(ns string, lbls map[string]string) bool
		if err == nil && l.FromWorkloads != nil {
			workloadsIn, err = selection(asFromPods(l.FromWorkloads), "fromWorkloads", cacheNS, namespaces)
		}
		if err != nil {
			if bad == nil {
				bad = map[int]error{}
			}
			bad[i] = err
			continue
		}
		named := map[string]bool{}
		for _, img := range l.Images {
			named[Key(img)] = true
		}
		type found struct {
			image           string
			pods, workloads int32
			usedBy          string
		}
		byKey := map[string]*found{}
		// add counts one pod or workload, user, for each image it names.
		add := func(user string, isPod bool, imgs []string) {
			seen := map[string]bool{}
			for _, img := range imgs {
				k := Key(img)
				if named[k] || seen[k] {
					continue
				}
				seen[k] = true
				f := byKey[k]
				if f == nil {
					f = &found{image: img, usedBy: user}
					byKey[k] = f
				}
				if isPod {
					f.pods++
				} else {
					f.workloads++
				}
				// The least name, so that the status does not change with
				// the order pods are listed in.
				if user < f.usedBy {
					f.usedBy = user
				}
				if img < f.image {
					f.image = img
				}
			}
		}
		rec := v1alpha2.ListPodImages{List: int32(i)}
		if podsIn != nil {
			for _, p := range pods {
				if p.Labels[jobs.LabelManager] == jobs.LabelManagerValue {
					continue // our own pull Jobs
				}
				if podsIn(p.Namespace, p.Labels) {
					rec.Pods++
					add(UsedBy(p), true, Of(p))
				}
			}
		}
		if workloadsIn != nil {
			for _, w := range workloads {
				if workloadsIn(w.Namespace, w.Labels) {
					rec.Workloads++
					add(w.UsedBy(), false, w.Images)
				}
			}
		}
		rec.Count = int32(len(byKey))
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if room == 0 {
				rec.Omitted++
				continue
			}
			room--
			f := byKey[k]
			rec.Images = append(rec.Images, v1alpha2.PodImage{Image: f.image, Pods: f.pods, Workloads: f.workloads, UsedBy: f.usedBy})
		}
		out = append(out, rec)
	}
	return out, bad
}

// selection turns the selectors of a fromPods (or of a fromWorkloads, read
// as one) into a test of an object's namespace and labels; nil when f is.
// An error names field.
func selection(f *v1alpha2.FromPods, field, cacheNS string, namespaces map[string]labels.Set) (func(ns string, lbls map[string]string) bool, error) {
	if f == nil {
		return nil, nil
	}
	nsSel, own, sel, err := Selectors(f)
	if err != nil {
		return nil, fmt.Errorf("%s.%w", field, err)
	}
	return func(ns string, lbls map[string]string) bool {
		if own {
			if ns != cacheNS {
				return false
			}
		} else if nsLabels, known := namespaces[ns]; !known || !nsSel.Matches(nsLabels) {
			return false
		}
		return sel.Matches(labels.Set(lbls))
	}, nil
}

// Of lists the images a pod runs or may run: containers, init containers
// and ephemeral containers, as written, once each.
func Of(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.Containers {
		out = append(out, c.Image)
	}
	for _, c := range p.Spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	return out
}

// UsedBy names a pod by what made it: namespace/Kind/name of its
// controller, which outlives the pod and says which workload to look at.
func UsedBy(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return p.Namespace + "/" + ref.Kind + "/" + ref.Name
	}
	return p.Namespace + "/Pod/" + p.Name
}

// Key compares images after normalisation (nginx is
// docker.io/library/nginx:latest); one that does not parse compares as
// written, and fails in the operation as a named image would.
func Key(s string) string {
	if n, err := images.Normalize(s); err == nil {
		return n
	}
	return s
}

// Images returns the images the record holds for list i.
func Images(record []v1alpha2.ListPodImages, i int) []string {
	for _, r := range record {
		if int(r.List) == i {
			out := make([]string, len(r.Images))
			for j, img := range r.Images {
				out[j] = img.Image
			}
			return out
		}
	}
	return nil
}

// Effective is the spec an operation acts on: each list's named images and
// then those the record holds for it.
func Effective(spec v1alpha2.ImageCacheSpec, record []v1alpha2.ListPodImages) v1alpha2.ImageCacheSpec {
	out := *spec.DeepCopy()
	for i := range out.CacheSpec {
		if extra := Images(record, i); len(extra) > 0 {
			out.CacheSpec[i].Images = append(out.CacheSpec[i].Images, extra...)
		}
	}
	return out
}

// Prior is what an update compares the effective spec against: the named
// images the last operation left (prior), and of the pod images it left
// (was) only those pods still run (now). A pod image no pod runs any more
// is thus dropped without a delete Job: it is no longer cached, and the
// runtime's garbage collection or a purge removes it. A named image the
// spec lost is deleted, as the original did.
func Prior(prior *v1alpha2.ImageCacheSpec, was, now []v1alpha2.ListPodImages) *v1alpha2.ImageCacheSpec {
	if prior == nil {
		return nil
	}
	out := prior.DeepCopy()
	for i := range out.CacheSpec {
		still := map[string]bool{}
		for _, img := range Images(now, i) {
			still[Key(img)] = true
		}
		for _, img := range Images(was, i) {
			if still[Key(img)] {
				out.CacheSpec[i].Images = append(out.CacheSpec[i].Images, img)
			}
		}
	}
	return out
}

// Gained says whether now holds, for some list, an image was does not:
// pods run an image the cache does not hold yet, and an update is due.
func Gained(was, now []v1alpha2.ListPodImages) bool {
	for _, r := range now {
		had := map[string]bool{}
		for _, img := range Images(was, int(r.List)) {
			had[Key(img)] = true
		}
		for _, img := range r.Images {
			if !had[Key(img.Image)] {
				return true
			}
		}
	}
	return false
}

// Grow is the record of a running operation once the pods and templates
// it follows changed: now, each list also keeping the images of was that
// now lacks. An operation takes in what its pods and templates gained, so
// that the pulls start without waiting for its end, and nothing they lost:
// an image dropped meanwhile is dropped at its end, as before, with the
// Event that says so. Neither record is written to.
func Grow(was, now []v1alpha2.ListPodImages) []v1alpha2.ListPodImages {
	out := make([]v1alpha2.ListPodImages, len(now))
	for i, r := range now {
		r.Images = slices.Clone(r.Images)
		has := map[string]bool{}
		for _, img := range r.Images {
			has[Key(img.Image)] = true
		}
		for _, w := range was {
			if w.List != r.List {
				continue
			}
			for _, img := range w.Images {
				if k := Key(img.Image); !has[k] {
					has[k] = true
					r.Images = append(r.Images, img)
					r.Count++
				}
			}
		}
		// In the order Resolve keeps them, so that a record grown and
		// one resolved compare equal.
		sort.SliceStable(r.Images, func(a, b int) bool { return Key(r.Images[a].Image) < Key(r.Images[b].Image) })
		out[i] = r
	}
	return out
}

// Uses says whether a list of the spec has fromPods or fromWorkloads.
func Uses(spec *v1alpha2.ImageCacheSpec) bool {
	return UsesPods(spec) || UsesWorkloads(spec)
}

// UsesPods says whether a list of the spec has fromPods.
func UsesPods(spec *v1alpha2.ImageCacheSpec) bool {
	for i := range spec.CacheSpec {
		if spec.CacheSpec[i].FromPods != nil {
			return true
		}
	}
	return false
}

// UsesWorkloads says whether a list of the spec has fromWorkloads.
func UsesWorkloads(spec *v1alpha2.ImageCacheSpec) bool {
	for i := range spec.CacheSpec {
		if spec.CacheSpec[i].FromWorkloads != nil {
			return true
		}
	}
	return false
}
