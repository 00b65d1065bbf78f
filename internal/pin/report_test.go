package pin

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestReportRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		r    Report
		want string
		ok   bool
	}{
		{name: "all done", r: Report{}, want: `{}`, ok: true},
		{name: "absent images are not failures", r: Report{Absent: []string{"docker.io/library/nginx:1.27"}},
			want: `{"absent":["docker.io/library/nginx:1.27"]}`, ok: true},
		{name: "a failure", r: Report{Failed: map[string]string{"quay.io/x:1": "rpc error: code = Internal"}},
			want: `{"failed":{"quay.io/x:1":"rpc error: code = Internal"}}`},
		{name: "no containerd API on the socket", r: Report{Unsupported: "unknown service containerd.services.images.v1.Images"},
			want: `{"unsupported":"unknown service containerd.services.images.v1.Images"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			line := tc.r.Encode()
			g.Expect(line).To(Equal(tc.want))
			g.Expect(tc.r.OK()).To(Equal(tc.ok))
			back, err := ParseReport(line + "\n")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(tc.r))
		})
	}
}

func TestReportBounded(t *testing.T) {
	long := strings.Repeat("é", 1000) // two bytes a rune: cuts must fall between runes
	tests := []struct {
		name       string
		absent     int
		failed     int
		allFailed  bool // every failure kept
		someAbsent bool // some absent entries kept
	}{
		{name: "fits", absent: 3, failed: 3, allFailed: true, someAbsent: true},
		{name: "absent entries go first", absent: 100, failed: 3, allFailed: true, someAbsent: true},
		{name: "then failures", absent: 10, failed: 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := Report{Failed: map[string]string{}}
			for i := range tc.absent {
				r.Absent = append(r.Absent, fmt.Sprintf("registry.example.com/team/absent-image-%03d:v1.2.3", i))
			}
			for i := range tc.failed {
				r.Failed[fmt.Sprintf("registry.example.com/team/failed-%03d:v1", i)] = long
			}
			line := r.Encode()
			g.Expect(len(line)).To(BeNumerically("<=", MaxReportBytes))
			g.Expect(json.Valid([]byte(line))).To(BeTrue())
			g.Expect(line).NotTo(ContainSubstring(`\ufffd`))
			back, err := ParseReport(line)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(len(back.Failed) == tc.failed).To(Equal(tc.allFailed))
			g.Expect(len(back.Absent) > 0).To(Equal(tc.someAbsent))
			g.Expect(back.Dropped).To(Equal(tc.absent + tc.failed - len(back.Absent) - len(back.Failed)))
			g.Expect(back.Dropped > 0).To(Equal(tc.name != "fits"))
			g.Expect(back.OK()).To(BeFalse())
			g.Expect(r.Failed).To(HaveLen(tc.failed), "Encode must not change the report")
		})
	}
}

func TestParseReport(t *testing.T) {
	tests := []struct {
		name    string
		msg     string
		want    Report
		wantErr string
	}{
		{name: "one line", msg: `{"absent":["a"]}`, want: Report{Absent: []string{"a"}}},
		{name: "the last line is the report", msg: "pinned 2 images\n{\"failed\":{\"b\":\"x\"}}\n", want: Report{Failed: map[string]string{"b": "x"}}},
		{name: "fields a later helper adds are ignored", msg: `{"absent":["a"],"later":1}`, want: Report{Absent: []string{"a"}}},
		{name: "empty message: no report, not all done", msg: " \n", wantErr: "no report"},
		{name: "a log tail, not a report", msg: "panic: runtime error", wantErr: "not readable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := ParseReport(tc.msg)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r).To(Equal(tc.want))
		})
	}
}
