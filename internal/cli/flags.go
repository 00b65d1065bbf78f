// Package cli parses subcommand flags strictly: an unknown flag or a bad value
// stops the program with one line that names the flag and what it accepts,
// instead of falling back to a default as the original did.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// NewFlagSet returns a flag set that reports errors to the caller only.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// Parse parses args and turns the flag package's errors into one line.
// Positional arguments are refused: no subcommand takes any.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		// The flag package names flags with one dash; our docs use two.
		msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), " -", " --")
		return errors.New(msg)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: this command takes flags only", fs.Arg(0))
	}
	return nil
}

// Usage renders the flags of fs for --help.
func Usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// Enum is a flag value restricted to a fixed set of words, matched without
// regard to case and stored in the case of the allowed word.
type Enum struct {
	Allowed []string
	Value   string
}

// NewEnum returns an Enum holding def.
func NewEnum(def string, allowed ...string) *Enum { return &Enum{Allowed: allowed, Value: def} }

func (e *Enum) String() string { return e.Value }

// Set accepts one of the allowed words.
func (e *Enum) Set(s string) error {
	for _, a := range e.Allowed {
		if strings.EqualFold(a, strings.TrimSpace(s)) {
			e.Value = a
			return nil
		}
	}
	return fmt.Errorf("%q is not allowed: use one of %s", s, strings.Join(e.Allowed, ", "))
}

// Choice binds a flag to a typed setting, *p, whose words parse reads (and
// refuses with its own message); the setting's String gives them back. The
// setting keeps its own type from the flag to where it is read, and its zero
// value is the flag's default.
func Choice[T fmt.Stringer](p *T, parse func(string) (T, error)) flag.Value {
	return &choice[T]{p: p, parse: parse}
}

type choice[T fmt.Stringer] struct {
	p     *T
	parse func(string) (T, error)
}

// String is "" for a choice bound to nothing: --help prints "(default X)"
// only when the zero flag value it builds to compare with prints otherwise,
// and the zero value of a setting prints its default.
func (c *choice[T]) String() string {
	if c.p == nil {
		return ""
	}
	return (*c.p).String()
}

func (c *choice[T]) Set(s string) error {
	v, err := c.parse(s)
	if err != nil {
		return err
	}
	*c.p = v
	return nil
}

// Duration is a time.Duration flag that refuses negative values and, when
// Min is set, values below it (zero stays allowed when ZeroOK is true).
type Duration struct {
	Value  time.Duration
	Min    time.Duration
	ZeroOK bool
}

func (d *Duration) String() string { return d.Value.String() }

// Set parses a Go duration such as 90s, 5m or 1h30m.
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: use a number with a unit, e.g. 30s, 5m, 1h", s)
	}
	if v < 0 {
		return fmt.Errorf("%q is negative: use a duration of 0s or more", s)
	}
	if v == 0 && d.ZeroOK {
		d.Value = v
		return nil
	}
	if v < d.Min {
		if d.ZeroOK {
			return fmt.Errorf("%q is too short: use 0s (off) or at least %s", s, d.Min)
		}
		return fmt.Errorf("%q is too short: use at least %s", s, d.Min)
	}
	d.Value = v
	return nil
}

// PositiveInt is an int flag that refuses values below Min.
type PositiveInt struct {
	Value int
	Min   int
}

func (p *PositiveInt) String() string { return fmt.Sprint(p.Value) }

// Set parses a whole number not below Min.
func (p *PositiveInt) Set(s string) error {
	var v int
	if _, err := fmt.Sscan(s, &v); err != nil || fmt.Sprint(v) != strings.TrimSpace(s) {
		return fmt.Errorf("%q is not a whole number", s)
	}
	if v < p.Min {
		return fmt.Errorf("%d is too small: use %d or more", v, p.Min)
	}
	p.Value = v
	return nil
}

// Quantity is a resource quantity flag (100m, 0.5, 128Mi), as Kubernetes
// writes them; empty leaves Value nil, which means "the default".
type Quantity struct {
	Value *resource.Quantity
}

func (q *Quantity) String() string {
	if q == nil || q.Value == nil {
		return ""
	}
	return q.Value.String()
}

// Set parses a quantity, or empty for none.
func (q *Quantity) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		q.Value = nil
		return nil
	}
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a resource quantity: use e.g. 100m or 0.5 for CPU, 128Mi or 1Gi for memory", s)
	}
	q.Value = &v
	return nil
}

// Strings is a flag that may be given many times, each time adding one
// value; an empty value is refused, as it would name nothing.
type Strings []string

func (s *Strings) String() string { return strings.Join(*s, ",") }

// Set adds one value.
func (s *Strings) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("empty value: give one value per flag")
	}
	*s = append(*s, v)
	return nil
}
