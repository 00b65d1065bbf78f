package install_test

// Install #3: OLM, for real. TestOLM installs kube-fledged the way
// OperatorHub does, with OLM itself doing every step: OLM v0.38.0's olm and
// catalog operators (pinned in hack/tools/olm, run as processes on the
// host), its CRDs from its module, a CatalogSource of our catalog image
// (`make catalog-image`, byte for byte), an OperatorGroup and a
// Subscription. The catalog operator starts the registry pod from our
// catalog image on the real node and reads it over gRPC; it resolves the
// Subscription, and its bundle unpack Job pulls our bundle image on the
// real node; the olm operator installs the CSV, whose Deployment runs our
// operator pod, under the CSV's permissions, on the real node. The first
// alm-example then installs the controller, and the end every install
// path shares (checkInstall) holds it to the same proof as Helm's. Then a
// second catalog image adds a second bundle version that replaces the
// first, and OLM upgrades in place: a new CSV, a new operator pod of the
// same Deployment, the operator upgrades the controller, and the
// ImageCaches stay and still work. Last, the documented uninstall.
//
// What is not OLM's own doing, and why: the catalog operator reaches the
// registry's Service through a SOCKS5 proxy of the test (its GRPC_PROXY,
// which OLM supports for operators outside the cluster; the host has no
// cluster DNS and no route to Service IPs); the kwok node is cordoned,
// since the unpack Job cannot be steered off it; the opm and util images
// are built here from the pinned binaries, not pulled from quay.io; and
// packageserver (OperatorHub's package API, not used by a Subscription)
// does not run.

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubectl/pkg/util/podutils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/olmbundle"
	"github.com/kubefledged/kube-fledged/test/sandbox/realnode"
)

const (
	olmV1       = "operators.coreos.com/v1"
	olmV1alpha1 = "operators.coreos.com/v1alpha1"
	// catalogNS is OLM's global catalog namespace, as upstream's "olm".
	catalogNS  = "olm"
	operatorNS = "kube-fledged-system"
	catalogSrc = "kube-fledged-catalog"
	pkgName    = "kube-fledged"
	csvV1      = "kube-fledged.v0.11.0"
	csvV2      = "kube-fledged.v0.11.1"
	// The images, by the names a cluster pulls them by: the Makefile's
	// BUNDLE_IMG and CATALOG_IMG, and the next release's. The opm and util
	// images are ours, so they are not named as upstream's.
	bundle1Ref   = "ghcr.io/kubefledged/kubefledged-bundle:v0.11.0"
	bundle2Ref   = "ghcr.io/kubefledged/kubefledged-bundle:v0.11.1"
	catalog1Ref  = "ghcr.io/kubefledged/kubefledged-catalog:v0.11.0"
	catalog2Ref  = "ghcr.io/kubefledged/kubefledged-catalog:v0.11.1"
	operator2Ref = "ghcr.io/kubefledged/kubefledged:v0.11.1"
	opmRef       = "quay.io/kubefledged/olm-e2e-opm:v1.61.0"
	utilRef      = "quay.io/kubefledged/olm-e2e-util:v0.38.0"
	stageTimeout = 5 * time.Minute
)

type olmRun struct {
	t      *testing.T
	ctx    context.Context
	c      client.Client // k8s's scheme, and CRDs
	procs  *olmProcesses
	proxy  *serviceProxy
	stages []string
}

// stage runs one step and notes how long it took, for the log.
func (r *olmRun) stage(name string, f func() error) {
	r.t.Helper()
	start := time.Now()
	err := f()
	d := time.Since(start).Round(100 * time.Millisecond)
	r.stages = append(r.stages, fmt.Sprintf("%-66s %s", name, d))
	r.t.Logf("olm: stage %q: %s", name, d)
	if err != nil {
		r.t.Fatalf("%s: %v\n%s", name, err, r.diagnose())
	}
}

