package results

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The messages are the runtimes' and registries' own, as the kubelet writes
// them into a waiting state (containerd 1.7 and 2.x, CRI-O, Docker Hub, GCR).
func TestClassifyPullMessage(t *testing.T) {
	cases := []struct {
		msg  string
		want PullError
	}{
		// Transient: rate limits, server errors, timeouts, cut connections.
		{`failed to pull and unpack image "docker.io/library/nginx:1.27": failed to resolve reference "docker.io/library/nginx:1.27": unexpected status from HEAD request to https://registry-1.docker.io/v2/library/nginx/manifests/1.27: 429 Too Many Requests`, Transient},
		{`rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/nginx:1.27": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/nginx/blobs/sha256:ab: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`, Transient},
		{`toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading`, Transient},
		{`failed to resolve reference "127.0.0.1:5000/a:1": unexpected status from HEAD request to http://127.0.0.1:5000/v2/a/manifests/1: 503 Service Unavailable`, Transient},
		{`failed to copy: httpReadSeeker: failed open: unexpected status code https://r/v2/a/blobs/sha256:ab: 500 Internal Server Error`, Transient},
		{`reading manifest 1 in quay.io/a: received unexpected HTTP status: 502 Bad Gateway`, Transient},
		{`unexpected status from GET request to https://r/v2/: 504 Gateway Timeout`, Transient},
		{`failed to do request: Head "https://r/v2/a/manifests/1": dial tcp 10.0.0.1:443: i/o timeout`, Transient},
		{`failed to do request: Head "https://r/v2/a/manifests/1": net/http: TLS handshake timeout`, Transient},
		{`failed to do request: Head "https://r/v2/a/manifests/1": read tcp 10.0.0.2:41234->10.0.0.1:443: read: connection reset by peer`, Transient},
		{`failed to do request: Head "https://r/v2/a/manifests/1": dial tcp 127.0.0.1:5000: connect: connection refused`, Transient},
		{`failed to copy: httpReadSeeker: failed open: failed to do request: Get "https://r/v2/a/blobs/sha256:ab": EOF`, Transient},
		{`failed to extract layer sha256:ab: unexpected EOF`, Transient},
		{`rpc error: code = DeadlineExceeded desc = context deadline exceeded`, Transient},
		{`Get "https://r/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`, Transient},
		{`Back-off pulling image "r/a:1": ErrImagePull: unexpected status from HEAD request to https://r/v2/a/manifests/1: 503 Service Unavailable`, Transient},
		{`failed to pull and unpack image "127.0.0.1:43659/small-h:v1": failed to resolve reference "127.0.0.1:43659/small-h:v1": pulling from host 127.0.0.1:43659 failed with status code [manifests v1]: 429 Too Many Requests`, Transient},
		{`failed to resolve reference "r/a:1": pulling from host r failed with status code [manifests 1]: 503 Service Unavailable`, Transient},
		// Permanent: missing, refused, malformed, no build for the node's platform.
		{`rpc error: code = Unknown desc = choosing image instance: no image found in manifest list for architecture "riscv64", variant "", OS "linux"`, Permanent},
		{`failed to pull and unpack image "r/a:1": no match for platform in manifest: not found`, Permanent},
		{`failed to resolve reference "r/a:1": pulling from host r failed with status code [manifests 1]: 403 Forbidden`, Permanent},
		{`rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nope:1": failed to resolve reference "docker.io/library/nope:1": docker.io/library/nope:1: not found`, Permanent},
		{`failed to pull and unpack image "r/a:1": failed to resolve reference "r/a:1": unexpected status from HEAD request to https://r/v2/a/manifests/1: 404 Not Found`, Permanent},
		{`reading manifest 1 in quay.io/a: manifest unknown: manifest unknown`, Permanent},
		{`failed to resolve reference "docker.io/private/a:1": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, Permanent},
		{`denied: requested access to the resource is denied`, Permanent},
		{`failed to resolve reference "r/a:1": unexpected status from HEAD request to https://r/v2/a/manifests/1: 401 Unauthorized`, Permanent},
		{`failed to resolve reference "r/a:1": unexpected status from HEAD request to https://r/v2/a/manifests/1: 403 Forbidden`, Permanent},
		{`unable to retrieve auth token: invalid username/password: unauthorized: authentication required`, Permanent},
		{`Error response from daemon: repository a not found: does not exist or no pull access`, Permanent},
		{`couldn't parse image name "r/A:1": invalid reference format: repository name must be lowercase`, Permanent},
		{`Back-off pulling image "r/a:1": ErrImagePull: rpc error: code = NotFound desc = r/a:1: not found`, Permanent},
		// Unknown: waited on like Transient.
		{`Back-off pulling image "r/a:1"`, Unknown},
		{`failed to do request: Head "https://r/v2/a/manifests/1": dial tcp: lookup r on 10.96.0.10:53: no such host`, Unknown},
		{``, Unknown},
		// "EOF" only as a word: not inside a name.
		{`failed to pull image "r/geofence:1"`, Unknown},
	}
	for _, c := range cases {
		t.Run(c.msg, func(t *testing.T) {
			NewWithT(t).Expect(ClassifyPullMessage(c.msg)).To(Equal(c.want))
		})
	}
}

func TestClassifyPull(t *testing.T) {
	g := NewWithT(t)
	rateLimited := `unexpected status from HEAD request to https://r/v2/a/manifests/1: 429 Too Many Requests`
	for _, c := range []struct {
		reason, msg string
		want        PullError
		ok          bool
	}{
		{"ErrImagePull", rateLimited, Transient, true},
		{"ImagePullBackOff", `Back-off pulling image "r/a:1": ErrImagePull: ` + rateLimited, Transient, true},
		{"ErrImagePull", "r/a:1: not found", Permanent, true},
		// The reason alone settles these, whatever the message.
		{"InvalidImageName", `Failed to apply default image tag "r/A:1": couldn't parse`, Permanent, true},
		{"ErrImageNeverPull", `Container image "r/a:1" is not present with pull policy of Never`, Permanent, true},
		{"ContainerCreating", "", Unknown, false},
		{"CreateContainerError", "not found", Unknown, false},
	} {
		got, ok := ClassifyPull(c.reason, c.msg)
		g.Expect(ok).To(Equal(c.ok), c.reason)
		g.Expect(got).To(Equal(c.want), c.reason+": "+c.msg)
	}
	g.Expect(Unknown.Heals()).To(BeTrue(), "an unknown error is waited on, as the original waited on every pull")
	g.Expect(Transient.Heals()).To(BeTrue())
	g.Expect(Permanent.Heals()).To(BeFalse())
}

// A Job per (image, node) is settled from its pod before its deadline the
// way a node Job's container is: at once on a permanent pull error, not on
// one that may heal.
func TestBeforeDeadline(t *testing.T) {
	rateLimited := `unexpected status from HEAD request to https://r/v2/a/manifests/1: 429 Too Many Requests`
	helper := func(reason, msg string) corev1.Pod {
		return pod(func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install-helper", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
		})
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		want Outcome
	}{
		{name: "no pod yet", want: Outcome{State: Pending}},
		{name: "pulling", pods: []corev1.Pod{waitingPod("ContainerCreating", "")}, want: Outcome{State: Pending}},
		{name: "not found fails at once", pods: []corev1.Pod{waitingPod("ErrImagePull", "rpc error: code = NotFound desc = r/a:1: not found")},
			want: Outcome{State: Failed, Reason: "ErrImagePull", Message: "rpc error: code = NotFound desc = r/a:1: not found"}},
		{name: "an invalid name fails at once", pods: []corev1.Pod{waitingPod("InvalidImageName", "bad")},
			want: Outcome{State: Failed, Reason: "InvalidImageName", Message: "bad"}},
		{name: "a rate limit waits", pods: []corev1.Pod{waitingPod("ErrImagePull", rateLimited)}, want: Outcome{State: Pending}},
		{name: "a back-off naming no error waits", pods: []corev1.Pod{waitingPod("ImagePullBackOff", `Back-off pulling image "r/a:1"`)}, want: Outcome{State: Pending}},
		{name: "a helper denied fails at once", pods: []corev1.Pod{helper("ErrImagePull", "pull access denied")},
			want: Outcome{State: Failed, Reason: "ErrImagePull", Message: "pull access denied"}},
		{name: "a helper rate limited waits", pods: []corev1.Pod{helper("ErrImagePull", rateLimited)}, want: Outcome{State: Pending}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			NewWithT(t).Expect(BeforeDeadline(c.pods)).To(Equal(c.want))
		})
	}
}

