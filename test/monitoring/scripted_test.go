package monitoring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/util/teststorage"
)

// script builds a recording of a controller scraped every step for d, each
// scrape's series given by at(offset): what a run over hours would serve,
// which no sandbox run can wait for. It is loaded as Prometheus's scrape
// loop stores a recorded run (Recording.Load).
func script(start time.Time, d, step time.Duration, at func(time.Duration) map[string]float64) *Recording {
	rec := &Recording{Events: map[string]time.Time{}}
	for off := time.Duration(0); off <= d; off += step {
		rec.Scrapes = append(rec.Scrapes, Scrape{At: start.Add(off), OK: true, Series: at(off)})
	}
	return rec
}

// evaluateScript evaluates the rules of a rendering (a file of test/golden
// or of config/) on a scripted recording, every step.
func evaluateScript(t *testing.T, rendering string, rec *Recording, step time.Duration) timeline {
	t.Helper()
	raw, err := os.ReadFile(rendering)
	if err != nil {
		t.Fatal(err)
	}
	ruleFile, err := RuleFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	db := teststorage.New(t)
	ctx := context.Background()
	if err := rec.Load(ctx, db, target); err != nil {
		t.Fatal(err)
	}
	evals, err := Evaluate(ctx, ruleFile, db, rec.Start(), rec.End(), step)
	if err != nil {
		t.Fatal(err)
	}
	return timeline{t: t, rec: rec, evals: evals}
}

var scriptStart = time.Unix(1_800_000_000, 0)

// pulls is a scrape's pull counters.
func pulls(succeeded, failed float64) map[string]float64 {
	return map[string]float64{
		`kubefledged_image_pulls_total{result="succeeded"}`:       succeeded,
		`kubefledged_image_pulls_total{result="failed"}`:          failed,
		`kubefledged_image_pulls_total{result="already_present"}`: 0,
	}
}

// With the chart's defaults (a ratio of 0.2 over 1h, at least 10 pulls,
// for 15m): one failure in two pulls is 50% and must not fire; 30 failures
// in 40 pulls fire once they have lasted 15m, and not before.
func TestPullFailuresNeedVolumeAndTime(t *testing.T) {
	defaults := filepath.Join(goldenDir, "monitoring.golden")
	const step = 30 * time.Second
	at := func(d time.Duration) time.Time { return scriptStart.Add(d) }

	few := script(scriptStart, 2*time.Hour, step, func(d time.Duration) map[string]float64 {
		if d < 10*time.Minute {
			return pulls(0, 0)
		}
		return pulls(1, 1)
	})
	tl := evaluateScript(t, defaults, few, step)
	tl.quiet("KubeFledgedPullFailuresHigh", nil, few.Start(), few.End())

	// 2 pulls a minute from minute 10 to minute 30, 3 in 4 failing.
	many := script(scriptStart, 2*time.Hour, step, func(d time.Duration) map[string]float64 {
		m := min(max(d-10*time.Minute, 0), 20*time.Minute).Minutes()
		return pulls(m/2, 3*m/2)
	})
	tl = evaluateScript(t, defaults, many, step)
	// The ratio is over 0.2 from the first failures, the volume from about
	// minute 15 (10 pulls): the alert waits 15m more.
	tl.quiet("KubeFledgedPullFailuresHigh", nil, many.Start(), at(29*time.Minute))
	tl.fires("KubeFledgedPullFailuresHigh", nil, at(30*time.Minute), at(40*time.Minute))
	// An hour after the last pull the window holds none: it ends.
	tl.quiet("KubeFledgedPullFailuresHigh", nil, at(92*time.Minute), many.End())
}

// The certificate alert fires within its threshold of expiry (14 days by
// default), whatever the certificate's lifetime, and not before.
func TestWebhookCertificateExpiring(t *testing.T) {
	const step = time.Minute
	expires := scriptStart.Add(14*24*time.Hour + 30*time.Minute)
	rec := script(scriptStart, time.Hour, step, func(time.Duration) map[string]float64 {
		return map[string]float64{"kubefledged_webhook_certificate_expiry_timestamp_seconds": float64(expires.Unix())}
	})
	tl := evaluateScript(t, filepath.Join(goldenDir, "monitoring.golden"), rec, step)
	tl.quiet("KubeFledgedWebhookCertificateExpiring", nil, rec.Start(), scriptStart.Add(29*time.Minute))
	tl.firesThroughout("KubeFledgedWebhookCertificateExpiring", map[string]string{"severity": "warning"}, scriptStart.Add(31*time.Minute), rec.End())
}

// The operator's alert (config/prometheus) fires for a KubeFledged whose
// release has failed for 15 minutes, not for one that failed once and
// recovered, nor for the one that is Deployed.
func TestOperatorReleaseFailing(t *testing.T) {
	const step = time.Minute
	series := func(ns, name, cond string) string {
		return fmt.Sprintf(`kubefledged_operator_release_condition{condition=%q,kubefledged=%q,kubefledged_namespace=%q}`, cond, name, ns)
	}
	rec := script(scriptStart, time.Hour, step, func(d time.Duration) map[string]float64 {
		blip := 0.0
		if d >= 5*time.Minute && d < 10*time.Minute {
			blip = 1
		}
		stuck := 0.0
		if d >= 10*time.Minute {
			stuck = 1
		}
		return map[string]float64{
			series("a", "ok", "Deployed"): 1, series("a", "ok", "ReleaseFailed"): 0, series("a", "ok", "Irreconcilable"): 0,
			series("b", "blip", "Deployed"): 1, series("b", "blip", "ReleaseFailed"): blip, series("b", "blip", "Irreconcilable"): 0,
			series("c", "stuck", "Deployed"): 1, series("c", "stuck", "ReleaseFailed"): stuck, series("c", "stuck", "Irreconcilable"): 0,
		}
	})
	tl := evaluateScript(t, filepath.Join("..", "..", "config", "prometheus", "rule.yaml"), rec, step)
	stuck := map[string]string{"kubefledged": "stuck", "condition": "ReleaseFailed"}
	tl.quiet("KubeFledgedOperatorReleaseFailing", stuck, rec.Start(), scriptStart.Add(24*time.Minute))
	tl.firesThroughout("KubeFledgedOperatorReleaseFailing", stuck, scriptStart.Add(26*time.Minute), rec.End())
	for _, other := range []string{"ok", "blip"} {
		tl.quiet("KubeFledgedOperatorReleaseFailing", map[string]string{"kubefledged": other}, rec.Start(), rec.End())
	}
	if got := tl.annotation("KubeFledgedOperatorReleaseFailing", stuck, "summary"); got != "The operator cannot install or upgrade KubeFledged c/stuck (ReleaseFailed)." {
		t.Errorf("summary: %q", got)
	}
}
