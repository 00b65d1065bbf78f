package jobs

import "testing"

func TestKeptReport(t *testing.T) {
	reason, msg, ok := ParseKept(KeptReport("InUse", `image "a" is used: kept`) + "\n")
	if !ok || reason != "InUse" || msg != `image "a" is used: kept` {
		t.Errorf("round trip: %q %q %v", reason, msg, ok)
	}
	for _, other := range []string{"", "image a removed", `{"message":"no reason"}`, "{not json", `{"kept":""}`} {
		if _, _, ok := ParseKept(other); ok {
			t.Errorf("%q read as a kept report", other)
		}
	}
}
