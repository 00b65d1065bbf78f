package report

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
)

func (c Config) Runs(s int) bool {
	for _, n := range c.Scenarios {
		if n == s {
			return true
		}
	}
	return false
}

// count returns the requests of the given verbs on a resource.
func (d RequestDelta) Count(resource string, verbs ...string) int {
	n := 0
	for _, v := range verbs {
		n += d.ByVerbResource[v+" "+resource]
	}
	return n
}

// writes returns every write, on any resource.
func (d RequestDelta) Writes() int {
	n := 0
	for k, v := range d.ByVerbResource {
		if IsWrite(strings.SplitN(k, " ", 2)[0]) {
			n += v
		}
	}
	return n
}

func (d RequestDelta) SortedKeys() []string {
	var keys []string
	for k := range d.ByVerbResource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

func f2(v float64) string { return fmt.Sprintf("%.2f", v) }

// progressWritesPerSecond leaves out the two writes every operation makes
// whatever its length (Processing at the start, the final status): the
// Target is on how progress writes are coalesced.
func progressWritesPerSecond(p *Phase) float64 {
	secs := statusWritesSeconds(p)
	if secs <= 0 {
		return 0
	}
	return float64(max(0, p.StatusWrites-2*max(p.StatusOperations, 1))) / secs
}

// operationsNote names the operations a phase's status writes span, when
// there were more than one: each has a start and a final write of its own.
func operationsNote(p *Phase) string {
	if p.StatusOperations <= 1 {
		return ""
	}
	return fmt.Sprintf(" over %d operations", p.StatusOperations)
}

// statusWritesSeconds is the span a phase's status writes were counted over.
func statusWritesSeconds(p *Phase) float64 {
	if p.StatusWritesSeconds > 0 {
		return p.StatusWritesSeconds
	}
	return p.Seconds
}

// apiWritesPerPair is what an operation writes per (image, node): its Job
// writes and its cache's status writes.
func apiWritesPerPair(p *Phase) float64 {
	if p.Pairs == 0 {
		return 0
	}
	return p.JobWritesPerPair + float64(p.StatusWrites)/float64(p.Pairs)
}

// profileName is the profile a run was measured on; runs before it was
// recorded were all on the tuned one.
func profileName(p string) string {
	if p == "" {
		return ProfileTuned
	}
	return p
}

func profileText(p string) string {
	switch p {
	case ProfileTuned:
		return "tuned: kcm syncs 50 Jobs at a time at 300 QPS, the scheduler binds at 300 QPS"
	case ProfileStock:
		return "stock: kcm syncs 5 Jobs at a time at 20 QPS, the scheduler at 50 QPS (managed clusters' defaults)"
	case "":
		return "tuned (the runs before the profile was recorded)"
	}
	return p
}

func (r *Report) EvalTargets() []Target {
	var out []Target
	add := func(s, fig, val, tgt, pass string) {
		out = append(out, Target{Scenario: s, Figure: fig, Value: val, Target: tgt, Pass: pass})
	}
	common := func(s string, p *Phase) {
		add(s, "Job writes per (image, node)", f2(p.JobWritesPerPair), "≤ 2", passFail(p.JobWritesPerPair <= 2))
		pw := progressWritesPerSecond(p)
		add(s, "status writes per cache per second (progress; start and final left out)",
			fmt.Sprintf("%.2f (%d writes in %.0f s%s, at most %d in one second)", pw, p.StatusWrites, statusWritesSeconds(p), operationsNote(p), p.StatusWritesPeakPerSecond),
			"≤ about 1", passFail(pw <= 1.05))
	}
	if c := r.Scenarios.ColdCache; c != nil {
		for _, p := range c.Runs {
			s := "1 " + p.Caps.Name
			if p.Caps.Name == OpenCapsName {
				// On stock settings kcm's Job syncs set the floor's pace,
				// and node pull Jobs are to beat it five times over.
				limit, text := 1.25, "≤ 1.25x"
				if c.Run.Config.Profile == ProfileStock {
					limit, text = 0.2, "≤ 0.2x (1/5 of the Job-per-pair floor)"
				}
				add(s, "time to final status / floor", fmt.Sprintf("%.2fx (%.0f s / %.0f s)", p.RatioToFloor, p.Seconds, c.Floor.Seconds), text, passFail(p.RatioToFloor <= limit))
				apw := apiWritesPerPair(p)
				add(s, "API writes per (image, node): Jobs and status", f2(apw), "≤ 0.3", passFail(apw <= 0.3))
			} else {
				add(s, "time to final status / floor", fmt.Sprintf("%.2fx (%.0f s / %.0f s)", p.RatioToFloor, p.Seconds, c.Floor.Seconds), "(none: the caps bind by design)", "")
				bound := (float64(p.Caps.Burst) + float64(p.Caps.QPS)*(RateWindow+1)) / RateWindow
				add(s, "controller API requests per second: mean; busiest 10 s",
					fmt.Sprintf("%.1f; %.1f", p.Requests.MeanPerSecond, p.Requests.PeakWindowPerSecond),
					fmt.Sprintf("mean ≤ %d (--kube-api-qps); busiest 10 s ≤ %.0f (qps + burst/10)", p.Caps.QPS, bound),
					passFail(p.Requests.MeanPerSecond <= float64(p.Caps.QPS) && p.Requests.PeakWindowPerSecond <= bound))
				add(s, "peak Jobs in flight (API watch): total; per node",
					fmt.Sprintf("%d; %d", p.Jobs.PeakInFlight, p.Jobs.PeakInFlightNode),
					fmt.Sprintf("≤ %d; ≤ %d", p.Caps.MaxJobs, p.Caps.MaxJobsPerNode),
					passFail(p.Jobs.PeakInFlight <= p.Caps.MaxJobs && p.Jobs.PeakInFlightNode <= p.Caps.MaxJobsPerNode))
			}
			common(s, p)
			add(s, "controller peak RSS", fmt.Sprintf("%.0f MiB", p.ControllerPeakRSSMiB), "≤ 100 MiB", passFail(p.ControllerPeakRSSMiB <= 100))
		}
	}
	if n := r.Scenarios.NewNodes; n != nil && n.Phase != nil {
		add("2", "first Job on each new node after it was Ready (max; median)", fmt.Sprintf("%.1f s; %.1f s", n.FirstJobAfterReadyMax, n.FirstJobAfterReadyMedian), "≤ 5 s", passFail(n.FirstJobAfterReadyMax <= 5))
		// A node's images go in node Jobs of up to 32, each pulling one
		// image at a time and counting one against the per-node cap: the
		// pulls one after another are the images over the Jobs that run
		// side by side.
		jobsPerNode := math.Ceil(float64(n.Images) / float64(jobs.MaxContainers))
		serial := math.Ceil(float64(n.Images) / math.Min(jobsPerNode, float64(n.Phase.Caps.MaxJobsPerNode)))
		limit := 5 + serial*n.PullDelaySeconds
		add("2", "all images of each new node pulled after it was Ready (max)", f1(n.AllPulledAfterReadyMax)+" s",
			fmt.Sprintf("≤ 5 s + %.0f pulls one after another (%d images in node Jobs of up to %d, %d per node at once) × %.0f s pull = %.0f s",
				serial, n.Images, jobs.MaxContainers, n.Phase.Caps.MaxJobsPerNode, n.PullDelaySeconds, limit),
			passFail(n.AllPulledAfterReadyMax <= limit))
		add("2", "new nodes that got every image", fmt.Sprintf("%d of %d", n.NewNodes-len(n.NodesNotPulled), n.NewNodes), "all", passFail(len(n.NodesNotPulled) == 0))
		add("2", "Jobs created on other nodes", fmt.Sprint(n.JobsOnOtherNodes), "0", passFail(n.JobsOnOtherNodes == 0))
		if n.Floor != nil {
			add("2", "time from the last node Ready to final status / floor", fmt.Sprintf("%.2fx (%.1f s / %.1f s)", n.Phase.RatioToFloor, n.Phase.Seconds, n.Floor.Seconds), "(none)", "")
		}
		common("2", n.Phase)
	}
	if s := r.Scenarios.SteadyRefresh; s != nil {
		add("3", "Jobs created by refreshes of complete caches", fmt.Sprint(s.JobsCreated), "0", passFail(s.JobsCreated == 0 && s.Refreshes > 0))
		add("3", "API writes per cache per refresh", fmt.Sprintf("%.1f (%d refreshes)", s.WritesPerRefresh, s.Refreshes), "(reported)", "")
	}
	if f := r.Scenarios.FastPods; f != nil {
		exact := 0
		for _, run := range f.Runs {
			if run.Exact {
				exact++
			}
		}
		add("4", "runs with every result seen, none failed or pending", fmt.Sprintf("%d of %d", exact, len(f.Runs)), "every run",
			passFail(f.Exact && len(f.Runs) == f.Run.Config.FastRuns))
	}
	if h := r.Scenarios.HeldNodes; h != nil && h.Phase != nil {
		released := h.HeldNodes - len(h.NodesNotReleased)
		add("5", "held nodes released once their images were pulled (not at the timeout)",
			fmt.Sprintf("%d of %d (%s)", h.ReleasedBy["cached"], h.HeldNodes, reasons(h.ReleasedBy)), "all",
			passFail(released == h.HeldNodes && h.ReleasedBy["cached"] == h.HeldNodes))
		// The hold is the new-node pulls plus the release: held against
		// scenario 2 when both ran at one scale (as in a full run, back to
		// back), with the release's own part beside it.
		add("5", "release after the node's last pull finished (max; median)", fmt.Sprintf("%.2f s; %.2f s", h.ReleaseAfterPulledMax, h.ReleaseAfterPulledMedian),
			"≤ 5 s (scenario 2's reaction time)", passFail(h.ReleaseAfterPulledMax <= 5))
		hold := fmt.Sprintf("%.1f s; %.1f s", h.HoldAfterReadyMax, h.HoldAfterReadyMedian)
		n := r.Scenarios.NewNodes
		switch {
		case n == nil || n.Phase == nil:
			add("5", "hold per node after it was Ready (max; median)", hold, "(scenario 2 not measured)", "")
		case n.ClusterNodes != h.ClusterNodes || n.NewNodes != h.HeldNodes || n.Images != h.Images || n.PullDelaySeconds != h.PullDelaySeconds:
			add("5", "hold per node after it was Ready (max; median)", hold,
				fmt.Sprintf("(reported: scenario 2 ran at another scale, %d new nodes × %d images on %d, all pulled %.1f s after Ready at most)",
					n.NewNodes, n.Images, n.ClusterNodes, n.AllPulledAfterReadyMax), "")
		default:
			limit := n.AllPulledAfterReadyMax + 5
			add("5", "hold per node after it was Ready (max; median)", hold,
				fmt.Sprintf("≤ scenario 2's all images pulled after Ready (%.1f s) + 5 s = %.1f s", n.AllPulledAfterReadyMax, limit),
				passFail(h.HoldAfterReadyMax <= limit))
		}
	}
	if w := r.Scenarios.WarmRefresh; w != nil && w.Phase != nil {
		add("6", "API writes per (image, node) in a warm refresh",
			fmt.Sprintf("%.3f (%d writes, %d pairs)", w.WritesPerPair, w.Phase.Requests.Writes(), w.Pairs), "(reported)", "")
		add("6", "images re-checked per node equals the images not in node status",
			fmt.Sprintf("%d of %d nodes (%d re-checked, %d not in node status)", w.Nodes-len(w.NodesMismatched), w.Nodes, w.RecheckedPairs, w.UnreportedPairs),
			"every node", passFail(len(w.NodesMismatched) == 0 && w.RecheckedPairs == w.UnreportedPairs))
		found := warmFound(w)
		add("6", "re-checks that found the image (pull succeeded; none failed)", fmt.Sprintf("%d of %d", found, w.UnreportedPairs), "all",
			passFail(found == w.UnreportedPairs && w.Phase.Jobs.Failed == 0 && w.Phase.Status != nil &&
				w.Phase.Status.Counts.Failed == 0 && int(w.Phase.Status.Counts.AlreadyPresent) == w.ReportedPairs))
	}
	if o := r.Scenarios.Original; o != nil && o.Original != nil {
		orig := o.Original
		add("7", "the original v0.10: final status; time / floor",
			fmt.Sprintf("%s; %.2fx (%.0f s / %.0f s)", orig.Status.Status, orig.RatioToFloor, orig.Seconds, o.Floor.Seconds), "(reported)", "")
		for _, p := range o.Runs {
			add("7", "the original's time / ours, "+p.Caps.Name, fmt.Sprintf("%.1fx (%.0f s / %.0f s)", orig.Seconds/p.Seconds, orig.Seconds, p.Seconds), "(reported)", "")
		}
	}
	r.scaleTargets(add)
	return out
}

// warmFound is how many of a warm refresh's re-checks found the image on the node: the
// pulls the controller counted succeeded (kubefledged_image_pulls_total), each one pod of a
// pull Job that started its container.
func warmFound(w *WarmResult) int {
	return int(w.Phase.Metrics[`kubefledged_image_pulls_total{result="succeeded"}`])
}

func (ri RunInfo) describe(m *md, what string) {
	m.p("Measured %s (load average %s at its start) on the %s control plane; %s.", ri.Started, ri.LoadAvg, profileName(ri.Config.Profile), what)
	m.p("")
}

func (m *md) p(format string, a ...any) { fmt.Fprintf(m, format+"\n", a...) }

func (m *md) table(head []string, rows [][]string) {
	m.p("| %s |", strings.Join(head, " | "))
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
	}
	m.p("|%s|", strings.Join(sep, "|"))
	for _, r := range rows {
		m.p("| %s |", strings.Join(r, " | "))
	}
	m.p("")
}

