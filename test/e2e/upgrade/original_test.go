package upgrade_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/framework/helmop"
)

const (
	// Helm's and the controllers' work, on two cores shared with other
	// packages' sandboxes.
	timeout = framework.ClusterTimeout
	poll    = 250 * time.Millisecond

	imageCacheCRD  = "imagecaches.kubefledged.io"
	kubeFledgedCRD = "kubefledgeds.charts.helm.kubefledged.io"

	// The original's fixture chart: its name decides its objects' names.
	originalChart = "testdata/kube-fledged-v0.10"
)

var imageCacheGVK = schema.GroupVersionKind{Group: "kubefledged.io", Version: "v1alpha2", Kind: "ImageCache"}

// freshCluster starts a case from a cluster that never ran ours: it deletes
// both CRDs, and so every ImageCache and KubeFledged resource a case before
// left, then creates the namespaces the case's original lives in. lap logs
// how long the phase since the one before (the first since freshCluster)
// took, for the run's figures.
func freshCluster(t *testing.T, g Gomega, c client.Client, namespaces ...string) (lap func(phase string)) {
	t.Helper()
	begin := time.Now()
	for _, name := range []string{imageCacheCRD, kubeFledgedCRD} {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		g.Eventually(func() bool {
			return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Name: name}, crd))
		}).WithTimeout(timeout).WithPolling(poll).Should(BeTrue(), "CRD %s not deleted", name)
	}
	for _, n := range namespaces {
		err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return func(phase string) {
		t.Helper()
		t.Logf("%s in %s", phase, time.Since(begin).Round(time.Millisecond))
		begin = time.Now()
	}
}

// kubeletImages lists images as a kubelet reports them in status.images:
// fully qualified, under a repo digest and the tag.
func kubeletImages(refs ...string) []corev1.ContainerImage {
	var out []corev1.ContainerImage
	for _, r := range refs {
		name, tag, _ := strings.Cut(r, ":")
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		if !strings.Contains(strings.Split(name, "/")[0], ".") {
			name = "docker.io/" + name
		}
		sum := sha256.Sum256([]byte(r))
		out = append(out, corev1.ContainerImage{
			Names:     []string{name + "@sha256:" + hex.EncodeToString(sum[:]), name + ":" + tag},
			SizeBytes: 50_000_000,
		})
	}
	return out
}

// originalStatus is a status as the original wrote it: its six fields
// only, times at whole seconds.
type originalStatus struct {
	status, reason, message string
	started, completed      time.Time // completed zero: still Processing
}

func (s originalStatus) object() map[string]interface{} {
	m := map[string]interface{}{
		"status":    s.status,
		"reason":    s.reason,
		"message":   s.message,
		"startTime": s.started.UTC().Format(time.RFC3339),
	}
	if !s.completed.IsZero() {
		m["completionTime"] = s.completed.UTC().Format(time.RFC3339)
	}
	return m
}

// originalCache creates an ImageCache as a user did under the original's
// CRD, then writes its status as the original's controller did: by
// updating the whole object, since its CRD had no status subresource. That
// bumps metadata.generation, as each of the original's status writes did.
func originalCache(t *testing.T, g Gomega, c client.Client, ns, name string, lists []interface{}, st originalStatus) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{"cacheSpec": lists}}}
	u.SetGroupVersionKind(imageCacheGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	g.Expect(c.Create(context.Background(), u)).To(Succeed())
	u.Object["status"] = st.object()
	g.Expect(c.Update(context.Background(), u)).To(Succeed())
	g.Expect(u.GetGeneration()).To(BeNumerically(">", 1), "a status written with the whole object bumps the generation")
	return u
}

func list(selector map[string]string, images ...string) map[string]interface{} {
	l := map[string]interface{}{"images": toList(images)}
	if selector != nil {
		sel := map[string]interface{}{}
		for k, v := range selector {
			sel[k] = v
		}
		l["nodeSelector"] = sel
	}
	return l
}

