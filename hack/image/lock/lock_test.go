package lock

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// Index is an index of random images, one for each of platforms.
func Index(t *testing.T, platforms ...v1.Platform) v1.ImageIndex {
	t.Helper()
	idx := v1.ImageIndex(empty.Index)
	for _, p := range platforms {
		img, err := random.Image(64, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx
}

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	armv7 = v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}
)

func TestRoundTrip(t *testing.T) {
	idx := Index(t, amd64, armv7)
	l, err := FromIndex("sha256:k", idx)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "digest.lock")
	if err := Write(file, l); err != nil {
		t.Fatal(err)
	}
	got, err := Read(file)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := idx.Digest()
	if got.Key != "sha256:k" || got.Digest != d.String() || !bytes.Equal(got.Index, l.Index) || len(got.Manifests) != 2 {
		t.Errorf("read back %+v, wrote %+v", got, l)
	}
	if err := got.Matches(idx); err != nil {
		t.Errorf("the index recorded does not match itself: %v", err)
	}
	if missing, err := Read(filepath.Join(t.TempDir(), "none")); err != nil || missing.Key != "" {
		t.Errorf("a missing lock: %+v, %v; want the zero lock", missing, err)
	}
}

// A lock that does not hold together is refused, and an index built
// otherwise for one platform does not match.
func TestRefused(t *testing.T) {
	l, err := FromIndex("sha256:k", Index(t, amd64, armv7))
	if err != nil {
		t.Fatal(err)
	}
	other, err := FromIndex("sha256:k", Index(t, amd64))
	if err != nil {
		t.Fatal(err)
	}
	for name, broken := range map[string]Lock{
		"another digest":     {Key: l.Key, Digest: other.Digest, Index: l.Index, Manifests: l.Manifests},
		"a manifest missing": {Key: l.Key, Digest: l.Digest, Index: l.Index, Manifests: map[string][]byte{"linux/amd64": l.Manifests["linux/amd64"]}},
		"another manifest":   {Key: l.Key, Digest: l.Digest, Index: l.Index, Manifests: map[string][]byte{"linux/amd64": other.Manifests["linux/amd64"], "linux/arm/v7": l.Manifests["linux/arm/v7"]}},
		"no key":             {Digest: l.Digest, Index: l.Index, Manifests: l.Manifests},
	} {
		if err := broken.Check(); err == nil {
			t.Errorf("%s: passed the check", name)
		}
		if err := Write(filepath.Join(t.TempDir(), "lock"), broken); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	err = l.Matches(Index(t, amd64))
	if err == nil || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("another amd64 image matched the lock: %v", err)
	}
	if err := l.Matches(Index(t, v1.Platform{OS: "linux", Architecture: "riscv64"})); err == nil {
		t.Error("a platform the lock lacks matched it")
	}
}