func TestOLM(t *testing.T) {
	bins := needOLM(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := &olmRun{t: t, ctx: ctx}
	var err error
	if r.c, err = client.New(sb.Config(), client.Options{Scheme: framework.Scheme()}); err != nil {
		t.Fatal(err)
	}
	cordonOthers(t, r.c)

	r.stage("images: opm, util, two bundles, two catalogs; our next tag", func() error {
		// Our image, which TestMain built and pushed under the chart's name,
		// under the next version's tag too: the upgrade is then a new image
		// reference, as a release is.
		from, err := realnode.MirrorRef(node.Registry(), node.Mirrors(), ourImage)
		if err != nil {
			return err
		}
		idx, err := remote.Index(from, remote.WithContext(ctx))
		if err != nil {
			return err
		}
		if err := node.PushIndexAs(ctx, operator2Ref, idx); err != nil {
			return err
		}
		if _, err := images.build(ctx, "opm", opmRef, "-opm", bins.opm, "-probe", bins.probe); err != nil {
			return err
		}
		if _, err := images.build(ctx, "util", utilRef, "-cpb", bins.cpb); err != nil {
			return err
		}
		// The checked-in bundle, which names our image by the digest of
		// the index TestMain built, with that reference moved to the
		// mirror (same digest, the mirror's name), as a disconnected
		// install sees it (airgap_test.go); and a second version that
		// replaces it and runs the next tag.
		pinned, err := pinnedImage()
		if err != nil {
			return err
		}
		src1 := filepath.Join(t.TempDir(), "bundle-v0.11.0")
		if _, err := olmbundle.Derive(filepath.Join(repoDir, "bundle"), src1, olmbundle.Options{
			Images: map[string]string{pinned: mirrorImage},
		}); err != nil {
			return err
		}
		b1, err := images.build(ctx, "bundle", bundle1Ref, "-dir", src1)
		if err != nil {
			return err
		}
		src2 := filepath.Join(t.TempDir(), "bundle-v0.11.1")
		if _, err := olmbundle.Derive(filepath.Join(repoDir, "bundle"), src2, olmbundle.Options{
			Version: "0.11.1", Replaces: csvV1, Images: map[string]string{pinned: operator2Ref},
		}); err != nil {
			return err
		}
		b2, err := images.build(ctx, "bundle", bundle2Ref, "-dir", src2)
		if err != nil {
			return err
		}
		catalog := []string{"-opm", bins.opm, "-probe", bins.probe, "-bundle", b1}
		if _, err := images.build(ctx, "catalog", catalog1Ref, catalog...); err != nil {
			return err
		}
		_, err = images.build(ctx, "catalog", catalog2Ref, append(catalog, "-bundle", b2)...)
		return err
	})

	// From here until the upgrade, the node pulls our image from the mirror only.
	since := forgetOurImage(t)

	r.stage("OLM: CRDs from its module; olm and catalog operators", func() error {
		dir, version, err := olmModuleDir(ctx)
		if err != nil {
			return err
		}
		t.Logf("olm: OLM %s from %s", version, dir)
		if err := installOLMCRDs(ctx, sb.Config(), dir); err != nil {
			return err
		}
		// The operator's namespace as OperatorHub's console creates it
		// when the user takes the suggested one: from the CSV's template,
		// which labels it privileged for the delete Jobs (the controller
		// stops at start in a namespace that would refuse them).
		suggested, err := suggestedNamespace()
		if err != nil {
			return err
		}
		for _, ns := range []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: catalogNS}},
			suggested,
		} {
			if err := r.c.Create(ctx, ns); err != nil {
				return err
			}
		}
		// As upstream's manifests (0000_50_olm_03-olmconfig.yaml).
		if err := r.c.Create(ctx, obj(olmV1, "OLMConfig", "", "cluster", map[string]any{})); err != nil {
			return err
		}
		if r.proxy, err = startServiceProxy(kube); err != nil {
			return err
		}
		t.Cleanup(r.proxy.close)
		r.procs, err = startOLM(olmOptions{
			bins: bins, kubeconfig: sb.KubeconfigPath(), logDir: filepath.Join(sb.Dir(), "logs"), catalogNamespace: catalogNS,
			opmImage: opmRef, utilImage: utilRef, grpcProxy: r.proxy.URL(),
		})
		if err != nil {
			return err
		}
		t.Cleanup(r.procs.stop)
		return nil
	})

	r.stage("CatalogSource: the registry pod serves our catalog image", func() error {
		cs := obj(olmV1alpha1, "CatalogSource", catalogNS, catalogSrc, map[string]any{
			"sourceType": "grpc", "image": catalog1Ref, "displayName": "kube-fledged (e2e)", "publisher": "kube-fledged",
			"grpcPodConfig": map[string]any{"securityContextConfig": "restricted"},
		})
		if err := r.c.Create(ctx, cs); err != nil {
			return err
		}
		return r.waitCatalogReady(catalog1Ref)
	})

	began := time.Now()
	r.stage("Subscription: InstallPlan, bundle unpack, CSV Succeeded", func() error {
		if err := r.c.Create(ctx, obj(olmV1, "OperatorGroup", operatorNS, "kube-fledged", map[string]any{})); err != nil {
			return err
		}
		sub := obj(olmV1alpha1, "Subscription", operatorNS, pkgName, map[string]any{
			"channel": "stable", "name": pkgName, "source": catalogSrc, "sourceNamespace": catalogNS, "installPlanApproval": "Automatic",
		})
		if err := r.c.Create(ctx, sub); err != nil {
			return err
		}
		// From here on, the documented uninstall runs at the end, whatever
		// happens; it runs before OLM's processes stop.
		t.Cleanup(r.uninstall)
		return r.waitCSV(csvV1)
	})

	r.stage("the bundle was unpacked on the real node, from our bundle image", func() error {
		return r.checkUnpacked(bundle1Ref)
	})

	r.stage("the operator runs on the real node with the CSV's permissions", func() error {
		return r.checkOperator(csvV1, mirrorImage)
	})

	var kf *unstructured.Unstructured
	r.stage("the first alm-example: Deployed", func() error {
		var err error
		kf, err = r.installFirstExample()
		return err
	})
	// The release is the KubeFledged's name; the chart's full name is that
	// name when it holds the chart's, as "kubefledged" does.
	fullname := kf.GetName()
	if !strings.Contains(fullname, "kubefledged") {
		fullname += "-kubefledged"
	}
	checkInstall(t, installation{
		how:                  "olm",
		began:                began,
		namespace:            operatorNS,
		deployment:           fullname + "-controller",
		webhookConfiguration: fullname,
		image:                mirrorImage,
		setRetention: func(t *testing.T, policy string) {
			patch := fmt.Sprintf(`{"spec":{"controller":{"jobRetentionPolicy":%q}}}`, policy)
			if err := r.c.Patch(ctx, kf.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatalf("edit the KubeFledged: %v", err)
			}
		},
	})
	if t.Failed() {
		return
	}
	r.stage("air-gapped: the operator, controller and Jobs pulled the mirror, never the upstream name", func() error {
		g := NewWithT(t)
		noUpstreamPulls(t, g, since, mirrorImage)
		return nil
	})

	caches := &v1alpha2.ImageCacheList{}
	operatorDeployment := &appsv1.Deployment{}
	r.stage("upgrade: the catalog offers v0.11.1, which replaces v0.11.0", func() error {
		if err := r.c.List(ctx, caches, client.InNamespace(operatorNS)); err != nil || len(caches.Items) == 0 {
			return fmt.Errorf("no ImageCache to keep through the upgrade: %v", err)
		}
		if err := r.c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "kube-fledged-operator"}, operatorDeployment); err != nil {
			return err
		}
		cs, err := get(ctx, r.c, olmV1alpha1, "CatalogSource", catalogNS, catalogSrc)
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(cs.Object, catalog2Ref, "spec", "image"); err != nil {
			return err
		}
		if err := r.c.Update(ctx, cs); err != nil {
			return err
		}
		if err := r.waitCatalogReady(catalog2Ref); err != nil {
			return err
		}
		if err := r.waitCSV(csvV2); err != nil {
			return err
		}
		// The replaced CSV goes once the new one has succeeded.
		return r.wait("CSV "+csvV1+" gone", func() (bool, error) {
			_, err := get(ctx, r.c, olmV1alpha1, "ClusterServiceVersion", operatorNS, csvV1)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})

	r.stage("after the upgrade: operator and controller upgraded, ImageCaches kept", func() error {
		if err := r.checkUnpacked(bundle2Ref); err != nil {
			return err
		}
		if err := r.checkOperator(csvV2, operator2Ref); err != nil {
			return err
		}
		d := &appsv1.Deployment{}
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(operatorDeployment), d); err != nil {
			return err
		}
		if d.UID != operatorDeployment.UID {
			return fmt.Errorf("OLM replaced the operator's Deployment (uid %s, was %s) rather than upgrading it", d.UID, operatorDeployment.UID)
		}
		if err := r.waitController(fullname+"-controller", operator2Ref); err != nil {
			return err
		}
		for _, ic := range caches.Items {
			got := &v1alpha2.ImageCache{}
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(&ic), got); err != nil {
				return fmt.Errorf("ImageCache %s is gone after the upgrade: %w", ic.Name, err)
			}
			if got.UID != ic.UID {
				return fmt.Errorf("ImageCache %s was recreated (uid %s, was %s)", ic.Name, got.UID, ic.UID)
			}
		}
		// The upgraded controller acts on a cache it found: a refresh pulls
		// its images again, on the real node.
		ic := caches.Items[0]
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v1alpha2.RefreshAnnotation+`":"after-upgrade"}}}`))
		if err := r.c.Patch(ctx, &ic, patch); err != nil {
			return err
		}
		return r.waitRefreshed(&ic)
	})

	t.Logf("olm: proxied dials of the catalog operator: %q", r.proxy.dialed())
	t.Logf("olm: stages (%s in all, with the common end):\n%s", time.Since(begin).Round(time.Second), strings.Join(r.stages, "\n"))
}

