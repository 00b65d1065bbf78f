// Package report is the benchmark's result: docs/benchmarks.json, written by test/bench, and
// docs/benchmarks.md, rendered from it here. It is a package of its own, not part of the
// benchmark's test files, so that the page can be rendered again (and its rendering tested)
// without running the benchmark: hack/benchreport does that.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/plan"
)

// The control plane profiles of the sandbox (SANDBOX_PROFILE), as test/sandbox names them.
const (
	ProfileTuned = "tuned"
	ProfileStock = "stock"
)

// OpenCapsName names the caps that never bind: the runs held against the floor.
const OpenCapsName = "non-binding caps"

// RateWindow is the window, in seconds, of the busiest-requests figure: the client's rate
// limit allows its burst plus qps per second over it.
const RateWindow = 10

// StartupTaint is the taint the held-nodes scenario registers its nodes with.
var StartupTaint = &plan.StartupTaint{Key: "kubefledged.io/caching", Effect: corev1.TaintEffectNoSchedule}

// Config is the benchmark's scale, from the environment, so that a smaller
// or a larger run needs no code change.
type Config struct {
	Nodes            int           `json:"nodes"`
	Images           int           `json:"images"`
	NewNodes         int           `json:"newNodes"`
	HeldNodes        int           `json:"heldNodes"`
	FastPulls        int           `json:"fastPulls"`
	FastNodes        int           `json:"fastNodes"`
	FastRuns         int           `json:"fastRuns"`
	PullDelay        time.Duration `json:"pullDelayNanos"`
	RefreshCaches    int           `json:"refreshCaches"`
	RefreshCycles    int           `json:"refreshCycles"`
	RefreshEvery     time.Duration `json:"refreshEveryNanos"`
	Deadline         time.Duration `json:"deadlineNanos"`
	FastDeadline     time.Duration `json:"fastDeadlineNanos"`
	FloorParallelism int           `json:"floorParallelism"`
	PhaseTimeout     time.Duration `json:"phaseTimeoutNanos"`
	Scenarios        []int         `json:"scenarios"`
	// Profile is the sandbox's control plane (SANDBOX_PROFILE): stock or tuned.
	Profile string `json:"profile"`
	// Scenario 6's scale. Omitted when zero, so that a report written before
	// the scenario existed reads and renders as it was.
	WarmNodes  int `json:"warmNodes,omitempty"`
	WarmImages int `json:"warmImages,omitempty"`
	WarmOther  int `json:"warmOtherImages,omitempty"`
	// Scenario 7's scale: the original kube-fledged cannot finish the
	// scenario 1 scale within an hour on the stock profile.
	OriginalNodes int `json:"originalNodes,omitempty"`
	// Scenarios 8 and 9's scale: the largest cluster Kubernetes supports, in a sandbox
	// of its own that grows to it (or as far as the machine lets it).
	ScaleNodes int `json:"scaleNodes,omitempty"`
}

// Caps are the controller's pacing and client limits for one run.
type Caps struct {
	Name           string `json:"name"`
	MaxJobs        int    `json:"maxConcurrentJobs"`
	MaxJobsPerNode int    `json:"maxConcurrentJobsPerNode"`
	QPS            int    `json:"kubeAPIQPS"`
	Burst          int    `json:"kubeAPIBurst"`
	// JobStartDelay is --max-job-start-delay, the pacing window's target
	// ("0s": off); empty in runs from before it.
	JobStartDelay string `json:"maxJobStartDelay,omitempty"`
}

// FloorResult is what the control plane alone takes for the same pulls:
// one bare Job per (image, node), created by the benchmark as fast as the
// API server accepts them, with the very pod the controller would run. Our
// times are reported as ratios to it, since absolute times drift with the
// Machine's load.
type FloorResult struct {
	Jobs int `json:"jobs"`
	// Seconds runs from the first create to the last Job finished.
	Seconds          float64    `json:"seconds"`
	CreateSeconds    float64    `json:"createSeconds"`
	CreatesPerSecond float64    `json:"createsPerSecond"`
	CreateRetries    int64      `json:"createRetries"`
	Observed         JobFigures `json:"observed"`
	CPU              CPUDelta   `json:"cpu"`
	CleanupSeconds   float64    `json:"cleanupSeconds"`
}

