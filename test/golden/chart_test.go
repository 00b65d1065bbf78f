package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current chart")

// cases lists testdata/*.values.yaml; each has a .golden next to it.
func cases(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata: %v", err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".values.yaml"))
	}
	return names
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := LoadChart()
	if err != nil {
		t.Fatalf("loading chart: %v", err)
	}
	return c
}

func render(t *testing.T, c *chart.Chart, name string) Rendered {
	t.Helper()
	vals, err := ReadValues(filepath.Join("testdata", name+".values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(c, vals)
	if err != nil {
		t.Fatalf("rendering %s: %v", name, err)
	}
	return r
}

func TestGolden(t *testing.T) {
	c := loadChart(t)
	names := cases(t)
	// A rendering whose values are gone would still be read as current by
	// test/monitoring: -update removes it, and without -update it fails.
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		if slices.Contains(names, strings.TrimSuffix(filepath.Base(g), ".golden")) {
			continue
		}
		if !*update {
			t.Errorf("%s has no .values.yaml (run `make golden` to remove it)", g)
		} else if err := os.Remove(g); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			got := render(t, c, name).String()
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("rendering differs from %s (run `make golden` and review the diff):\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff shows the first differing lines, enough to see what changed.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, wl, gl)
		}
	}
	return ""
}

// Every rendered object must decode strictly as its Kubernetes type: this is
// what catches YAML that is valid text but a wrong object, like the
// original's hostNetwork/priorityClassName rendering.
func TestRenderedObjectsDecodeStrictly(t *testing.T) {
	c := loadChart(t)
	strict := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			r := render(t, c, name)
			if len(r.Find("Deployment", "")) != 1 {
				t.Fatalf("want exactly one Deployment, got %d", len(r.Find("Deployment", "")))
			}
			for _, m := range r.All() {
				switch m.Head.Version {
				case "monitoring.coreos.com/v1", "cert-manager.io/v1":
					u := &unstructured.Unstructured{}
					if err := yaml.UnmarshalStrict([]byte(m.Content), &u.Object); err != nil {
						t.Errorf("%s: %v", m.Name, err)
					}
					continue
				}
				if _, _, err := strict.Decode([]byte(m.Content), nil, nil); err != nil {
					t.Errorf("%s (%s %s): %v", m.Name, m.Head.Kind, m.Head.Metadata.Name, err)
				}
			}
		})
	}
}

// one decodes the only manifest of ms into a T, strictly: a field T does
// not know is a typo in a template.
func one[T any](t *testing.T, ms []releaseutil.Manifest, what string) *T {
	t.Helper()
	if len(ms) != 1 {
		t.Fatalf("want one %s, got %d", what, len(ms))
	}
	v := new(T)
	if err := yaml.UnmarshalStrict([]byte(ms[0].Content), v); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func deployment(t *testing.T, r Rendered) *appsv1.Deployment {
	t.Helper()
	return one[appsv1.Deployment](t, r.Find("Deployment", ""), "Deployment")
}

// flags turns the controller's args into flag -> value.
func flags(t *testing.T, d *appsv1.Deployment) map[string]string {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "controller" {
		t.Fatalf("args must start with the controller subcommand: %q", args)
	}
	out := map[string]string{}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "--") {
			t.Fatalf("arg %q is not --flag=value", a)
		}
		if _, dup := out[k]; dup {
			t.Fatalf("flag %s given twice", k)
		}
		out[k] = v
	}
	return out
}