// waitCatalogReady waits until the CatalogSource serves image: its
// registry pod runs that image on the real node, and the catalog operator's
// gRPC connection to it is READY.
func (r *olmRun) waitCatalogReady(image string) error {
	return r.wait("the CatalogSource's connection READY with "+image, func() (bool, error) {
		cs, err := get(r.ctx, r.c, olmV1alpha1, "CatalogSource", catalogNS, catalogSrc)
		if err != nil {
			return false, err
		}
		if str(cs, "status", "connectionState", "lastObservedState") != "READY" {
			return false, nil
		}
		pods, err := kube.CoreV1().Pods(catalogNS).List(r.ctx, metav1.ListOptions{LabelSelector: "olm.catalogSource=" + catalogSrc})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodRunning {
				if p.Spec.NodeName != node.Name() {
					return false, fmt.Errorf("registry pod %s on %q, not the real node", p.Name, p.Spec.NodeName)
				}
				return true, nil
			}
		}
		return false, nil
	})
}

// waitCSV waits for the CSV to reach Succeeded, failing at once on Failed
// and when the Subscription says its bundle could not be unpacked (OLM
// does not retry that; the unpack pods' messages are in the diagnosis).
func (r *olmRun) waitCSV(name string) error {
	return r.wait("CSV "+name+" Succeeded", func() (bool, error) {
		sub, err := get(r.ctx, r.c, olmV1alpha1, "Subscription", operatorNS, pkgName)
		if err != nil {
			return false, err
		}
		if st, _, msg := framework.Condition(sub, "BundleUnpackFailed"); st == "True" {
			return false, fmt.Errorf("the Subscription says: %v", msg)
		}
		csv, err := get(r.ctx, r.c, olmV1alpha1, "ClusterServiceVersion", operatorNS, name)
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		switch str(csv, "status", "phase") {
		case "Succeeded":
			return true, nil
		case "Failed":
			return false, fmt.Errorf("CSV %s Failed: %s: %s", name, str(csv, "status", "reason"), str(csv, "status", "message"))
		}
		return false, nil
	})
}

