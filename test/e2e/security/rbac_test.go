package security

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework"
	"github.com/kubefledged/kube-fledged/test/golden"
)

// access is one permission: a verb on a resource (sub is the subresource),
// in a namespace ("" for cluster-wide) and on one name ("" for any).
type access struct {
	verb, group, resource, sub, ns, name string
	why                                  string
}

func (a access) String() string {
	r := a.resource
	if a.sub != "" {
		r += "/" + a.sub
	}
	if a.group != "" {
		r += "." + a.group
	}
	where := "cluster-wide"
	if a.ns != "" {
		where = "in " + a.ns
	}
	if a.name != "" {
		r += " " + a.name
	}
	return a.verb + " " + r + " " + where
}

func allow(verbs, group, resource, ns, name, why string) []access {
	var out []access
	res, sub, _ := strings.Cut(resource, "/")
	for _, v := range strings.Split(verbs, ",") {
		out = append(out, access{verb: v, group: group, resource: res, sub: sub, ns: ns, name: name, why: why})
	}
	return out
}

func join(ls ...[]access) []access {
	var out []access
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

// inForce waits until the subject of cs may do every one of needs, and returns those it
// still may not at the deadline. The API server authorizes from informers of the RBAC
// objects, so the roles and bindings the setup applied just before come in force a moment
// later, each kind at its own.
func inForce(t *testing.T, cs kubernetes.Interface, needs []access) []string {
	t.Helper()
	var missing []string
	deadline := time.Now().Add(framework.ClusterTimeout)
	for {
		missing = nil
		for _, a := range needs {
			if !can(t, cs, a) {
				missing = append(missing, fmt.Sprintf("%s (%s)", a, a.why))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			return missing
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// can asks the apiserver, as the impersonated subject, whether it may.
func can(t *testing.T, cs kubernetes.Interface, a access) bool {
	t.Helper()
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Name: a.name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("access review %s: %v", a, err)
	}
	return r.Status.Allowed
}

// Everyone authenticated may do these (system:basic-user and friends).
var everyone = join(
	allow("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", "system:basic-user"),
	allow("create", "authorization.k8s.io", "selfsubjectrulesreviews", "", "", "system:basic-user"),
	allow("create", "authentication.k8s.io", "selfsubjectreviews", "", "", "system:basic-user"),
)

// webhookSecret is the certificate keeper's Secret as the chart names it.
const webhookSecret = golden.ReleaseName + "-webhook-cert"

// controllerNeeds is what the controller does, from its code. Each entry
// says which call needs it.
func controllerNeeds() []access {
	ns := releaseNS
	vwc := golden.ReleaseName // --webhook-configuration as the chart renders it
	return join(
		allow("get,list,watch", "kubefledged.io", "imagecaches", "", "", "informer; preflight and finish read caches straight from the apiserver"),
		allow("patch", "kubefledged.io", "imagecaches", "", "", "finish removes the refresh/purge annotations (JSON patch: test the value, remove)"),
		allow("update,patch", "kubefledged.io", "imagecaches/status", "", "", "start, abort and finish update the status; progress is a merge patch"),
		allow("update", "kubefledged.io", "imagecaches/finalizers", "", "", "Jobs name their cache as blocking owner (OwnerReferencesPermissionEnforcement)"),
		allow("create,delete,deletecollection,list,watch,patch", "batch", "jobs", "", "", "pull/delete Jobs next to each cache; the retain policy labels them; clean-ups delete them by label"),
		allow("list,watch", "", "pods", "", "", "informer of the Jobs' pods, for failure reasons; fromPods' informer of every pod's images"),
		allow("list,watch", "", "namespaces", "", "", "fromPods and fromWorkloads select by their namespace's labels"),
		allow("list,watch", "apps", "deployments", "", "", "fromWorkloads' informer of the Deployments' pod templates"),
		allow("list,watch", "apps", "statefulsets", "", "", "fromWorkloads' informer of the StatefulSets' pod templates"),
		allow("list,watch", "apps", "daemonsets", "", "", "fromWorkloads' informer of the DaemonSets' pod templates"),
		allow("list,watch", "batch", "cronjobs", "", "", "fromWorkloads' informer of the CronJobs' job templates"),
		allow("get", "", "namespaces", "", "", "an operation's start reads its namespace's OpenShift UID range (pullUser)"),
		allow("list,watch", "", "nodes", "", "", "eligible nodes, node joins"),
		allow("create,patch", "", "events", "", "", "events on caches"),
		allow("list", "", "events", "", "", "a pull pending at the deadline is explained by its pod's events"),
		allow("get,list,watch,update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", vwc, "certificate keeper watches its configuration (metadata.name field selector) and writes the caBundle"),
		allow("create", "", "secrets", ns, "", "certificate keeper creates its shared Secret (create cannot be scoped by name)"),
		allow("get,list,watch,update", "", "secrets", ns, webhookSecret, "certificate keeper's shared Secret, through a metadata.name field selector"),
		allow("get,create,update", "coordination.k8s.io", "leases", ns, "", "leader election"),
		allow("create", "authentication.k8s.io", "tokenreviews", "", "", "metrics.secure: who a scraper is"),
		allow("create", "authorization.k8s.io", "subjectaccessreviews", "", "", "metrics.secure: whether a scraper may get /metrics"),
	)
}

// controllerExcess is granted by the chart but used by no code path. It is
// empty: the test names any grant that appears without a use.
func controllerExcess() []access { return nil }

// neitherMay is what neither component may do, whatever else its role
// grants: the ways from a stolen token to the nodes or to every workload.
func neitherMay() []access {
	return join(
		allow("patch,update", "", "nodes/status", "", "", "writing Nodes"),
		allow("create", "", "pods/exec", "default", "", "exec"),
		allow("create", "", "serviceaccounts/token", "kube-system", "", "tokens of other ServiceAccounts"),
		allow("impersonate", "", "users", "", "", "impersonation"),
		allow("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "mutating webhooks"),
		allow("create", "certificates.k8s.io", "certificatesigningrequests", "", "", "certificates signed by the cluster"),
	)
}

// controllerDenied are things a compromised controller must not be able to
// do.
func controllerDenied() []access {
	return join(neitherMay(),
		allow("get,list,watch", "", "secrets", "kube-system", "", "Secrets outside its namespace"),
		allow("get,list", "", "secrets", "default", "", "Secrets outside its namespace"),
		allow("get,list,watch,update", "", "secrets", releaseNS, "", "other Secrets of its own namespace (Helm release records among them)"),
		allow("get", "", "secrets", releaseNS, "sh.helm.release.v1.kubefledged.v1", "the operator's Helm release record"),
		allow("create,update,patch,delete", "", "nodes", "", "", "writing Nodes"),
		allow("create,delete", "", "pods", "default", "", "pods other than its Jobs'"),
		allow("create", "", "pods/eviction", "default", "", "evictions"),
		allow("create,update,delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "CRDs"),
		allow("create,update", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", "bindings (e.g. to system:nodes)"),
		allow("create", "rbac.authorization.k8s.io", "rolebindings", releaseNS, "", "bindings"),
		allow("bind,escalate", "rbac.authorization.k8s.io", "clusterroles", "", "system:node", "binding system:node"),
		allow("impersonate", "", "serviceaccounts", "kube-system", "", "impersonation"),
		allow("create,delete", "kubefledged.io", "imagecaches", "default", "", "creating or deleting caches"),
		allow("update,patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "some-other-webhook", "other webhooks"),
		allow("update,patch", "apps", "deployments", releaseNS, "", "its own Deployment"),
		allow("get", "", "configmaps", "kube-system", "", "configuration outside its namespace"),
	)
}

// TestControllerRBAC impersonates the controller's ServiceAccount, bound as
// the chart binds it, and checks that it may do everything its code does,
// nothing a compromise could turn against the cluster, and nothing else
// beyond a known list of unused grants.
func TestControllerRBAC(t *testing.T) {
	setup(t)
	cs := kubernetes.NewForConfigOrDie(as(releaseNS, controllerSA))
	checkRole(t, cs, "controller", controllerNeeds(), controllerExcess(), controllerDenied(), []string{releaseNS, "default"})

	// The cluster-wide grants hold in any namespace, and the namespaced ones
	// in no other.
	g := NewWithT(t)
	g.Expect(can(t, cs, access{verb: "create", group: "batch", resource: "jobs", ns: "team-a"})).To(BeTrue())
	g.Expect(can(t, cs, access{verb: "get", resource: "secrets", ns: "team-a"})).To(BeFalse())
	g.Expect(can(t, cs, access{verb: "update", group: "coordination.k8s.io", resource: "leases", ns: "default"})).To(BeFalse())
}

// TestRealCallsAsController makes real calls as the controller: what RBAC
// allows in a review must also work, and be refused, end to end.
func TestRealCallsAsController(t *testing.T) {
	setup(t)
	g := NewWithT(t)
	cs := kubernetes.NewForConfigOrDie(as(releaseNS, controllerSA))
	g.Expect(inForce(t, cs, controllerNeeds())).To(BeEmpty(), "the controller's RBAC in force")
	ctx := context.Background()
	_, err := cs.BatchV1().Jobs("").List(ctx, metav1.ListOptions{LabelSelector: "app=kubefledged"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing kube-system Secrets: %v", err)
	_, err = cs.CoreV1().Secrets(releaseNS).List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing all Secrets of its own namespace: %v", err)
	_, err = cs.CoreV1().Secrets(releaseNS).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + webhookSecret})
	g.Expect(err).NotTo(HaveOccurred(), "listing its own Secret by name")
	node, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(node.Items).NotTo(BeEmpty())
	n := node.Items[0]
	n.Labels["pwned"] = "true"
	_, err = cs.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "updating a Node: %v", err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "pwned"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding system:node: %v", err)
}

// operatorNeeds derives what the operator needs from the chart itself: every
// kind the chart can render (across the value sets that render them all),
// Helm's release Secrets, its own resources, and every permission the
// chart's roles grant (the apiserver lets it create a role only with
// permissions it holds itself).
func operatorNeeds(t *testing.T) []access {
	t.Helper()
	resources := map[string][2]string{ // kind -> group, resource
		"ServiceAccount": {"", "serviceaccounts"}, "Service": {"", "services"},
		"Deployment": {"apps", "deployments"}, "PodDisruptionBudget": {"policy", "poddisruptionbudgets"},
		"ClusterRole": {"rbac.authorization.k8s.io", "clusterroles"}, "ClusterRoleBinding": {"rbac.authorization.k8s.io", "clusterrolebindings"},
		"Role": {"rbac.authorization.k8s.io", "roles"}, "RoleBinding": {"rbac.authorization.k8s.io", "rolebindings"},
		"ValidatingWebhookConfiguration": {"admissionregistration.k8s.io", "validatingwebhookconfigurations"},
		"ServiceMonitor":                 {"monitoring.coreos.com", "servicemonitors"},
		"PrometheusRule":                 {"monitoring.coreos.com", "prometheusrules"},
		"ConfigMap":                      {"", "configmaps"},
		"Issuer":                         {"cert-manager.io", "issuers"}, "Certificate": {"cert-manager.io", "certificates"},
	}
	out := join(
		allow("get,list,watch,update,patch", "charts.helm.kubefledged.io", "kubefledgeds", "", "", "its resources; the finalizer"),
		allow("get,update,patch", "charts.helm.kubefledged.io", "kubefledgeds/status", "", "", "status"),
		allow("update", "charts.helm.kubefledged.io", "kubefledgeds/finalizers", "", "", "owner references with blockOwnerDeletion"),
		allow("get,list,watch,create,update,patch,delete", "", "secrets", "", "", "Helm's release records, in each resource's namespace"),
		allow("get,list,watch,create,update,patch,delete", "coordination.k8s.io", "leases", operatorNS, "", "its own leader election"),
		allow("create,patch", "", "events", operatorNS, "", "its own events"),
	)
	seen := map[string]bool{}
	var roles []rbacv1.PolicyRule
	for _, vals := range []map[string]interface{}{
		nil,
		{"controller": map[string]interface{}{"replicaCount": 2, "nodeStartupTaint": "kubefledged.io/caching:NoSchedule"}, "metrics": map[string]interface{}{"service": map[string]interface{}{"enabled": true}, "serviceMonitor": map[string]interface{}{"enabled": true}},
			"webhook":        map[string]interface{}{"certManager": map[string]interface{}{"enabled": true}},
			"prometheusRule": map[string]interface{}{"enabled": true}, "grafanaDashboard": map[string]interface{}{"enabled": true}},
	} {
		for _, m := range manifestsOf(t, vals) {
			kind := m.Head.Kind
			switch kind {
			case "ClusterRole", "Role":
				r := &rbacv1.ClusterRole{}
				if err := yaml.Unmarshal([]byte(m.Content), r); err != nil {
					t.Fatal(err)
				}
				roles = append(roles, r.Rules...)
			}
			if seen[kind] {
				continue
			}
			seen[kind] = true
			gr, ok := resources[kind]
			if !ok {
				t.Fatalf("the chart renders a %s: say what the operator needs for it in operatorNeeds", kind)
			}
			out = append(out, allow("get,list,watch,create,update,patch,delete", gr[0], gr[1], "", "", "Helm installs, upgrades and deletes the chart's "+kind+"s; dependent watches")...)
		}
	}
	for _, r := range roles {
		for _, v := range r.Verbs {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					// hack/gen-rbac widens a grant scoped by name to
					// the resource: the operator needs both. But the
					// SCC the chart names is a constant, and its grant
					// keeps the name.
					names := append([]string{""}, r.ResourceNames...)
					if res == "securitycontextconstraints" {
						names = r.ResourceNames
					}
					for _, n := range names {
						res, sub, _ := strings.Cut(res, "/")
						out = append(out, access{verb: v, group: g, resource: res, sub: sub, name: n, why: "granted by the chart's roles (escalation prevention)"})
					}
				}
			}
		}
	}
	return out
}

func operatorDenied() []access {
	return join(neitherMay(),
		allow("create,update,patch,delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "CRDs: the bundle owns them"),
		// It may patch them: the chart grants that to the controller for
		// the startup taint, and one can grant only what one holds.
		allow("create,update,delete", "", "nodes", "", "", "writing Nodes"),
		allow("create", "", "pods", "default", "", "running pods of its own"),
		allow("bind,escalate", "rbac.authorization.k8s.io", "clusterroles", "", "cluster-admin", "granting what it does not hold"),
		allow("use", "security.openshift.io", "securitycontextconstraints", "", "anyuid", "using an SCC the chart does not name"),
		allow("create,delete", "kubefledged.io", "imagecaches", "default", "", "caches are the users'"),
		allow("create,delete", "charts.helm.kubefledged.io", "kubefledgeds", "default", "", "its resources are the users'"),
	)
}

// TestOperatorRBAC impersonates the operator's ServiceAccount, bound by
// config/rbac as config/default names it.
func TestOperatorRBAC(t *testing.T) {
	setup(t)
	cs := kubernetes.NewForConfigOrDie(as(operatorNS, operatorSA))
	checkRole(t, cs, "operator", operatorNeeds(t), nil, operatorDenied(), []string{operatorNS, "default"})
}

// TestOperatorCannotEscalate makes the real calls an attacker holding the
// operator's token would: RBAC's escalation prevention must refuse roles
// and bindings beyond what the operator holds, whatever its verbs on them.
func TestOperatorCannotEscalate(t *testing.T) {
	setup(t)
	g := NewWithT(t)
	cs := kubernetes.NewForConfigOrDie(as(operatorNS, operatorSA))
	ctx := context.Background()
	self := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: operatorNS}}
	for _, role := range []string{"cluster-admin", "system:node", "admin"} {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "escalate-" + strings.ReplaceAll(role, ":", "-")},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   self,
		}, metav1.CreateOptions{})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "binding %s to itself: %v", role, err)
	}
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate-star"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a ClusterRole of everything: %v", err)
	_, err = cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate-nodes"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"update"}}},
	}, metav1.CreateOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "creating a ClusterRole that writes Nodes: %v", err)
}

