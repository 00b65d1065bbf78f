// Package manageropts holds the manager settings that the controller and the
// operator both take from their command lines, so that the two processes
// serve metrics and probes and hand over leadership the same way.
package manageropts

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/kubefledged/kube-fledged/internal/pki"
)

// Manager are the settings both commands bind to flags of the same names.
// Each command binds them itself: their defaults and help text differ (each
// has its own Lease, and only the controller knows its namespace up front).
type Manager struct {
	// LeaderElect makes one of several replicas the active one.
	LeaderElect bool
	// LeaderElectionID names the Lease; replicas that share it elect together.
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; empty means the pod's own
	// namespace (required when running outside the cluster with LeaderElect).
	LeaderElectionNamespace string
	// MetricsAddr serves Prometheus metrics; "0" turns them off.
	MetricsAddr string
	// SecureMetrics serves them over HTTPS (a self-signed certificate
	// controller-runtime makes at start), to callers the API server
	// authenticates (TokenReview) and authorizes for get on the
	// non-resource URL /metrics (SubjectAccessReview), as kubebuilder
	// scaffolds operators today: metrics name nodes, images and caches,
	// which not every pod in the cluster should read. False serves plain
	// HTTP to anyone who reaches the port.
	SecureMetrics bool
	// ProbeAddr serves /healthz and /readyz; "0" or empty turns them off.
	ProbeAddr string
}

// MetricsSecureUsage is the help of --metrics-secure, the same in both
// commands.
const MetricsSecureUsage = "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone"

// Apply writes the settings into m and leaves the rest of m as it is.
func (s Manager) Apply(m *manager.Options) {
	m.Metrics.BindAddress = s.MetricsAddr
	m.Metrics.SecureServing = s.SecureMetrics
	m.Metrics.FilterProvider = nil
	if s.SecureMetrics {
		m.Metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
		m.Metrics.TLSOpts = append(m.Metrics.TLSOpts, pki.ServerTLS)
	}
	m.HealthProbeBindAddress = s.ProbeAddr
	m.LeaderElection = s.LeaderElect
	m.LeaderElectionID = s.LeaderElectionID
	m.LeaderElectionNamespace = s.LeaderElectionNamespace
	// A replica that stops hands over at once instead of letting the others
	// wait out the lease.
	m.LeaderElectionReleaseOnCancel = true
}
