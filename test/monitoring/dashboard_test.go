package monitoring

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

var dashboardFile = filepath.Join("..", "..", "helm-charts", "kubefledged", "dashboards", "kubefledged.json")

// grafanaVariables are what Grafana puts in place of the dashboard's
// variables before it sends a query: its own interval variables, and a
// value of each of the dashboard's.
var grafanaVariables = map[string]string{
	"$__rate_interval":      "2m",
	"$__interval":           "30s",
	"$__range":              "6h",
	"$job":                  "kubefledged-metrics",
	"$imagecache_namespace": "team-a|team-b",
}

var variable = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)

func substitute(t *testing.T, q string) string {
	t.Helper()
	for k, v := range grafanaVariables {
		q = strings.ReplaceAll(q, k, v)
	}
	if left := variable.FindString(q); left != "" {
		t.Errorf("%s: unknown variable %s", q, left)
	}
	return q
}

type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct {
			X, Y, W, H int
		} `json:"gridPos"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// labelValues is Grafana's variable query label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*), *([A-Za-z_][A-Za-z0-9_]*)\)$`)

// Every query of the dashboard, panels and variables, parses as PromQL
// once Grafana has put in its variables, and names only series the
// controller served in the recorded run.
func TestDashboardQueries(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	names := exported(t)
	p := parser.NewParser(parser.Options{})
	check := func(where, q string) {
		expr, err := p.ParseExpr(substitute(t, q))
		if err != nil {
			t.Errorf("%s: %q: %v", where, q, err)
			return
		}
		for _, n := range metricNames(expr) {
			if !slices.Contains(names, n) {
				t.Errorf("%s reads %s, which the controller does not serve", where, n)
			}
		}
	}
	queries := 0
	ids := map[int]bool{}
	for _, panel := range d.Panels {
		if ids[panel.ID] {
			t.Errorf("panel id %d twice", panel.ID)
		}
		ids[panel.ID] = true
		if panel.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the datasource variable", panel.Title)
		}
		if g := panel.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q is outside the grid: %+v", panel.Title, g)
		}
		if len(panel.Targets) == 0 {
			t.Errorf("panel %q has no query", panel.Title)
		}
		for _, tg := range panel.Targets {
			queries++
			check("panel "+panel.Title, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		q, _ := v.Query.(string)
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		queries++
		check("variable "+v.Name, m[1])
	}
	if queries < 15 || d.UID != "kubefledged" {
		t.Errorf("%d queries, uid %q", queries, d.UID)
	}
}

// The name check must be able to fail.
func TestDashboardCheckCatchesUnknownSeries(t *testing.T) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(`sum(rate(kubefledged_pulls_total{job="x"}[5m])) / up`)
	if err != nil {
		t.Fatal(err)
	}
	names := exported(t)
	var unknown []string
	for _, n := range metricNames(expr) {
		if !slices.Contains(names, n) {
			unknown = append(unknown, n)
		}
	}
	if !slices.Equal(unknown, []string{"kubefledged_pulls_total", "up"}) {
		t.Errorf("unknown: %v", unknown)
	}
}
