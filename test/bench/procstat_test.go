package bench

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The machine is shared with other work, so every phase records where the
// CPU went: the controller, each sandbox process, this benchmark, and
// everything else on the machine. That is what says which component a
// figure was limited by.

// clockTicks is USER_HZ, 100 on every Linux the benchmark runs on; reading it
// with sysconf would need cgo.
const clockTicks = 100

// cpuSeconds is the user plus system CPU time of a process so far.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses: fields count from
	// after its closing parenthesis, where field 3 (state) starts.
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks
}

// memory is a process's memory from /proc/<pid>/status, in KiB: the peak
// resident set (VmHWM), the resident set now, and its anonymous (heap,
// stacks) and file-backed (the binary's pages) parts.
type memory struct {
	HWM, RSS, Anon, File int64
}

func memKiB(pid int) memory {
	var m memory
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmHWM:":
			m.HWM = v
		case "VmRSS:":
			m.RSS = v
		case "RssAnon:":
			m.Anon = v
		case "RssFile:":
			m.File = v
		}
	}
	return m
}

// processesUnder finds the sandbox's processes: each has the sandbox
// directory in its arguments (data dir, kubeconfig, certificates). The name
// is the binary's base name.
func processesUnder(dir string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(raw, []byte(dir)) {
			continue
		}
		argv0 := string(bytes.SplitN(raw, []byte{0}, 2)[0])
		out[pid] = filepath.Base(argv0)
	}
	return out
}

// machineCPU returns the busy and total CPU seconds of the whole machine
// from /proc/stat.
func machineCPU() (busy, total float64) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line := strings.SplitN(string(raw), "\n", 2)[0]
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		// guest and guest_nice are already counted in user and nice.
		if i >= 8 {
			break
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy / clockTicks, total / clockTicks
}

// cpuSample is the CPU counters of every process of interest at one moment.
type cpuSample struct {
	at          time.Time
	byProcess   map[string]float64
	busy, total float64
}

// sampleCPU reads the CPU of the sandbox's processes, of the controller (if
// pid > 0) and of this process.
func sampleCPU(sandboxDir string, controllerPID int) cpuSample {
	s := cpuSample{at: time.Now(), byProcess: map[string]float64{}}
	for pid, name := range processesUnder(sandboxDir) {
		if pid == controllerPID {
			continue
		}
		s.byProcess[name] += cpuSeconds(pid)
	}
	if controllerPID > 0 {
		s.byProcess["controller"] = cpuSeconds(controllerPID)
	}
	s.byProcess["benchmark"] = cpuSeconds(os.Getpid())
	s.busy, s.total = machineCPU()
	return s
}

func cpuBetween(a, b cpuSample) cpuDelta {
	d := cpuDelta{Seconds: b.at.Sub(a.at).Seconds(), ByProcess: map[string]float64{}, MachineBusy: b.busy - a.busy, Cores: b.total - a.total}
	ours := 0.0
	for name, v := range b.byProcess {
		if n := v - a.byProcess[name]; n > 0 {
			d.ByProcess[name] = round(n, 1)
			ours += n
		}
	}
	d.Others = round(max(0, d.MachineBusy-ours), 1)
	d.MachineBusy = round(d.MachineBusy, 1)
	d.Cores = round(d.Cores, 1)
	d.Seconds = round(d.Seconds, 2)
	return d
}