func (r *Report) Markdown(limits []byte) string {
	var m md
	m.p("# Benchmarks")
	m.p("")
	m.p("Written by `make bench` (`test/bench`) on %s, in %.0f minutes. Every figure comes from one run on the", r.Generated, r.DurationMinutes)
	m.p("sandbox (a real control plane with kwok nodes) and is compared with a *floor* measured in the same run on the same")
	m.p("sandbox: the same number of bare Jobs, one per (image, node), with the same pod, created by the benchmark as fast")
	m.p("as the API server takes them. Absolute times drift with the machine's load; the ratios are what to compare.")
	m.p("The raw figures are in `docs/benchmarks.json`; how each is measured is at the end.")
	m.p("")
	if len(r.Errors) > 0 {
		m.p("**The run did not complete:**")
		m.p("")
		for _, e := range r.Errors {
			m.p("- %s", e)
		}
		m.p("")
	}
	m.p("## Machine")
	m.p("")
	c := r.Config
	m.table([]string{"", ""}, [][]string{
		{"CPUs (nproc)", fmt.Sprint(r.Machine.CPUs)},
		{"memory", fmt.Sprintf("%.1f GiB", r.Machine.MemoryGiB)},
		{"Go", r.Machine.Go},
		{"Kubernetes (etcd, kube-apiserver, kcm, scheduler)", r.Machine.Kubernetes},
		{"kwok", r.Machine.Kwok},
		{"kernel", r.Machine.Kernel},
		{"load average at start; at end", r.Machine.LoadAvgStart + "; " + r.Machine.LoadAvgEnd},
		{"control plane (SANDBOX_PROFILE)", profileText(c.Profile)},
		{"floor", fmt.Sprintf("%d creating goroutines, no client rate limit", c.FloorParallelism)},
	})
	m.p("The machine is shared with other work (builds and tests of other engineers): the CPU tables below say how much")
	m.p("of it went elsewhere during each phase.")
	m.p("")

	m.p("## Targets")
	m.p("")
	if r.Tuned != nil {
		m.p("The last column is the same figure on the tuned control plane, from `%s` (written %s by a run with", filepath.ToSlash(TunedJSONPath), r.Tuned.Generated)
		m.p("`SANDBOX_PROFILE=tuned`), with its pass and, where it differs, its target; *not run* where that run did not")
		m.p("measure the figure.")
	} else {
		m.p("The last column would hold the same figure on the tuned control plane (`%s`, written by a run with", filepath.ToSlash(TunedJSONPath))
		m.p("`SANDBOX_PROFILE=tuned`): there is none yet.")
	}
	m.p("")
	m.table([]string{"scenario", "figure", "measured", "target", "pass", "tuned profile: measured; pass"}, r.targetRows())

	if s := r.Scenarios.ColdCache; s != nil {
		m.p("## Scenario 1: cold cache, %d nodes × %d images (%d pulls)", s.Nodes, s.Images, s.Pairs)
		m.p("")
		s.Run.describe(&m, fmt.Sprintf("pull delay %s", s.Run.Config.PullDelay))
		cols := columns("", s.Floor, s.Runs)
		if t := r.tunedColdCache(); t != nil {
			t.Run.describe(&m, fmt.Sprintf("the *tuned* columns, %d nodes × %d images, pull delay %s", t.Nodes, t.Images, t.Run.Config.PullDelay))
			cols = append(cols, columns("tuned: ", t.Floor, t.Runs)...)
		} else {
			cols = append(cols, column{head: "tuned profile"})
		}
		r.phaseTable(&m, cols...)
	}
	if s := r.Scenarios.NewNodes; s != nil {
		m.p("## Scenario 2: %d nodes join a complete %d-node cluster (%d pulls)", s.NewNodes, s.ClusterNodes, s.Pairs)
		m.p("")
		s.Run.describe(&m, fmt.Sprintf("pull delay %s, default caps", s.Run.Config.PullDelay))
		if s.Phase != nil {
			m.table([]string{"figure", "value"}, [][]string{
				{"new-node operations started", fmt.Sprint(s.Operations)},
				{"from the first node create to final status", f1(s.SecondsFromCreate) + " s"},
				{"from the last node Ready to final status", f1(s.Phase.Seconds) + " s"},
				{"first Job on a new node after it was Ready: max; median", fmt.Sprintf("%.2f s; %.2f s", s.FirstJobAfterReadyMax, s.FirstJobAfterReadyMedian)},
				{"last Job on a new node created after it was Ready (max)", f1(s.AllStartedAfterReadyMax) + " s"},
				{"all images of a new node pulled after it was Ready (max)", f1(s.AllPulledAfterReadyMax) + " s"},
				{"Jobs created on other nodes", fmt.Sprint(s.JobsOnOtherNodes)},
				{"new nodes without every image", notPulled(s.NodesNotPulled)},
			})
			r.phaseTable(&m, columns("", s.Floor, []*Phase{s.Phase})...)
		}
	}
	if s := r.Scenarios.SteadyRefresh; s != nil {
		m.p("## Scenario 3: steady refresh of %d complete caches (%d nodes reporting all %d images)", s.Caches, s.Nodes, s.Images)
		m.p("")
		s.Run.describe(&m, "default caps")
		var statuses []string
		for _, k := range sortedNames(s.FinalStatuses) {
			statuses = append(statuses, fmt.Sprintf("%s ×%d", k, s.FinalStatuses[k]))
		}
		m.table([]string{"figure", "value"}, [][]string{
			{"refresh period", fmt.Sprintf("%.0f s", s.RefreshEverySeconds)},
			{"refreshes observed", fmt.Sprintf("%d in %.0f s", s.Refreshes, s.WindowSeconds)},
			{"final statuses", strings.Join(statuses, ", ")},
			{"every image reported already present", fmt.Sprint(s.AllPresent)},
			{"Jobs created", fmt.Sprint(s.JobsCreated)},
			{"API writes per refresh", f2(s.WritesPerRefresh)},
			{"API requests per refresh", f2(s.RequestsPerRefresh)},
			{"controller CPU", fmt.Sprintf("%.1f s over %.0f s", s.ControllerCPUSeconds, s.WindowSeconds)},
		})
		m.p("Requests by verb and resource over the window:")
		m.p("")
		m.table([]string{"request", "count"}, requestRows(s.Requests))
	}
	if s := r.Scenarios.FastPods; s != nil {
		m.p("## Scenario 4: %d fast pulls (%d nodes × %d images, pods finish in milliseconds)", s.Pulls, s.Nodes, s.Images)
		m.p("")
		s.Run.describe(&m, fmt.Sprintf("no pull delay, pull deadline %s", s.Run.Config.FastDeadline))
		var runs []*Phase
		var rows [][]string
		for i, run := range s.Runs {
			runs = append(runs, &run.Phase)
			problems := "none"
			if len(run.Problems) > 0 {
				problems = strings.Join(run.Problems, "; ")
			}
			st := run.Status
			rows = append(rows, []string{fmt.Sprint(i + 1), run.Caps.Name, st.Status,
				fmt.Sprintf("%d/%d/%d/%d", st.Counts.Succeeded, st.Counts.Failed, st.Counts.InFlight, st.Counts.Waiting), fmt.Sprint(run.Exact), problems})
		}
		m.table([]string{"run", "caps", "status", "succeeded/failed/inFlight/waiting", "exact", "problems"}, rows)
		r.phaseTable(&m, columns("", s.Floor, runs)...)
	}

	if s := r.Scenarios.HeldNodes; s != nil {
		m.p("## Scenario 5: %d nodes join a complete %d-node cluster with the startup taint (%d pulls)", s.HeldNodes, s.ClusterNodes, s.Pairs)
		m.p("")
		s.Run.describe(&m, fmt.Sprintf("pull delay %s, default caps, `--node-startup-taint=%s`, timeout 10m", s.Run.Config.PullDelay, StartupTaint))
		if s.Phase != nil {
			m.table([]string{"figure", "value"}, [][]string{
				{"hold per node, from its creation to its release: median; p90; max", fmt.Sprintf("%.1f s; %.1f s; %.1f s", s.HoldMedian, s.HoldP90, s.HoldMax)},
				{"hold per node, from Ready to its release: median; max", fmt.Sprintf("%.1f s; %.1f s", s.HoldAfterReadyMedian, s.HoldAfterReadyMax)},
				{"release after the node's last pull finished: median; max", fmt.Sprintf("%.2f s; %.2f s", s.ReleaseAfterPulledMedian, s.ReleaseAfterPulledMax)},
				{"from the first node create to the last release", f1(s.AllReleasedSeconds) + " s"},
				{"releases by reason (controller metric)", reasons(s.ReleasedBy)},
				{"mean of `kubefledged_node_startup_taint_hold_seconds` (1-s creation times)", f1(s.HistogramMeanSeconds) + " s"},
				{"nodes not released", notPulled(s.NodesNotReleased)},
			})
			r.phaseTable(&m, columns("", nil, []*Phase{s.Phase})...)
		}
	}
	if s := r.Scenarios.WarmRefresh; s != nil {
		r.warmSection(&m, fmt.Sprintf("## Scenario 6: warm refresh of %d nodes × %d images, node status cut at 50 images (%d pairs)", s.Nodes, s.Images, s.Pairs), s)
	}
	if s := r.Scenarios.Original; s != nil {
		m.p("## Scenario 7: the original kube-fledged beside ours, %d nodes × %d images (%d pulls)", s.Nodes, s.Images, s.Pairs)
		m.p("")
		s.Run.describe(&m, fmt.Sprintf("pull delay %s; the original is %s, built from its source", s.Run.Config.PullDelay, s.Version))
		m.p("The original creates one Job per (image, node). It takes only an in-cluster configuration, so it reaches")
		m.p("the API server through the counting proxy over TLS, with a service account's token, in a mount namespace")
		m.p("of its own. It ran with `--image-pull-deadline-duration=%s` and no refresh, against the ImageCache CRD", s.Run.Config.Deadline)
		m.p("without its status subresource (the original writes status with updates of the whole object), in the same")
		m.p("sandbox as the floor and ours, one after the other. It serves no metrics, so its Go heap reads 0.")
		m.p("")
		r.phaseTable(&m, columns("", s.Floor, append([]*Phase{s.Original}, s.Runs...))...)
	}
	r.scaleSections(&m)
	if len(r.Profiles) > 0 {
		m.p("## CPU profile of the controller during scenario 1")
		m.p("")
		m.p("Back-to-back 10-second CPU profiles of the controller's process over each run, merged")
		m.p("(`bin/bench/cpu-s1-*.pb.gz`; `go tool pprof -http : <file>` to browse).")
		m.p("")
		for _, k := range sortedNames(r.Profiles) {
			m.p("### %s", k)
			m.p("")
			m.p("```")
			m.p("%s", r.Profiles[k])
			m.p("```")
			m.p("")
		}
	}

	if limits != nil {
		m.p("%s", strings.TrimSpace(string(limits)))
		m.p("")
	}
	m.p("## How the figures are measured")
	m.p("")
	m.p("- **Time to final status**: from the create of the cache to the first watch event showing it final (not")
	m.p("  Processing, with a completion time and the operation's reason). **Floor**: from the first create to the last")
	m.p("  Job seen Complete through a watch.")
	m.p("- **Peak Jobs in flight**: a watch on the namespace's Jobs counts those created and not yet Complete or Failed.")
	m.p("- **API requests**: the controller talks to the API server through a counting proxy in the benchmark's")
	m.p("  process, which classifies each request by verb and resource as the API server's audit log would (a")
	m.p("  `deletecollection` counts once). client-go's `rest_client_requests_total` (by method and code, scraped from")
	m.p("  the controller's metrics endpoint before and after) is in the JSON as a cross-check. **Job writes per")
	m.p("  (image, node)**: creates, updates, patches, deletes and deletecollections of Jobs over the pairs. **Status")
	m.p("  writes**: every write to the cache (status or metadata) during the operation.")
	m.p("- **Controller CPU and RSS**: the controller runs as its own process (`test/bench/controller`: the product's")
	m.p("  `commands.Main` plus a pprof listener), started fresh for each run. CPU is utime+stime from")
	m.p("  `/proc/<pid>/stat` over the run; peak RSS is `VmHWM` from `/proc/<pid>/status`, the peak since the process")
	m.p("  started just before the run. The sandbox's processes are found by their arguments and measured the same way;")
	m.p("  *other* is the machine's busy time (`/proc/stat`) that none of them used.")
	m.p("- **Non-binding caps**: `--max-concurrent-jobs` above the number of pulls, `--max-concurrent-jobs-per-node`")
	m.p("  above the images, `--kube-api-qps 5000 --kube-api-burst 10000`. **Default caps**: the flags' defaults (100,")
	m.p("  2, 100, 200)%s. The pull deadline is %s in scenarios 1-3, 5 and 6 so that no Job of a loaded control plane expires.", r.windowNote(), c.Deadline)
	m.p("- **Hold** (scenario 5): per node, from the benchmark's watch first seeing the node to it seeing the node")
	m.p("  without the startup taint; the controller's histogram counts from the node's creationTimestamp, whole seconds.")
	m.p("- **Warm refresh** (scenario 6): the benchmark sets each node's `status.images` as a kubelet lists them (the 50")
	m.p("  largest, `--node-status-max-images`), creates the cache and lets the controller complete it (not measured),")
	m.p("  then asks for a refresh (the `%s` annotation) and measures it to its final status.", v1alpha2.RefreshAnnotation)
	m.p("  A re-check *finds* the image when its pull succeeds: kwok pulls nothing, and the sandbox runs it without delay.")
	scaleMeasured(&m)
	m.p("")
	m.p("Run it with `make bench`: a run on the stock control plane (`docs/benchmarks.json`), then one on the tuned")
	m.p("one (`docs/benchmarks-tuned.json`, the second column), each with its own floors, then this page. The tuned run")
	m.p("adds a full run (its scenarios 1-4 took 40 minutes at the default scale in the last tuned runs);")
	m.p("`BENCH_PROFILES=stock` skips it, `BENCH_PROFILES=tuned` runs it alone. The scale comes from the environment:")
	m.p("`BENCH_NODES`, `BENCH_IMAGES`, `BENCH_NEW_NODES`, `BENCH_HELD_NODES`, `BENCH_FAST_PULLS`, `BENCH_FAST_NODES`,")
	m.p("`BENCH_FAST_RUNS`, `BENCH_PULL_DELAY`, `BENCH_REFRESH_CACHES`, `BENCH_REFRESH_CYCLES`, `BENCH_REFRESH_EVERY`,")
	m.p("`BENCH_WARM_NODES`, `BENCH_WARM_IMAGES`, `BENCH_WARM_OTHER`, `BENCH_ORIGINAL_NODES`, `BENCH_NODES_8` (scenarios 8")
	m.p("and 9), `BENCH_SCENARIOS` (e.g. `1,4`; 1 to 10). `BENCH_REPORT_ROOT=<dir>` writes the figures (and reads those")
	m.p("`BENCH_MERGE` keeps) under `<dir>/docs` instead of the repository's, for a trial run; `go run ./hack/benchreport")
	m.p("-root <dir>` renders its page there.")
	m.p("Scenario 7 runs only with `BENCH_ORIGINAL_SRC`, a git checkout of github.com/senthilrch/kube-fledged (tag")
	m.p("v0.10.0), which it builds: the Go module proxy refuses that module.")
	m.p("`BENCH_MERGE=1` keeps the scenarios not run from the previous JSON of the same profile (each scenario keeps")
	m.p("its own floor, from its own run); `BENCH_RENDER=1` only re-renders this file from the JSON, e.g. after editing")
	m.p("`test/bench/limits.md`.")
	return m.String()
}

