package jobs

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestCanPin(t *testing.T) {
	tests := []struct {
		runtime string
		want    bool
	}{
		{"containerd://1.7.0", true},
		{"containerd://1.7.22", true},
		{"containerd://v1.7.2", true},
		{"containerd://2.0.0", true},
		{"containerd://1.7.7-k3s1", true},
		{"containerd://1.6.31", false},
		{"containerd://1.10.0", true},
		{"containerd://", false},
		{"containerd://dev", false},
		{"cri-o://1.30.0", false},
		{"docker://24.0.7", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.runtime, func(t *testing.T) {
			NewWithT(t).Expect(CanPin(tt.runtime)).To(Equal(tt.want))
		})
	}
}