func TestPullFailing(t *testing.T) {
	g := NewWithT(t)
	g.Expect(PullFailing(ptr(waitingPod("ErrImagePull", "429 Too Many Requests")))).To(BeTrue())
	g.Expect(PullFailing(ptr(waitingPod("ImagePullBackOff", "")))).To(BeTrue())
	g.Expect(PullFailing(ptr(waitingPod("ContainerCreating", "")))).To(BeFalse())
	g.Expect(PullFailing(ptr(pod(nil)))).To(BeFalse())
}

func ptr[T any](v T) *T { return &v }

// CRI-O's and containerd's words for an image without a build for the
// node's platform fail the pair at once, with a reason that says so rather
// than the kubelet's ErrImagePull, which reads as a registry's fault.
func TestPullWaitPlatformMissing(t *testing.T) {
	g := NewWithT(t)
	for _, msg := range []string{
		`rpc error: code = Unknown desc = Error choosing image instance: no image found in manifest list for architecture "arm64", variant "v8", OS "linux"`,
		`failed to pull and unpack image "r/a:1": no match for platform in manifest: not found`,
	} {
		for _, expired := range []bool{false, true} {
			o, ok := pullWait(&corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: msg}, "Pod p", expired, nil)
			g.Expect(ok).To(BeTrue())
			g.Expect(o.State).To(Equal(Failed), msg)
			g.Expect(o.Reason).To(Equal(ReasonPlatformMissing))
			g.Expect(o.Message).To(And(HavePrefix(msg), HaveSuffix("(the image has no build for this node's OS and architecture)")))
		}
	}
	o, _ := pullWait(&corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "r/a:1: not found"}, "Pod p", false, nil)
	g.Expect(o.Reason).To(Equal("ErrImagePull"), "a missing tag keeps the kubelet's reason")
}