// Scenario 5: HeldNodes nodes join a cluster whose cache is complete, each
// registered with the startup taint, and the controller holds each until
// its images are pulled. What a node costs is its hold: the time from its
// creation to its release, during which it is paid for and runs nothing.
type HeldResult struct {
	Run              RunInfo `json:"run"`
	ClusterNodes     int     `json:"clusterNodes"`
	HeldNodes        int     `json:"heldNodes"`
	Images           int     `json:"images"`
	Pairs            int     `json:"pairs"`
	PullDelaySeconds float64 `json:"pullDelaySeconds"`
	// Per node, from when the benchmark's watch first saw it (its
	// creation) to when it saw it without the taint: median, 90th
	// percentile and max over the nodes released.
	HoldMedian float64 `json:"holdMedianSeconds"`
	HoldP90    float64 `json:"holdP90Seconds"`
	HoldMax    float64 `json:"holdMaxSeconds"`
	// The same from when each node was seen Ready, as scenario 2 counts.
	HoldAfterReadyMedian float64 `json:"holdAfterReadyMedianSeconds"`
	HoldAfterReadyMax    float64 `json:"holdAfterReadyMaxSeconds"`
	// ReleaseAfterPulled is, per node, from the last of its pull Jobs
	// seen finished to its release: what the release itself adds to the
	// pulls (median, max).
	ReleaseAfterPulledMedian float64 `json:"releaseAfterPulledMedianSeconds"`
	ReleaseAfterPulledMax    float64 `json:"releaseAfterPulledMaxSeconds"`
	// AllReleasedSeconds runs from the create of the first node to the
	// release of the last.
	AllReleasedSeconds float64 `json:"allReleasedSeconds"`
	// ReleasedBy counts the releases by reason, from the controller's
	// kubefledged_node_startup_taint_hold_seconds histogram; HistogramMean
	// is its mean over this scenario's releases.
	ReleasedBy           map[string]int `json:"releasedBy"`
	HistogramMeanSeconds float64        `json:"histogramMeanSeconds"`
	// NodesNotReleased are held nodes still tainted at the end.
	NodesNotReleased []string `json:"nodesNotReleased,omitempty"`
	Phase            *Phase   `json:"phase"`
}

// Phase is one measured run of the controller.
type Phase struct {
	Name  string `json:"name"`
	Caps  Caps   `json:"caps"`
	Pairs int    `json:"pairs"`
	// Seconds runs from the cache's creation (scenario 2: from the new
	// nodes being Ready) to its final status, as seen through a watch.
	Seconds      float64 `json:"seconds"`
	RatioToFloor float64 `json:"ratioToFloor,omitempty"`
	// Where the time went, from the same start: the first Job created, the
	// last Job created, the last Job seen finished. What follows the last
	// Job (TailSeconds) is the controller's alone: seeing the result,
	// deleting the Jobs, writing the final status.
	FirstJobSeconds float64        `json:"firstJobSeconds"`
	LastJobSeconds  float64        `json:"lastJobCreatedSeconds"`
	LastDoneSeconds float64        `json:"lastJobFinishedSeconds"`
	TailSeconds     float64        `json:"tailSeconds"`
	Status          *StatusFigures `json:"finalStatus,omitempty"`
	Jobs            JobFigures     `json:"jobs"`
	// Requests are counted by the proxy in front of the controller.
	Requests RequestDelta `json:"requests"`
	// ClientGo is rest_client_requests_total from the controller's metrics
	// endpoint, by method and code; Metrics the kubefledged_* series.
	ClientGo             map[string]float64 `json:"clientGoRequests"`
	Metrics              map[string]float64 `json:"kubefledgedMetrics"`
	CPU                  CPUDelta           `json:"cpu"`
	ControllerCPUSeconds float64            `json:"controllerCPUSeconds"`
	// ControllerPeakRSSMiB is VmHWM of the controller's process, which
	// started just before the run.
	ControllerPeakRSSMiB float64 `json:"controllerPeakRSSMiB"`
	// What the RSS was made of: at the start of the run, and at its end in
	// anonymous memory, file-backed pages (the binary) and Go heap in use.
	ControllerStartRSSMiB     float64 `json:"controllerStartRSSMiB"`
	ControllerEndAnonMiB      float64 `json:"controllerEndRSSAnonMiB"`
	ControllerEndFileMiB      float64 `json:"controllerEndRSSFileMiB"`
	ControllerEndHeapInuseMiB float64 `json:"controllerEndGoHeapInuseMiB"`
	// JobWritesPerPair counts every create, update, patch and delete the
	// controller sent for Jobs (a deletecollection counts once).
	JobWritesPerPair float64 `json:"jobWritesPerPair"`
	// StatusWrites are the controller's writes to the cache during the
	// operation, start and final status included.
	StatusWrites              int     `json:"statusWrites"`
	StatusWritesPerSecond     float64 `json:"statusWritesPerSecond"`
	StatusWritesPeakPerSecond int     `json:"statusWritesPeakPerSecond"`
	// StatusWritesSeconds is the span the status writes were counted over
	// where it is not Seconds (scenario 2 counts from the nodes' creation,
	// its time from the last node Ready); 0: Seconds.
	StatusWritesSeconds float64 `json:"statusWritesSeconds,omitempty"`
	// StatusOperations is how many operations those writes span, each with
	// its own start and final write; 0 counts as one.
	StatusOperations int     `json:"statusOperations,omitempty"`
	CleanupSeconds   float64 `json:"cleanupSeconds"`
	Profile          string  `json:"profile,omitempty"`
}

