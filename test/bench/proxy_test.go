package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kubefledged/kube-fledged/hack/benchreport/report"
	"github.com/kubefledged/kube-fledged/internal/pki"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiProxy stands between the controller and the API server and counts what
// the controller sends, by verb and resource. client-go's own metric
// (rest_client_requests_total) has only method and code: it cannot tell a Job
// create from an Event create, and "Job writes per (image, node)" needs
// exactly that. The controller talks plain HTTP to the proxy on loopback; the
// proxy forwards with the sandbox's admin credentials.
type apiProxy struct {
	srv *http.Server
	ln  net.Listener
	// tls serves the same counting over TLS, for a client that takes only an
	// https address and a CA (the original's in-cluster configuration).
	tls *http.Server

	mu     sync.Mutex
	counts map[reqKey]int
	codes  map[int]int
	// perSecond counts every request by the Unix second it arrived in, for
	// the peak request rate.
	perSecond map[int64]int
	// cacheWrites are the times of writes to each ImageCache (spec, metadata
	// or status), by name, for the status-write rate.
	cacheWrites map[string][]time.Time
}

// reqKey is a request as the API server would classify it.
type reqKey struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
}

func (k reqKey) String() string { return k.Verb + " " + k.Resource }

func startProxy(cfg *rest.Config) (*apiProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &apiProxy{ln: ln, counts: map[reqKey]int{}, codes: map[int]int{}, perSecond: map[int64]int{}, cacheWrites: map[string][]time.Time{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: tr,
		// Watches stream: each event must reach the controller when the
		// API server sends it, not when a buffer fills.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, cache := classify(r)
		now := time.Now()
		p.mu.Lock()
		p.counts[key]++
		p.perSecond[now.Unix()]++
		if cache != "" && report.IsWrite(key.Verb) {
			p.cacheWrites[cache] = append(p.cacheWrites[cache], now)
		}
		p.mu.Unlock()
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(cw, r)
		if key.Verb != "watch" {
			p.mu.Lock()
			p.codes[cw.code]++
			p.mu.Unlock()
		}
	})}
	go func() {
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("bench proxy: %v", err)
		}
	}()
	return p, nil
}

func (p *apiProxy) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range []*http.Server{p.srv, p.tls} {
		if srv != nil {
			_ = srv.Shutdown(ctx)
			_ = srv.Close()
		}
	}
}

// serveTLS starts the TLS listener and returns its address and the PEM of the CA
// that signed its certificate; the proxy is stopped with it.
func (p *apiProxy) serveTLS() (string, []byte, error) {
	ca, err := pki.Sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "bench proxy CA"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	if err != nil {
		return "", nil, err
	}
	leaf, err := pki.Sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "bench proxy"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca.Cert, ca.Key)
	if err != nil {
		return "", nil, err
	}
	pair, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		return "", nil, err
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", nil, err
	}
	p.tls = &http.Server{Handler: p.srv.Handler}
	go func() {
		if err := p.tls.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Printf("bench proxy (TLS): %v", err)
		}
	}()
	return ln.Addr().String(), ca.CertPEM, nil
}

// kubeconfig writes a kubeconfig that points at the proxy, without
// credentials: the proxy adds its own.
func (p *apiProxy) kubeconfig(path string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["bench"] = &clientcmdapi.Cluster{Server: "http://" + p.ln.Addr().String()}
	c.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	c.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	c.CurrentContext = "bench"
	return clientcmd.WriteToFile(*c, path)
}

// proxySnapshot is the proxy's counters at one moment; two of them give
// what a phase sent.
type proxySnapshot struct {
	at        time.Time
	counts    map[reqKey]int
	codes     map[int]int
	perSecond map[int64]int
	writes    map[string]int
}

func (p *apiProxy) snapshot() proxySnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := proxySnapshot{at: time.Now(), counts: map[reqKey]int{}, codes: map[int]int{}, perSecond: map[int64]int{}, writes: map[string]int{}}
	for k, v := range p.counts {
		s.counts[k] = v
	}
	for k, v := range p.codes {
		s.codes[k] = v
	}
	for k, v := range p.perSecond {
		s.perSecond[k] = v
	}
	for k, v := range p.cacheWrites {
		s.writes[k] = len(v)
	}
	return s
}

// cacheWriteTimes returns the writes to each cache between two instants.
func (p *apiProxy) cacheWriteTimes(from, to time.Time) map[string][]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]time.Time{}
	for name, ts := range p.cacheWrites {
		for _, t := range ts {
			if !t.Before(from) && !t.After(to) {
				out[name] = append(out[name], t)
			}
		}
	}
	return out
}

func deltaOf(before, after proxySnapshot) requestDelta {
	d := requestDelta{ByVerbResource: map[string]int{}, Codes: map[string]int{}}
	for k, v := range after.counts {
		if n := v - before.counts[k]; n > 0 {
			d.ByVerbResource[k.String()] = n
			d.Total += n
		}
	}
	for k, v := range after.codes {
		if n := v - before.codes[k]; n > 0 {
			d.Codes[strconv.Itoa(k)] = n
		}
	}
	per := map[int64]int{}
	for sec, v := range after.perSecond {
		if sec < before.at.Unix() {
			continue
		}
		n := v - before.perSecond[sec]
		per[sec] = n
		d.PeakPerSecond = max(d.PeakPerSecond, n)
	}
	for s := before.at.Unix(); s <= after.at.Unix(); s++ {
		sum := 0
		for i := int64(0); i < rateWindow; i++ {
			sum += per[s+i]
		}
		d.PeakWindowPerSecond = max(d.PeakWindowPerSecond, float64(sum)/rateWindow)
	}
	if secs := after.at.Sub(before.at).Seconds(); secs > 0 {
		d.MeanPerSecond = float64(d.Total) / secs
	}
	return d
}

// classify names a request as the API server's audit log would: its verb
// and its resource (with subresource), and the ImageCache it addresses.
func classify(r *http.Request) (reqKey, string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return reqKey{Verb: strings.ToLower(r.Method), Resource: "(non-resource)"}, ""
	}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return reqKey{Verb: "get", Resource: "(discovery)"}, ""
	}
	resource, name := rest[0], ""
	if len(rest) >= 2 {
		name = rest[1]
	}
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	var verb string
	switch r.Method {
	case http.MethodGet:
		switch {
		case name != "":
			verb = "get"
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if name == "" {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(r.Method)
	}
	cache := ""
	if strings.HasPrefix(resource, "imagecaches") {
		cache = name
	}
	return reqKey{Verb: verb, Resource: resource}, cache
}

// codeWriter remembers the status code, and keeps flushing possible for
// streamed watches.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *codeWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
