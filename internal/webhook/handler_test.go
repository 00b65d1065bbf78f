package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cli"
)

func init() {
	// The admission library logs every undecodable request; the fuzzer
	// sends thousands.
	log.SetLogger(logr.Discard())
}

var icKind = metav1.GroupVersionKind{Group: "kubefledged.io", Version: "v1alpha2", Kind: "ImageCache"}

func raw(g *WithT, ic *v1alpha2.ImageCache) runtime.RawExtension {
	ic.APIVersion, ic.Kind = "kubefledged.io/v1alpha2", "ImageCache"
	b, err := json.Marshal(ic)
	g.Expect(err).NotTo(HaveOccurred())
	return runtime.RawExtension{Raw: b}
}

func cache(images ...string) *v1alpha2.ImageCache {
	return &v1alpha2.ImageCache{
		ObjectMeta: metav1.ObjectMeta{Name: "ic", Namespace: "ns"},
		Spec:       v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: images}}},
	}
}

func TestHandle(t *testing.T) {
	h := NewHandler()
	processing := cache("nginx")
	processing.Status.Status = v1alpha2.ImageCacheActionStatusProcessing
	withAnnotation := processing.DeepCopy()
	withAnnotation.Annotations = map[string]string{v1alpha2.PurgeAnnotation: ""}
	cases := []struct {
		name    string
		req     func(g *WithT) admissionv1.AdmissionRequest
		allowed bool
		code    int32
		msg     string
	}{
		{name: "good create", allowed: true, req: func(g *WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Create, Object: raw(g, cache("nginx", "redis"))}
		}},
		{name: "bad create", code: http.StatusUnprocessableEntity, req: func(g *WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Create, Object: raw(g, cache("nginx", "nginx:latest"))}
		}, msg: `ImageCache.kubefledged.io "ic" is invalid: spec.cacheSpec[0].images[1]: Invalid value: "nginx:latest": names the same image as spec.cacheSpec[0].images[0] ("nginx")`},
		{name: "generateName", code: http.StatusUnprocessableEntity, req: func(g *WithT) admissionv1.AdmissionRequest {
			ic := cache("BAD")
			ic.Name, ic.GenerateName = "", "cache-"
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Create, Object: raw(g, ic)}
		}, msg: `ImageCache.kubefledged.io "cache-" is invalid`},
		{name: "annotation added during processing", allowed: true, req: func(g *WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update,
				Object: raw(g, withAnnotation.DeepCopy()), OldObject: raw(g, processing.DeepCopy())}
		}},
		{name: "edit during processing", allowed: true, req: func(g *WithT) admissionv1.AdmissionRequest {
			edited := processing.DeepCopy()
			edited.Spec.CacheSpec[0].Images = []string{"nginx", "redis"}
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update,
				Object: raw(g, edited), OldObject: raw(g, processing.DeepCopy())}
		}},
		{name: "invalid edit during processing", code: http.StatusUnprocessableEntity, req: func(g *WithT) admissionv1.AdmissionRequest {
			edited := processing.DeepCopy()
			edited.Spec.CacheSpec[0].Images = []string{"nginx", "nginx:latest"}
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update,
				Object: raw(g, edited), OldObject: raw(g, processing.DeepCopy())}
		}, msg: `ImageCache.kubefledged.io "ic" is invalid: spec.cacheSpec[0].images[1]: Invalid value: "nginx:latest": names the same image`},
		{name: "tolerations changed", code: http.StatusUnprocessableEntity, req: func(g *WithT) admissionv1.AdmissionRequest {
			tolerant := cache("nginx")
			tolerant.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update,
				Object: raw(g, tolerant), OldObject: raw(g, cache("nginx"))}
		}, msg: `ImageCache.kubefledged.io "ic" is invalid: spec.cacheSpec[0].tolerations: Invalid value: [{"key":"gpu","operator":"Exists"}]: a list's tolerations cannot change (they were [] (none))`},
		{name: "annotation removal during processing", allowed: true, req: func(g *WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update,
				Object: raw(g, processing.DeepCopy()), OldObject: raw(g, withAnnotation.DeepCopy())}
		}},
		{name: "delete", allowed: true, req: func(g *WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Delete, OldObject: raw(g, cache("BAD"))}
		}},
		{name: "another kind", allowed: true, req: func(*WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{}`)}}
		}},
		{name: "undecodable object", code: http.StatusBadRequest, req: func(*WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: []byte(`{"spec":{"cacheSpec":"x"}}`)}}
		}, msg: "decode ImageCache"},
		{name: "empty object", code: http.StatusBadRequest, req: func(*WithT) admissionv1.AdmissionRequest {
			return admissionv1.AdmissionRequest{Kind: icKind, Operation: admissionv1.Update}
		}, msg: "decode ImageCache"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: c.req(g)})
			g.Expect(resp.Allowed).To(Equal(c.allowed))
			if !c.allowed {
				g.Expect(resp.Result).NotTo(BeNil())
				g.Expect(resp.Result.Code).To(Equal(c.code))
				g.Expect(resp.Result.Message).To(ContainSubstring(c.msg))
			}
		})
	}
}

// review posts body to the webhook as the apiserver would and returns the
// decoded answer.
func review(t testing.TB, body []byte) *admissionv1.AdmissionReview {
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	NewWebhook().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d", rec.Code)
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %q", err, rec.Body.String())
	}
	if out.Response == nil {
		t.Fatalf("AdmissionReview without a response: %q", rec.Body.String())
	}
	if !out.Response.Allowed && out.Response.Result == nil {
		t.Fatalf("denied without a reason: %q", rec.Body.String())
	}
	return out
}

func reviewBody(op, object, oldObject string) []byte {
	return []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"kubefledged.io","version":"v1alpha2","kind":"ImageCache"},` +
		`"resource":{"group":"kubefledged.io","version":"v1alpha2","resource":"imagecaches"},` +
		`"name":"ic","namespace":"ns","operation":"` + op + `","userInfo":{},"object":` + object +
		`,"oldObject":` + oldObject + `}}`)
}

