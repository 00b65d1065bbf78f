package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// The controller's rules live in the chart, which the operator installs;
// hack/gen-rbac derives the operator's, config/rbac, from them, and `make
// bundle` copies config/rbac into the CSV (OLM installs the CSV's, never
// config/'s). RBAC's escalation prevention lets the operator grant only what
// it holds, so the chart's roles must stay within config/rbac's, in every
// case of testdata, whatever value sets the generator rendered. make verify runs these
// tests: a drift between the three fails it, not an install on a cluster.

// operatorRBAC is config/rbac and the CSV's copy of it.
type operatorRBAC struct {
	cluster, leaderElection       []rbacv1.PolicyRule
	csvCluster, csvLeaderElection [][]rbacv1.PolicyRule
}

func repoFile(parts ...string) string {
	return filepath.Join(append([]string{ChartDir(), "..", ".."}, parts...)...)
}

func readOperatorRBAC(g Gomega) operatorRBAC {
	rulesOf := func(f string) []rbacv1.PolicyRule {
		raw, err := os.ReadFile(repoFile("config", "rbac", f))
		g.Expect(err).NotTo(HaveOccurred())
		r := &rbacv1.ClusterRole{}
		g.Expect(yaml.Unmarshal(raw, r)).To(Succeed())
		return r.Rules
	}
	files, err := filepath.Glob(repoFile("bundle", "manifests", "*.clusterserviceversion.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(1), "one CSV in bundle/manifests")
	raw, err := os.ReadFile(files[0])
	g.Expect(err).NotTo(HaveOccurred())
	type perms []struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	var csv struct {
		Spec struct {
			Install struct {
				Spec struct {
					ClusterPermissions perms `json:"clusterPermissions"`
					Permissions        perms `json:"permissions"`
				} `json:"spec"`
			} `json:"install"`
		} `json:"spec"`
	}
	g.Expect(yaml.Unmarshal(raw, &csv)).To(Succeed())
	o := operatorRBAC{cluster: rulesOf("role.yaml"), leaderElection: rulesOf("leader_election_role.yaml")}
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		o.csvCluster = append(o.csvCluster, p.Rules)
	}
	for _, p := range csv.Spec.Install.Spec.Permissions {
		o.csvLeaderElection = append(o.csvLeaderElection, p.Rules)
	}
	return o
}

// csvDrift says how the CSV differs from config/rbac; empty when it does not.
func (o operatorRBAC) csvDrift() []string {
	var out []string
	if len(o.csvCluster) != 1 || !slices.EqualFunc(o.csvCluster[0], o.cluster, ruleEqual) {
		out = append(out, "CSV clusterPermissions differ from config/rbac/role.yaml (run `make bundle`)")
	}
	if len(o.csvLeaderElection) != 1 || !slices.EqualFunc(o.csvLeaderElection[0], o.leaderElection, ruleEqual) {
		out = append(out, "CSV permissions differ from config/rbac/leader_election_role.yaml (run `make bundle`)")
	}
	return out
}

func ruleEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// ungranted lists each (group, resource, name, verb) of want that no rule of
// held allows, as RBAC would judge a grant (a "*" allows all).
func ungranted(held, want []rbacv1.PolicyRule) []string {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	allows := func(group, resource, name, verb string) bool {
		for _, r := range held {
			if has(r.APIGroups, group) && has(r.Resources, resource) && has(r.Verbs, verb) &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, w := range want {
		names := w.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, grp := range w.APIGroups {
			for _, res := range w.Resources {
				for _, n := range names {
					for _, v := range w.Verbs {
						if !allows(grp, res, n, v) {
							out = append(out, fmt.Sprintf("%s %s/%s %q", v, grp, res, n))
						}
					}
				}
			}
		}
	}
	return out
}

// chartRules are the rules of every Role and ClusterRole one case renders.
func chartRules(g Gomega, r Rendered) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, m := range r.Find(kind, "") {
			role := &rbacv1.ClusterRole{}
			g.Expect(yaml.Unmarshal([]byte(m.Content), role)).To(Succeed(), m.Name)
			rules = append(rules, role.Rules...)
		}
	}
	return rules
}

// unmanaged lists each object of r that held does not let Helm create,
// update, delete and watch.
func unmanaged(held []rbacv1.PolicyRule, r Rendered) []string {
	var out []string
	for _, m := range r.Manifests {
		gv, err := schema.ParseGroupVersion(m.Head.Version)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", m.Name, err))
			continue
		}
		plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(m.Head.Kind))
		want := rbacv1.PolicyRule{APIGroups: []string{plural.Group}, Resources: []string{plural.Resource},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}
		for _, u := range ungranted(held, []rbacv1.PolicyRule{want}) {
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

func TestRBACCSVMatchesConfig(t *testing.T) {
	g := NewWithT(t)
	g.Expect(readOperatorRBAC(g).csvDrift()).To(BeEmpty())
}

func TestRBACOperatorHoldsWhatTheChartGrants(t *testing.T) {
	o := readOperatorRBAC(NewWithT(t))
	held := append(slices.Clone(o.cluster), o.leaderElection...)
	c := loadChart(t)
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(ungranted(held, chartRules(g, render(t, c, name)))).To(BeEmpty(),
				"the chart grants what config/rbac/role.yaml does not give the operator")
		})
	}
}

