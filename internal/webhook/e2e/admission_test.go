package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gtypes "github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/webhook/certs"
	"github.com/kubefledged/kube-fledged/internal/webhook/validation/validationtest"
	"github.com/kubefledged/kube-fledged/test/framework"
)

const digest = validationtest.Digest

// pair is two replicas sharing one Secret, both called by the apiserver for
// every admission of the scenario (one webhook each in the configuration).
type pair struct {
	e          *env
	ns         string // where the ImageCaches go
	controller string // where the Secret lives
	a, b       *replica
	secret     string
	config     string
}

var (
	mainPair     *pair
	mainPairOnce sync.Once
)

// shared starts the replicas most tests use, once for the package.
func shared(t *testing.T) *pair {
	e := setup(t)
	mainPairOnce.Do(func() {
		p := &pair{e: e, secret: "kubefledged-webhook-cert", config: "validate-image-cache.kubefledged.io"}
		g := NewWithT(t)
		p.controller = e.namespace(t, "kubefledged")
		p.ns = e.namespace(t, "main")
		// Started together, as two replicas of a new Deployment: both find
		// the Secret missing.
		var err error
		p.a, err = startReplica(options(p.controller, p.secret, p.config))
		g.Expect(err).NotTo(HaveOccurred())
		p.b, err = startReplica(options(p.controller, p.secret, p.config))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(e.configuration(p.config, "main", nil, p.a, p.b)).To(Succeed())
		e.waitServing(t, p.ns)
		mainPair = p
	})
	if mainPair == nil {
		t.Fatal("the shared replicas did not start")
	}
	return mainPair
}

type badCase struct {
	name string
	// mutate turns a good ImageCache into a bad one; for an update it is
	// applied to a stored good one.
	mutate func(ic *v1alpha2.ImageCache)
	update bool
	// schema marks a case the CRD's schema rejects before the webhook runs.
	schema bool
	want   []string
}

// badCases are the refusals the rules' unit tests make too
// (validationtest.Rejected), and those only the API server makes: the
// schema's, the update rules' on a stored object, and the denial's framing.
func badCases() []badCase {
	set := func(list int, images ...string) func(*v1alpha2.ImageCache) {
		return func(ic *v1alpha2.ImageCache) { ic.Spec.CacheSpec[list].Images = images }
	}
	var cases []badCase
	for _, c := range validationtest.Rejected() {
		cases = append(cases, badCase{name: c.Name, mutate: c.Mutate, want: c.Want})
	}
	return append(cases, []badCase{
		{name: "several errors at once", mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"Bad", "nginx", "nginx:latest"}
			ic.Spec.ImagePullSecrets[0].Name = "A"
		}, want: []string{`is invalid: [`, `spec.cacheSpec[0].images[0]: Invalid value: "Bad"`,
			`spec.cacheSpec[0].images[2]: Invalid value: "nginx:latest": names the same image as spec.cacheSpec[0].images[1] ("nginx")`,
			`spec.imagePullSecrets[0].name: Invalid value: "A"`}},
		// The CRD's schema answers these before the webhook is called.
		{name: "empty image list", schema: true, mutate: set(0, []string{}...), want: []string{
			`spec.cacheSpec[0]: Invalid value: a list needs images, fromPods or fromWorkloads`}},
		{name: "empty image", schema: true, mutate: set(0, "nginx", ""), want: []string{
			`spec.cacheSpec[0].images[1]: Invalid value: "": spec.cacheSpec[0].images[1] in body should be at least 1 chars long`}},
		// Updates of a stored good ImageCache.
		{name: "update: list added", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = append(ic.Spec.CacheSpec, v1alpha2.CacheSpecImages{Images: []string{"busybox"}})
		}, want: []string{`spec.cacheSpec: Invalid value: 3: the number of image lists cannot change (it was 2); only the images of each list and spec.imagePullSecrets may change: to add or remove a list, create or delete an ImageCache`}},
		{name: "update: list removed", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec = ic.Spec.CacheSpec[:1]
		}, want: []string{`spec.cacheSpec: Invalid value: 1: the number of image lists cannot change (it was 2)`}},
		{name: "update: selector changed", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector["kubernetes.io/arch"] = "amd64"
		}, want: []string{`spec.cacheSpec[1].nodeSelector: Invalid value: {"kubernetes.io/arch":"amd64"}: a list's node selector cannot change (it was {"kubernetes.io/arch":"arm64"}); only its images may change: to cache on other nodes, purge this ImageCache and create another`}},
		{name: "update: selector removed", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector = nil
		}, want: []string{`spec.cacheSpec[1].nodeSelector: Invalid value: {}: a list's node selector cannot change (it was {"kubernetes.io/arch":"arm64"})`}},
		{name: "update: selector added", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].NodeSelector = map[string]string{"zone": "a"}
		}, want: []string{`spec.cacheSpec[0].nodeSelector: Invalid value: {"zone":"a"}: a list's node selector cannot change (it was {} (all nodes))`}},
		{name: "update: tolerations changed", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}, want: []string{`spec.cacheSpec[1].tolerations: Invalid value: [{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]: a list's tolerations cannot change (they were [] (none)); only its images may change: to cache on other nodes, purge this ImageCache and create another`}},
		{name: "update: duplicate added", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = append(ic.Spec.CacheSpec[0].Images, "docker.io/library/nginx:1.27")
		}, want: []string{`spec.cacheSpec[0].images[2]: Invalid value: "docker.io/library/nginx:1.27": names the same image as spec.cacheSpec[0].images[0] ("nginx:1.27")`}},
		{name: "update: bad pull secret", update: true, mutate: func(ic *v1alpha2.ImageCache) {
			ic.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "Not.Valid"}}
		}, want: []string{`spec.imagePullSecrets[0].name: Invalid value: "Not.Valid": not a valid Secret name`}},
	}...)
}

