package sandbox

import (
	"bytes"
	"embed"
	"fmt"
	"strings"
	"text/template"
	"time"
)

// NotReadyLabel on a fake node makes the kwok stages report it NotReady (and keep it so)
// instead of Ready; SetNodeReady and NodeSpec.NotReady set it.
const NotReadyLabel = "sandbox.kubefledged.io/not-ready"

// notReadyMessage is what a NotReady fake node's Ready condition says, from kwok's stage and
// from the node's first status alike: a kubelet whose runtime network is not up.
const notReadyMessage = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady (simulated by the kube-fledged sandbox)"

// stageFiles are the kwok Stage objects that replace a kubelet on the fake nodes: the stock
// v0.8.0 kustomize/stage stages (node fast + heartbeat-with-lease, pod fast) adjusted for:
//   - nodes labelled NotReadyLabel go and stay NotReady;
//   - the node heartbeat refreshes only conditions, so status.images set by SetNodeImages
//     survives (kwok sends a strategic merge patch, and images are not in it);
//   - pods get the pull delay, container IDs and `started`, and Jobs complete at once;
//   - pods with an image under FailPrefix go ErrImagePull, then ImagePullBackOff, and stay
//     Pending, as a kubelet does for an image that does not exist;
//   - pods with an image under RunFailPrefix crash: Failed, or CrashLoopBackOff;
//   - pods with an image under HangPrefix stay Pending, that container in ContainerCreating;
//   - pods with an image under FlakyPrefix go ErrImagePull and ImagePullBackOff with a 429,
//     then pull.
//
// They are Go templates with [[ ]] delimiters, because kwok's own templates inside them use
// {{ }}, which must reach kwok untouched.
//
//go:embed stages/kwok.yaml stages/selectors.tmpl stages/status.tmpl
var stageFiles embed.FS

// stages is parsed once; a template error is a defect of the files above, found by any test.
var stages = template.Must(newStageTemplate())

func newStageTemplate() (*template.Template, error) {
	t := template.New("kwok.yaml").Delims("[[", "]]").Option("missingkey=error")
	t.Funcs(template.FuncMap{
		"indent": indent,
		// include renders a named template into a string, so that it can be indented.
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := t.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"dict": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("dict: odd number of arguments")
			}
			m := make(map[string]any, len(kv)/2)
			for i := 0; i < len(kv); i += 2 {
				k, ok := kv[i].(string)
				if !ok {
					return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
				}
				m[k] = kv[i+1]
			}
			return m, nil
		},
	})
	return t.ParseFS(stageFiles, "stages/kwok.yaml", "stages/*.tmpl")
}

// stageValues are what the stage files take from the sandbox: the image prefixes that select
// the failing stages, the versions a node reports, and the timings.
type stageValues struct {
	NotReadyLabel, NotReadyMessage, FailPrefix, HangPrefix, RunFailPrefix, FlakyPrefix string
	RuntimeVersion, KubeletVersion                                                     string
	// NotFound and RateLimited are the runtime's errors of a FailPrefix and a FlakyPrefix
	// pull, as kwok's printf formats (%[1]s is the image) inside a quoted template string.
	NotFound, RateLimited string
	// HeartbeatMS and JitterMS delay the node heartbeat; PullDelayMS (0: none) every pull.
	HeartbeatMS, JitterMS, PullDelayMS int64
}

// stageConfig is the kwok --config file: a KwokConfiguration plus the stages.
func stageConfig(pullDelay, heartbeat time.Duration) string {
	hb := heartbeat.Milliseconds()
	var b strings.Builder
	err := stages.ExecuteTemplate(&b, "kwok.yaml", stageValues{
		NotReadyLabel:   NotReadyLabel,
		NotReadyMessage: notReadyMessage,
		FailPrefix:      FailPrefix,
		HangPrefix:      HangPrefix,
		RunFailPrefix:   RunFailPrefix,
		FlakyPrefix:     FlakyPrefix,
		NotFound:        `rpc error: code = NotFound desc = failed to pull and unpack image \"%[1]s\": not found`,
		RateLimited:     `rpc error: code = Unknown desc = failed to pull and unpack image \"%[1]s\": failed to resolve reference \"%[1]s\": unexpected status from HEAD request to https://flaky.invalid/v2/: 429 Too Many Requests`,
		RuntimeVersion:  defaultRuntimeVersion,
		KubeletVersion:  kubeletVersion,
		HeartbeatMS:     hb,
		JitterMS:        hb + hb/50 + 1,
		PullDelayMS:     pullDelay.Milliseconds(),
	})
	if err != nil {
		// The values are fixed fields, so this is a defect of the files, as above.
		panic(fmt.Sprintf("rendering the kwok stages: %v", err))
	}
	return b.String()
}

// indent puts n spaces before every non-empty line of s, to nest a kwok template in a YAML
// block scalar.
func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