// checkUnpacked checks that OLM unpacked bundle with a Job whose pods ran
// on the real node, and completed.
func (r *olmRun) checkUnpacked(bundle string) error {
	jobs, err := kube.BatchV1().Jobs(catalogNS).List(r.ctx, metav1.ListOptions{LabelSelector: "operatorframework.io/bundle-unpack-ref"})
	if err != nil {
		return err
	}
	for _, j := range jobs.Items {
		ic := j.Spec.Template.Spec.InitContainers
		if len(ic) < 2 || ic[1].Image != bundle {
			continue
		}
		done := slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
		})
		if !done {
			return fmt.Errorf("the unpack Job %s of %s is not complete", j.Name, bundle)
		}
		pods, err := kube.CoreV1().Pods(catalogNS).List(r.ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + j.Name})
		if err != nil {
			return err
		}
		succeeded := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName != node.Name() {
				return fmt.Errorf("unpack pod %s ran on %q, not the real node", p.Name, p.Spec.NodeName)
			}
			if p.Status.Phase == corev1.PodSucceeded {
				succeeded++
			}
		}
		if succeeded == 0 {
			return fmt.Errorf("the unpack Job %s is complete, but none of its %d pods is Succeeded", j.Name, len(pods.Items))
		}
		r.t.Logf("olm: bundle %s unpacked on %s by Job %s/%s (%d pod(s); util image %s, extract image %s)", bundle, node.Name(),
			j.Namespace, j.Name, len(pods.Items), ic[0].Image, j.Spec.Template.Spec.Containers[0].Image)
		return nil
	}
	return fmt.Errorf("no unpack Job pulled %s", bundle)
}