const goodObject = `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"ic","namespace":"ns"},` +
	`"spec":{"cacheSpec":[{"images":["nginx:1.27"],"nodeSelector":{"zone":"a"}}],"imagePullSecrets":[{"name":"r"}]}}`

func TestServeHTTP(t *testing.T) {
	g := NewWithT(t)
	out := review(t, reviewBody("CREATE", goodObject, "null"))
	g.Expect(out.Response.Allowed).To(BeTrue())
	g.Expect(string(out.Response.UID)).To(Equal("u-1"))
	g.Expect(out.Kind).To(Equal("AdmissionReview"))

	bad := strings.Replace(goodObject, `"nginx:1.27"`, `"nginx:1.27","docker.io/library/nginx:1.27"`, 1)
	out = review(t, reviewBody("UPDATE", bad, goodObject))
	g.Expect(out.Response.Allowed).To(BeFalse())
	g.Expect(out.Response.Result.Message).To(ContainSubstring(`spec.cacheSpec[0].images[1]: Invalid value: "docker.io/library/nginx:1.27"`))

	out = review(t, []byte(`not json`))
	g.Expect(out.Response.Allowed).To(BeFalse())
	g.Expect(out.Response.Result.Code).To(Equal(int32(http.StatusBadRequest)))
}

// FuzzAdmissionDecode feeds arbitrary bytes to the webhook three ways: as
// the whole request body, as the object inside a well-formed review, and
// straight to the handler as create and update objects. Whatever comes in,
// the webhook must answer, and a denial must carry a reason.
func FuzzAdmissionDecode(f *testing.F) {
	for _, seed := range []string{
		string(reviewBody("CREATE", goodObject, "null")),
		string(reviewBody("UPDATE", goodObject, goodObject)),
		goodObject,
		`{"spec":{"cacheSpec":[{"images":[]}]}}`,
		`{"spec":{"cacheSpec":[{"images":["NGINX","nginx","nginx"],"nodeSelector":{"a b":"c d"}}]}}`,
		`{"status":{"status":"Processing"},"metadata":{"annotations":{"kubefledged.io/refresh-imagecache":""}}}`,
		`{"spec":{"cacheSpec":null,"imagePullSecrets":[{"name":""}]}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`,
		`{"kind":"Pod","apiVersion":"v1"}`,
		`{}`, `[]`, `null`, `""`, ``, `{`, "\x00\xff", `{"spec":{"cacheSpec":[{"images":["a"]}]},"spec":1}`,
	} {
		f.Add([]byte(seed))
	}
	h := NewHandler()
	f.Fuzz(func(t *testing.T, data []byte) {
		review(t, data)
		review(t, reviewBody("CREATE", string(data), "null"))
		review(t, reviewBody("UPDATE", string(data), goodObject))
		for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update} {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind: icKind, Operation: op,
				Object: runtime.RawExtension{Raw: data}, OldObject: runtime.RawExtension{Raw: data},
			}}
			resp := h.Handle(context.Background(), req)
			if !resp.Allowed && resp.Result == nil {
				t.Fatalf("%s denied without a reason", op)
			}
		}
	})
}

