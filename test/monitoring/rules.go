package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"go.yaml.in/yaml/v3"
)

// documentSeparator splits a golden rendering (test/golden) into its
// manifests: each starts with a line "---", the notes with "--- NOTES.txt".
var documentSeparator = regexp.MustCompile(`(?m)^---.*$`)

// RuleFile finds the PrometheusRule in a golden rendering and returns its
// spec, which is a Prometheus rule file ({groups: [...]}) as it stands.
func RuleFile(golden []byte) ([]byte, error) {
	var found []byte
	for _, doc := range documentSeparator.Split(string(golden), -1) {
		var obj struct {
			Kind string         `yaml:"kind"`
			Spec map[string]any `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind != "PrometheusRule" {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("more than one PrometheusRule")
		}
		b, err := yaml.Marshal(obj.Spec)
		if err != nil {
			return nil, err
		}
		found = b
	}
	if found == nil {
		return nil, fmt.Errorf("no PrometheusRule")
	}
	return found, nil
}

// Firing is an alert firing at one evaluation.
type Firing struct {
	Alert  string
	Labels labels.Labels
	// Annotations are expanded, as Alertmanager would receive them.
	Annotations labels.Labels
	Value       float64
}

// Evaluation is what the rules gave at one time.
type Evaluation struct {
	At     time.Time
	Firing []Firing
}

// Evaluate loads a rule file as Prometheus's rule manager does and
// evaluates its groups every step from start to end on db, as promtool's
// rule unit tests do (rules marked restored, so that "for" counts from the
// first evaluation). It returns the alerts firing at each evaluation; an
// evaluation error of any rule is an error.
func Evaluate(ctx context.Context, ruleFile []byte, db storage.Storage, start, end time.Time, step time.Duration) ([]Evaluation, error) {
	dir, err := os.MkdirTemp("", "kubefledged-rules-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(file, ruleFile, 0o644); err != nil {
		return nil, err
	}
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:           1e7,
		Timeout:              time.Minute,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
	defer engine.Close()
	p := parser.NewParser(parser.Options{})
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(engine, db),
		AppendableV2: db,
		Context:      ctx,
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       p,
	})
	groups, errs := m.LoadGroups(step, labels.EmptyLabels(), "", nil, false, file)
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading the rules: %v", errs)
	}
	names := make([]string, 0, len(groups))
	for k := range groups {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, ar := range groups[n].AlertingRules() {
			ar.SetRestored(true)
		}
	}
	var out []Evaluation
	for ts := start; !ts.After(end); ts = ts.Add(step) {
		ev := Evaluation{At: ts}
		for _, n := range names {
			g := groups[n]
			g.Eval(ctx, ts)
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					return nil, fmt.Errorf("rule %s at %s: %w", r.Name(), ts, err)
				}
			}
			for _, ar := range g.AlertingRules() {
				for _, a := range ar.ActiveAlerts() {
					if a.State == rules.StateFiring {
						ev.Firing = append(ev.Firing, Firing{Alert: ar.Name(), Labels: a.Labels, Annotations: a.Annotations, Value: a.Value})
					}
				}
			}
		}
		out = append(out, ev)
	}
	return out, nil
}
