package pin

import (
	"testing"

	. "github.com/onsi/gomega"
)

const (
	a = "2f1e6c7a-0000-4000-8000-00000000000a"
	b = "2f1e6c7a-0000-4000-8000-00000000000b"
)

func TestPlan(t *testing.T) {
	ours := map[string]string{RuntimeLabel: RuntimeValue, SetByUsLabel: SetByUsValue}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{"other": "kept"}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name       string
		labels     map[string]string
		pin        bool
		wantSet    map[string]string
		wantRemove []string
	}{{
		name: "pin an unpinned image: we set the runtime's label and say so", labels: with(nil), pin: true,
		wantSet: map[string]string{OwnerLabel(a): OwnerValue, RuntimeLabel: RuntimeValue, SetByUsLabel: SetByUsValue},
	}, {
		name: "pin an image somebody else pinned: owner label only", labels: with(nil, RuntimeLabel, RuntimeValue), pin: true,
		wantSet: map[string]string{OwnerLabel(a): OwnerValue},
	}, {
		name: "pin an image another cache of ours pinned: owner label only", labels: with(ours, OwnerLabel(b), OwnerValue), pin: true,
		wantSet: map[string]string{OwnerLabel(a): OwnerValue},
	}, {
		name: "pin again: nothing to change", labels: with(ours, OwnerLabel(a), OwnerValue), pin: true,
		wantSet: map[string]string{},
	}, {
		name: "a runtime label that does not pin is taken over", labels: with(nil, RuntimeLabel, "no"), pin: true,
		wantSet: map[string]string{OwnerLabel(a): OwnerValue, RuntimeLabel: RuntimeValue, SetByUsLabel: SetByUsValue},
	}, {
		name: "our pin, whose runtime label somebody removed, is set again", labels: with(nil, SetByUsLabel, SetByUsValue, OwnerLabel(a), OwnerValue), pin: true,
		wantSet: map[string]string{RuntimeLabel: RuntimeValue, SetByUsLabel: SetByUsValue},
	}, {
		name: "unpin the last owner of our pin: everything goes", labels: with(ours, OwnerLabel(a), OwnerValue),
		wantRemove: []string{OwnerLabel(a), RuntimeLabel, SetByUsLabel},
	}, {
		name: "unpin while another cache pins it: owner label only", labels: with(ours, OwnerLabel(a), OwnerValue, OwnerLabel(b), OwnerValue),
		wantRemove: []string{OwnerLabel(a)},
	}, {
		name: "unpin somebody else's pin: the runtime label stays", labels: with(nil, RuntimeLabel, RuntimeValue, OwnerLabel(a), OwnerValue),
		wantRemove: []string{OwnerLabel(a)},
	}, {
		name: "unpin an image we never pinned: nothing to change", labels: with(nil),
	}, {
		name: "an orphaned pin of ours (helper died between updates) is dropped", labels: with(ours),
		wantRemove: []string{RuntimeLabel, SetByUsLabel},
	}, {
		name: "an orphaned pin stays while another owner holds it", labels: with(ours, OwnerLabel(b), OwnerValue),
	}, {
		name: "our marker without the runtime label: the marker goes", labels: with(nil, SetByUsLabel, SetByUsValue, OwnerLabel(a), OwnerValue),
		wantRemove: []string{OwnerLabel(a), SetByUsLabel},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			set, remove := Plan(tc.labels, a, tc.pin)
			if tc.pin {
				g.Expect(set).To(Equal(tc.wantSet))
			} else {
				g.Expect(set).To(BeEmpty())
			}
			g.Expect(remove).To(Equal(tc.wantRemove))
			g.Expect(tc.labels).To(HaveKeyWithValue("other", "kept"), "Plan must not change its input")
		})
	}
}

// TestPlanRoundTrip applies the plans of two owners in turn: whatever order
// they pin and unpin in, the image ends as it began.
func TestPlanRoundTrip(t *testing.T) {
	apply := func(labels map[string]string, owner string, pin bool) map[string]string {
		set, remove := Plan(labels, owner, pin)
		out := map[string]string{}
		for k, v := range labels {
			out[k] = v
		}
		for k, v := range set {
			out[k] = v
		}
		for _, k := range remove {
			delete(out, k)
		}
		return out
	}
	for _, start := range []map[string]string{{}, {RuntimeLabel: RuntimeValue}} {
		for _, order := range [][]string{{a, b}, {b, a}} {
			g := NewWithT(t)
			l := apply(apply(start, a, true), b, true)
			g.Expect(Pinned(l)).To(BeTrue())
			g.Expect(Owners(l)).To(Equal([]string{a, b}))
			l = apply(l, order[0], false)
			g.Expect(Pinned(l)).To(BeTrue(), "one owner still pins it")
			l = apply(l, order[1], false)
			g.Expect(l).To(Equal(start))
		}
	}
}
