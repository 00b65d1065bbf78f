package main

import rbacv1 "k8s.io/api/rbac/v1"

// This file is the hand-written part of the operator's RBAC: what it needs
// for itself, whatever the chart renders, and the value sets that make the
// chart render all it can. Everything else in config/rbac/role.yaml is read
// from the chart.

// helmVerbs are what Helm and the reconciler do with an object of the
// release: create, patch and delete it, and watch it to put back what
// someone changed.
var helmVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// ownClusterRules come first in the ClusterRole: the operator's own
// resources and Helm's storage, in any namespace a KubeFledged lives in.
var ownClusterRules = []commentedRule{
	{
		why: "Its own resources: the reconciler reads the spec, rewrites the status and\nholds the uninstall-helm-release finalizer.",
		rule: rbacv1.PolicyRule{APIGroups: []string{"charts.helm.kubefledged.io"}, Resources: []string{"kubefledgeds"},
			Verbs: []string{"get", "list", "watch", "update", "patch"}},
	},
	{rule: rbacv1.PolicyRule{APIGroups: []string{"charts.helm.kubefledged.io"}, Resources: []string{"kubefledgeds/status"},
		Verbs: []string{"get", "update", "patch"}}},
	{rule: rbacv1.PolicyRule{APIGroups: []string{"charts.helm.kubefledged.io"}, Resources: []string{"kubefledgeds/finalizers"},
		Verbs: []string{"update"}}},
	{
		why:  "Helm keeps each release's history in Secrets of the release namespace.",
		rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: helmVerbs},
	},
	{
		why:  "The chart's metrics-reader ClusterRole grants get on /metrics (metrics.secure):\nthe API server lets the operator create it only if it holds that right too.",
		rule: rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
	},
	{
		why:  "Its events on the KubeFledged resources it reconciles.",
		rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	},
}

// leaderElectionRules are the operator's Role in its own namespace. Kept
// apart from the ClusterRole so that its election does not depend on what
// the chart needs; OLM scopes it to the operator's namespace.
var leaderElectionRules = []commentedRule{
	{rule: rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: helmVerbs}},
	{rule: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}},
}

// renderings are value sets that, together, make the chart render every
// kind and every rule it can. The defaults run the webhook with its
// self-managed certificate (its Secret Role, update on its configuration)
// and a leader election Role; the second set switches on every option that
// adds an object or a rule, cert-manager in place of self management.
// test/golden's TestRBAC* check every test case against the result, so an
// option missing here fails `make verify`.
var renderings = []map[string]any{
	nil,
	{
		"controller":       map[string]any{"replicaCount": 2, "nodeStartupTaint": "kubefledged.io/caching:NoSchedule"},
		"metrics":          map[string]any{"service": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true}},
		"webhook":          map[string]any{"certManager": map[string]any{"enabled": true}},
		"prometheusRule":   map[string]any{"enabled": true},
		"grafanaDashboard": map[string]any{"enabled": true},
	},
}
