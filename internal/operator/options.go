// Package operator runs the KubeFledged operator: a controller-runtime manager
// with one helm-operator-plugins reconciler per entry of watches.yaml, each
// installing the kube-fledged chart for the custom resources of its kind.
package operator

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/manageropts"
)

// Options configure Run. BindFlags fills them from the command line and sets
// the defaults; a zero field that Run cannot work with gets the same default.
type Options struct {
	// WatchesFile maps kinds to charts. Relative chart paths in it are taken
	// relative to the file, so the operator runs from any directory.
	WatchesFile string

	// Namespace is the one the operator runs in: it installs kube-fledged
	// only from a KubeFledged there. Under OLM, the edit and admin roles of
	// every namespace in the OperatorGroup's scope may write KubeFledged
	// (OLM aggregates the owned CRDs' verbs into them), and a KubeFledged's
	// values decide what runs as root on every node; the operator's own
	// namespace is the admin's. Any other KubeFledged is refused in its
	// status (see ownNamespace).
	Namespace string

	// LeaderElect makes one of several operator replicas the active one.
	LeaderElect bool
	// LeaderElectionID names the Lease; replicas that share it elect together.
	LeaderElectionID string
	// LeaderElectionNamespace holds the Lease; empty means the pod's own
	// namespace (required when running outside the cluster with LeaderElect).
	LeaderElectionNamespace string

	// MetricsAddr serves Prometheus metrics; "0" turns them off.
	MetricsAddr string
	// SecureMetrics serves them over HTTPS behind the API server's
	// authentication and authorization (manageropts.Manager).
	SecureMetrics bool
	// ProbeAddr serves /healthz and /readyz; "0" or empty turns them off.
	ProbeAddr string

	// MaxConcurrentReconciles is the default number of custom resources
	// reconciled at once per watch; a watch's own setting wins.
	MaxConcurrentReconciles int
	// ReconcilePeriod re-checks every release this often even without events,
	// repairing drift that dependent watches missed; 0 turns it off. A
	// watch's own setting wins.
	ReconcilePeriod time.Duration
	// MaxReleaseHistory bounds the release revisions Helm keeps per custom
	// resource; 0 keeps all.
	MaxReleaseHistory int
}

// Defaults of the operator's flags.
const (
	DefaultWatchesFile             = "watches.yaml"
	DefaultLeaderElectionID        = "kubefledged-operator.kubefledged.io"
	DefaultMetricsAddr             = ":8080"
	DefaultProbeAddr               = ":8081"
	DefaultMaxConcurrentReconciles = 1
	DefaultReconcilePeriod         = time.Minute
	DefaultMaxReleaseHistory       = 10
)

// NamespaceEnv names the variable --namespace defaults to; the operator's
// Deployment sets it from the downward API.
const NamespaceEnv = "POD_NAMESPACE"

// BindFlags registers the operator's flags on fs, writing into o, and sets
// o to the defaults. Parse fs with cli.Parse so bad values are refused.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.WatchesFile, "watches-file", DefaultWatchesFile,
		"watches file mapping custom resource kinds to Helm charts; chart paths are relative to it")
	fs.StringVar(&o.Namespace, "namespace", os.Getenv(NamespaceEnv),
		"namespace the operator runs in: it installs kube-fledged only from a KubeFledged there, and refuses any other in its status (default: $"+NamespaceEnv+")")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true,
		"elect one active operator among the replicas")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", DefaultLeaderElectionID,
		"name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"namespace of the leader election Lease (default: the pod's namespace; needed outside a cluster)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", DefaultMetricsAddr,
		"address of the Prometheus metrics endpoint; 0 turns it off")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", true, manageropts.MetricsSecureUsage)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", DefaultProbeAddr,
		"address of the /healthz and /readyz endpoints; 0 turns them off")

	o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	fs.Var(&positiveIntInto{v: cli.PositiveInt{Value: o.MaxConcurrentReconciles, Min: 1}, dst: &o.MaxConcurrentReconciles},
		"max-concurrent-reconciles", "custom resources reconciled at once per watch (1 or more)")
	o.ReconcilePeriod = DefaultReconcilePeriod
	fs.Var(&durationInto{v: cli.Duration{Value: o.ReconcilePeriod, Min: time.Second, ZeroOK: true}, dst: &o.ReconcilePeriod},
		"reconcile-period", "re-check every release this often even without changes; 0s turns it off")
	o.MaxReleaseHistory = DefaultMaxReleaseHistory
	fs.Var(&positiveIntInto{v: cli.PositiveInt{Value: o.MaxReleaseHistory, Min: 0}, dst: &o.MaxReleaseHistory},
		"max-release-history", "release revisions Helm keeps per custom resource; 0 keeps all")
}

// setDefaults fills what a caller that skipped BindFlags left at zero.
func (o *Options) setDefaults() {
	if o.WatchesFile == "" {
		o.WatchesFile = DefaultWatchesFile
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.MaxConcurrentReconciles < 1 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
}

// manager is the part of o that the controller's flags share. The fields
// stay flat in Options because callers build Options as a literal.
func (o *Options) manager() manageropts.Manager {
	return manageropts.Manager{
		LeaderElect:             o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		MetricsAddr:             o.MetricsAddr,
		SecureMetrics:           o.SecureMetrics,
		ProbeAddr:               o.ProbeAddr,
	}
}

func (o *Options) validate() error {
	if o.Namespace == "" {
		return fmt.Errorf("the operator's namespace is unknown: set --namespace (or $%s); it installs kube-fledged only from a KubeFledged there", NamespaceEnv)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if o.ReconcilePeriod < 0 {
		return fmt.Errorf("reconcile period %s is negative", o.ReconcilePeriod)
	}
	if o.MaxReleaseHistory < 0 {
		return fmt.Errorf("max release history %d is negative", o.MaxReleaseHistory)
	}
	return nil
}

// durationInto lets a strict cli.Duration write into a plain Options field.
type durationInto struct {
	v   cli.Duration
	dst *time.Duration
}

func (d *durationInto) String() string {
	if d == nil || d.dst == nil {
		return ""
	}
	return d.dst.String()
}

func (d *durationInto) Set(s string) error {
	if err := d.v.Set(s); err != nil {
		return err
	}
	*d.dst = d.v.Value
	return nil
}

// positiveIntInto lets a strict cli.PositiveInt write into a plain field.
type positiveIntInto struct {
	v   cli.PositiveInt
	dst *int
}

func (p *positiveIntInto) String() string {
	if p == nil || p.dst == nil {
		return ""
	}
	return fmt.Sprint(*p.dst)
}

func (p *positiveIntInto) Set(s string) error {
	if err := p.v.Set(s); err != nil {
		return err
	}
	*p.dst = p.v.Value
	return nil
}
