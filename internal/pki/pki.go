// Package pki makes the keys and certificates that the webhook's certificate keeper and the
// test sandbox's control plane need, so that both sign the same way: a P-256 key per
// certificate, a random serial, and PEM for the files and Secrets they end up in.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
)

// Signed is a certificate made by Sign, with its key, parsed and as PEM.
type Signed struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// NewKey makes a P-256 key and its PEM: generating it takes microseconds, where RSA takes
// long enough to matter for a replica's start-up on a small node.
func NewKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Sign makes a key and a certificate of tmpl for it, under a random serial number, signed
// by parent's key, or self-signed when parent is nil (a CA).
func Sign(tmpl, parent *x509.Certificate, parentKey crypto.Signer) (*Signed, error) {
	key, keyPEM, err := NewKey()
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)); err != nil {
		return nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Signed{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM}, nil
}

// ServerTLS is what every TLS endpoint of ours (the webhook, the secure
// metrics) serves with: TLS 1.2 or later, whatever a GODEBUG says, and
// HTTP/1.1 only. HTTP/2's stream resets (CVE-2023-44487, CVE-2023-39325)
// are not worth their risk for one request per admission or scrape, and
// controller-runtime's metrics server offers h2 unless told otherwise.
func ServerTLS(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