func TestBadImageCachesRejected(t *testing.T) {
	p := shared(t)
	ctx := context.Background()
	webhookRejected := 0
	for i, c := range badCases() {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			ic := goodCache(p.ns, fmt.Sprintf("bad-%d", i))
			var err error
			if c.update {
				g.Expect(p.e.c.Create(ctx, ic)).To(Succeed())
				c.mutate(ic)
				err = p.e.c.Update(ctx, ic)
			} else {
				c.mutate(ic)
				err = p.e.c.Create(ctx, ic)
			}
			msg := denial(t, err)
			if c.schema {
				g.Expect(msg).NotTo(ContainSubstring("admission webhook"))
			} else {
				g.Expect(msg).To(MatchRegexp(`^admission webhook "r[01]\.validate-image-cache\.kubefledged\.io" denied the request: ImageCache\.kubefledged\.io "bad-\d+" is invalid: `))
				webhookRejected++
			}
			for _, w := range c.want {
				g.Expect(msg).To(ContainSubstring(w))
			}
		})
	}
	t.Logf("%d bad ImageCaches rejected, %d of them by the webhook", len(badCases()), webhookRejected)
	NewWithT(t).Expect(webhookRejected).To(BeNumerically(">=", 20))
}

func TestGoodImageCachesAccepted(t *testing.T) {
	p := shared(t)
	ctx := context.Background()
	g := NewWithT(t)
	for i, mutate := range []func(*v1alpha2.ImageCache){
		func(*v1alpha2.ImageCache) {},
		func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[0].Images = []string{"busybox@" + digest, "127.0.0.1:5000/app:v1", "nginx:1.26", "nginx:1.27"}
			ic.Spec.ImagePullSecrets = nil
		},
		func(ic *v1alpha2.ImageCache) {
			ic.Spec.CacheSpec[1].NodeSelector = map[string]string{"node-role.kubernetes.io/worker": "", "example.com/zone": "eu-west_1.a"}
		},
		func(ic *v1alpha2.ImageCache) { ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: ""} },
	} {
		ic := goodCache(p.ns, fmt.Sprintf("good-%d", i))
		mutate(ic)
		g.Expect(p.e.c.Create(ctx, ic)).To(Succeed(), "good-%d", i)
	}

	// What may change: images, pull secrets, metadata.
	ic := goodCache(p.ns, "edited")
	g.Expect(p.e.c.Create(ctx, ic)).To(Succeed())
	ic.Spec.CacheSpec[0].Images = []string{"nginx:1.28"}
	ic.Spec.CacheSpec[1].Images = append(ic.Spec.CacheSpec[1].Images, "busybox")
	g.Expect(p.e.c.Update(ctx, ic)).To(Succeed())
	ic.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "other"}, {Name: "third.one"}}
	ic.Labels = map[string]string{"team": "a"}
	g.Expect(p.e.c.Update(ctx, ic)).To(Succeed())
	ic.Annotations = map[string]string{v1alpha2.PurgeAnnotation: ""}
	g.Expect(p.e.c.Update(ctx, ic)).To(Succeed())
	g.Expect(p.e.c.Delete(ctx, ic)).To(Succeed())
}

