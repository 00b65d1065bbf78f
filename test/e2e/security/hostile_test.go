package security

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/operator"
	"github.com/kubefledged/kube-fledged/test/framework"
)

// Where a refusal comes from.
const (
	bySchema  = "schema"  // the CRD's OpenAPI schema
	byStrict  = "strict"  // strict field validation while decoding
	byWebhook = "webhook" // our admission webhook
	byServer  = "server"  // the apiserver before any of those (size, syntax)
)

// hostile is one bad request.
type hostile struct {
	name string
	// method is POST (create, body is the object), or PATCH with patch the
	// patch type (body is the patch of the stored target).
	method string
	patch  types.PatchType
	body   []byte
	by     string
	code   int
	want   []string
}

const digest64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func imageCache(name, spec string) []byte {
	return []byte(`{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"` + name + `"},"spec":` + spec + `}`)
}

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// images is a cacheSpec of one list with these images, as JSON.
func oneList(imgs ...string) string {
	var q []string
	for _, i := range imgs {
		q = append(q, jsonString(i))
	}
	return `{"cacheSpec":[{"images":[` + strings.Join(q, ",") + `]}]}`
}

func repeatJSON(n int, f func(i int) string) string {
	var parts []string
	for i := 0; i < n; i++ {
		parts = append(parts, f(i))
	}
	return strings.Join(parts, ",")
}