func TestDefaultsRenderEveryControllerFlag(t *testing.T) {
	d := deployment(t, render(t, loadChart(t), "defaults"))
	want := map[string]string{
		"--image-pull-deadline-duration":   "5m",
		"--image-cache-refresh-frequency":  "15m",
		"--image-pull-policy":              "IfNotPresent",
		"--service-account-name":           "",
		"--image-delete-job-host-network":  "false",
		"--delete-job-namespace":           Namespace,
		"--delete-job-service-account":     "kubefledged-delete",
		"--job-priority-class-name":        "",
		"--job-retention-policy":           "delete",
		"--cri-socket-path":                "",
		"--helper-image":                   "ghcr.io/kubefledged/kubefledged:v0.11.0",
		"--max-concurrent-jobs":            "100",
		"--max-concurrent-jobs-per-node":   "2",
		"--max-job-start-delay":            "1s",
		"--node-startup-taint":             "",
		"--node-startup-taint-timeout":     "10m",
		"--pull-job-granularity":           "node",
		"--pin-images":                     "false",
		"--install-claim":                  "kube-system/kubefledged-controller",
		"--job-cpu-request":                "",
		"--job-memory-request":             "",
		"--job-cpu-limit":                  "",
		"--job-memory-limit":               "",
		"--leader-elect":                   "true",
		"--leader-election-namespace":      Namespace,
		"--leader-election-lease-duration": "15s",
		"--leader-election-renew-deadline": "10s",
		"--leader-election-retry-period":   "2s",
		"--metrics-bind-address":           ":8080",
		"--metrics-secure":                 "true",
		"--health-probe-bind-address":      ":8081",
		"--zap-log-level":                  "info",
		"--enable-webhook":                 "true",
		"--webhook-port":                   "9443",
		"--webhook-cert-dir":               "/tmp/k8s-webhook-server/serving-certs",
		"--webhook-cert-management":        "self",
		"--webhook-cert-secret":            "kubefledged-webhook-cert",
		"--webhook-service":                "kubefledged-webhook",
		"--webhook-configuration":          "kubefledged",
	}
	if got := flags(t, d); !reflect.DeepEqual(got, want) {
		t.Errorf("flags:\n got %v\nwant %v", got, want)
	}
	pod := d.Spec.Template.Spec
	ctr := pod.Containers[0]
	if ctr.Image != "ghcr.io/kubefledged/kubefledged:v0.11.0" {
		t.Errorf("image %q", ctr.Image)
	}
	sc := ctr.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container security context is not restricted: %+v", sc)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("pod security context is not non-root: %+v", pod.SecurityContext)
	}
	if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
		t.Errorf("no resource requests: %+v", ctr.Resources)
	}
	if ctr.LivenessProbe == nil || ctr.LivenessProbe.HTTPGet.Path != "/healthz" ||
		ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: %+v %+v", ctr.LivenessProbe, ctr.ReadinessProbe)
	}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != "KUBEFLEDGED_NAMESPACE" || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("env: %+v", ctr.Env)
	}
}

// The controller and the helm test pod run Linux binaries: they select Linux
// nodes, whatever else nodeSelector says, unless it names an OS itself.
func TestPodsSelectLinuxNodes(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		name string
		vals map[string]interface{}
		want map[string]string
	}{
		{"defaults", nil, map[string]string{"kubernetes.io/os": "linux"}},
		{"a pool", map[string]interface{}{"nodeSelector": map[string]interface{}{"pool": "system"}},
			map[string]string{"kubernetes.io/os": "linux", "pool": "system"}},
		{"an OS named", map[string]interface{}{"nodeSelector": map[string]interface{}{"kubernetes.io/os": "linux-custom"}},
			map[string]string{"kubernetes.io/os": "linux-custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(c, tc.vals)
			if err != nil {
				t.Fatal(err)
			}
			pods := 0
			for _, m := range out.All() {
				u := map[string]interface{}{}
				if err := yaml.Unmarshal([]byte(m.Content), &u); err != nil {
					t.Fatal(err)
				}
				var spec map[string]interface{}
				switch u["kind"] {
				case "Deployment":
					spec, _, _ = unstructuredMap(u, "spec", "template", "spec")
				case "Pod":
					spec, _, _ = unstructuredMap(u, "spec")
				default:
					continue
				}
				pods++
				got := map[string]string{}
				if ns, ok := spec["nodeSelector"].(map[string]interface{}); ok {
					for k, v := range ns {
						got[k] = fmt.Sprint(v)
					}
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s %v: nodeSelector %v, want %v", u["kind"], u["metadata"], got, tc.want)
				}
			}
			if pods != 2 {
				t.Errorf("found %d pod templates, want the controller's and the helm test's", pods)
			}
		})
	}
}

