// Package host keeps the machine a real node runs on as it was. A kubelet, containerd and
// kube-proxy change the host itself, not only the node's own directory:
//
//   - sysctls (Sysctls: the kubelet's kernel tunables, forwarding, bridge netfilter);
//   - iptables and ip6tables chains and rules (the firewall, kube-proxy's and the CNI's);
//   - mounts (pod volumes, netns, the kubelet's own) and the kubepods cgroups;
//   - the CNI bridge device;
//   - files under the kubelet's and containerd's default paths (HostPaths), and processes
//     (shims, pause containers) that outlive their parent.
//
// Snapshot records all of it in a Journal, written to JournalPath under /run before the
// node's first change. Undo puts it back: it kills the processes left running from the
// node's directory, unmounts what was mounted since, deletes the bridge, restores each
// iptables table from its saved form (dropping tables that did not exist), writes the
// Sysctls back, removes the kubepods cgroups and the new entries of the watched paths, and
// the node's state directories. Because a test binary can die before it stops its node,
// the journal outlives it: the next node's start undoes it first (ReadJournal). Acquire's
// Lock, an flock on LockPath, keeps a second node off the host meanwhile: two would record
// each other's changes as the host's original state.
package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// One real node per host. The kubelet's changes (sysctls, iptables chains, the kubepods
// cgroups) are global: two nodes would each record the other's changes as the host's
// original state, and whichever stopped last would restore the wrong one. A second Start
// waits for the first node to stop; the journal lets the next Start undo a run whose test
// binary died before it could stop its node.
const (
	LockPath    = "/run/kubefledged-realnode.lock"
	JournalPath = "/run/kubefledged-realnode.journal"
)

// ErrInUse means another real node holds this host (or left a part of one running).
var ErrInUse = errors.New("realnode: another real node runs on this host")

// Lock is the host lock: an flock on LockPath, held while a node runs.
type Lock struct{ f *os.File }