// checkOperator checks the operator's pod: it runs image on the real node,
// ready, as the CSV's ServiceAccount, which OLM bound to a ClusterRole of
// the CSV with exactly its rules, and which may not touch CRDs (the CSV
// does not ask for it).
func (r *olmRun) checkOperator(csvName, image string) error {
	csv, err := get(r.ctx, r.c, olmV1alpha1, "ClusterServiceVersion", operatorNS, csvName)
	if err != nil {
		return err
	}
	var spec struct {
		ClusterPermissions []struct {
			ServiceAccountName string              `json:"serviceAccountName"`
			Rules              []rbacv1.PolicyRule `json:"rules"`
		} `json:"clusterPermissions"`
	}
	raw, _, _ := unstructured.NestedMap(csv.Object, "spec", "install", "spec")
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &spec); err != nil || len(spec.ClusterPermissions) == 0 {
		return fmt.Errorf("the CSV has no clusterPermissions: %v", err)
	}
	sa := spec.ClusterPermissions[0].ServiceAccountName
	err = r.wait("operator pod Ready with "+image, func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := r.c.Get(r.ctx, client.ObjectKey{Namespace: operatorNS, Name: "kube-fledged-operator"}, d); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		pods, err := kube.CoreV1().Pods(operatorNS).List(r.ctx, metav1.ListOptions{LabelSelector: "control-plane=kube-fledged-operator"})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != image || p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeName != node.Name() {
				return false, fmt.Errorf("operator pod %s on %q, not the real node", p.Name, p.Spec.NodeName)
			}
			if p.Spec.ServiceAccountName != sa {
				return false, fmt.Errorf("operator pod %s runs as %q, the CSV says %q", p.Name, p.Spec.ServiceAccountName, sa)
			}
			if podutils.IsPodReady(&p) {
				ready++
			}
		}
		return ready == 1 && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1, nil
	})
	if err != nil {
		return err
	}
	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := r.c.List(r.ctx, crbs); err != nil {
		return err
	}
	bound := false
	for _, crb := range crbs.Items {
		if !slices.ContainsFunc(crb.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == operatorNS
		}) {
			continue
		}
		cr := &rbacv1.ClusterRole{}
		if err := r.c.Get(r.ctx, client.ObjectKey{Name: crb.RoleRef.Name}, cr); err != nil {
			return err
		}
		if cr.Labels["olm.owner"] == csvName && rulesEqual(cr.Rules, spec.ClusterPermissions[0].Rules) {
			bound = true
		}
	}
	if !bound {
		return fmt.Errorf("no ClusterRole owned by %s with the CSV's clusterPermissions is bound to %s", csvName, sa)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + operatorNS + ":" + sa,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "create"},
	}}
	if err := r.c.Create(r.ctx, sar); err != nil {
		return err
	}
	if sar.Status.Allowed {
		return fmt.Errorf("the operator's ServiceAccount may create CRDs, which the CSV does not ask for")
	}
	return nil
}