func setStatus(g *WithT, c client.Client, ic *v1alpha2.ImageCache, st v1alpha2.ImageCacheActionStatus) {
	ic.Status = v1alpha2.ImageCacheStatus{Status: st, Reason: v1alpha2.ImageCacheReasonImageCacheRefresh,
		Message: "test", StartTime: &metav1.Time{Time: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)}}
	g.Expect(c.Status().Update(context.Background(), ic)).To(Succeed())
}

// TestEditsAdmittedWhileProcessing writes to a Processing cache the ways a
// GitOps tool does (an update, a server-side apply, a merge patch as from
// kubectl annotate): none may fail because an operation is running, since
// the controller queues them. What no status allows, moving a list to other
// nodes, is refused for that reason alone.
func TestEditsAdmittedWhileProcessing(t *testing.T) {
	p := shared(t)
	ctx := context.Background()
	g := NewWithT(t)
	c := p.e.c

	ic := goodCache(p.ns, "busy")
	ic.Spec.CacheSpec[0].Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	ic.Annotations = map[string]string{v1alpha2.RefreshAnnotation: ""}
	g.Expect(c.Create(ctx, ic)).To(Succeed())
	setStatus(g, c, ic, v1alpha2.ImageCacheActionStatusProcessing) // through the status subresource

	edit := ic.DeepCopy()
	edit.Spec.CacheSpec[0].Images = append(edit.Spec.CacheSpec[0].Images, "busybox")
	edit.Spec.ImagePullSecrets = nil
	g.Expect(c.Update(ctx, edit)).To(Succeed())

	// Flux and Argo CD (with server-side apply) send the whole manifest.
	manifest := []byte(`{"apiVersion":"kubefledged.io/v1alpha2","kind":"ImageCache","metadata":{"name":"busy"},"spec":{"cacheSpec":[` +
		`{"images":["nginx:1.28","quay.io/org/app:v1","busybox"],"tolerations":[{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]},` +
		`{"images":["redis:7"],"nodeSelector":{"kubernetes.io/arch":"arm64"}}]}}`)
	applied := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "busy"}}
	g.Expect(c.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, manifest),
		client.FieldOwner("gitops"), client.ForceOwnership)).To(Succeed())

	patch := []byte(`{"metadata":{"annotations":{"kubefledged.io/purge-imagecache":""}}}`)
	g.Expect(c.Patch(ctx, ic.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())

	stored := &v1alpha2.ImageCache{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ic), stored)).To(Succeed())
	g.Expect(stored.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
	g.Expect(stored.Spec.CacheSpec[0].Images).To(Equal([]string{"nginx:1.28", "quay.io/org/app:v1", "busybox"}))
	g.Expect(stored.Spec.ImagePullSecrets).To(BeEmpty())
	g.Expect(stored.Annotations).To(HaveKey(v1alpha2.RefreshAnnotation))
	g.Expect(stored.Annotations).To(HaveKey(v1alpha2.PurgeAnnotation))

	// Either replica may answer first; the rest is the whole message.
	refused := func(rest string) gtypes.GomegaMatcher {
		return MatchRegexp(`^admission webhook "r[01]\.validate-image-cache\.kubefledged\.io" denied the request: ` +
			regexp.QuoteMeta(`ImageCache.kubefledged.io "busy" is invalid: `+rest) + `$`)
	}
	edit = stored.DeepCopy()
	edit.Spec.CacheSpec[0].Tolerations[0].Effect = corev1.TaintEffectNoExecute
	g.Expect(denial(t, c.Update(ctx, edit))).To(refused(`spec.cacheSpec[0].tolerations: Invalid value: [{"key":"gpu","operator":"Exists","effect":"NoExecute"}]: ` +
		`a list's tolerations cannot change (they were [{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]); ` +
		`only its images may change: to cache on other nodes, purge this ImageCache and create another`))

	edit = stored.DeepCopy()
	edit.Spec.CacheSpec[1].Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	g.Expect(denial(t, c.Update(ctx, edit))).To(refused(`spec.cacheSpec[1].tolerations: Invalid value: [{"operator":"Exists"}]: ` +
		`a list's tolerations cannot change (they were [] (none)); only its images may change: to cache on other nodes, purge this ImageCache and create another`))

	edit = stored.DeepCopy()
	edit.Spec.CacheSpec[1].NodeSelector = map[string]string{"kubernetes.io/arch": "amd64"}
	g.Expect(denial(t, c.Update(ctx, edit))).To(refused(`spec.cacheSpec[1].nodeSelector: Invalid value: {"kubernetes.io/arch":"amd64"}: ` +
		`a list's node selector cannot change (it was {"kubernetes.io/arch":"arm64"}); only its images may change: to cache on other nodes, purge this ImageCache and create another`))

	// A manifest that moves a list is refused through apply as well.
	moved := []byte(strings.Replace(string(manifest), `"arm64"`, `"amd64"`, 1))
	g.Expect(denial(t, c.Patch(ctx, applied, client.RawPatch(types.ApplyPatchType, moved),
		client.FieldOwner("gitops"), client.ForceOwnership))).To(ContainSubstring(
		`spec.cacheSpec[1].nodeSelector: Invalid value: {"kubernetes.io/arch":"amd64"}: a list's node selector cannot change`))

	after := &v1alpha2.ImageCache{}
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(ic), after)).To(Succeed())
	g.Expect(after.Spec).To(Equal(stored.Spec), "a refused write changed the spec")
	g.Expect(after.Status.Status).To(Equal(v1alpha2.ImageCacheActionStatusProcessing))
}

