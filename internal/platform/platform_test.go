package platform

import (
	"slices"
	"strings"
	"testing"
)

// The issue asks for these five: the original's linux/arm among them.
func TestImage(t *testing.T) {
	want := []string{"linux/amd64", "linux/arm64", "linux/arm/v7", "linux/ppc64le", "linux/s390x"}
	if got := strings.Split(List(), ","); !slices.Equal(got, want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
	if got := Arches(); !slices.Equal(got, []string{"amd64", "arm64", "arm", "ppc64le", "s390x"}) {
		t.Errorf("Arches() = %v", got)
	}
	// What List writes, Parse reads back as Image.
	for i, s := range strings.Split(List(), ",") {
		p, err := Parse(s)
		if err != nil || p != Image()[i] {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, p, err, Image()[i])
		}
	}
	Image()[0].Arch = "changed"
	if Image()[0].Arch != "amd64" {
		t.Error("a caller changed the list the others read")
	}
}

func TestHoldsArch(t *testing.T) {
	for arch, want := range map[string]bool{
		"amd64": true, "arm64": true, "arm": true, "ppc64le": true, "s390x": true,
		"riscv64": false, "386": false, "mips64le": false, "arm/v7": false, "AMD64": false, "": false,
	} {
		if got := HoldsArch(arch); got != want {
			t.Errorf("HoldsArch(%q) = %v, want %v", arch, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	for s, want := range map[string]Platform{
		"linux/amd64":    {OS: "linux", Arch: "amd64"},
		" linux/arm/v7 ": {OS: "linux", Arch: "arm", Variant: "v7"},
		"linux/arm/v6":   {OS: "linux", Arch: "arm", Variant: "v6"},
	} {
		if got, err := Parse(s); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, bad := range []string{"", "linux", "linux/", "darwin/arm64", "linux/arm", "linux/arm/v8", "linux/arm64/v8", "linux/amd64/v3", "linux/arm/v7/x"} {
		if p, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", bad, p)
		}
	}
	if g := (Platform{OS: "linux", Arch: "arm", Variant: "v7"}).GOARM(); g != "7" {
		t.Errorf("GOARM of arm/v7 = %q", g)
	}
	if g := (Platform{OS: "linux", Arch: "amd64"}).GOARM(); g != "" {
		t.Errorf("GOARM of amd64 = %q", g)
	}
}