func rulesEqual(a, b []rbacv1.PolicyRule) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// installFirstExample creates the first alm-example of the installed CSV
// (what OperatorHub offers first) and waits for its release. The example
// itself is held to the CRD's schema, strictly, as it is; then two values
// are set on it, which this cluster needs and the common end starts from:
// the node's containerd socket, which is not at the default path, for the
// delete Jobs; and the retain policy.
func (r *olmRun) installFirstExample() (*unstructured.Unstructured, error) {
	csv, err := get(r.ctx, r.c, olmV1alpha1, "ClusterServiceVersion", operatorNS, csvV1)
	if err != nil {
		return nil, err
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.GetAnnotations()["alm-examples"]), &examples); err != nil || len(examples) == 0 {
		return nil, fmt.Errorf("alm-examples: %v (%d examples)", err, len(examples))
	}
	ex := &unstructured.Unstructured{Object: examples[0]}
	if ex.GetKind() != "KubeFledged" {
		return nil, fmt.Errorf("the first alm-example is a %s, want the KubeFledged", ex.GetKind())
	}
	ex.SetNamespace(operatorNS)
	if err := r.c.Create(r.ctx, ex.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")); err != nil {
		return nil, fmt.Errorf("the alm-example as OperatorHub shows it: %w", err)
	}
	for field, v := range map[string]string{"jobRetentionPolicy": "retain", "criSocketPath": node.CRISocket()} {
		if err := unstructured.SetNestedField(ex.Object, v, "spec", "controller", field); err != nil {
			return nil, err
		}
	}
	if err := r.c.Create(r.ctx, ex); err != nil {
		return nil, err
	}
	err = r.wait("KubeFledged "+ex.GetName()+" Deployed", func() (bool, error) {
		got, err := get(r.ctx, r.c, ex.GetAPIVersion(), ex.GetKind(), operatorNS, ex.GetName())
		if err != nil {
			return false, err
		}
		if st, _, msg := framework.Condition(got, "ReleaseFailed"); st == "True" {
			return false, fmt.Errorf("release failed: %v", msg)
		}
		st, _, _ := framework.Condition(got, "Deployed")
		return st == "True", nil
	})
	return ex, err
}

// waitController waits for the controller Deployment to have rolled out
// image, one pod, ready.
func (r *olmRun) waitController(name, image string) error {
	return r.wait("controller Deployment rolled out with "+image, func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := r.c.Get(r.ctx, client.ObjectKey{Namespace: operatorNS, Name: name}, d); err != nil {
			return false, err
		}
		return d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 && d.Status.Replicas == 1, nil
	})
}

// waitRefreshed waits for the refresh the annotation asked for: consumed,
// and the cache Succeeded again.
func (r *olmRun) waitRefreshed(ic *v1alpha2.ImageCache) error {
	return r.wait("ImageCache "+ic.Name+" refreshed", func() (bool, error) {
		got := &v1alpha2.ImageCache{}
		if err := r.c.Get(r.ctx, client.ObjectKeyFromObject(ic), got); err != nil {
			return false, err
		}
		if _, pending := got.Annotations[v1alpha2.RefreshAnnotation]; pending {
			return false, nil
		}
		switch got.Status.Status {
		case v1alpha2.ImageCacheActionStatusSucceeded:
			return got.Status.Reason == v1alpha2.ImageCacheReasonImageCacheRefresh, nil
		case v1alpha2.ImageCacheActionStatusFailed:
			return false, fmt.Errorf("ImageCache failed: %s %s %v", got.Status.Reason, got.Status.Message, got.Status.Failures)
		}
		return false, nil
	})
}