func TestReplicasShareOneCertificate(t *testing.T) {
	p := shared(t)
	g := NewWithT(t)
	s, err := p.e.kube.CoreV1().Secrets(p.controller).Get(context.Background(), p.secret, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Type).To(Equal(corev1.SecretTypeTLS))
	for _, r := range []*replica{p.a, p.b} {
		onDisk, err := os.ReadFile(filepath.Join(r.opts.CertDir, certs.KeyCert))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(onDisk).To(Equal(s.Data[certs.KeyCert]), "files of the replica on port %d", r.opts.Port)
		key, err := os.ReadFile(filepath.Join(r.opts.CertDir, certs.KeyKey))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(key).To(Equal(s.Data[certs.KeyKey]))
		g.Eventually(r.served).WithTimeout(framework.ClusterTimeout).Should(Equal(derOf(g, s.Data[certs.KeyCert])), "certificate served on port %d", r.opts.Port)
		g.Expect(r.ready()).To(Succeed())
	}
	// Both replicas raced to create the Secret; one create won, and no
	// rotation followed: the Secret was written once.
	g.Expect(s.Annotations[certs.AnnotationStagedAt]).To(Equal(s.Annotations[certs.AnnotationSwitchedAt]))
	vwc := configurationBundles(g, p.e, p.config)
	g.Expect(vwc).To(HaveLen(2))
	for _, b := range vwc {
		g.Expect(b).To(Equal(s.Data[certs.KeyBundle]))
	}
}

func TestResetBundleRepaired(t *testing.T) {
	p := shared(t)
	ctx := context.Background()
	g := NewWithT(t)
	// What a `helm upgrade` of the original chart did: the placeholder back
	// in every webhook.
	start := time.Now()
	patch := []byte(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"Cg=="},` +
		`{"op":"replace","path":"/webhooks/1/clientConfig/caBundle","value":"Cg=="}]`)
	_, err := p.e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, p.config,
		types.JSONPatchType, patch, metav1.PatchOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	s, err := p.e.kube.CoreV1().Secrets(p.controller).Get(ctx, p.secret, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() [][]byte { return configurationBundles(g, p.e, p.config) }).
		WithTimeout(framework.ClusterTimeout).WithPolling(50 * time.Millisecond).
		Should(HaveEach(Equal(s.Data[certs.KeyBundle])))
	t.Logf("caBundle repaired in %s", time.Since(start).Round(time.Millisecond))
	p.e.waitServing(t, p.ns)
}

func configurationBundles(g *WithT, e *env, name string) [][]byte {
	vwc, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var out [][]byte
	for _, w := range vwc.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

func derOf(g *WithT, pemBytes []byte) []byte {
	c, err := tlsCert(pemBytes)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}