type StatusFigures struct {
	Status          string          `json:"status"`
	Reason          string          `json:"reason"`
	Progress        string          `json:"progress"`
	Counts          v1alpha2.Counts `json:"counts"`
	FailedImages    int             `json:"failedImages"`
	FailuresOmitted int32           `json:"failuresOmitted"`
}

// JobFigures is what a Phase's Jobs looked like from the API server.
type JobFigures struct {
	Created           int `json:"created"`
	Succeeded         int `json:"succeeded"`
	Failed            int `json:"failed"`
	DeletedUnfinished int `json:"deletedUnfinished"`
	PeakInFlight      int `json:"peakInFlight"`
	PeakInFlightNode  int `json:"peakInFlightPerNode"`
	// Pairs and PairsDone are the pulls in the Jobs created and finished.
	Pairs     int `json:"pairs"`
	PairsDone int `json:"pairsDone"`
}

// CPUDelta is where the CPU went during a Phase, in CPU seconds.
type CPUDelta struct {
	Seconds   float64            `json:"wallSeconds"`
	ByProcess map[string]float64 `json:"cpuSecondsByProcess"`
	// MachineBusy is the whole Machine's busy CPU seconds; Others is what
	// neither the sandbox, the controller nor the benchmark used: the other
	// work on the Machine.
	MachineBusy float64 `json:"machineBusyCPUSeconds"`
	Others      float64 `json:"otherWorkCPUSeconds"`
	Cores       float64 `json:"coreSeconds"`
}

// RequestDelta is what the controller sent between two snapshots.
type RequestDelta struct {
	// ByVerbResource counts requests as "verb resource", e.g. "create jobs".
	ByVerbResource map[string]int `json:"byVerbResource"`
	// Codes counts the answers to every request but watches.
	Codes map[string]int `json:"codes"`
	Total int            `json:"total"`
	// PeakPerSecond is the most requests that arrived within one wall-clock
	// second; MeanPerSecond is the total over the Phase's duration.
	PeakPerSecond int     `json:"peakPerSecond"`
	MeanPerSecond float64 `json:"meanPerSecond"`
	// PeakWindowPerSecond is the mean rate over the busiest RateWindow
	// seconds: a client-side token bucket of rate q and burst b admits at
	// most b + q*W requests in any W seconds, so this is what can be held
	// against --kube-api-qps and --kube-api-burst.
	PeakWindowPerSecond float64 `json:"peakPerSecondOver10s"`
}

// Scenario 1: a cold cache of Images images on every one of Nodes nodes,
// with Caps that cannot bind and with the defaults.
type ColdResult struct {
	Run    RunInfo      `json:"run"`
	Nodes  int          `json:"nodes"`
	Images int          `json:"images"`
	Pairs  int          `json:"pairs"`
	Floor  *FloorResult `json:"floor"`
	Runs   []*Phase     `json:"runs"`
}

