package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kubefledged/kube-fledged/internal/webhook/certs"
)

// Server is controller-runtime's webhook server, started only once a
// certificate is on disk.
type Server struct {
	webhook.Server
	opts Options
	// waiting is true from Start until the certificate files are there.
	waiting atomic.Bool
	// trust, when set, returns the CA bundle the apiserver is given: the
	// readiness check verifies the served certificate against it.
	trust atomic.Pointer[func() []byte]
}

// Start waits for a usable tls.crt/tls.key pair in CertDir, then serves.
func (s *Server) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhook")
	s.waiting.Store(true)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	announced := false
	for {
		_, err := tls.LoadX509KeyPair(s.certFile(), s.keyFile())
		if err == nil {
			break
		}
		if !announced {
			logger.Info("waiting for the webhook certificate", "dir", s.opts.CertDir, "reason", err.Error())
			announced = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	s.waiting.Store(false)
	return s.Server.Start(ctx)
}

func (s *Server) certFile() string { return filepath.Join(s.opts.CertDir, certs.KeyCert) }
func (s *Server) keyFile() string  { return filepath.Join(s.opts.CertDir, certs.KeyKey) }

// liveness fails only when a started server stops answering: restarting the
// process would not make a missing certificate appear sooner.
func (s *Server) liveness(req *http.Request) error {
	if s.waiting.Load() {
		return nil
	}
	return s.StartedChecker()(req)
}

// readiness passes when the server answers TLS with a certificate that is
// current and, in mode self, trusted by the bundle the apiserver is given:
// what the apiserver needs to call it.
func (s *Server) readiness(req *http.Request) error {
	if s.waiting.Load() {
		return errors.New("webhook server waiting for its certificate")
	}
	if err := s.StartedChecker()(req); err != nil {
		return err
	}
	var leaf *x509.Certificate
	cfg := &tls.Config{
		// Verification follows below against the bundle the apiserver
		// uses; the system roots have nothing to say about it.
		InsecureSkipVerify: true, //nolint:gosec // VerifyConnection checks the chain against the apiserver's bundle
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate presented")
			}
			leaf = cs.PeerCertificates[0]
			return nil
		},
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort("", strconv.Itoa(s.opts.Port)), cfg)
	if err != nil {
		return fmt.Errorf("webhook server not reachable: %w", err)
	}
	_ = conn.Close()
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("webhook serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if f := s.trust.Load(); f != nil {
		bundle := (*f)()
		leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
		if err := certs.Verify(bundle, leafPEM, s.opts.Hosts()[0], now); err != nil {
			return fmt.Errorf("webhook serving certificate not trusted by the CA bundle: %w", err)
		}
	}
	return nil
}
