// Package images parses and compares container image references. Comparing
// normalised references, not substrings, is what keeps "nginx" and
// "docker.io/library/nginx:latest" the same image and "nginx:1.2" apart from
// "mynginx:1.2" (the original matched substrings, #121).
package images

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/distribution/reference"
)

// Ref is a parsed image reference in its fully qualified form.
type Ref struct {
	// Name is the repository with its registry, e.g. docker.io/library/nginx.
	Name string
	// Tag is the tag; "latest" when the reference names neither tag nor digest.
	Tag string
	// Digest is the content digest, when the reference pins one.
	Digest string
	// Tagged says whether the reference named a tag itself (latest implied or not).
	Tagged bool
}

// Parse validates s against the distribution reference grammar and returns
// it normalised. The error says what is wrong in words a user can act on.
func Parse(s string) (Ref, error) {
	if s == "" {
		return Ref{}, fmt.Errorf("image reference is empty")
	}
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return Ref{}, fmt.Errorf("%q is not a valid image reference: %v", s, err)
	}
	if err := checkPort(reference.Domain(named)); err != nil {
		return Ref{}, fmt.Errorf("%q is not a valid image reference: %v", s, err)
	}
	r := Ref{Name: named.Name()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
		r.Tagged = true
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	if r.Tag == "" && r.Digest == "" {
		r.Tag = "latest"
	}
	return r, nil
}

// checkPort refuses a registry port outside 1-65535: the reference grammar
// takes any digits, and such a reference would only fail at pull time, on
// every node, as an unreachable registry.
func checkPort(domain string) error {
	host := domain
	if i := strings.LastIndex(domain, "]"); i >= 0 {
		host = domain[i+1:] // [ipv6]:port
	}
	i := strings.LastIndex(host, ":")
	if i < 0 {
		return nil
	}
	digits := host[i+1:]
	port, err := strconv.Atoi(digits)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("registry port %s is out of range 1-65535", digits)
	}
	return nil
}

// String is the canonical form: name, then :tag and/or @digest.
func (r Ref) String() string {
	s := r.Name
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// Normalize returns the canonical form of s, e.g. nginx -> docker.io/library/nginx:latest.
func Normalize(s string) (string, error) {
	r, err := Parse(s)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// Floating says whether the reference may point at new content on every pull:
// no digest and a tag that is absent or "latest". Such images are always pulled.
func (r Ref) Floating() bool {
	return r.Digest == "" && r.Tag == "latest"
}

// Same says whether two references name the same image content.
func (r Ref) Same(o Ref) bool {
	if r.Name != o.Name {
		return false
	}
	if r.Digest != "" || o.Digest != "" {
		return r.Digest == o.Digest
	}
	return r.Tag == o.Tag
}
