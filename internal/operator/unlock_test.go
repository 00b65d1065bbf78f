package operator

import (
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
)

func TestUnlockRelease(t *testing.T) {
	tests := []struct {
		name     string
		statuses []release.Status // revisions 1..n
		want     []release.Status
	}{
		{"no release", nil, nil},
		{"deployed stays", []release.Status{release.StatusDeployed}, []release.Status{release.StatusDeployed}},
		{"failed stays", []release.Status{release.StatusSuperseded, release.StatusFailed}, []release.Status{release.StatusSuperseded, release.StatusFailed}},
		{"pending upgrade fails", []release.Status{release.StatusDeployed, release.StatusPendingUpgrade},
			[]release.Status{release.StatusDeployed, release.StatusFailed}},
		{"pending install fails", []release.Status{release.StatusPendingInstall}, []release.Status{release.StatusFailed}},
		{"pending rollback fails", []release.Status{release.StatusSuperseded, release.StatusFailed, release.StatusPendingRollback},
			[]release.Status{release.StatusSuperseded, release.StatusFailed, release.StatusFailed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := storage.Init(driver.NewMemory())
			for i, st := range tt.statuses {
				r := &release.Release{Name: "kf", Namespace: "ns", Version: i + 1, Info: &release.Info{Status: st}}
				g.Expect(s.Create(r)).To(Succeed())
			}
			g.Expect(unlockRelease(s, "kf", logr.Discard())).To(Succeed())
			h, err := s.History("kf")
			if len(tt.want) == 0 {
				g.Expect(h).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got := make([]release.Status, len(h))
			for _, r := range h {
				got[r.Version-1] = r.Info.Status
			}
			g.Expect(got).To(Equal(tt.want))
			// A second pass changes nothing: unlocking is idempotent.
			g.Expect(unlockRelease(s, "kf", logr.Discard())).To(Succeed())
		})
	}
}
