// Command sandbox runs the test sandbox (test/sandbox) in the foreground, for `make run` and
// for poking at the operator by hand:
//
//	go run ./hack/sandbox up --dir .sandbox --nodes 3   # until SIGINT/SIGTERM
//	go run ./hack/sandbox up --real-node ...           # also a kubelet on containerd (root)
//	go run ./hack/sandbox down --dir .sandbox           # stops the one started by up
//	go run ./hack/sandbox check-real-node              # can this machine run the real node?
//	go run ./hack/sandbox real-node --dir .sandbox      # the running node's name, registry, ... for eval
//	go run ./hack/sandbox push --dir .sandbox --layout bin/image/oci --as IMG [CACHE.yaml...]
//
// up writes <dir>/kubeconfig, then touches <dir>/ready so scripts can wait for it, and removes
// ready again before it stops. With --real-node it also writes <dir>/realnode.json, which
// real-node and push read: the node and its registry live in the up process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubefledged/kube-fledged/test/sandbox"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

const pidFile = "sandbox.pid"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "check-real-node":
		err = checkRealNode(os.Args[2:])
	case "real-node":
		err = realNodeEnv(os.Args[2:])
	case "push":
		err = push(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: sandbox up --dir DIR [--nodes N] [--pull-delay D] [--bin-dir DIR] [--real-node]
       sandbox down --dir DIR
       sandbox check-real-node [--bin-dir DIR]
       sandbox real-node --dir DIR
       sandbox push --dir DIR [--layout OCI --as IMG] [IMAGECACHE.yaml...]`)
	os.Exit(2)
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	dir := fs.String("dir", ".sandbox", "working dir: kubeconfig, logs, PKI, etcd data")
	nodes := fs.Int("nodes", 3, "fake nodes to create")
	pullDelay := fs.Duration("pull-delay", 0, "simulated image pull time on fake nodes")
	binDir := fs.String("bin-dir", "", "dir with etcd, kube-apiserver, ... (default: $KUBEFLEDGED_BIN_DIR or <repo>/bin)")
	realNode := fs.Bool("real-node", false, "also run a real node (kubelet, containerd, a registry on 127.0.0.1) beside the fake ones; needs root")
	_ = fs.Parse(args)

	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	ready := filepath.Join(abs, "ready")
	pidPath := filepath.Join(abs, pidFile)
	if pid, err := readPid(pidPath); err == nil && alive(pid) {
		return fmt.Errorf("a sandbox (pid %d) already runs in %s; run down first", pid, abs)
	}
	_ = os.Remove(ready)
	defer os.Remove(ready)
	// A node file left by an up that was killed names a registry that is gone.
	_ = os.Remove(filepath.Join(abs, nodeFile))
	if err := os.WriteFile(pidPath, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidPath)

	// The signal context covers start-up too, so ^C during a slow start still cleans up.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	sb, err := sandbox.Start(ctx, sandbox.Options{Dir: abs, BinDir: *binDir, Nodes: *nodes, PullDelay: *pullDelay})
	if err != nil {
		return err
	}
	defer func() { _ = sb.Stop() }()
	var node *realnode.Node
	if *realNode {
		// Its state and logs live beside the sandbox's; kwok leaves it alone
		// (it manages only nodes annotated as fake).
		node, err = realnode.Start(ctx, sb, realnode.Options{Dir: filepath.Join(abs, "realnode"), BinDir: *binDir})
		if err != nil {
			return fmt.Errorf("real node: %w", err)
		}
		defer func() { _ = node.Stop() }()
		if err := writeNodeInfo(abs, node); err != nil {
			return err
		}
		defer os.Remove(filepath.Join(abs, nodeFile))
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	fmt.Printf("sandbox up in %s with %d nodes\n  export KUBECONFIG=%s\n  logs: %s\n",
		time.Since(begin).Round(time.Millisecond), *nodes, sb.KubeconfigPath(), filepath.Join(sb.Dir(), "logs"))
	if node != nil {
		fmt.Printf("  real node %s: registry %s, CRI socket %s, logs %s\n", node.Name(), node.Registry(), node.CRISocket(), node.LogDir())
	}
	<-ctx.Done()
	fmt.Println("sandbox stopping")
	_ = os.Remove(ready)
	_ = os.Remove(filepath.Join(abs, nodeFile))
	var nodeErr error
	if node != nil {
		nodeErr = node.Stop()
	}
	return errors.Join(nodeErr, sb.Stop())
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	dir := fs.String("dir", ".sandbox", "the dir given to up")
	_ = fs.Parse(args)
	pidPath := filepath.Join(*dir, pidFile)
	pid, err := readPid(pidPath)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no sandbox running in", *dir)
		return cleanRoutes()
	}
	if err != nil {
		return err
	}
	// A stale pid file may name a recycled pid: only signal a process that is an `up`.
	if !alive(pid) || !isUp(pid) {
		fmt.Println("no sandbox running in", *dir, "(stale pid file)")
		// Left by an up that was killed outright; a stale ready would mislead the next wait.
		_ = os.Remove(pidPath)
		_ = os.Remove(filepath.Join(*dir, "ready"))
		_ = os.Remove(filepath.Join(*dir, nodeFile))
		return cleanRoutes()
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	// up stops its children with SIGTERM then SIGKILL after a few seconds; allow for that.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			// Its children die with it (Pdeathsig).
			_ = syscall.Kill(pid, syscall.SIGKILL)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Println("sandbox stopped")
	return cleanRoutes()
}

// cleanRoutes takes down the sandbox's unreachable routes if no sandbox is left to hold
// them: an up killed outright (above, or before down ran) could not release its share, and
// after `make sandbox-down` no test may start to notice.
func cleanRoutes() error {
	if err := sandbox.CleanStaleRoutes(); err != nil {
		return fmt.Errorf("removing the sandbox's unreachable routes: %w", err)
	}
	return nil
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie still answers signal 0.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func isUp(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	return len(args) >= 2 && args[1] == "up"
}
