package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Nothing on this machine answers the sandbox's Service, fake pod or fake node addresses:
// there is no kube-proxy, kwok's pod IPs are only words in pod status, and no kubelet
// listens on a fake node's InternalIP. Left alone, a connection to one of them follows the
// default route off the machine and fails only after a timeout (every write under a
// ValidatingWebhookConfiguration took its 10 s), or talks to whatever answers out there: a
// machine behind a transparent proxy fails it in the proxy's TLS handshake instead.
//
// Two protections keep such calls local. The apiserver resolves webhook, CRD conversion
// and aggregated-API Services to endpoint IPs (--enable-aggregator-routing, see
// startAPIServer), so a Service without endpoints fails inside it with no packet sent.
// And, as root, the ranges below get `unreachable` routes, so that connect() to any of them
// — a kwok pod's IP behind a Service, a fake node's kubelet port for logs or exec, a
// cluster IP dialled directly — fails at once with EHOSTUNREACH instead of leaving the host.
// `unreachable` rather than `blackhole`: a blackholed connect() fails with EINVAL (or, for
// forwarded packets, silently), which reads as a bug; "no route to host" says what happened.
//
// The routes are host-wide while sandboxes are per test package, several at once. So they
// are reference counted: holders are listed in a state file changed only under an flock,
// the first holder adds the routes and the last one to leave removes them. A holder is a
// (pid, process start time) pair, so that the holders of a test binary that died are
// recognised as gone by whichever sandbox next starts or stops (or by `hack/sandbox.sh
// down`), and the routes do not outlive the last live sandbox by more than that. Both files
// live in /run, a tmpfs, like the routes themselves: a reboot clears all three together.
//
// The realnode bridge's range (10.89.117.0/24 by default) is deliberately not among them:
// its pods are real and reachable, through a more specific route anyway. Its kube-proxy
// leaves these routes as they are: it rewrites the Service addresses of packets that
// arrive from the bridge before they are routed, so pods reach Services, while the host's
// own connections to a cluster IP meet the unreachable route before any rule, as before.
const (
	netLockPath  = "/run/kubefledged-sandbox-net.lock"
	netStatePath = "/run/kubefledged-sandbox-net.json"
	// routeProto marks the routes as ours (rtnetlink protocol field; iproute2 names none
	// this high): a route a human or another tool added for the same prefix differs in it,
	// so it is never adopted nor deleted.
	routeProto = "211"
	// nodeCIDR holds the InternalIPs of fake nodes (nodes.go) and kwok's --node-ip, which
	// the apiserver dials for logs, exec and port-forward.
	nodeCIDR = "10.200.0.0/16"
	// netLockWait bounds the wait for another sandbox's route change, which takes
	// milliseconds; a holder stuck for longer must not hang Start, it only costs the
	// protection.
	netLockWait = 30 * time.Second
)

// hostNet is the set of routes and the files that count their holders; tests use their own,
// on ranges of their own, so as not to disturb the host's sandboxes.
type hostNet struct {
	lockPath  string
	statePath string
	cidrs     []string
}

func defaultHostNet() *hostNet {
	return &hostNet{lockPath: netLockPath, statePath: netStatePath, cidrs: []string{serviceCIDR, podCIDR, nodeCIDR}}
}

type netHolder struct {
	PID   int
	Start uint64 // field 22 of /proc/PID/stat: a recycled pid has another one
	ID    string // one process may run several sandboxes
}

type netState struct {
	Holders []netHolder
}

// netLease is one sandbox's share in the routes.
type netLease struct {
	h  *hostNet
	id string
}

// errNoPrivilege marks a missing protection that the machine cannot provide (not root, no
// CAP_NET_ADMIN), as opposed to one that failed.
var errNoPrivilege = errors.New("not permitted")

var warned sync.Map

// warnOnce tells the user, once per process and key, that a protection is missing: the
// sandbox carries on without it, but a hanging webhook call should not be a mystery.
func warnOnce(key, format string, args ...any) {
	if _, dup := warned.LoadOrStore(key, true); !dup {
		fmt.Fprintf(os.Stderr, "sandbox: "+format+"\n", args...)
	}
}

// acquire makes sure the routes exist and counts the caller among their holders. It
// returns a nil lease, with the reason, when the routes cannot be managed here; the reason
// has already been logged once. Ranges routed by something else are left alone (and
// logged) without failing the lease.
func (h *hostNet) acquire() (*netLease, error) {
	if os.Geteuid() != 0 {
		err := fmt.Errorf("%w: not root", errNoPrivilege)
		warnOnce("root", "no unreachable routes for %s (%v): calls to Service, pod or node addresses with no local endpoint may leave this machine; webhooks and aggregated APIs still fail at once without endpoints (--enable-aggregator-routing)", strings.Join(h.cidrs, ", "), err)
		return nil, err
	}
	unlock, err := h.lock()
	if err != nil {
		warnOnce("lock", "no unreachable routes for %s: %v", strings.Join(h.cidrs, ", "), err)
		return nil, err
	}
	defer unlock()
	st := h.readState()
	self, err := holderSelf()
	if err != nil {
		return nil, err
	}
	st.Holders = append(st.Holders, self)
	// The holder is recorded before the first route goes in, so that no route exists
	// without a holder whose death the next sandbox can notice.
	if err := h.writeState(st); err != nil {
		warnOnce("state", "no unreachable routes for %s: state %s: %v", strings.Join(h.cidrs, ", "), h.statePath, err)
		return nil, err
	}
	var errs []error
	for _, cidr := range h.cidrs {
		err := addRoute(cidr)
		if errors.Is(err, errNoPrivilege) {
			// Root without CAP_NET_ADMIN (a default container): no range will fare better,
			// and a holder of nothing would only make Stop fail to remove nothing.
			st.Holders = st.Holders[:len(st.Holders)-1]
			if len(st.Holders) > 0 {
				_ = h.writeState(st)
			} else {
				_ = os.Remove(h.statePath)
			}
			warnOnce("privilege", "no unreachable routes for %s (%v): calls to Service, pod or node addresses with no local endpoint may leave this machine; webhooks and aggregated APIs still fail at once without endpoints (--enable-aggregator-routing)", strings.Join(h.cidrs, ", "), err)
			return nil, err
		}
		if err != nil {
			errs = append(errs, err)
			warnOnce("route "+cidr, "no unreachable route for %s: %v: connections to it may leave this machine", cidr, err)
		}
	}
	// The lease stands even if a route failed: the ones that went in still need their
	// last holder to take them out.
	return &netLease{h: h, id: self.ID}, errors.Join(errs...)
}

