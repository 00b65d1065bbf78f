package upgrade_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/cli"
	"github.com/kubefledged/kube-fledged/internal/commands"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/webhook"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/sandbox"
)

// runOurs runs our controller in-process in place of the pod of the
// Deployment our chart rendered, which cannot run on kwok nodes: with that
// Deployment's own args, parsed as the binary parses them, so that the
// settings the upgrade carried over are the ones that act. Only what a
// process on this machine cannot share with a pod is changed: listening
// ports, the certificate directory, and the webhook configuration, pointed
// at 127.0.0.1 instead of the Service whose endpoints are kwok pod IPs.
func runOurs(t *testing.T, g Gomega, c client.Client, d *appsv1.Deployment) {
	t.Helper()
	// Our controller's and our operator's log (both in-process) go beside the sandbox's.
	g.Expect(framework.LogToFile(filepath.Join(sandbox.Get().Dir(), "upgrade.log"))).To(Succeed())
	args := d.Spec.Template.Spec.Containers[0].Args
	g.Expect(args).NotTo(BeEmpty())
	g.Expect(args[0]).To(Equal("controller"))
	o := commands.NewControllerOptions()
	fs := cli.NewFlagSet("controller")
	o.BindFlags(fs)
	g.Expect(cli.Parse(fs, args[1:])).To(Succeed(), "our controller refuses its Deployment's args %v", args)
	o.Webhook.Namespace = d.Namespace // the downward API's KUBEFLEDGED_NAMESPACE
	g.Expect(o.Webhook.Enable).To(BeTrue(), "the chart turned our webhook off")
	g.Expect(o.Webhook.Validate()).To(Succeed())

	var err error
	o.Webhook.Port, err = sandbox.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	o.Webhook.CertDir = t.TempDir()
	o.Webhook.ExtraHosts = []string{"127.0.0.1"}
	o.MetricsAddr, o.ProbeAddr = "0", "0"

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Name: o.Webhook.ConfigurationName}, vwc)).To(Succeed())
	patch := fmt.Sprintf(`[{"op":"remove","path":"/webhooks/0/clientConfig/service"},{"op":"add","path":"/webhooks/0/clientConfig/url","value":"https://127.0.0.1:%d%s"}]`,
		o.Webhook.Port, webhook.Path)
	g.Expect(c.Patch(context.Background(), vwc, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())

	framework.RunController(t, sandbox.Get().Config(), o)
}

// ourWebhookAdmits waits until our webhook answers, then checks that it is
// ours that answers: a valid cache is admitted, and one with the same image
// twice in a list is refused with our rule's words.
func ourWebhookAdmits(g Gomega, c client.Client, ns string) {
	valid := &v1alpha2.ImageCache{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "probe-"},
		Spec: v1alpha2.ImageCacheSpec{CacheSpec: []v1alpha2.CacheSpecImages{{Images: []string{"nginx:1.27.3"}}}}}
	g.Eventually(func() error {
		return c.Create(context.Background(), valid.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	dup := valid.DeepCopy()
	dup.Spec.CacheSpec[0].Images = []string{"nginx:1.27.3", "docker.io/library/nginx:1.27.3"}
	err := c.Create(context.Background(), dup, client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring("names the same image as")))
}

// jobsSeen is, in the order the API server reported them, the Jobs created and deleted:
// ours as "kind images node" (the one image of a Job per (image, node), every container's
// image of a node's pull Job), which says what was pulled where at either granularity,
// others by namespace/name.
func jobsSeen(l *framework.JobLog) []string {
	var out []string
	for _, ev := range l.Events() {
		j := &ev.Job
		what := key(j.Namespace, j.Name)
		if kind := j.Labels[jobs.LabelKind]; kind != "" {
			what = kind + " " + strings.Join(jobs.ImagesOf(j), ",") + " " + j.Annotations[jobs.AnnotationNode]
		}
		switch ev.Type {
		case watch.Added:
			out = append(out, "created "+what)
		case watch.Deleted:
			out = append(out, "deleted "+what)
		}
	}
	return out
}

// statusLog records every (status, reason) an ImageCache goes through, by
// namespace/name, so that a state held for a moment (Aborted) is seen.
type statusLog struct {
	mu       sync.Mutex
	seen     map[string][]string
	versions map[string]bool // resourceVersions the watch delivered
}

func recordStatuses(t *testing.T, c client.WithWatch) *statusLog {
	t.Helper()
	l := &v1alpha2.ImageCacheList{}
	if err := c.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), &v1alpha2.ImageCacheList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: l.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	log := &statusLog{seen: map[string][]string{}, versions: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			ic, ok := ev.Object.(*v1alpha2.ImageCache)
			if ok {
				log.mu.Lock()
				log.versions[ic.ResourceVersion] = true
				log.mu.Unlock()
			}
			if !ok || ev.Type != watch.Modified {
				continue
			}
			k := key(ic.Namespace, ic.Name)
			s := string(ic.Status.Status) + "/" + ic.Status.Reason
			log.mu.Lock()
			if prev := log.seen[k]; len(prev) == 0 || prev[len(prev)-1] != s {
				log.seen[k] = append(prev, s)
			}
			log.mu.Unlock()
		}
	}()
	return log
}

// of is what the cache went through up to ic, read by a Get: the watch runs beside that
// Get and may not have delivered the last changes yet, so it waits until it has.
func (l *statusLog) of(g Gomega, ic *v1alpha2.ImageCache) []string {
	g.Eventually(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.versions[ic.ResourceVersion]
	}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "the watch delivers %s/%s at resourceVersion %s", ic.Namespace, ic.Name, ic.ResourceVersion)
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.seen[key(ic.Namespace, ic.Name)]...)
}

// settled waits until a cache has finished an operation of ours (it then
// records the generation it acted on) and returns it.
func settled(g Gomega, c client.Client, ns, name string) *v1alpha2.ImageCache {
	ic := &v1alpha2.ImageCache{}
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, ic)).To(Succeed())
		g.Expect(ic.Status.ObservedGeneration).NotTo(BeZero(), "no operation of ours ended yet: %+v", ic.Status)
		g.Expect(ic.Status.Status).NotTo(Equal(v1alpha2.ImageCacheActionStatusProcessing))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return ic
}
