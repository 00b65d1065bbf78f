package commands

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cachetrim"
	"github.com/kubefledged/kube-fledged/internal/claim"
	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/controller/imagecache"
	"github.com/kubefledged/kube-fledged/internal/controller/preflight"
	"github.com/kubefledged/kube-fledged/internal/controller/startuptaint"
	"github.com/kubefledged/kube-fledged/internal/heldledger"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/jobwatch"
	"github.com/kubefledged/kube-fledged/internal/manageropts"
	"github.com/kubefledged/kube-fledged/internal/metrics"
	"github.com/kubefledged/kube-fledged/internal/plan"
	"github.com/kubefledged/kube-fledged/internal/podwatch"
	"github.com/kubefledged/kube-fledged/internal/webhook"
)

// ControllerOptions are the controller's flags. The original's flags keep
// their names and defaults.
type ControllerOptions struct {
	Deadline           cli.Duration
	RefreshEvery       cli.Duration
	PullPolicy         *cli.Enum
	ServiceAccountName string
	DeleteHostNetwork  bool
	// DeleteJobNamespace and DeleteJobServiceAccount are where and as
	// whom the delete Jobs run (jobs.Options.DeleteNamespace).
	DeleteJobNamespace      string
	DeleteJobServiceAccount string
	PriorityClassName       string
	// Retention is --job-retention-policy; zero deletes, the default.
	Retention     jobs.Retention
	CRISocketPath string
	HelperImage   string
	Kubeconfig    string
	Master        string

	// Manager holds the flags the operator shares.
	manageropts.Manager

	// Logging is zap's standard flags and the original's -v.
	*Logging
	QPS                 cli.PositiveInt
	Burst               cli.PositiveInt
	Workers             cli.PositiveInt
	MaxJobs             cli.PositiveInt
	MaxJobsPerNode      cli.PositiveInt
	JobStartTarget      cli.Duration
	StartupTaint        StartupTaintFlag
	StartupTaintTimeout cli.Duration
	// Granularity is --pull-job-granularity; zero is per node, the default.
	Granularity jobs.Granularity
	// PinImages is --pin-images: whether a cache that leaves spec.pin
	// unset pins.
	PinImages    bool
	InstallClaim ClaimFlag
	// LeaseDuration, RenewDeadline and RetryPeriod time both the leader
	// election among replicas and the install claim: a leader that cannot
	// renew within RenewDeadline stops, so on a control plane with a
	// single API server it must outlast the server's restarts.
	LeaseDuration, RenewDeadline, RetryPeriod cli.Duration

	JobCPURequest    cli.Quantity
	JobMemoryRequest cli.Quantity
	JobCPULimit      cli.Quantity
	JobMemoryLimit   cli.Quantity
	Webhook          webhook.Options

	// Warnings name the original's flags and environment that were given
	// but mean nothing here. They are printed once when the controller
	// starts, not where they are found, so that tests building options stay
	// quiet and a command refused for a bad flag prints its one error line.
	Warnings []string
}

// DefaultHelperImage is the image the Jobs run our helpers from, unless the
// flag or KUBEFLEDGED_IMAGE names another (the chart passes its own image).
const DefaultHelperImage = "ghcr.io/kubefledged/kubefledged:v0.11.0"

// originalImage matches the original kube-fledged's public images. It is the
// rule the chart ignores the original's image values by (the `ignore` of
// image.kubefledgedControllerRepository in helm-charts/kubefledged/aliases.yaml;
// a test keeps the two equal): those images cannot run our helpers, and Jobs
// pointed at them would fail on every node.
var originalImage = regexp.MustCompile(`(^|/)senthilrch/`)