// release drops the lease; the last live holder removes the routes. A nil lease is a no-op,
// so a sandbox without protection stops the same way.
func (l *netLease) release() error {
	if l == nil {
		return nil
	}
	return l.h.sweep(l.id)
}

// sweep forgets the holder id (if any) and every dead holder, and removes the routes when
// no live holder is left.
func (h *hostNet) sweep(id string) error {
	unlock, err := h.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st := h.readState()
	st.Holders = slices.DeleteFunc(st.Holders, func(x netHolder) bool { return x.ID == id })
	if len(st.Holders) > 0 {
		return h.writeState(st)
	}
	return h.removeIfUnheld(st)
}

// removeIfUnheld deletes the routes and the state when st has no holder left.
func (h *hostNet) removeIfUnheld(st *netState) error {
	if len(st.Holders) > 0 {
		return nil
	}
	var errs []error
	for _, cidr := range h.cidrs {
		errs = append(errs, delRoute(cidr))
	}
	if err := os.Remove(h.statePath); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CleanStaleRoutes removes the sandbox's unreachable routes if no live process holds them
// any more. Start and Stop do the same on their way; this is for a tool that killed a
// sandbox outright (hack/sandbox down after SIGKILL) and may start none afterwards.
func CleanStaleRoutes() error {
	if os.Geteuid() != 0 {
		return nil
	}
	return defaultHostNet().sweep("")
}

// lock takes the host-wide flock. The file is never removed, so every process locks the
// same inode.
func (h *hostNet) lock() (func(), error) {
	f, err := os.OpenFile(h.lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", h.lockPath, err)
	}
	deadline := time.Now().Add(netLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", h.lockPath, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readState returns the live holders. A missing or unreadable state counts as none: the
// routes are then ours to remove, identified by routeProto, not by the state.
func (h *hostNet) readState() *netState {
	st := &netState{}
	if data, err := os.ReadFile(h.statePath); err == nil {
		_ = json.Unmarshal(data, st)
	}
	st.Holders = slices.DeleteFunc(st.Holders, func(x netHolder) bool {
		start, err := procStart(x.PID)
		return err != nil || start != x.Start
	})
	return st
}

func (h *hostNet) writeState(st *netState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := h.statePath + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, h.statePath)
}

func holderSelf() (netHolder, error) {
	start, err := procStart(os.Getpid())
	if err != nil {
		return netHolder{}, err
	}
	return netHolder{PID: os.Getpid(), Start: start, ID: strconv.Itoa(os.Getpid()) + "-" + randomHex(8)}, nil
}

// procStart is the start time of a live process; a zombie counts as dead, since it holds
// nothing any more and may be reaped (and its pid reused) at any time.
func procStart(pid int) (uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces; the fields after it do not.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("pid %d has exited", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// addRoute adds our unreachable route for cidr unless it is there. A route for the same
// prefix that is not ours wins: someone meant it, and it is not ours to take down.
func addRoute(cidr string) error {
	out, err := ipCmd("route", "add", "unreachable", cidr, "proto", routeProto)
	if err == nil {
		return nil
	}
	if !strings.Contains(out, "File exists") {
		return err
	}
	show, serr := ipCmd("-j", "route", "show", "exact", cidr)
	if serr != nil {
		return serr
	}
	var routes []struct {
		Type     string `json:"type"`
		Protocol string `json:"protocol"`
	}
	if jerr := json.Unmarshal([]byte(show), &routes); jerr != nil {
		return fmt.Errorf("ip -j route show exact %s: %w", cidr, jerr)
	}
	for _, r := range routes {
		if r.Type == "unreachable" && r.Protocol == routeProto {
			return nil
		}
	}
	return fmt.Errorf("%s is already routed by something else: %s", cidr, strings.TrimSpace(show))
}

// delRoute deletes our route for cidr; the type and protocol in the request make the
// kernel match only ours.
func delRoute(cidr string) error {
	out, err := ipCmd("route", "del", "unreachable", cidr, "proto", routeProto)
	if err != nil && !strings.Contains(out, "No such process") {
		return err
	}
	return nil
}

// ipCmd runs iproute2's ip. Permission failures come back as errNoPrivilege, so that a root
// without CAP_NET_ADMIN (a default container) is told apart from a broken route.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err == nil {
		return string(out), nil
	}
	msg := strings.TrimSpace(string(out))
	if strings.Contains(msg, "Operation not permitted") {
		return string(out), fmt.Errorf("%w: ip %s: %s", errNoPrivilege, strings.Join(args, " "), msg)
	}
	return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, msg)
}
