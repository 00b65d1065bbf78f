package imagecache

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestInParallel(t *testing.T) {
	tests := []struct {
		name       string
		n, limit   int
		failing    map[int]bool
		wantFailed int
		wantFirst  string
	}{
		{name: "nothing to do", n: 0, limit: 4},
		{name: "all succeed", n: 50, limit: 4},
		{name: "failures counted, the first in item order", n: 30, limit: 8, failing: map[int]bool{7: true, 3: true, 29: true}, wantFailed: 3, wantFirst: "item 3"},
		{name: "a limit below one still runs", n: 3, limit: 0, failing: map[int]bool{2: true}, wantFailed: 1, wantFirst: "item 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var running, peak, calls atomic.Int32
			failed, first := inParallel(tt.n, tt.limit, func(i int) error {
				calls.Add(1)
				now := running.Add(1)
				for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				running.Add(-1)
				if tt.failing[i] {
					return fmt.Errorf("item %d", i)
				}
				return nil
			})
			g.Expect(calls.Load()).To(BeEquivalentTo(tt.n))
			g.Expect(peak.Load()).To(BeNumerically("<=", max(tt.limit, 1)))
			g.Expect(failed).To(Equal(tt.wantFailed))
			if tt.wantFirst == "" {
				g.Expect(first).NotTo(HaveOccurred())
			} else {
				g.Expect(first).To(MatchError(errors.New(tt.wantFirst).Error()))
			}
		})
	}
}
