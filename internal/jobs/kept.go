package jobs

import (
	"encoding/json"
	"strings"
)

// keptReport is what a delete Job's helper writes to its termination log
// when it leaves the image on the node (internal/cri): the controller reads
// it back (results.Deleted) into status.kept. A removal, or an image
// already gone, writes plain text, as a failure does.
type keptReport struct {
	Kept    string `json:"kept"`
	Message string `json:"message"`
}

// KeptReport is the termination message of a delete that kept its image
// for reason (v1alpha2.KeptReason*).
func KeptReport(reason, message string) string {
	b, _ := json.Marshal(keptReport{Kept: reason, Message: message})
	return string(b)
}

// ParseKept reads a KeptReport back; ok is false for any other message.
func ParseKept(msg string) (reason, message string, ok bool) {
	msg = strings.TrimSpace(msg)
	if !strings.HasPrefix(msg, "{") {
		return "", "", false
	}
	var r keptReport
	if err := json.Unmarshal([]byte(msg), &r); err != nil || r.Kept == "" {
		return "", "", false
	}
	return r.Kept, r.Message, true
}
