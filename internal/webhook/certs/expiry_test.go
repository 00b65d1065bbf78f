package certs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The gauge follows the file the server serves: absent before there is one,
// the leaf's NotAfter (not the CA's, which outlives it) after, and the new
// one's after a rotation writes the file again.
func TestExpiryFollowsTheServedFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	RegisterExpiry(dir)
	g.Expect(testutil.CollectAndCount(expiryCollector)).To(Equal(0))

	now := time.Unix(1_800_000_000, 0)
	caPEM, caKeyPEM, err := newCA(now, 365*24*time.Hour, "kf")
	g.Expect(err).NotTo(HaveOccurred())
	ca, caKey, err := parsePair(caPEM, caKeyPEM, KeyCA, KeyCAKey)
	g.Expect(err).NotTo(HaveOccurred())
	for _, validity := range []time.Duration{24 * time.Hour, 48 * time.Hour} {
		leaf, _, err := newLeaf(now, validity, []string{"kf.ns.svc"}, ca, caKey)
		g.Expect(err).NotTo(HaveOccurred())
		// cert-manager writes the chain behind the leaf.
		g.Expect(os.WriteFile(filepath.Join(dir, KeyCert), append(leaf, caPEM...), 0o600)).To(Succeed())
		g.Expect(testutil.CollectAndCount(expiryCollector)).To(Equal(1))
		g.Expect(testutil.ToFloat64(expiryCollector)).To(Equal(float64(now.Add(validity).Unix())))
	}

	g.Expect(os.WriteFile(filepath.Join(dir, KeyCert), []byte(strings.Repeat("not PEM", 3)), 0o600)).To(Succeed())
	g.Expect(testutil.CollectAndCount(expiryCollector)).To(Equal(0), "a broken file must not read as expired")
}
