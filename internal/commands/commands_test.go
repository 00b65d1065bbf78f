package commands

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/claim"
	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/operator"
)

func TestMainRefusesBadInput(t *testing.T) {
	cases := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{args: []string{"controller", "--job-retention-policy=keep"}, wantCode: 1,
			wantErr: `kubefledged controller: invalid value "keep" for flag --job-retention-policy: "keep" is not allowed: use one of delete, retain`},
		{args: []string{"controller", "--image-pull-policy=Never"}, wantCode: 1, wantErr: "use one of IfNotPresent, Always"},
		{args: []string{"controller", "--image-cache-refresh-frequency=-5m"}, wantCode: 1, wantErr: "is negative"},
		{args: []string{"controller", "--max-concurrent-jobs=0"}, wantCode: 1, wantErr: "--max-concurrent-jobs: 0 is too small"},
		{args: []string{"controller", "--max-job-start-delay=50ms"}, wantCode: 1,
			wantErr: `invalid value "50ms" for flag --max-job-start-delay: "50ms" is too short: use 0s (off) or at least 100ms`},
		{args: []string{"controller", "--node-startup-taint=kubefledged.io/caching:NoScheduled"}, wantCode: 1,
			wantErr: `kubefledged controller: invalid value "kubefledged.io/caching:NoScheduled" for flag --node-startup-taint: "kubefledged.io/caching:NoScheduled": the effect "NoScheduled" is not one of NoSchedule, PreferNoSchedule, NoExecute`},
		{args: []string{"controller", "--node-startup-taint=kubefledged.io/caching=true:NoSchedule"}, wantCode: 1,
			wantErr: "has a value: give KEY[:EFFECT] only"},
		{args: []string{"controller", "--node-startup-taint=kubefledged io/caching"}, wantCode: 1, wantErr: "is not a valid taint key"},
		{args: []string{"controller", "--node-startup-taint-timeout=0s"}, wantCode: 1,
			wantErr: `invalid value "0s" for flag --node-startup-taint-timeout: "0s" is too short: use at least 1s`},
		{args: []string{"controller", "--node-startup-taint-timeout=ten"}, wantCode: 1, wantErr: "is not a duration"},
		{args: []string{"controller", "--install-claim=kubefledged"}, wantCode: 1,
			wantErr: `invalid value "kubefledged" for flag --install-claim: "kubefledged": want NAMESPACE/NAME of a Lease`},
		{args: []string{"controller", "--no-such-flag"}, wantCode: 1, wantErr: "flag provided but not defined: --no-such-flag"},
		{args: []string{"controller", "--leader-election-renew-deadline=20s"}, wantCode: 1,
			wantErr: "kubefledged controller: --leader-election-lease-duration (15s) must be longer than --leader-election-renew-deadline (20s)"},
		{args: []string{"controller", "--leader-election-retry-period=9s"}, wantCode: 1,
			wantErr: "--leader-election-renew-deadline (10s) must be longer than 1.2 × --leader-election-retry-period (9s)"},
		{args: []string{"controller", "--leader-election-lease-duration=0s"}, wantCode: 1, wantErr: `"0s" is too short: use at least 1s`},
		{args: []string{"controller", "--delete-job-namespace=Kube_Fledged"}, wantCode: 1,
			wantErr: `kubefledged controller: --delete-job-namespace "Kube_Fledged": a lowercase RFC 1123 label`},
		{args: []string{"controller", "--job-cpu-limit=a lot"}, wantCode: 1,
			wantErr: `invalid value "a lot" for flag --job-cpu-limit: "a lot" is not a resource quantity`},
		{args: []string{"controller", "--job-cpu-request=200m", "--job-cpu-limit=100m"}, wantCode: 1,
			wantErr: "kubefledged controller: --job-cpu-request=200m is above --job-cpu-limit=100m: a container's request may not exceed its limit"},
		{args: []string{"controller", "--job-memory-limit=0"}, wantCode: 1, wantErr: "--job-memory-limit=0 is not above zero"},
		// The original's ignored flags do not let other unknown ones through,
		// and their warnings do not come before the error.
		{args: []string{"controller", "--logtostderr", "--stderrthreshold=INFO", "--no-such-flag"}, wantCode: 1,
			wantErr: "kubefledged controller: flag provided but not defined: --no-such-flag"},
		{args: []string{"controller", "--logtostderr=maybe"}, wantCode: 1,
			wantErr: `invalid boolean value "maybe" for --logtostderr: use true or false`},
		{args: []string{"controller", "--stderrthreshold"}, wantCode: 1, wantErr: "flag needs an argument: --stderrthreshold"},
		{args: []string{"controller", "--v=2", "-vmodule"}, wantCode: 1, wantErr: "flag needs an argument: --vmodule"},
		{args: []string{"controller", "-log_dir"}, wantCode: 1, wantErr: "flag needs an argument: --log_dir"},
		// klog's additions were never flags of the original's binary.
		{args: []string{"controller", "-log_file=/tmp/kubefledged.log"}, wantCode: 1,
			wantErr: "flag provided but not defined: --log_file"},
		{args: []string{"operator", "--no-such-flag"}, wantCode: 1, wantErr: "flag provided but not defined: --no-such-flag"},
		{args: []string{"cri-rmi"}, wantCode: 1, wantErr: "--endpoint and --image are required"},
		{args: []string{"pin", "--endpoint=unix:///run/containerd/containerd.sock", "--image=nginx"}, wantCode: 1,
			wantErr: "--endpoint, --owner and at least one --image are required"},
		{args: []string{"unpin", "--endpoint=unix:///x.sock", "--owner=u", "--image="}, wantCode: 1,
			wantErr: `invalid value "" for flag --image: empty value`},
		{args: []string{"check"}, wantCode: 1, wantErr: "--namespace and --selector are required"},
		{args: []string{"check", "--namespace=x", "--selector=a=b", "--health-port=0"}, wantCode: 1, wantErr: "--health-port: 0 is not a port"},
		{args: []string{"check", "--timeout=soon"}, wantCode: 1, wantErr: "--timeout"},
		{args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate"`},
		{args: []string{"controller", "--help"}, wantCode: 0, wantErr: "job-retention-policy"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var out, errb bytes.Buffer
			g.Expect(Main(c.args, &out, &errb)).To(Equal(c.wantCode))
			g.Expect(errb.String()).To(ContainSubstring(c.wantErr))
			if c.wantCode == 1 {
				g.Expect(strings.Count(strings.TrimSpace(errb.String()), "\n")).To(BeZero(), "one line")
			}
		})
	}
}

