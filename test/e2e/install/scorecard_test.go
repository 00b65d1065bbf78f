package install_test

// The bundle's scorecard, run as OperatorHub's reviewers and preflight run
// it: `operator-sdk scorecard ./bundle` with the configuration `make bundle`
// writes into bundle/tests/scorecard, each test a pod on the real node.
// What differs, and why: the tests' image is not pulled from quay.io, which
// nothing here reaches, but built by hack/image from the scorecard-test
// program of the very operator-sdk module that wrote the configuration
// (bin/scorecard-test, hack/olm.mk), with a tar of ours for the init
// container that unpacks the bundle (hack/image/scorecard.go); the
// configuration is the checked-in one with only the image names rewritten
// to it.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubefledged/kube-fledged/test/framework"
)

const (
	// upstreamScorecardImage is the repository operator-sdk's configuration
	// names; the tag is operator-sdk's version.
	upstreamScorecardImage = "quay.io/operator-framework/scorecard-test"
	// scorecardRef is ours, in a registry the node mirrors.
	scorecardRef = "quay.io/kubefledged/scorecard-test"
	// scorecardWait bounds the whole run (--wait-time): the tests run in
	// parallel, each a pod whose image the first pull fetches.
	scorecardWait = 5 * time.Minute
)

// scorecardResults is the part of operator-sdk's `-o json` (a v1alpha3
// TestList) the test reads.
type scorecardResults struct {
	Items []struct {
		Spec struct {
			Image      string            `json:"image"`
			Entrypoint []string          `json:"entrypoint"`
			Labels     map[string]string `json:"labels"`
		} `json:"spec"`
		Status struct {
			Results []struct {
				Name        string   `json:"name"`
				State       string   `json:"state"`
				Errors      []string `json:"errors"`
				Suggestions []string `json:"suggestions"`
				Log         string   `json:"log"`
			} `json:"results"`
		} `json:"status"`
	} `json:"items"`
}

// TestScorecard runs every test of bundle/tests/scorecard/config.yaml
// against the checked-in bundle, in a namespace that enforces the
// restricted Pod Security profile (operator-sdk's --pod-security=restricted,
// as preflight runs it), and wants each to pass.
func TestScorecard(t *testing.T) {
	framework.NeedRealNode(t)
	sdk, scorecardTest := needScorecard(t)
	g := NewWithT(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), scorecardWait+5*time.Minute)
	defer cancel()
	// The test pods name no node, and on a kwok node they would never end.
	cordonOthers(t, k8s)

	version := strings.TrimPrefix(mustReadlink(t, scorecardTest), "scorecard-test-")
	ref := scorecardRef + ":" + version
	config, names := rewriteScorecardConfig(t, upstreamScorecardImage+":"+version, ref)
	if _, err := images.build(ctx, "scorecard", ref, "-test", scorecardTest); err != nil {
		t.Fatal(err)
	}
	t.Logf("scorecard image built and pushed in %s", time.Since(begin).Round(time.Millisecond))

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "scorecard-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	g.Expect(k8s.Create(ctx, nsObj)).To(Succeed())
	ns := nsObj.Name
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), nsObj) })
	// The tests run as the namespace's default ServiceAccount, which the
	// controller manager makes a moment after the namespace: a pod named
	// before it is refused.
	g.Eventually(func(g Gomega) {
		sa := &corev1.ServiceAccount{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, sa)).To(Succeed())
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())

	run := time.Now()
	cmd := exec.CommandContext(ctx, sdk, "scorecard", filepath.Join(repoDir, "bundle"),
		"--config", config, "--namespace", ns, "--kubeconfig", sb.KubeconfigPath(),
		"--untar-image", ref, "--pod-security", "restricted",
		"--wait-time", scorecardWait.String(), "--output", "json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// operator-sdk exits 1 when a test fails; the results say which.
	runErr := cmd.Run()
	t.Logf("operator-sdk scorecard ran in %s (%v)", time.Since(run).Round(time.Millisecond), runErr)
	var res scorecardResults
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("operator-sdk scorecard: %v; its output is not JSON (%v):\n%s\n%s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}

	ran := map[string]bool{}
	for _, item := range res.Items {
		test := item.Spec.Labels["test"]
		ran[test] = true
		if item.Spec.Image != ref {
			t.Errorf("%s ran %s, want %s", test, item.Spec.Image, ref)
		}
		if len(item.Status.Results) == 0 {
			t.Errorf("%s: no result", test)
		}
		for _, r := range item.Status.Results {
			if r.State != "pass" {
				t.Errorf("%s (%s): %s, errors %q, suggestions %q\n%s", test, r.Name, r.State, r.Errors, r.Suggestions, r.Log)
			} else {
				t.Logf("%s: pass", r.Name)
			}
		}
	}
	for _, n := range names {
		if !ran[n] {
			t.Errorf("%s is in the configuration but has no result", n)
		}
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("operator-sdk scorecard: %v, though every test passed:\n%s", runErr, stderr.Bytes())
	}
	t.Logf("scorecard: %d tests in %s, image build included", len(res.Items), time.Since(begin).Round(time.Millisecond))
}

// needScorecard is operator-sdk and scorecard-test from bin/, or skips
// (fails with KUBEFLEDGED_REALNODE_REQUIRED) naming what is missing.
func needScorecard(t *testing.T) (sdk, scorecardTest string) {
	t.Helper()
	bin := binDir(t)
	sdk, scorecardTest = filepath.Join(bin, "operator-sdk"), filepath.Join(bin, "scorecard-test")
	var missing []string
	for _, p := range []string{sdk, scorecardTest} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, filepath.Base(p))
		}
	}
	if len(missing) == 0 {
		return sdk, scorecardTest
	}
	msg := fmt.Sprintf("scorecard: %s missing in %s (make olm-tools olm-e2e-tools)", strings.Join(missing, ", "), bin)
	if os.Getenv(framework.RealNodeRequiredEnv) != "" {
		t.Fatal(msg + " (" + framework.RealNodeRequiredEnv + " is set)")
	}
	t.Skip(msg)
	return "", ""
}

// rewriteScorecardConfig writes the checked-in configuration with every
// test's image, which must be upstream's at want, set to ours; it returns
// the file and the tests' names (their "test" labels).
func rewriteScorecardConfig(t *testing.T, want, ours string) (string, []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoDir, "bundle", "tests", "scorecard", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	stages, _ := cfg["stages"].([]any)
	var names []string
	for _, s := range stages {
		stage, _ := s.(map[string]any)
		tests, _ := stage["tests"].([]any)
		for _, tt := range tests {
			test, _ := tt.(map[string]any)
			labels, _ := test["labels"].(map[string]any)
			name, _ := labels["test"].(string)
			if test["image"] != want {
				t.Fatalf("bundle/tests/scorecard: %s runs %v, want %s, the image of the operator-sdk bin/scorecard-test was built from (run make bundle)", name, test["image"], want)
			}
			test["image"] = ours
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatal("bundle/tests/scorecard/config.yaml names no test")
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return file, names
}

func mustReadlink(t *testing.T, p string) string {
	t.Helper()
	target, err := os.Readlink(p)
	if err != nil {
		t.Fatalf("%s: %v (bin/NAME links to NAME-VERSION; make olm-e2e-tools)", p, err)
	}
	return filepath.Base(target)
}
