package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
	"github.com/kubefledged/kube-fledged/test/framework/proc"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// controller is one run of the controller in a process of its own, so that
// its CPU time and peak RSS are its own and not the benchmark's.
type controller struct {
	cmd         *exec.Cmd
	pid         int
	metricsAddr string
	pprofAddr   string
	logPath     string
	exited      chan struct{}
	exitErr     error
}

// defaultCaps are the controller's defaults (--max-concurrent-jobs 100,
// --max-concurrent-jobs-per-node 2, --kube-api-qps 100, --kube-api-burst 200,
// --max-job-start-delay 1s).
var defaultCaps = caps{Name: "default caps", MaxJobs: 100, MaxJobsPerNode: 2, QPS: 100, Burst: 200, JobStartDelay: "1s"}

// openCaps cannot bind at the benchmark's scale: more slots than Jobs, no
// pacing window, and a client rate limit far above what the API server takes
// on this machine.
func openCaps(jobs, perNode int) caps {
	return caps{Name: report.OpenCapsName, MaxJobs: jobs + 1, MaxJobsPerNode: perNode + 1, QPS: 5000, Burst: 10000, JobStartDelay: "0s"}
}

// benchControllerNamespace is the controller's namespace, where its delete
// Jobs run.
const benchControllerNamespace = "kube-fledged"

// startController starts the benchmark's build of the controller against
// the proxy. extra flags come last and so win.
func startController(binary, kubeconfig, logPath string, c caps, extra ...string) (*controller, error) {
	ports, err := sandbox.FreePorts(2)
	if err != nil {
		return nil, err
	}
	metricsAddr, pprofAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	args := []string{"controller",
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--enable-webhook=false",
		"--metrics-bind-address=" + metricsAddr,
		// Plain HTTP on loopback: a secure endpoint would have the API
		// server review every scrape, requests the figures would count
		// as the controller's.
		"--metrics-secure=false",
		"--delete-job-namespace=" + benchControllerNamespace,
		"--health-probe-bind-address=0",
		"--helper-image=example.test/kubefledged:bench",
		"--image-cache-refresh-frequency=0s",
		"--max-concurrent-jobs=" + strconv.Itoa(c.MaxJobs),
		"--max-concurrent-jobs-per-node=" + strconv.Itoa(c.MaxJobsPerNode),
		"--max-job-start-delay=" + c.JobStartDelay,
		"--kube-api-qps=" + strconv.Itoa(c.QPS),
		"--kube-api-burst=" + strconv.Itoa(c.Burst),
		// Node Jobs are what issue 18's targets are about: named, so that a
		// change of the default does not change what is measured.
		"--pull-job-granularity=node",
	}
	args = append(args, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "KUBEFLEDGED_PPROF_ADDR="+pprofAddr)
	p, err := launch(cmd, logPath)
	if err != nil {
		return nil, err
	}
	p.metricsAddr, p.pprofAddr = metricsAddr, pprofAddr
	// Serving metrics means the manager runs; the caller still waits for a
	// probe cache to learn that the caches synced and the clean-up ran.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := p.scrape(); err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("controller exited at start: %v (log %s)", p.exitErr, logPath)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("controller metrics not served within 60s (log %s)", logPath)
		}
	}
}

// launch starts a controller's process, its output to logPath; it dies with
// the benchmark, however the benchmark ends.
func launch(cmd *exec.Cmd, logPath string) (*controller, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := proc.Start(cmd); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &controller{cmd: cmd, pid: cmd.Process.Pid, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop ends the controller the way Kubernetes would: SIGTERM, then SIGKILL.
func (p *controller) stop() error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("controller did not stop within 30s of SIGTERM")
	}
}

func (p *controller) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("controller exited: %v (log %s)", p.exitErr, p.logPath)
	default:
		return nil
	}
}

// scrape reads the metrics endpoint into "name{labels}" -> value; none for a
// controller without one (the original).
func (p *controller) scrape() (map[string]float64, error) {
	if p.metricsAddr == "" {
		return map[string]float64{}, nil
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// metricDelta returns after-before for the series whose name starts with one
// of the prefixes, keeping those that moved.
func metricDelta(before, after map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				if d := v - before[k]; d != 0 {
					out[k] = d
				}
				break
			}
		}
	}
	return out
}

// profiler takes back-to-back CPU profiles of the controller until stopped;
// the run's length is not known in advance, and one long profile would either
// stop early or wait long after the run. Between two, it keeps a heap profile
// when the resident set is the highest seen so far: what the peak RSS is made
// of cannot be read afterwards.
type profiler struct {
	stopc chan struct{}
	done  chan struct{}
	files []string
	// heap is the heap profile taken at peakRSS (KiB).
	heap    string
	peakRSS int64
}

func (p *controller) profile(dir, name string) *profiler {
	pr := &profiler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		c := &http.Client{Timeout: 2 * time.Minute}
		for i := 0; ; i++ {
			select {
			case <-pr.stopc:
				return
			default:
			}
			resp, err := c.Get("http://" + p.pprofAddr + "/debug/pprof/profile?seconds=10")
			if err != nil {
				return
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-%03d.pb.gz", name, i))
			f, err := os.Create(path)
			if err == nil {
				_, err = io.Copy(f, resp.Body)
				f.Close()
			}
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				pr.files = append(pr.files, path)
			}
			if rss := memKiB(p.pid).RSS; rss > pr.peakRSS {
				heap := filepath.Join(dir, "heap-"+name+".pb.gz")
				if err := p.fetch(c, "/debug/pprof/heap", heap); err == nil {
					pr.heap, pr.peakRSS = heap, rss
				}
			}
		}
	}()
	return pr
}

// fetch saves one pprof endpoint of the controller to path.
func (p *controller) fetch(c *http.Client, endpoint, path string) error {
	resp, err := c.Get("http://" + p.pprofAddr + endpoint)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", endpoint, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// stop waits for the profile in progress and merges them all into out.
func (pr *profiler) stop(ctx context.Context, out string) error {
	close(pr.stopc)
	<-pr.done
	if len(pr.files) == 0 {
		return fmt.Errorf("no profile taken")
	}
	args := append([]string{"tool", "pprof", "-proto"}, pr.files...)
	cmd := exec.CommandContext(ctx, "go", args...)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd.Stdout = f
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("merging profiles: %v: %s", err, stderr.String())
	}
	for _, p := range pr.files {
		_ = os.Remove(p)
	}
	return nil
}

// pprofTop renders the top functions of a profile, flat or cumulative.
func pprofTop(ctx context.Context, profile string, cum bool, n int) (string, error) {
	args := []string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(n)}
	if cum {
		args = append(args, "-cum")
	}
	args = append(args, profile)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, out)
	}
	return string(out), nil
}