// NewControllerOptions returns the defaults. Deployments written for the
// original may still set its environment; what cannot work here is dropped
// with a warning rather than left to fail in the Jobs.
func NewControllerOptions() *ControllerOptions {
	helper := DefaultHelperImage
	var warnings []string
	cri := os.Getenv("KUBEFLEDGED_CRI_CLIENT_IMAGE")
	if cri != "" && originalImage.MatchString(cri) {
		warnings = append(warnings, fmt.Sprintf("KUBEFLEDGED_CRI_CLIENT_IMAGE=%s is ignored: "+
			"the original kube-fledged's image cannot run this controller's Jobs; "+
			"remove it, or name this product's image in KUBEFLEDGED_IMAGE or --helper-image", cri))
		cri = ""
	}
	if v := os.Getenv("KUBEFLEDGED_IMAGE"); v != "" {
		helper = v
	} else if cri != "" {
		helper = cri
	}
	if os.Getenv("BUSYBOX_IMAGE") != "" {
		warnings = append(warnings, "BUSYBOX_IMAGE is ignored: the pull Jobs no longer run busybox; remove it")
	}
	ns := os.Getenv("KUBEFLEDGED_NAMESPACE")
	if ns == "" {
		ns = "kube-fledged"
	}
	return &ControllerOptions{
		Deadline:     cli.Duration{Value: 5 * time.Minute, Min: time.Second},
		RefreshEvery: cli.Duration{Value: 15 * time.Minute, Min: time.Second, ZeroOK: true},
		PullPolicy:   cli.NewEnum("IfNotPresent", "IfNotPresent", "Always"),
		HelperImage:  helper,
		// The controller's own namespace, which an install labels
		// privileged: the delete Jobs need a hostPath and root.
		DeleteJobNamespace: ns,
		Manager: manageropts.Manager{
			LeaderElect:             true,
			LeaderElectionID:        "kubefledged-controller.kubefledged.io",
			LeaderElectionNamespace: ns,
			MetricsAddr:             ":8080",
			SecureMetrics:           true,
			ProbeAddr:               ":8081",
		},
		Logging:        newLogging(),
		QPS:            cli.PositiveInt{Value: 100, Min: 1},
		Burst:          cli.PositiveInt{Value: 200, Min: 1},
		Workers:        cli.PositiveInt{Value: 4, Min: 1},
		MaxJobs:        cli.PositiveInt{Value: 100, Min: 1},
		MaxJobsPerNode: cli.PositiveInt{Value: 2, Min: 1},
		// Below 100ms a Job controller's single API write, and the
		// watch that reports it, would count as a queue.
		JobStartTarget:      cli.Duration{Value: time.Second, Min: 100 * time.Millisecond, ZeroOK: true},
		StartupTaintTimeout: cli.Duration{Value: 10 * time.Minute, Min: time.Second},
		InstallClaim:        ClaimFlag{Value: defaultClaim()},
		LeaseDuration:       cli.Duration{Value: claim.DefaultTimings.Duration, Min: time.Second},
		RenewDeadline:       cli.Duration{Value: claim.DefaultTimings.Renew, Min: time.Second},
		RetryPeriod:         cli.Duration{Value: claim.DefaultTimings.Retry, Min: 100 * time.Millisecond},
		Warnings:            warnings,
	}
}