// unstructuredMap is the map at path in u.
func unstructuredMap(u map[string]interface{}, path ...string) (map[string]interface{}, bool, error) {
	return unstructured.NestedMap(u, path...)
}

// controller.extraArgs may add flags but never repeat one the chart renders
// from its values (the last of two wins): every rendered flag, in each form
// Go's flag package reads, is refused at render with a message naming it.
func TestExtraArgsRepeatNoRenderedFlag(t *testing.T) {
	c := loadChart(t)
	rendered := flags(t, deployment(t, render(t, c, "defaults")))
	if len(rendered) < 30 {
		t.Fatalf("only %d flags rendered by default", len(rendered))
	}
	for flag := range rendered {
		name := strings.TrimPrefix(flag, "--")
		for _, extra := range [][]interface{}{{flag + "=x"}, {"-" + name + "=x"}, {flag, "x"}, {"-" + name}} {
			_, err := Render(c, map[string]interface{}{"controller": map[string]interface{}{"extraArgs": extra}})
			if err == nil || !strings.Contains(err.Error(), "repeats "+flag+", which the chart sets from its values") {
				t.Errorf("extraArgs %q: %v", extra, err)
			}
		}
	}
	if _, err := Render(c, map[string]interface{}{"controller": map[string]interface{}{
		"extraArgs": []interface{}{"--kube-api-qps=50", "--v=2"}}}); err != nil {
		t.Errorf("flags the chart does not render are refused: %v", err)
	}
}

