package certs

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/kubefledged/kube-fledged/internal/pki"
)

// Keys of the shared Secret. tls.crt and tls.key make it a valid
// kubernetes.io/tls Secret, so cert-manager-style tooling can read it too.
const (
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
	KeyCA     = "ca.crt"
	KeyCAKey  = "ca.key"
	KeyBundle = "ca-bundle.crt"
)

// backdate covers clock skew between the replica that issues a certificate
// and the apiserver that checks it.
const backdate = 5 * time.Minute

// Material is what the Secret holds: the current CA, the serving certificate,
// and the bundle the webhook configuration must trust. During a rotation the
// serving certificate is still signed by the previous CA, which the bundle
// keeps alongside the new one.
type Material struct {
	CACert, CAKey, Cert, Key, Bundle []byte

	// StagedAt is when the current CA entered the bundle; SwitchedAt is when
	// the serving certificate was last replaced. Both pace the rotation.
	StagedAt, SwitchedAt time.Time
}

// parsed is Material decoded and checked for internal consistency.
type parsed struct {
	ca    *x509.Certificate
	caKey crypto.Signer
	leaf  *x509.Certificate
}

func parse(m *Material) (*parsed, error) {
	ca, caKey, err := parsePair(m.CACert, m.CAKey, KeyCA, KeyCAKey)
	if err != nil {
		return nil, err
	}
	leaf, _, err := parsePair(m.Cert, m.Key, KeyCert, KeyKey)
	if err != nil {
		return nil, err
	}
	// The bundle is not parsed here: a broken one is repaired from the CA,
	// not a reason to start over.
	return &parsed{ca: ca, caKey: caKey, leaf: leaf}, nil
}

// parsePair parses a certificate and its key, which must belong to it; errors name them
// by their keys in the Secret.
func parsePair(certPEM, keyPEM []byte, certName, keyName string) (*x509.Certificate, crypto.Signer, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certName, err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyName, err)
	}
	if !samePublicKey(cert.PublicKey, key.Public()) {
		return nil, nil, fmt.Errorf("%s does not belong to %s", keyName, certName)
	}
	return cert, key, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	certs, err := parseCerts(b)
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 {
		return nil, fmt.Errorf("want one certificate, found %d", len(certs))
	}
	return certs[0], nil
}

func parseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM key")
	}
	var k any
	var err error
	switch blk.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(blk.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
	default:
		k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// newCA returns a self-signed CA certificate and its key, both PEM.
func newCA(now time.Time, validity time.Duration, name string) (certPEM, keyPEM []byte, err error) {
	ca, err := pki.Sign(&x509.Certificate{
		// The time in the name tells two generations apart in a bundle.
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", name, now.Unix())},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	return ca.CertPEM, ca.KeyPEM, nil
}

// newLeaf returns a serving certificate for hosts signed by ca. It never
// outlives its CA, so the CA's expiry need not be watched separately.
func newLeaf(now time.Time, validity time.Duration, hosts []string, ca *x509.Certificate, caKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	notAfter := now.Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0]},
		NotBefore:   now.Add(-backdate),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	leaf, err := pki.Sign(tmpl, ca, caKey)
	if err != nil {
		return nil, nil, err
	}
	return leaf.CertPEM, leaf.KeyPEM, nil
}

// coversHosts says whether the certificate names every host.
func coversHosts(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// Fingerprint identifies a certificate (SHA-256 of its DER).
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// BundleContains says whether the PEM bundle holds the certificate.
func BundleContains(bundlePEM []byte, c *x509.Certificate) bool {
	certs, err := parseCerts(bundlePEM)
	if err != nil {
		return false
	}
	for _, b := range certs {
		if bytes.Equal(b.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// Verify says whether leafPEM chains to a CA in bundlePEM for host at now:
// the check the apiserver makes when it calls the webhook.
func Verify(bundlePEM, leafPEM []byte, host string, now time.Time) error {
	leaf, err := parseCert(leafPEM)
	if err != nil {
		return err
	}
	return verifyLeaf(bundlePEM, leaf, host, now)
}

func verifyLeaf(bundlePEM []byte, leaf *x509.Certificate, host string, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundlePEM) {
		return errors.New("the CA bundle holds no certificate")
	}
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}