func hostileImageCaches() []hostile {
	var cs []hostile
	add := func(name, by string, code int, spec string, want ...string) {
		cs = append(cs, hostile{name: name, method: http.MethodPost, body: imageCache("h-"+fmt.Sprint(len(cs)), spec), by: by, code: code, want: want})
	}
	raw := func(name, by string, code int, body string, want ...string) {
		cs = append(cs, hostile{name: name, method: http.MethodPost, body: []byte(body), by: by, code: code, want: want})
	}
	ref := `not a valid image reference`

	// Wrong types, sent as raw JSON: a typed client could not even say them.
	add("images is a string", bySchema, 422, `{"cacheSpec":[{"images":"nginx"}]}`,
		`spec.cacheSpec[0].images: Invalid value: "string": spec.cacheSpec[0].images in body must be of type array`)
	// Strict decoding sees an object's keys before the schema sees its type.
	add("cacheSpec is an object", byStrict, 400, `{"cacheSpec":{"images":["nginx"]}}`,
		`strict decoding error: unknown field "spec.cacheSpec.images"`)
	add("image is a number", bySchema, 422, `{"cacheSpec":[{"images":[42]}]}`,
		`spec.cacheSpec[0].images[0]: Invalid value: "integer": spec.cacheSpec[0].images[0] in body must be of type string`)
	add("image is null", bySchema, 422, `{"cacheSpec":[{"images":[null]}]}`, `spec.cacheSpec[0].images[0]`)
	add("selector value is a number", bySchema, 422, `{"cacheSpec":[{"images":["nginx"],"nodeSelector":{"zone":1}}]}`,
		`spec.cacheSpec[0].nodeSelector.zone: Invalid value: "integer": spec.cacheSpec[0].nodeSelector.zone in body must be of type string`)
	add("pull secrets is a string", bySchema, 422, `{"cacheSpec":[{"images":["nginx"]}],"imagePullSecrets":"regcred"}`,
		`spec.imagePullSecrets: Invalid value: "string": spec.imagePullSecrets in body must be of type array`)
	add("tolerationSeconds is a string", bySchema, 422, `{"cacheSpec":[{"images":["nginx"],"tolerations":[{"key":"a","operator":"Exists","effect":"NoExecute","tolerationSeconds":"soon"}]}]}`,
		`spec.cacheSpec[0].tolerations[0].tolerationSeconds: Invalid value: "string"`, `must be of type integer`)
	add("spec is a string", bySchema, 422, `"nginx"`, `spec: Invalid value: "string": spec in body must be of type object`)
	raw("spec is missing", bySchema, 422, `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"h-nospec"}}`, `spec: Required value`)
	add("cacheSpec is missing", bySchema, 422, `{}`, `spec.cacheSpec: Required value`)
	add("images are missing", bySchema, 422, `{"cacheSpec":[{}]}`, `spec.cacheSpec[0]: Invalid value: a list needs images, fromPods or fromWorkloads`)

	// Sizes: every list and string is bounded, so no one cache can hold the
	// controller (or etcd) hostage.
	add("no list", bySchema, 422, `{"cacheSpec":[]}`, `spec.cacheSpec: Invalid value: 0: spec.cacheSpec in body should have at least 1 items`)
	add("empty list", bySchema, 422, `{"cacheSpec":[{"images":[]}]}`, `spec.cacheSpec[0].images in body should have at least 1 items`)
	add("empty image", bySchema, 422, oneList("nginx", ""), `spec.cacheSpec[0].images[1] in body should be at least 1 chars long`)
	add("257 images in a list", bySchema, 422, `{"cacheSpec":[{"images":[`+repeatJSON(257, func(i int) string { return fmt.Sprintf(`"app-%d"`, i) })+`]}]}`,
		`spec.cacheSpec[0].images: Too many: 257: must have at most 256 items`)
	add("65 lists", bySchema, 422, `{"cacheSpec":[`+repeatJSON(65, func(i int) string { return fmt.Sprintf(`{"images":["app-%d"]}`, i) })+`]}`,
		`spec.cacheSpec: Too many: 65: must have at most 64 items`)
	add("image of 513 characters", bySchema, 422, oneList("registry.example.com/"+strings.Repeat("a", 492)),
		`spec.cacheSpec[0].images[0]: Too long: may not be more than 512 bytes`)
	add("image of 100 KiB", bySchema, 422, oneList(strings.Repeat("a", 100<<10)), `spec.cacheSpec[0].images[0]: Too long: may not be more than 512 bytes`)
	add("65 selector keys", bySchema, 422, `{"cacheSpec":[{"images":["nginx"],"nodeSelector":{`+repeatJSON(65, func(i int) string { return fmt.Sprintf(`"k%d":"v"`, i) })+`}}]}`,
		`spec.cacheSpec[0].nodeSelector: Too many: 65: must have at most 64 items`)
	add("33 pull secrets", bySchema, 422, `{"cacheSpec":[{"images":["nginx"]}],"imagePullSecrets":[`+repeatJSON(33, func(i int) string { return fmt.Sprintf(`{"name":"s%d"}`, i) })+`]}`,
		`spec.imagePullSecrets: Too many: 33: must have at most 32 items`)
	add("33 tolerations", bySchema, 422, `{"cacheSpec":[{"images":["nginx"],"tolerations":[`+repeatJSON(33, func(i int) string { return fmt.Sprintf(`{"key":"k%d","operator":"Exists"}`, i) })+`]}]}`,
		`spec.cacheSpec[0].tolerations: Too many: 33: must have at most 32 items`)
	raw("a body of 4 MiB", byServer, 413, string(imageCache("h-huge", `{"cacheSpec":[{"images":["nginx"]}],"padding":"`+strings.Repeat("x", 4<<20)+`"}`)),
		`Request entity too large`)

	// Unknown and duplicated fields, with strict field validation: a typo is
	// an error, not a silently ignored setting.
	add("unknown field in spec", byStrict, 400, `{"cacheSpec":[{"images":["nginx"]}],"imagePullSecret":[{"name":"x"}]}`,
		`strict decoding error: unknown field "spec.imagePullSecret"`)
	add("unknown field in a list", byStrict, 400, `{"cacheSpec":[{"images":["nginx"],"nodeselector":{"a":"b"}}]}`,
		`unknown field "spec.cacheSpec[0].nodeselector"`)
	raw("unknown top-level field", byStrict, 400, `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"h-top"},"spec":{"cacheSpec":[{"images":["nginx"]}]},"sepc":{}}`,
		`unknown field "sepc"`)
	raw("duplicate field", byStrict, 400, `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"h-dup"},"spec":{"cacheSpec":[{"images":["nginx"]}]},"spec":{"cacheSpec":[{"images":["evil"]}]}}`,
		`duplicate field "spec"`)

	// Not JSON, not ours.
	raw("not JSON", byServer, 400, `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache",`, `json parse error: unexpected end of JSON input`)
	raw("a Pod sent as an ImageCache", byServer, 400, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"h-pod"},"spec":{"containers":[{"name":"x","image":"x"}]}}`,
		`does not match the expected API version`)
	raw("10000 nested arrays", byServer, 400, `{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"h-deep"},"spec":{"cacheSpec":[{"images":`+
		strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}]}}`, `exceeded max depth`)

	// Invalid references: each one would fail every Job of its list, and
	// some are attempts to smuggle something into a command line or a log.
	for _, img := range []string{"NGINX", "nginx:", "nginx:1.27 alpine", "https://nginx", "busybox@sha256:abc",
		"../../etc/passwd", "nginx;rm -rf /", "$(id)", "nginx\n--privileged", "-v/:/host", "nginх:1.27" /* Cyrillic х */, "nginx\u202e72.1",
		"nginx\u0000", ":latest"} {
		add("reference "+strconv.Quote(img), byWebhook, 422, oneList("nginx:1.27", img), `spec.cacheSpec[0].images[1]: Invalid value: `+strconv.Quote(img)+`: `, ref)
	}
	add("registry port beyond 65535", byWebhook, 422, oneList("registry.example.com:99999999999/app:v1"),
		`spec.cacheSpec[0].images[0]: Invalid value: "registry.example.com:99999999999/app:v1": `, `registry port 99999999999 is out of range 1-65535`)
	add("the same image twice", byWebhook, 422, oneList("nginx", "docker.io/library/nginx:latest"),
		`spec.cacheSpec[0].images[1]: Invalid value: "docker.io/library/nginx:latest": names the same image as spec.cacheSpec[0].images[0] ("nginx")`)
	add("the same digest twice", byWebhook, 422, oneList("busybox:1@sha256:"+digest64, "busybox@sha256:"+digest64),
		`names the same image as spec.cacheSpec[0].images[0]`)

	// Invalid selectors, pull secrets and tolerations.
	sel := func(k, v string) string {
		return `{"cacheSpec":[{"images":["nginx"],"nodeSelector":{` + jsonString(k) + `:` + jsonString(v) + `}}]}`
	}
	add("selector key with a space", byWebhook, 422, sel("disk type", "ssd"), `spec.cacheSpec[0].nodeSelector: Invalid value: "disk type": not a valid label key`)
	add("empty selector key", byWebhook, 422, sel("", "x"), `spec.cacheSpec[0].nodeSelector: Invalid value: "": not a valid label key`)
	add("selector key with two slashes", byWebhook, 422, sel("a/b/c", "x"), `Invalid value: "a/b/c": not a valid label key`)
	add("selector value of 64 characters", byWebhook, 422, sel("zone", strings.Repeat("z", 64)), `spec.cacheSpec[0].nodeSelector[zone]: Invalid value: "`+strings.Repeat("z", 64)+`": not a valid label value: must be no more than 63 bytes`)
	add("selector value with a newline", byWebhook, 422, sel("zone", "a\nb"), `spec.cacheSpec[0].nodeSelector[zone]: Invalid value: "a\nb": not a valid label value`)
	secret := func(n string) string {
		return `{"cacheSpec":[{"images":["nginx"]}],"imagePullSecrets":[{"name":` + jsonString(n) + `}]}`
	}
	add("pull secret upper case", byWebhook, 422, secret("RegCred"), `spec.imagePullSecrets[0].name: Invalid value: "RegCred": not a valid Secret name`)
	add("pull secret path", byWebhook, 422, secret("../kube-system/token"), `spec.imagePullSecrets[0].name: Invalid value: "../kube-system/token": not a valid Secret name`)
	add("pull secret empty", byWebhook, 422, secret(""), `spec.imagePullSecrets[0].name: Invalid value: "": name a Secret of type kubernetes.io/dockerconfigjson`)
	tol := func(t string) string { return `{"cacheSpec":[{"images":["nginx"],"tolerations":[` + t + `]}]}` }
	add("toleration operator", byWebhook, 422, tol(`{"key":"a","operator":"Maybe"}`), `spec.cacheSpec[0].tolerations[0].operator: Unsupported value: "Maybe"`)
	add("toleration effect", byWebhook, 422, tol(`{"key":"a","operator":"Exists","effect":"Sometimes"}`), `spec.cacheSpec[0].tolerations[0].effect: Unsupported value: "Sometimes"`)
	add("toleration Exists with a value", byWebhook, 422, tol(`{"key":"a","operator":"Exists","value":"b"}`), `spec.cacheSpec[0].tolerations[0].value: Invalid value: "b": must be empty when operator is Exists`)
	add("toleration seconds without NoExecute", byWebhook, 422, tol(`{"key":"a","operator":"Exists","effect":"NoSchedule","tolerationSeconds":5}`),
		`spec.cacheSpec[0].tolerations[0].tolerationSeconds: Invalid value: 5: only allowed with effect NoExecute`)
	add("toleration key", byWebhook, 422, tol(`{"key":"bad key!","operator":"Exists"}`), `spec.cacheSpec[0].tolerations[0].key: Invalid value: "bad key!"`)

	// Edits of a stored cache (the "target") that may not happen.
	patch := func(name string, pt types.PatchType, body, by string, code int, want ...string) {
		cs = append(cs, hostile{name: name, method: http.MethodPatch, patch: pt, body: []byte(body), by: by, code: code, want: want})
	}
	patch("patch: a list added", types.MergePatchType, `{"spec":{"cacheSpec":[{"images":["nginx:1.27"]},{"images":["redis:7"]}]}}`, byWebhook, 422,
		`spec.cacheSpec: Invalid value: 2: the number of image lists cannot change (it was 1)`)
	patch("patch: selector changed", types.JSONPatchType, `[{"op":"add","path":"/spec/cacheSpec/0/nodeSelector","value":{"zone":"a"}}]`, byWebhook, 422,
		`spec.cacheSpec[0].nodeSelector: Invalid value: {"zone":"a"}: a list's node selector cannot change`)
	patch("patch: images of wrong type", types.JSONPatchType, `[{"op":"replace","path":"/spec/cacheSpec/0/images","value":"nginx"}]`, bySchema, 422,
		`spec.cacheSpec[0].images: Invalid value: "string": spec.cacheSpec[0].images in body must be of type array`)
	patch("patch: images an object", types.JSONPatchType, `[{"op":"replace","path":"/spec/cacheSpec/0/images","value":{"a":1}}]`, byStrict, 422,
		`strict decoding error: unknown field "spec.cacheSpec[0].images.a"`)
	patch("patch: invalid reference", types.MergePatchType, `{"spec":{"cacheSpec":[{"images":["nginx:1.27","NGINX"]}]}}`, byWebhook, 422,
		`spec.cacheSpec[0].images[1]: Invalid value: "NGINX": `+ref)
	patch("patch: unknown field", types.MergePatchType, `{"spec":{"cacheSpecs":[]}}`, byStrict, 422, `unknown field "spec.cacheSpecs"`)
	return cs
}

func kubeFledged(name, spec string) []byte {
	return []byte(`{"apiVersion":"charts.helm.kubefledged.io/v1alpha2","kind":"KubeFledged","metadata":{"name":"` + name + `"},"spec":` + spec + `}`)
}

func hostileKubeFledgeds() []hostile {
	var cs []hostile
	add := func(name, by string, code int, spec string, want ...string) {
		cs = append(cs, hostile{name: name, method: http.MethodPost, body: kubeFledged("h-"+fmt.Sprint(len(cs)), spec), by: by, code: code, want: want})
	}
	c := func(field, value string) string { return `{"controller":{` + jsonString(field) + `:` + value + `}}` }
	add("replicaCount is a string", bySchema, 422, c("replicaCount", `"two"`), `spec.controller.replicaCount: Invalid value: "string": spec.controller.replicaCount in body must be of type integer`)
	add("replicaCount 0", bySchema, 422, c("replicaCount", `0`), `spec.controller.replicaCount: Invalid value: 0: spec.controller.replicaCount in body should be greater than or equal to 1`)
	add("legacy replicaCount -1", bySchema, 422, `{"controllerReplicaCount":-1}`, `spec.controllerReplicaCount`, `should be greater than or equal to 1`)
	add("retention policy keep", bySchema, 422, c("jobRetentionPolicy", `"keep"`), `spec.controller.jobRetentionPolicy: Unsupported value: "keep": supported values: "delete", "retain"`)
	add("legacy retention policy keep", bySchema, 422, `{"args":{"controllerJobRetentionPolicy":"keep"}}`, `spec.args.controllerJobRetentionPolicy`)
	add("deadline without unit", bySchema, 422, c("imagePullDeadlineDuration", `"5 minutes"`), `spec.controller.imagePullDeadlineDuration: Invalid value: "5 minutes": spec.controller.imagePullDeadlineDuration in body should match`)
	add("pull policy", bySchema, 422, c("imagePullPolicy", `"Sometimes"`), `spec.controller.imagePullPolicy: Unsupported value: "Sometimes"`)
	add("service account name", bySchema, 422, c("jobServiceAccountName", `"Bad_Name"`), `spec.controller.jobServiceAccountName: Invalid value: "Bad_Name"`)
	add("relative CRI socket", bySchema, 422, c("criSocketPath", `"run/containerd.sock"`), `spec.controller.criSocketPath: Invalid value: "run/containerd.sock"`)
	add("lease namespace", bySchema, 422, c("leaderElectionNamespace", `"Kube_System"`), `spec.controller.leaderElectionNamespace: Invalid value: "Kube_System"`)
	add("extraArgs is a string", bySchema, 422, c("extraArgs", `"--privileged"`), `spec.controller.extraArgs: Invalid value: "string": spec.controller.extraArgs in body must be of type array`)
	add("maxConcurrentJobs 0", bySchema, 422, c("maxConcurrentJobs", `0`), `spec.controller.maxConcurrentJobs`, `greater than or equal to 1`)
	add("helperImage of 1 MiB", bySchema, 422, c("helperImage", jsonString(strings.Repeat("a", 1<<20))), `spec.controller.helperImage: Too long: may not be more than 512 bytes`)
	add("priorityClassName not a name", bySchema, 422, c("priorityClassName", `"Not A Name"`), `spec.controller.priorityClassName: Invalid value: "Not A Name": spec.controller.priorityClassName in body should match`)
	add("legacy webhookServer.priorityClassName not a name", bySchema, 422, `{"webhookServer":{"priorityClassName":"Not A Name"}}`, `spec.webhookServer.priorityClassName: Invalid value: "Not A Name"`)
	add("image digest", bySchema, 422, `{"image":{"digest":"sha256:xyz"}}`, `spec.image.digest: Invalid value: "sha256:xyz"`)
	add("fullnameOverride of 64", bySchema, 422, `{"fullnameOverride":"`+strings.Repeat("f", 64)+`"}`, `spec.fullnameOverride: Too long: may not be more than 63 bytes`)
	add("webhook port 70000", bySchema, 422, `{"webhook":{"port":70000}}`, `spec.webhook.port: Invalid value: 70000: spec.webhook.port in body should be less than or equal to 65535`)
	add("webhook timeout 31", bySchema, 422, `{"webhook":{"timeoutSeconds":31}}`, `spec.webhook.timeoutSeconds`, `less than or equal to 30`)
	add("webhook failure policy", bySchema, 422, `{"webhook":{"failurePolicy":"Maybe"}}`, `spec.webhook.failurePolicy: Unsupported value: "Maybe"`)
	add("spec is a string", bySchema, 422, `"helm install everything"`, `spec: Invalid value: "string": spec in body must be of type object`)
	add("unknown controller key", byStrict, 400, c("jobRetentionPolcy", `"retain"`), `unknown field "spec.controller.jobRetentionPolcy"`)
	add("unknown top-level key", byStrict, 400, `{"controler":{"replicaCount":2}}`, `unknown field "spec.controler"`)
	// The pod-level values carry the Kubernetes types' own schemas.
	add("affinity with an unknown field", byStrict, 400, `{"affinity":{"bogus":1}}`, `unknown field "spec.affinity.bogus"`)
	add("node affinity operator a number", bySchema, 422,
		`{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":1}]}]}}}}`,
		`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "integer"`)
	add("toleration with a misspelt field", byStrict, 400, `{"tolerations":[{"key":"a","efect":"NoSchedule"}]}`, `unknown field "spec.tolerations[0].efect"`)
	add("tolerationSeconds a string", bySchema, 422, `{"tolerations":[{"key":"a","tolerationSeconds":"forever"}]}`, `spec.tolerations[0].tolerationSeconds: Invalid value: "string"`)
	add("topology spread with an unknown field", byStrict, 400, `{"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","skew":2}]}`, `unknown field "spec.topologySpreadConstraints[0].skew"`)
	add("memory limit not a quantity", bySchema, 422, `{"resources":{"limits":{"memory":"lots"}}}`, `spec.resources.limits.memory`)
	add("privileged a string", bySchema, 422, `{"securityContext":{"privileged":"yes"}}`, `spec.securityContext.privileged: Invalid value: "string"`)
	add("pod runAsUser a string", bySchema, 422, `{"podSecurityContext":{"runAsUser":"root"}}`, `spec.podSecurityContext.runAsUser: Invalid value: "string"`)
	cs = append(cs, hostile{name: "a body of 4 MiB", method: http.MethodPost, by: byServer, code: 413,
		body: kubeFledged("h-huge", `{"nameOverride":"`+strings.Repeat("x", 4<<20)+`"}`), want: []string{`Request entity too large`}})
	return cs
}

// send makes one request as the admin (who may do anything RBAC allows, so
// only validation refuses), with strict field validation.
func send(cs kubernetes.Interface, path string, h hostile) (int, string, error) {
	var req = cs.Discovery().RESTClient().Post()
	if h.method == http.MethodPatch {
		req = cs.Discovery().RESTClient().Patch(h.patch)
	}
	res := req.AbsPath(path).Param("fieldValidation", "Strict").SetHeader("Content-Type", contentType(h)).Body(h.body).Do(context.Background())
	var code int
	res.StatusCode(&code)
	err := res.Error()
	if err == nil {
		return code, "", nil
	}
	return code, err.Error(), err
}

func contentType(h hostile) string {
	if h.method == http.MethodPatch {
		return string(h.patch)
	}
	return "application/json"
}

// TestHostileInput sends every entry of the tables: each must be refused,
// by the layer the table says, with a message that names the field and what
// is wrong with it. None may reach the controller or the operator (nothing
// is stored, no status written, no release installed), and both must still
// serve afterwards.
func TestHostileInput(t *testing.T) {
	w := setup(t)
	ctrlRun := startController(t, w)
	opRun := startOperator(t, w)
	ctx := context.Background()
	g := NewWithT(t)
	ns := "hostile"
	g.Expect(w.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

	// The stored cache that the edits try to break; it must keep the status
	// the controller gave it.
	target := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target"},
		Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27"}}}}}
	g.Expect(w.admin.Create(ctx, target)).To(Succeed())
	before := finished(t, w, client.ObjectKeyFromObject(target))

	counts := map[string]int{}
	tried := 0
	for _, table := range []struct {
		what  string
		path  string
		cases []hostile
	}{
		{"ImageCache", "/apis/kubefledged.io/v1alpha2/namespaces/" + ns + "/imagecaches", hostileImageCaches()},
		{"KubeFledged", "/apis/charts.helm.kubefledged.io/v1alpha2/namespaces/" + ns + "/kubefledgeds", hostileKubeFledgeds()},
	} {
		for _, h := range table.cases {
			t.Run(table.what+"/"+h.name, func(t *testing.T) {
				g := NewWithT(t)
				path := table.path
				if h.method == http.MethodPatch {
					path += "/target"
				}
				tried++
				code, msg, err := send(w.kube, path, h)
				g.Expect(err).To(HaveOccurred(), "accepted")
				g.Expect(code).To(Equal(h.code), msg)
				fromWebhook := strings.Contains(msg, `admission webhook "validate-image-cache.kubefledged.io" denied the request`)
				g.Expect(fromWebhook).To(Equal(h.by == byWebhook), "refused by the wrong layer: %s", msg)
				if h.by == byStrict {
					g.Expect(msg).To(Or(ContainSubstring("strict decoding error"), ContainSubstring("unknown field"), ContainSubstring("duplicate field")), msg)
				}
				for _, want := range h.want {
					g.Expect(msg).To(ContainSubstring(want))
				}
				if len(msg) > 2000 {
					msg = msg[:2000] + "..."
				}
				counts[table.what+" "+h.by]++
				t.Logf("%d %s", code, msg)
			})
		}
	}

	t.Run("ImageCache/valid but oversized", func(t *testing.T) {
		tried++
		counts["ImageCache "+oversized(t, w, ns)]++
	})
	// Nothing got through: the namespace holds only the target, unchanged.
	caches := &v1alpha2.ImageCacheList{}
	g.Expect(w.admin.List(ctx, caches, client.InNamespace(ns))).To(Succeed())
	g.Expect(caches.Items).To(HaveLen(1))
	after := &v1alpha2.ImageCache{}
	g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(target), after)).To(Succeed())
	g.Expect(after.Spec).To(Equal(before.Spec))
	g.Expect(after.Generation).To(Equal(before.Generation))
	g.Expect(after.Status.StartTime).To(Equal(before.Status.StartTime), "an operation started")
	kfs := &unstructured.UnstructuredList{}
	kfs.SetGroupVersionKind(operator.KubeFledgedGVK.GroupVersion().WithKind("KubeFledgedList"))
	g.Expect(w.admin.List(ctx, kfs, client.InNamespace(ns))).To(Succeed())
	g.Expect(kfs.Items).To(BeEmpty())
	secrets := &corev1.SecretList{}
	g.Expect(w.admin.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"})).To(Succeed())
	g.Expect(secrets.Items).To(BeEmpty(), "a Helm release was installed")

	// Both still serve: health, admission, and real work.
	g.Expect(ctrlRun.alive()).To(Succeed())
	g.Expect(opRun.alive()).To(Succeed())
	good := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "after"},
		Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"busybox:1.36"}}}}}
	g.Expect(w.admin.Create(ctx, good)).To(Succeed())
	st := finished(t, w, client.ObjectKeyFromObject(good))
	g.Expect(st.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusSucceeded))
	kf := &unstructured.Unstructured{}
	kf.SetGroupVersionKind(operator.KubeFledgedGVK)
	// In the operator's namespace: it installs from no other.
	kf.SetNamespace(operatorNS)
	kf.SetName("good")
	// Without the webhook registration: its Service would not route in the
	// sandbox, and failurePolicy Fail would then refuse every ImageCache.
	kf.Object["spec"] = map[string]interface{}{"webhook": map[string]interface{}{"enabled": false}}
	g.Expect(w.admin.Create(ctx, kf)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(w.admin.Get(ctx, client.ObjectKeyFromObject(kf), kf)).To(Succeed())
		deployed, _, _ := framework.Condition(kf, "Deployed")
		g.Expect(deployed).To(Equal("True"), "status: %v", kf.Object["status"])
	}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	g.Expect(w.admin.Delete(ctx, kf)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(w.admin.Get(ctx, client.ObjectKeyFromObject(kf), kf))
	}).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(BeTrue(), "uninstall")
	g.Expect(ctrlRun.alive()).To(Succeed())
	g.Expect(opRun.alive()).To(Succeed())

	t.Logf("FIGURES hostile: inputs=%d refused-by=%v; afterwards the controller pulled a new cache and the operator installed and uninstalled a release, both as their ServiceAccounts",
		tried, counts)
}