// Cases whose Deployment flags must differ from the defaults in just these.
func TestFlagsPerCase(t *testing.T) {
	c := loadChart(t)
	base := flags(t, deployment(t, render(t, c, "defaults")))
	tests := map[string]map[string]string{
		"retention-retain": {"--job-retention-policy": "retain"},
		"legacy-retain":    {"--job-retention-policy": "retain"},
		"legacy-upstream": {
			"--image-pull-deadline-duration":  "10m",
			"--image-cache-refresh-frequency": "0s",
			"--image-pull-policy":             "Always",
			"--service-account-name":          "puller",
			"--image-delete-job-host-network": "true",
			"--job-priority-class-name":       "low-priority",
			"--job-retention-policy":          "retain",
			"--cri-socket-path":               "/run/k3s/containerd/containerd.sock",
			"--zap-log-level":                 "debug",
			"--webhook-cert-secret":           "kubefledged-webhook-server",
			"--webhook-service":               "kubefledged-webhook-server",
			"--webhook-configuration":         "kubefledged-webhook",
		},
		// The original's own defaults are ours, and its null names leave
		// ours in place.
		"legacy-upstream-defaults": {},
		"legacy-mirror": {
			"--zap-log-level":                "error",
			"--image-pull-deadline-duration": "2m",
			"--enable-webhook":               "false",
			"--helper-image":                 "registry.example.com/mirror/kubefledged:v0.11.0",
		},
		"new-keys-win": {
			"--job-retention-policy":         "retain",
			"--image-pull-deadline-duration": "1m",
			"--webhook-service":              "new-webhook",
		},
		"job-flags": {
			"--image-pull-deadline-duration":  "1h30m",
			"--image-cache-refresh-frequency": "0",
			"--image-pull-policy":             "Always",
			"--service-account-name":          "image-puller",
			"--image-delete-job-host-network": "true",
			"--job-priority-class-name":       "batch-low",
			"--cri-socket-path":               "/var/run/crio/crio.sock",
			"--helper-image":                  "registry.example.com/kubefledged:debug",
			"--max-concurrent-jobs":           "20",
			"--max-concurrent-jobs-per-node":  "1",
			"--pull-job-granularity":          "image",
			"--install-claim":                 "infra/kubefledged",
			"--job-cpu-request":               "20m",
			"--job-cpu-limit":                 "0.5",
			"--job-memory-limit":              "128Mi",
			"--zap-log-level":                 "debug",
			"--health-probe-bind-address":     ":9081",
			"--kube-api-qps":                  "50",
		},
		"startup-taint": {
			"--node-startup-taint":         "kubefledged.io/caching:NoSchedule",
			"--node-startup-taint-timeout": "15m",
		},
		"leader-election":     {"--leader-election-namespace": "kube-system"},
		"leader-election-off": {"--leader-elect": "false"},
		"metrics-disabled":    {"--metrics-bind-address": "0"},
		"metrics-servicemonitor": {
			"--metrics-bind-address": ":9090",
		},
		"webhook-disabled": {"--enable-webhook": "false"},
		"webhook-external": {
			"--webhook-cert-management": "external",
			"--webhook-cert-secret":     "my-webhook-tls",
			"--webhook-port":            "10250",
			"--webhook-cert-dir":        "/certs",
		},
		"webhook-certmanager":        {"--webhook-cert-management": "external"},
		"webhook-certmanager-issuer": {"--webhook-cert-management": "external"},
		"image-digest": {
			"--helper-image": "registry.example.com/kubefledged:v9.9.9@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		},
		"image-mirror": {
			"--helper-image": "mirror.example.com/airgap/kubefledged:v0.11.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		},
		"image-reference": {
			"--helper-image": "registry.example.com/kubefledged@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		},
		"names": {
			"--delete-job-service-account": "fledged-delete",
			"--webhook-cert-secret":        "fledged-webhook-cert",
			"--webhook-service":            "fledged-webhook",
			"--webhook-configuration":      "fledged",
		},
		"webhook-names": {
			"--webhook-cert-secret":   "fledged-cert",
			"--webhook-service":       "fledged-webhook",
			"--webhook-configuration": "fledged.example.com",
		},
		"webhook-existing-objects": {
			"--webhook-cert-secret":   "shared-cert",
			"--webhook-service":       "shared-webhook",
			"--webhook-configuration": "shared-vwc",
		},
	}
	for name, diff := range tests {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{}
			for k, v := range base {
				want[k] = v
			}
			for k, v := range diff {
				want[k] = v
			}
			got := flags(t, deployment(t, render(t, c, name)))
			if !reflect.DeepEqual(got, want) {
				for k := range want {
					if got[k] != want[k] {
						t.Errorf("%s = %q, want %q", k, got[k], want[k])
					}
				}
				for k := range got {
					if _, ok := want[k]; !ok {
						t.Errorf("unexpected flag %s=%q", k, got[k])
					}
				}
			}
		})
	}
}

// An air-gapped install sets image.repository and image.digest (the
// image-mirror case): every image of the release, the controller's, the
// Jobs' helper (--helper-image) and the `helm test` pod's, must then be the
// mirror's, and the upstream repository named nowhere, or a disconnected
// cluster would try to pull it.
func TestImageMirrorEverywhere(t *testing.T) {
	r := render(t, loadChart(t), "image-mirror")
	const mirror = "mirror.example.com/airgap/kubefledged:v0.11.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	images := 0
	for _, m := range r.All() {
		for i, line := range strings.Split(m.Content, "\n") {
			if strings.Contains(line, "ghcr.io/kubefledged/kubefledged") {
				t.Errorf("%s line %d names the upstream image: %s", m.Name, i+1, strings.TrimSpace(line))
			}
			if img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
				images++
				if strings.Trim(img, `"`) != mirror {
					t.Errorf("%s line %d: image %s, want the mirror's %s", m.Name, i+1, img, mirror)
				}
			}
		}
	}
	// The controller's container and the test pod's.
	if images < 2 {
		t.Errorf("%d images rendered, want the controller's and the test pod's at least", images)
	}
}

