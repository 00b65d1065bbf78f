package pki

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestSign(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	ca, err := Sign(&x509.Certificate{Subject: pkix.Name{CommonName: "ca"}, NotBefore: now, NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}, nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca.Cert.CheckSignatureFrom(ca.Cert)).To(Succeed(), "a CA signs itself")
	leaf, err := Sign(&x509.Certificate{Subject: pkix.Name{CommonName: "leaf"}, NotBefore: now, NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"leaf"}},
		ca.Cert, ca.Key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(leaf.Cert.CheckSignatureFrom(ca.Cert)).To(Succeed())
	g.Expect(leaf.Cert.SerialNumber).NotTo(Equal(ca.Cert.SerialNumber))
	g.Expect(leaf.Key.PublicKey.Equal(leaf.Cert.PublicKey)).To(BeTrue(), "the key is the certificate's")
	g.Expect(string(leaf.CertPEM)).To(HavePrefix("-----BEGIN CERTIFICATE-----"))
	g.Expect(string(leaf.KeyPEM)).To(HavePrefix("-----BEGIN EC PRIVATE KEY-----"))
}