// TestChartArgsParse: every controller Deployment the chart renders (the
// golden files cover every toggle) passes flags the controller accepts;
// strict parsing would otherwise crash the pods at start-up.
func TestChartArgsParse(t *testing.T) {
	g := NewWithT(t)
	// The chart sets it from the downward API.
	t.Setenv("KUBEFLEDGED_NAMESPACE", "kube-fledged")
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "golden", "testdata", "*.golden"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(raw), "\n---") {
			if !strings.Contains(doc, "kind: Deployment") {
				continue
			}
			d := &appsv1.Deployment{}
			g.Expect(yaml.Unmarshal([]byte(doc), d)).To(Succeed(), f)
			for _, c := range d.Spec.Template.Spec.Containers {
				if len(c.Args) == 0 || c.Args[0] != "controller" {
					continue
				}
				o := NewControllerOptions()
				fs := cli.NewFlagSet("controller")
				o.BindFlags(fs)
				g.Expect(cli.Parse(fs, c.Args[1:])).To(Succeed(), "%s: %v", f, c.Args)
				if o.Webhook.Enable {
					g.Expect(o.Webhook.Validate()).To(Succeed(), f)
				}
				g.Expect(o.JobResources().Validate()).To(Succeed(), f)
				seen++
			}
		}
	}
	g.Expect(seen).To(BeNumerically(">=", len(files)/2))
}

