package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// restartMu serialises restarts: two at once would each find the other's
// stopped process and could start a component twice on one port.
var restartMu sync.Mutex

// restartTimeout bounds a restart whose ctx has no deadline. A loaded machine
// takes tens of seconds to bring kube-apiserver back, far less for etcd.
const restartTimeout = 2 * time.Minute

// RestartAPIServer stops kube-apiserver (SIGTERM, SIGKILL after a grace
// period) and starts it again with the same arguments, so on the same port,
// with the same certificates and the same etcd: clients, the kubeconfig and
// every other component keep working once it is back. It returns when
// /readyz answers ok again. Fault tests use it to cut every watch and request
// of the code under test at once, as an apiserver upgrade or crash does.
func (s *Sandbox) RestartAPIServer(ctx context.Context) error {
	return s.restart(ctx, "kube-apiserver", s.apiserverReady)
}

// RestartEtcd stops etcd and starts it again with the same arguments and data
// directory, so nothing stored is lost; kube-apiserver stays up meanwhile and
// answers with errors, as it does when its etcd fails over. It returns once
// etcd is healthy and kube-apiserver ready again.
func (s *Sandbox) RestartEtcd(ctx context.Context) error {
	err := s.restart(ctx, "etcd", func(ctx context.Context) (bool, error) {
		if ok, err := s.etcdHealthy(ctx); !ok || err != nil {
			return ok, err
		}
		return s.apiserverReady(ctx)
	})
	return err
}

func (s *Sandbox) apiserverReady(ctx context.Context) (bool, error) {
	body, err := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && string(body) == "ok", nil
}

func (s *Sandbox) etcdHealthy(ctx context.Context) (bool, error) {
	if len(s.etcdPorts) == 0 {
		return false, errors.New("sandbox: etcd ports unknown")
	}
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/health", s.etcdPorts[0]), nil)
	resp, err := c.Do(req)
	if err != nil {
		return false, nil
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// restart replaces the running process called name by a new one with the
// same arguments. The port cannot change (every kubeconfig and flag names
// it), so a start that lost the port to another process is retried on the
// same port until ctx ends, instead of moving as Start does.
func (s *Sandbox) restart(ctx context.Context, name string, ready func(context.Context) (bool, error)) error {
	restartMu.Lock()
	defer restartMu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, restartTimeout)
		defer cancel()
	}
	old := s.running(name)
	if old == nil {
		return fmt.Errorf("sandbox: no running %s to restart", name)
	}
	args := append([]string{}, old.Args()[1:]...)
	old.stop(stopGrace)

	var lastErr error
	for {
		p, err := s.start(name, args)
		if err != nil {
			return err
		}
		err = poll(ctx, 100*time.Millisecond, []*process{p}, ready)
		if err == nil {
			return nil
		}
		lastErr = err
		p.stop(stopGrace)
		if !errors.Is(err, errRetry) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox: restart %s: %w (logs in %s)", name, lastErr, s.logDir)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("sandbox: restart %s: %w (logs in %s)", name, lastErr, s.logDir)
}

// running returns the live process called name, the latest if a restart
// left stopped ones behind.
func (s *Sandbox) running(name string) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		if p.name == name && !p.stopping.Load() && !p.exited() {
			return p
		}
	}
	return nil
}