// BindFlags registers the flags on fs.
func (o *ControllerOptions) BindFlags(fs *flag.FlagSet) {
	fs.Var(&o.Deadline, "image-pull-deadline-duration", "how long an operation's Jobs may run before unfinished ones are settled as failed")
	fs.Var(&o.RefreshEvery, "image-cache-refresh-frequency", "how often every cache is refreshed; 0s turns periodic refresh off")
	fs.Var(o.PullPolicy, "image-pull-policy", "pull policy of the pull Jobs: IfNotPresent or Always")
	fs.StringVar(&o.ServiceAccountName, "service-account-name", "", "ServiceAccount the pull Jobs run as in each cache's namespace, its token mounted unless it says otherwise "+
		"(default: the namespace's default ServiceAccount, no token mounted); the delete Jobs run as --delete-job-service-account")
	fs.BoolVar(&o.DeleteHostNetwork, "image-delete-job-host-network", false, "run the delete Jobs in the host network")
	fs.StringVar(&o.DeleteJobNamespace, "delete-job-namespace", o.DeleteJobNamespace, "namespace the delete Jobs run in, which must admit privileged pods "+
		"(default: the controller's, $KUBEFLEDGED_NAMESPACE); empty runs them in each cache's namespace, as the original did")
	fs.StringVar(&o.DeleteJobServiceAccount, "delete-job-service-account", "", "ServiceAccount the delete Jobs run as, in --delete-job-namespace, its token never mounted "+
		"(default: --service-account-name); on OpenShift it must be allowed the privileged SCC")
	fs.StringVar(&o.PriorityClassName, "job-priority-class-name", "", "PriorityClass of the Jobs' pods")
	fs.Var(cli.Choice(&o.Retention, jobs.ParseRetention), "job-retention-policy", "what happens to an operation's Jobs when it ends: delete or retain")
	fs.StringVar(&o.CRISocketPath, "cri-socket-path", "", "CRI socket on every node, overriding the runtime's default")
	fs.StringVar(&o.HelperImage, "helper-image", o.HelperImage, "our own image, run by the Jobs for their helpers")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	fs.StringVar(&o.Master, "master", "", "API server address, overriding the kubeconfig's")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader, so that only one replica creates Jobs")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "name of the leader election Lease")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
	fs.Var(&o.LeaseDuration, "leader-election-lease-duration", "how long a leader (of the replicas, and of the installs for --install-claim) "+
		"that stopped renewing keeps the lead before another may take it")
	fs.Var(&o.RenewDeadline, "leader-election-renew-deadline", "how long a leader keeps failing to renew before it stops; "+
		"where the control plane has one API server, make it longer than the server's restarts, or the controller restarts with it")
	fs.Var(&o.RetryPeriod, "leader-election-retry-period", "how often a leader renews, and a candidate tries to take the lead")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "address of the metrics endpoint; 0 turns it off")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics, manageropts.MetricsSecureUsage)
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "address of /healthz and /readyz; 0 turns them off")
	o.Logging.BindFlags(fs)
	o.Logging.bindVerbosity(fs)
	for _, g := range glogFlags {
		fs.Var(&ignoredFlag{name: g.name, isBool: g.isBool, warnings: &o.Warnings}, g.name, "ignored: the original's glog flag; use --zap-log-level")
	}
	fs.Var(&o.QPS, "kube-api-qps", "queries per second to the API server")
	fs.Var(&o.Burst, "kube-api-burst", "burst of queries to the API server")
	fs.Var(&o.Workers, "workers", "caches worked on at once")
	fs.Var(&o.MaxJobs, "max-concurrent-jobs", "image pulls and deletes in flight at once across all caches, shared fairly between them; a node Job counts one "+
		"(its pod pulls its images one at a time), or as many as its node's label kubefledged.io/parallel-image-pulls says")
	fs.Var(&o.MaxJobsPerNode, "max-concurrent-jobs-per-node", "image pulls and deletes in flight at once on one node, counted as for --max-concurrent-jobs")
	fs.Var(&o.JobStartTarget, "max-job-start-delay", "how long the cluster's Job controller may take to start a Job (its status.startTime) before fewer Jobs are let in flight "+
		"than --max-concurrent-jobs, so that its queue stays short and a new cache's Jobs do not wait behind a large one's; a node that joins gets its first Job at once, "+
		"under the caps; 0: the caps alone")
	fs.Var(&o.StartupTaint, "node-startup-taint", "KEY[:EFFECT] of the taint new nodes register with, e.g. kubefledged.io/caching:NoSchedule: "+
		"the pull Jobs tolerate it and the controller removes it once the node's images are cached (default: off)")
	fs.Var(&o.StartupTaintTimeout, "node-startup-taint-timeout", "how long after its creation a node is released from --node-startup-taint even if its images are not all cached")
	fs.Var(cli.Choice(&o.Granularity, jobs.ParseGranularity), "pull-job-granularity", "what one pull Job covers: node (every image of a node, one container each) or image (one image on one node)")
	fs.BoolVar(&o.PinImages, "pin-images", false, "pin the images of every ImageCache that does not set spec.pin on the nodes that hold them, "+
		"so that the kubelet's image garbage collection keeps them (containerd 1.7 or newer); the pin Jobs run like the delete Jobs")
	fs.Var(&o.InstallClaim, "install-claim", "NAMESPACE/NAME of the Lease every install of kube-fledged in a cluster contends for: "+
		"the install whose leader holds it works, any other stands by (pulls and deletes nothing) until it is free; empty turns the claim off")
	const every = " of every container of the Jobs: the helper installer, the delete, and each pull container, so a node Job's pod asks up to 32 times as much (default: "
	fs.Var(&o.JobCPURequest, "job-cpu-request", "CPU request"+every+"10m, 1m for a node Job's pull containers)")
	fs.Var(&o.JobMemoryRequest, "job-memory-request", "memory request"+every+"16Mi, 4Mi for a node Job's pull containers)")
	fs.Var(&o.JobCPULimit, "job-cpu-limit", "CPU limit"+every+"none); set it where a ResourceQuota or LimitRange demands limits.cpu")
	fs.Var(&o.JobMemoryLimit, "job-memory-limit", "memory limit"+every+"64Mi)")
	o.Webhook.BindFlags(fs)
}