// Every `helm test` Pod the chart renders passes flags the check accepts,
// and asks the pods the Deployment runs, at the port they serve probes on.
func TestChartTestPodArgsParse(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join("..", "..", "test", "golden", "testdata", "*.golden"))
	g.Expect(err).NotTo(HaveOccurred())
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		var d *appsv1.Deployment
		var pod *corev1.Pod
		for _, doc := range regexp.MustCompile(`(?m)^---.*$`).Split(string(raw), -1) {
			switch {
			case strings.Contains(doc, "\nkind: Deployment"):
				d = &appsv1.Deployment{}
				g.Expect(yaml.Unmarshal([]byte(doc), d)).To(Succeed(), f)
			case strings.Contains(doc, "\nkind: Pod\n"):
				pod = &corev1.Pod{}
				g.Expect(yaml.Unmarshal([]byte(doc), pod)).To(Succeed(), f)
			}
		}
		if pod == nil {
			continue
		}
		g.Expect(d).NotTo(BeNil(), f)
		args := pod.Spec.Containers[0].Args
		g.Expect(args).NotTo(BeEmpty())
		g.Expect(args[0]).To(Equal("check"), f)
		o, err := checkFlags(args[1:], io.Discard)
		g.Expect(err).NotTo(HaveOccurred(), "%s: %v", f, args)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(o.Selector).To(Equal(sel.String()), "%s: the test asks other pods than the Deployment's", f)
		g.Expect(sel.Matches(labels.Set(pod.Labels))).To(BeFalse(), "%s: the test Pod matches the Deployment's selector", f)
		g.Expect(o.HealthPort).To(Equal(int(d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort)), f)
		g.Expect(pod.Spec.Containers[0].Image).To(Equal(d.Spec.Template.Spec.Containers[0].Image), f)
		seen++
	}
	g.Expect(seen).To(BeNumerically(">=", len(files)/2))
}

func TestControllerGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	for _, tt := range []struct {
		name string
		gogc *string
		want int
	}{
		{"GOGC unset: the controller's own", nil, controllerGCPercent},
		{"GOGC set: it wins", ptr.To("200"), 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			if tt.gogc != nil {
				t.Setenv("GOGC", *tt.gogc)
			} else if v, ok := os.LookupEnv("GOGC"); ok {
				t.Setenv("GOGC", v) // restored after the test
				os.Unsetenv("GOGC")
			}
			debug.SetGCPercent(100)
			setControllerGC()
			g.Expect(debug.SetGCPercent(100)).To(Equal(tt.want))
		})
	}
}

// clearOriginalEnv unsets, for one test, the environment the controller reads
// images from, so that the machine's own cannot leak into the cases.
func clearOriginalEnv(t *testing.T) {
	t.Setenv("KUBEFLEDGED_NAMESPACE", "kube-fledged")
	for _, env := range []string{"KUBEFLEDGED_IMAGE", "KUBEFLEDGED_CRI_CLIENT_IMAGE", "BUSYBOX_IMAGE"} {
		t.Setenv(env, "")
	}
}

