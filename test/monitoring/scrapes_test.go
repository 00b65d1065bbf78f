package monitoring

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"
)

const small = `# kube-fledged scrapes v1
# namespace e2e-x
# exported b_total a
# event 1000 begin
# scrape 1000 ok
a{namespace="team"} 1
b_total 5
# scrape 2000 ok
a{namespace="team"} 2
# event 2500 gone
# scrape 3000 ok
- a{namespace="team"}
# scrape 4000 failed
# scrape 5000 ok
b_total 6
`

func TestParseRecording(t *testing.T) {
	rec, err := ParseRecording(strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Namespace != "e2e-x" || strings.Join(rec.Exported, " ") != "a b_total" {
		t.Errorf("header: %q %v", rec.Namespace, rec.Exported)
	}
	if at, _ := rec.Event("gone"); at != time.UnixMilli(2500) {
		t.Errorf("event at %v", at)
	}
	if _, err := rec.Event("never"); err == nil {
		t.Error("an event never recorded has a time")
	}
	want := []map[string]float64{
		{`a{namespace="team"}`: 1, "b_total": 5},
		{`a{namespace="team"}`: 2, "b_total": 5},
		{"b_total": 5},
		nil,
		{"b_total": 6},
	}
	if len(rec.Scrapes) != len(want) {
		t.Fatalf("%d scrapes", len(rec.Scrapes))
	}
	for i, s := range rec.Scrapes {
		if len(s.Series) != len(want[i]) || s.OK != (want[i] != nil) {
			t.Errorf("scrape %d: %v, want %v", i, s.Series, want[i])
		}
		for k, v := range want[i] {
			if s.Series[k] != v {
				t.Errorf("scrape %d: %s = %v, want %v", i, k, s.Series[k], v)
			}
		}
	}
	for _, bad := range []string{
		"a 1\n",
		recordingHeader + "\na 1\n",
		recordingHeader + "\n# scrape 1000 ok\n- a\n",
		recordingHeader + "\n# scrape 2000 ok\n# scrape 1000 ok\n",
		recordingHeader + "\n# scrape 1000 failed\na 1\n",
		recordingHeader + "\n# scrape 1000 ok\na one\n",
		recordingHeader + "\n# scrapes 1000 ok\n",
	} {
		if _, err := ParseRecording(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Loaded as Prometheus stores a scrape: the target's labels, "up", and
// staleness markers where series went away.
func TestLoadAsScraped(t *testing.T) {
	rec, err := ParseRecording(strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	db := teststorage.New(t)
	target := labels.FromStrings("job", "kubefledged-metrics", "namespace", "kube-fledged")
	if err := rec.Load(context.Background(), db, target); err != nil {
		t.Fatal(err)
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1000, Timeout: time.Second})
	query := func(q string, at int64) string {
		t.Helper()
		qry, err := engine.NewInstantQuery(context.Background(), db, nil, q, time.UnixMilli(at))
		if err != nil {
			t.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.String()
	}
	for _, tt := range []struct {
		q    string
		at   int64
		want string
	}{
		{"a", 2000, `{__name__="a", exported_namespace="team", job="kubefledged-metrics", namespace="kube-fledged"} => 2 @[2000]`},
		{"a", 3500, ``},
		{"b_total", 4500, ``},
		{"up", 4500, `{__name__="up", job="kubefledged-metrics", namespace="kube-fledged"} => 0 @[4500]`},
		{"up", 5000, `{__name__="up", job="kubefledged-metrics", namespace="kube-fledged"} => 1 @[5000]`},
		{"b_total", 5000, `{__name__="b_total", job="kubefledged-metrics", namespace="kube-fledged"} => 6 @[5000]`},
	} {
		if got := query(tt.q, tt.at); got != tt.want {
			t.Errorf("%s at %d: %q, want %q", tt.q, tt.at, got, tt.want)
		}
	}
}
