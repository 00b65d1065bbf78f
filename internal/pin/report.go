package pin

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxReportBytes bounds the report: the kubelet keeps at most 4096 bytes of a
// container's termination message, and a cut JSON line would be unreadable.
const MaxReportBytes = 4096

// maxFailureBytes bounds one failure's message, so that one long runtime
// error cannot crowd every other image out of the report.
const maxFailureBytes = 256

// Report is what a pin or unpin helper hands back, one JSON line in its
// termination log. Every image it was given that is neither Absent nor Failed
// is pinned (or unpinned), unless Unsupported is set: then nothing was done.
type Report struct {
	// Absent lists the images the runtime does not have.
	Absent []string `json:"absent,omitempty"`
	// Failed maps an image to why it could not be pinned or unpinned.
	Failed map[string]string `json:"failed,omitempty"`
	// Unsupported says why the runtime cannot pin at all (no containerd
	// images API on the socket).
	Unsupported string `json:"unsupported,omitempty"`
	// Dropped counts the Absent and Failed entries left out to keep the
	// report within MaxReportBytes: the images they named are in an unknown
	// state, not done.
	Dropped int `json:"dropped,omitempty"`
}

// OK says whether the helper did all it was asked: its exit code is 0 then.
func (r Report) OK() bool {
	return len(r.Failed) == 0 && r.Unsupported == "" && r.Dropped == 0
}

// Encode returns the report as one JSON line of at most MaxReportBytes,
// dropping Absent entries first (the least to lose), then Failed ones.
func (r Report) Encode() string {
	r = r.boundMessages()
	for {
		b, err := json.Marshal(r)
		if err != nil {
			// Only strings, a map of strings and an int: cannot happen.
			panic(err)
		}
		if len(b) <= MaxReportBytes || !r.dropOne() {
			return string(b)
		}
	}
}

func (r Report) boundMessages() Report {
	out := r
	out.Absent = append([]string(nil), r.Absent...)
	out.Unsupported = cut(r.Unsupported, maxFailureBytes)
	if r.Failed != nil {
		out.Failed = make(map[string]string, len(r.Failed))
		for k, v := range r.Failed {
			out.Failed[k] = cut(v, maxFailureBytes)
		}
	}
	return out
}

// dropOne removes one entry, the last Absent one, else the failure of the
// greatest image name (so the result does not depend on map order).
func (r *Report) dropOne() bool {
	if n := len(r.Absent); n > 0 {
		r.Absent = r.Absent[:n-1]
		r.Dropped++
		return true
	}
	if len(r.Failed) == 0 {
		return false
	}
	keys := make([]string, 0, len(r.Failed))
	for k := range r.Failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	delete(r.Failed, keys[len(keys)-1])
	r.Dropped++
	return true
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary: JSON encodes a broken rune as U+FFFD, which
	// only makes the line longer than counted.
	s = s[:n]
	for i := 1; i < utf8.UTFMax && !utf8.ValidString(s); i++ {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// ParseReport reads a helper's termination message. The last non-empty line
// is the report: a container whose termination log is empty may have its
// log's tail there instead, and that is not a report. An empty or unreadable
// message is an error, never an empty report, which would mean "all done".
func ParseReport(msg string) (Report, error) {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return Report{}, fmt.Errorf("the helper left no report")
	}
	var r Report
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return Report{}, fmt.Errorf("the helper's report %q is not readable: %v", cut(last, 200), err)
	}
	return r, nil
}