// TestControllerAcceptsGlogFlags: Deployments written for the original pass
// its glog flags; the controller starts with one warning per flag, however
// often it is given, and --v keeps its meaning without one.
func TestControllerAcceptsGlogFlags(t *testing.T) {
	cases := []struct {
		args      []string
		wantWarn  []string
		verbosity int
	}{
		{args: []string{"--stderrthreshold=INFO"}, wantWarn: []string{"stderrthreshold"}},
		{args: []string{"--stderrthreshold=whatever"}, wantWarn: []string{"stderrthreshold"}},
		{args: []string{"--logtostderr"}, wantWarn: []string{"logtostderr"}},
		{args: []string{"--logtostderr=true"}, wantWarn: []string{"logtostderr"}},
		{args: []string{"-logtostderr=false"}, wantWarn: []string{"logtostderr"}},
		{args: []string{"--alsologtostderr"}, wantWarn: []string{"alsologtostderr"}},
		{args: []string{"--alsologtostderr=false"}, wantWarn: []string{"alsologtostderr"}},
		{args: []string{"--v=2"}, verbosity: 2},
		// The rest of glog's set, each in both forms: a value-taking flag
		// consumes the next argument, so the flag after it is still read.
		{args: []string{"-vmodule=imagecache*=4,jobs=2"}, wantWarn: []string{"vmodule"}},
		{args: []string{"-vmodule", "imagecache*=4", "-v", "3"}, wantWarn: []string{"vmodule"}, verbosity: 3},
		{args: []string{"--log_dir=/var/log/kubefledged"}, wantWarn: []string{"log_dir"}},
		{args: []string{"-log_dir", "/var/log/kubefledged", "-v", "1"}, wantWarn: []string{"log_dir"}, verbosity: 1},
		{args: []string{"-log_backtrace_at=controller.go:120"}, wantWarn: []string{"log_backtrace_at"}},
		{args: []string{"-log_backtrace_at", "controller.go:120", "--v=2"}, wantWarn: []string{"log_backtrace_at"}, verbosity: 2},
		{args: []string{"-log_link=/var/log/links"}, wantWarn: []string{"log_link"}},
		{args: []string{"-log_link", "/var/log/links", "--v=2"}, wantWarn: []string{"log_link"}, verbosity: 2},
		{args: []string{"-logbuflevel=0"}, wantWarn: []string{"logbuflevel"}},
		{args: []string{"-logbuflevel", "-1", "--v=2"}, wantWarn: []string{"logbuflevel"}, verbosity: 2},
		{args: []string{"-stderrthreshold", "WARNING", "--v=2"}, wantWarn: []string{"stderrthreshold"}, verbosity: 2},
		// Every one of them at once, warned about once each, in the order given.
		{args: []string{"-log_dir=/tmp", "-vmodule", "gc=1", "-alsologtostderr", "-log_backtrace_at", "main.go:1",
			"-logtostderr=false", "-log_link=/tmp", "-stderrthreshold=ERROR", "-logbuflevel", "1", "-v=4", "-vmodule=gc=2"},
			wantWarn:  []string{"log_dir", "vmodule", "alsologtostderr", "log_backtrace_at", "logtostderr", "log_link", "stderrthreshold", "logbuflevel"},
			verbosity: 4},
		{args: []string{"--logtostderr", "--logtostderr=false", "--stderrthreshold=INFO", "--stderrthreshold=ERROR"},
			wantWarn: []string{"logtostderr", "stderrthreshold"}},
		// The original's own Deployment.
		{args: []string{"--stderrthreshold=INFO", "--logtostderr", "--alsologtostderr=false", "--v=4",
			"--image-pull-deadline-duration=5m", "--image-cache-refresh-frequency=15m", "--image-pull-policy=IfNotPresent"},
			wantWarn: []string{"stderrthreshold", "logtostderr", "alsologtostderr"}, verbosity: 4},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			o, lines := parsedControllerOptions(t, g, c.args, nil)
			g.Expect(o.Verbosity).To(Equal(c.verbosity))
			g.Expect(lines).To(HaveLen(len(c.wantWarn)))
			for i, name := range c.wantWarn {
				g.Expect(lines[i]).To(HavePrefix("kubefledged controller: warning: --" + name + " is ignored"))
				g.Expect(lines[i]).To(ContainSubstring("--zap-log-level"))
			}
		})
	}
}

// TestControllerStartupTaint: off by default, with its timeout at 10m; the
// chart always passes both flags, the taint empty when off.
func TestControllerStartupTaint(t *testing.T) {
	cases := []struct {
		args        []string
		wantTaint   string
		wantTimeout time.Duration
	}{
		{args: nil, wantTaint: "", wantTimeout: 10 * time.Minute},
		{args: []string{"--node-startup-taint=", "--node-startup-taint-timeout=10m"}, wantTaint: "", wantTimeout: 10 * time.Minute},
		{args: []string{"--node-startup-taint=kubefledged.io/caching:NoSchedule", "--node-startup-taint-timeout=90s"},
			wantTaint: "kubefledged.io/caching:NoSchedule", wantTimeout: 90 * time.Second},
		{args: []string{"--node-startup-taint=example.com/warming"}, wantTaint: "example.com/warming", wantTimeout: 10 * time.Minute},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			g := NewWithT(t)
			o, warnings := parsedControllerOptions(t, g, c.args, nil)
			g.Expect(warnings).To(BeEmpty())
			g.Expect(o.StartupTaint.String()).To(Equal(c.wantTaint))
			g.Expect(o.StartupTaint.Value == nil).To(Equal(c.wantTaint == ""))
			g.Expect(o.StartupTaintTimeout.Value).To(Equal(c.wantTimeout))
		})
	}
}

