package jobs

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubefledged/kube-fledged/internal/images"
)

// FuzzNames derives Job names and cache labels from arbitrary cache names
// the API server accepts (any DNS subdomain up to 253 characters). A name or
// label the API server refuses would fail every Job of such a cache, and a
// Job name too long for its pods' names would fail them at the Job
// controller, after the Job itself was accepted.
func FuzzNames(f *testing.F) {
	for _, s := range []string{"a", "nginx-cache", "a.b.c", "a-b-c.d-e", "x1234567890123456789012345678901234567890123456789012345678901234567890",
		"a.-b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-b"} {
		f.Add(s, "node-1", "nginx:1.27", "0123456789")
	}
	f.Fuzz(func(t *testing.T, cache, node, image, op string) {
		if len(validation.IsDNS1123Subdomain(cache)) > 0 || len(validation.IsDNS1123Subdomain(node)) > 0 {
			return
		}
		ref, err := images.Parse(image)
		if err != nil {
			return
		}
		for _, kind := range []Kind{Pull, Delete} {
			w := Work{Kind: kind, Image: image, Ref: ref, Node: Node{Name: node}}
			name := Name(cache, op, w)
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				t.Fatalf("Job name %q of cache %q: %v", name, cache, errs)
			}
			// The Job controller labels pods with the Job name and names
			// them <job>-<5 characters>.
			if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
				t.Fatalf("Job name %q of cache %q is no label value: %v", name, cache, errs)
			}
			if len(name)+6 > validation.DNS1123LabelMaxLength {
				t.Fatalf("Job name %q leaves no room for the pod suffix", name)
			}
			if Name(cache, op, w) != name {
				t.Fatalf("Job name of %q is not stable", cache)
			}
			if other := Name(cache, op+"x", w); other == name {
				t.Fatalf("operations %q and %q share Job name %q", op, op+"x", name)
			}
		}
		l := CacheLabelValue(cache)
		if errs := validation.IsValidLabelValue(l); len(errs) > 0 {
			t.Fatalf("label value %q of cache %q: %v", l, cache, errs)
		}
		if len(validation.IsValidLabelValue(cache)) == 0 && l != cache {
			t.Fatalf("short name %q relabelled %q: users' selectors would miss it", cache, l)
		}
	})
}
