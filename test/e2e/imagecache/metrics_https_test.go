package imagecache_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}}
	g.Expect(k8s.Create(ctx, reader)).To(Succeed())
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), binding)
		_ = k8s.Delete(context.Background(), reader)
	})
	token := func(sa string) string {
		g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")

	// The certificate is the controller's own, self-signed: the test checks
	// who may read, not the chain.
	hc := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
	get := func(g Gomega, bearer string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}
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
}