// TestControllerInstallClaim: on by default, in kube-system where every
// install finds it; the chart passes it, empty when a value turns it off.
func TestControllerInstallClaim(t *testing.T) {
	for args, want := range map[string]string{
		"":                          "kube-system/kubefledged-controller",
		"--install-claim=":          "",
		"--install-claim=infra/kfc": "infra/kfc",
	} {
		t.Run(args, func(t *testing.T) {
			g := NewWithT(t)
			var a []string
			if args != "" {
				a = []string{args}
			}
			o, warnings := parsedControllerOptions(t, g, a, nil)
			g.Expect(warnings).To(BeEmpty())
			g.Expect(o.InstallClaim.String()).To(Equal(want))
		})
	}
}

// The leader election's timings, which the claim shares, default to
// client-go's and may be lengthened together.
func TestControllerLeaderTimings(t *testing.T) {
	g := NewWithT(t)
	o, warnings := parsedControllerOptions(t, g, nil, nil)
	g.Expect(warnings).To(BeEmpty())
	g.Expect(o.LeaderTimings()).To(Equal(claim.DefaultTimings))
	o, _ = parsedControllerOptions(t, g, []string{"--leader-election-lease-duration=2m", "--leader-election-renew-deadline=90s",
		"--leader-election-retry-period=5s"}, nil)
	g.Expect(o.LeaderTimings()).To(Equal(claim.Timings{Duration: 2 * time.Minute, Renew: 90 * time.Second, Retry: 5 * time.Second}))
}

// TestControllerOriginalEnv: the original's Deployment sets its CRI client
// and busybox images; ours cannot use them, so they are dropped with a
// warning, while any other helper image is still honoured.
func TestControllerOriginalEnv(t *testing.T) {
	const ours = "registry.example.com/mirror/kubefledged:v0.11.0"
	cases := []struct {
		name       string
		env        map[string]string
		args       []string
		wantHelper string
		wantWarn   []string
	}{
		{name: "nothing set", wantHelper: DefaultHelperImage},
		{name: "original CRI client image, full name",
			env:        map[string]string{"KUBEFLEDGED_CRI_CLIENT_IMAGE": "docker.io/senthilrch/kubefledged-cri-client:v0.10.0"},
			wantHelper: DefaultHelperImage, wantWarn: []string{"KUBEFLEDGED_CRI_CLIENT_IMAGE=docker.io/senthilrch/kubefledged-cri-client:v0.10.0 is ignored"}},
		{name: "original CRI client image, short name",
			env:        map[string]string{"KUBEFLEDGED_CRI_CLIENT_IMAGE": "senthilrch/kubefledged-cri-client:latest"},
			wantHelper: DefaultHelperImage, wantWarn: []string{"KUBEFLEDGED_CRI_CLIENT_IMAGE=senthilrch/kubefledged-cri-client:latest is ignored"}},
		{name: "other CRI client image honoured",
			env:        map[string]string{"KUBEFLEDGED_CRI_CLIENT_IMAGE": ours},
			wantHelper: ours},
		{name: "a name that only ends in senthilrch is not the original's",
			env:        map[string]string{"KUBEFLEDGED_CRI_CLIENT_IMAGE": "registry.example.com/notsenthilrch/kubefledged:v1"},
			wantHelper: "registry.example.com/notsenthilrch/kubefledged:v1"},
		{name: "KUBEFLEDGED_IMAGE wins",
			env:        map[string]string{"KUBEFLEDGED_IMAGE": ours, "KUBEFLEDGED_CRI_CLIENT_IMAGE": "registry.example.com/other:v1"},
			wantHelper: ours},
		{name: "KUBEFLEDGED_IMAGE wins, original CRI client image still warned about",
			env:        map[string]string{"KUBEFLEDGED_IMAGE": ours, "KUBEFLEDGED_CRI_CLIENT_IMAGE": "senthilrch/kubefledged-cri-client:latest"},
			wantHelper: ours, wantWarn: []string{"KUBEFLEDGED_CRI_CLIENT_IMAGE=senthilrch/kubefledged-cri-client:latest is ignored"}},
		{name: "--helper-image wins over the environment",
			env:        map[string]string{"KUBEFLEDGED_IMAGE": "registry.example.com/other:v1"},
			args:       []string{"--helper-image=" + ours},
			wantHelper: ours},
		{name: "busybox image ignored",
			env:        map[string]string{"BUSYBOX_IMAGE": "docker.io/library/busybox:1.36"},
			wantHelper: DefaultHelperImage, wantWarn: []string{"BUSYBOX_IMAGE is ignored"}},
		{name: "both of the original's images",
			env: map[string]string{"KUBEFLEDGED_CRI_CLIENT_IMAGE": "senthilrch/kubefledged-cri-client:latest",
				"BUSYBOX_IMAGE": "busybox:1.36"},
			wantHelper: DefaultHelperImage,
			wantWarn:   []string{"KUBEFLEDGED_CRI_CLIENT_IMAGE=senthilrch/kubefledged-cri-client:latest is ignored", "BUSYBOX_IMAGE is ignored"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			o, lines := parsedControllerOptions(t, g, c.args, c.env)
			g.Expect(o.HelperImage).To(Equal(c.wantHelper))
			g.Expect(lines).To(HaveLen(len(c.wantWarn)))
			for i, w := range c.wantWarn {
				g.Expect(lines[i]).To(HavePrefix("kubefledged controller: warning: " + w))
			}
		})
	}
}

