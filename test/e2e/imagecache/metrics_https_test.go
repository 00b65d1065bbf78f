package imagecache_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// TestMetricsOverHTTPS: by default the metrics are served over TLS, and only
// to a caller the API server authenticates and authorizes for get on
// /metrics: a ServiceAccount bound to a reader role gets them, another gets
// 403, and a caller without a token 401.
func TestMetricsOverHTTPS(t *testing.T) {
	g := NewWithT(t)
	ns := namespace(t)
	addr := framework.FreeAddr(t)
	runController(t, func(o *commands.ControllerOptions) { o.MetricsAddr = addr })
	ctx := context.Background()

	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	g.Expect(k8s.Create(ctx, reader)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), reader) })
	scraper := framework.MetricsReaderToken(t, g, kube, ns, "scraper", reader.Name)
	stranger := framework.Token(g, kube, ns, "stranger")
	get := func(g Gomega, bearer string) (int, string) { return framework.GetSecureMetrics(g, addr, bearer) }
	// The binding reaches the API server's authorizer a moment after it is
	// created: wait for the event, not a fixed time.
	g.Eventually(func(g Gomega) {
		code, body := get(g, scraper)
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(body).To(ContainSubstring("kubefledged_jobs_in_flight"))
	}).WithTimeout(framework.ClusterTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	code, _ := get(g, stranger)
	g.Expect(code).To(Equal(http.StatusForbidden))
	code, _ = get(g, "")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	// Plain HTTP gets no metrics: Go's TLS server answers it 400.
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP served the metrics")
	// As the webhook: HTTP/1.1 only (controller-runtime's metrics server
	// offers h2 unless told otherwise), and no TLS below 1.2.
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // the server's certificate is self-signed; what is tested is what it offers
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.ConnectionState().NegotiatedProtocol).To(Equal("http/1.1"), "the metrics server offers HTTP/2")
	_ = conn.Close()
	_, err = tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}) //nolint:gosec // as above
	g.Expect(err).To(HaveOccurred(), "the metrics server accepted TLS 1.1")
}
