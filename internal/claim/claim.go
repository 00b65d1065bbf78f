// Package claim keeps a cluster to one working install of kube-fledged. Each
// install elects its leader in its own namespace, so two installs (a second
// Helm release, a second KubeFledged CR) would both pull every image, and
// each would delete the other's Jobs at start-up. The leader of an install
// therefore also contends for a Lease in one well-known place that every
// install names alike; the install whose leader holds it works, the others
// stand by, saying so, until it is free.
package claim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Default is where every install looks unless told otherwise: kube-system
// exists on every cluster, and installs in different namespaces must find
// the same Lease.
const Default = "kube-system/kubefledged-controller"

// Reasons of the Events on the claim's Lease.
const (
	ReasonStandingBy = "InstallStandingBy"
	ReasonClaimed    = "InstallClaimed"
)

// Place is the Lease's namespace and name.
type Place struct{ Namespace, Name string }

// Parse reads NAMESPACE/NAME; empty is no claim.
func Parse(s string) (*Place, error) {
	if s == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("%q: want NAMESPACE/NAME of a Lease", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("%q: namespace %q: %s", s, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%q: name %q: %s", s, name, strings.Join(errs, "; "))
	}
	return &Place{Namespace: ns, Name: name}, nil
}

func (p *Place) String() string {
	if p == nil {
		return ""
	}
	return p.Namespace + "/" + p.Name
}

// Timings of the claim. A holder that dies lets another install take over
// after Duration; one that cannot renew within Renew stops working before
// another could take over.
type Timings struct{ Duration, Renew, Retry time.Duration }

// DefaultTimings are client-go's and controller-runtime's defaults for
// leader election, which the claim is.
var DefaultTimings = Timings{Duration: 15 * time.Second, Renew: 10 * time.Second, Retry: 2 * time.Second}

// Validate says, in the flags' words, what client-go's leader election
// would refuse only once the process had started: a lease no longer than
// its renew deadline, or a renew deadline that leaves no room for a retry.
func (t Timings) Validate() error {
	if t.Duration <= t.Renew {
		return fmt.Errorf("--leader-election-lease-duration (%s) must be longer than --leader-election-renew-deadline (%s)", t.Duration, t.Renew)
	}
	if float64(t.Renew) <= leaderelection.JitterFactor*float64(t.Retry) {
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be longer than %.1f × --leader-election-retry-period (%s)",
			t.Renew, leaderelection.JitterFactor, t.Retry)
	}
	return nil
}

// Claim is a manager Runnable that needs leader election: only the leader of
// an install contends. Held is closed once the install holds the claim;
// losing it afterwards ends Start with an error, which stops the process as
// losing leadership does, so that it never works without the claim.
type Claim struct {
	Place    Place
	Identity string // who this install is, as others will read it: its namespace and pod
	Client   kubernetes.Interface
	Recorder record.EventRecorder
	Timings  Timings
	// StandingBy is told whether another install holds the claim, for the
	// metric.
	StandingBy func(bool)

	held     chan struct{}
	heldOnce sync.Once
}

// New returns a Claim of place for identity.
func New(place Place, identity string, cs kubernetes.Interface, rec record.EventRecorder) *Claim {
	return &Claim{Place: place, Identity: identity, Client: cs, Recorder: rec, Timings: DefaultTimings,
		StandingBy: func(bool) {}, held: make(chan struct{})}
}

// Held is closed once this install holds the claim.
func (c *Claim) Held() <-chan struct{} { return c.held }

// NeedLeaderElection: replicas of one install elect their leader first.
func (c *Claim) NeedLeaderElection() bool { return true }

// ErrLost is returned when the claim is lost while this install worked.
var ErrLost = errors.New("lost the cluster-wide install claim; stopping so that a restart stands by")

// Start contends until ctx ends; it returns ErrLost if the claim was held
// and then lost while ctx was still running.
func (c *Claim) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("claim")
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: c.Place.Namespace, Name: c.Place.Name},
		Client:     c.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.Identity},
	}
	var lost bool
	var mu sync.Mutex // OnNewLeader runs in goroutines of its own
	var standing string
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.Timings.Duration,
		RenewDeadline:   c.Timings.Renew,
		RetryPeriod:     c.Timings.Retry,
		ReleaseOnCancel: true,
		Name:            c.Place.String(),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				c.StandingBy(false)
				logger.Info("this install holds the cluster-wide claim; working", "claim", c.Place.String())
				c.event(corev1.EventTypeNormal, ReasonClaimed, "%s works in this cluster", c.Identity)
				c.heldOnce.Do(func() { close(c.held) })
			},
			OnStoppedLeading: func() {
				select {
				case <-c.held:
					lost = ctx.Err() == nil
				default:
				}
			},
			OnNewLeader: func(holder string) {
				mu.Lock()
				defer mu.Unlock()
				// A released claim reads as an empty holder: nothing to say.
				if holder == "" || holder == c.Identity || holder == standing {
					return
				}
				standing = holder
				c.StandingBy(true)
				logger.Info("another kube-fledged install works in this cluster; this one stands by, pulling and deleting nothing, until it stops",
					"claim", c.Place.String(), "holder", holder)
				c.event(corev1.EventTypeWarning, ReasonStandingBy,
					"%s stands by: %s already works in this cluster (one install per cluster; uninstall one of them)", c.Identity, holder)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("cluster-wide install claim %s: %w", c.Place.String(), err)
	}
	le.Run(ctx)
	if lost {
		return ErrLost
	}
	return nil
}

// event records on the Lease, the one object every install can find; the
// log line says the same in the install's own namespace.
func (c *Claim) event(kind, reason, format string, args ...any) {
	if c.Recorder == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Namespace: c.Place.Namespace, Name: c.Place.Name}
	c.Recorder.Eventf(ref, kind, reason, format, args...)
}