// warmSection renders a warm refresh (scenarios 6 and 9) under its heading.
// windowNote says how scenario 1's runs set the pacing window, when they
// record it: runs from before it had none.
func (r *Report) windowNote() string {
	c := r.Scenarios.ColdCache
	if c == nil {
		return ""
	}
	for _, p := range c.Runs {
		if p.Caps.Name != OpenCapsName && p.Caps.JobStartDelay != "" {
			return fmt.Sprintf(", with the pacing window's `--max-job-start-delay` %s; the non-binding caps turn the window off", p.Caps.JobStartDelay)
		}
	}
	return ""
}

func (r *Report) warmSection(m *md, heading string, s *WarmResult) {
	m.p("%s", heading)
	m.p("")
	others := fmt.Sprintf("node i holds i mod %d other, larger images", s.OtherImagesMax+1)
	if s.OtherImagesMax == 0 {
		others = "the nodes hold no other images"
	}
	s.Run.describe(m, "no pull delay (the images are on the nodes), default caps, "+others)
	if s.Phase != nil {
		st := StatusFigures{}
		if s.Phase.Status != nil {
			st = *s.Phase.Status
		}
		m.table([]string{"figure", "value"}, [][]string{
			{"cached pairs the node status lists; leaves out", fmt.Sprintf("%d; %d", s.ReportedPairs, s.UnreportedPairs)},
			{"nodes by cached images left out of their status", byCount(s.NodesByUnreported)},
			{"time from the refresh request to final status", f1(s.Phase.Seconds) + " s"},
			{"pulls re-checked (in the refresh's Jobs); most on one node", fmt.Sprintf("%d; %d", s.RecheckedPairs, s.RecheckedMaxPerNode)},
			{"nodes whose re-checks differ from the images left out", notPulled(s.NodesMismatched)},
			{"final status: already present; succeeded; failed", fmt.Sprintf("%s: %d; %d; %d", st.Status, st.Counts.AlreadyPresent, st.Counts.Succeeded, st.Counts.Failed)},
			{"API writes per (image, node); requests per (image, node)", fmt.Sprintf("%.3f; %.3f", s.WritesPerPair, s.RequestsPerPair)},
		})
		r.phaseTable(m, columns("", nil, []*Phase{s.Phase})...)
	}
}