// Scenario 2: NewNodes nodes join a cluster whose cache is complete.
type NewNodesResult struct {
	Run          RunInfo      `json:"run"`
	ClusterNodes int          `json:"clusterNodes"`
	NewNodes     int          `json:"newNodes"`
	Images       int          `json:"images"`
	Pairs        int          `json:"pairs"`
	Floor        *FloorResult `json:"floor"`
	// Phase.Seconds counts from the last new node Ready to the final status.
	Phase *Phase `json:"phase"`
	// SecondsFromCreate counts from the first node create instead.
	SecondsFromCreate float64 `json:"secondsFromCreate"`
	// Per new node, from when it was seen Ready: its first Job created, its
	// last Job created, its last Job finished (max and median over nodes).
	FirstJobAfterReadyMax    float64 `json:"firstJobAfterReadyMaxSeconds"`
	FirstJobAfterReadyMedian float64 `json:"firstJobAfterReadyMedianSeconds"`
	AllStartedAfterReadyMax  float64 `json:"allJobsStartedAfterReadyMaxSeconds"`
	AllPulledAfterReadyMax   float64 `json:"allPulledAfterReadyMaxSeconds"`
	PullDelaySeconds         float64 `json:"pullDelaySeconds"`
	JobsOnOtherNodes         int     `json:"jobsOnOtherNodes"`
	Operations               int     `json:"operations"`
	// NodesNotPulled are new nodes that did not get every image.
	NodesNotPulled []string `json:"nodesNotPulled,omitempty"`
}

// Scenario 3: periodic refresh of complete caches on nodes that Report
// every image.
type RefreshResult struct {
	Run                 RunInfo      `json:"run"`
	Caches              int          `json:"caches"`
	Nodes               int          `json:"nodes"`
	Images              int          `json:"images"`
	RefreshEverySeconds float64      `json:"refreshEverySeconds"`
	Refreshes           int          `json:"refreshes"`
	JobsCreated         int          `json:"jobsCreated"`
	WindowSeconds       float64      `json:"windowSeconds"`
	Requests            RequestDelta `json:"requests"`
	WritesPerRefresh    float64      `json:"writesPerRefresh"`
	RequestsPerRefresh  float64      `json:"requestsPerRefresh"`
	// FinalStatuses counts the refreshes' final statuses.
	FinalStatuses        map[string]int `json:"finalStatuses"`
	AllPresent           bool           `json:"allReportedAlreadyPresent"`
	ControllerCPUSeconds float64        `json:"controllerCPUSeconds"`
	CPU                  CPUDelta       `json:"cpu"`
}

// Scenario 4: pulls whose pods finish within milliseconds (no pull delay).
type FastResult struct {
	Run    RunInfo      `json:"run"`
	Nodes  int          `json:"nodes"`
	Images int          `json:"images"`
	Pulls  int          `json:"pulls"`
	Floor  *FloorResult `json:"floor"`
	Runs   []*FastRun   `json:"runs"`
	Exact  bool         `json:"exactEveryRun"`
}

// The Phase is embedded by value: encoding/json cannot allocate an
// embedded pointer to an unexported type when BENCH_MERGE reads a Report.
type FastRun struct {
	Phase
	Exact    bool     `json:"exact"`
	Problems []string `json:"problems,omitempty"`
}

// Scenario 6: one refresh of a complete cache of Images images on Nodes nodes that hold
// every image, where the kubelet lists only the 50 largest images of each node. The nodes
// also hold larger images of other workloads, which push some cached images out of their
// status: the controller cannot tell those from missing ones and re-checks them with a
// pull, which finds the image on the node.
type WarmResult struct {
	Run    RunInfo `json:"run"`
	Nodes  int     `json:"nodes"`
	Images int     `json:"images"`
	Pairs  int     `json:"pairs"`
	// OtherImagesMax is the most other images a node holds: node i holds i mod
	// (OtherImagesMax+1) of them, each larger than every cached image.
	OtherImagesMax int `json:"otherImagesMax"`
	// ReportedPairs are the cached (image, node) pairs the node status lists,
	// UnreportedPairs those the nodes hold and do not list; NodesByUnreported
	// counts the nodes by how many cached images their status leaves out.
	ReportedPairs     int            `json:"reportedPairs"`
	UnreportedPairs   int            `json:"unreportedPairs"`
	NodesByUnreported map[string]int `json:"nodesByUnreported"`
	// RecheckedPairs are the pulls in the refresh's Jobs (watch), and
	// RecheckedMaxPerNode the most on one node. NodesMismatched are the nodes
	// whose re-checked pulls differ in number from the images their status
	// leaves out.
	RecheckedPairs      int      `json:"recheckedPairs"`
	RecheckedMaxPerNode int      `json:"recheckedMaxPerNode"`
	NodesMismatched     []string `json:"nodesMismatched,omitempty"`
	// WritesPerPair and RequestsPerPair are every API write (any resource)
	// and every request the controller sent during the refresh, over Pairs.
	WritesPerPair   float64 `json:"apiWritesPerPair"`
	RequestsPerPair float64 `json:"apiRequestsPerPair"`
	Phase           *Phase  `json:"phase"`
}