func TestObjectsPerCase(t *testing.T) {
	c := loadChart(t)
	count := func(r Rendered, kind string) int { return len(r.Find(kind, "")) }
	t.Run("defaults", func(t *testing.T) {
		r := render(t, c, "defaults")
		for kind, n := range map[string]int{
			"ServiceAccount": 2, "ClusterRole": 3, "ClusterRoleBinding": 2, "Role": 3, "RoleBinding": 3,
			"Service": 1, "ValidatingWebhookConfiguration": 1, "PodDisruptionBudget": 0, "ServiceMonitor": 0,
			"Certificate": 0, "Issuer": 0,
		} {
			if got := count(r, kind); got != n {
				t.Errorf("%s: got %d, want %d", kind, got, n)
			}
		}
		// Self mode must leave caBundle to the controller.
		vwc := r.Find("ValidatingWebhookConfiguration", "")[0].Content
		if strings.Contains(vwc, "caBundle") {
			t.Errorf("self mode renders a caBundle:\n%s", vwc)
		}
		// Only the controller's ServiceAccount is bound (the original also
		// bound the group system:nodes), and the delete Jobs' one to
		// OpenShift's privileged SCC alone.
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, m := range r.Find(kind, "") {
				b := &rbacv1.RoleBinding{}
				if err := yaml.Unmarshal([]byte(m.Content), b); err != nil {
					t.Fatal(err)
				}
				want := "kubefledged-controller"
				if b.Name == "kubefledged-delete" {
					want = "kubefledged-delete"
				}
				if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != want {
					t.Errorf("%s %s binds %+v", kind, b.Name, b.Subjects)
				}
			}
		}
		scc := one[rbacv1.ClusterRole](t, r.Find("ClusterRole", "kubefledged-delete"), "ClusterRole")
		if !reflect.DeepEqual(scc.Rules, []rbacv1.PolicyRule{{APIGroups: []string{"security.openshift.io"},
			Resources: []string{"securitycontextconstraints"}, ResourceNames: []string{"privileged"}, Verbs: []string{"use"}}}) {
			t.Errorf("the delete Jobs' ClusterRole grants %+v, want use of the privileged SCC only", scc.Rules)
		}
		sa := one[corev1.ServiceAccount](t, r.Find("ServiceAccount", "kubefledged-delete"), "ServiceAccount")
		if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Error("the delete Jobs' ServiceAccount mounts its token")
		}
	})
	t.Run("legacy-upstream", func(t *testing.T) {
		r := render(t, c, "legacy-upstream")
		d := deployment(t, r)
		if *d.Spec.Replicas != 2 {
			t.Errorf("controllerReplicaCount ignored: replicas %d", *d.Spec.Replicas)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/kubefledged/kubefledged:v0.11.0" {
			t.Errorf("the original's public image must not replace ours: %s", img)
		}
		if p := d.Spec.Template.Spec.Containers[0].ImagePullPolicy; p != corev1.PullAlways {
			t.Errorf("image.pullPolicy: %s", p)
		}
		if count(r, "PodDisruptionBudget") != 1 {
			t.Error("two replicas need a PodDisruptionBudget")
		}
		for _, s := range []string{"webhookServerReplicaCount", "image.kubefledgedCRIClientRepository", "image.kubefledgedControllerRepository", "args.webhookServerPort", "command"} {
			if !strings.Contains(r.Notes, s) {
				t.Errorf("notes do not explain that %s is ignored:\n%s", s, r.Notes)
			}
		}
	})
	// The original chart shipped its name keys null: a file passed as it is
	// names every object as the chart's defaults do, none of them empty.
	t.Run("legacy-upstream-defaults", func(t *testing.T) {
		kindNames := func(r Rendered) []string {
			var out []string
			for _, m := range r.All() {
				out = append(out, m.Head.Kind+"/"+m.Head.Metadata.Name)
			}
			slices.Sort(out)
			return out
		}
		got, want := kindNames(render(t, c, "legacy-upstream-defaults")), kindNames(render(t, c, "defaults"))
		if !slices.Equal(got, want) {
			t.Errorf("objects %v, want those of the defaults %v", got, want)
		}
	})
	t.Run("legacy-mirror", func(t *testing.T) {
		r := render(t, c, "legacy-mirror")
		d := deployment(t, r)
		if *d.Spec.Replicas != 2 {
			t.Errorf("replicaCount ignored: %d", *d.Spec.Replicas)
		}
		if !d.Spec.Template.Spec.HostNetwork || d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
			t.Errorf("webhookServer pod settings not applied to the controller pods")
		}
		if count(r, "ValidatingWebhookConfiguration")+count(r, "Service") != 0 {
			t.Error("webhookServer.enable=false must drop the webhook")
		}
	})
	t.Run("new-keys-win", func(t *testing.T) {
		d := deployment(t, render(t, c, "new-keys-win"))
		if *d.Spec.Replicas != 3 {
			t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
		}
	})
	t.Run("serviceaccount-existing", func(t *testing.T) {
		r := render(t, c, "serviceaccount-existing")
		if count(r, "ServiceAccount") != len(r.Find("ServiceAccount", "kubefledged-delete")) {
			t.Error("create: false still creates a ServiceAccount")
		}
		if sa := deployment(t, r).Spec.Template.Spec.ServiceAccountName; sa != "kubefledged-sa" {
			t.Errorf("Deployment uses %q", sa)
		}
		for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
			for _, m := range r.Find(kind, "") {
				if m.Head.Metadata.Name == "kubefledged-delete" {
					continue
				}
				b := one[rbacv1.RoleBinding](t, []releaseutil.Manifest{m}, kind)
				if len(b.Subjects) != 1 || b.Subjects[0].Name != "kubefledged-sa" {
					t.Errorf("%s %s does not bind kubefledged-sa: %+v", kind, m.Head.Metadata.Name, b.Subjects)
				}
			}
		}
	})
	t.Run("serviceaccount-default", func(t *testing.T) {
		if sa := deployment(t, render(t, c, "serviceaccount-default")).Spec.Template.Spec.ServiceAccountName; sa != "default" {
			t.Errorf("Deployment uses %q", sa)
		}
	})
	// Nodes are written only to remove the startup taint: the right to
	// patch them comes with it, and not otherwise.
	t.Run("startup-taint", func(t *testing.T) {
		patchesNodes := func(name string) bool {
			role := one[rbacv1.ClusterRole](t, render(t, c, name).Find("ClusterRole", "kubefledged-controller"), "ClusterRole")
			for _, rule := range role.Rules {
				if slices.Contains(rule.Resources, "nodes") && slices.Contains(rule.Verbs, "patch") {
					return true
				}
			}
			return false
		}
		if !patchesNodes("startup-taint") {
			t.Error("the startup taint needs the right to patch nodes")
		}
		if patchesNodes("defaults") {
			t.Error("without the startup taint the controller must not be able to patch nodes")
		}
	})
	t.Run("rbac-off", func(t *testing.T) {
		r := render(t, c, "rbac-off")
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			if count(r, kind) != 0 {
				t.Errorf("%s rendered", kind)
			}
		}
	})
	t.Run("clusterrole-existing", func(t *testing.T) {
		r := render(t, c, "clusterrole-existing")
		if count(r, "ClusterRole") != len(r.Find("ClusterRole", "kubefledged-delete")) {
			t.Error("ClusterRole rendered")
		}
		b := one[rbacv1.ClusterRoleBinding](t, r.Find("ClusterRoleBinding", "kubefledged-binding"), "ClusterRoleBinding")
		if b.RoleRef.Name != "shared-kubefledged" {
			t.Errorf("binding does not reference the existing ClusterRole: %+v", b.RoleRef)
		}
	})
	t.Run("webhook-external", func(t *testing.T) {
		r := render(t, c, "webhook-external")
		vwc := one[admissionregistrationv1.ValidatingWebhookConfiguration](t, r.Find("ValidatingWebhookConfiguration", ""), "ValidatingWebhookConfiguration")
		if ca := vwc.Webhooks[0].ClientConfig.CABundle; !strings.HasPrefix(string(ca), "-----BEGIN CERTIFICATE-----") {
			t.Errorf("external caBundle missing: %q", ca)
		}
		if len(r.Find("Role", "kubefledged-webhook-cert")) != 0 {
			t.Error("external mode needs no Secret rights")
		}
	})
	t.Run("webhook-certmanager", func(t *testing.T) {
		r := render(t, c, "webhook-certmanager")
		if count(r, "Certificate") != 1 || count(r, "Issuer") != 1 {
			t.Error("want a Certificate and a self-signed Issuer")
		}
		vwc := one[admissionregistrationv1.ValidatingWebhookConfiguration](t, r.Find("ValidatingWebhookConfiguration", ""), "ValidatingWebhookConfiguration")
		if vwc.Annotations["cert-manager.io/inject-ca-from"] != "kube-fledged/kubefledged-webhook" || vwc.Webhooks[0].ClientConfig.CABundle != nil {
			t.Errorf("cainjector annotation missing or caBundle rendered: %v %q", vwc.Annotations, vwc.Webhooks[0].ClientConfig.CABundle)
		}
	})
	t.Run("webhook-existing-objects", func(t *testing.T) {
		r := render(t, c, "webhook-existing-objects")
		if count(r, "ValidatingWebhookConfiguration")+count(r, "Service") != 0 {
			t.Error("create: false still renders webhook objects")
		}
		if !strings.Contains(r.Find("ClusterRole", "")[0].Content, `resourceNames: ["shared-vwc"]`) {
			t.Error("ClusterRole does not name the existing configuration")
		}
	})
	t.Run("replicas", func(t *testing.T) {
		r := render(t, c, "replicas")
		if p := one[policyv1.PodDisruptionBudget](t, r.Find("PodDisruptionBudget", ""), "PodDisruptionBudget"); p.Spec.MinAvailable == nil || p.Spec.MinAvailable.String() != "50%" {
			t.Errorf("PodDisruptionBudget minAvailable %v, want 50%%", p.Spec.MinAvailable)
		}
	})
	t.Run("replicas-no-pdb", func(t *testing.T) {
		if count(render(t, c, "replicas-no-pdb"), "PodDisruptionBudget") != 0 {
			t.Error("disabled PodDisruptionBudget rendered")
		}
	})
	t.Run("metrics", func(t *testing.T) {
		r := render(t, c, "metrics-servicemonitor")
		if len(r.Find("ServiceMonitor", "")) != 1 || len(r.Find("Service", "kubefledged-metrics")) != 1 {
			t.Error("ServiceMonitor needs itself and a metrics Service")
		}
		if count(render(t, c, "metrics-disabled"), "ServiceMonitor") != 0 {
			t.Error("ServiceMonitor without metrics")
		}
	})
	t.Run("host-network", func(t *testing.T) {
		p := deployment(t, render(t, c, "host-network")).Spec.Template.Spec
		if !p.HostNetwork || p.DNSPolicy != corev1.DNSClusterFirstWithHostNet || p.PriorityClassName != "system-cluster-critical" {
			t.Errorf("hostNetwork %v dnsPolicy %q priorityClassName %q", p.HostNetwork, p.DNSPolicy, p.PriorityClassName)
		}
	})
	t.Run("leader-election", func(t *testing.T) {
		r := render(t, c, "leader-election")
		if role := one[rbacv1.Role](t, r.Find("Role", "kubefledged-leader-election"), "Role"); role.Namespace != "kube-system" {
			t.Errorf("leader election Role in %q, not kube-system", role.Namespace)
		}
		if len(render(t, c, "leader-election-off").Find("Role", "kubefledged-leader-election")) != 0 {
			t.Error("Lease rights without leader election")
		}
	})
}