// LeaderTimings are the leader election's and the claim's timings the
// flags set.
func (o *ControllerOptions) LeaderTimings() claim.Timings {
	return claim.Timings{Duration: o.LeaseDuration.Value, Renew: o.RenewDeadline.Value, Retry: o.RetryPeriod.Value}
}

// JobResources are the Jobs' requests and limits the flags set.
func (o *ControllerOptions) JobResources() jobs.Resources {
	return jobs.Resources{CPURequest: o.JobCPURequest.Value, MemoryRequest: o.JobMemoryRequest.Value,
		CPULimit: o.JobCPULimit.Value, MemoryLimit: o.JobMemoryLimit.Value}
}

// StartupTaintFlag is --node-startup-taint, parsed as it is given so that a
// bad key or effect stops the controller at once with one line, rather than
// when the first node joins. Empty is off.
type StartupTaintFlag struct{ Value *plan.StartupTaint }

func (f *StartupTaintFlag) String() string { return f.Value.String() }

// Set parses KEY[:EFFECT].
func (f *StartupTaintFlag) Set(s string) error {
	t, err := plan.ParseStartupTaint(s)
	if err != nil {
		return err
	}
	f.Value = t
	return nil
}

// ClaimFlag is --install-claim, parsed as it is given so that a bad value
// stops the controller at once.
type ClaimFlag struct{ Value *claim.Place }

func (f *ClaimFlag) String() string { return f.Value.String() }

// Set parses NAMESPACE/NAME; empty is off.
func (f *ClaimFlag) Set(s string) error {
	p, err := claim.Parse(s)
	if err != nil {
		return err
	}
	f.Value = p
	return nil
}

func defaultClaim() *claim.Place {
	p, err := claim.Parse(claim.Default)
	if err != nil {
		panic(err)
	}
	return p
}

// glogFlags are the flags glog put on the original controller's command line,
// which Deployments written for it may still pass: glog v1.0.0's, linked by
// v0.10.0, and log_link and logbuflevel, added by the glog v1.1.0 of its
// develop branch. -v is not here: it keeps a meaning (Verbosity). klog's
// additions (-log_file, -skip_headers, -add_dir_header, ...) are not either:
// the original never called klog.InitFlags, so its binary refused them too.
var glogFlags = []struct {
	name   string
	isBool bool
}{
	{"logtostderr", true},
	{"alsologtostderr", true},
	{"stderrthreshold", false},
	{"vmodule", false},
	{"log_backtrace_at", false},
	{"log_dir", false},
	{"log_link", false},
	{"logbuflevel", false},
}

// ignoredFlag accepts a glog flag of the original that no longer does
// anything, so that old Deployment args still start the controller under
// strict parsing, and records one warning however often the flag is given.
// Boolean ones still refuse a value that is not a boolean, as glog did.
type ignoredFlag struct {
	name     string
	isBool   bool
	warned   bool
	warnings *[]string
}

func (f *ignoredFlag) String() string { return "" }

// IsBoolFlag lets a boolean one be given bare, as --logtostderr.
func (f *ignoredFlag) IsBoolFlag() bool { return f.isBool }

func (f *ignoredFlag) Set(s string) error {
	if f.isBool {
		if _, err := strconv.ParseBool(s); err != nil {
			return errors.New("use true or false")
		}
	}
	if !f.warned {
		f.warned = true
		*f.warnings = append(*f.warnings, fmt.Sprintf("--%s is ignored: it is a glog flag of the original kube-fledged; "+
			"logs always go to stderr, use --zap-log-level (debug, info or error) to choose the level", f.name))
	}
	return nil
}

// controllerGCPercent is the controller's GOGC when the environment sets
// none. Its heap is mostly informer caches, which live long; Go's default of
// 100 lets as much garbage again pile up before each collection, which with
// 8,000 Jobs in flight was a third of the peak resident set. The price is
// more frequent collections: see docs/benchmarks.md for both figures.
const controllerGCPercent = 50

