package sandbox

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"time"

	certs "github.com/kubefledged/kube-fledged/internal/pki"
)

// keyPair is a certificate with its key, kept both parsed (to sign further certificates) and
// PEM-encoded (what the binaries and kubeconfigs want).
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// pki holds every file path the processes need. It is generated fresh for each sandbox so
// that no two sandboxes (or a stale previous run in the same Dir) can trust each other.
type pki struct {
	dir string

	ca, frontProxyCA                     *keyPair
	serving                              *keyPair
	admin, kcm, scheduler, kwok, frontPx *keyPair
	kubeletClient                        *keyPair

	// Paths of the PEM files on disk.
	caCert, caKey                    string
	frontProxyCACert                 string
	servingCert, servingKey          string
	frontProxyClientCert, frontPxKey string
	kubeletClientCert, kubeletKey    string
	saKey, saPub                     string
}

// serviceIP is the first address of --service-cluster-ip-range: the in-cluster
// "kubernetes" Service, which the serving certificate must name.
var serviceIP = net.IPv4(10, 96, 0, 1)

// newPKI writes a complete PKI under dir. ECDSA P-256 keeps generation to a few
// milliseconds per certificate; only the service-account pair is RSA, as the brief for the
// apiserver's token signer asks and as clusters commonly run.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	var err error
	if p.ca, err = newCA("kubefledged-sandbox-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = newCA("kubefledged-sandbox-front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.serving, err = p.ca.issue("kube-apiserver", nil, true,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.IPv4(127, 0, 0, 1), serviceIP}); err != nil {
		return nil, err
	}
	clients := []struct {
		dst    **keyPair
		ca     *keyPair
		cn     string
		groups []string
	}{
		{&p.admin, p.ca, "kubefledged-sandbox-admin", []string{"system:masters"}},
		// kcm and the scheduler get their real identities so the bootstrap RBAC roles, not
		// system:masters, govern them, as in a kubeadm cluster.
		{&p.kcm, p.ca, "system:kube-controller-manager", nil},
		{&p.scheduler, p.ca, "system:kube-scheduler", nil},
		// kwok patches any node's and pod's status; the Node authorizer would refuse that
		// to a kubelet identity, so it runs as an admin.
		{&p.kwok, p.ca, "kwok-controller", []string{"system:masters"}},
		{&p.frontPx, p.frontProxyCA, "front-proxy-client", nil},
		// The apiserver's identity towards kubelets, for pod logs, exec and
		// port-forward: a real node's kubelet refuses anonymous calls. An admin,
		// as kubeadm's apiserver-kubelet-client is.
		{&p.kubeletClient, p.ca, "kube-apiserver-kubelet-client", []string{"system:masters"}},
	}
	for _, c := range clients {
		if *c.dst, err = c.ca.issue(c.cn, c.groups, false, nil, nil); err != nil {
			return nil, err
		}
	}

	write := func(name string, data []byte) (string, error) {
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, data, 0o600)
	}
	files := []struct {
		dst  *string
		name string
		data []byte
	}{
		{&p.caCert, "ca.crt", p.ca.certPEM},
		{&p.caKey, "ca.key", p.ca.keyPEM},
		{&p.frontProxyCACert, "front-proxy-ca.crt", p.frontProxyCA.certPEM},
		{&p.servingCert, "serving.crt", p.serving.certPEM},
		{&p.servingKey, "serving.key", p.serving.keyPEM},
		{&p.frontProxyClientCert, "front-proxy-client.crt", p.frontPx.certPEM},
		{&p.frontPxKey, "front-proxy-client.key", p.frontPx.keyPEM},
		{&p.kubeletClientCert, "kubelet-client.crt", p.kubeletClient.certPEM},
		{&p.kubeletKey, "kubelet-client.key", p.kubeletClient.keyPEM},
	}
	for _, f := range files {
		if *f.dst, err = write(f.name, f.data); err != nil {
			return nil, err
		}
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if p.saKey, err = write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)})); err != nil {
		return nil, err
	}
	if p.saPub, err = write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA makes a self-signed CA.
func newCA(cn string) (*keyPair, error) {
	now := time.Now()
	return signed(certs.Sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour), // tolerate small clock skew between processes
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil, nil))
}

// issue makes a certificate signed by the CA: a server's, or a client's in the groups orgs.
func (ca *keyPair) issue(cn string, orgs []string, server bool, dns []string, ips []net.IP) (*keyPair, error) {
	now := time.Now()
	usage := x509.ExtKeyUsageClientAuth
	if server {
		usage = x509.ExtKeyUsageServerAuth
	}
	return signed(certs.Sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:   now.Add(-time.Hour),
		NotAfter:    now.Add(365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames:    dns,
		IPAddresses: ips,
	}, ca.cert, ca.key))
}

func signed(s *certs.Signed, err error) (*keyPair, error) {
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: s.Cert, key: s.Key, certPEM: s.CertPEM, keyPEM: s.KeyPEM}, nil
}
