package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/internal/cli"
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
		{args: []string{"controller", "--no-such-flag"}, wantCode: 1, wantErr: "flag provided but not defined: --no-such-flag"},
		{args: []string{"operator", "--no-such-flag"}, wantCode: 1, wantErr: "flag provided but not defined: --no-such-flag"},
		{args: []string{"cri-rmi"}, wantCode: 1, wantErr: "--endpoint and --image are required"},
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
				seen++
			}
		}
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
