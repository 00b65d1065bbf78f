package containerdpin

import (
	"context"
	"maps"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubefledged/kube-fledged/internal/pin"
	"github.com/kubefledged/kube-fledged/internal/pin/containerdpin/containerdtest"
)

const (
	owner   = "0b7a4f4e-0000-4000-8000-0000000000aa"
	other   = "0b7a4f4e-0000-4000-8000-0000000000bb"
	nginx   = "nginx:1.27"
	tag     = "docker.io/library/nginx:1.27"
	digest  = "docker.io/library/nginx@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	id      = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	pause   = "registry.k8s.io/pause:3.10"
	pauseID = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	managed = "io.cri-containerd.image"
)

// node has nginx:1.27 as CRI keeps it (three records: tag, repo digest, id)
// and the sandbox image, which containerd pinned itself.
func node() *containerdtest.Runtime {
	return &containerdtest.Runtime{
		Version: "v1.7.32",
		CRI: map[string]*runtimeapi.Image{
			nginx: {Id: id, RepoTags: []string{tag}, RepoDigests: []string{digest}},
			pause: {Id: pauseID, RepoTags: []string{pause}},
		},
		Records: map[string]map[string]string{
			tag: {managed: "managed"}, digest: {managed: "managed"}, id: {managed: "managed"},
			pause: {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue}, pauseID: {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue},
		},
	}
}

var (
	ours       = map[string]string{managed: "managed", pin.RuntimeLabel: pin.RuntimeValue, pin.SetByUsLabel: pin.SetByUsValue, pin.OwnerLabel(owner): pin.OwnerValue}
	untouched  = map[string]string{managed: "managed"}
	pauseAsWas = map[string]string{managed: "managed", pin.RuntimeLabel: pin.RuntimeValue}
)

// labelCase is one pin or unpin on a fake node: what the node holds first (change on
// node()), the report expected, and the labels of the records after it.
type labelCase struct {
	name    string
	change  func(*containerdtest.Runtime)
	images  []string
	want    pin.Report
	records map[string]map[string]string
	// noWrites: nothing on the node needed a change, so nothing was written.
	noWrites bool
}

func runLabelCases(t *testing.T, do func(context.Context, string, string, []string) pin.Report, tests []labelCase) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := node()
			if tc.change != nil {
				tc.change(r)
			}
			got := do(context.Background(), containerdtest.Serve(t, r, true), owner, tc.images)
			g.Expect(got).To(Equal(tc.want))
			for name, want := range tc.records {
				g.Expect(r.Records).To(HaveKeyWithValue(name, want), name)
			}
			if tc.noWrites {
				g.Expect(r.Updates).To(BeZero())
			}
		})
	}
}

func TestPin(t *testing.T) {
	tests := []labelCase{{
		name: "every record of the image is pinned; the CRI plugin's own label stays", images: []string{nginx},
		records: map[string]map[string]string{tag: ours, digest: ours, id: ours},
	}, {
		name: "an image somebody else pinned gets our owner label only", images: []string{pause},
		records: map[string]map[string]string{
			pause:   {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue, pin.OwnerLabel(owner): pin.OwnerValue},
			pauseID: {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue, pin.OwnerLabel(owner): pin.OwnerValue},
		},
	}, {
		name: "an image the runtime does not have is absent", images: []string{"nginx:1.28", nginx},
		want:    pin.Report{Absent: []string{"nginx:1.28"}},
		records: map[string]map[string]string{tag: ours},
	}, {
		name: "a record gone since CRI listed it is skipped", images: []string{nginx},
		change:  func(r *containerdtest.Runtime) { delete(r.Records, digest) },
		records: map[string]map[string]string{tag: ours, id: ours},
	}, {
		name: "every record gone: absent", images: []string{nginx},
		change: func(r *containerdtest.Runtime) {
			delete(r.Records, tag)
			delete(r.Records, digest)
			delete(r.Records, id)
		},
		want: pin.Report{Absent: []string{nginx}},
	}, {
		name: "containerd 1.6 ignores the label: unsupported, nothing written", images: []string{nginx},
		change:  func(r *containerdtest.Runtime) { r.Version = "1.6.20~ds1" },
		want:    pin.Report{Unsupported: "containerd 1.6.20~ds1 does not report pinned images to the kubelet: pinning needs containerd 1.7 or newer"},
		records: map[string]map[string]string{tag: untouched, digest: untouched, id: untouched},
	}, {
		name: "a refused update fails that image", images: []string{nginx},
		change: func(r *containerdtest.Runtime) { r.UpdateErr = status.Error(codes.Internal, "disk full") },
		want:   pin.Report{Failed: map[string]string{nginx: "image record sha256:2222222222222222222222222222222222222222222222222222222222222222: rpc error: code = Internal desc = disk full"}},
	}, {
		name: "another cache pins the same image between our read and our write", images: []string{nginx},
		change: func(r *containerdtest.Runtime) {
			r.Meddle = func(recs map[string]map[string]string) {
				recs[id][pin.OwnerLabel(other)] = pin.OwnerValue
				recs[id][pin.RuntimeLabel] = pin.RuntimeValue
				recs[id][pin.SetByUsLabel] = pin.SetByUsValue
			}
		},
		records: map[string]map[string]string{tag: ours, id: {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue,
			pin.SetByUsLabel: pin.SetByUsValue, pin.OwnerLabel(owner): pin.OwnerValue, pin.OwnerLabel(other): pin.OwnerValue}},
	}}
	runLabelCases(t, Pin, tests)
}

