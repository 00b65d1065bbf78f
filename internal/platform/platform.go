// Package platform is the one list of the platforms our image is built for.
// hack/image builds exactly these, the plan leaves out a node whose
// architecture is not among them, and the bundle's CSV offers the operator
// on them: read from one place, the three cannot drift apart.
package platform

import (
	"fmt"
	"slices"
	"strings"
)

// Platform is an OCI platform: os, architecture and, for 32-bit ARM, the
// variant (the GOARM level the binary is built for).
type Platform struct {
	OS, Arch, Variant string
}

// String is the platform as docker, crane and the OCI index write it:
// linux/amd64, linux/arm/v7.
func (p Platform) String() string {
	if p.Variant != "" {
		return p.OS + "/" + p.Arch + "/" + p.Variant
	}
	return p.OS + "/" + p.Arch
}

// image is what Image returns. arm/v7 is the 32-bit ARM of the boards that
// run Kubernetes (Raspberry Pi 2 and later); Go has no cgo here, so every
// one is a plain cross-compile.
var image = []Platform{
	{OS: "linux", Arch: "amd64"},
	{OS: "linux", Arch: "arm64"},
	{OS: "linux", Arch: "arm", Variant: "v7"},
	{OS: "linux", Arch: "ppc64le"},
	{OS: "linux", Arch: "s390x"},
}

// Image returns the platforms our image holds, in the order of its index.
// It is a copy: no caller can change what the others read.
func Image() []Platform { return slices.Clone(image) }

// List is Image as a comma-separated list, the form of hack/image's
// -platforms flag.
func List() string {
	s := make([]string, len(image))
	for i, p := range image {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Arches returns the architectures of Image as the kubelet reports them in a
// node's kubernetes.io/arch label (Go's GOARCH: arm, not arm/v7).
func Arches() []string {
	var out []string
	for _, p := range image {
		if !slices.Contains(out, p.Arch) {
			out = append(out, p.Arch)
		}
	}
	return out
}

// HoldsArch says whether the image runs on a Linux node whose
// kubernetes.io/arch is arch. A node reports no variant: an arm node is
// taken to be ARMv7 or later, which every 32-bit ARM board that runs a
// current kubelet is.
func HoldsArch(arch string) bool {
	return slices.ContainsFunc(image, func(p Platform) bool { return p.Arch == arch })
}

// Parse reads a platform written as String writes it. Only Linux ones
// parse: our binaries are built for nothing else. A variant is accepted only
// where the build knows what it means (arm's v6 and v7, the GOARM levels).
func Parse(s string) (Platform, error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] != "linux" || parts[1] == "" {
		return Platform{}, fmt.Errorf("platform %q: want linux/ARCH or linux/arm/vN", s)
	}
	p := Platform{OS: parts[0], Arch: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
		if p.Arch != "arm" || (p.Variant != "v6" && p.Variant != "v7") {
			return Platform{}, fmt.Errorf("platform %q: only arm takes a variant, v6 or v7", s)
		}
	} else if p.Arch == "arm" {
		return Platform{}, fmt.Errorf("platform %q: arm needs its variant (linux/arm/v7): the index and GOARM must say the same", s)
	}
	return p, nil
}

// GOARM is the GOARM level the binary for p is built with, or "" when p is
// not 32-bit ARM.
func (p Platform) GOARM() string {
	if p.Arch != "arm" {
		return ""
	}
	return strings.TrimPrefix(p.Variant, "v")
}