func TestBindFlags(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(NamespaceEnv, "kube-fledged")
	var o Options
	fs := cli.NewFlagSet("controller")
	o.BindFlags(fs)
	g.Expect(o).To(Equal(Options{Enable: true, Port: 9443, CertDir: "/tmp/k8s-webhook-server/serving-certs",
		CertManagement: "self", SecretName: "kubefledged-webhook-cert", ServiceName: "kubefledged-webhook",
		ConfigurationName: "validate-image-cache.kubefledged.io", Namespace: "kube-fledged",
		CertValidity: 365 * 24 * time.Hour, RotateBefore: 30 * 24 * time.Hour}))
	g.Expect(o.Validate()).To(Succeed())
	g.Expect(o.Hosts()).To(Equal([]string{"kubefledged-webhook.kube-fledged.svc", "kubefledged-webhook",
		"kubefledged-webhook.kube-fledged", "kubefledged-webhook.kube-fledged.svc.cluster.local"}))

	g.Expect(cli.Parse(fs, []string{"--webhook-port=8443", "--webhook-cert-management=External",
		"--enable-webhook=false", "--webhook-cert-validity=48h", "--webhook-cert-rotate-before=2h"})).To(Succeed())
	g.Expect(o.Port).To(Equal(8443))
	g.Expect(o.CertManagement).To(Equal("external"))
	g.Expect(o.Enable).To(BeFalse())
	g.Expect(o.CertValidity).To(Equal(48 * time.Hour))
	g.Expect(o.RotateBefore).To(Equal(2 * time.Hour))

	for args, want := range map[string]string{
		"--webhook-port=0":                  `invalid value "0" for flag --webhook-port: 0 is too small: use 1 or more`,
		"--webhook-cert-management=certmgr": `"certmgr" is not allowed: use one of self, external`,
		"--webhook-cert-validity=10m":       `"10m" is too short: use at least 1h0m0s`,
	} {
		var o Options
		fs := cli.NewFlagSet("controller")
		o.BindFlags(fs)
		g.Expect(cli.Parse(fs, []string{args})).To(MatchError(ContainSubstring(want)), args)
	}

	var help bytes.Buffer
	cli.Usage(fs, &help)
	g.Expect(help.String()).To(ContainSubstring("-webhook-cert-rotate-before long"))
	g.Expect(help.String()).NotTo(ContainSubstring("PANIC"))
}

func TestValidateOptions(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(NamespaceEnv, "")
	var o Options
	o.BindFlags(flag.NewFlagSet("x", flag.ContinueOnError))
	err := o.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("no namespace for the webhook certificate Secret: set KUBEFLEDGED_NAMESPACE")))
	o.CertManagement = CertExternal
	g.Expect(o.Validate()).To(Succeed(), "external needs no namespace")
	o.CertManagement = CertSelf
	o.Namespace = "ns"
	o.RotateBefore = o.CertValidity
	g.Expect(o.Validate()).To(MatchError(ContainSubstring("must be positive and shorter than --webhook-cert-validity")))
	o.RotateBefore, o.Port, o.SecretName = time.Hour, 70000, ""
	err = o.Validate()
	g.Expect(err).To(MatchError(ContainSubstring("--webhook-port 70000: use a port from 1 to 65535")))
	g.Expect(err).To(MatchError(ContainSubstring("--webhook-cert-secret is empty")))
	o.Enable = false
	g.Expect(o.Validate()).To(Succeed())
}