// Acquire waits for the host lock until ctx ends.
func Acquire(ctx context.Context) (*Lock, error) {
	told := false
	for {
		f, err := os.OpenFile(LockPath, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("realnode: host lock: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// The previous holder unlinks the file as it lets go; a lock on an unlinked
			// inode guards nothing, so it is taken again on the file now at the path.
			var held, now syscall.Stat_t
			if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(LockPath, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
				_ = f.Truncate(0)
				_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
				return &Lock{f: f}, nil
			}
			_ = f.Close()
			continue
		}
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("realnode: host lock %s: %w", LockPath, err)
		}
		holder, _ := os.ReadFile(LockPath)
		if !told {
			// Packages run in parallel; a silent wait would look like a hung test.
			fmt.Fprintf(os.Stderr, "realnode: waiting for the real node of pid %s to stop (%s)\n", strings.TrimSpace(string(holder)), LockPath)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: pid %s holds %s (%v)", ErrInUse, strings.TrimSpace(string(holder)), LockPath, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Release lets the next node have the host.
func (l *Lock) Release() {
	if l == nil {
		return
	}
	_ = os.Remove(LockPath)
	_ = l.f.Close()
}

// StateDirs are the parts of the node's Dir that Undo removes even when the caller keeps Dir.
var StateDirs = []string{"containerd", "kubelet", "cni", "pod-logs", "volume-plugins", "images", "config"}

// Journal is the host as it was before a node started, written before the first change.
type Journal struct {
	PID       int
	Dir       string // the node's own dir: every process naming it in its command line is ours
	RemoveDir bool   // Dir was made by Start (else only its state goes, logs stay)
	Bridge    string
	Sysctls   map[string]string     // path under /proc/sys -> value
	IPTables  map[string]string     // iptables-save / ip6tables-save -> output
	Paths     map[string]*PathState // host path the kubelet or containerd may create -> state
	Mounts    []string              // mount points
}

// PathState is a watched host path as it was: whether it existed, and its entries.
type PathState struct {
	Existed bool
	Entries []string `json:",omitempty"`
}

// Sysctls the kubelet sets at start-up (setupKernelTunables), the bridge plugin turns on
// for a gateway and kube-proxy may set; the rest are listed because nothing guarantees
// other versions leave them.
var Sysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	// kube-proxy's conntrack settings; its configuration here leaves them alone.
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait", "net/netfilter/nf_conntrack_tcp_be_liberal",
}

// HostPaths are the kubelet's and containerd's default or hard-coded locations. The node's
// configuration moves what it can into its own dir; these are what remains (shim sockets in
// /run/containerd/s, libcni's cache in /var/lib/cni/results, log links in
// /var/log/containers) and the defaults the configuration overrides, watched in case a
// version ignores an override. A path comes before its parent: new entries are judged
// where they were made.
var HostPaths = []string{
	"/run/containerd/s", "/run/containerd", "/run/netns", "/var/lib/cni/results", "/var/lib/cni", "/var/log/containers",
	"/var/log/pods", "/var/lib/kubelet", "/var/lib/containerd", "/opt/containerd",
	"/usr/libexec/kubernetes", "/etc/kubernetes", "/run/kubernetes", "/etc/cni",
	"/run/mount", // util-linux's mount, which the kubelet runs, keeps its utab there
}

var IPTablesSavers = []string{"iptables-save", "ip6tables-save"}

// Snapshot records what undo restores.
func Snapshot(dir string, removeDir bool, bridge string) *Journal {
	j := &Journal{
		PID: os.Getpid(), Dir: dir, RemoveDir: removeDir, Bridge: bridge,
		Sysctls: map[string]string{}, IPTables: map[string]string{}, Paths: map[string]*PathState{},
	}
	for _, s := range Sysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil {
			j.Sysctls[s] = strings.TrimSpace(string(v))
		}
	}
	for _, save := range IPTablesSavers {
		if out, ok := IPTablesSave(save); ok {
			j.IPTables[save] = out
		}
	}
	for _, p := range HostPaths {
		j.Paths[p] = StatePath(p)
	}
	j.Mounts = MountPoints()
	return j
}

// StatePath records whether p exists and, for a directory, its entries.
func StatePath(p string) *PathState {
	st := &PathState{}
	if _, err := os.Lstat(p); err != nil {
		return st
	}
	st.Existed = true
	if ents, err := os.ReadDir(p); err == nil {
		for _, e := range ents {
			st.Entries = append(st.Entries, e.Name())
		}
	}
	return st
}

// Write puts the journal at JournalPath, atomically, before the node's first change.
func (j *Journal) Write() error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	tmp := JournalPath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, JournalPath)
}

// ReadJournal reads the journal a node left at JournalPath (an fs.ErrNotExist error when none).
func ReadJournal() (*Journal, error) {
	data, err := os.ReadFile(JournalPath)
	if err != nil {
		return nil, err
	}
	j := &Journal{}
	if err := json.Unmarshal(data, j); err != nil {
		return nil, fmt.Errorf("realnode: journal %s: %w", JournalPath, err)
	}
	return j, nil
}