// uninstall is the uninstall docs/install.md gives: the caches and the
// KubeFledged resources first, while the controller and the operator still
// run (the operator holds a finalizer until it has uninstalled the
// release), then the Subscription and the CSV, after which OLM removes the
// operator. The CRDs stay, as OLM leaves them.
func (r *olmRun) uninstall() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t := r.t
	if err := k8s.DeleteAllOf(ctx, &v1alpha2.ImageCache{}, client.InNamespace(operatorNS)); err != nil {
		t.Errorf("olm uninstall: deleting the caches: %v", err)
	}
	kfs := &unstructured.UnstructuredList{}
	kfs.SetAPIVersion("charts.helm.kubefledged.io/v1alpha2")
	kfs.SetKind("KubeFledgedList")
	if err := r.c.List(ctx, kfs, client.InNamespace(operatorNS)); err == nil {
		for _, kf := range kfs.Items {
			if err := r.c.Delete(ctx, &kf); client.IgnoreNotFound(err) != nil {
				t.Errorf("olm uninstall: %v", err)
			}
		}
		err := pollUntil(ctx, 2*time.Minute, func() (bool, error) {
			err := r.c.List(ctx, kfs, client.InNamespace(operatorNS))
			return err == nil && len(kfs.Items) == 0, nil
		})
		if err != nil {
			t.Errorf("olm uninstall: the KubeFledged resources are still there (is the operator running?): %v", err)
		}
	}
	sub, err := get(ctx, r.c, olmV1alpha1, "Subscription", operatorNS, pkgName)
	installed := ""
	if err == nil {
		installed = str(sub, "status", "installedCSV")
		if err := r.c.Delete(ctx, sub); client.IgnoreNotFound(err) != nil {
			t.Errorf("olm uninstall: %v", err)
		}
	}
	if installed != "" {
		if err := r.c.Delete(ctx, obj(olmV1alpha1, "ClusterServiceVersion", operatorNS, installed, nil)); client.IgnoreNotFound(err) != nil {
			t.Errorf("olm uninstall: %v", err)
		}
	}
	err = pollUntil(ctx, 2*time.Minute, func() (bool, error) {
		err := r.c.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "kube-fledged-operator"}, &appsv1.Deployment{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("olm uninstall: the operator's Deployment is still there: %v", err)
	}
}

// wait polls cond for stageTimeout, failing early when an OLM process
// exits.
func (r *olmRun) wait(what string, cond func() (bool, error)) error {
	err := pollUntil(r.ctx, stageTimeout, func() (bool, error) {
		if r.procs != nil {
			if err := r.procs.check(); err != nil {
				return false, err
			}
		}
		return cond()
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

// diagnose says where OLM stands: its objects' status, the pods of both
// namespaces with their containers' states, and the ends of OLM's logs.
func (r *olmRun) diagnose() string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	for _, k := range []struct{ apiVersion, kind, ns string }{
		{olmV1alpha1, "CatalogSource", catalogNS}, {olmV1alpha1, "Subscription", operatorNS},
		{olmV1alpha1, "InstallPlan", operatorNS}, {olmV1alpha1, "ClusterServiceVersion", operatorNS},
	} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(k.apiVersion)
		l.SetKind(k.kind + "List")
		if err := r.c.List(ctx, l, client.InNamespace(k.ns)); err != nil {
			fmt.Fprintf(&b, "%s: %v\n", k.kind, err)
			continue
		}
		for _, o := range l.Items {
			st, _ := json.Marshal(o.Object["status"])
			if len(st) > 1500 {
				st = append(st[:1500], "..."...)
			}
			fmt.Fprintf(&b, "%s %s/%s: %s\n", k.kind, o.GetNamespace(), o.GetName(), st)
		}
	}
	for _, ns := range []string{catalogNS, operatorNS} {
		b.WriteString(podSummary(ctx, kube, ns))
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range evs.Items {
				if e.Type == corev1.EventTypeWarning {
					fmt.Fprintf(&b, "  event %s %s: %s %s\n", ns, e.InvolvedObject.Name, e.Reason, e.Message)
				}
			}
		}
	}
	if r.procs != nil {
		fmt.Fprintf(&b, "--- olm operator (%s):\n%s\n--- catalog operator (%s):\n%s\n",
			r.procs.olm.LogPath(), r.procs.olm.Tail(25), r.procs.catalog.LogPath(), r.procs.catalog.Tail(25))
	}
	if r.proxy != nil {
		fmt.Fprintf(&b, "--- proxied dials: %q\n", r.proxy.dialed())
	}
	return b.String()
}

// suggestedNamespace is the CSV's operatorframework.io/suggested-namespace-template, which
// must name operatorNS.
func suggestedNamespace() (*corev1.Namespace, error) {
	annotations, err := csvAnnotations()
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	if err := json.Unmarshal([]byte(annotations["operatorframework.io/suggested-namespace-template"]), ns); err != nil {
		return nil, fmt.Errorf("the CSV's suggested-namespace-template: %w", err)
	}
	if ns.Name != operatorNS {
		return nil, fmt.Errorf("the CSV suggests namespace %q, the test installs into %q", ns.Name, operatorNS)
	}
	return ns, nil
}