// TestRenderedBindingsGrantNoGroups: the original chart bound its role to
// system:nodes, giving every kubelet its rights. No binding of ours may name
// a group.
func TestRenderedBindingsGrantNoGroups(t *testing.T) {
	g := NewWithT(t)
	for _, vals := range []map[string]interface{}{nil, {"controller": map[string]interface{}{"replicaCount": 2}}} {
		for _, m := range manifestsOf(t, vals) {
			if m.Head.Kind != "ClusterRoleBinding" && m.Head.Kind != "RoleBinding" {
				continue
			}
			b := &rbacv1.RoleBinding{}
			g.Expect(yaml.Unmarshal([]byte(m.Content), b)).To(Succeed())
			for _, s := range b.Subjects {
				g.Expect(s.Kind).To(Equal(rbacv1.ServiceAccountKind), "%s %s binds %s %s", m.Head.Kind, b.Name, s.Kind, s.Name)
				// The delete Jobs' ServiceAccount, bound to the use of
				// OpenShift's privileged SCC alone.
				g.Expect(s.Name).To(BeElementOf(controllerSA, "kubefledged-delete"))
			}
		}
	}
}

// checkRole checks needs (allowed), denied (refused) and, through rules
// reviews in each namespace, that nothing is granted beyond needs, excess
// and what everyone may.
func checkRole(t *testing.T, cs kubernetes.Interface, who string, needs, excess, denied []access, namespaces []string) {
	t.Helper()
	missing := inForce(t, cs, needs)
	var leaked []string
	for _, a := range denied {
		if can(t, cs, a) {
			leaked = append(leaked, fmt.Sprintf("%s (%s)", a, a.why))
		}
	}
	known := join(needs, excess, everyone)
	var unlisted []string
	checked := 0
	for _, ns := range namespaces {
		review, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(context.Background(), &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range review.Status.ResourceRules {
			for _, v := range r.Verbs {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						names := r.ResourceNames
						if len(names) == 0 {
							names = []string{""}
						}
						for _, n := range names {
							checked++
							res, sub, _ := strings.Cut(res, "/")
							got := access{verb: v, group: g, resource: res, sub: sub, ns: ns, name: n}
							if !covered(got, known) {
								unlisted = append(unlisted, got.String())
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(unlisted)
	unlisted = dedupe(unlisted)
	g := NewWithT(t)
	g.Expect(missing).To(BeEmpty(), "%s lacks what it needs", who)
	g.Expect(leaked).To(BeEmpty(), "%s may do what it must not", who)
	g.Expect(unlisted).To(BeEmpty(), "%s holds grants that are neither needed nor known to be unused", who)
	var ex []string
	for _, a := range excess {
		if can(t, cs, a) {
			ex = append(ex, a.String())
		}
	}
	t.Logf("FIGURES rbac %s: needed=%d allowed; denied=%d refused; rules-reviewed=%d; granted-but-unused=%d: %s",
		who, len(needs), len(denied), checked, len(ex), strings.Join(ex, "; "))
}

// covered tells whether a granted permission (from a rules review, in
// namespace got.ns) is one of the known ones. A known cluster-wide entry
// covers every namespace; an entry for any name covers every name.
func covered(got access, known []access) bool {
	for _, k := range known {
		if k.verb != got.verb && k.verb != "*" {
			continue
		}
		if k.group != got.group || k.resource != got.resource || k.sub != got.sub {
			continue
		}
		if k.ns != "" && k.ns != got.ns {
			continue
		}
		if k.name != "" && k.name != got.name {
			continue
		}
		return true
	}
	return false
}

func dedupe(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || s[i-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// TestNameScopedListAndWatch proves the narrower rules docs/security.md asks
// the chart for: the certificate keeper lists and watches its one Secret and
// its one webhook configuration through a metadata.name field selector, and
// the apiserver authorizes such a list or watch against resourceNames. So
// the chart's Role need not let the controller read every Secret of its
// namespace (only create, which RBAC cannot scope by name, stays unscoped).
func TestNameScopedListAndWatch(t *testing.T) {
	w := setup(t)
	g := NewWithT(t)
	ctx := context.Background()
	const sa, secret, vwc = "narrow", "kubefledged-webhook-cert", "kubefledged"
	for _, doc := range []string{
		`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"narrow","namespace":"` + releaseNS + `"}}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"narrow","namespace":"` + releaseNS + `"},"rules":[
			{"apiGroups":[""],"resources":["secrets"],"verbs":["create"]},
			{"apiGroups":[""],"resources":["secrets"],"resourceNames":["` + secret + `"],"verbs":["get","list","watch","update"]}]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"narrow","namespace":"` + releaseNS + `"},
			"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"narrow"},
			"subjects":[{"kind":"ServiceAccount","name":"narrow","namespace":"` + releaseNS + `"}]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"narrow-vwc"},"rules":[
			{"apiGroups":["admissionregistration.k8s.io"],"resources":["validatingwebhookconfigurations"],"resourceNames":["` + vwc + `"],"verbs":["get","list","watch","update"]}]}`,
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"narrow-vwc"},
			"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"narrow-vwc"},
			"subjects":[{"kind":"ServiceAccount","name":"narrow","namespace":"` + releaseNS + `"}]}`,
	} {
		g.Expect(w.apply(ctx, doc)).To(Succeed())
	}
	cs := kubernetes.NewForConfigOrDie(as(releaseNS, sa))
	one := metav1.ListOptions{FieldSelector: "metadata.name=" + secret}
	oneVWC := metav1.ListOptions{FieldSelector: "metadata.name=" + vwc}
	// The API server authorizes from informers of the RBAC objects, one per kind: each
	// binding is in force at its own moment after its create.
	g.Eventually(func(g Gomega) {
		_, err := cs.CoreV1().Secrets(releaseNS).List(ctx, one)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, oneVWC)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(framework.ClusterTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	watch, err := cs.CoreV1().Secrets(releaseNS).Watch(ctx, one)
	g.Expect(err).NotTo(HaveOccurred())
	watch.Stop()
	_, err = cs.CoreV1().Secrets(releaseNS).List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing every Secret: %v", err)
	_, err = cs.CoreV1().Secrets(releaseNS).Get(ctx, "some-other-secret", metav1.GetOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading another Secret: %v", err)
	watch, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Watch(ctx, oneVWC)
	g.Expect(err).NotTo(HaveOccurred())
	watch.Stop()
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing every configuration: %v", err)
}