// hack/gen-rbac renders the chart with a few value sets of its own; every
// kind a case renders must be among theirs, or Helm cannot install it.
func TestRBACOperatorManagesWhatTheChartRenders(t *testing.T) {
	o := readOperatorRBAC(NewWithT(t))
	c := loadChart(t)
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(unmanaged(o.cluster, render(t, c, name))).To(BeEmpty(),
				"the chart renders a kind config/rbac/role.yaml does not let the operator manage: add the option to hack/gen-rbac's renderings")
		})
	}
}

// A check that cannot fail is no check: each drift the tests above guard
// against, made on a copy of the real sources, is reported.
func TestRBACDriftIsCaught(t *testing.T) {
	g := NewWithT(t)
	o := readOperatorRBAC(g)
	g.Expect(o.cluster).NotTo(BeEmpty())

	csvEdited := o
	csvEdited.csvCluster = [][]rbacv1.PolicyRule{slices.Clone(o.cluster)}
	csvEdited.csvCluster[0][0].Verbs = append(slices.Clone(o.cluster[0].Verbs), "deletecollection")
	g.Expect(csvEdited.csvDrift()).To(ConsistOf(ContainSubstring("clusterPermissions")))

	leaderDropped := o
	leaderDropped.csvLeaderElection = nil
	g.Expect(leaderDropped.csvDrift()).To(ConsistOf(ContainSubstring("leader_election_role")))

	defaults, err := Render(loadChart(t), nil)
	g.Expect(err).NotTo(HaveOccurred())
	want := chartRules(g, defaults)
	g.Expect(want).NotTo(BeEmpty(), "the chart's defaults render roles")
	held := append(slices.Clone(o.cluster), o.leaderElection...)
	g.Expect(ungranted(held, want)).To(BeEmpty())
	// The chart grants one verb more than the operator holds.
	grown := append(slices.Clone(want), rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: []string{"create"}})
	g.Expect(ungranted(held, grown)).To(ConsistOf(`create batch/cronjobs ""`))
	// The chart renders a kind the operator cannot manage.
	var noDeployments []rbacv1.PolicyRule
	for _, r := range o.cluster {
		if !slices.Contains(r.Resources, "deployments") {
			noDeployments = append(noDeployments, r)
		}
	}
	g.Expect(unmanaged(o.cluster, defaults)).To(BeEmpty())
	g.Expect(unmanaged(noDeployments, defaults)).To(ContainElement(`create apps/deployments ""`))
	// A name-scoped grant is held only for that name.
	g.Expect(ungranted([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"a"}, Verbs: []string{"get"}}},
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"b"}, Verbs: []string{"get"}}})).
		To(ConsistOf(`get /secrets "b"`))
}
