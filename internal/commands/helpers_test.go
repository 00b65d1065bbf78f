package commands

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubefledged/kube-fledged/api/v1alpha2"
	"github.com/kubefledged/kube-fledged/internal/jobs"
	"github.com/kubefledged/kube-fledged/internal/pin"
	"github.com/kubefledged/kube-fledged/internal/pin/containerdpin/containerdtest"
)

const (
	cacheUID  = "6f0c1d2e-0000-4000-8000-000000000001"
	nginxTag  = "docker.io/library/nginx:1.27"
	nginxID   = "sha256:4444444444444444444444444444444444444444444444444444444444444444"
	managedBy = "io.cri-containerd.image"
)

// nodeWithNginx is a containerd 1.7 with nginx:1.27 as its CRI plugin keeps
// it: a tag record and an id record.
func nodeWithNginx() *containerdtest.Runtime {
	img := &runtimeapi.Image{Id: nginxID, RepoTags: []string{nginxTag}}
	return &containerdtest.Runtime{
		Version: "1.7.32",
		CRI:     map[string]*runtimeapi.Image{"nginx:1.27": img, nginxTag: img},
		Records: map[string]map[string]string{nginxTag: {managedBy: "managed"}, nginxID: {managedBy: "managed"}},
	}
}

func pinnedBy(owner string) map[string]string {
	return map[string]string{managedBy: "managed", pin.RuntimeLabel: pin.RuntimeValue,
		pin.SetByUsLabel: pin.SetByUsValue, pin.OwnerLabel(owner): pin.OwnerValue}
}

// TestPinHelpers runs pin and unpin as a Job's container runs them and
// reads back what the controller reads: the exit code and the report in the
// termination log.
func TestPinHelpers(t *testing.T) {
	tests := []struct {
		name       string
		cmd        string
		containerd bool
		pinned     bool // nginx pinned by us before the command
		images     []string
		wantCode   int
		wantReport pin.Report
		wantErr    string
		wantLabels map[string]string // of both nginx records after
	}{
		{name: "pin", cmd: "pin", containerd: true, images: []string{"nginx:1.27"}, wantLabels: pinnedBy(cacheUID)},
		{name: "pin an image the node lacks: absent, not a failure", cmd: "pin", containerd: true,
			images: []string{"nginx:1.27", "redis:7"}, wantReport: pin.Report{Absent: []string{"redis:7"}}, wantLabels: pinnedBy(cacheUID)},
		{name: "unpin", cmd: "unpin", containerd: true, pinned: true, images: []string{"nginx:1.27"},
			wantLabels: map[string]string{managedBy: "managed"}},
		{name: "no containerd API: unsupported, exit 1", cmd: "pin", images: []string{"nginx:1.27"}, wantCode: 1,
			wantReport: pin.Report{Unsupported: "the runtime serves no containerd API on this socket (unknown service containerd.services.version.v1.Version): only containerd 1.7 or newer can pin"},
			wantErr:    "kubefledged pin: the runtime serves no containerd API", wantLabels: map[string]string{managedBy: "managed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rt := nodeWithNginx()
			if tc.pinned {
				rt.Records[nginxTag], rt.Records[nginxID] = pinnedBy(cacheUID), pinnedBy(cacheUID)
			}
			termLog := filepath.Join(t.TempDir(), "termination-log")
			args := []string{tc.cmd, "--endpoint=" + containerdtest.Serve(t, rt, tc.containerd),
				"--owner=" + cacheUID, "--termination-log=" + termLog}
			for _, img := range tc.images {
				args = append(args, "--image="+img)
			}
			var out, errb bytes.Buffer
			g.Expect(Main(args, &out, &errb)).To(Equal(tc.wantCode), errb.String())
			g.Expect(errb.String()).To(ContainSubstring(tc.wantErr))
			msg, err := os.ReadFile(termLog)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strings.Count(string(msg), "\n")).To(BeZero(), "one line")
			report, err := pin.ParseReport(string(msg))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(report).To(Equal(tc.wantReport))
			g.Expect(rt.Records[nginxTag]).To(Equal(tc.wantLabels))
			g.Expect(rt.Records[nginxID]).To(Equal(tc.wantLabels))
		})
	}
}

func TestCRIRemoveUnpinsFirst(t *testing.T) {
	tests := []struct {
		name       string
		removeErr  error
		wantCode   int
		wantMsg    string
		wantLabels map[string]string // nil: the record is gone
	}{
		{name: "removed: the records and their labels are gone", wantMsg: "removed"},
		{name: "removal refused: the image stays, unpinned", removeErr: status.Error(codes.FailedPrecondition, "image is in use by a container"),
			wantCode: 1, wantMsg: "image is in use by a container", wantLabels: map[string]string{managedBy: "managed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			rt := nodeWithNginx()
			rt.Records[nginxTag], rt.Records[nginxID] = pinnedBy(cacheUID), pinnedBy(cacheUID)
			rt.RemoveErr = tc.removeErr
			termLog := filepath.Join(t.TempDir(), "termination-log")
			var out, errb bytes.Buffer
			code := Main([]string{"cri-rmi", "--endpoint=" + containerdtest.Serve(t, rt, true), "--image=nginx:1.27",
				"--unpin-owner=" + cacheUID, "--termination-log=" + termLog}, &out, &errb)
			g.Expect(code).To(Equal(tc.wantCode), errb.String())
			msg, err := os.ReadFile(termLog)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(msg)).To(ContainSubstring(tc.wantMsg))
			if tc.wantLabels == nil {
				g.Expect(rt.Records).NotTo(HaveKey(nginxTag))
				return
			}
			g.Expect(rt.Records[nginxTag]).To(Equal(tc.wantLabels))
			g.Expect(rt.Records[nginxID]).To(Equal(tc.wantLabels))
		})
	}
}

// Our cache's pin goes, but another cache's keeps the image on the node:
// the delete exits 0 and leaves the report the controller reads into
// status.kept.
func TestCRIRemoveKeepsWhatAnotherCachePins(t *testing.T) {
	g := NewWithT(t)
	const other = "6f0c1d2e-0000-4000-8000-000000000002"
	rt := nodeWithNginx()
	both := pinnedBy(cacheUID)
	both[pin.OwnerLabel(other)] = pin.OwnerValue
	rt.Records[nginxTag], rt.Records[nginxID] = both, maps.Clone(both)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	var out, errb bytes.Buffer
	code := Main([]string{"cri-rmi", "--endpoint=" + containerdtest.Serve(t, rt, true), "--image=nginx:1.27",
		"--unpin-owner=" + cacheUID, "--termination-log=" + termLog}, &out, &errb)
	g.Expect(code).To(Equal(0), errb.String())
	msg, err := os.ReadFile(termLog)
	g.Expect(err).NotTo(HaveOccurred())
	reason, text, ok := jobs.ParseKept(string(msg))
	g.Expect(ok).To(BeTrue(), "termination log: %s", msg)
	g.Expect(reason).To(Equal(v1alpha2.KeptReasonPinned))
	g.Expect(text).To(ContainSubstring("is pinned on this node"))
	g.Expect(rt.Records).To(HaveKey(nginxTag), "the image another cache pins was removed")
	g.Expect(rt.Records[nginxTag]).NotTo(HaveKey(pin.OwnerLabel(cacheUID)), "our cache's pin stayed")
	g.Expect(rt.Records[nginxTag]).To(HaveKey(pin.OwnerLabel(other)))
}
