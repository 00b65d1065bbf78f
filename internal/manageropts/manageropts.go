// Package manageropts holds the manager settings that the controller and the
// operator both take from their command lines, so that the two processes
// serve metrics and probes and hand over leadership the same way.
package manageropts

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"
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
	// ProbeAddr serves /healthz and /readyz; "0" or empty turns them off.
	ProbeAddr string
}

// Apply writes the settings into m and leaves the rest of m as it is.
func (s Manager) Apply(m *manager.Options) {
	m.Metrics.BindAddress = s.MetricsAddr
	m.HealthProbeBindAddress = s.ProbeAddr
	m.LeaderElection = s.LeaderElect
	m.LeaderElectionID = s.LeaderElectionID
	m.LeaderElectionNamespace = s.LeaderElectionNamespace
	// A replica that stops hands over at once instead of letting the others
	// wait out the lease.
	m.LeaderElectionReleaseOnCancel = true
}