// setControllerGC sets controllerGCPercent unless GOGC is set, which wins.
func setControllerGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(controllerGCPercent)
	}
}

func runController(args []string, stdout, stderr io.Writer) error {
	o, err := controllerOptions(args, stderr)
	if err != nil {
		return err
	}
	o.Logging.Setup(stderr)
	setControllerGC()
	cfg, err := restConfig(o.Kubeconfig, o.Master)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS.Value), o.Burst.Value
	return RunController(ctrl.SetupSignalHandler(), cfg, o)
}

// controllerOptions is runController up to the point where it needs a
// cluster, so that tests can see what it accepts and what it warns about. The
// warnings come only once everything is accepted: a refused command prints
// its one error line and nothing else.
func controllerOptions(args []string, stderr io.Writer) (*ControllerOptions, error) {
	o := NewControllerOptions()
	fs := cli.NewFlagSet("controller")
	o.BindFlags(fs)
	if err := parseOrHelp(fs, args, stderr); err != nil {
		return nil, err
	}
	o.Logging.parsed(fs)
	if err := jobs.ValidateDeleteNamespaceName(o.DeleteJobNamespace); err != nil {
		return nil, err
	}
	if err := o.JobResources().Validate(); err != nil {
		return nil, err
	}
	if err := o.LeaderTimings().Validate(); err != nil {
		return nil, err
	}
	if o.Webhook.Enable {
		if err := o.Webhook.Validate(); err != nil {
			return nil, err
		}
	}
	for _, w := range o.Warnings {
		fmt.Fprintf(stderr, "kubefledged controller: warning: %s\n", w)
	}
	return o, nil
}

// Scheme holds the types the controller reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha2.AddToScheme(s)
	return s
}

