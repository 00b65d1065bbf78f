package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
		check   func(g Gomega, e *Enum, d *Duration, n *PositiveInt)
	}{
		{name: "defaults", args: nil, check: func(g Gomega, e *Enum, d *Duration, n *PositiveInt) {
			g.Expect(e.Value).To(Equal("delete"))
			g.Expect(d.Value).To(Equal(5 * time.Minute))
		}},
		{name: "enum any case", args: []string{"--policy=RETAIN"}, check: func(g Gomega, e *Enum, _ *Duration, _ *PositiveInt) {
			g.Expect(e.Value).To(Equal("retain"))
		}},
		{name: "enum bad", args: []string{"--policy=keep"}, wantErr: `invalid value "keep" for flag --policy: "keep" is not allowed: use one of delete, retain`},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: --nope"},
		{name: "positional", args: []string{"extra"}, wantErr: `unexpected argument "extra"`},
		{name: "duration bad", args: []string{"--deadline=5"}, wantErr: "is not a duration"},
		{name: "duration negative", args: []string{"--deadline=-1s"}, wantErr: "is negative"},
		{name: "duration short", args: []string{"--deadline=1ms"}, wantErr: "too short: use at least 1s"},
		{name: "int small", args: []string{"--n=0"}, wantErr: "use 1 or more"},
		{name: "int junk", args: []string{"--n=1x"}, wantErr: "not a whole number"},
		{name: "int ok", args: []string{"--n=7"}, check: func(g Gomega, _ *Enum, _ *Duration, n *PositiveInt) { g.Expect(n.Value).To(Equal(7)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			fs := NewFlagSet("test")
			e := NewEnum("delete", "delete", "retain")
			d := &Duration{Value: 5 * time.Minute, Min: time.Second}
			n := &PositiveInt{Value: 1, Min: 1}
			fs.Var(e, "policy", "")
			fs.Var(d, "deadline", "")
			fs.Var(n, "n", "")
			err := Parse(fs, c.args)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			c.check(g, e, d, n)
		})
	}
}

func TestQuantity(t *testing.T) {
	g := NewWithT(t)
	var q Quantity
	fs := NewFlagSet("test")
	fs.Var(&q, "cpu", "")
	g.Expect(Parse(fs, []string{"--cpu=250m"})).To(Succeed())
	g.Expect(q.String()).To(Equal("250m"))
	g.Expect(Parse(fs, []string{"--cpu="})).To(Succeed())
	g.Expect(q.Value).To(BeNil())
	g.Expect(Parse(fs, []string{"--cpu=lots"})).To(MatchError(`invalid value "lots" for flag --cpu: "lots" is not a resource quantity: use e.g. 100m or 0.5 for CPU, 128Mi or 1Gi for memory`))
}

// shade is a typed setting whose zero value, dark, is its default.
type shade int

func (s shade) String() string { return [...]string{"dark", "light"}[s] }

func parseShade(s string) (shade, error) {
	switch s {
	case "dark":
		return 0, nil
	case "light":
		return 1, nil
	}
	return 0, fmt.Errorf("%q is not allowed: use one of dark, light", s)
}

func TestChoice(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    shade
		wantErr string
	}{
		{name: "default", want: 0},
		{name: "set", args: []string{"--shade=light"}, want: 1},
		{name: "bad", args: []string{"--shade=grey"}, wantErr: `invalid value "grey" for flag --shade: "grey" is not allowed: use one of dark, light`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			var s shade
			fs := NewFlagSet("test")
			fs.Var(Choice(&s, parseShade), "shade", "how it looks")
			err := Parse(fs, c.args)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(c.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s).To(Equal(c.want))
		})
	}
}

// TestChoiceUsage: --help names the default, the zero value's word.
func TestChoiceUsage(t *testing.T) {
	var s shade
	fs := NewFlagSet("test")
	fs.Var(Choice(&s, parseShade), "shade", "how it looks")
	var b strings.Builder
	Usage(fs, &b)
	NewWithT(t).Expect(b.String()).To(ContainSubstring("how it looks (default dark)"))
}

func TestStrings(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    Strings
		wantErr string
	}{
		{name: "none", args: nil},
		{name: "each flag adds one, in order", args: []string{"--image=b", "--image", "a"}, want: Strings{"b", "a"}},
		{name: "empty refused", args: []string{"--image="}, wantErr: `invalid value "" for flag --image: empty value`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			fs := NewFlagSet("test")
			var s Strings
			fs.Var(&s, "image", "")
			err := Parse(fs, c.args)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s).To(Equal(c.want))
		})
	}
}
