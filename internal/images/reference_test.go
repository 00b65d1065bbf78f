package images

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "nginx", want: "docker.io/library/nginx:latest"},
		{in: "nginx:1.21", want: "docker.io/library/nginx:1.21"},
		{in: "docker.io/library/nginx:1.21", want: "docker.io/library/nginx:1.21"},
		{in: "quay.io/bitnami/nginx:1.21.1", want: "quay.io/bitnami/nginx:1.21.1"},
		{in: "127.0.0.1:5000/app:v1", want: "127.0.0.1:5000/app:v1"},
		{in: "busybox@sha256:" + sixtyFour, want: "docker.io/library/busybox@sha256:" + sixtyFour},
		{in: "busybox:1@sha256:" + sixtyFour, want: "docker.io/library/busybox:1@sha256:" + sixtyFour},
		{in: "", wantErr: true},
		{in: "NGINX", wantErr: true},
		{in: "nginx:", wantErr: true},
		{in: "nginx:a b", wantErr: true},
		{in: "http://nginx", wantErr: true},
		{in: "busybox@sha256:abc", wantErr: true},
		{in: "localhost:65535/app:v1", want: "localhost:65535/app:v1"},
		{in: "[::1]:5000/app:v1", want: "[::1]:5000/app:v1"},
		{in: "registry.example.com:99999999999/app:v1", wantErr: true},
		{in: "registry.example.com:65536/app:v1", wantErr: true},
		{in: "registry.example.com:0/app:v1", wantErr: true},
		{in: "[::1]:70000/app:v1", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Normalize(c.in)
			if c.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
		})
	}
}

const sixtyFour = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestFloating(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]bool{
		"nginx": true, "nginx:latest": true, "nginx:1.2": false,
		"nginx@sha256:" + sixtyFour: false, "nginx:latest@sha256:" + sixtyFour: false,
	} {
		r, err := Parse(in)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.Floating()).To(Equal(want), in)
	}
}

func TestPresentOn(t *testing.T) {
	node := &corev1.Node{Status: corev1.NodeStatus{Images: []corev1.ContainerImage{
		{Names: []string{"docker.io/library/nginx@sha256:" + sixtyFour, "docker.io/library/nginx:1.21"}},
		{Names: []string{"quay.io/app/mynginx:2.0"}},
	}}}
	cases := map[string]bool{
		"nginx:1.21":                   true,
		"docker.io/library/nginx:1.21": true,
		"nginx@sha256:" + sixtyFour:    true,
		"nginx:1.22":                   false,
		"nginx:1.2":                    false, // a substring match would say yes
		"mynginx:2.0":                  false, // other registry
		"quay.io/app/mynginx:2.0":      true,
		"quay.io/app/mynginx":          false,
		"nginx:9@sha256:" + sixtyFour:  true, // the digest decides
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			g := NewWithT(t)
			r, err := Parse(in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(PresentOn(node, r)).To(Equal(want))
		})
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"nginx", "a/b/c:d", "localhost:5000/x@sha256:" + sixtyFour, "UPPER", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			return
		}
		// Normalising is idempotent, and the result parses to the same image.
		n2, err := Normalize(n)
		if err != nil || n2 != n {
			t.Fatalf("Normalize(%q)=%q, again %q, %v", s, n, n2, err)
		}
	})
}