func requestRows(d RequestDelta) [][]string {
	var rows [][]string
	for _, k := range d.SortedKeys() {
		rows = append(rows, []string{"`" + k + "`", fmt.Sprint(d.ByVerbResource[k])})
	}
	return rows
}

// column is one column of a phase table: a floor, a run, or neither, a run that did not
// happen, which says so.
type column struct {
	head  string
	floor *FloorResult
	run   *Phase
}

// columns are the floor (if any) and the runs of one scenario, their heads prefixed.
func columns(prefix string, fl *FloorResult, runs []*Phase) []column {
	var out []column
	if fl != nil {
		out = append(out, column{head: prefix + "floor (bare Jobs)", floor: fl})
	}
	for _, p := range runs {
		out = append(out, column{head: prefix + p.Name, run: p})
	}
	return out
}

// tunedColdCache is scenario 1 of the tuned run, or nil.
func (r *Report) tunedColdCache() *ColdResult {
	if r.Tuned == nil {
		return nil
	}
	return r.Tuned.Scenarios.ColdCache
}

// targetRows are the Targets table: each target of this run with the same figure of the
// tuned run beside it, and the tuned run's targets this run lacks, each with its scenario.
func (r *Report) targetRows() [][]string {
	key := func(t Target) string { return t.Scenario + "\x00" + t.Figure }
	tuned := map[string]Target{}
	if r.Tuned != nil {
		for _, t := range r.Tuned.Targets {
			tuned[key(t)] = t
		}
	}
	var rows [][]string
	for _, t := range r.Targets {
		cell := "not run"
		if tt, ok := tuned[key(t)]; ok {
			cell = tunedCell(tt, t.Target)
			delete(tuned, key(t))
		}
		rows = append(rows, []string{t.Scenario, t.Figure, t.Value, t.Target, orDash(t.Pass), cell})
	}
	if r.Tuned != nil {
		for _, tt := range r.Tuned.Targets {
			if _, left := tuned[key(tt)]; left {
				rows = append(rows, []string{tt.Scenario, tt.Figure, "not run", tt.Target, "—", tunedCell(tt, tt.Target)})
			}
		}
	}
	// Rows go in scenario order: each row's scenario is its number, then what names its run.
	sort.SliceStable(rows, func(i, j int) bool { return scenarioNumber(rows[i][0]) < scenarioNumber(rows[j][0]) })
	return rows
}

