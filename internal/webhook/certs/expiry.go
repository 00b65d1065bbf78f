package certs

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// NameExpiry is the series of the serving certificate's expiry, for the
// chart's alert and its tests.
const NameExpiry = "kubefledged_webhook_certificate_expiry_timestamp_seconds"

// expiry serves the NotAfter of the certificate the webhook server serves,
// read from CertDir at each scrape. The file, not the keeper's memory, is
// what the server's certificate watcher loads, and it is there in both
// modes: the keeper writes it in self mode, cert-manager's Secret is
// mounted there in external mode, where a stalled renewal is just as
// likely and nothing of ours rotates.
type expiry struct {
	mu   sync.Mutex
	dir  string
	desc *prometheus.Desc
}

var expiryCollector = &expiry{desc: prometheus.NewDesc(NameExpiry,
	"When the webhook's serving certificate (tls.crt in --webhook-cert-dir) expires, in unix seconds; absent while there is none or it does not parse.",
	nil, nil)}

var expiryOnce sync.Once

// RegisterExpiry serves the expiry of the certificate in certDir. The
// collector is registered once per process; a later call (tests start
// several controllers in turn) replaces the directory.
func RegisterExpiry(certDir string) {
	expiryCollector.mu.Lock()
	expiryCollector.dir = certDir
	expiryCollector.mu.Unlock()
	expiryOnce.Do(func() { crmetrics.Registry.MustRegister(expiryCollector) })
}

func (e *expiry) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

// Collect reports nothing when the file is missing or broken rather than a
// zero, which would read as long expired. The first certificate is the
// server's own: cert-manager appends the chain behind it.
func (e *expiry) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	dir := e.dir
	e.mu.Unlock()
	if dir == "" {
		return
	}
	raw, err := os.ReadFile(filepath.Join(dir, KeyCert))
	if err != nil {
		return
	}
	chain, err := parseCerts(raw)
	if err != nil || len(chain) == 0 {
		return
	}
	ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, float64(chain[0].NotAfter.Unix()))
}
