package manageropts

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

func TestApplyKeepsWhatItDoesNotSet(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	m := manager.Options{Scheme: scheme, PprofBindAddress: ":6060"}
	Manager{
		LeaderElect: true, LeaderElectionID: "id", LeaderElectionNamespace: "ns",
		MetricsAddr: ":1", ProbeAddr: "0",
	}.Apply(&m)

	g.Expect(m.Scheme).To(BeIdenticalTo(scheme))
	g.Expect(m.PprofBindAddress).To(Equal(":6060"))
	g.Expect(m.Metrics.BindAddress).To(Equal(":1"))
	g.Expect(m.HealthProbeBindAddress).To(Equal("0"))
	g.Expect(m.LeaderElection).To(BeTrue())
	g.Expect(m.LeaderElectionID).To(Equal("id"))
	g.Expect(m.LeaderElectionNamespace).To(Equal("ns"))
	g.Expect(m.LeaderElectionReleaseOnCancel).To(BeTrue(), "a stopping replica must hand over at once")
	g.Expect(m.Metrics.SecureServing).To(BeFalse())
	g.Expect(m.Metrics.FilterProvider).To(BeNil(), "plain HTTP asks nobody")
}

// Secure metrics are served over TLS behind the API server's authentication
// and authorization, as kubebuilder scaffolds them.
func TestApplySecureMetrics(t *testing.T) {
	g := NewWithT(t)
	m := manager.Options{}
	Manager{MetricsAddr: ":8443", SecureMetrics: true}.Apply(&m)
	g.Expect(m.Metrics.SecureServing).To(BeTrue())
	g.Expect(m.Metrics.FilterProvider).NotTo(BeNil())
}
