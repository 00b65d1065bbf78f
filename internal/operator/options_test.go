package operator

import (
	"strings"
	"testing"
	"time"

	"github.com/kubefledged/kube-fledged/internal/cli"
)

func TestBindFlagsDefaults(t *testing.T) {
	t.Setenv(NamespaceEnv, "kube-fledged-system")
	var o Options
	fs := cli.NewFlagSet("operator")
	o.BindFlags(fs)
	if err := cli.Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	want := Options{
		WatchesFile:             "watches.yaml",
		Namespace:               "kube-fledged-system",
		LeaderElect:             true,
		LeaderElectionID:        DefaultLeaderElectionID,
		MetricsAddr:             ":8080",
		SecureMetrics:           true,
		ProbeAddr:               ":8081",
		MaxConcurrentReconciles: 1,
		ReconcilePeriod:         time.Minute,
		MaxReleaseHistory:       10,
	}
	if o != want {
		t.Errorf("defaults:\n got %+v\nwant %+v", o, want)
	}
}

func TestBindFlagsParse(t *testing.T) {
	var o Options
	fs := cli.NewFlagSet("operator")
	o.BindFlags(fs)
	err := cli.Parse(fs, []string{
		"--watches-file=/opt/watches.yaml", "--namespace=ops", "--leader-elect=false", "--leader-election-id=x",
		"--leader-election-namespace=ops", "--metrics-bind-address=0", "--metrics-secure=false", "--health-probe-bind-address=:9000",
		"--max-concurrent-reconciles=3", "--reconcile-period=0s", "--max-release-history=0",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{
		WatchesFile: "/opt/watches.yaml", Namespace: "ops", LeaderElectionID: "x", LeaderElectionNamespace: "ops",
		MetricsAddr: "0", ProbeAddr: ":9000", MaxConcurrentReconciles: 3,
	}
	if o != want {
		t.Errorf("parsed:\n got %+v\nwant %+v", o, want)
	}
}

func TestBindFlagsRefusesBadValues(t *testing.T) {
	for _, tt := range []struct{ arg, want string }{
		{"--max-concurrent-reconciles=0", "too small"},
		{"--max-concurrent-reconciles=many", "not a whole number"},
		{"--reconcile-period=-1m", "negative"},
		{"--reconcile-period=10ms", "too short"},
		{"--reconcile-period=1", "not a duration"},
		{"--max-release-history=-1", "too small"},
		{"--watch-file=x", "not defined"},
	} {
		var o Options
		fs := cli.NewFlagSet("operator")
		o.BindFlags(fs)
		err := cli.Parse(fs, []string{tt.arg})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.arg, err, tt.want)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var o Options
	fs := cli.NewFlagSet("operator")
	o.BindFlags(fs)
	var b strings.Builder
	cli.Usage(fs, &b)
	for _, f := range []string{"watches-file", "namespace", "leader-elect", "leader-election-id", "leader-election-namespace",
		"metrics-bind-address", "health-probe-bind-address", "max-concurrent-reconciles", "reconcile-period", "max-release-history"} {
		if !strings.Contains(b.String(), "-"+f) {
			t.Errorf("usage lacks --%s:\n%s", f, b.String())
		}
	}
	if !strings.Contains(b.String(), "(default 1m0s)") {
		t.Errorf("usage does not show the reconcile period's default:\n%s", b.String())
	}
}

// The operator must know its own namespace before it installs anything: an
// operator that took "" for it would refuse every KubeFledged, or, worse,
// one that took any namespace would install from any.
func TestValidateNamespace(t *testing.T) {
	for _, tt := range []struct{ ns, want string }{
		{"", "the operator's namespace is unknown: set --namespace (or $POD_NAMESPACE)"},
		{"Team_A", `--namespace "Team_A": a lowercase RFC 1123 label`},
		{"kube-fledged-system", ""},
	} {
		o := Options{Namespace: tt.ns}
		o.setDefaults()
		err := o.validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("namespace %q: %v", tt.ns, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("namespace %q: got %v, want an error with %q", tt.ns, err, tt.want)
		}
	}
}
