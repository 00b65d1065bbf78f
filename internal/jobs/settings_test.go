package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestRetention(t *testing.T) {
	var zero Retention
	NewWithT(t).Expect(zero).To(Equal(RetainNone), "the zero value is the flag's default, delete")
	cases := []struct {
		in      string
		want    Retention
		wantErr string
	}{
		{in: "delete", want: RetainNone},
		{in: "retain", want: Retain},
		{in: "RETAIN", want: Retain},
		{in: " Delete ", want: RetainNone},
		{in: "keep", wantErr: `"keep" is not allowed: use one of delete, retain`},
		{in: "", wantErr: `"" is not allowed: use one of delete, retain`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseRetention(c.in)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(c.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestRetentionString(t *testing.T) {
	cases := []struct {
		in   Retention
		want string
	}{
		{in: RetainNone, want: "delete"},
		{in: Retain, want: "retain"},
		{in: Retention(7), want: "Retention(7)"},
		{in: Retention(-1), want: "Retention(-1)"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(c.in.String()).To(Equal(c.want))
			if back, err := ParseRetention(c.in.String()); err == nil {
				g.Expect(back).To(Equal(c.in), "String and Parse round-trip")
			}
		})
	}
}

func TestGranularity(t *testing.T) {
	var zero Granularity
	NewWithT(t).Expect(zero).To(Equal(PerNode), "the zero value is the flag's default, node")
	cases := []struct {
		in      string
		want    Granularity
		wantErr string
	}{
		{in: "node", want: PerNode},
		{in: "image", want: PerImage},
		{in: "Image", want: PerImage},
		{in: " NODE", want: PerNode},
		{in: "pod", wantErr: `"pod" is not allowed: use one of node, image`},
		{in: "", wantErr: `"" is not allowed: use one of node, image`},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseGranularity(c.in)
			if c.wantErr != "" {
				g.Expect(err).To(MatchError(c.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
		})
	}
}

func TestGranularityString(t *testing.T) {
	cases := []struct {
		in   Granularity
		want string
	}{
		{in: PerNode, want: "node"},
		{in: PerImage, want: "image"},
		{in: Granularity(2), want: "Granularity(2)"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(c.in.String()).To(Equal(c.want))
			if back, err := ParseGranularity(c.in.String()); err == nil {
				g.Expect(back).To(Equal(c.in), "String and Parse round-trip")
			}
		})
	}
}