// Scenario 7: the original kube-fledged (v0.10, the last release, unmaintained) and ours on
// the same cold cache, in one sandbox, with the floor of that sandbox. Its scale is the
// largest the original finishes within an hour on the profile (OriginalNodes × Images);
// Runs are ours, as in scenario 1.
type OriginalResult struct {
	ColdResult
	// Version is what `git describe` says of the checkout the original was built from.
	Version string `json:"version"`
	// Original has no client-go or kubefledged metrics: it serves none.
	Original *Phase `json:"original"`
}

// Scenario 8: a cold cache of Images images on the largest cluster Kubernetes supports,
// with the default caps, held against a floor of one bare Job per node (the Job-per-pair
// floor of 50,000 Jobs takes hours on the stock profile). A machine that cannot hold
// NodesWanted kwok nodes gives Nodes, the most it held, and ShortBy, what ran out.
type ScaleResult struct {
	Run         RunInfo `json:"run"`
	NodesWanted int     `json:"nodesWanted"`
	Nodes       int     `json:"nodes"`
	// ShortBy is why the sandbox stopped short of NodesWanted; empty when it did not.
	ShortBy            string       `json:"shortBy,omitempty"`
	NodesCreateSeconds float64      `json:"nodesCreateSeconds"`
	Images             int          `json:"images"`
	Pairs              int          `json:"pairs"`
	Floor              *FloorResult `json:"floor"`
	Phase              *Phase       `json:"phase"`
	// Problems are how the final status, the controller's metrics and the watch strayed
	// from "every pair succeeded": none when the status is exact.
	Problems []string `json:"problems,omitempty"`
	Exact    bool     `json:"exact"`
	// WritesPerPair is every API write (any resource) the controller sent over Pairs.
	WritesPerPair float64 `json:"apiWritesPerPair"`
	// Per node, so that a run short of NodesWanted can be read at it: the controller's
	// RSS above what it held at the start, its CPU, its requests.
	RSSPerNodeKiB    float64 `json:"rssPerNodeKiB"`
	CPUPerNodeMillis float64 `json:"cpuPerNodeMillis"`
	RequestsPerNode  float64 `json:"requestsPerNode"`
}

// Scenario 10: a small cache (SmallNodes × SmallImages) created while a cache of
// scenario 1's scale runs, against the same small cache alone, with one controller with
// the default caps in one sandbox.
type FairnessResult struct {
	Run         RunInfo `json:"run"`
	SmallNodes  int     `json:"smallNodes"`
	SmallImages int     `json:"smallImages"`
	LargeNodes  int     `json:"largeNodes"`
	LargeImages int     `json:"largeImages"`
	// Alone and Beside are the small cache's operations; Large the large cache's.
	Alone  *Phase `json:"alone"`
	Beside *Phase `json:"beside"`
	Large  *Phase `json:"large"`
	// LargeJobsAtSmallCreate are the large cache's Jobs in flight when the small one was
	// created; LargeRunning says the large one had not ended when the small one did.
	LargeJobsAtSmallCreate int     `json:"largeJobsInFlightAtSmallCreate"`
	LargeRunning           bool    `json:"largeRunningAtSmallFinal"`
	Ratio                  float64 `json:"besideOverAlone"`
}

// Report is docs/benchmarks.json; docs/benchmarks.md renders it.
type Report struct {
	Generated       string  `json:"generated"`
	DurationMinutes float64 `json:"durationMinutes"`
	Machine         Machine `json:"machine"`
	Config          Config  `json:"config"`
	// Scenarios are in scenario order, 1 to 10: the benchmark's merge (BENCH_MERGE) reads a
	// field's place as its scenario's number.
	Scenarios struct {
		ColdCache     *ColdResult     `json:"coldCache,omitempty"`
		NewNodes      *NewNodesResult `json:"newNodes,omitempty"`
		SteadyRefresh *RefreshResult  `json:"steadyRefresh,omitempty"`
		FastPods      *FastResult     `json:"fastPods,omitempty"`
		HeldNodes     *HeldResult     `json:"heldNodes,omitempty"`
		WarmRefresh   *WarmResult     `json:"warmRefresh,omitempty"`
		Original      *OriginalResult `json:"original,omitempty"`
		ScaleCold     *ScaleResult    `json:"scaleCold,omitempty"`
		ScaleWarm     *WarmResult     `json:"scaleWarmRefresh,omitempty"`
		SmallBeside   *FairnessResult `json:"smallBesideLarge,omitempty"`
	} `json:"scenarios"`
	Targets []Target `json:"targets"`
	// Profiles are `go tool pprof -top` of the controller during scenario 1.
	Profiles map[string]string `json:"profiles,omitempty"`
	Errors   []string          `json:"errors,omitempty"`
	// Tuned is the run on the tuned control plane (TunedJSONPath), which the page shows
	// beside this one; nil when there is none. It is a file of its own, so that each
	// profile's run can be made, and merged into (BENCH_MERGE), without the other.
	Tuned *Report `json:"-"`
}