// TestControllerJobResources: the four flags reach the Jobs' options, and
// empty ones (as the chart passes its defaults) leave the defaults.
func TestControllerJobResources(t *testing.T) {
	g := NewWithT(t)
	o, warnings := parsedControllerOptions(t, g, []string{"--job-cpu-request=", "--job-memory-request=", "--job-cpu-limit=", "--job-memory-limit="}, nil)
	g.Expect(warnings).To(BeEmpty())
	g.Expect(o.JobResources()).To(BeZero())
	o, _ = parsedControllerOptions(t, g, []string{"--job-cpu-request=20m", "--job-memory-request=32Mi", "--job-cpu-limit=0.5", "--job-memory-limit=128Mi"}, nil)
	r := o.JobResources()
	g.Expect(r.CPURequest.String()).To(Equal("20m"))
	g.Expect(r.MemoryRequest.String()).To(Equal("32Mi"))
	g.Expect(r.CPULimit.String()).To(Equal("500m"))
	g.Expect(r.MemoryLimit.String()).To(Equal("128Mi"))
}

// TestOriginalImageRuleMatchesChart: the controller and the chart must agree
// on which images are the original's, or a release could ignore an image the
// controller then uses, or the reverse.
func TestOriginalImageRuleMatchesChart(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "helm-charts", "kubefledged", operator.AliasesFile))
	g.Expect(err).NotTo(HaveOccurred())
	var aliases []operator.Alias
	g.Expect(yaml.Unmarshal(raw, &aliases)).To(Succeed())
	var rules []string
	for _, a := range aliases {
		if a.Ignore != "" {
			rules = append(rules, a.Ignore)
		}
	}
	g.Expect(rules).To(ConsistOf(originalImage.String()))
}

// parsedControllerOptions parses args as the controller's flags, in an environment of
// none of the original's variables but env, and returns the options and what was written
// to stderr, a line each (warnings).
func parsedControllerOptions(t *testing.T, g Gomega, args []string, env map[string]string) (*ControllerOptions, []string) {
	t.Helper()
	clearOriginalEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}
	var errb bytes.Buffer
	o, err := controllerOptions(args, &errb)
	g.Expect(err).NotTo(HaveOccurred())
	if errb.Len() == 0 {
		return o, nil
	}
	return o, strings.Split(strings.TrimSpace(errb.String()), "\n")
}