func toList(ss []string) []interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// originalJob creates a pull Job as the original made them: GenerateName
// <cache>-, its labels, controlled by the cache, pinned by hostname,
// tolerating every taint, never retried, an init container that copies a
// static echo for the cached image to run.
func originalJob(t *testing.T, g Gomega, c client.Client, cache *unstructured.Unstructured, image, node string) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: cache.GetName() + "-",
			Namespace:    cache.GetNamespace(),
			Labels: map[string]string{
				"app": "kubefledged", "kubefledged": "kubefledged-image-manager",
				"imagecache": cache.GetName(), "controller": "fledged",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: imageCacheGVK.GroupVersion().String(), Kind: imageCacheGVK.Kind,
				Name: cache.GetName(), UID: cache.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](3600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
					"app": "kubefledged", "kubefledged": "kubefledged-image-manager",
					"imagecache": cache.GetName(), "controller": "fledged",
				}},
				Spec: corev1.PodSpec{
					NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
					Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					RestartPolicy: corev1.RestartPolicyNever,
					InitContainers: []corev1.Container{{
						Name: "busybox", Image: "senthilrch/busybox:1.35.0",
						Command:      []string{"cp", "/bin/echo", "/tmp/bin"},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp-bin", MountPath: "/tmp/bin"}},
					}},
					Containers: []corev1.Container{{
						Name: "image-puller", Image: image,
						Command:      []string{"/tmp/bin/echo", "Image pulled successfully!"},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp-bin", MountPath: "/tmp/bin"}},
					}},
					Volumes: []corev1.Volume{{Name: "tmp-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	g.Expect(c.Create(context.Background(), j)).To(Succeed())
	return j
}

// helmInstall installs a chart as `helm install RELEASE CHART -n NS -f
// values` would.
func helmInstall(t *testing.T, g Gomega, ns, name, chartDir string, values map[string]interface{}) *release.Release {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	g.Expect(err).NotTo(HaveOccurred())
	install := action.NewInstall(helmop.HelmConfig(t, ns))
	install.ReleaseName = name
	install.Namespace = ns
	install.Timeout = timeout
	rel, err := install.Run(chrt, values)
	g.Expect(err).NotTo(HaveOccurred(), "helm install %s %s", name, chartDir)
	return rel
}

func readValues(t *testing.T, file string) map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}

// deploymentArgs returns the args of a Deployment's first container.
func deploymentArgs(g Gomega, c client.Client, ns, name string) []string {
	d := &appsv1.Deployment{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0].Args
}

// originalWebhookRefuses checks that the original's webhook is live:
// failurePolicy Fail and a server that cannot answer refuse every write.
// Without this, "the webhook is gone" below would prove nothing.
func originalWebhookRefuses(g Gomega, c client.Client, ns string) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{"spec": map[string]interface{}{
		"cacheSpec": []interface{}{list(nil, "nginx:1.27.3")}}}}
	u.SetGroupVersionKind(imageCacheGVK)
	u.SetNamespace(ns)
	u.SetGenerateName("probe-")
	g.Eventually(func() error {
		return c.Create(context.Background(), u.DeepCopy(), client.DryRunAll)
	}).WithTimeout(timeout).WithPolling(poll).Should(MatchError(ContainSubstring(`failed calling webhook "validate-image-cache.kubefledged.io"`)))
}

// removeOriginal runs the documented steps that remove the original's release and what
// Helm leaves of it (the webhook configuration, the Deployments), the CRD kept, and checks
// that nothing of the release is left.
func removeOriginal(t *testing.T, g Gomega, c client.Client, p procedure) {
	t.Helper()
	p.documented(t, stepUninstall)
	uninstall := action.NewUninstall(helmop.HelmConfig(t, p.ns))
	uninstall.Wait, uninstall.Timeout = true, timeout
	_, err := uninstall.Run(p.release)
	g.Expect(err).NotTo(HaveOccurred())
	p.mustShell(t, stepDeleteWebhook)
	p.mustShell(t, stepDeleteDeploys)
	g.Expect(p.mustShell(t, stepNothingLeft)).To(ContainSubstring("No resources found"))
	originalGone(t, g, c, p)
}

// originalGone checks that nothing the original's release made is left:
// its Deployments and their pods, its Service, ServiceAccounts, ClusterRoles
// and ClusterRoleBindings, its webhook configuration, and any binding of
// system:nodes to a role of it.
func originalGone(t *testing.T, g Gomega, c client.Client, p procedure) {
	t.Helper()
	ctl, wh := p.fullname+"-controller", p.fullname+"-webhook-server"
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: ctl}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: wh}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: wh}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: ctl}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: wh}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ctl}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: wh}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ctl}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wh}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: wh}},
	}
	for _, o := range objs {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is still there (%v)", o, o.GetName(), err)
	}
	bindings := &rbacv1.ClusterRoleBindingList{}
	g.Expect(c.List(context.Background(), bindings)).To(Succeed())
	for _, b := range bindings.Items {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.GroupKind && s.Name == "system:nodes" && strings.Contains(b.RoleRef.Name, "fledged") {
				t.Errorf("ClusterRoleBinding %s still binds system:nodes to %s", b.Name, b.RoleRef.Name)
			}
		}
	}
	// The Deployments' pods go with them, through garbage collection.
	// They are told by name: ours carry the same instance label.
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(c.List(context.Background(), pods, client.InNamespace(p.ns))).To(Succeed())
		var left []string
		for _, pod := range pods.Items {
			if strings.HasPrefix(pod.Name, ctl+"-") || strings.HasPrefix(pod.Name, wh+"-") {
				left = append(left, pod.Name)
			}
		}
		g.Expect(left).To(BeEmpty(), "pods of the original's Deployments")
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// specOf reads an ImageCache's spec as stored, untyped, so that a field
// the API dropped or added would show.
func specOf(g Gomega, c client.Client, ns, name string) (map[string]interface{}, *unstructured.Unstructured) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(imageCacheGVK)
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec, u
}

func fixture(name string) string { return filepath.Join("testdata", name) }

func key(ns, name string) string { return fmt.Sprintf("%s/%s", ns, name) }
