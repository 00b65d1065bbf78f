package realnode

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubefledged/kube-fledged/test/framework/repo"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode/host"
)

// UnavailableError names what this machine lacks or forbids for a real node. Tests skip on
// it (with its message) rather than fail: the kwok sandbox runs anywhere, a real node does
// not, and CI on a machine without cgroups must stay green.
type UnavailableError struct {
	Missing []string
}

func (e *UnavailableError) Error() string {
	return "real node unavailable on this machine: " + strings.Join(e.Missing, "; ")
}

// cniBinDirs are where Debian (containernetworking-plugins) and upstream install the plugins.
var cniBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

var cniPlugins = []string{"bridge", "host-local", "loopback"}

// Check reports, as an *UnavailableError, every part of a real node this machine lacks:
// it probes (as root) that cgroups can be made and a bridge created, since a machine can
// have the binaries and still forbid both (an unprivileged container). It changes nothing.
func Check(o Options) error {
	var missing []string
	root := os.Geteuid() == 0
	if !root {
		missing = append(missing, fmt.Sprintf("root (running as uid %d; the kubelet and containerd mount filesystems and make cgroups and network devices)", os.Geteuid()))
	}
	if dir, err := repo.BinDir(o.BinDir); err != nil {
		missing = append(missing, "kubelet: "+err.Error())
	} else {
		for _, b := range []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2"} {
			if !executable(filepath.Join(dir, b)) {
				missing = append(missing, fmt.Sprintf("%s in %s (make realnode-tools)", b, dir))
			}
		}
	}
	if bins := notOnPath("runc"); len(bins) > 0 {
		missing = append(missing, strings.Join(bins, ", ")+" (Debian package runc; make realnode-deps)")
	}
	if cniBinDir() == "" {
		missing = append(missing, fmt.Sprintf("CNI plugins %s in %s (Debian package containernetworking-plugins; make realnode-deps)",
			strings.Join(cniPlugins, ", "), strings.Join(cniBinDirs, " or ")))
	}
	ip := true
	if _, err := exec.LookPath("ip"); err != nil {
		ip = false
		missing = append(missing, "ip (Debian package iproute2), to remove the pod bridge")
	}
	if ipt := notOnPath("iptables", "iptables-save", "iptables-restore"); len(ipt) > 0 {
		missing = append(missing, strings.Join(ipt, ", ")+" (Debian package iptables), for kube-proxy and the clean-up")
	}
	if _, err := exec.LookPath("go"); err != nil {
		missing = append(missing, "the go command, which builds the pause image")
	}
	if root {
		if why := probeCgroups(); why != "" {
			missing = append(missing, why)
		}
		if ip {
			if why := probeBridge(); why != "" {
				missing = append(missing, why)
			}
		}
	}
	if len(missing) > 0 {
		return &UnavailableError{Missing: missing}
	}
	return nil
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func cniBinDir() string {
	for _, d := range cniBinDirs {
		ok := true
		for _, p := range cniPlugins {
			ok = ok && executable(filepath.Join(d, p))
		}
		if ok {
			return d
		}
	}
	return ""
}

// probeCgroups makes and removes a cgroup where the kubelet would make its own: a read-only
// or absent cgroup filesystem only shows when the kubelet fails minutes of test time later.
func probeCgroups() string {
	hs := host.CgroupHierarchies()
	if len(hs) == 0 {
		return "cgroups (no cgroup filesystem is mounted)"
	}
	probe := probePrefix + "-" + strconv.Itoa(os.Getpid())
	var where string
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		where = "/sys/fs/cgroup"
	} else {
		var have []string
		for _, h := range hs {
			have = append(have, filepath.Base(h))
		}
		var lack []string
		for _, c := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
			if !slicesContainsField(have, c) {
				lack = append(lack, c)
			}
		}
		if len(lack) > 0 {
			return fmt.Sprintf("cgroup v1 controllers %s (mounted: %s)", strings.Join(lack, ", "), strings.Join(have, ", "))
		}
		where = "/sys/fs/cgroup/memory"
	}
	p := filepath.Join(where, probe)
	if err := os.Mkdir(p, 0o755); err != nil {
		return fmt.Sprintf("writable cgroups (mkdir %s: %v)", p, err)
	}
	_ = os.Remove(p)
	return ""
}

// slicesContainsField matches v1 hierarchies mounted together, e.g. "cpu,cpuacct".
func slicesContainsField(dirs []string, c string) bool {
	for _, d := range dirs {
		for _, f := range strings.Split(d, ",") {
			if f == c {
				return true
			}
		}
	}
	return false
}

// probePrefix names the probes' cgroup and bridge: a test comparing the host before and
// after a node may see another package's probe come and go.
const probePrefix = "kfprobe"

func probeBridge() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := probePrefix + hex.EncodeToString(b[:]) // 15 characters, the kernel's limit
	out, err := exec.Command("ip", "link", "add", "name", name, "type", "bridge").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("bridge network devices (ip link add type bridge: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "link", "del", name).Run()
	// The kernel lets go of a deleted device a moment after the command returns; Check
	// returns with the host as it found it.
	for deadline := time.Now().Add(5 * time.Second); host.LinkExists(name) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return ""
}

// notOnPath are the commands of names that are not on $PATH.
func notOnPath(names ...string) []string {
	var out []string
	for _, b := range names {
		if _, err := exec.LookPath(b); err != nil {
			out = append(out, b)
		}
	}
	return out
}