func TestUnpin(t *testing.T) {
	both := func(l map[string]string) map[string]string {
		l = maps.Clone(l)
		l[pin.OwnerLabel(other)] = pin.OwnerValue
		return l
	}
	pinnedByUs := func(r *containerdtest.Runtime) {
		for _, n := range []string{tag, digest, id} {
			r.Records[n] = maps.Clone(ours)
		}
	}
	tests := []labelCase{{
		name: "the last owner of our pin: every record is unpinned", images: []string{nginx}, change: pinnedByUs,
		records: map[string]map[string]string{tag: untouched, digest: untouched, id: untouched},
	}, {
		name: "another cache still pins it: only our owner label goes", images: []string{nginx},
		change: func(r *containerdtest.Runtime) {
			pinnedByUs(r)
			for _, n := range []string{tag, digest, id} {
				r.Records[n] = both(r.Records[n])
			}
		},
		records: map[string]map[string]string{tag: {managed: "managed", pin.RuntimeLabel: pin.RuntimeValue,
			pin.SetByUsLabel: pin.SetByUsValue, pin.OwnerLabel(other): pin.OwnerValue}},
	}, {
		name: "somebody else's pin stays", images: []string{pause},
		change: func(r *containerdtest.Runtime) {
			r.Records[pause][pin.OwnerLabel(owner)] = pin.OwnerValue
			r.Records[pauseID][pin.OwnerLabel(owner)] = pin.OwnerValue
		},
		records: map[string]map[string]string{pause: pauseAsWas, pauseID: pauseAsWas},
	}, {
		name: "two caches unpin at once: the last of them drops the runtime's pin", images: []string{nginx},
		change: func(r *containerdtest.Runtime) {
			pinnedByUs(r)
			r.Records[id] = both(r.Records[id])
			// The other cache's unpin read the record while we still
			// owned it, so it removed its owner label only.
			r.Meddle = func(recs map[string]map[string]string) { delete(recs[id], pin.OwnerLabel(other)) }
		},
		records: map[string]map[string]string{id: untouched},
	}, {
		name: "containerd 1.6: labels are removed all the same", images: []string{nginx},
		change:  func(r *containerdtest.Runtime) { pinnedByUs(r); r.Version = "1.6.20~ds1" },
		records: map[string]map[string]string{tag: untouched, digest: untouched, id: untouched},
	}, {
		name: "an image we never pinned: nothing written", images: []string{nginx}, noWrites: true,
		records: map[string]map[string]string{tag: untouched, digest: untouched, id: untouched},
	}}
	runLabelCases(t, Unpin, tests)
}

func TestNoContainerdAPI(t *testing.T) {
	for _, pinIt := range []bool{true, false} {
		g := NewWithT(t)
		r := node()
		got := apply(context.Background(), containerdtest.Serve(t, r, false), owner, []string{nginx}, pinIt)
		g.Expect(got.Unsupported).To(ContainSubstring("no containerd API"))
		g.Expect(got.Unsupported).To(ContainSubstring("containerd.services.version.v1.Version"))
		g.Expect(got.Absent).To(BeEmpty())
		g.Expect(got.Failed).To(BeEmpty())
		g.Expect(r.Records[tag]).To(Equal(untouched))
	}
}

func TestUnreachableOrMisused(t *testing.T) {
	tests := []struct {
		name, endpoint, owner, want string
	}{
		{name: "tcp", endpoint: "tcp://127.0.0.1:1", owner: owner, want: "only unix://"},
		{name: "no owner", endpoint: "unix:///nonexistent.sock", want: "no owner"},
		{name: "no socket", endpoint: "unix://" + filepath.Join(t.TempDir(), "none.sock"), owner: owner, want: "containerd version"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Pin(context.Background(), tc.endpoint, tc.owner, []string{nginx, pause})
			g.Expect(got.Failed).To(HaveLen(2))
			g.Expect(got.Failed[nginx]).To(ContainSubstring(tc.want))
			g.Expect(got.OK()).To(BeFalse())
		})
	}
}

func TestAtLeast17(t *testing.T) {
	for v, want := range map[string]bool{
		"v1.7.32": true, "1.7.0": true, "1.7.32+unknown": true, "v2.1.4": true, "1.10.0": true,
		"1.6.20~ds1": false, "v1.6.38": false, "1.5": false, "dev": true, "": true,
	} {
		if got := atLeast17(v); got != want {
			t.Errorf("atLeast17(%q) = %v, want %v", v, got, want)
		}
	}
}