// oversized sends a cache that the schema accepts but whose spec is so large
// (64 lists of 256 images of some 60 characters: about 1 MiB) that its final
// status, which copies the spec into status.processedSpec, would exceed
// etcd's request limit. Before the webhook bounded the spec's size such a
// cache was admitted, ran, and stayed Processing for good. It must be
// refused, saying what is too large, by the webhook's bound on the whole
// spec (the CRD has no rule on the total: Kubernetes 1.27 refuses one as too
// costly). It reports which refused it.
func oversized(t *testing.T, w *world, ns string) string {
	g := NewWithT(t)
	ctx := context.Background()
	ic := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oversized"}}
	for l := 0; l < 64; l++ {
		var imgs []string
		for i := 0; i < 256; i++ {
			imgs = append(imgs, fmt.Sprintf("registry.example.com/some-team/some-app-%02d-%03d:v1.2.3-xxxxxxxxxx", l, i))
		}
		// On no node: the test is about admission, not about 16384 Jobs.
		ic.Spec.CacheSpec = append(ic.Spec.CacheSpec, v1alpha2.CacheSpecImages{Images: imgs, NodeSelector: map[string]string{"no": "such-node"}})
	}
	err := w.admin.Create(ctx, ic)
	if err == nil {
		_ = w.admin.Delete(ctx, ic)
	}
	g.Expect(err).To(HaveOccurred(), "a %d KiB spec was admitted", len(mustJSON(ic.Spec))>>10)
	g.Expect(err.Error()).To(ContainSubstring("over the limit of 256 KiB"), "a refusal must say what is too large")
	t.Logf("%d KiB spec refused: %v", len(mustJSON(ic.Spec))>>10, err)
	if strings.Contains(err.Error(), "admission webhook") {
		return "webhook"
	}
	return "schema"
}

func mustJSON(v interface{}) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// finished waits for a cache's operation to end and returns the cache.
func finished(t *testing.T, w *world, key client.ObjectKey) *v1alpha2.ImageCache {
	t.Helper()
	ic := &v1alpha2.ImageCache{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(w.admin.Get(context.Background(), key, ic)).To(Succeed())
		g.Expect(ic.Status.Status).To(BeElementOf(v1alpha2.ImageCacheActionStatusSucceeded, v1alpha2.ImageCacheActionStatusFailed,
			v1alpha2.ImageCacheActionStatusNoImagesPulledOrDeleted), "status %q", ic.Status.Status)
	}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	return ic
}
