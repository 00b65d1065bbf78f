package heldledger_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/heldledger/heldledgertest"
	"github.com/kubefledged/kube-fledged/internal/hold"
)

var (
	web = types.NamespacedName{Namespace: "apps", Name: "web"}
	uid = types.UID("uid-web")
)

func pulls(pending []string, failed ...string) *heldledger.Pulls {
	p := &heldledger.Pulls{Pending: map[string]bool{}, Failed: map[string]bool{}}
	for _, img := range pending {
		p.Pending[img] = true
	}
	for _, img := range failed {
		p.Failed[img] = true
	}
	return p
}

func imgs(l ...string) []string { return l }

// What the ledger knows of cache web on node n1 after the reconciler's
// writes, and the nodes it woke.
func TestLedger(t *testing.T) {
	tests := []struct {
		name  string
		write func(l *heldledger.Ledger)
		want  hold.Facts
		woken []string
	}{{
		name:  "nothing written",
		write: func(*heldledger.Ledger) {},
	}, {
		name:  "an operation runs",
		write: func(l *heldledger.Ledger) { l.Started(web, uid, false) },
		want:  hold.Facts{Running: true},
	}, {
		name:  "a purge runs",
		write: func(l *heldledger.Ledger) { l.Started(web, uid, true) },
		want:  hold.Facts{Running: true, Purge: true},
	}, {
		name: "an operation ended, covering the node",
		write: func(l *heldledger.Ledger) {
			l.Started(web, uid, false)
			l.Ended(web)
			l.Cover(web, uid, map[string]bool{"n1": true})
		},
		want: hold.Facts{CoverageKnown: true, Covered: true},
	}, {
		name:  "a coverage without the node",
		write: func(l *heldledger.Ledger) { l.Cover(web, uid, map[string]bool{"n2": true}) },
		want:  hold.Facts{CoverageKnown: true},
	}, {
		name: "another cache under the name: nothing of the old one is read",
		write: func(l *heldledger.Ledger) {
			l.Started(web, "old", false)
			l.Cover(web, "old", map[string]bool{"n1": true})
			l.Hold(web, "old", map[string]*heldledger.Pulls{"n1": pulls(nil)}, false)
		},
		woken: imgs("n1"),
	}, {
		name: "a record with images pending, sorted",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("redis:7", "nginx:1"), "bad:1")}, false)
		},
		want: hold.Facts{Record: &hold.Record{Pending: imgs("nginx:1", "redis:7"), Failed: imgs("bad:1")}},
	}, {
		name: "a record with nothing pending is done at once, and woken",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(nil), "n2": pulls(imgs("x:1"))}, false)
		},
		want: hold.Facts{Record: &hold.Record{}}, woken: imgs("n1"),
	}, {
		name: "settling the last pending image wakes the node, once",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1", "b:1"))}, false)
			l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "a:1"}})
			l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "b:1", Failed: true}, {Node: "n1", Image: "b:1"}})
			l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "a:1"}})
		},
		want: hold.Facts{Record: &hold.Record{Failed: imgs("b:1")}}, woken: imgs("n1"),
	}, {
		name: "a pair of another node, image or cache changes nothing",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"))}, false)
			l.Settle(web, uid, []heldledger.Pair{{Node: "n2", Image: "a:1"}, {Node: "n1", Image: "z:1"}})
			l.Settle(web, "old", []heldledger.Pair{{Node: "n1", Image: "a:1"}})
		},
		want: hold.Facts{Record: &hold.Record{Pending: imgs("a:1")}},
	}, {
		name: "a merge adds the new images and pulls the failed ones again",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1", "b:1"), "bad:1")}, false)
			l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "a:1", Failed: true}})
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1", "c:1"))}, true)
		},
		want: hold.Facts{Record: &hold.Record{Pending: imgs("a:1", "b:1", "c:1"), Failed: imgs("bad:1")}},
	}, {
		name: "without merge, the record is replaced",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"), "bad:1")}, false)
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("c:1"))}, false)
		},
		want: hold.Facts{Record: &hold.Record{Pending: imgs("c:1")}},
	}, {
		name: "a succeeded pull clears an old failure of the image",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"), "a:1")}, false)
			l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "a:1"}})
		},
		want: hold.Facts{Record: &hold.Record{}}, woken: imgs("n1"),
	}, {
		name: "pruned: only the nodes still held keep their record",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1")), "n2": pulls(imgs("a:1"))}, false)
			l.Prune(web, map[string]bool{"n2": true})
		},
	}, {
		name: "released: every cache's record of the node goes",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"))}, false)
			l.Released("n1")
		},
	}, {
		name: "dropped by a purge: the records go, the operation stays",
		write: func(l *heldledger.Ledger) {
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"))}, false)
			l.Started(web, uid, true)
			l.Drop(web)
		},
		want: hold.Facts{Running: true, Purge: true},
	}, {
		name: "forgotten: nothing left",
		write: func(l *heldledger.Ledger) {
			l.Started(web, uid, false)
			l.Cover(web, uid, map[string]bool{"n1": true})
			l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1"))}, false)
			l.Forget(web)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			l := heldledger.New()
			tt.write(l)
			g.Expect(l.Facts(web, uid, "n1")).To(Equal(tt.want))
			g.Expect(l.State(web, uid, "n1")).To(Equal(hold.State(tt.want)))
			g.Expect(heldledgertest.Woken(l)).To(Equal(tt.woken))
		})
	}
}

// Records counts what the ledger keeps: a released or pruned node leaves
// nothing behind.
func TestRecords(t *testing.T) {
	g := NewWithT(t)
	l := heldledger.New()
	db := types.NamespacedName{Namespace: "apps", Name: "db"}
	l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(imgs("a:1")), "n2": pulls(imgs("a:1"))}, false)
	l.Hold(db, "uid-db", map[string]*heldledger.Pulls{"n1": pulls(imgs("p:1"))}, false)
	g.Expect(l.Records()).To(Equal(3))
	l.Released("n1")
	g.Expect(l.Records()).To(Equal(1))
	l.Prune(web, nil)
	g.Expect(l.Records()).To(BeZero())
}

// With the taint off there is no ledger: the reconciler's writes do
// nothing, and nothing is known.
func TestNilLedger(t *testing.T) {
	g := NewWithT(t)
	var l *heldledger.Ledger
	g.Expect(func() {
		l.Started(web, uid, false)
		l.Ended(web)
		l.Cover(web, uid, map[string]bool{"n1": true})
		l.Hold(web, uid, map[string]*heldledger.Pulls{"n1": pulls(nil)}, false)
		l.Settle(web, uid, []heldledger.Pair{{Node: "n1", Image: "a:1"}})
		l.Prune(web, nil)
		l.Drop(web)
		l.Released("n1")
		l.Forget(web)
	}).NotTo(Panic())
	g.Expect(l.State(web, uid, "n1")).To(Equal(hold.CacheState{}))
	g.Expect(l.Records()).To(BeZero())
}

// A wake-up never blocks the reconciler: past the buffer, wake-ups are
// dropped and the startup-taint controller's resync catches the nodes.
func TestWakeNeverBlocks(t *testing.T) {
	g := NewWithT(t)
	l := heldledger.New()
	fresh := map[string]*heldledger.Pulls{}
	for i := range cap(l.Settled()) + 10 {
		fresh[fmt.Sprintf("n%d", i)] = pulls(nil)
	}
	l.Hold(web, uid, fresh, false)
	g.Expect(heldledgertest.Woken(l)).To(HaveLen(cap(l.Settled())))
}
