package report

import (
	"fmt"
	"strings"
)

// The targets and sections of issue 30's scenarios 8 to 10: the largest cluster, a warm
// refresh at that scale, and a small cache beside a large one.

// MinScaleNodes is the fewest nodes a scenario 8 short of its scale must still reach for
// its figures to be read at the largest cluster by their per-node slope (issue 30).
const MinScaleNodes = 3000

// scaleTargets are scenario 8's, 9's and 10's rows of the Targets table.
func (r *Report) scaleTargets(add func(s, fig, val, tgt, pass string)) {
	if s := r.Scenarios.ScaleCold; s != nil {
		reached := fmt.Sprintf("%d of %d", s.Nodes, s.NodesWanted)
		if s.ShortBy != "" {
			reached += " (" + s.ShortBy + ")"
		}
		// A machine short of the largest cluster still measures it by the figures per
		// node, from at least MinScaleNodes; a smaller run is a trial.
		add("8", "kwok nodes the sandbox held", reached, fmt.Sprintf("all, or the most the machine holds (at least %d) and what ran out", MinScaleNodes),
			passFail(s.Nodes >= MinScaleNodes))
	}
	if s := r.Scenarios.ScaleCold; s != nil && s.Phase != nil {
		exact := "exact"
		if len(s.Problems) > 0 {
			exact = strings.Join(s.Problems, "; ")
		}
		add("8", "final status: every pair succeeded, counts exact", exact, "exact", passFail(s.Exact))
		if s.Floor != nil {
			add("8", "time to final status / one-Job-per-node floor", fmt.Sprintf("%.2fx (%.0f s / %.0f s)", s.Phase.RatioToFloor, s.Phase.Seconds, s.Floor.Seconds),
				"≤ 1.5x", passFail(s.Phase.RatioToFloor <= 1.5))
		}
		add("8", "API writes per (image, node)", fmt.Sprintf("%.3f (%d writes, %d pairs)", s.WritesPerPair, s.Phase.Requests.Writes(), s.Pairs),
			"≤ 0.25", passFail(s.WritesPerPair <= 0.25))
		add("8", "controller peak RSS", fmt.Sprintf("%.0f MiB (%.1f KiB per node above the start)", s.Phase.ControllerPeakRSSMiB, s.RSSPerNodeKiB),
			"≤ 200 MiB", passFail(s.Phase.ControllerPeakRSSMiB <= 200))
	}
	if w := r.Scenarios.ScaleWarm; w != nil && w.Phase != nil {
		add("9", "Jobs created by a warm refresh (every image in node status)", fmt.Sprint(w.Phase.Jobs.Created), "0",
			passFail(w.Phase.Jobs.Created == 0 && w.Phase.Status != nil && int(w.Phase.Status.Counts.AlreadyPresent) == w.Pairs))
		add("9", "API writes per (image, node) in a warm refresh at scale", fmt.Sprintf("%.3f (%d writes, %d pairs)", w.WritesPerPair, w.Phase.Requests.Writes(), w.Pairs),
			"≤ 0.05", passFail(w.WritesPerPair <= 0.05))
		add("9", "time from the refresh request to final status", fmt.Sprintf("%.1f s (%d nodes × %d images)", w.Phase.Seconds, w.Nodes, w.Images), "(reported)", "")
	}
	if f := r.Scenarios.SmallBeside; f != nil && f.Alone != nil && f.Beside != nil {
		val := fmt.Sprintf("%.2fx (%.1f s / %.1f s)", f.Ratio, f.Beside.Seconds, f.Alone.Seconds)
		if !f.LargeRunning {
			val += "; the large cache ended first"
		}
		add("10", fmt.Sprintf("a %d × %d cache's time to final status beside a %d × %d one / alone", f.SmallNodes, f.SmallImages, f.LargeNodes, f.LargeImages),
			val, "≤ 3x", passFail(f.Ratio <= 3 && f.LargeRunning && succeeded(f.Alone) && succeeded(f.Beside)))
	}
}

func succeeded(p *Phase) bool {
	return p.Status != nil && p.Status.Status == "Succeeded"
}

