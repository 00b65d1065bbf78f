package jobs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// AnnotationUIDRange is where OpenShift writes the block of UIDs it gave a
// namespace. Its restricted-v2 SCC admits a pod only if the pod runs as one
// of them, so a fixed UID chosen without reading it gets no pod there.
const AnnotationUIDRange = "openshift.io/sa.scc.uid-range"

// DefaultPullUser is what pull containers run as where no UID range is
// given: the image being cached may well say USER root, and runAsNonRoot
// alone would then keep it from starting, so a UID must be named. 65534 is
// nobody, which owns nothing on any usual image.
const DefaultPullUser int64 = 65534

// UIDRange is a namespace's block of UIDs, both ends included.
type UIDRange struct {
	First, Last int64
}

// Contains says whether uid lies in the range.
func (r UIDRange) Contains(uid int64) bool { return uid >= r.First && uid <= r.Last }

// String is the range as OpenShift's messages put it.
func (r UIDRange) String() string { return fmt.Sprintf("[%d, %d]", r.First, r.Last) }

// ParseUIDRange reads the annotation's value in either of the two forms
// OpenShift accepts, "<first>/<size>" (what it writes) and "<first>-<last>".
// It is stricter than OpenShift's own reading, which lets trailing text
// pass: a value we misread would put every pull in the wrong UID, and a
// clear error is worth more than a guess. UID 0 is refused because pulls
// never run as root, and UIDs above 2^31-1 because the API server refuses
// them in runAsUser.
func ParseUIDRange(s string) (UIDRange, error) {
	bad := func(why string) (UIDRange, error) {
		return UIDRange{}, fmt.Errorf("annotation %s=%q: %s; want <first>/<size> or <first>-<last>, e.g. 1000680000/10000", AnnotationUIDRange, s, why)
	}
	sep := "/"
	a, b, ok := strings.Cut(s, sep)
	if !ok {
		sep = "-"
		if a, b, ok = strings.Cut(s, sep); !ok {
			return bad("no / or - in it")
		}
	}
	first, err := uid(a)
	if err != nil {
		return bad("first UID: " + err.Error())
	}
	n, err := uid(b)
	if err != nil {
		return bad("second number: " + err.Error())
	}
	r := UIDRange{First: first, Last: n}
	if sep == "/" {
		if n == 0 {
			return bad("the size is 0")
		}
		r.Last = first + n - 1
	}
	switch {
	case first == 0:
		return bad("it starts at UID 0, root")
	case r.Last < r.First:
		return bad("it ends before it starts")
	case r.Last > math.MaxInt32:
		return bad(fmt.Sprintf("it ends at %d, past the largest UID a pod may name (%d)", r.Last, math.MaxInt32))
	}
	return r, nil
}

// uid reads a plain decimal number: no sign, no spaces, no base prefix,
// each of which strconv would let through in some form.
func uid(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt32 {
		return 0, fmt.Errorf("%s is past the largest UID a pod may name (%d)", s, math.MaxInt32)
	}
	return n, nil
}

// PullUser is the UID a namespace's pull containers run as: the first of
// its OpenShift range when it has one, which restricted-v2 admits as it
// would a UID it picked itself and which stays the same from Job to Job,
// else DefaultPullUser. A value it cannot read gives DefaultPullUser and
// the reason, for the caller to report: the pulls then run as they would
// anywhere else, and are refused only where the range was meant to apply.
func PullUser(annotations map[string]string) (int64, error) {
	v, ok := annotations[AnnotationUIDRange]
	if !ok {
		return DefaultPullUser, nil
	}
	r, err := ParseUIDRange(v)
	if err != nil {
		return DefaultPullUser, err
	}
	return r.First, nil
}
