package manageropts

import (
	"crypto/tls"
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
	// controller-runtime starts from h2 and Go's default minimum; the options
	// leave TLS 1.2 and HTTP/1.1, as the webhook serves.
	c := &tls.Config{NextProtos: []string{"h2"}}
	for _, o := range m.Metrics.TLSOpts {
		o(c)
	}
	g.Expect(c.MinVersion).To(Equal(uint16(tls.VersionTLS12)))
	g.Expect(c.NextProtos).To(Equal([]string{"http/1.1"}))
}