// scaleSections are scenario 8's, 9's and 10's sections of the page.
func (r *Report) scaleSections(m *md) {
	if s := r.Scenarios.ScaleCold; s != nil {
		m.p("## Scenario 8: cold cache at the largest cluster, %d nodes × %d images (%d pulls), default caps", s.Nodes, s.Images, s.Pairs)
		m.p("")
		s.Run.describe(m, fmt.Sprintf("pull delay %s; its floor is one bare Job per node with the node's %d images", s.Run.Config.PullDelay, s.Images))
		rows := [][]string{
			{"nodes wanted; held", fmt.Sprintf("%d; %d", s.NodesWanted, s.Nodes)},
			{"what ran out", orNone(s.ShortBy)},
			{"time to create the nodes", f1(s.NodesCreateSeconds) + " s"},
			{"final status exact", fmt.Sprint(s.Exact)},
			{"problems", orNone(strings.Join(s.Problems, "; "))},
			{"API writes per (image, node)", fmt.Sprintf("%.3f", s.WritesPerPair)},
			{"per node: controller RSS above its start; CPU; requests", fmt.Sprintf("%.1f KiB; %.1f ms; %.2f", s.RSSPerNodeKiB, s.CPUPerNodeMillis, s.RequestsPerNode)},
		}
		if s.Phase != nil && s.Nodes < s.NodesWanted {
			at := s.Phase.ControllerStartRSSMiB + s.RSSPerNodeKiB*float64(s.NodesWanted)/1024
			rows = append(rows, []string{fmt.Sprintf("controller peak RSS at %d nodes by that slope", s.NodesWanted), fmt.Sprintf("%.0f MiB", at)})
		}
		m.table([]string{"figure", "value"}, rows)
		if s.Phase != nil {
			r.phaseTable(m, columns("", s.Floor, []*Phase{s.Phase})...)
		}
	}
	if s := r.Scenarios.ScaleWarm; s != nil {
		r.warmSection(m, fmt.Sprintf("## Scenario 9: warm refresh at the largest cluster, %d nodes × %d images, every image in node status (%d pairs)", s.Nodes, s.Images, s.Pairs), s)
	}
	if s := r.Scenarios.SmallBeside; s != nil {
		m.p("## Scenario 10: a %d × %d cache created while a %d × %d cache runs", s.SmallNodes, s.SmallImages, s.LargeNodes, s.LargeImages)
		m.p("")
		s.Run.describe(m, fmt.Sprintf("pull delay %s, default caps, one controller for all three operations", s.Run.Config.PullDelay))
		m.table([]string{"figure", "value"}, [][]string{
			{"the large cache's Jobs in flight when the small one was created", fmt.Sprint(s.LargeJobsAtSmallCreate)},
			{"the large cache still running when the small one ended", fmt.Sprint(s.LargeRunning)},
			{"the small cache's time beside the large one / alone", fmt.Sprintf("%.2fx", s.Ratio)},
		})
		m.p("The small cache's time beside the large one is its own; the requests, writes and CPU of its column are")
		m.p("the controller's while both ran, the large cache's included.")
		m.p("")
		var runs []*Phase
		for _, p := range []*Phase{s.Alone, s.Beside, s.Large} {
			if p != nil {
				runs = append(runs, p)
			}
		}
		r.phaseTable(m, columns("", nil, runs)...)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// scaleMeasured is how scenarios 8 to 10 are measured, for the page's last section.
func scaleMeasured(m *md) {
	m.p("- **Largest cluster** (scenarios 8 and 9): a sandbox of its own, started empty and grown %d nodes at a", ScaleBatch)
	m.p("  time to `BENCH_NODES_8` (5000, the most Kubernetes supports); a batch that fails stops it, and the page says")
	m.p("  what ran out. Scenario 8's floor is one bare Job per node with the node's images as its containers, the pod")
	m.p("  the controller's node Job has; the Job-per-pair floor of 50,000 Jobs would take hours on the stock profile.")
	m.p("  *Exact*: the final status Succeeded with every pair counted succeeded and none failed, in flight or waiting,")
	m.p("  and the controller's metrics and the benchmark's watch agreeing. Scenario 9 then sets every node's")
	m.p("  `status.images` to all `BENCH_WARM_IMAGES` images and measures one refresh, as scenario 6 does.")
	m.p("- **Small beside large** (scenario 10): one controller with the default caps; the small cache (%d labelled", SmallNodes)
	m.p("  nodes × %d images of its own) alone, then a cache of scenario 1's scale with images of its own, and once its", SmallImages)
	m.p("  first Job is seen, the same small cache on %d other nodes; each timed from its create to its final status.", SmallNodes)
}

// The scale of scenario 10's small cache, and the nodes scenario 8 adds at a time.
const (
	SmallNodes  = 2
	SmallImages = 10
	ScaleBatch  = 500
)
