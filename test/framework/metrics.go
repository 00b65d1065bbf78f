package framework

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Scrape reads a Prometheus metrics endpoint (host:port) into "name{labels}" -> value.
func Scrape(g Gomega, addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for series, value := range Samples(body) {
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[series] = v
		}
	}
	return out
}

// Samples splits a text exposition into "name{labels}" -> value as served, comments left out.
func Samples(body []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

// MetricsReaderToken creates ServiceAccount ns/sa, binds it to ClusterRole
// role (a role that grants get on /metrics), and returns a token for it. The
// binding goes when the test ends.
func MetricsReaderToken(t testing.TB, g Gomega, kube kubernetes.Interface, ns, sa, role string) string {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa + "-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}}}
	_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	return Token(g, kube, ns, sa)
}

// Token creates ServiceAccount ns/sa and returns an hour's token for it.
func Token(g Gomega, kube kubernetes.Interface, ns, sa string) string {
	ctx := context.Background()
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// GetSecureMetrics reads https://addr/metrics with bearer ("" sends no
// token) and returns the status and body. The servers under test sign their
// own certificates: what is checked is who may read, not the chain.
func GetSecureMetrics(g Gomega, addr, bearer string) (int, string) {
	hc := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
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