type Machine struct {
	CPUs         int     `json:"cpus"`
	MemoryGiB    float64 `json:"memoryGiB"`
	Go           string  `json:"go"`
	Kubernetes   string  `json:"kubernetes"`
	Kwok         string  `json:"kwok"`
	Kernel       string  `json:"kernel"`
	LoadAvgStart string  `json:"loadAvgStart"`
	LoadAvgEnd   string  `json:"loadAvgEnd"`
}

// Target is one line of the targets, held against a figure.
type Target struct {
	Scenario string `json:"scenario"`
	Figure   string `json:"figure"`
	Value    string `json:"value"`
	Target   string `json:"target"`
	// Pass is empty when the figure has no numeric Target.
	Pass string `json:"pass"`
}

// RunInfo says when and at what scale a scenario ran: scenarios may come
// from different runs (BENCH_MERGE), each with its floor from its own run.
type RunInfo struct {
	Started string `json:"started"`
	LoadAvg string `json:"loadAvgAtStart"`
	Config  Config `json:"config"`
}

// md accumulates markdown.
type md struct{ strings.Builder }

// Paths of the report in the repository.
var (
	JSONPath      = filepath.Join("docs", "benchmarks.json")
	TunedJSONPath = filepath.Join("docs", "benchmarks-tuned.json")
	PagePath      = filepath.Join("docs", "benchmarks.md")
	LimitsPath    = filepath.Join("test", "bench", "limits.md")
)

// JSONPathOf is where a run on the given control plane profile keeps its figures: the
// stock run, `make bench`'s default, is the page's main column, a tuned run its second.
func JSONPathOf(profile string) string {
	if profile == ProfileTuned {
		return TunedJSONPath
	}
	return JSONPath
}

// Read reads a report as the benchmark wrote it.
func Read(file string) (*Report, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if err := json.Unmarshal(raw, r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// WriteJSON writes the report's JSON into the repository at root, where its profile's
// figures go (JSONPathOf): what the benchmark measured, from which Render writes the page.
func (r *Report) WriteJSON(root string) error {
	return r.writeJSON(filepath.Join(root, JSONPathOf(r.Config.Profile)))
}

func (r *Report) writeJSON(file string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(raw, '\n'), 0o644)
}

// Write writes the report's JSON, the tuned run's if there is one, and the page into the
// repository at root. The page takes the known limits (LimitsPath) as they stand, if the
// file is there.
func (r *Report) Write(root string) error {
	if err := r.writeJSON(filepath.Join(root, JSONPath)); err != nil {
		return err
	}
	if r.Tuned != nil {
		if err := r.Tuned.writeJSON(filepath.Join(root, TunedJSONPath)); err != nil {
			return err
		}
	}
	limits, err := os.ReadFile(filepath.Join(root, LimitsPath))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(filepath.Join(root, PagePath), []byte(r.Markdown(limits)), 0o644)
}

// Render writes the page (and the targets in the JSON) again from the JSON at root, with
// the tuned run's beside it if there is one, e.g. after an edit of the limits or of a
// target, without a run of an hour. The targets follow from the figures: a target changed
// since the run applies to them as they stand.
func Render(root string) error {
	r, err := Read(filepath.Join(root, JSONPath))
	if err != nil {
		return err
	}
	r.Targets = r.EvalTargets()
	switch t, err := Read(filepath.Join(root, TunedJSONPath)); {
	case err == nil:
		t.Targets = t.EvalTargets()
		r.Tuned = t
	case !os.IsNotExist(err):
		return err
	}
	return r.Write(root)
}
