package golden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// promRule is a PrometheusRule as the chart writes it (prometheus-operator's
// Go types would bring its module in), every field named so that it decodes
// strictly.
type promRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func prometheusRule(t *testing.T, r Rendered) *promRule {
	t.Helper()
	return one[promRule](t, r.Find("PrometheusRule", ""), "PrometheusRule")
}

func alerts(p *promRule) map[string]string {
	out := map[string]string{}
	for _, g := range p.Spec.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

func dashboardConfigMap(t *testing.T, r Rendered) *corev1.ConfigMap {
	t.Helper()
	return one[corev1.ConfigMap](t, r.Find("ConfigMap", "kubefledged-dashboard"), "dashboard ConfigMap")
}

// Both are off by default: their kinds need CRDs, or a Grafana, that a
// cluster may not have.
func TestMonitoringOffByDefault(t *testing.T) {
	r := render(t, loadChart(t), "defaults")
	if n := len(r.Find("PrometheusRule", "")) + len(r.Find("ConfigMap", "")); n != 0 {
		t.Errorf("%d monitoring objects rendered by default", n)
	}
}

func TestMonitoringObjects(t *testing.T) {
	c := loadChart(t)
	all := []string{"KubeFledgedImageCacheFailing", "KubeFledgedPullFailuresHigh", "KubeFledgedOperationsSlow", "KubeFledgedControllerDown", "KubeFledgedNoLeader",
		"KubeFledgedWebhookCertificateExpiring"}
	t.Run("monitoring", func(t *testing.T) {
		r := render(t, c, "monitoring")
		p := prometheusRule(t, r)
		if p.Namespace != Namespace || p.Labels["release"] != "prometheus" {
			t.Errorf("PrometheusRule metadata: %+v", p.ObjectMeta)
		}
		got := alerts(p)
		for _, a := range all {
			if !strings.Contains(got[a], `job="kubefledged-metrics",namespace="kube-fledged"`) {
				t.Errorf("%s does not select the ServiceMonitor's series: %q", a, got[a])
			}
		}
		if len(got) != len(all) {
			t.Errorf("alerts %v, want %v", got, all)
		}
		cm := dashboardConfigMap(t, r)
		if cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "kube-fledged" {
			t.Errorf("dashboard ConfigMap metadata: %+v", cm.ObjectMeta)
		}
		want, err := os.ReadFile(filepath.Join(ChartDir(), "dashboards", "kubefledged.json"))
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data["kubefledged.json"] != strings.TrimSpace(string(want)) {
			t.Error("the ConfigMap does not carry dashboards/kubefledged.json as it is")
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(cm.Data["kubefledged.json"]), &d); err != nil || d["uid"] != "kubefledged" {
			t.Errorf("dashboard JSON: %v, uid %v", err, d["uid"])
		}
	})
	t.Run("monitoring-options", func(t *testing.T) {
		r := render(t, c, "monitoring-options")
		p := prometheusRule(t, r)
		got := alerts(p)
		if _, ok := got["KubeFledgedNoLeader"]; ok {
			t.Error("KubeFledgedNoLeader without leader election")
		}
		for a, e := range got {
			if !strings.Contains(e, `{job="kube-fledged",cluster="prod"`) {
				t.Errorf("%s ignores the selector: %q", a, e)
			}
		}
		for _, g := range p.Spec.Groups {
			for _, rule := range g.Rules {
				if rule.Labels["severity"] != "critical" || rule.Labels["team"] != "platform" {
					t.Errorf("%s labels %v", rule.Alert, rule.Labels)
				}
			}
		}
		cm := dashboardConfigMap(t, r)
		if cm.Labels["dashboards"] != "kube-fledged" || cm.Labels["team"] != "platform" {
			t.Errorf("dashboard labels %v", cm.Labels)
		}
		if _, ok := cm.Labels["grafana_dashboard"]; ok {
			t.Error("the default sidecar label stays beside the one asked for")
		}
	})
}

// renderAlerts renders the chart with vals (YAML) and the PrometheusRule on,
// and returns its alerts' expressions.
func renderAlerts(t *testing.T, c *chart.Chart, vals string) map[string]string {
	t.Helper()
	v := map[string]any{}
	if err := yaml.Unmarshal([]byte(vals), &v); err != nil {
		t.Fatal(err)
	}
	pr, _ := v["prometheusRule"].(map[string]any)
	if pr == nil {
		pr = map[string]any{}
	}
	pr["enabled"] = true
	v["prometheusRule"] = pr
	r, err := Render(c, v)
	if err != nil {
		t.Fatalf("%s: %v", vals, err)
	}
	return alerts(prometheusRule(t, r))
}

// threshold is the number an alert's expression compares with at its end.
var threshold = regexp.MustCompile(`> ([0-9.]+)\s*$`)

// The alerts' durations are Go durations, the controller flags' form, turned
// into seconds by the chart.
func TestMonitoringDurations(t *testing.T) {
	c := loadChart(t)
	for _, tt := range []struct {
		vals       string
		failing    string
		slow       string
		windowExpr string
	}{
		{"{}", "1500", "300", "[3600s]"},
		{"controller: {imageCacheRefreshFrequency: 1h30m, imagePullDeadlineDuration: 90s}", "5580", "90", "[3600s]"},
		{"controller: {imageCacheRefreshFrequency: 1.5h, imagePullDeadlineDuration: 2m30s}", "5700", "150", "[3600s]"},
		{"controller: {imageCacheRefreshFrequency: 0s}", "3600", "300", "[3600s]"},
		{"controller: {imageCacheRefreshFrequency: \"0\"}", "3600", "300", "[3600s]"},
		{"controller: {imagePullDeadlineDuration: 1500ms}", "904", "2", "[3600s]"},
		{"prometheusRule: {cacheFailingFor: 2h, slowOperation: 45s, window: 10m}", "7200", "45", "[600s]"},
	} {
		got := renderAlerts(t, c, tt.vals)
		if m := threshold.FindStringSubmatch(got["KubeFledgedImageCacheFailing"]); m == nil || m[1] != tt.failing {
			t.Errorf("%s: failing threshold %v, want %s", tt.vals, m, tt.failing)
		}
		if m := threshold.FindStringSubmatch(got["KubeFledgedOperationsSlow"]); m == nil || m[1] != tt.slow {
			t.Errorf("%s: slow threshold %v, want %s", tt.vals, m, tt.slow)
		}
		if !strings.Contains(got["KubeFledgedPullFailuresHigh"], tt.windowExpr) {
			t.Errorf("%s: window not %s: %s", tt.vals, tt.windowExpr, got["KubeFledgedPullFailuresHigh"])
		}
	}
}

// KubeFledgedNodeHeldTooLong is there only with the startup taint, and its
// threshold follows the taint's timeout unless set.
func TestMonitoringNodeHeldThreshold(t *testing.T) {
	c := loadChart(t)
	for _, tt := range []struct {
		vals string
		held string // "" for no alert
	}{
		{"{}", ""},
		{"controller: {nodeStartupTaint: kubefledged.io/caching}", "660"},
		{"controller: {nodeStartupTaint: kubefledged.io/caching, nodeStartupTaintTimeout: 2m30s}", "210"},
		{"controller: {nodeStartupTaint: kubefledged.io/caching}\nprometheusRule: {nodeHeldFor: 1h}", "3600"},
	} {
		expr, ok := renderAlerts(t, c, tt.vals)["KubeFledgedNodeHeldTooLong"]
		if tt.held == "" {
			if ok {
				t.Errorf("%s: KubeFledgedNodeHeldTooLong without the startup taint", tt.vals)
			}
			continue
		}
		if m := threshold.FindStringSubmatch(expr); m == nil || m[1] != tt.held {
			t.Errorf("%s: held threshold %v, want %s", tt.vals, m, tt.held)
		}
	}
}