// scenarioNumber is the number a Target's scenario starts with ("1 default caps": 1).
func scenarioNumber(s string) int {
	n, _ := strconv.Atoi(strings.SplitN(s, " ", 2)[0])
	return n
}

// tunedCell is a tuned run's figure and pass, and its target where that is not the one
// of the main column's row (the targets of scenario 1 depend on the profile).
func tunedCell(t Target, target string) string {
	cell := t.Value + "; " + orDash(t.Pass)
	if t.Target != target {
		cell += " (target " + t.Target + ")"
	}
	return cell
}

func orDash(pass string) string {
	if pass == "" {
		return "—"
	}
	return pass
}

// phaseTable renders floors and runs side by side.
func (r *Report) phaseTable(m *md, cols ...column) {
	head := []string{"figure"}
	hasFloor := false
	for _, c := range cols {
		head = append(head, c.head)
		hasFloor = hasFloor || c.floor != nil
	}
	var rows [][]string
	// row renders one figure of each column; floor is nil for a figure floors lack.
	row := func(name string, floor func(*FloorResult) string, run func(*Phase) string) {
		out := []string{name}
		for _, c := range cols {
			switch {
			case c.floor != nil && floor != nil:
				out = append(out, floor(c.floor))
			case c.run != nil:
				out = append(out, run(c.run))
			case c.floor == nil && len(rows) == 0:
				out = append(out, "not run")
			default:
				out = append(out, "")
			}
		}
		rows = append(rows, out)
	}
	row("time (s)", func(f *FloorResult) string { return f1(f.Seconds) }, func(p *Phase) string { return f1(p.Seconds) })
	if hasFloor {
		row("ratio to floor", func(*FloorResult) string { return "1" }, func(p *Phase) string { return f2(p.RatioToFloor) + "x" })
	}
	row("first Job created; last created; last finished; final status after the last Job (s)",
		func(f *FloorResult) string { return fmt.Sprintf("0; %.1f; %.1f; —", f.CreateSeconds, f.Seconds) },
		func(p *Phase) string {
			if p.LastDoneSeconds < 0 {
				// No Job seen finished: node Jobs went before the Job
				// controller said Complete (runs before the watch counted
				// those as finished).
				return fmt.Sprintf("%.1f; %.1f; —; —", p.FirstJobSeconds, p.LastJobSeconds)
			}
			return fmt.Sprintf("%.1f; %.1f; %.1f; %.1f", p.FirstJobSeconds, p.LastJobSeconds, p.LastDoneSeconds, p.TailSeconds)
		})
	row("pulls in the Jobs created; in the Jobs finished (watch)", func(f *FloorResult) string { return fmt.Sprint(f.Observed.Created) },
		func(p *Phase) string {
			if p.Jobs.Pairs == 0 {
				return "—"
			}
			return fmt.Sprintf("%d; %d", p.Jobs.Pairs, p.Jobs.PairsDone)
		})
	row("Jobs created (watch)", func(f *FloorResult) string { return fmt.Sprint(f.Observed.Created) }, func(p *Phase) string { return fmt.Sprint(p.Jobs.Created) })
	row("peak Jobs in flight: total; per node", func(f *FloorResult) string {
		return fmt.Sprintf("%d; %d", f.Observed.PeakInFlight, f.Observed.PeakInFlightNode)
	}, func(p *Phase) string { return fmt.Sprintf("%d; %d", p.Jobs.PeakInFlight, p.Jobs.PeakInFlightNode) })
	row("creates per second", func(f *FloorResult) string { return fmt.Sprintf("%.0f", f.CreatesPerSecond) }, func(p *Phase) string {
		if p.LastJobSeconds-p.FirstJobSeconds <= 0 {
			return ""
		}
		return fmt.Sprintf("%.0f", float64(p.Jobs.Created)/(p.LastJobSeconds-p.FirstJobSeconds))
	})
	row("final status", nil, func(p *Phase) string {
		if p.Status == nil {
			return ""
		}
		return fmt.Sprintf("%s %s", p.Status.Status, p.Status.Progress)
	})
	row("controller requests: total; mean/s; busiest 10 s /s; busiest second", nil, func(p *Phase) string {
		return fmt.Sprintf("%d; %.1f; %.1f; %d", p.Requests.Total, p.Requests.MeanPerSecond, p.Requests.PeakWindowPerSecond, p.Requests.PeakPerSecond)
	})
	row("Job writes per (image, node)", nil, func(p *Phase) string { return f2(p.JobWritesPerPair) })
	row("status writes: total; per s; most in one second", nil, func(p *Phase) string {
		return fmt.Sprintf("%d; %.2f; %d", p.StatusWrites, p.StatusWritesPerSecond, p.StatusWritesPeakPerSecond)
	})
	row("controller CPU (s)", nil, func(p *Phase) string { return f1(p.ControllerCPUSeconds) })
	row("controller peak RSS (MiB)", nil, func(p *Phase) string { return fmt.Sprintf("%.0f", p.ControllerPeakRSSMiB) })
	row("controller RSS at start; at end: anon, file; Go heap in use (MiB)", nil, func(p *Phase) string {
		return fmt.Sprintf("%.0f; %.0f, %.0f; %.0f", p.ControllerStartRSSMiB, p.ControllerEndAnonMiB, p.ControllerEndFileMiB, p.ControllerEndHeapInuseMiB)
	})
	procs := map[string]bool{}
	for _, c := range cols {
		var by map[string]float64
		switch {
		case c.floor != nil:
			by = c.floor.CPU.ByProcess
		case c.run != nil:
			by = c.run.CPU.ByProcess
		}
		for k := range by {
			procs[k] = true
		}
	}
	for _, name := range sortedNames(procs) {
		row("CPU s: "+name, func(f *FloorResult) string { return f1(f.CPU.ByProcess[name]) }, func(p *Phase) string { return f1(p.CPU.ByProcess[name]) })
	}
	row("CPU s: other work on the machine", func(f *FloorResult) string { return f1(f.CPU.Others) }, func(p *Phase) string { return f1(p.CPU.Others) })
	row("CPU s: machine busy of available", func(f *FloorResult) string { return fmt.Sprintf("%.0f of %.0f", f.CPU.MachineBusy, f.CPU.Cores) },
		func(p *Phase) string { return fmt.Sprintf("%.0f of %.0f", p.CPU.MachineBusy, p.CPU.Cores) })
	row("clean-up after (s)", func(f *FloorResult) string { return f1(f.CleanupSeconds) }, func(p *Phase) string { return f1(p.CleanupSeconds) })
	m.table(head, rows)

	var runs []column
	seen := map[string]bool{}
	for _, c := range cols {
		if c.run == nil {
			continue
		}
		runs = append(runs, c)
		for _, k := range c.run.Requests.SortedKeys() {
			seen[k] = true
		}
	}
	if len(seen) == 0 {
		return
	}
	head = []string{"controller request"}
	for _, c := range runs {
		head = append(head, c.head)
	}
	rows = nil
	for _, k := range sortedNames(seen) {
		out := []string{"`" + k + "`"}
		for _, c := range runs {
			out = append(out, fmt.Sprint(c.run.Requests.ByVerbResource[k]))
		}
		rows = append(rows, out)
	}
	m.table(head, rows)
}

// byCount renders nodes by a count, in the count's order, e.g. "0: 10 nodes, 2: 9 nodes".
func byCount(by map[string]int) string {
	if len(by) == 0 {
		return "none"
	}
	keys := sortedNames(by)
	sort.SliceStable(keys, func(i, j int) bool { return len(keys[i]) < len(keys[j]) })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d nodes", k, by[k]))
	}
	return strings.Join(out, ", ")
}

// reasons renders releases by reason, e.g. "cached ×50".
func reasons(by map[string]int) string {
	if len(by) == 0 {
		return "none"
	}
	var out []string
	for _, k := range sortedNames(by) {
		out = append(out, fmt.Sprintf("%s ×%d", k, by[k]))
	}
	return strings.Join(out, ", ")
}

func notPulled(nodes []string) string {
	if len(nodes) == 0 {
		return "none"
	}
	if len(nodes) > 5 {
		return fmt.Sprintf("%d (%s, ...)", len(nodes), strings.Join(nodes[:5], ", "))
	}
	return fmt.Sprintf("%d (%s)", len(nodes), strings.Join(nodes, ", "))
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsWrite says whether a request verb writes.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}