// Undo returns the host to the journal's state. It runs after the node's daemons have
// stopped, and again at the next Start when a test binary died without stopping its node.
// Every step runs even if an earlier one failed: a partial undo is still less dirt.
func (j *Journal) Undo() error {
	var errs []error
	killStrays(j.Dir)
	errs = append(errs, unmountNew(j))
	if j.Bridge != "" && LinkExists(j.Bridge) {
		if out, err := exec.Command("ip", "link", "del", j.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %v: %s", j.Bridge, err, out))
		}
	}
	for save, before := range j.IPTables {
		errs = append(errs, restoreIPTables(save, before))
	}
	for s, v := range j.Sysctls {
		p := filepath.Join("/proc/sys", s)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", s, v, err))
			}
		}
	}
	errs = append(errs, removeKubepods())
	errs = append(errs, j.cleanPaths())
	if j.RemoveDir {
		errs = append(errs, os.RemoveAll(j.Dir))
	} else {
		for _, sub := range StateDirs {
			errs = append(errs, os.RemoveAll(filepath.Join(j.Dir, sub)))
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what undo could not restore; empty means the host is as it was.
func (j *Journal) Leftovers() []string {
	var out []string
	if pids := strays(j.Dir); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes of %s: %v", j.Dir, pids))
	}
	for _, m := range newMounts(j) {
		out = append(out, "mount "+m)
	}
	if j.Bridge != "" && LinkExists(j.Bridge) {
		out = append(out, "bridge "+j.Bridge)
	}
	for save, before := range j.IPTables {
		if after, ok := IPTablesSave(save); ok && NormalizeIPTables(after) != NormalizeIPTables(before) {
			out = append(out, fmt.Sprintf("%s differs:\n%s", save, diffIPTables(before, after)))
		}
	}
	for s, v := range j.Sysctls {
		if cur, err := os.ReadFile(filepath.Join("/proc/sys", s)); err == nil && strings.TrimSpace(string(cur)) != v {
			out = append(out, fmt.Sprintf("sysctl %s=%s (was %s)", s, strings.TrimSpace(string(cur)), v))
		}
	}
	for _, d := range KubepodsDirs() {
		out = append(out, "cgroup "+d)
	}
	for _, p := range HostPaths {
		if d := j.Paths[p].diff(p); d != "" {
			out = append(out, d)
		}
	}
	if _, err := os.Lstat(j.Dir); err == nil && j.RemoveDir {
		out = append(out, "dir "+j.Dir)
	}
	return out
}

// diff describes how p differs from the recorded state, "" if it does not. A shim socket
// nobody listens on is counted; one a live containerd serves belongs to that containerd.
func (st *PathState) diff(p string) string {
	if st == nil {
		return ""
	}
	now := StatePath(p)
	if !st.Existed {
		if now.Existed {
			return "created " + p
		}
		return ""
	}
	var added []string
	for _, e := range now.Entries {
		if !slices.Contains(st.Entries, e) && ours(p, e) {
			added = append(added, e)
		}
	}
	if len(added) > 0 {
		return fmt.Sprintf("created in %s: %s", p, strings.Join(added, ", "))
	}
	return ""
}

// ours tells whether a new entry in a host path that existed before is the node's to
// remove. Shim sockets are named by a hash, so only a dead one can be told to be ours.
func ours(dir, entry string) bool {
	switch dir {
	case "/run/containerd/s":
		c, err := net.DialTimeout("unix", filepath.Join(dir, entry), time.Second)
		if err == nil {
			_ = c.Close()
			return false
		}
		return true
	case "/run/containerd":
		return entry != "s" // handled on its own
	}
	return true
}

func (j *Journal) cleanPaths() error {
	var errs []error
	for _, p := range HostPaths {
		st := j.Paths[p]
		if st == nil {
			continue
		}
		now := StatePath(p)
		if !now.Existed {
			continue
		}
		for _, e := range now.Entries {
			if (!st.Existed || !slices.Contains(st.Entries, e)) && ours(p, e) {
				errs = append(errs, os.RemoveAll(filepath.Join(p, e)))
			}
		}
		if !st.Existed {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// strays are the processes naming dir in their command line: the node's daemons, and the
// shims containerd started in their own process groups, which outlive it.
func strays(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, arg := range bytes.Split(cmdline, []byte{0}) {
			a := string(arg)
			_, v, _ := strings.Cut(a, "=") // --root-dir=<dir>/kubelet
			if under(a, dir) || under(v, dir) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// killStrays kills the node's processes and every process in a pod cgroup, and waits until
// each has exited: mounts and cgroups cannot go while they live, and a process leaves its
// cgroup some time before it is gone.
func killStrays(dir string) {
	deadline := time.Now().Add(30 * time.Second)
	killed := map[int]bool{}
	for time.Now().Before(deadline) {
		for _, pid := range append(strays(dir), kubepodsPids()...) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		alive := 0
		for pid := range killed {
			if Running(pid) {
				alive++
			}
		}
		if alive == 0 && len(strays(dir))+len(kubepodsPids()) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running tells whether pid exists and has not exited: a zombie holds nothing but its pid
// until its parent (init, for the orphans of a killed shim) reaps it.
func Running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// MountPoints lists the host's mount points, unescaped, in mount order.
func MountPoints() []string {
	var out []string
	for _, line := range mountInfo() {
		if fields := strings.Fields(line); len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out
}

// mountInfo is /proc/self/mountinfo, a line per mount in mount order; nil if unreadable.
func mountInfo() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// newMounts are mount points below the node's dir or a watched host path that were not
// there before, deepest first so that each unmounts before its parent.
func newMounts(j *Journal) []string {
	roots := append([]string{j.Dir}, HostPaths...)
	before := map[string]int{}
	for _, m := range j.Mounts {
		before[m]++
	}
	var out []string
	for _, m := range MountPoints() {
		if before[m] > 0 {
			before[m]--
			continue
		}
		for _, r := range roots {
			if under(m, r) {
				out = append(out, m)
				break
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return strings.Count(out[a], "/") > strings.Count(out[b], "/") })
	return out
}

func unmountNew(j *Journal) error {
	// Mounts can stack on one point; each pass removes the top one.
	for range 5 {
		ms := newMounts(j)
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if ms := newMounts(j); len(ms) > 0 {
		return fmt.Errorf("cannot unmount %s", strings.Join(ms, ", "))
	}
	return nil
}

// LinkExists tells whether a network device of that name exists.
func LinkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// CgroupHierarchies are the mounted cgroup trees: one per v1 controller set, or the v2 root.
func CgroupHierarchies() []string {
	var out []string
	for _, line := range mountInfo() {
		_, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fs := strings.Fields(post)
		fields := strings.Fields(line)
		if len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") && len(fields) > 4 {
			if p := unescapeMount(fields[4]); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// KubepodsDirs are the kubelet's QoS cgroup trees (cgroupfs driver, cgroup root "/").
func KubepodsDirs() []string {
	var out []string
	for _, h := range CgroupHierarchies() {
		d := filepath.Join(h, "kubepods")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

func kubepodsPids() []int {
	var pids []int
	for _, d := range KubepodsDirs() {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeKubepods removes the kubelet's cgroup trees bottom-up. A cgroup is busy for a moment
// after its last process dies, hence the retries.
func removeKubepods() error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var failed []string
		for _, d := range KubepodsDirs() {
			var dirs []string
			_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					failed = append(failed, fmt.Sprintf("%s: %v", dirs[i], err))
				}
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroups: %s", strings.Join(failed, "; "))
		}
		for _, pid := range kubepodsPids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// IPTablesSave runs save (iptables-save or ip6tables-save); false when it cannot.
func IPTablesSave(save string) (string, bool) {
	if _, err := exec.LookPath(save); err != nil {
		return "", false
	}
	out, err := exec.Command(save).Output()
	if err != nil {
		return "", false
	}
	return string(out), true
}

// iptState is one iptables-save output: per table, its chains (with their policy, "-" for
// user chains) and its rules in order.
type iptState struct {
	tables []string
	chains map[string]map[string]string
	rules  map[string][]string
}

func parseIPTables(save string) *iptState {
	st := &iptState{chains: map[string]map[string]string{}, rules: map[string][]string{}}
	table := ""
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || line == "COMMIT":
		case strings.HasPrefix(line, "*"):
			table = line[1:]
			if _, ok := st.chains[table]; !ok {
				st.tables = append(st.tables, table)
				st.chains[table] = map[string]string{}
			}
		case strings.HasPrefix(line, ":") && table != "":
			f := strings.Fields(line[1:])
			if len(f) >= 2 {
				st.chains[table][f[0]] = f[1]
			}
		case strings.HasPrefix(line, "-A ") && table != "":
			st.rules[table] = append(st.rules[table], line)
		}
	}
	return st
}

// NormalizeIPTables drops what a run cannot help changing: counters, and tables the
// iptables-nft backend keeps once a chain was made in them, which hold nothing but empty
// built-in chains that accept everything, the same as no table at all.
func NormalizeIPTables(save string) string {
	st := parseIPTables(save)
	var b strings.Builder
	for _, t := range st.tables {
		if st.empty(t) {
			continue
		}
		fmt.Fprintf(&b, "*%s\n", t)
		var names []string
		for c := range st.chains[t] {
			names = append(names, c)
		}
		sort.Strings(names)
		for _, c := range names {
			fmt.Fprintf(&b, ":%s %s\n", c, st.chains[t][c])
		}
		for _, r := range st.rules[t] {
			b.WriteString(r + "\n")
		}
	}
	return b.String()
}

// empty tells whether table t holds nothing but built-in chains that accept everything.
func (st *iptState) empty(t string) bool {
	if len(st.rules[t]) > 0 {
		return false
	}
	for _, pol := range st.chains[t] {
		if pol != "ACCEPT" {
			return false
		}
	}
	return true
}

// undoScript is the iptables-restore --noflush input that takes after back to before:
// rules added to chains that existed are deleted one by one, chains that did not exist
// are flushed and then deleted (jumps to them first, since a referenced chain cannot go).
func undoScript(before, after string) string {
	b, a := parseIPTables(before), parseIPTables(after)
	var out strings.Builder
	for _, t := range a.tables {
		old := map[string]int{}
		for _, r := range b.rules[t] {
			old[r]++
		}
		var dels, flush []string
		for _, r := range a.rules[t] {
			if old[r] > 0 {
				old[r]--
				continue
			}
			// A built-in chain is there whether or not its table was.
			chain := strings.Fields(r)[1]
			if _, existed := b.chains[t][chain]; existed || a.chains[t][chain] != "-" {
				dels = append(dels, "-D"+strings.TrimPrefix(r, "-A"))
			}
		}
		for c, pol := range a.chains[t] {
			if _, existed := b.chains[t][c]; !existed && pol == "-" {
				flush = append(flush, c)
			}
		}
		if len(dels)+len(flush) == 0 {
			continue
		}
		sort.Strings(flush)
		fmt.Fprintf(&out, "*%s\n", t)
		for _, d := range dels {
			out.WriteString(d + "\n")
		}
		for _, c := range flush {
			fmt.Fprintf(&out, "-F %s\n", c)
		}
		for _, c := range flush {
			fmt.Fprintf(&out, "-X %s\n", c)
		}
		out.WriteString("COMMIT\n")
	}
	return out.String()
}

func diffIPTables(before, after string) string {
	if s := undoScript(before, after); s != "" {
		return "to undo:\n" + s
	}
	return "before:\n" + NormalizeIPTables(before) + "after:\n" + NormalizeIPTables(after)
}

func restoreIPTables(save, before string) error {
	after, ok := IPTablesSave(save)
	if !ok {
		return nil
	}
	script := undoScript(before, after)
	if script != "" {
		restore := strings.Replace(save, "-save", "-restore", 1)
		cmd := exec.Command(restore, "--noflush")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s --noflush: %v: %s\ninput:\n%s", restore, err, out, script)
		}
	}
	return dropNewTables(save, before)
}

// dropNewTables deletes the tables the nf_tables backend created for the node's chains and
// keeps, empty, once they are gone: no iptables command removes a table; nft does. Without
// nft (Debian package nftables) they stay, accepting everything, which changes no traffic.
func dropNewTables(save, before string) error {
	cmd := strings.TrimSuffix(save, "-save")
	v, err := exec.Command(cmd, "-V").Output()
	if err != nil || !strings.Contains(string(v), "nf_tables") {
		return nil
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	family := "ip"
	if strings.HasPrefix(save, "ip6") {
		family = "ip6"
	}
	after, ok := IPTablesSave(save)
	if !ok {
		return nil
	}
	b, a := parseIPTables(before), parseIPTables(after)
	var errs []error
	for _, t := range a.tables {
		if _, existed := b.chains[t]; existed || !a.empty(t) {
			continue
		}
		if out, err := exec.Command("nft", "delete", "table", family, t).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s %s: %v: %s", family, t, err, out))
		}
	}
	return errors.Join(errs...)
}

// Drop lets the lock go as the death of the process does: the file stays, unlocked, and the
// next Acquire takes it. Tests of recovery from a dead run use it.
func (l *Lock) Drop() { _ = l.f.Close() }
