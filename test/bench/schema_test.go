package bench

import "github.com/kubefledged/kube-fledged/hack/benchreport/report"

// The figures the benchmark measures are the report's schema (docs/benchmarks.json), which
// hack/benchreport renders; the benchmark names them as it always has.
type (
	config         = report.Config
	caps           = report.Caps
	floorResult    = report.FloorResult
	heldResult     = report.HeldResult
	phase          = report.Phase
	statusFigures  = report.StatusFigures
	jobFigures     = report.JobFigures
	cpuDelta       = report.CPUDelta
	requestDelta   = report.RequestDelta
	coldResult     = report.ColdResult
	newNodesResult = report.NewNodesResult
	refreshResult  = report.RefreshResult
	fastResult     = report.FastResult
	fastRun        = report.FastRun
	warmResult     = report.WarmResult
	originalResult = report.OriginalResult
	runInfo        = report.RunInfo
	scaleResult    = report.ScaleResult
	fairnessResult = report.FairnessResult
)

const rateWindow = report.RateWindow

var benchStartupTaint = report.StartupTaint
