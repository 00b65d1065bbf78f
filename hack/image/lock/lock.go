// Package lock reads and writes hack/image/digest.lock: the digest of the
// image index `make image` builds from a tree, the key of the inputs it was
// built from, and the index's manifest and each platform's, as built.
//
// The bundle pins the index by digest, and `make verify` must know that the
// pin is what the tree builds. Learning it by building means a cross-compile
// for every platform, some twenty minutes of a new 2-core machine, for a
// digest that follows from the inputs alone (the build is reproducible). So
// `make bundle` records it here with the key, and later runs whose key is
// the same take it from here. The manifests let a test that builds only its
// own machine's platform check that one against the record, and serve the
// whole index by the recorded digest (the other platforms' manifests
// without their layers), as the registry a node pulls from needs.
package lock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// File is the lock file's path from the repository root.
const File = "hack/image/digest.lock"

const header = "# The digest of the image index this tree builds (every platform), the key of the inputs it\n" +
	"# was built from, and its manifests as built: written by `make bundle` (go run ./hack/image\n" +
	"# digest), never by hand. `make verify` takes the digest from here while the key matches.\n"

// Lock is what the file records. The zero Lock is a file that is not there.
type Lock struct {
	Key    string
	Digest string
	// Index is the index's manifest, and Manifests each platform's (by
	// platform, as internal/platform names them), byte for byte.
	Index     []byte
	Manifests map[string][]byte
}

// Read reads file; a missing file is the zero Lock.
func Read(file string) (Lock, error) {
	l := Lock{Manifests: map[string][]byte{}}
	raw, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	} else if err != nil {
		return l, err
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		field, value, _ := strings.Cut(line, " ")
		switch field {
		case "key":
			l.Key = value
		case "digest":
			l.Digest = value
		case "index":
			l.Index = []byte(value)
		case "manifest":
			platform, m, ok := strings.Cut(value, " ")
			if !ok {
				return Lock{}, fmt.Errorf("%s: a manifest line without a platform", file)
			}
			l.Manifests[platform] = []byte(m)
		default:
			return Lock{}, fmt.Errorf("%s: unknown line %q", file, line)
		}
	}
	if err := sc.Err(); err != nil {
		return Lock{}, fmt.Errorf("%s: %w", file, err)
	}
	if l.Key == "" && l.Digest == "" && l.Index == nil && len(l.Manifests) == 0 {
		return l, nil
	}
	if err := l.Check(); err != nil {
		return Lock{}, fmt.Errorf("%s: %w", file, err)
	}
	return l, nil
}

// Write writes l to file.
func Write(file string, l Lock) error {
	if err := l.Check(); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "key %s\ndigest %s\nindex %s\n", l.Key, l.Digest, l.Index)
	for _, p := range slices.Sorted(maps.Keys(l.Manifests)) {
		fmt.Fprintf(&b, "manifest %s %s\n", p, l.Manifests[p])
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// Check holds the record together: the digest is the index's, and the
// index names exactly the recorded manifests, each by its digest and size.
func (l Lock) Check() error {
	if l.Key == "" || l.Digest == "" || len(l.Index) == 0 {
		return errors.New("want a key, a digest and an index")
	}
	if d, err := digestOf(l.Index); err != nil || d.String() != l.Digest {
		return fmt.Errorf("the index recorded is %v, not the digest recorded %s", d, l.Digest)
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(l.Index))
	if err != nil {
		return fmt.Errorf("the index recorded: %w", err)
	}
	if len(im.Manifests) != len(l.Manifests) {
		return fmt.Errorf("the index names %d manifests, %d are recorded", len(im.Manifests), len(l.Manifests))
	}
	for _, desc := range im.Manifests {
		p, raw, err := l.manifestFor(desc)
		if err != nil {
			return err
		}
		if d, _ := digestOf(raw); d != desc.Digest || int64(len(raw)) != desc.Size {
			return fmt.Errorf("the manifest recorded for %s is not the one the index names (%s)", p, desc.Digest)
		}
	}
	return nil
}

// manifestFor is the platform an index entry is for and the manifest the
// lock records for that platform.
func (l Lock) manifestFor(desc v1.Descriptor) (string, []byte, error) {
	if desc.Platform == nil {
		return "", nil, fmt.Errorf("the index names %s without a platform", desc.Digest)
	}
	p := desc.Platform.String()
	raw, ok := l.Manifests[p]
	if !ok {
		return p, nil, fmt.Errorf("the lock records no manifest for %s", p)
	}
	return p, raw, nil
}

func digestOf(raw []byte) (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(raw))
	return h, err
}

// FromIndex records idx, as built, for key.
func FromIndex(key string, idx v1.ImageIndex) (Lock, error) {
	l := Lock{Key: key, Manifests: map[string][]byte{}}
	d, err := idx.Digest()
	if err != nil {
		return l, err
	}
	l.Digest = d.String()
	if l.Index, err = idx.RawManifest(); err != nil {
		return l, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return l, err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return l, err
		}
		if desc.Platform == nil {
			return l, fmt.Errorf("the index names %s without a platform", desc.Digest)
		}
		if l.Manifests[desc.Platform.String()], err = img.RawManifest(); err != nil {
			return l, err
		}
	}
	return l, l.Check()
}

// Matches reports whether idx, built for some of the platforms, has for
// each the manifest the lock records: an error names the first that does
// not.
func (l Lock) Matches(idx v1.ImageIndex) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		p, raw, err := l.manifestFor(desc)
		if err != nil {
			return err
		}
		if d, _ := digestOf(raw); d != desc.Digest {
			return fmt.Errorf("%s: built %s, the lock records %s", p, desc.Digest, d)
		}
	}
	return nil
}
