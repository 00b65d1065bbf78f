package main

import (
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rule(group string, resources, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: verbs, ResourceNames: names}
}

// A chart grant scoped to a name the release chooses is held for every
// name, and only the verbs not held already are added, resources that lack
// the same verbs sharing a rule.
func TestMissing(t *testing.T) {
	g := NewWithT(t)
	held := []commentedRule{
		{rule: rule("", []string{"secrets"}, helmVerbs)},
		{rule: rule("", []string{"events"}, []string{"create", "patch"})},
		{rule: rule("", []string{"namespaces"}, []string{"list"})},
		// Scoped by name: holds nothing for other names.
		{rule: rule("", []string{"pods"}, []string{"list"}, "one")},
	}
	g.Expect(missing(held, rule("", []string{"secrets"}, []string{"get", "update"}, "kubefledged-webhook-cert"))).To(BeEmpty())
	// A name the chart writes as a constant stays: the operator may use
	// that SCC, not every one.
	g.Expect(missing(held, rule("security.openshift.io", []string{"securitycontextconstraints"}, []string{"use"}, "privileged"))).
		To(Equal([]rbacv1.PolicyRule{rule("security.openshift.io", []string{"securitycontextconstraints"}, []string{"use"}, "privileged")}))
	scc := []commentedRule{{rule: rule("security.openshift.io", []string{"securitycontextconstraints"}, []string{"use"}, "privileged")}}
	g.Expect(missing(scc, scc[0].rule)).To(BeEmpty(), "held once, not twice")
	g.Expect(missing(held, rule("", []string{"events"}, []string{"create", "patch", "list"}))).
		To(Equal([]rbacv1.PolicyRule{rule("", []string{"events"}, []string{"list"})}))
	g.Expect(missing(held, rule("", []string{"pods", "nodes", "namespaces"}, []string{"list", "watch"}))).
		To(Equal([]rbacv1.PolicyRule{
			rule("", []string{"pods", "nodes"}, []string{"list", "watch"}),
			rule("", []string{"namespaces"}, []string{"watch"}),
		}))
}

func TestOperatorRules(t *testing.T) {
	g := NewWithT(t)
	c := chartRBAC{
		kinds: []schema.GroupResource{{Group: "apps", Resource: "deployments"}, {Resource: "services"}, {Resource: "configmaps"}},
		rules: []grantedRule{
			{template: "templates/clusterrole.yaml", rule: rule("batch", []string{"jobs"}, []string{"create", "list"})},
			{template: "templates/clusterrole.yaml", rule: rule("apps", []string{"deployments"}, []string{"get"}, "x")},
			{template: "templates/role.yaml", rule: rule("coordination.k8s.io", []string{"leases"}, []string{"get"})},
		},
	}
	got := operatorRules(c)
	g.Expect(got[:len(ownClusterRules)]).To(Equal(ownClusterRules))
	var rules []rbacv1.PolicyRule
	var whys []string
	for _, r := range got[len(ownClusterRules):] {
		rules = append(rules, r.rule)
		whys = append(whys, r.why)
	}
	g.Expect(rules).To(Equal([]rbacv1.PolicyRule{
		rule("", []string{"configmaps", "services"}, helmVerbs),
		rule("apps", []string{"deployments"}, helmVerbs),
		rule("batch", []string{"jobs"}, []string{"create", "list"}),
		rule("coordination.k8s.io", []string{"leases"}, []string{"get"}),
	}))
	g.Expect(whys[2]).To(HaveSuffix("Granted by the chart's templates/clusterrole.yaml."))
	g.Expect(whys[3]).To(Equal("Granted by the chart's templates/role.yaml."))
}