// Bad values must fail at install with a message naming the key.
func TestSchemaRefusesBadValues(t *testing.T) {
	c := loadChart(t)
	tests := []struct {
		name string
		vals string
		want []string
	}{
		{"retention keep", "controller: {jobRetentionPolicy: keep}", []string{"/controller/jobRetentionPolicy", "'delete', 'retain'"}},
		{"retention case", "controller: {jobRetentionPolicy: Retain}", []string{"/controller/jobRetentionPolicy"}},
		{"legacy retention keep", "args: {controllerJobRetentionPolicy: keep}", []string{"/args/controllerJobRetentionPolicy"}},
		{"duration", "controller: {imagePullDeadlineDuration: 5 minutes}", []string{"/controller/imagePullDeadlineDuration"}},
		{"duration number", "controller: {imageCacheRefreshFrequency: 15}", []string{"/controller/imageCacheRefreshFrequency", "string"}},
		{"legacy duration", "args: {controllerImagePullDeadlineDuration: soon}", []string{"/args/controllerImagePullDeadlineDuration"}},
		{"pull policy", "controller: {imagePullPolicy: Never}", []string{"/controller/imagePullPolicy"}},
		{"replicas zero", "controller: {replicaCount: 0}", []string{"/controller/replicaCount", "minimum"}},
		{"replicas text", "controller: {replicaCount: two}", []string{"/controller/replicaCount"}},
		{"replicas fraction", "controller: {replicaCount: 1.5}", []string{"/controller/replicaCount"}},
		{"legacy replicas zero", "controllerReplicaCount: 0", []string{"/controllerReplicaCount"}},
		{"max jobs", "controller: {maxConcurrentJobs: 0}", []string{"/controller/maxConcurrentJobs"}},
		{"log level", "controller: {logLevel: verbose}", []string{"/controller/logLevel"}},
		{"cert management", "webhook: {certManagement: manual}", []string{"/webhook/certManagement"}},
		{"pdb text", "podDisruptionBudget: {minAvailable: half}", []string{"/podDisruptionBudget/minAvailable"}},
		{"pdb negative", "podDisruptionBudget: {minAvailable: -1}", []string{"/podDisruptionBudget/minAvailable"}},
		{"typo", "controler: {replicaCount: 2}", []string{"controler"}},
		{"nested typo", "controller: {jobRetentionPolcy: retain}", []string{"jobRetentionPolcy"}},
		{"leader election off with replicas", "controller: {replicaCount: 2, leaderElect: false}", []string{"leaderElect"}},
		{"issuer without name", "webhook: {certManager: {enabled: true, issuerRef: {kind: ClusterIssuer}}}", []string{"issuerRef"}},
		{"failure ratio above 1", "prometheusRule: {pullFailureRatio: 2}", []string{"/prometheusRule/pullFailureRatio"}},
		{"alert window without unit", "prometheusRule: {window: 60}", []string{"/prometheusRule/window"}},
		{"alert wait in words", "prometheusRule: {downFor: five minutes}", []string{"/prometheusRule/downFor"}},
		{"prometheus duration", "prometheusRule: {cacheFailingFor: 1d}", []string{"/prometheusRule/cacheFailingFor"}},
		{"dashboard typo", "grafanaDashboard: {enable: true}", []string{"enable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]interface{}{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := Render(c, vals)
			if err == nil {
				t.Fatalf("%s: accepted", tt.vals)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// helm lint must be clean for the defaults and for every case.
func TestLint(t *testing.T) {
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			vals, err := ReadValues(filepath.Join("testdata", name+".values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			kv := &chartutil.KubeVersion{Version: "v1.35.0", Major: "1", Minor: "35"}
			linter := lint.AllWithKubeVersion(ChartDir(), vals, Namespace, kv)
			for _, m := range linter.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}
