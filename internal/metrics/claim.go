package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// standingBy is 1 while another install holds the cluster-wide claim and
// this one's leader waits: an install that never works would otherwise look
// healthy, its pods ready and its leader elected.
var standingBy = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kubefledged_install_standing_by",
	Help: "1 while another kube-fledged install in the cluster holds the install claim (--install-claim) and this one pulls and deletes nothing.",
})

func init() { crmetrics.Registry.MustRegister(standingBy) }

// SetStandingBy reports whether this install stands by.
func SetStandingBy(b bool) {
	v := 0.0
	if b {
		v = 1
	}
	standingBy.Set(v)
}
