package jobs

import (
	"strconv"
	"strings"
)

// CanPin says whether a node's runtime (status.nodeInfo.containerRuntimeVersion)
// can pin: containerd 1.7 or newer, whose CRI reports an image labelled
// io.cri-containerd.pinned=pinned as pinned, so that the kubelet's image
// garbage collection keeps it. Older containerd ignores the label, CRI-O pins
// only from its configuration, cri-dockerd only with its own flags: a pin
// Job there would succeed and protect nothing, so none is made.
func CanPin(runtime string) bool {
	version, ok := strings.CutPrefix(runtime, "containerd://")
	if !ok {
		return false
	}
	version = strings.TrimPrefix(version, "v")
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	// A minor version may carry a distribution's suffix (7-k3s1): the
	// number is what comes first.
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	minor, err := strconv.Atoi(leadingDigits(parts[1]))
	if err != nil {
		return false
	}
	return major > 1 || (major == 1 && minor >= 7)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}
