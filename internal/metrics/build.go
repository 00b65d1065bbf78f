package metrics

import (
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// NameBuildInfo is the build's series, for the dashboard and its tests.
const NameBuildInfo = "kubefledged_build_info"

var buildOnce sync.Once

// RegisterBuildInfo serves kubefledged_build_info, 1 with the version and
// revision of the running binary, so that an alert or a dashboard can tell
// which build a replica runs (a rollout stuck half-way shows two). Both the
// controller and the operator serve it. The revision is the one given at
// link time, else the VCS revision Go stamped into the binary, else
// "unknown" (a build with -buildvcs=false and no -X).
func RegisterBuildInfo(version, revision string) {
	buildOnce.Do(func() {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: NameBuildInfo,
			Help: "1, labelled with the version and VCS revision of the running kube-fledged binary.",
		}, []string{"version", "revision"})
		g.WithLabelValues(version, Revision(revision)).Set(1)
		crmetrics.Registry.MustRegister(g)
	})
}

// Revision is given unless empty, else the binary's vcs.revision, else
// "unknown".
func Revision(given string) string {
	if given != "" {
		return given
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				rev := s.Value
				for _, m := range bi.Settings {
					if m.Key == "vcs.modified" && m.Value == "true" {
						rev += "-dirty"
					}
				}
				return rev
			}
		}
	}
	return "unknown"
}