// RunController runs the controller until ctx ends. Tests call it in-process.
func RunController(ctx context.Context, cfg *rest.Config, o *ControllerOptions) error {
	scheme := Scheme()
	// Only our own Jobs and their pods are cached: on a large cluster the
	// rest would cost memory for nothing.
	ours := labels.SelectorFromSet(labels.Set{jobs.LabelApp: jobs.LabelAppValue, jobs.LabelManager: jobs.LabelManagerValue})
	var webhookServer ctrlwebhook.Server
	if o.Webhook.Enable {
		// Every replica serves admission, leader or not.
		webhookServer = o.Webhook.Server()
	}
	mopts := ctrl.Options{
		WebhookServer: webhookServer,
		Scheme:        scheme,
		// One manager per process in production; tests start several in
		// turn, which controller-runtime would refuse by name otherwise.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Label: ours, Transform: cachetrim.Pod},
			&corev1.Node{}: {Transform: cachetrim.Node},
		}},
	}
	o.Manager.Apply(&mopts)
	lt := o.LeaderTimings()
	mopts.LeaseDuration, mopts.RenewDeadline, mopts.RetryPeriod = &lt.Duration, &lt.Renew, &lt.Retry
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := checkDeleteNamespace(ctx, direct, o.DeleteJobNamespace); err != nil {
		return err
	}
	// The Jobs are watched apart from the manager's cache, which could
	// only hold them whole (jobwatch).
	jw, err := jobWatch(cfg, ours)
	if err != nil {
		return err
	}
	if err := mgr.Add(jw); err != nil {
		return err
	}
	// Every pod's images, for fromPods; its informers start when a cache
	// first asks.
	pw, err := podWatch(cfg)
	if err != nil {
		return err
	}
	if err := mgr.Add(pw); err != nil {
		return err
	}
	clean := preflight.New(direct)
	if place := o.InstallClaim.Value; place != nil {
		c, err := installClaim(cfg, mgr, *place, o.LeaderElectionNamespace, o.LeaderTimings())
		if err != nil {
			return err
		}
		// Nothing is deleted or pulled before this install holds the claim.
		clean.After = c.Held()
	}
	if err := mgr.Add(clean); err != nil {
		return err
	}
	r := &imagecache.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Jobs:      jw,
		Pods:      pw,
		Recorder:  mgr.GetEventRecorderFor("kubefledged-controller"),
		Ready:     clean.Done(),
		Config: imagecache.Config{
			Deadline:     o.Deadline.Value,
			RefreshEvery: o.RefreshEvery.Value,
			Retention:    o.Retention,
			AlwaysPull:   o.PullPolicy.Value == string(corev1.PullAlways),
			Jobs: jobs.Options{
				HelperImage:              o.HelperImage,
				PullPolicy:               corev1.PullPolicy(o.PullPolicy.Value),
				ServiceAccountName:       o.ServiceAccountName,
				PriorityClassName:        o.PriorityClassName,
				DeleteHostNetwork:        o.DeleteHostNetwork,
				DeleteNamespace:          o.DeleteJobNamespace,
				DeleteServiceAccountName: o.DeleteJobServiceAccount,
				CRISocketPath:            o.CRISocketPath,
				ActiveDeadline:           3600,
				Resources:                o.JobResources(),
			},
			MaxConcurrentReconciles: o.Workers.Value,
			MaxJobs:                 o.MaxJobs.Value,
			MaxJobsPerNode:          o.MaxJobsPerNode.Value,
			JobStartTarget:          o.JobStartTarget.Value,
			Granularity:             o.Granularity,
			PinImages:               o.PinImages,
		},
	}
	if taint := o.StartupTaint.Value; taint != nil {
		r.Config.StartupTaint = taint
		r.Config.Jobs.PullTolerations = []corev1.Toleration{taint.Toleration()}
		// The ImageCache reconciler writes the ledger; the startup-taint
		// controller and the held-nodes metrics read it.
		r.Held = heldledger.New()
		st := startuptaint.New(mgr.GetClient(), mgr.GetEventRecorderFor("kubefledged-controller"), taint, o.StartupTaintTimeout.Value, r.Held)
		if err := st.SetupWithManager(mgr); err != nil {
			return err
		}
		metrics.RegisterHeldNodes(st.Held)
	} else {
		metrics.RegisterHeldNodes(nil)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	metrics.RegisterCaches(mgr.GetClient())
	metrics.RegisterBuildInfo(Version, Revision)
	if err := webhook.Setup(mgr, o.Webhook); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("controller").Info("starting", "jobRetentionPolicy", o.Retention.String(), "pullJobGranularity", o.Granularity.String(),
		"imagePullDeadlineDuration", o.Deadline.Value.String(), "imageCacheRefreshFrequency", o.RefreshEvery.Value.String(),
		"nodeStartupTaint", o.StartupTaint.String(), "nodeStartupTaintTimeout", o.StartupTaintTimeout.Value.String(),
		"installClaim", o.InstallClaim.String(), "pinImages", o.PinImages,
		"maxConcurrentJobs", o.MaxJobs.Value, "maxConcurrentJobsPerNode", o.MaxJobsPerNode.Value, "maxJobStartDelay", o.JobStartTarget.Value.String())
	return mgr.Start(ctx)
}

// installClaim adds the cluster-wide claim to mgr. Its identity names the
// install by its namespace, which is what a user of the other install needs
// to find it.
func installClaim(cfg *rest.Config, mgr ctrl.Manager, place claim.Place, namespace string, timings claim.Timings) (*claim.Claim, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	identity := fmt.Sprintf("%s/%s_%s", namespace, host, uuid.NewUUID())
	c := claim.New(place, identity, cs, mgr.GetEventRecorderFor("kubefledged-controller"))
	c.StandingBy = metrics.SetStandingBy
	c.Timings = timings
	return c, mgr.Add(c)
}

// jobWatch watches the Jobs that selector picks.
func jobWatch(cfg *rest.Config, selector labels.Selector) (*jobwatch.Watch, error) {
	cs, err := protobufClient(cfg)
	if err != nil {
		return nil, err
	}
	return jobwatch.New(cs, selector), nil
}

// podWatch watches every pod, workload and namespace, for fromPods and
// fromWorkloads.
func podWatch(cfg *rest.Config) (*podwatch.Watch, error) {
	cs, err := protobufClient(cfg)
	if err != nil {
		return nil, err
	}
	return podwatch.New(cs), nil
}

// protobufClient decodes built-in types from protobuf, as the manager's
// cache does: informers of our own list far more than they keep.
func protobufClient(cfg *rest.Config) (*kubernetes.Clientset, error) {
	pb := rest.CopyConfig(cfg)
	pb.ContentType = runtime.ContentTypeProtobuf
	pb.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(pb)
}
