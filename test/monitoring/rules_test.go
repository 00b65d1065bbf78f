package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// synthetic are the series Prometheus makes itself, which the controller
// cannot serve: the alerts may read them, the dashboard may not.
var synthetic = []string{"up"}

// metricNames lists the metric names an expression selects.
func metricNames(expr parser.Expr) []string {
	var out []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			out = append(out, name)
		}
		return nil
	})
	return out
}

// annotationQuery finds the queries an annotation template runs (Prometheus's
// template function query, given a raw string).
var annotationQuery = regexp.MustCompile("query `([^`]*)`")

// exported are the sample names the controller served in the recorded run,
// and in the earlier recordings kept beside it: a series that exists only
// for a second (kubefledged_held_nodes_waiting_for_image, while a node
// joining under a leader waits for its images) is not caught by every run's
// once-a-second scrapes.
func exported(t *testing.T) []string {
	t.Helper()
	rec := loadRecording(t)
	if len(rec.Exported) < 20 {
		t.Fatalf("the recording names %d exported samples: too few to be the controller's", len(rec.Exported))
	}
	names := slices.Clone(rec.Exported)
	earlier, err := filepath.Glob(filepath.Join("testdata", "sandbox-run-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range earlier {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseRecording(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names = append(names, e.Exported...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Every rendering of the PrometheusRule in test/golden loads as Prometheus
// loads a rule file (expressions, durations, label names, annotation
// templates), and names only series the controller served or Prometheus
// makes, in its expressions and in the queries its annotations run.
func TestRulesLoadAsPrometheusLoadsThem(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join(goldenDir, "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	names := exported(t)
	p := parser.NewParser(parser.Options{})
	checked := 0
	for _, g := range goldens {
		raw, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "kind: PrometheusRule") {
			continue
		}
		checked++
		t.Run(strings.TrimSuffix(filepath.Base(g), ".golden"), func(t *testing.T) {
			file, err := RuleFile(raw)
			if err != nil {
				t.Fatal(err)
			}
			groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, p, promslog.NewNopLogger())
			for _, err := range errs {
				t.Error(err)
			}
			if groups == nil {
				return
			}
			for _, grp := range groups.Groups {
				for _, r := range grp.Rules {
					if r.Alert == "" {
						t.Errorf("a recording rule: %s", r.Record)
					}
					if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
						t.Errorf("%s lacks a severity, summary or description", r.Alert)
					}
					expr, err := p.ParseExpr(r.Expr)
					if err != nil {
						t.Errorf("%s: %v", r.Alert, err)
						continue
					}
					exprs := []parser.Expr{expr}
					for _, a := range r.Annotations {
						for _, m := range annotationQuery.FindAllStringSubmatch(a, -1) {
							q, err := p.ParseExpr(m[1])
							if err != nil {
								t.Errorf("%s: the query in an annotation: %v", r.Alert, err)
								continue
							}
							exprs = append(exprs, q)
						}
					}
					for _, e := range exprs {
						for _, n := range metricNames(e) {
							if !slices.Contains(names, n) && !slices.Contains(synthetic, n) {
								t.Errorf("%s reads %s, which the controller does not serve", r.Alert, n)
							}
						}
					}
				}
			}
		})
	}
	if checked < 3 {
		t.Errorf("%d renderings with a PrometheusRule in %s", checked, goldenDir)
	}
}

// The rule file loader must refuse what Prometheus refuses, or the test
// above proves nothing.
func TestRulesLoaderRefusesBadRules(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for _, bad := range []string{
		"groups: [{name: g, rules: [{alert: A, expr: 'rate(x[5m]'}]}]",
		"groups: [{name: g, rules: [{alert: A, expr: 'x > 1', for: 5 minutes}]}]",
		"groups: [{name: g, rules: [{alert: A, expr: 'x > 1', annotations: {summary: '{{ $value | nosuchfunc }}'}}]}]",
		"groups: [{name: g, rules: [{alert: A, expr: 'x > 1', lables: {severity: warning}}]}]",
	} {
		if _, errs := rulefmt.Parse([]byte(bad), false, model.UTF8Validation, p, promslog.NewNopLogger()); len(errs) == 0 {
			t.Errorf("accepted %s", bad)
		}
	}
}

// Every alert, the chart's (at its defaults, and for the sandbox) and the operator's, links to a
// section of docs/runbooks.md that exists, and only what leaves the cluster
// without caching or without a node's capacity is critical.
func TestRunbooksAndSeverities(t *testing.T) {
	runbooks, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbooks), -1) {
		sections[strings.ToLower(m[1])] = true
	}
	critical := []string{"KubeFledgedControllerDown", "KubeFledgedNodeHeldTooLong"}
	p := parser.NewParser(parser.Options{})
	seen := 0
	for _, f := range []string{filepath.Join(goldenDir, "monitoring.golden"), sandboxRendering, filepath.Join("..", "..", "config", "prometheus", "rule.yaml")} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := RuleFile(raw)
		if err != nil {
			t.Fatal(err)
		}
		groups, errs := rulefmt.Parse(file, false, model.UTF8Validation, p, promslog.NewNopLogger())
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				seen++
				url := r.Annotations["runbook_url"]
				base, frag, ok := strings.Cut(url, "#")
				if !ok || !strings.HasPrefix(base, "https://") || !strings.HasSuffix(base, "/docs/runbooks.md") {
					t.Errorf("%s: runbook_url %q is not a section of docs/runbooks.md", r.Alert, url)
				}
				if !sections[frag] {
					t.Errorf("%s: docs/runbooks.md has no section #%s", r.Alert, frag)
				}
				want := "warning"
				if slices.Contains(critical, r.Alert) {
					want = "critical"
				}
				if r.Labels["severity"] != want {
					t.Errorf("%s: severity %q, want %q", r.Alert, r.Labels["severity"], want)
				}
			}
		}
	}
	if seen < 14 {
		t.Errorf("%d alerts checked", seen)
	}
}
