package pacing

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"
)

var a, b = types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}

func TestCaps(t *testing.T) {
	g := NewWithT(t)
	var woken []types.NamespacedName
	l := New(4, 2, func(o types.NamespacedName) { woken = append(woken, o) })
	// per node cap
	g.Expect(l.TryAcquire(a, "n1")).To(BeTrue())
	g.Expect(l.TryAcquire(a, "n1")).To(BeTrue())
	g.Expect(l.TryAcquire(a, "n1")).To(BeFalse())
	// a alone may take the whole global cap
	g.Expect(l.TryAcquire(a, "n2")).To(BeTrue())
	g.Expect(l.TryAcquire(a, "n3")).To(BeTrue())
	g.Expect(l.TryAcquire(a, "n4")).To(BeFalse())
	g.Expect(l.InFlight()).To(Equal(4))
	// b waits; a release wakes it
	g.Expect(l.TryAcquire(b, "n5")).To(BeFalse())
	l.Release(a, "n1")
	g.Expect(woken).To(ConsistOf(b))
	// now the share is 2 each: a (holding 3) may not take more, b may
	g.Expect(l.TryAcquire(a, "n6")).To(BeFalse())
	g.Expect(l.TryAcquire(b, "n5")).To(BeTrue())
	g.Expect(l.InFlight()).To(Equal(4))
	// releasing an unheld slot changes nothing
	l.Release(types.NamespacedName{Name: "c"}, "n9")
	g.Expect(l.InFlight()).To(Equal(4))
}

func TestNoCaps(t *testing.T) {
	g := NewWithT(t)
	l := New(0, 0, nil)
	for i := 0; i < 1000; i++ {
		g.Expect(l.TryAcquire(a, "n")).To(BeTrue())
	}
	g.Expect(l.InFlight()).To(Equal(1000))
}
